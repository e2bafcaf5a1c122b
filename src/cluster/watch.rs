//! The live inventory: one kube-runtime watcher per kind some policy reads
//! (plus Namespaces), applied to the inventory event by event.
//!
//! A re-list (after 410 Gone or a restart of the watch) upserts every object
//! it sees and only at its end removes the objects it did not see, so the
//! indexes are never empty in between.

//! The live inventory: one kube-runtime watcher per kind some policy reads
//! (plus Namespaces), applied to the cluster state event by event.
//!
//! A re-list (after 410 Gone or a restart of the watch) upserts every object
//! it sees and only at its end removes the objects it did not see, so the
//! indexes are never empty in between.
//!
//! [`Watchers`] is level-triggered over the set of kinds: `set_kinds` starts
//! what is newly read and stops what no longer is. Each kind's task finds its
//! kind by discovery and retries with capped, jittered backoff while it
//! cannot (a CRD not installed yet), so the process stays unready, never
//! wedged. Tasks are owned (aborted on `shutdown` or drop), never detached.

use super::Cluster;
use crate::inventory::ObjectKey;
use crate::k8s::kind::GroupKind;
use crate::k8s::kind::GroupVersionKind;
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value as Json;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The running watchers, one per kind.
pub struct Watchers {
    client: Client,
    cluster: Arc<Cluster>,
    running: HashMap<GroupVersionKind, JoinHandle<()>>,
}

impl Watchers {
    pub fn new(client: Client, cluster: Arc<Cluster>) -> Self {
        Watchers {
            client,
            cluster,
            running: HashMap::new(),
        }
    }

    /// Watches exactly `kinds`: starts the new ones, stops the others.
    pub fn set_kinds(&mut self, kinds: &[GroupVersionKind]) {
        let wanted: HashSet<&GroupVersionKind> = kinds.iter().collect();
        self.running.retain(|k, task| {
            let keep = wanted.contains(k);
            if !keep {
                tracing::info!(api_version = %k.api_version(), kind = %k.kind(), "no policy reads this kind now; watch stopped");
                task.abort();
            }
            keep
        });
        for k in kinds {
            if !self.running.contains_key(k) {
                let task = tokio::spawn(watch_kind(
                    self.client.clone(),
                    self.cluster.clone(),
                    k.clone(),
                ));
                self.running.insert(k.clone(), task);
            }
        }
        if kinds.is_empty() {
            self.cluster.settle(&self.cluster.syncing());
        }
    }

    pub fn kinds(&self) -> Vec<GroupVersionKind> {
        let mut v: Vec<GroupVersionKind> = self.running.keys().cloned().collect();
        v.sort();
        v
    }

    /// Stops every watcher and waits for them to end.
    pub async fn shutdown(mut self) {
        let tasks: Vec<JoinHandle<()>> = self.running.drain().map(|(_, t)| t).collect();
        for t in &tasks {
            t.abort();
        }
        futures::future::join_all(tasks).await;
    }
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for t in self.running.values() {
            t.abort();
        }
    }
}

/// Registers a kind's watcher with the cluster's readiness for as long as
/// the task lives (dropped on abort too).
struct Registration {
    cluster: Arc<Cluster>,
    kind: GroupVersionKind,
    relisting: bool,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cluster.watch_stopped(&self.kind, self.relisting);
    }
}

/// Capped exponential backoff with jitter, for discovery retries.
pub(crate) fn backoff(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.min(16)).min(cap);
    // Full jitter over the upper half: never zero, never in lockstep.
    let nanos = exp.as_nanos() as u64;
    let jitter = jitter_fraction() * (nanos / 2) as f64;
    Duration::from_nanos(nanos / 2 + jitter as u64)
}

pub(crate) fn jitter_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    (h.finish() % 10_000) as f64 / 10_000.0
}

/// Finds the kind by discovery, retrying while the cluster does not serve it.
async fn discover(client: &Client, kind: &GroupVersionKind) -> Api<DynamicObject> {
    let (api_version, name) = (kind.api_version(), kind.kind());
    let gvk = kube::api::GroupVersionKind::gvk(kind.group(), kind.version(), name);
    let mut attempt = 0;
    loop {
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((ar, _caps)) => return Api::all_with(client.clone(), &ar),
            Err(e) => {
                let wait = backoff(attempt, Duration::from_millis(500), Duration::from_secs(30));
                let error = super::api_error::explain(&e);
                tracing::warn!(api_version = %api_version, kind = %name, %error, retry_in = ?wait,
                    "cannot find this kind in the cluster; not ready until it is served");
                attempt += 1;
                tokio::time::sleep(wait).await;
            }
        }
    }
}

