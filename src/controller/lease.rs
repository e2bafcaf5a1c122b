//! Leader election on a coordination.k8s.io/v1 Lease, so that two replicas
//! never reconcile at once. The decision of whether to take the lease is
//! [`decide`], a pure function; only reading and writing the Lease is async.
//!
//! Every write carries the resourceVersion it read (a replace, not a patch),
//! so two candidates that both see an expired lease cannot both win: the
//! API server refuses the second with 409 Conflict. A holder that cannot
//! renew within the lease duration stops leading (the process exits and is
//! restarted), since another replica may then take over.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta, PostParams};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (the Pod name in a cluster).
    pub identity: String,
    pub duration: Duration,
    pub renew_every: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("lease {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("lost the lease {0}: another replica may be reconciling")]
    Lost(String),
}

/// What to do with the lease as read.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Ours: renew it.
    Renew,
    /// Free or expired: take it over.
    Acquire,
    /// Another replica holds it until it expires.
    Wait,
}

/// Whether this replica may take or keep the lease at `now`.
pub fn decide(spec: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder == identity {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::Acquire;
    }
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    match &spec.renew_time {
        Some(MicroTime(renewed)) if *renewed + SignedDuration::from_secs(duration) > now => {
            Decision::Wait
        }
        _ => Decision::Acquire,
    }
}

fn spec_for(cfg: &LeaseConfig, previous: Option<&LeaseSpec>, now: Timestamp) -> LeaseSpec {
    let ours = previous.and_then(|p| p.holder_identity.as_deref()) == Some(cfg.identity.as_str());
    let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(cfg.duration.as_secs() as i32),
        acquire_time: if ours {
            previous.and_then(|p| p.acquire_time.clone())
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if ours { transitions } else { transitions + 1 }),
        ..LeaseSpec::default()
    }
}

pub struct Elector {
    api: Api<Lease>,
    cfg: LeaseConfig,
}

impl Elector {
    pub fn new(client: kube::Client, cfg: LeaseConfig) -> Self {
        Elector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
        }
    }

    fn err(&self, source: kube::Error) -> LeaseError {
        LeaseError::Api {
            namespace: self.cfg.namespace.clone(),
            name: self.cfg.name.clone(),
            source,
        }
    }

    /// One round: read the lease and take or renew it if allowed. Returns
    /// whether this replica holds it now. A 409 means another replica wrote
    /// first: not ours this round.
    pub async fn try_hold(&self) -> Result<bool, LeaseError> {
        let now = Timestamp::now();
        let current = self
            .api
            .get_opt(&self.cfg.name)
            .await
            .map_err(|e| self.err(e))?;
        let spec = current.as_ref().and_then(|l| l.spec.as_ref());
        if decide(spec, &self.cfg.identity, now) == Decision::Wait {
            return Ok(false);
        }
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.cfg.name.clone()),
                namespace: Some(self.cfg.namespace.clone()),
                resource_version: current
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec_for(&self.cfg, spec, now)),
        };
        let pp = PostParams::default();
        let written = match current {
            None => self.api.create(&pp, &lease).await,
            Some(_) => self.api.replace(&self.cfg.name, &pp, &lease).await,
        };
        match written {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Waits until this replica holds the lease.
    pub async fn acquire(&self) -> Result<(), LeaseError> {
        loop {
            match self.try_hold().await {
                Ok(true) => {
                    tracing::info!(lease = %self.cfg.name, identity = %self.cfg.identity, "leading");
                    return Ok(());
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "lease not readable; retrying"),
            }
            tokio::time::sleep(self.cfg.renew_every).await;
        }
    }

    /// Renews the lease until a renewal fails for longer than the lease
    /// lasts; then returns the error (the caller stops reconciling).
    pub async fn keep(&self) -> LeaseError {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.cfg.renew_every).await;
            match self.try_hold().await {
                Ok(true) => last_ok = tokio::time::Instant::now(),
                Ok(false) => return LeaseError::Lost(self.cfg.name.clone()),
                Err(e) => {
                    tracing::warn!(error = %e, "lease renewal failed");
                    if last_ok.elapsed() >= self.cfg.duration {
                        return e;
                    }
                }
            }
        }
    }

    /// Gives the lease up so another replica need not wait for it to expire.
    pub async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        if let Err(e) = self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %e, "could not release the lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(by: &str, renewed: Timestamp, secs: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(by.into()),
            renew_time: Some(MicroTime(renewed)),
            lease_duration_seconds: Some(secs),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_lease_is_taken_only_when_free_ours_or_expired() {
        let now = Timestamp::now();
        let ago = |s: i64| now - SignedDuration::from_secs(s);
        assert_eq!(decide(None, "a", now), Decision::Acquire);
        assert_eq!(
            decide(Some(&held("a", ago(1), 15)), "a", now),
            Decision::Renew
        );
        assert_eq!(
            decide(Some(&held("b", ago(5), 15)), "a", now),
            Decision::Wait
        );
        assert_eq!(
            decide(Some(&held("b", ago(16), 15)), "a", now),
            Decision::Acquire
        );
        assert_eq!(
            decide(Some(&held("", ago(1), 15)), "a", now),
            Decision::Acquire
        );
        let never_renewed = LeaseSpec {
            holder_identity: Some("b".into()),
            ..LeaseSpec::default()
        };
        assert_eq!(decide(Some(&never_renewed), "a", now), Decision::Acquire);
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_does_not() {
        let now = Timestamp::now();
        let cfg = LeaseConfig {
            namespace: "ns".into(),
            name: "l".into(),
            identity: "a".into(),
            duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        };
        let mut theirs = held("b", now, 15);
        theirs.lease_transitions = Some(3);
        let taken = spec_for(&cfg, Some(&theirs), now);
        assert_eq!(taken.lease_transitions, Some(4));
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        let renewed = spec_for(&cfg, Some(&taken), now);
        assert_eq!(renewed.lease_transitions, Some(4));
        assert_eq!(renewed.acquire_time, taken.acquire_time);
    }
}
