//! The cluster's ResourceQuotas, cached for the check before a group's
//! first write ([`crate::group::quota`]), and watched so that a quota's
//! change (raised, or room freed: its `status.used` moves) wakes every
//! group of its namespace at once instead of at the end of a backoff.

use crate::group::crd::ResourceGroup;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// A cache of every ResourceQuota (few per namespace, small objects).
#[derive(Clone)]
pub struct Quotas {
    store: Store<ResourceQuota>,
}

impl Quotas {
    /// Starts the watch; each change wakes the groups of its namespace,
    /// which `groups` (the controller's own cache of groups) lists.
    /// The task ends when dropped by its caller (aborted with the term).
    pub fn start(
        client: Client,
        groups: Store<ResourceGroup>,
        wake: UnboundedSender<ObjectRef<ResourceGroup>>,
    ) -> (Quotas, tokio::task::JoinHandle<()>) {
        let (store, writer) = reflector::store();
        let events = reflector::reflector(
            writer,
            watcher::watcher(
                Api::<ResourceQuota>::all(client),
                watcher::Config::default(),
            )
            .default_backoff(),
        )
        .touched_objects();
        let task = tokio::spawn(async move {
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(q) => wake_namespace(&groups, &wake, q.namespace().as_deref()),
                    // The watcher re-lists by itself (410 Gone included).
                    Err(e) => tracing::warn!(error = %e, "ResourceQuota watch error; re-listing"),
                }
            }
        });
        (Quotas { store }, task)
    }

    /// Waits (bounded) for the first list; false if it has not completed.
    pub async fn synced(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.store.wait_until_ready())
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The quotas of `namespace`, as stored.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Value> {
        self.store
            .state()
            .iter()
            .filter(|q| q.namespace().as_deref() == Some(namespace))
            .filter_map(|q| serde_json::to_value(&**q).ok())
            .collect()
    }
}

fn wake_namespace(
    groups: &Store<ResourceGroup>,
    wake: &UnboundedSender<ObjectRef<ResourceGroup>>,
    namespace: Option<&str>,
) {
    let Some(ns) = namespace else { return };
    for g in groups.state() {
        if g.namespace().as_deref() == Some(ns) {
            let _ = wake.send(ObjectRef::from_obj(&*g));
        }
    }
}
