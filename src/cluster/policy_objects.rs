//! The cluster's InterlockPolicy objects (with `--cluster-policies`) and
//! the tenants' InterlockNamespacePolicy objects (`--namespace-policies`):
//! one watch per kind, folded into one snapshot that the policy reload loop
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
use crate::policy::tenant;
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

/// The tenants' kind's CRD, as committed.
pub const NAMESPACED_CRD_YAML: &str =
    include_str!("../../manifests/base/crd-interlocknamespacepolicy.yaml");

/// The objects by name (`namespace/name` for the tenants' kind).
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
    /// `--namespace-policies`: the tenants' InterlockNamespacePolicy
    /// objects too.
    pub namespaced: bool,
}

/// The kinds a process with `options` watches, each with its resource
/// (the plural) and its CRD's file.
fn kinds_of(options: &ObjectOptions) -> Vec<(GroupVersionKind, &'static str, &'static str)> {
    let mut kinds = vec![(kind(), "interlockpolicies", "crd-interlockpolicy.yaml")];
    if options.namespaced {
        kinds.push((
            namespaced_kind(),
            "interlocknamespacepolicies",
            "crd-interlocknamespacepolicy.yaml",
        ));
    }
    kinds
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
    let mut needs = Vec::new();
    for (kind, plural, crd) in kinds_of(options) {
        needs.push(Need::Served { kind, crd });
        for verb in ["list", "watch"] {
            needs.push(Need::Access(Access::new(verb, "interlock.dev", plural)));
        }
        if options.lease_name.is_some() {
            let status = format!("{plural}/status");
            needs.push(Need::Access(Access::new(
                "update",
                "interlock.dev",
                &status,
            )));
        }
    }
    if let Some(name) = &options.lease_name {
        let ns = lease_namespace(client);
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

/// The tenants' kind.
pub fn namespaced_kind() -> GroupVersionKind {
    GroupVersionKind::from_api_version(API_VERSION, tenant::KIND)
}

/// An object's name in the snapshot: its own, or `namespace/name`.
fn snapshot_name(key: &ObjectKey) -> String {
    match &*key.namespace {
        "" => key.name.to_string(),
        ns => tenant::qualified(ns, &key.name),
    }
}

/// An object (with its apiVersion and kind) as the loader needs it.
fn object_doc(mut doc: Json) -> Option<(String, ObjectDoc)> {
    let name = snapshot_name(&ObjectKey::of(&doc)?);
    let m = doc.as_object_mut()?;
    let status = m.remove("status").unwrap_or(Json::Null);
    let meta = m.get("metadata")?;
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

/// The objects seen, by snapshot name: a [`Sink`] of the watch drivers
/// (`cluster::driver`) of every kind, listed once each kind's first list
/// has ended.
pub struct ObjectSync {
    objects: BTreeMap<String, ObjectDoc>,
    /// The kinds whose first list has not ended yet.
    unlisted: HashSet<GroupKind>,
}

impl Sink for ObjectSync {
    fn apply(&mut self, object: Json) -> Option<ObjectKey> {
        let key = ObjectKey::of(&object)?;
        let (name, doc) = object_doc(object)?;
        self.objects.insert(name, doc);
        Some(key)
    }

    fn delete(&mut self, key: &ObjectKey) {
        self.objects.remove(&snapshot_name(key));
    }

    fn reset(&mut self, kind: &GroupKind, seen: &HashSet<ObjectKey>) {
        let names: HashSet<String> = seen.iter().map(snapshot_name).collect();
        self.objects
            .retain(|name, o| o.doc["kind"] != kind.kind() || names.contains(name));
        self.unlisted.remove(kind);
    }
}

impl ObjectSync {
    /// Nothing seen yet of `kinds`.
    pub fn new(kinds: &[GroupVersionKind]) -> Self {
        ObjectSync {
            objects: BTreeMap::new(),
            unlisted: kinds.iter().map(GroupVersionKind::group_kind).collect(),
        }
    }

    /// The objects, once every kind is listed.
    pub fn snapshot(&self) -> Option<Snapshot> {
        self.unlisted
            .is_empty()
            .then(|| Arc::new(self.objects.clone()))
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
    let kinds: Vec<GroupVersionKind> = kinds_of(&options).into_iter().map(|k| k.0).collect();
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
        kinds,
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

/// Watches the objects of `kinds` until aborted: every event to `stored`,
/// and to `specs` when what compiles changed.
async fn watch(
    client: Client,
    cluster: Arc<Cluster>,
    kinds: Vec<GroupVersionKind>,
    specs: channel::Sender<Option<Snapshot>>,
    stored: channel::Sender<Snapshot>,
) {
    let mut streams = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        let missing = format!(
            "{} is not served (CRD not installed?): --cluster-policies/--namespace-policies need it; not ready until it is",
            kind.kind()
        );
        let api = super::exceptions::discover(&client, kind.kind(), &missing).await;
        let config = watcher::Config::default()
            .timeout(cluster.options.watch_timeout.as_secs().max(1) as u32);
        let stream = watcher::watcher(api, config).default_backoff();
        streams.push(stream.map(move |e| (i, e)).boxed());
    }
    let mut stream = futures::stream::select_all(streams);
    let mut sync = ObjectSync::new(&kinds);
    let mut drivers: Vec<KindSync> = kinds.iter().map(KindSync::new).collect();
    while let Some((i, event)) = stream.next().await {
        match event {
            Ok(e) => {
                drivers[i].on_event(&mut sync, e);
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
            Err(e) => {
                tracing::warn!(kind = %kinds[i].kind(), error = %e, "policy object watch error; re-listing")
            }
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
            let Some((api, own_name)) = status_api(&client, &o.doc) else {
                continue;
            };
            match api
                .replace_status(own_name, &PostParams::default(), &object)
                .await
            {
                Ok(_) => tracing::info!(policy = %name, generation = o.generation,
                    ready = %status["conditions"][0]["status"], "policy object status written"),
                Err(e) => {
                    tracing::warn!(policy = %name, error = %e, "policy object status not written")
                }
            }
        }
    }
}

/// Where an object's status is written (its kind, in its namespace when it
/// has one), and its own name there.
fn status_api<'d>(client: &Client, doc: &'d Json) -> Option<(Api<DynamicObject>, &'d str)> {
    let kind = doc["kind"].as_str()?;
    let name = doc.pointer("/metadata/name")?.as_str()?;
    let gvk = kube::api::GroupVersionKind::gvk("interlock.dev", "v1alpha1", kind);
    let ar = kube::api::ApiResource::from_gvk(&gvk);
    let api = match doc.pointer("/metadata/namespace").and_then(Json::as_str) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    Some((api, name))
}

#[cfg(test)]
#[path = "policy_objects_tests.rs"]
mod tests;
