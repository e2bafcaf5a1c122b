//! InterlockException objects of the cluster into the cluster state, for
//! `serve`, the controller and the continuous audit alike: one watcher over
//! every namespace. An exception applies from the event that shows it, is
//! dropped with the event of its deletion, and stops applying at its expiry
//! (evaluations read the clock; a timer also starts a new policy generation
//! then, so the continuous audit evaluates again without a restart).
//!
//! The watch holds readiness only from the moment the kind is found until
//! its first list: a process that restarts must not deny, for a moment,
//! what an exception admits. A cluster without the CRD is not an error:
//! only file exceptions apply, and the kind is looked for again with backoff.

use super::Cluster;
use crate::k8s::kind::GroupVersionKind;
use crate::policy::exceptions::{confine, Exception, CLUSTER_KIND};
use crate::policy::SpecError;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub const API_VERSION: &str = "interlock.dev/v1alpha1";

/// The kind's CRD, as committed (`interlock crd`).
pub const CRD_YAML: &str = include_str!("../../manifests/base/crd-interlockexception.yaml");

/// The exception objects seen, by namespace/name.
pub struct ExceptionSync {
    cluster_wide: String,
    objects: BTreeMap<String, Json>,
    /// The objects of a (re-)list in progress; swapped in at its end.
    listing: Option<BTreeMap<String, Json>>,
}

/// An object as JSON with its kind (list items carry none), keyed ns/name.
fn keyed(o: &DynamicObject) -> Option<(String, Json)> {
    let mut json = serde_json::to_value(o).ok()?;
    let m = json.as_object_mut()?;
    m.insert("apiVersion".into(), API_VERSION.into());
    m.insert("kind".into(), CLUSTER_KIND.into());
    let ns = o.metadata.namespace.as_deref().unwrap_or_default();
    Some((format!("{ns}/{}", o.metadata.name.as_deref()?), json))
}

/// Compiles one exception object, confined to what its namespace may except.
pub fn compile(mut doc: Json, cluster_wide: &str) -> Result<Exception, SpecError> {
    confine(&mut doc, cluster_wide)?;
    let name = doc
        .pointer("/metadata/name")
        .and_then(Json::as_str)
        .unwrap_or("<unnamed>")
        .to_string();
    Exception::parse(&name, &doc)
}

impl ExceptionSync {
    pub fn new(cluster_wide: &str) -> Self {
        ExceptionSync {
            cluster_wide: cluster_wide.into(),
            objects: BTreeMap::new(),
            listing: None,
        }
    }

    /// Applies one watch event; true when the set of objects may have changed.
    pub fn on_event(&mut self, event: Event<DynamicObject>) -> bool {
        match event {
            Event::Init => {
                self.listing = Some(BTreeMap::new());
                false
            }
            Event::InitApply(o) => {
                if let (Some(l), Some((k, j))) = (&mut self.listing, keyed(&o)) {
                    l.insert(k, j);
                }
                false
            }
            Event::InitDone => {
                self.objects = self.listing.take().unwrap_or_default();
                true
            }
            Event::Apply(o) => keyed(&o).map(|(k, j)| self.objects.insert(k, j)).is_some(),
            Event::Delete(o) => keyed(&o)
                .and_then(|(k, _)| self.objects.remove(&k))
                .is_some(),
        }
    }

    /// The exceptions that compile; each that does not is logged and left
    /// out (it excepts nothing, so the policy keeps denying).
    pub fn compiled(&self) -> Vec<Exception> {
        self.objects
            .iter()
            .filter_map(
                |(key, doc)| match compile(doc.clone(), &self.cluster_wide) {
                    Ok(e) => Some(e),
                    Err(e) => {
                        tracing::warn!(exception = %key, error = %e, "InterlockException ignored");
                        None
                    }
                },
            )
            .collect()
    }
}

