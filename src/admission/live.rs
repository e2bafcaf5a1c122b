//! The live inventory: one kube-runtime watcher per kind some policy reads
//! (plus Namespaces), applied to the inventory event by event.
//!
//! A re-list (after 410 Gone or a restart of the watch) upserts every object
//! it sees and only at its end removes the objects it did not see, so the
//! indexes are never empty in between.

use super::Engine;
use crate::inventory::ObjectKey;
use crate::policy::resources::{group_of, version_of};
use futures::StreamExt;
use kube::api::{Api, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value as Json;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Keeps what policies may read and drops what they must not hold: managed
/// fields (large, never useful) and Secret data (no secret data is kept in
/// memory; a policy sees a Secret's data only in the object under review).
pub fn project(mut object: Json) -> Json {
    let is_secret = object.get("kind").and_then(Json::as_str) == Some("Secret")
        && object.get("apiVersion").and_then(Json::as_str) == Some("v1");
    if let Some(m) = object.as_object_mut() {
        if is_secret {
            m.remove("data");
            m.remove("stringData");
        }
        if let Some(meta) = m.get_mut("metadata").and_then(Json::as_object_mut) {
            meta.remove("managedFields");
            if let Some(ann) = meta.get_mut("annotations").and_then(Json::as_object_mut) {
                ann.remove("kubectl.kubernetes.io/last-applied-configuration");
            }
        }
    }
    object
}

/// Starts a watcher per kind; marks the engine ready once every kind has
/// been listed once. Returns when every watcher has failed to start.
pub async fn run(
    client: Client,
    engine: Arc<Engine>,
    kinds: Vec<(String, String)>,
) -> anyhow::Result<()> {
    let pending = Arc::new(AtomicUsize::new(kinds.len()));
    let mut tasks = Vec::new();
    for (api_version, kind) in kinds {
        let gvk = GroupVersionKind::gvk(group_of(&api_version), version_of(&api_version), &kind);
        let (ar, _caps) = kube::discovery::pinned_kind(&client, &gvk)
            .await
            .map_err(|e| {
                anyhow::anyhow!("cannot find {kind} ({api_version}) in the cluster: {e}")
            })?;
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let engine = engine.clone();
        let pending = pending.clone();
        tasks.push(tokio::spawn(async move {
            watch_kind(api, engine, pending, api_version, kind).await;
        }));
    }
    futures::future::join_all(tasks).await;
    Ok(())
}

async fn watch_kind(
    api: Api<DynamicObject>,
    engine: Arc<Engine>,
    pending: Arc<AtomicUsize>,
    api_version: String,
    kind: String,
) {
    let config =
        watcher::Config::default().timeout(engine.options.watch_timeout.as_secs().max(1) as u32);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut sync = KindSync::new(group_of(&api_version), &kind);
    while let Some(event) = stream.next().await {
        match event {
            Ok(e) => {
                if sync.on_event(&engine, e) && pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                    engine.set_ready(true);
                    tracing::info!("inventory synced; ready");
                }
            }
            // The watcher re-lists by itself (410 Gone included).
            Err(e) => tracing::warn!(kind = %kind, error = %e, "watch error; re-listing"),
        }
    }
}

/// One kind's watch state: the keys a (re-)list has shown so far.
pub struct KindSync {
    group: String,
    kind: String,
    seen: HashSet<ObjectKey>,
    synced: bool,
}

impl KindSync {
    pub fn new(group: &str, kind: &str) -> Self {
        KindSync {
            group: group.into(),
            kind: kind.into(),
            seen: HashSet::new(),
            synced: false,
        }
    }

    /// Applies one watch event; returns true on the first completed list.
    pub fn on_event(&mut self, engine: &Engine, event: Event<DynamicObject>) -> bool {
        match event {
            Event::Init => self.seen.clear(),
            Event::InitApply(o) => {
                if let Some(k) = apply(engine, o) {
                    self.seen.insert(k);
                }
            }
            Event::InitDone => {
                remove_unseen(engine, &self.group, &self.kind, &self.seen);
                self.seen.clear();
                let first = !self.synced;
                self.synced = true;
                return first;
            }
            Event::Apply(o) => {
                apply(engine, o);
            }
            Event::Delete(o) => {
                if let Some(k) = serde_json::to_value(&o)
                    .ok()
                    .as_ref()
                    .and_then(ObjectKey::of)
                {
                    engine.update(|st| {
                        st.pending.observed(&k);
                        st.inventory.remove(&k)
                    });
                }
            }
        }
        false
    }
}

fn apply(engine: &Engine, o: DynamicObject) -> Option<ObjectKey> {
    let json = project(serde_json::to_value(&o).ok()?);
    let key = ObjectKey::of(&json)?;
    engine.update(|st| {
        st.pending.observed(&key);
        if let Err(e) = st.inventory.upsert(Arc::new(json), None) {
            tracing::warn!(object = %key, error = %e, "object not added to the inventory");
        }
    });
    Some(key)
}

fn remove_unseen(engine: &Engine, group: &str, kind: &str, seen: &HashSet<ObjectKey>) {
    engine.update(|st| {
        let stale: Vec<ObjectKey> = st
            .inventory
            .list(group, kind, None)
            .into_iter()
            .map(|e| e.key.clone())
            .filter(|k| !seen.contains(k) && !st.pending.contains(k))
            .collect();
        for k in stale {
            st.inventory.remove(&k);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::EngineOptions;
    use crate::inventory::Inventory;
    use crate::policy::PolicySet;

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
        let engine = Engine::new(PolicySet::default(), inv, EngineOptions::default());
        let mut sync = KindSync::new("networking.k8s.io", "Ingress");
        assert!(!sync.on_event(&engine, Event::Init));
        sync.on_event(&engine, Event::InitApply(ingress("a", "one", "a.example")));
        sync.on_event(&engine, Event::InitApply(ingress("b", "two", "b.example")));
        assert!(
            sync.on_event(&engine, Event::InitDone),
            "first list completes the sync"
        );
        // A re-list (after 410 Gone) that no longer contains `two`.
        sync.on_event(&engine, Event::Init);
        sync.on_event(&engine, Event::InitApply(ingress("a", "one", "a.example")));
        engine.read(|st| {
            assert_eq!(
                st.inventory.lookup_index(id, "b.example").len(),
                1,
                "still answered mid re-list"
            );
        });
        assert!(
            !sync.on_event(&engine, Event::InitDone),
            "only the first list counts for readiness"
        );
        engine.read(|st| {
            assert!(st.inventory.lookup_index(id, "b.example").is_empty());
            assert_eq!(st.inventory.lookup_index(id, "a.example").len(), 1);
            let e = st.inventory.list("networking.k8s.io", "Ingress", Some("a"))[0];
            assert!(
                e.object.pointer("/metadata/managedFields").is_none(),
                "managed fields are not kept"
            );
        });
        sync.on_event(&engine, Event::Delete(ingress("a", "one", "a.example")));
        engine.read(|st| assert!(st.inventory.lookup_index(id, "a.example").is_empty()));
    }

    #[test]
    fn secret_data_is_never_kept() {
        let s = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"},
            "data": {"k": "c2VjcmV0"}, "stringData": {"k": "secret"}});
        let p = project(s);
        assert!(p.get("data").is_none() && p.get("stringData").is_none());
        assert_eq!(p["metadata"]["name"], "x");
    }
}
