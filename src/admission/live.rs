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
    let start = || {
        watcher::watcher(api.clone(), config.clone())
            .default_backoff()
            .boxed()
    };
    let mut stream = start();
    let mut relist = engine.relist_requests();
    relist.mark_unchanged();
    engine.watcher_started();
    let mut sync = KindSync::new(&api_version, &kind);
    let mut relisting = false;
    loop {
        let event = tokio::select! {
            event = stream.next() => event,
            Ok(()) = relist.changed() => {
                relist.mark_unchanged();
                // A new stream starts with a list; KindSync reconciles it
                // without emptying the indexes.
                tracing::info!(kind = %kind, "re-listing: the policies read more of this kind");
                stream = start();
                relisting = true;
                continue;
            }
        };
        match event {
            None => break,
            Some(Ok(e)) => {
                let list_done = matches!(e, Event::InitDone);
                if sync.on_event(&engine, e) && pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                    engine.set_ready(true);
                    tracing::info!("inventory synced; ready");
                }
                if list_done && relisting {
                    relisting = false;
                    engine.relist_done();
                }
            }
            // The watcher re-lists by itself (410 Gone included).
            Some(Err(e)) => tracing::warn!(kind = %kind, error = %e, "watch error; re-listing"),
        }
    }
}

/// One kind's watch state: the keys a (re-)list has shown so far.
pub struct KindSync {
    api_version: String,
    group: String,
    kind: String,
    seen: HashSet<ObjectKey>,
    synced: bool,
}

impl KindSync {
    pub fn new(api_version: &str, kind: &str) -> Self {
        KindSync {
            api_version: api_version.into(),
            group: group_of(api_version).into(),
            kind: kind.into(),
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
            m.insert("apiVersion".into(), self.api_version.clone().into());
        }
        if !m.contains_key("kind") {
            m.insert("kind".into(), self.kind.clone().into());
        }
        Some(json)
    }

    /// Applies one watch event; returns true on the first completed list.
    pub fn on_event(&mut self, engine: &Engine, event: Event<DynamicObject>) -> bool {
        match event {
            Event::Init => self.seen.clear(),
            Event::InitApply(o) => {
                if let Some(k) = self.json(&o).and_then(|j| apply(engine, j)) {
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
                if let Some(j) = self.json(&o) {
                    apply(engine, j);
                }
            }
            Event::Delete(o) => {
                if let Some(k) = self.json(&o).as_ref().and_then(ObjectKey::of) {
                    engine.update_inventory(|inventory, pending| {
                        pending.observed(&k);
                        inventory.remove(&k)
                    });
                }
            }
        }
        false
    }
}

fn apply(engine: &Engine, json: Json) -> Option<ObjectKey> {
    let key = ObjectKey::of(&json)?;
    engine.update_inventory(|inventory, pending| {
        pending.observed(&key);
        if let Err(e) = inventory.upsert(&json, None) {
            tracing::warn!(object = %key, error = %e, "object not added to the inventory");
        }
    });
    Some(key)
}

fn remove_unseen(engine: &Engine, group: &str, kind: &str, seen: &HashSet<ObjectKey>) {
    engine.update_inventory(|inventory, pending| {
        let stale: Vec<ObjectKey> = inventory
            .list(group, kind, None)
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
    use crate::admission::EngineOptions;
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
        let engine = Engine::new(PolicySet::default(), inv, EngineOptions::default());
        let mut sync = KindSync::new("networking.k8s.io/v1", "Ingress");
        assert!(!sync.on_event(&engine, Event::Init));
        sync.on_event(
            &engine,
            Event::InitApply(listed(ingress("a", "one", "a.example"))),
        );
        sync.on_event(
            &engine,
            Event::InitApply(listed(ingress("b", "two", "b.example"))),
        );
        assert!(
            sync.on_event(&engine, Event::InitDone),
            "first list completes the sync"
        );
        // A re-list (after 410 Gone) that no longer contains `two`.
        sync.on_event(&engine, Event::Init);
        sync.on_event(
            &engine,
            Event::InitApply(listed(ingress("a", "one", "a.example"))),
        );
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
                e.object.json().pointer("/metadata/managedFields").is_none(),
                "managed fields are not kept"
            );
        });
        sync.on_event(&engine, Event::Delete(ingress("a", "one", "a.example")));
        engine.read(|st| assert!(st.inventory.lookup_index(id, "a.example").is_empty()));
    }
}

#[cfg(test)]
mod reload_tests {
    use super::*;
    use crate::admission::EngineOptions;
    use crate::inventory::Inventory;
    use crate::policy::{PolicySet, Request};

    const HOSTS: &str = "
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: unique-host}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [networking.k8s.io], apiVersions: [v1], resources: [ingresses], operations: [CREATE]}
  indexes:
    - {name: hosts, apiVersion: networking.k8s.io/v1, kind: Ingress, keys: 'object.spec.rules.map(r, r.host)'}
  validations:
    - expression: \"object.spec.rules.all(r, inventory.index('hosts', r.host).size() == 0)\"
";
    const TLS: &str = "
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: unique-tls}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [networking.k8s.io], apiVersions: [v1], resources: [ingresses], operations: [CREATE]}
  indexes:
    - {name: tls, apiVersion: networking.k8s.io/v1, kind: Ingress, keys: \"object.spec.?tls.orValue([]).map(t, t.secretName)\"}
  validations:
    - expression: \"object.spec.?tls.orValue([]).all(t, inventory.index('tls', t.secretName).size() == 0)\"
";

    fn compile(texts: &[&str], inventory: &mut Inventory) -> PolicySet {
        let docs: Vec<_> = texts
            .iter()
            .flat_map(|t| {
                crate::manifest::load_str(
                    crate::manifest::Source::file("p.yaml"),
                    t,
                    crate::manifest::Format::Yaml,
                    &Default::default(),
                )
                .documents
            })
            .collect();
        let (set, errors) = PolicySet::compile_documents(docs, inventory);
        assert!(errors.is_empty(), "{errors:?}");
        set
    }

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
        let engine = Engine::new(set, inv, EngineOptions::default());
        let mut sync = KindSync::new("networking.k8s.io/v1", "Ingress");
        let one = ingress("one", "u1", "cert");
        sync.on_event(&engine, Event::Init);
        sync.on_event(
            &engine,
            Event::InitApply(super::tests::listed(serde_json::from_value(one).unwrap())),
        );
        sync.on_event(&engine, Event::InitDone);
        engine.update(|st| {
            let set = compile(&[HOSTS, TLS], &mut st.inventory);
            let p = set.projection(&st.inventory);
            assert!(*st.inventory.projection() != p);
            st.inventory.set_projection(p);
            st.policies = set;
        });
        let two = ingress("two", "u2", "cert");
        let denied = |engine: &Engine| {
            engine.read(|st| {
                let r = Request::create(&two, "me").unwrap();
                !st.policies.evaluate(&r, &st.inventory).0.is_empty()
            })
        };
        assert!(
            !denied(&engine),
            "before the re-list the inventory lacks tls"
        );
        sync.on_event(&engine, Event::Init);
        sync.on_event(
            &engine,
            Event::InitApply(super::tests::listed(
                serde_json::from_value(ingress("one", "u1", "cert")).unwrap(),
            )),
        );
        sync.on_event(&engine, Event::InitDone);
        assert!(denied(&engine), "after the re-list the new rule sees tls");
    }
}
