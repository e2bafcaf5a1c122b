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

use super::driver::{KindSync, Sink};
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

/// Finds the kind by discovery, retrying while the cluster does not serve it.
async fn discover(client: &Client, kind: &GroupVersionKind) -> Api<DynamicObject> {
    let (api_version, name) = (kind.api_version(), kind.kind());
    let gvk = kube::api::GroupVersionKind::gvk(kind.group(), kind.version(), name);
    let mut attempt = 0;
    loop {
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((ar, _caps)) => return Api::all_with(client.clone(), &ar),
            Err(e) => {
                let wait = super::backoff::capped(
                    attempt,
                    Duration::from_millis(500),
                    Duration::from_secs(30),
                );
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
                if tokio::task::block_in_place(|| sync.on_event(&mut InventorySink(&cluster), e)) {
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

/// The live inventory as a watch's [`Sink`]: every write also tells the
/// pending admissions that the object was observed.
pub struct InventorySink<'c>(pub &'c Cluster);

impl Sink for InventorySink<'_> {
    fn apply(&mut self, json: Json) -> Option<ObjectKey> {
        let key = ObjectKey::of(&json)?;
        self.0.update_inventory(|inventory, pending| {
            pending.observed(&key);
            if let Err(e) = inventory.upsert(&json, None) {
                tracing::warn!(object = %key, error = %e, "object not added to the inventory");
            }
        });
        Some(key)
    }

    fn delete(&mut self, key: &ObjectKey) {
        self.0.update_inventory(|inventory, pending| {
            pending.observed(key);
            inventory.remove(key)
        });
    }

    fn reset(&mut self, gk: &GroupKind, seen: &HashSet<ObjectKey>) {
        self.0.update_inventory(|inventory, pending| {
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
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
