//! `--audit-cluster-vaps`: the cluster's own ValidatingAdmissionPolicies
//! and their bindings, evaluated by the continuous audit against what is
//! stored. kube-apiserver judges an object only when it is written, so an
//! object stored before its policy existed is never judged there.
//!
//! Decisions:
//! - Read by polling (a list of both kinds every [`REFRESH`]), not a watch:
//!   they change rarely, and a list of each is two small requests. A
//!   change (a resourceVersion, a param object's too) makes the next audit
//!   pass a full one.
//! - Compiled apart from the process's own policies and never enforced:
//!   kube-apiserver enforces them at admission already. A cluster VAP named
//!   like one of the process's own policies is left out (the site installed
//!   Interlock's copy into kube-apiserver too; the audit reports it once).
//! - Params: the objects of each paramKind a policy names are listed, in
//!   every namespace, into an inventory of their own (the process's live
//!   inventory holds only what its own policies read). Listing a paramKind
//!   needs `list` on it, which no shipped role can know in advance: when it
//!   is refused, one warning names the kind, and the bindings answer as
//!   their parameterNotFoundAction says.
//! - Findings and InterlockExceptions are as for the process's policies:
//!   one PolicyReport per namespace holds both.

use crate::cluster::driver::typed;
use crate::inventory::{Entry, IndexId, Inventory, Lookup, ObjectKeyRef};
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use crate::policy::PolicySet;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::Client;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

/// The policy a VAP or binding document is (or binds).
fn policy_of(d: &Json) -> Option<&str> {
    let field = match d["kind"].as_str() {
        Some("ValidatingAdmissionPolicyBinding") => "/spec/policyName",
        _ => "/metadata/name",
    };
    d.pointer(field).and_then(Json::as_str)
}

/// Between two reads of the cluster's VAPs, bindings and params.
pub const REFRESH: Duration = Duration::from_secs(5);

const GROUP: &str = "admissionregistration.k8s.io";
const KINDS: [&str; 2] = [
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// The cluster's VAPs compiled, with their params.
#[derive(Default)]
pub struct ClusterVaps {
    pub policies: PolicySet,
    params: Inventory,
    param_kinds: HashSet<GroupKind>,
    /// resourceVersions of everything read: a change is a new set.
    pub fingerprint: BTreeMap<String, String>,
}

/// Why the cluster's VAPs could not be read.
#[derive(Debug, thiserror::Error)]
#[error("listing the cluster's {kind}s: {source}")]
pub struct ReadError {
    kind: &'static str,
    #[source]
    source: kube::Error,
}

/// Every object of `gvk` in the cluster, with apiVersion and kind.
async fn list_all(client: &Client, gvk: &GroupVersionKind) -> Result<Vec<Json>, kube::Error> {
    let kgvk = kube::api::GroupVersionKind::gvk(gvk.group(), gvk.version(), gvk.kind());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&kgvk));
    let list = api.list(&ListParams::default()).await?;
    Ok(list.items.iter().filter_map(|o| typed(gvk, o)).collect())
}

fn fingerprint_of(out: &mut BTreeMap<String, String>, docs: &[Json]) {
    for d in docs {
        let m = &d["metadata"];
        let key = format!(
            "{}/{}/{}/{}",
            d["kind"].as_str().unwrap_or_default(),
            m["namespace"].as_str().unwrap_or_default(),
            m["name"].as_str().unwrap_or_default(),
            m["uid"].as_str().unwrap_or_default()
        );
        out.insert(
            key,
            m["resourceVersion"].as_str().unwrap_or_default().into(),
        );
    }
}

/// Reads and compiles the cluster's VAPs and bindings, leaving out those
/// named like one of `own`'s policies, and lists their params.
pub async fn read(client: &Client, own: &PolicySet) -> Result<ClusterVaps, ReadError> {
    let mut docs = Vec::new();
    for kind in KINDS {
        let gvk = GroupVersionKind::from_api_version(format!("{GROUP}/v1").as_str(), kind);
        let listed = list_all(client, &gvk)
            .await
            .map_err(|source| ReadError { kind, source })?;
        docs.extend(listed);
    }
    let mut out = ClusterVaps::default();
    fingerprint_of(&mut out.fingerprint, &docs);
    let (policies, projection) = compile(docs, own);
    out.params.set_projection(projection);
    for gvk in policies.kinds_read() {
        match list_all(client, &gvk).await {
            Ok(objects) => {
                fingerprint_of(&mut out.fingerprint, &objects);
                for o in &objects {
                    if let Err(e) = out.params.upsert(o, None) {
                        tracing::warn!(kind = %gvk.kind(), error = %e, "audit: a cluster VAP's param object not kept");
                    }
                }
            }
            Err(e) => {
                tracing::warn!(kind = %gvk.kind(), error = %e, "audit: the cluster VAPs' param objects of this kind cannot be listed (grant list on it); their bindings answer as their parameterNotFoundAction says")
            }
        }
        out.param_kinds.insert(gvk.group_kind());
    }
    out.policies = policies;
    Ok(out)
}

/// The set compiled from `docs`, without the policies (and their bindings)
/// that `own` has by name, and the projection its params need. Documents
/// Interlock cannot compile are logged and left out.
fn compile(
    docs: Vec<Json>,
    own: &PolicySet,
) -> (PolicySet, crate::inventory::projection::Projection) {
    let own_names: HashSet<&str> = own.policies.iter().map(|p| p.name.as_str()).collect();
    let pairs: Vec<(Json, crate::inventory::Source)> = docs
        .into_iter()
        .filter(|d| !policy_of(d).is_some_and(|n| own_names.contains(n)))
        .map(|d| {
            let file = format!(
                "{}/{}",
                d["kind"].as_str().unwrap_or_default(),
                d["metadata"]["name"].as_str().unwrap_or_default()
            );
            (d, crate::inventory::Source { file, line: 0 })
        })
        .collect();
    let (set, errors) = PolicySet::compile(&pairs);
    for e in errors {
        tracing::warn!(error = %e, "audit: a cluster VAP is not audited");
    }
    let projection = set.projection();
    (set, projection)
}

/// The cluster's inventory with the VAPs' params over it: a param kind is
/// read from the params alone.
pub struct WithParams<'a> {
    pub vaps: &'a ClusterVaps,
    pub base: &'a dyn Lookup,
}

impl WithParams<'_> {
    fn is_param(&self, group: &str, kind: &str) -> bool {
        self.vaps
            .param_kinds
            .iter()
            .any(|gk| gk.group() == group && gk.kind() == kind)
    }
}

impl Lookup for WithParams<'_> {
    fn find(&self, key: ObjectKeyRef) -> Option<&Entry> {
        match self.is_param(key.group, key.kind) {
            true => self.vaps.params.find(key),
            false => self.base.find(key),
        }
    }

    fn list(&self, group: &str, kind: &str, namespace: Option<&str>) -> Vec<&Entry> {
        match self.is_param(group, kind) {
            true => self.vaps.params.list(group, kind, namespace),
            false => self.base.list(group, kind, namespace),
        }
    }

    fn lookup_index(&self, id: IndexId, key: &str) -> Vec<&Entry> {
        self.base.lookup_index(id, key)
    }
}

#[cfg(test)]
#[path = "cluster_vaps_tests.rs"]
mod tests;
