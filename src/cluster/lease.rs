//! Leader election on a coordination.k8s.io/v1 Lease, so that two replicas
//! never reconcile at once. The decision of whether to take the lease is
//! [`decide`], a pure function; only reading and writing the Lease is async.
//!
//! Every write carries the resourceVersion it read (a replace, not a patch),
//! so two candidates that both see an expired lease cannot both win: the
//! API server refuses the second with 409 Conflict.
//!
//! A holder that cannot renew stops leading before any other replica may
//! take over: the term ends at the start of its last successful renewal
//! plus the renew deadline (the lease duration less one renewal period, a
//! margin for clocks and the time a write takes), and a renewal still in
//! flight at that moment is abandoned ([`Term`], pure). The process does
//! not exit: it campaigns again, so when the API server comes back after an
//! outage one replica leads again without a restart.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta, PostParams};
use std::time::Duration;
use tokio::time::Instant;

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
    #[error(
        "could not renew the lease {name} within {deadline:?}: another replica may take it over"
    )]
    Expired { name: String, deadline: Duration },
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
}

/// How long a term lasts after the start of its last successful renewal,
/// by this replica's clock: the lease duration less one renewal period.
/// Another replica sees the lease expire only a whole duration after the
/// renewTime written, which is later than that start.
pub fn renew_deadline(cfg: &LeaseConfig) -> Duration {
    cfg.duration
        .saturating_sub(cfg.renew_every)
        .max(cfg.renew_every.min(cfg.duration / 2))
}

/// What one renewal attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    Held,
    /// Another replica holds the lease (or wrote it first).
    Taken,
    /// No answer: the API server unreachable or the call failed.
    Failed,
}

/// Whether the replica keeps leading after a renewal attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Lead,
    /// Stop reconciling now.
    Stop,
}

/// One term of leadership: until when this replica may act as the leader.
#[derive(Debug, Clone, Copy)]
pub struct Term<T> {
    deadline: Duration,
    until: T,
}

impl<T> Term<T>
where
    T: Copy + Ord + std::ops::Add<Duration, Output = T>,
{
    /// A term won by a write that started at `started`.
    pub fn won(started: T, deadline: Duration) -> Self {
        Term {
            deadline,
            until: started + deadline,
        }
    }

    /// The moment the term ends unless renewed.
    pub fn until(&self) -> T {
        self.until
    }

    /// The attempt that started at `started` ended at `now` with `outcome`.
    pub fn renewed(&mut self, started: T, now: T, outcome: Renewal) -> Verdict {
        match outcome {
            Renewal::Taken => return Verdict::Stop,
            Renewal::Held if now < self.until => self.until = started + self.deadline,
            // An answer after the term ended comes too late: another
            // replica may have taken over meanwhile.
            Renewal::Held | Renewal::Failed => {}
        }
        if now < self.until {
            Verdict::Lead
        } else {
            Verdict::Stop
        }
    }
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

    pub fn renew_every(&self) -> Duration {
        self.cfg.renew_every
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

    /// One attempt, abandoned when it outlasts `within` (a call to an
    /// API server that does not answer may otherwise hang for minutes).
    async fn attempt(&self, within: Duration) -> Result<bool, LeaseError> {
        match tokio::time::timeout(within, self.try_hold()).await {
            Ok(r) => r,
            Err(_) => Err(LeaseError::NoAnswer(within)),
        }
    }

    /// Waits until this replica holds the lease; returns the term won.
    /// Logs an error once, and again only when it changes.
    pub async fn acquire(&self) -> Term<Instant> {
        self.acquire_after(|| Duration::ZERO).await
    }

    /// [`Elector::acquire`], waiting `patience()` before each attempt (a
    /// replica that holds shards already gives the others a head start).
    pub async fn acquire_after(&self, patience: impl Fn() -> Duration) -> Term<Instant> {
        let mut last_error: Option<String> = None;
        loop {
            tokio::time::sleep(patience()).await;
            let started = Instant::now();
            match self.attempt(renew_deadline(&self.cfg)).await {
                Ok(true) => {
                    tracing::info!(lease = %self.cfg.name, identity = %self.cfg.identity, "leading");
                    return Term::won(started, renew_deadline(&self.cfg));
                }
                Ok(false) => last_error = None,
                Err(e) => {
                    // Logged again only when the text changes.
                    let e = e.to_string();
                    if last_error.as_ref() != Some(&e) {
                        tracing::warn!(lease = %self.cfg.name, error = %e, "lease not readable; campaigning until it is");
                    }
                    last_error = Some(e);
                }
            }
            tokio::time::sleep_until(started + self.cfg.renew_every).await;
        }
    }

    /// Renews the lease every `renew_every` while `term` lasts; returns
    /// when it ends (the caller stops reconciling at once).
    pub async fn keep(&self, mut term: Term<Instant>) -> LeaseError {
        // At least two attempts per term, whatever the flags.
        let every = self.cfg.renew_every.min(renew_deadline(&self.cfg) / 2);
        loop {
            tokio::time::sleep(every).await;
            let started = Instant::now();
            let within = term.until().saturating_duration_since(started);
            let result = self.attempt(within).await;
            let outcome = match &result {
                Ok(true) => Renewal::Held,
                Ok(false) => Renewal::Taken,
                Err(e) => {
                    tracing::warn!(lease = %self.cfg.name, error = %e, "lease renewal failed");
                    Renewal::Failed
                }
            };
            if term.renewed(started, Instant::now(), outcome) == Verdict::Lead {
                continue;
            }
            return match outcome {
                Renewal::Taken => LeaseError::Lost(self.cfg.name.clone()),
                _ => LeaseError::Expired {
                    name: self.cfg.name.clone(),
                    deadline: renew_deadline(&self.cfg),
                },
            };
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
#[path = "lease_tests.rs"]
mod tests;