async fn watch_kind(client: Client, cluster: Arc<Cluster>, kind: GroupVersionKind) {
    cluster.watch_started(&kind);
    let mut reg = Registration {
        cluster: cluster.clone(),
        kind: kind.clone(),
        relisting: false,
    };
    let api = discover(&client, &kind).await;
    let config =
        watcher::Config::default().timeout(cluster.options.watch_timeout.as_secs().max(1) as u32);
    let start = || {
        watcher::watcher(api.clone(), config.clone())
            .default_backoff()
            .boxed()
    };
    let mut stream = start();
    let mut relist = cluster.relist_requests();
    relist.mark_unchanged();
    let mut sync = KindSync::new(&kind);
    loop {
        let event = tokio::select! {
            event = stream.next() => event,
            Ok(()) = relist.changed() => {
                relist.mark_unchanged();
                // A new stream starts with a list; KindSync reconciles it
                // without emptying the indexes.
                tracing::info!(kind = %kind.kind(), "re-listing: the policies read more of this kind");
                stream = start();
                reg.relisting = true;
                continue;
            }
        };
        match event {
            None => break,
            Some(Ok(e)) => {
                let list_done = matches!(e, Event::InitDone);
                // The state's lock is a blocking one: wait for it off the
                // async workers, so a long evaluation holding the read lock
                // never stalls the runtime (and /healthz with it).
                if tokio::task::block_in_place(|| sync.on_event(&cluster, e)) {
                    cluster.synced(&kind);
                }
                if list_done && reg.relisting {
                    reg.relisting = false;
                    cluster.relist_done();
                }
            }
            // The watcher re-lists by itself (410 Gone included).
            Some(Err(e)) => {
                let error = super::api_error::explain(&e);
                tracing::warn!(kind = %kind.kind(), %error, "watch error; re-listing");
            }
        }
    }
}

/// One kind's watch state: the keys a (re-)list has shown so far.
pub struct KindSync {
    kind: GroupVersionKind,
    gk: GroupKind,
    seen: HashSet<ObjectKey>,
    synced: bool,
}

impl KindSync {
    pub fn new(kind: &GroupVersionKind) -> Self {
        KindSync {
            kind: kind.clone(),
            gk: kind.group_kind(),
            seen: HashSet::new(),
            synced: false,
        }
    }

    /// The object as JSON with its apiVersion and kind: the items of a list
    /// response carry neither (only the list does).
    fn json(&self, o: &DynamicObject) -> Option<Json> {
        let mut json = serde_json::to_value(o).ok()?;
        let m = json.as_object_mut()?;
        if !m.contains_key("apiVersion") {
            m.insert("apiVersion".into(), self.kind.api_version().into());
        }
        if !m.contains_key("kind") {
            m.insert("kind".into(), self.kind.kind().into());
        }
        Some(json)
    }

    /// Applies one watch event; returns true on the first completed list.
    pub fn on_event(&mut self, cluster: &Cluster, event: Event<DynamicObject>) -> bool {
        match event {
            Event::Init => self.seen.clear(),
            Event::InitApply(o) => {
                if let Some(k) = self.json(&o).and_then(|j| apply(cluster, j)) {
                    self.seen.insert(k);
                }
            }
            Event::InitDone => {
                remove_unseen(cluster, &self.gk, &self.seen);
                self.seen.clear();
                let first = !self.synced;
                self.synced = true;
                return first;
            }
            Event::Apply(o) => {
                if let Some(j) = self.json(&o) {
                    apply(cluster, j);
                }
            }
            Event::Delete(o) => {
                if let Some(k) = self.json(&o).as_ref().and_then(ObjectKey::of) {
                    cluster.update_inventory(|inventory, pending| {
                        pending.observed(&k);
                        inventory.remove(&k)
                    });
                }
            }
        }
        false
    }
}

fn apply(cluster: &Cluster, json: Json) -> Option<ObjectKey> {
    let key = ObjectKey::of(&json)?;
    cluster.update_inventory(|inventory, pending| {
        pending.observed(&key);
        if let Err(e) = inventory.upsert(&json, None) {
            tracing::warn!(object = %key, error = %e, "object not added to the inventory");
        }
    });
    Some(key)
}

