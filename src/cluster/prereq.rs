//! What a process needs of the cluster before it can work: its namespace,
//! the permissions on its Leases and on every kind it watches, and the
//! CRDs it serves. A half-installed cluster keeps the process unready with
//! one log line that names what is missing and how to install it, instead
//! of a ready process that fails every write it should make.
//!
//! Decisions:
//! - Checked at start and again every [`RECHECK`] until everything is
//!   there, then never again: a permission revoked later shows in the
//!   errors of the call it breaks, and checking forever would cost a review
//!   per kind every few seconds for nothing.
//! - Permissions are asked with SelfSubjectAccessReviews (every
//!   authenticated user may create one), so a missing verb is named before
//!   the call that needs it fails, whatever the authorizer.
//! - One line per change: a retry that finds the same things missing logs
//!   nothing, so an operator reads one line, not one per retry.

use super::Cluster;
use crate::k8s::kind::GroupResource;
use crate::k8s::kind::GroupVersionKind;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use std::fmt;
use std::time::Duration;

/// How often unmet prerequisites are checked again.
pub const RECHECK: Duration = Duration::from_secs(2);

/// The namespace a process uses when none is given (`POD_NAMESPACE` in a
/// cluster).
pub const DEFAULT_NAMESPACE: &str = "interlock-system";

/// How the shipped manifests are installed (named in every hint).
const INSTALL: &str = "kubectl apply -k manifests/overlays/interlock-certs";

/// A permission: `verb` on `resource` of `group`, in `namespace` (all
/// namespaces when `None`), on the object `name` only when given.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Access {
    pub fn new(verb: &str, group: &str, resource: &str) -> Access {
        Access {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: None,
            name: None,
        }
    }

    pub fn in_namespace(mut self, namespace: &str) -> Access {
        self.namespace = Some(namespace.into());
        self
    }

    pub fn named(mut self, name: &str) -> Access {
        self.name = Some(name.into());
        self
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resource = if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        };
        write!(f, "{} {resource}", self.verb)?;
        if let Some(n) = &self.name {
            write!(f, "/{n}")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}"),
            None => write!(f, " in all namespaces"),
        }
    }
}

/// One thing a process needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// The namespace exists.
    Namespace(String),
    /// The process may do this.
    Access(Access),
    /// The kind is served (its CRD installed), and the process may list and
    /// watch it in every namespace.
    Watched(GroupVersionKind),
    /// The kind is served; `crd` is the file under manifests/ that installs it.
    Served {
        kind: GroupVersionKind,
        crd: &'static str,
    },
}

/// One thing found missing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Missing {
    Namespace(String),
    Access(Access),
    Kind {
        kind: GroupVersionKind,
        crd: Option<&'static str>,
    },
    /// The check itself failed (the API server unreachable, a review
    /// refused): nothing is known, so nothing is assumed present.
    Unchecked(String),
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Namespace(ns) => write!(
                f,
                "namespace {ns} does not exist (kubectl create namespace {ns}, or {INSTALL})"
            ),
            Missing::Access(a) => write!(
                f,
                "not allowed to {a} (grant it: manifests/base/rbac.yaml and controller.yaml, or {INSTALL})"
            ),
            Missing::Kind {
                kind,
                crd: Some(file),
            } => write!(
                f,
                "{} ({}) is not served (kubectl apply -f manifests/base/{file}, or {INSTALL})",
                kind.kind(),
                kind.api_version()
            ),
            Missing::Kind { kind, crd: None } => write!(
                f,
                "{} ({}) is not served (install its CRD)",
                kind.kind(),
                kind.api_version()
            ),
            Missing::Unchecked(what) => write!(f, "could not check: {what}"),
        }
    }
}

