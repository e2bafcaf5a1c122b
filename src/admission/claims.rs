//! Claims across webhook replicas, with the API server as the arbiter.
//!
//! Before a write that a policy with `claims` admits is answered, each key
//! it would hold is claimed by creating a Lease named by the hash of
//! (policy, index, key) in the claims namespace, `spec.holderIdentity` the
//! holder. A create is atomic: of two replicas that both admitted a write
//! claiming the same key for different holders, one create fails with 409
//! and that write is refused. A claim of the same holder is renewed
//! (`spec.renewTime`, a replace carrying the resourceVersion read).
//!
//! Claims are released level-triggered: a claim that no object in the
//! inventory holds any more and that was not renewed within the grace
//! period is deleted with its resourceVersion as precondition, by the
//! periodic sweep of every replica, or at once by a write that finds it in
//! its way. The grace period covers a write admitted but not yet seen by
//! the watch (or refused later by another webhook). See docs/admission.md.

use crate::cluster::Cluster;
use crate::policy::claims::Wanted;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

/// The label every claim carries (the sweep lists by it).
pub const CLAIM_LABEL: &str = "interlock.dev/claim";
const POLICY: &str = "interlock.dev/claim-policy";
const INDEX: &str = "interlock.dev/claim-index";
const KEY: &str = "interlock.dev/claim-key";
const CLAIMED_BY: &str = "interlock.dev/claimed-by";

/// How claims are made.
#[derive(Debug, Clone)]
pub struct ClaimOptions {
    /// Where the claim Leases live (the webhook's own namespace).
    pub namespace: String,
    /// Whether `namespace` was given; if not, [`serve`](super::serve) may
    /// default it to the kubeconfig context's namespace outside a cluster.
    pub namespace_given: bool,
    /// A claim neither held by a stored object nor renewed for this long
    /// is released.
    pub grace: Duration,
    /// The longest one API call may take.
    pub timeout: Duration,
}

/// Why a claim was not made.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another holder has the key (the engine words the message: the
    /// holder may be another tenant's namespace, which is redacted).
    #[error("{key} is claimed by {holder} (claim {namespace}/{lease})")]
    Taken {
        key: String,
        holder: String,
        namespace: String,
        lease: String,
    },
    #[error("could not claim {key} (claim {namespace}/{lease}): {message}")]
    Api {
        key: String,
        namespace: String,
        lease: String,
        message: String,
    },
}

#[derive(Clone, Default)]
struct Metrics {
    /// Claim outcomes: created, renewed, taken, error, released.
    outcomes: Family<Vec<(String, String)>, Counter>,
}

/// The claims client of one `serve` process.
pub struct Claims {
    api: Api<Lease>,
    options: ClaimOptions,
    runtime: tokio::runtime::Handle,
    metrics: Metrics,
}

/// The Lease name of a key: stable, DNS-safe, whatever the key holds.
pub fn lease_name(w: &Wanted) -> String {
    let input = format!("{}\n{}\n{}", w.policy, w.index, w.key);
    let digest = ring::digest::digest(&ring::digest::SHA256, input.as_bytes());
    let mut name = String::from("interlock-claim-");
    for b in &digest.as_ref()[..20] {
        // Writing to a String cannot fail.
        let _ = write!(name, "{b:02x}");
    }
    name
}

/// A key a Lease records, as it was claimed.
struct Recorded {
    policy: String,
    index: String,
    key: String,
    holder: String,
    renewed: Option<Timestamp>,
}

impl Recorded {
    fn of(lease: &Lease) -> Option<Recorded> {
        let a = lease.metadata.annotations.as_ref()?;
        let spec = lease.spec.as_ref()?;
        Some(Recorded {
            policy: a.get(POLICY)?.clone(),
            index: a.get(INDEX)?.clone(),
            key: a.get(KEY)?.clone(),
            holder: spec.holder_identity.clone()?,
            renewed: spec
                .renew_time
                .as_ref()
                .map(|MicroTime(t)| *t)
                .or_else(|| lease.metadata.creation_timestamp.as_ref().map(|t| t.0)),
        })
    }

    /// Released when no stored object holds it and it was not renewed
    /// within `grace`.
    fn releasable(&self, cluster: &Cluster, grace: Duration, now: Timestamp) -> bool {
        let grace = SignedDuration::try_from(grace).unwrap_or(SignedDuration::from_hours(1));
        let renewed_lately = self
            .renewed
            .is_none_or(|t| t.checked_add(grace).is_ok_and(|until| until > now));
        if renewed_lately || !cluster.is_ready() {
            return false;
        }
        let held = cluster.read(|st| {
            st.policies.claim_held(
                &st.inventory,
                &self.policy,
                &self.index,
                &self.key,
                &self.holder,
            )
        });
        held != Some(true)
    }
}

