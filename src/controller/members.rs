//! The controller's caches of group members: one watch per member kind,
//! started when a group first names the kind, watching only objects that
//! carry the ApplySet part-of label, into a store indexed by group
//! ([`super::index`]). Every change to such an object wakes the group that
//! owns it (its controller ownerReference), so a member edited or deleted
//! by hand is reconciled back.

use super::index::Indexed;
use crate::cluster::driver::KindSync;
use crate::group::crd::{ResourceGroup, PART_OF_LABEL};
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use crate::k8s::kinds::{group_of, version_of};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::discovery::Scope;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// One member kind: how to reach it, and what of it the cache holds.
pub struct KindCache {
    pub resource: ApiResource,
    pub namespaced: bool,
    store: Arc<RwLock<Indexed>>,
    /// True once the first list is complete.
    listed: watch::Receiver<bool>,
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
        let mut listed = self.listed.clone();
        tokio::time::timeout(within, listed.wait_for(|l| *l))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The store, to read (held briefly: the watch waits for it).
    pub fn read(&self) -> RwLockReadGuard<'_, Indexed> {
        self.store.read().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct Members {
    client: Client,
    wake: UnboundedSender<ObjectRef<ResourceGroup>>,
    kinds: Mutex<HashMap<GroupKind, Arc<KindCache>>>,
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
        kinds.get(&GroupKind::new(group, kind)).cloned()
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
        let gvk = kube::api::GroupVersionKind::gvk(group, version_of(api_version), kind);
        let (resource, caps) = match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok(found) => found,
            Err(kube::Error::Discovery(_)) => return Ok(None),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(e) => return Err(e),
        };
        let namespaced = matches!(caps.scope, Scope::Namespaced);
        let mut kinds = self.kinds.lock().unwrap_or_else(|p| p.into_inner());
        let entry = kinds
            .entry(GroupKind::new(group, kind))
            .or_insert_with(|| Arc::new(self.start(resource, namespaced)));
        Ok(Some(entry.clone()))
    }

    fn start(&self, resource: ApiResource, namespaced: bool) -> KindCache {
        let kind = GroupVersionKind::from_api_version(
            resource.api_version.as_str(),
            resource.kind.as_str(),
        );
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let config = watcher::Config::default().labels(PART_OF_LABEL);
        let events = watcher::watcher(api, config).default_backoff();
        let store = Arc::new(RwLock::new(Indexed::default()));
        let (listed_tx, listed) = watch::channel(false);
        let task = tokio::spawn(feed(
            events,
            store.clone(),
            listed_tx,
            self.wake.clone(),
            kind,
        ));
        KindCache {
            resource,
            namespaced,
            store,
            listed,
            task,
        }
    }
}

/// Applies the watch's events to the store through the watch driver and
/// wakes the groups of the objects they touch. The first list wakes
/// nobody: every group whose pass reads this kind waits for that list
/// before deciding.
async fn feed(
    events: impl futures::Stream<Item = watcher::Result<watcher::Event<DynamicObject>>>,
    store: Arc<RwLock<Indexed>>,
    listed: watch::Sender<bool>,
    wake: UnboundedSender<ObjectRef<ResourceGroup>>,
    kind: GroupVersionKind,
) {
    let mut sync = KindSync::new(&kind);
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(e) => e,
            // The watcher re-lists by itself (410 Gone included).
            Err(e) => {
                tracing::warn!(kind = %kind.kind(), error = %e, "member watch error; re-listing");
                continue;
            }
        };
        let (first_list, touched) = {
            let mut store = store.write().unwrap_or_else(|p| p.into_inner());
            (sync.on_event(&mut *store, event), store.touched())
        };
        if first_list {
            listed.send_replace(true);
            tracing::debug!(kind = %kind.kind(), "member cache listed");
        }
        if !*listed.borrow() || first_list {
            continue;
        }
        for g in touched.iter().filter_map(|o| o.owner()) {
            let _ = wake.send(g);
        }
    }
}
