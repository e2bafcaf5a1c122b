//! The cluster's InterlockPolicy objects (with `--cluster-policies`): one
//! watch folds their events into a snapshot that the policy reload loop
//! (reload.rs) loads beside the files, level-triggered: every reload reads
//! the whole snapshot, never an event. The status each object should have
//! (computed by `policy::objects`) is written by the replica that holds the
//! policy-status Lease, through the status subresource, only when it
//! differs from the stored one.
//!
//! The fold ([`ObjectSync`]) is a [`Sink`] of the one watch driver, as the
//! inventory's and the audit's stores are.

use super::driver::{KindSync, Sink};
use super::lease::{Elector, LeaseConfig};
use super::prereq::{Access, Need};
use super::Cluster;
use crate::inventory::ObjectKey;
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use crate::policy::objects::{status_differs, ObjectDoc, KIND};
use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch as channel;

pub const API_VERSION: &str = "interlock.dev/v1alpha1";

/// The kind's CRD, as committed (`interlock crd`).
pub const CRD_YAML: &str = include_str!("../../manifests/base/crd-interlockpolicy.yaml");

/// The objects by name.
pub type Snapshot = Arc<BTreeMap<String, ObjectDoc>>;

/// How a process takes part in the cluster's policy objects.
#[derive(Debug, Clone)]
pub struct ObjectOptions {
    /// The Lease whose holder writes the objects' statuses (`serve`'s
    /// replicas campaign for it; None: this process writes none, as the
    /// controller, which only reads the objects).
    pub lease_name: Option<String>,
    /// This replica's identity in it.
    pub identity: String,
}

/// Where the policy-status Lease lives: the Pod's namespace, else the
/// kubeconfig's.
fn lease_namespace(client: &Client) -> String {
    std::env::var("POD_NAMESPACE").unwrap_or_else(|_| client.default_namespace().to_string())
}

/// What a process with `options` needs of the cluster, for its readiness
/// and its one log line naming what is missing: the kind served and
/// watchable and, for the status writer, its Lease and the status verb.
pub fn needs(client: &Client, options: &ObjectOptions) -> Vec<Need> {
    let mut needs = vec![Need::Served {
        kind: kind(),
        crd: "crd-interlockpolicy.yaml",
    }];
    for verb in ["list", "watch"] {
        needs.push(Need::Access(Access::new(
            verb,
            "interlock.dev",
            "interlockpolicies",
        )));
    }
    if let Some(name) = &options.lease_name {
        let ns = lease_namespace(client);
        needs.push(Need::Access(Access::new(
            "update",
            "interlock.dev",
            "interlockpolicies/status",
        )));
        needs.push(Need::Access(
            Access::new("create", "coordination.k8s.io", "leases").in_namespace(&ns),
        ));
        for verb in ["get", "update"] {
            needs.push(Need::Access(
                Access::new(verb, "coordination.k8s.io", "leases")
                    .in_namespace(&ns)
                    .named(name),
            ));
        }
    }
    needs
}

/// The kind as the readiness bookkeeping names it.
pub fn kind() -> GroupVersionKind {
    GroupVersionKind::from_api_version(API_VERSION, KIND)
}

/// An object (with its apiVersion and kind) as the loader needs it.
fn object_doc(mut doc: Json) -> Option<(String, ObjectDoc)> {
    let m = doc.as_object_mut()?;
    let status = m.remove("status").unwrap_or(Json::Null);
    let meta = m.get("metadata")?;
    let name = meta.get("name")?.as_str()?.to_string();
    let uid = meta
        .get("uid")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string();
    let generation = meta
        .get("generation")
        .and_then(Json::as_i64)
        .unwrap_or_default();
    Some((
        name,
        ObjectDoc {
            uid,
            generation,
            doc,
            status,
        },
    ))
}

/// The objects seen, by name: a [`Sink`] of the one watch driver
/// (`cluster::driver`), listed once its first list has ended.
#[derive(Default)]
pub struct ObjectSync {
    objects: BTreeMap<String, ObjectDoc>,
    listed: bool,
}

impl Sink for ObjectSync {
    fn apply(&mut self, object: Json) -> Option<ObjectKey> {
        let key = ObjectKey::of(&object)?;
        let (name, doc) = object_doc(object)?;
        self.objects.insert(name, doc);
        Some(key)
    }

    fn delete(&mut self, key: &ObjectKey) {
        self.objects.remove(&*key.name);
    }

    fn reset(&mut self, _kind: &GroupKind, seen: &HashSet<ObjectKey>) {
        self.objects
            .retain(|name, _| seen.iter().any(|k| &*k.name == name));
        self.listed = true;
    }
}

impl ObjectSync {
    /// The objects, once listed.
    pub fn snapshot(&self) -> Option<Snapshot> {
        self.listed.then(|| Arc::new(self.objects.clone()))
    }
}

/// What reloads compile: the same names, uids and generations compile the
/// same (a status write or a label change needs no reload).
fn specs_of(s: &BTreeMap<String, ObjectDoc>) -> Vec<(&String, &str, i64)> {
    s.iter()
        .map(|(n, o)| (n, o.uid.as_str(), o.generation))
        .collect()
}

