//! The audit's one listing of the cluster: which kinds (discovery, then
//! the policies' resource rules and lookups), and every object of each,
//! page by page.

use super::{cluster_error, AuditError, Snapshot};
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use crate::policy::PolicySet;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{verbs, ApiResource, Discovery, Scope};
use kube::Client;
use serde_json::Value as Json;
use std::collections::BTreeSet;

/// Objects per list request: large lists are paged, never held twice.
const PAGE: u32 = 500;

/// One kind to list, and what it is listed for.
#[derive(Debug, Clone)]
pub struct Planned {
    pub resource: ApiResource,
    /// Some policy looks objects of this kind up.
    pub read: bool,
    /// Some policy may match objects of this kind: they are evaluated.
    pub matched: bool,
}

/// The kinds to list among those the cluster serves (each at its most
/// stable version), and notices about the kinds policies read that it does
/// not serve.
pub fn plan(
    policies: &PolicySet,
    served: &[(ApiResource, kube::discovery::ApiCapabilities)],
) -> (Vec<Planned>, Vec<String>) {
    let read: BTreeSet<GroupKind> = policies
        .kinds_read()
        .iter()
        .map(GroupVersionKind::group_kind)
        .collect();
    let mut found = BTreeSet::new();
    let mut planned = Vec::new();
    for (ar, caps) in served {
        if !caps.supports_operation(verbs::LIST) {
            continue;
        }
        let key = GroupKind::new(ar.group.as_str(), ar.kind.as_str());
        let is_read = read.contains(&key);
        let matched = policies.may_match_kind(
            &ar.api_version,
            &ar.kind,
            matches!(caps.scope, Scope::Namespaced),
        );
        if (is_read || matched) && found.insert(key) {
            planned.push(Planned {
                resource: ar.clone(),
                read: is_read,
                matched,
            });
        }
    }
    let mut notices: Vec<String> = read
        .difference(&found)
        .map(|gk| {
            let (g, k) = (gk.group(), gk.kind());
            let g = if g.is_empty() { "core" } else { g };
            format!("the policies look up {k} ({g} group), which this cluster does not serve: those lookups find nothing")
        })
        .collect();
    let computed = policies.with_computed_lookups();
    if !computed.is_empty() {
        notices.push(format!(
            "policies {} compute the kind of a lookup: it sees only the kinds listed for other reasons",
            computed.join(", ")
        ));
    }
    (planned, notices)
}

/// Lists every kind the policies match or read into `snapshot`. A kind
/// that cannot be listed is an input error of the report (exit 2); the
/// others are still listed, so the report says as much as it can.
pub async fn list_cluster(
    client: &Client,
    policies: &PolicySet,
    mut snapshot: Snapshot,
) -> Result<Snapshot, AuditError> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(AuditError::Discovery)?;
    let served: Vec<_> = discovery
        .groups()
        .flat_map(|g| g.resources_by_stability())
        .collect();
    let (planned, notices) = plan(policies, &served);
    snapshot
        .notices
        .extend(notices.into_iter().map(cluster_error));
    for p in &planned {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &p.resource);
        let started = std::time::Instant::now();
        match list_kind(&api, p, &mut snapshot).await {
            Ok(n) => tracing::info!(api_version = %p.resource.api_version, kind = %p.resource.kind,
                objects = n, read = p.read, matched = p.matched, elapsed = ?started.elapsed(), "listed"),
            Err(e) => snapshot.errors.push(cluster_error(format!(
                "cannot list {} {}: {e}",
                p.resource.api_version, p.resource.plural
            ))),
        }
    }
    Ok(snapshot)
}

/// Lists one kind page by page; returns how many objects it had.
async fn list_kind(
    api: &Api<DynamicObject>,
    p: &Planned,
    snapshot: &mut Snapshot,
) -> Result<usize, kube::Error> {
    let mut token: Option<String> = None;
    let mut n = 0;
    loop {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = api.list(&params).await?;
        for o in page.items {
            if let Some(json) = with_type(&p.resource, o) {
                snapshot.add(json, p.read, p.matched);
                n += 1;
            }
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(n);
        }
    }
}

/// The object as JSON with its apiVersion and kind: the items of a list
/// response carry neither (only the list does).
fn with_type(ar: &ApiResource, o: DynamicObject) -> Option<Json> {
    let mut json = serde_json::to_value(o).ok()?;
    let m = json.as_object_mut()?;
    m.insert("apiVersion".into(), ar.api_version.clone().into());
    m.insert("kind".into(), ar.kind.clone().into());
    Some(json)
}
