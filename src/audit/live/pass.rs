//! One pass of the continuous audit: which objects to evaluate again, and
//! their evaluation in short batches under the cluster state's read lock.
//!
//! Decisions:
//! - What to re-evaluate is decided by kind: an object is evaluated again
//!   when it changed, or when a kind its policies read
//!   ([`Outcome::kinds_read`](crate::policy::Outcome::kinds_read),
//!   Namespaces always) changed in the inventory since the last pass
//!   ([`Inventory::kinds_changed_since`](crate::inventory::Inventory::kinds_changed_since)).
//!   Lookups record only the objects they found, not the ones they missed
//!   (a deleted ConfigMap), so object-level dependencies would miss exactly
//!   the case the audit is for.
//! - A policy reload (a new generation) or the slow timer makes a full pass.
//! - The read lock is held for at most [`HOLD`] at a time (objects are
//!   decompressed [`BATCH`] at a time before it is taken, and evaluated in
//!   as many holds as that takes): an admitted write, which records itself
//!   under the write lock, waits for one hold, never a batch. The lock
//!   prefers writers: once one waits, the next hold waits for it.
//! - A pass is paced ([`Auditor::pace`]): after each hold it sleeps in
//!   proportion to the time it held, so the audit never takes more than
//!   a share of one core from admission (a full pass is a slow safety net;
//!   on a 2-core node an unpaced one takes a core of two).
//! - The inventory version is read before the batches: a change made
//!   during a pass is seen by the next one (evaluated twice at worst,
//!   never missed).

use super::cluster_vaps::{ClusterVaps, WithParams};
use super::store::Shared;
use crate::cluster::{Cluster, State};
use crate::inventory::ObjectKey;
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use crate::policy::{PolicySet, Request};
use crate::report::{Finding, ObjectRef};
use serde_json::Value as Json;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Objects decompressed at a time, outside every lock.
pub const BATCH: usize = 64;

/// The longest the read lock is held at a time (at least one evaluation).
pub const HOLD: Duration = Duration::from_micros(250);

/// Sleep per unit of time evaluating: 3, at most a quarter of a core
/// (benches/audit_live.rs: admission p99 beside back-to-back full passes
/// came closer to alone at 3 than at 1; a 50k-object pass still takes
/// seconds, and it runs once an hour).
pub const PACE: f64 = 3.0;

/// A tracked object's apiVersion and compressed JSON.
type Body = (Arc<str>, Arc<[u8]>);

/// The kinds an evaluation may read; `None`: any (a computed lookup).
type ReadSet = Option<Vec<GroupKind>>;

/// What one pass did.
#[derive(Debug, Default, Clone)]
pub struct Pass {
    pub full: bool,
    pub evaluated: usize,
    /// Namespaces whose results changed ("" for cluster-scoped objects).
    pub changed: BTreeSet<String>,
    /// Time spent evaluating under the read lock (the pass's wall time
    /// adds decompression and the pacing sleeps).
    pub busy: Duration,
    /// Holds of the read lock.
    pub holds: usize,
}

/// The results of the continuous audit and what it needs to decide what
/// to evaluate next.
pub struct Auditor {
    /// Only objects with results.
    results: HashMap<ObjectKey, Vec<Finding>>,
    /// The read set of each object's last evaluation (an index in `read_sets`).
    reads: HashMap<ObjectKey, usize>,
    read_sets: Vec<ReadSet>,
    /// (policy generation, inventory version) the last pass started from.
    seen: Option<(u64, u64)>,
    /// The longest hold of the read lock ([`HOLD`]; benches/audit_live.rs
    /// compares others).
    pub hold: Duration,
    /// Sleep per unit of time evaluating ([`PACE`]; 0: unpaced).
    pub pace: f64,
}

impl Default for Auditor {
    fn default() -> Self {
        Auditor {
            results: HashMap::new(),
            reads: HashMap::new(),
            read_sets: Vec::new(),
            seen: None,
            hold: HOLD,
            pace: PACE,
        }
    }
}

