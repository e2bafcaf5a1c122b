//! The objects the continuous audit evaluates: every object of a kind some
//! policy may match, whole (the live inventory keeps only what policies
//! read), compressed, fed by watchers of its own.
//!
//! Decisions:
//! - Its own mutex, never the cluster state's lock: a watch event here never
//!   waits behind an admission evaluation, nor delays one.
//! - An object is marked dirty only when its bytes change (a re-list of an
//!   unchanged cluster re-evaluates nothing).
//! - Fed by the one watch driver (`cluster::driver`), as the inventory is:
//!   a re-list removes, at its end, the objects it did not see, so a
//!   dropped delete event is not kept forever.

use crate::cluster::driver::{KindSync, Sink};
use crate::inventory::ObjectKey;
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value as Json;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::task::JoinHandle;

/// One matched object: its apiVersion and its JSON, compressed.
pub struct Tracked {
    pub api_version: Arc<str>,
    pub body: Arc<[u8]>,
}

/// A tracked object's body as JSON again (the bytes are serde_json's own
/// output, compressed).
pub fn decode(body: &[u8]) -> Option<Json> {
    lz4_flex::block::decompress_size_prepended(body)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

#[derive(Default)]
pub struct Store {
    pub objects: HashMap<ObjectKey, Tracked>,
    /// Added or changed since the last pass took them.
    pub dirty: HashSet<ObjectKey>,
    /// Removed since the last pass took them.
    pub removed: HashSet<ObjectKey>,
    /// Kinds watched whose first list has not completed.
    unsynced: HashSet<GroupKind>,
}

impl Store {
    /// Adds or replaces an object; dirty only when it changed.
    pub fn upsert(&mut self, mut object: Json) -> Option<ObjectKey> {
        if let Some(meta) = object.get_mut("metadata").and_then(Json::as_object_mut) {
            // Bookkeeping, never the object's state; large on every object.
            meta.remove("managedFields");
        }
        let key = ObjectKey::of(&object)?;
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        // Serialising a `serde_json::Value` cannot fail (string keys only).
        let json = serde_json::to_vec(&object).unwrap_or_default();
        let body: Arc<[u8]> = lz4_flex::block::compress_prepend_size(&json).into();
        if self.objects.get(&key).is_some_and(|t| t.body == body) {
            return Some(key);
        }
        self.removed.remove(&key);
        self.dirty.insert(key.clone());
        let api_version = api_version.into();
        self.objects
            .insert(key.clone(), Tracked { api_version, body });
        Some(key)
    }

    pub fn remove(&mut self, key: &ObjectKey) {
        if self.objects.remove(key).is_some() {
            self.dirty.remove(key);
            self.removed.insert(key.clone());
        }
    }

    /// Removes the objects of a kind that a (re-)list did not show.
    fn remove_unseen(&mut self, kind: &GroupKind, seen: &HashSet<ObjectKey>) {
        let stale: Vec<ObjectKey> = self
            .objects
            .keys()
            .filter(|k| k.gk == *kind && !seen.contains(*k))
            .cloned()
            .collect();
        for k in &stale {
            self.remove(k);
        }
    }

    /// Forgets the objects of kinds no longer watched.
    fn retain_kinds(&mut self, kinds: &HashSet<GroupKind>) {
        let gone: Vec<ObjectKey> = self
            .objects
            .keys()
            .filter(|k| !kinds.contains(&k.gk))
            .cloned()
            .collect();
        for k in &gone {
            self.remove(k);
        }
        self.unsynced.retain(|k| kinds.contains(k));
    }

    /// Every watched kind has completed its first list.
    pub fn synced(&self) -> bool {
        self.unsynced.is_empty()
    }
}

/// The audit's store as a watch's [`Sink`].
impl Sink for Store {
    fn apply(&mut self, object: Json) -> Option<ObjectKey> {
        self.upsert(object)
    }

    fn delete(&mut self, key: &ObjectKey) {
        self.remove(key);
    }

    fn reset(&mut self, kind: &GroupKind, seen: &HashSet<ObjectKey>) {
        self.remove_unseen(kind, seen);
    }
}

/// The store behind its own lock, shared by the watchers and the loop.
#[derive(Clone, Default)]
pub struct Shared(Arc<Mutex<Store>>);

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One watcher task per matched kind, level-triggered over the set.
pub struct AuditWatchers {
    client: Client,
    store: Shared,
    running: HashMap<GroupKind, JoinHandle<()>>,
}

impl AuditWatchers {
    pub fn new(client: Client, store: Shared) -> Self {
        AuditWatchers {
            client,
            store,
            running: HashMap::new(),
        }
    }

    /// Watches exactly `kinds` (discovered resources): starts the new ones,
    /// stops the others and forgets their objects.
    pub fn set_kinds(&mut self, kinds: &[ApiResource]) {
        let wanted: HashSet<GroupKind> = kinds.iter().map(group_kind_of).collect();
        self.running.retain(|k, task| {
            let keep = wanted.contains(k);
            if !keep {
                task.abort();
            }
            keep
        });
        let mut store = self.store.lock();
        store.retain_kinds(&wanted);
        for r in kinds {
            let key = group_kind_of(r);
            if self.running.contains_key(&key) {
                continue;
            }
            store.unsynced.insert(key.clone());
            let api = Api::all_with(self.client.clone(), r);
            let task = tokio::spawn(watch_kind(api, r.clone(), self.store.clone()));
            self.running.insert(key, task);
        }
    }
}

fn group_kind_of(resource: &ApiResource) -> GroupKind {
    GroupKind::new(resource.group.as_str(), resource.kind.as_str())
}

impl Drop for AuditWatchers {
    fn drop(&mut self) {
        for t in self.running.values() {
            t.abort();
        }
    }
}

async fn watch_kind(api: Api<DynamicObject>, resource: ApiResource, store: Shared) {
    let kind = group_kind_of(&resource);
    let gvk =
        GroupVersionKind::from_api_version(resource.api_version.as_str(), resource.kind.as_str());
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut sync = KindSync::new(&gvk);
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => e,
            // The watcher re-lists by itself (410 Gone included).
            Err(e) if forbidden(&e) => {
                tracing::warn!(kind = %resource.kind, group = %resource.group, error = %e,
                    "audit: not allowed to list and watch this kind; the audit waits until it can (grant list and watch on it: manifests/base/audit-rbac.yaml)");
                continue;
            }
            Err(e) => {
                tracing::warn!(kind = %resource.kind, error = %e, "audit watch error; re-listing");
                continue;
            }
        };
        let mut store = store.lock();
        if sync.on_event(&mut *store, event) && store.unsynced.remove(&kind) {
            tracing::info!(kind = %resource.kind, objects = store.objects.len(), "audit: kind listed");
        }
    }
}

/// A 403 from the API server: RBAC, not a transient error.
fn forbidden(e: &watcher::Error) -> bool {
    matches!(e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 403)
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