fn remove_unseen(cluster: &Cluster, gk: &GroupKind, seen: &HashSet<ObjectKey>) {
    cluster.update_inventory(|inventory, pending| {
        let stale: Vec<ObjectKey> = inventory
            .list(gk.group(), gk.kind(), None)
            .into_iter()
            .map(|e| e.key.clone())
            .filter(|k| !seen.contains(k) && !pending.contains(k))
            .collect();
        for k in stale {
            inventory.remove(&k);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterOptions;
    use crate::inventory::Inventory;
    use crate::policy::PolicySet;

    /// As a list response has it: without apiVersion and kind.
    pub(super) fn listed(mut o: DynamicObject) -> DynamicObject {
        o.types = None;
        o
    }

    fn ingress(ns: &str, name: &str, host: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"namespace": ns, "name": name, "managedFields": [{"manager": "x"}]},
            "spec": {"rules": [{"host": host}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_relist_never_empties_the_index_and_drops_what_it_did_not_see() {
        let mut inv = Inventory::new();
        let id = inv
            .declare_index(
                "networking.k8s.io/v1",
                "Ingress",
                "object.spec.rules.map(r, r.host)",
            )
            .unwrap();
        let cluster = Cluster::new(PolicySet::default(), inv, ClusterOptions::default());
        let mut sync = KindSync::new(&GroupVersionKind::from_api_version(
            "networking.k8s.io/v1",
            "Ingress",
        ));
        assert!(!sync.on_event(&cluster, Event::Init));
        sync.on_event(
            &cluster,
            Event::InitApply(listed(ingress("a", "one", "a.example"))),
        );
        sync.on_event(
            &cluster,
            Event::InitApply(listed(ingress("b", "two", "b.example"))),
        );
        assert!(
            sync.on_event(&cluster, Event::InitDone),
            "first list completes the sync"
        );
        // A re-list (after 410 Gone) that no longer contains `two`.
        sync.on_event(&cluster, Event::Init);
        sync.on_event(
            &cluster,
            Event::InitApply(listed(ingress("a", "one", "a.example"))),
        );
        cluster.read(|st| {
            assert_eq!(
                st.inventory.lookup_index(id, "b.example").len(),
                1,
                "still answered mid re-list"
            );
        });
        assert!(
            !sync.on_event(&cluster, Event::InitDone),
            "only the first list counts for readiness"
        );
        cluster.read(|st| {
            assert!(st.inventory.lookup_index(id, "b.example").is_empty());
            assert_eq!(st.inventory.lookup_index(id, "a.example").len(), 1);
            let e = st.inventory.list("networking.k8s.io", "Ingress", Some("a"))[0];
            assert!(
                e.object.json().pointer("/metadata/managedFields").is_none(),
                "managed fields are not kept"
            );
        });
        sync.on_event(&cluster, Event::Delete(ingress("a", "one", "a.example")));
        cluster.read(|st| assert!(st.inventory.lookup_index(id, "a.example").is_empty()));
    }
}

#[cfg(test)]
mod reload_tests {
    use super::*;
    use crate::cluster::ClusterOptions;
    use crate::inventory::Inventory;
    use crate::policy::Request;

    use crate::fixtures::{compile, UNIQUE_HOST as HOSTS, UNIQUE_TLS as TLS};

    fn ingress(name: &str, uid: &str, secret: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"namespace": "a", "name": name, "uid": uid},
            "spec": {"tls": [{"secretName": secret}], "rules": [{"host": format!("{name}.example")}]}
        })
    }

    #[test]
    fn a_relist_after_a_reload_keeps_what_the_new_policies_read() {
        let mut inv = Inventory::new();
        let set = compile(&[HOSTS], &mut inv);
        inv.set_projection(set.projection(&inv));
        let cluster = Cluster::new(set, inv, ClusterOptions::default());
        let mut sync = KindSync::new(&GroupVersionKind::from_api_version(
            "networking.k8s.io/v1",
            "Ingress",
        ));
        let one = ingress("one", "u1", "cert");
        sync.on_event(&cluster, Event::Init);
        sync.on_event(
            &cluster,
            Event::InitApply(super::tests::listed(serde_json::from_value(one).unwrap())),
        );
        sync.on_event(&cluster, Event::InitDone);
        cluster.update(|st| {
            let set = compile(&[HOSTS, TLS], &mut st.inventory);
            let p = set.projection(&st.inventory);
            assert!(*st.inventory.projection() != p);
            st.inventory.set_projection(p);
            st.policies = set;
        });
        let two = ingress("two", "u2", "cert");
        let denied = |cluster: &Cluster| {
            cluster.read(|st| {
                let r = Request::create(&two, "me").unwrap();
                !st.policies.evaluate(&r, &st.inventory).verdicts.is_empty()
            })
        };
        assert!(
            !denied(&cluster),
            "before the re-list the inventory lacks tls"
        );
        sync.on_event(&cluster, Event::Init);
        sync.on_event(
            &cluster,
            Event::InitApply(super::tests::listed(
                serde_json::from_value(ingress("one", "u1", "cert")).unwrap(),
            )),
        );
        sync.on_event(&cluster, Event::InitDone);
        assert!(denied(&cluster), "after the re-list the new rule sees tls");
    }
}