impl Auditor {
    /// Evaluates what changed (everything when `full`, on the first pass,
    /// or after a policy reload), by the process's policies and `vaps`.
    pub fn pass(
        &mut self,
        cluster: &Cluster,
        store: &Shared,
        full: bool,
        vaps: Option<&ClusterVaps>,
    ) -> Pass {
        let (generation, version, changed_kinds, names, extra) = cluster.read(|st| {
            let changed = self
                .seen
                .and_then(|(_, v)| st.inventory.kinds_changed_since(v));
            // The same exceptions as the process's own policies.
            let extra = vaps.map(|v| {
                let mut policies = v.policies.clone();
                policies.exceptions = st.policies.exceptions.clone();
                policies.cluster_exceptions = st.policies.cluster_exceptions.clone();
                Extra { policies, vaps: v }
            });
            (
                st.generation(),
                st.inventory.version(),
                changed,
                api_versions(&st.policies.kinds_read()),
                extra,
            )
        });
        let full = full || self.seen.map(|s| s.0) != Some(generation) || changed_kinds.is_none();
        let hit = self.hit_read_sets(changed_kinds.as_deref().unwrap_or(&[]));
        let (keys, removed) = {
            let mut s = store.lock();
            let dirty = std::mem::take(&mut s.dirty);
            let removed = std::mem::take(&mut s.removed);
            let keys: Vec<ObjectKey> = if full {
                s.objects.keys().cloned().collect()
            } else {
                let mut keys: HashSet<ObjectKey> = dirty;
                // The common tick: nothing any evaluation read changed.
                if hit.iter().any(|h| *h) {
                    keys.extend(
                        s.objects
                            .keys()
                            .filter(|k| self.reads.get(*k).is_some_and(|&i| hit[i]))
                            .cloned(),
                    );
                }
                keys.into_iter().collect()
            };
            (keys, removed)
        };
        self.seen = Some((generation, version));
        let mut pass = Pass {
            full,
            ..Pass::default()
        };
        for k in removed {
            self.reads.remove(&k);
            if self.results.remove(&k).is_some() {
                pass.changed.insert(k.namespace.to_string());
            }
        }
        for batch in keys.chunks(BATCH) {
            self.batch(cluster, store, batch, (&names, extra.as_ref()), &mut pass);
        }
        pass
    }

    /// Which read sets contain one of `changed` (every set, for a set of
    /// any kind).
    fn hit_read_sets(&self, changed: &[GroupKind]) -> Vec<bool> {
        self.read_sets
            .iter()
            .map(|set| match set {
                None => !changed.is_empty(),
                Some(kinds) => kinds.iter().any(|gk| changed.contains(gk)),
            })
            .collect()
    }

    fn batch(
        &mut self,
        cluster: &Cluster,
        store: &Shared,
        keys: &[ObjectKey],
        (names, extra): (&HashMap<GroupKind, String>, Option<&Extra>),
        pass: &mut Pass,
    ) {
        // Copies of the compressed bytes, decompressed outside every lock.
        let bodies: Vec<(ObjectKey, Option<Body>)> = {
            let s = store.lock();
            keys.iter()
                .map(|k| {
                    let t = s.objects.get(k);
                    (
                        k.clone(),
                        t.map(|t| (t.api_version.clone(), t.body.clone())),
                    )
                })
                .collect()
        };
        let objects: Vec<(ObjectKey, Option<(ObjectRef, Json)>)> = bodies
            .into_iter()
            .map(|(k, body)| {
                let json =
                    body.and_then(|(v, b)| Some((object_ref(&k, &v), super::store::decode(&b)?)));
                (k, json)
            })
            .collect();
        let mut evaluated = Vec::with_capacity(objects.len());
        let hold = self.hold;
        while evaluated.len() < objects.len() {
            let held = cluster.read(|st| {
                let started = Instant::now();
                for (k, o) in &objects[evaluated.len()..] {
                    evaluated.push(evaluate(st, k, o.as_ref(), names, extra));
                    if started.elapsed() >= hold {
                        break;
                    }
                }
                started.elapsed()
            });
            pass.busy += held;
            pass.holds += 1;
            if self.pace > 0.0 {
                std::thread::sleep(held.mul_f64(self.pace));
            }
        }
        pass.evaluated += evaluated.len();
        for (k, findings, reads) in evaluated {
            self.record(k, findings, reads, pass);
        }
    }