/// The channels between the watch, the reload loop and the status writer.
pub struct Feeds {
    /// Snapshots whose specs changed (None until the first list).
    pub specs: channel::Receiver<Option<Snapshot>>,
    /// The statuses the reload loop computed, by name.
    pub desired: channel::Sender<Arc<BTreeMap<String, Json>>>,
}

/// Starts the watch, the Lease campaign and the status writer; returns
/// their tasks and what the reload loop reads and writes.
pub fn start(
    client: Client,
    cluster: Arc<Cluster>,
    options: ObjectOptions,
) -> (Vec<tokio::task::JoinHandle<()>>, Feeds) {
    let (specs_tx, specs) = channel::channel(None);
    let (stored_tx, stored) = channel::channel(Arc::new(BTreeMap::new()));
    let (desired, desired_rx) = channel::channel(Arc::new(BTreeMap::new()));
    let leading = Arc::new(AtomicBool::new(false));
    let lease = options.lease_name.map(|name| LeaseConfig {
        namespace: lease_namespace(&client),
        name,
        identity: options.identity,
        duration: Duration::from_secs(15),
        renew_every: Duration::from_secs(5),
    });
    let mut tasks = vec![tokio::spawn(watch(
        client.clone(),
        cluster,
        specs_tx,
        stored_tx,
    ))];
    if let Some(lease) = lease {
        tasks.push(tokio::spawn(campaign(
            Elector::new(client.clone(), lease),
            leading.clone(),
        )));
        tasks.push(tokio::spawn(write_statuses(
            client, desired_rx, stored, leading,
        )));
    }
    (tasks, Feeds { specs, desired })
}

/// Watches the objects until aborted: every event to `stored`, and to
/// `specs` when what compiles changed.
async fn watch(
    client: Client,
    cluster: Arc<Cluster>,
    specs: channel::Sender<Option<Snapshot>>,
    stored: channel::Sender<Snapshot>,
) {
    let api = super::exceptions::discover(
        &client,
        KIND,
        "InterlockPolicy is not served (CRD not installed?): --cluster-policies needs it; not ready until it is",
    )
    .await;
    let config =
        watcher::Config::default().timeout(cluster.options.watch_timeout.as_secs().max(1) as u32);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut sync = ObjectSync::default();
    let mut driver = KindSync::new(&kind());
    while let Some(event) = stream.next().await {
        match event {
            Ok(e) => {
                driver.on_event(&mut sync, e);
                let Some(now) = sync.snapshot() else { continue };
                stored.send_replace(now.clone());
                specs.send_if_modified(|old| {
                    let same = old.as_ref().is_some_and(|o| specs_of(o) == specs_of(&now));
                    if !same {
                        *old = Some(now);
                    }
                    !same
                });
            }
            Err(e) => tracing::warn!(error = %e, "InterlockPolicy watch error; re-listing"),
        }
    }
}

/// Holds the policy-status Lease whenever it can; `leading` says whether
/// this replica holds it now.
async fn campaign(elector: Elector, leading: Arc<AtomicBool>) {
    loop {
        let term = elector.acquire().await;
        leading.store(true, Ordering::Release);
        let lost = elector.keep(term).await;
        leading.store(false, Ordering::Release);
        tracing::warn!(error = %lost, "no longer writing InterlockPolicy statuses");
    }
}

/// Writes each desired status that the stored object does not have, while
/// this replica leads; looks again on every change and every few seconds
/// (a lease won, a write that failed).
async fn write_statuses(
    client: Client,
    mut desired: channel::Receiver<Arc<BTreeMap<String, Json>>>,
    mut stored: channel::Receiver<Snapshot>,
    leading: Arc<AtomicBool>,
) {
    let gvk = kube::api::GroupVersionKind::gvk("interlock.dev", "v1alpha1", KIND);
    let ar = kube::api::ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    loop {
        tokio::select! {
            _ = desired.changed() => {}
            _ = stored.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        if !leading.load(Ordering::Acquire) {
            continue;
        }
        let want = desired.borrow_and_update().clone();
        let have = stored.borrow_and_update().clone();
        for (name, status) in want.iter() {
            let Some(o) = have.get(name) else { continue };
            // A newer generation is being compiled; its own status follows.
            let current = status["observedGeneration"].as_i64() == Some(o.generation);
            if !current || !status_differs(o, status) {
                continue;
            }
            // A replace carrying the resourceVersion read: a status computed
            // from an older object is refused (409) and looked at again.
            let mut whole = o.doc.clone();
            whole["status"] = status.clone();
            let Ok(object) = serde_json::from_value::<DynamicObject>(whole) else {
                continue;
            };
            match api
                .replace_status(name, &PostParams::default(), &object)
                .await
            {
                Ok(_) => tracing::info!(policy = %name, generation = o.generation,
                    ready = %status["conditions"][0]["status"], "InterlockPolicy status written"),
                Err(e) => {
                    tracing::warn!(policy = %name, error = %e, "InterlockPolicy status not written")
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "policy_objects_tests.rs"]
mod tests;