/// The one line that names everything missing.
pub fn describe(missing: &[Missing]) -> String {
    missing
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The needs of a process that watches `kinds` into its inventory.
pub fn watching(kinds: &[GroupVersionKind]) -> Vec<Need> {
    kinds.iter().cloned().map(Need::Watched).collect()
}

/// Checks every need once; the missing ones, sorted.
pub async fn check(client: &kube::Client, needs: &[Need]) -> Vec<Missing> {
    let mut missing = Vec::new();
    for need in needs {
        if let Err(m) = check_one(client, need).await {
            missing.extend(m);
        }
    }
    missing.sort();
    missing.dedup();
    missing
}

async fn check_one(client: &kube::Client, need: &Need) -> Result<(), Vec<Missing>> {
    match need {
        Need::Namespace(ns) => namespace_exists(client, ns).await,
        Need::Access(a) => allowed(client, a).await.map_err(|m| vec![m]),
        Need::Served { kind, crd } => served(client, kind, Some(crd)).await.map(drop),
        Need::Watched(kind) => {
            let resource = served(client, kind, None).await?;
            let mut missing = Vec::new();
            for verb in ["list", "watch"] {
                if let Err(m) = allowed(
                    client,
                    &Access::new(verb, resource.group(), resource.resource()),
                )
                .await
                {
                    missing.push(m);
                }
            }
            if missing.is_empty() {
                Ok(())
            } else {
                Err(missing)
            }
        }
    }
}

async fn namespace_exists(client: &kube::Client, ns: &str) -> Result<(), Vec<Missing>> {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.get_opt(ns).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(vec![Missing::Namespace(ns.into())]),
        // Not allowed to read namespaces: its existence is not ours to
        // know; the permissions checked in it still are.
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(()),
        Err(e) => Err(vec![Missing::Unchecked(format!("namespace {ns}: {e}"))]),
    }
}

/// The resource of a served kind.
async fn served(
    client: &kube::Client,
    kind: &GroupVersionKind,
    crd: Option<&&'static str>,
) -> Result<GroupResource, Vec<Missing>> {
    let api_version = kind.api_version();
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind.kind());
    let not_served = || {
        vec![Missing::Kind {
            kind: kind.clone(),
            crd: crd.copied(),
        }]
    };
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((ar, _)) => Ok(GroupResource::new(ar.group, ar.plural)),
        // The group is served without the kind, or not served at all.
        Err(kube::Error::Discovery(_)) => Err(not_served()),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(not_served()),
        Err(e) => Err(vec![Missing::Unchecked(format!(
            "{kind} ({api_version}): {e}"
        ))]),
    }
}

async fn allowed(client: &kube::Client, a: &Access) -> Result<(), Missing> {
    // `resourcegroups/status`: a review names the subresource apart.
    let (resource, subresource) = match a.resource.split_once('/') {
        Some((r, sub)) => (r, Some(sub)),
        None => (a.resource.as_str(), None),
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(a.verb.clone()),
                group: Some(a.group.clone()),
                resource: Some(resource.into()),
                subresource: subresource.map(Into::into),
                namespace: a.namespace.clone(),
                name: a.name.clone(),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    match api.create(&PostParams::default(), &review).await {
        Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => Ok(()),
        Ok(_) => Err(Missing::Access(a.clone())),
        Err(e) => Err(Missing::Unchecked(format!("may I {a}? {e}"))),
    }
}

/// Checks `needs` until all are met, keeping `cluster` unready meanwhile;
/// logs one line each time what is missing changes, and one when all is
/// there.
pub async fn wait(client: &kube::Client, cluster: &Cluster, needs: &[Need]) {
    let mut last: Option<Vec<Missing>> = None;
    loop {
        let missing = check(client, needs).await;
        if missing.is_empty() {
            cluster.set_prerequisites_met(true);
            if last.is_some() {
                tracing::info!("prerequisites present; no longer held unready by them");
            }
            return;
        }
        cluster.set_prerequisites_met(false);
        if last.as_ref() != Some(&missing) {
            tracing::warn!(
                missing = %describe(&missing),
                "not ready: the cluster lacks what this process needs"
            );
            last = Some(missing);
        }
        tokio::time::sleep(RECHECK).await;
    }
}

/// The namespace of a process whose flag was not given: `interlock-system`
/// in a cluster or when it exists; otherwise (a local run against a
/// cluster without it) the kubeconfig context's namespace, said in one line.
pub async fn default_namespace(client: &kube::Client, config: &kube::Config) -> String {
    if in_cluster() {
        return DEFAULT_NAMESPACE.into();
    }
    let api: Api<Namespace> = Api::all(client.clone());
    match api.get_opt(DEFAULT_NAMESPACE).await {
        Ok(None) if config.default_namespace != DEFAULT_NAMESPACE => {
            tracing::info!(
                namespace = %config.default_namespace,
                "namespace {DEFAULT_NAMESPACE} does not exist: using the kubeconfig context's namespace"
            );
            config.default_namespace.clone()
        }
        _ => DEFAULT_NAMESPACE.into(),
    }
}

/// Whether this process runs in a Pod (the variables the kubelet sets).
fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

#[cfg(test)]
#[path = "prereq_tests.rs"]
mod tests;