    fn record(&mut self, k: ObjectKey, findings: Vec<Finding>, reads: ReadSet, pass: &mut Pass) {
        let id = match self.read_sets.iter().position(|s| *s == reads) {
            Some(i) => i,
            None => {
                self.read_sets.push(reads);
                self.read_sets.len() - 1
            }
        };
        self.reads.insert(k.clone(), id);
        let before = self.results.get(&k);
        if before.map(Vec::as_slice).unwrap_or(&[]) == findings.as_slice() {
            return;
        }
        pass.changed.insert(k.namespace.to_string());
        if findings.is_empty() {
            self.results.remove(&k);
        } else {
            self.results.insert(k, findings);
        }
    }

    /// Every current result.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.results.values().flatten()
    }

    /// The results of objects of `namespace` ("" for cluster-scoped ones).
    pub fn findings_in<'s>(&'s self, namespace: &'s str) -> Vec<&'s Finding> {
        self.results
            .iter()
            .filter(|(k, _)| &*k.namespace == namespace)
            .flat_map(|(_, f)| f)
            .collect()
    }
}

/// The cluster's VAPs of a pass, with the process's exceptions.
struct Extra<'v> {
    policies: PolicySet,
    vaps: &'v ClusterVaps,
}

/// One object's results and the kinds its evaluation read; an object gone
/// (or not a valid request) has none.
fn evaluate(
    st: &State,
    k: &ObjectKey,
    o: Option<&(ObjectRef, Json)>,
    names: &HashMap<GroupKind, String>,
    extra: Option<&Extra>,
) -> (ObjectKey, Vec<Finding>, ReadSet) {
    let none = || (k.clone(), vec![], Some(vec![]));
    let Some((object, json)) = o else {
        return none();
    };
    let Some(mut req) = Request::create(json, crate::audit::USER) else {
        return none();
    };
    // The cluster's object: validationActions, not checkActions.
    req.live = true;
    let outcome = st.policies.evaluate(&req, &st.inventory);
    // A change of the cluster's VAPs or their params makes a full pass:
    // their reads need no tracking here.
    let reads = outcome
        .kinds_read()
        .map(|v| v.into_iter().cloned().collect());
    let mut verdicts = outcome.verdicts;
    if let Some(x) = extra {
        let lookup = WithParams {
            vaps: x.vaps,
            base: &st.inventory,
        };
        verdicts.extend(x.policies.evaluate(&req, &lookup).verdicts);
    }
    // Not evaluable in audit: no result, neither pass nor fail.
    let findings = verdicts
        .into_iter()
        .filter(|v| !crate::audit::not_evaluable(v))
        .map(|v| crate::audit::finding(v, object, |r| related_ref(r, names)))
        .collect();
    (k.clone(), findings, reads)
}

/// (group, kind) → apiVersion of the kinds policies read, to name related
/// objects (the inventory keys them by group).
fn api_versions(kinds: &[GroupVersionKind]) -> HashMap<GroupKind, String> {
    kinds
        .iter()
        .map(|gvk| (gvk.group_kind(), gvk.api_version().to_string()))
        .collect()
}

fn object_ref(k: &ObjectKey, api_version: &str) -> ObjectRef {
    ObjectRef {
        api_version: api_version.to_string(),
        kind: k.gk.kind.to_string(),
        namespace: (!k.namespace.is_empty()).then(|| k.namespace.to_string()),
        name: k.name.to_string(),
    }
}

fn related_ref(k: &ObjectKey, names: &HashMap<GroupKind, String>) -> ObjectRef {
    let api_version = names
        .get(&k.gk)
        .cloned()
        .unwrap_or_else(|| k.gk.group.to_string());
    object_ref(k, &api_version)
}

#[cfg(test)]
mod tests;
