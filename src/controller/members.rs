//! The controller's caches of group members: one reflector per member kind,
//! started when a group first names the kind, watching only objects that
//! carry the ApplySet part-of label. Every change to such an object wakes
//! the group that owns it (its controller ownerReference), so a member
//! edited or deleted by hand is reconciled back.

use crate::group::crd::{ResourceGroup, API_VERSION, KIND, PART_OF_LABEL};
use crate::k8s::kinds::{group_of, version_of};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Scope;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

/// One member kind: how to reach it, and what of it the cache holds.
pub struct KindCache {
    pub resource: ApiResource,
    pub namespaced: bool,
    pub store: Store<DynamicObject>,
    task: JoinHandle<()>,
}

impl Drop for KindCache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KindCache {
    /// Waits (bounded) for the first list; false if it has not completed.
    pub async fn synced(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.store.wait_until_ready())
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

pub struct Members {
    client: Client,
    wake: UnboundedSender<ObjectRef<ResourceGroup>>,
    kinds: Mutex<HashMap<(String, String), Arc<KindCache>>>,
}

impl Members {
    pub fn new(client: Client, wake: UnboundedSender<ObjectRef<ResourceGroup>>) -> Self {
        Members {
            client,
            wake,
            kinds: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, group: &str, kind: &str) -> Option<Arc<KindCache>> {
        let kinds = self.kinds.lock().unwrap_or_else(|p| p.into_inner());
        kinds.get(&(group.to_string(), kind.to_string())).cloned()
    }

    /// The cache of a kind, started on first use. `Ok(None)`: the cluster
    /// does not serve the kind (not cached, so a CRD installed later is
    /// found on the next reconcile).
    pub async fn kind(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Arc<KindCache>>, kube::Error> {
        let group = group_of(api_version);
        if let Some(c) = self.cached(group, kind) {
            return Ok(Some(c));
        }
        let gvk = GroupVersionKind::gvk(group, version_of(api_version), kind);
        let (resource, caps) = match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok(found) => found,
            Err(kube::Error::Discovery(_)) => return Ok(None),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(e) => return Err(e),
        };
        let namespaced = matches!(caps.scope, Scope::Namespaced);
        let mut kinds = self.kinds.lock().unwrap_or_else(|p| p.into_inner());
        let entry = kinds
            .entry((group.to_string(), kind.to_string()))
            .or_insert_with(|| Arc::new(self.start(resource, namespaced)));
        Ok(Some(entry.clone()))
    }

    fn start(&self, resource: ApiResource, namespaced: bool) -> KindCache {
        let writer = reflector::store::Writer::<DynamicObject>::new(resource.clone());
        let store = writer.as_reader();
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let config = watcher::Config::default().labels(PART_OF_LABEL);
        let wake = self.wake.clone();
        let kind = resource.kind.clone();
        let stream = reflector::reflector(writer, watcher::watcher(api, config).default_backoff())
            .touched_objects();
        let task = tokio::spawn(async move {
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(o) => {
                        if let Some(g) = owner(&o) {
                            let _ = wake.send(g);
                        }
                    }
                    // The watcher re-lists by itself (410 Gone included).
                    Err(e) => {
                        tracing::warn!(kind = %kind, error = %e, "member watch error; re-listing")
                    }
                }
            }
        });
        KindCache {
            resource,
            namespaced,
            store,
            task,
        }
    }
}

/// The group an object belongs to: its controller ownerReference to a
/// ResourceGroup (the label alone proves nothing: anyone can write it).
pub fn owner(o: &DynamicObject) -> Option<ObjectRef<ResourceGroup>> {
    let ns = o.metadata.namespace.as_deref()?;
    o.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true) && r.kind == KIND && r.api_version == API_VERSION)
        .map(|r| ObjectRef::new(&r.name).within(ns))
}