/// Installs `sync`'s exceptions in the state (a new policy generation:
/// decisions in flight and the continuous audit evaluate again); returns
/// the next expiry still to come.
fn install(cluster: &Cluster, sync: &ExceptionSync) -> Option<DateTime<Utc>> {
    let list = sync.compiled();
    let now = Utc::now();
    let next = list
        .iter()
        .filter_map(Exception::expires)
        .filter(|t| *t > now)
        .min();
    let count = list.len();
    tokio::task::block_in_place(|| {
        cluster.update(|st| {
            for e in &list {
                for p in e.policies() {
                    if !st.policies.policies.iter().any(|c| &c.name == p) {
                        tracing::warn!(exception = %e.name, policy = %p,
                            "InterlockException names a policy that is not loaded; it excepts nothing of it");
                    }
                }
            }
            st.policies.cluster_exceptions = list.into();
        })
    });
    tracing::info!(exceptions = count, "cluster exceptions in force");
    next
}

/// Finds one of the project's kinds by discovery, retrying with backoff
/// while it is not served; `missing` is logged once, at the first miss.
pub(super) async fn discover(client: &Client, kind: &str, missing: &str) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("interlock.dev", "v1alpha1", kind);
    let mut attempt = 0;
    loop {
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((ar, _)) => return Api::all_with(client.clone(), &ar),
            Err(e) => {
                let wait = super::backoff::capped(
                    attempt,
                    Duration::from_secs(1),
                    Duration::from_secs(60),
                );
                if attempt == 0 {
                    tracing::info!(error = %e, kind, "{missing}");
                }
                attempt += 1;
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// The cluster's exceptions, listed once (`interlock audit`): none when the
/// kind is not served; each that does not compile as a message.
pub async fn list(
    client: &Client,
    cluster_wide: &str,
) -> Result<(Vec<Exception>, Vec<String>), kube::Error> {
    let gvk = kube::api::GroupVersionKind::gvk("interlock.dev", "v1alpha1", CLUSTER_KIND);
    let api: Api<DynamicObject> = match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((ar, _)) => Api::all_with(client.clone(), &ar),
        // The group is served without the kind, or not served at all
        // (`404 page not found`, without a NotFound reason).
        Err(kube::Error::Discovery(_)) => return Ok((Vec::new(), Vec::new())),
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(e),
    };
    let mut sync = ExceptionSync::new(cluster_wide);
    sync.on_event(Event::Init);
    for o in api.list(&Default::default()).await?.items {
        sync.on_event(Event::InitApply(o));
    }
    sync.on_event(Event::InitDone);
    let mut errors = Vec::new();
    let mut exceptions = Vec::new();
    for (key, doc) in &sync.objects {
        match compile(doc.clone(), cluster_wide) {
            Ok(e) => exceptions.push(e),
            Err(e) => errors.push(format!("InterlockException {key} ignored: {e}")),
        }
    }
    Ok((exceptions, errors))
}

/// Keeps readiness down until the exceptions' first list (also when the
/// task ends before it).
struct Hold {
    cluster: Arc<Cluster>,
    kind: GroupVersionKind,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.cluster.synced(&self.kind);
    }
}

/// Watches the cluster's InterlockExceptions into `cluster` until aborted.
pub async fn watch(client: Client, cluster: Arc<Cluster>, cluster_wide: String) {
    let api = discover(
        &client,
        CLUSTER_KIND,
        "InterlockException is not served (CRD not installed?): only file exceptions apply until it is",
    )
    .await;
    let kind = GroupVersionKind::from_api_version(API_VERSION, CLUSTER_KIND);
    cluster.hold(&kind);
    let _hold = Hold {
        cluster: cluster.clone(),
        kind: kind.clone(),
    };
    let config =
        watcher::Config::default().timeout(cluster.options.watch_timeout.as_secs().max(1) as u32);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut sync = ExceptionSync::new(&cluster_wide);
    let mut next_expiry: Option<DateTime<Utc>> = None;
    loop {
        let expiry = async {
            match next_expiry.map(|t| (t - Utc::now()).to_std().unwrap_or_default()) {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = stream.next() => match event {
                None => break,
                Some(Ok(e)) => {
                    let listed = matches!(e, Event::InitDone);
                    if sync.on_event(e) {
                        next_expiry = install(&cluster, &sync);
                    }
                    if listed {
                        cluster.synced(&kind);
                    }
                }
                Some(Err(e)) => tracing::warn!(error = %e, "InterlockException watch error; re-listing"),
            },
            () = expiry => {
                tracing::info!("an InterlockException expired");
                next_expiry = install(&cluster, &sync);
            }
        }
    }
}

#[cfg(test)]
#[path = "exceptions_tests.rs"]
mod tests;