impl Claims {
    /// Claims in `options.namespace`, made on `runtime` (the evaluation
    /// threads that call [`Claims::claim`] are not the runtime's).
    pub fn new(
        client: kube::Client,
        options: ClaimOptions,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Claims {
            api: Api::namespaced(client, &options.namespace),
            options,
            runtime,
            metrics: Metrics::default(),
        }
    }

    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "claims",
            "Claims of unique keys by outcome (created, renewed, taken, error, released)",
            self.metrics.outcomes.clone(),
        );
    }

    fn count(&self, outcome: &str) {
        self.metrics
            .outcomes
            .get_or_create(&vec![("outcome".into(), outcome.into())])
            .inc();
    }

    /// Claims every key of `wanted` for `object` (`Kind ns/name`), from an
    /// evaluation thread (blocks it on the API calls). The first key that
    /// cannot be claimed ends it; keys claimed before stay, to be released
    /// by the sweep.
    pub fn claim<'w>(
        &self,
        cluster: &Cluster,
        wanted: &'w [Wanted],
        object: &str,
    ) -> Result<(), (ClaimError, &'w Wanted)> {
        for w in wanted {
            let r = self.runtime.block_on(async {
                match tokio::time::timeout(self.options.timeout, self.claim_one(cluster, w, object))
                    .await
                {
                    Ok(r) => r,
                    Err(_) => {
                        Err(self
                            .api_error(w, format!("no answer within {:?}", self.options.timeout)))
                    }
                }
            });
            match r {
                Ok(outcome) => self.count(outcome),
                Err(e) => {
                    self.count(if matches!(e, ClaimError::Taken { .. }) {
                        "taken"
                    } else {
                        "error"
                    });
                    tracing::info!(policy = %w.policy, key = %w.key, holder = %w.holder, error = %e, "claim refused");
                    return Err((e, w));
                }
            }
        }
        Ok(())
    }

    fn api_error(&self, w: &Wanted, message: String) -> ClaimError {
        ClaimError::Api {
            key: w.key.clone(),
            namespace: self.options.namespace.clone(),
            lease: lease_name(w),
            message,
        }
    }

    fn lease(&self, w: &Wanted, object: &str) -> Lease {
        let annotations = BTreeMap::from([
            (POLICY.to_string(), w.policy.clone()),
            (INDEX.to_string(), w.index.clone()),
            (KEY.to_string(), w.key.clone()),
            (CLAIMED_BY.to_string(), object.to_string()),
        ]);
        Lease {
            metadata: ObjectMeta {
                name: Some(lease_name(w)),
                namespace: Some(self.options.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    CLAIM_LABEL.to_string(),
                    "true".to_string(),
                )])),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(w.holder.clone()),
                renew_time: Some(MicroTime(Timestamp::now())),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Create; else renew our own; else release a stale one and retry.
    async fn claim_one(
        &self,
        cluster: &Cluster,
        w: &Wanted,
        object: &str,
    ) -> Result<&'static str, ClaimError> {
        let name = lease_name(w);
        let err = |e: kube::Error| self.api_error(w, e.to_string());
        for _ in 0..3 {
            match self
                .api
                .create(&PostParams::default(), &self.lease(w, object))
                .await
            {
                Ok(_) => return Ok("created"),
                Err(e) if status(&e) == Some(409) => {}
                Err(e) => return Err(err(e)),
            }
            let current = match self.api.get_opt(&name).await.map_err(err)? {
                Some(l) => l,
                None => continue, // released meanwhile: create again
            };
            let recorded = Recorded::of(&current);
            let holder = recorded.as_ref().map(|r| r.holder.as_str()).unwrap_or("");
            if holder == w.holder {
                let mut renewed = self.lease(w, object);
                renewed.metadata.resource_version = current.metadata.resource_version.clone();
                match self
                    .api
                    .replace(&name, &PostParams::default(), &renewed)
                    .await
                {
                    Ok(_) => return Ok("renewed"),
                    Err(e) if matches!(status(&e), Some(409 | 404)) => continue,
                    Err(e) => return Err(err(e)),
                }
            }
            let stale = recorded
                .as_ref()
                .is_none_or(|r| r.releasable(cluster, self.options.grace, Timestamp::now()));
            if !stale {
                return Err(ClaimError::Taken {
                    key: w.key.clone(),
                    holder: holder.to_string(),
                    namespace: self.options.namespace.clone(),
                    lease: name,
                });
            }
            self.release(&current).await.map_err(err)?;
        }
        Err(self.api_error(w, "the claim kept changing; retry".into()))
    }

    /// Deletes `lease` unless it changed since it was read.
    async fn release(&self, lease: &Lease) -> Result<(), kube::Error> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: lease.metadata.resource_version.clone(),
                uid: lease.metadata.uid.clone(),
            }),
            ..DeleteParams::default()
        };
        match self.api.delete(&name, &dp).await {
            Ok(_) => {
                self.count("released");
                tracing::info!(claim = %name, "released a claim no object holds");
                Ok(())
            }
            Err(e) if matches!(status(&e), Some(409 | 404)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One pass of the sweep: releases every claim no stored object holds
    /// that was not renewed within the grace period.
    pub async fn sweep(&self, cluster: &Cluster) -> Result<usize, kube::Error> {
        let leases = self
            .api
            .list(&ListParams::default().labels(&format!("{CLAIM_LABEL}=true")))
            .await?;
        let now = Timestamp::now();
        let mut released = 0;
        for lease in &leases.items {
            let stale =
                Recorded::of(lease).is_none_or(|r| r.releasable(cluster, self.options.grace, now));
            if stale {
                self.release(lease).await?;
                released += 1;
            }
        }
        Ok(released)
    }

    /// Sweeps every half grace period until dropped.
    pub async fn sweep_forever(self: Arc<Self>, cluster: Arc<Cluster>) {
        let every = (self.options.grace / 2).max(Duration::from_secs(1));
        loop {
            tokio::time::sleep(every).await;
            if let Err(e) = self.sweep(&cluster).await {
                tracing::warn!(error = %e, namespace = %self.options.namespace, "claims sweep failed; retrying");
            }
        }
    }
}

fn status(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
