//! The ownership boundary: a member of a ResourceGroup is written only by
//! the Interlock controller. Anyone else's UPDATE, PATCH or DELETE of it,
//! and a CREATE claiming membership, is refused at admission (or warned
//! about, per installation) with the group's name and how to change it.
//!
//! [`decide`] is pure; [`check`] reads it off an AdmissionRequest and
//! [`Outcome`] folds the answer into the response.
//!
//! **Membership** is the controller ownerReference to a ResourceGroup, the
//! same evidence the controller trusts (`controller::members::owner`). The
//! ApplySet part-of label alone is not: kubectl's own ApplySets write the
//! same label, so refusing on it would break them. The label still selects
//! which writes the API server sends here (the `members.interlock.dev`
//! webhook's objectSelector), and removing it from a member is an UPDATE of
//! a member, refused like any other.
//!
//! **The controller** is recognised as:
//! - its own identity (`--boundary-controller`, default the serve/controller
//!   ServiceAccount): deletions on group deletion, Orphan releases;
//! - a ServiceAccount of the member's namespace (the group's, impersonated)
//!   that writes with field manager `interlock` (server-side apply), or
//!   deletes with a UID precondition (pruning; kubectl never sends one).
//!
//! Why not more: the group's serviceAccountName is in the group, not in the
//! request, and admission has no ResourceGroup cache; an impersonation
//! extra would be unforgeable but needs the controller's RBAC and code to
//! change. What this admits beyond the controller: a workload running as a
//! ServiceAccount of that namespace that imitates the manager name. People
//! (kubectl edit/apply/patch/delete, CI as a user) cannot pass.

use crate::group::crd::{FIELD_MANAGER, GROUP, KIND};
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;
use serde_json::Value as Json;

/// The identity `interlock serve` and `interlock controller` run as in the
/// shipped manifests (manifests/base/serviceaccount.yaml).
pub const DEFAULT_CONTROLLER: &str = "system:serviceaccount:interlock-system:interlock-controller";

/// What happens to a write across the boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Refuse it (403).
    #[default]
    Deny,
    /// Admit it with a kubectl warning (a gradual rollout).
    Warn,
    /// No boundary.
    Off,
}

/// The boundary of one installation.
#[derive(Debug, Clone)]
pub struct Boundary {
    pub mode: Mode,
    /// Users that are the Interlock controller itself.
    pub controllers: Vec<String>,
    /// Users (`NAME`, `PREFIX*`) and groups (`group:NAME`) that may write
    /// members: the break-glass path.
    pub exempt: Vec<String>,
}

impl Default for Boundary {
    fn default() -> Self {
        Boundary {
            mode: Mode::Deny,
            controllers: vec![DEFAULT_CONTROLLER.into()],
            exempt: vec![],
        }
    }
}

/// One write as the boundary sees it.
#[derive(Debug, Default)]
pub struct Write<'a> {
    pub operation: &'a str,
    pub subresource: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub username: &'a str,
    pub groups: &'a [String],
    /// `options.fieldManager` (Create/UpdateOptions; PatchOptions arrive so).
    pub field_manager: Option<&'a str>,
    /// `options.preconditions.uid` of a DELETE.
    pub precondition_uid: Option<&'a str>,
    pub object: Option<&'a Json>,
    pub old_object: Option<&'a Json>,
}

/// The ResourceGroup an object is a member of: its controller
/// ownerReference to a ResourceGroup (any version of the group).
pub fn group_of(object: &Json) -> Option<&str> {
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| {
            r.get("controller").and_then(Json::as_bool) == Some(true)
                && r.get("kind").and_then(Json::as_str) == Some(KIND)
                && r.get("apiVersion")
                    .and_then(Json::as_str)
                    .and_then(|v| v.split_once('/'))
                    .is_some_and(|(g, _)| g == GROUP)
        })
        .and_then(|r| r.get("name")?.as_str())
}

/// Users the boundary never stops: the control plane's own (system:*
/// that are not ServiceAccounts: kube-controller-manager, nodes, the
/// apiserver), kube-system ServiceAccounts (garbage collector, namespace
/// controller), the controller, and the installation's exemptions.
fn exempt(cfg: &Boundary, w: &Write) -> bool {
    let u = w.username;
    let sa = u.starts_with("system:serviceaccount:");
    (u.starts_with("system:") && !sa)
        || u.starts_with("system:serviceaccount:kube-system:")
        || cfg.controllers.iter().any(|c| c == u)
        || cfg.exempt.iter().any(|e| match e.strip_prefix("group:") {
            Some(g) => w.groups.iter().any(|have| have == g),
            None => match e.strip_suffix('*') {
                Some(prefix) => u.starts_with(prefix),
                None => e == u,
            },
        })
}

/// The group's writer as the controller drives it: a ServiceAccount of the
/// member's namespace, applying with the controller's field manager or
/// deleting by UID; never moving the object to another group.
fn group_writer(w: &Write, member_of: Option<&str>) -> bool {
    let own_namespace = w
        .username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(ns, _)| ns == w.namespace && !ns.is_empty());
    if !own_namespace {
        return false;
    }
    match w.operation {
        "CREATE" | "UPDATE" => {
            w.field_manager == Some(FIELD_MANAGER)
                && (member_of.is_none() || w.object.and_then(group_of) == member_of)
        }
        "DELETE" => {
            let uid = w
                .old_object
                .and_then(|o| o.pointer("/metadata/uid"))
                .and_then(Json::as_str);
            uid.is_some() && w.precondition_uid == uid
        }
        _ => false,
    }
}

/// The refusal message for `w`, or None when the write may pass.
pub fn decide(cfg: &Boundary, w: &Write) -> Option<String> {
    if cfg.mode == Mode::Off
        // Status and scale are written by their owners (HPA, the workload's
        // controller); the spec is what the group declares.
        || !w.subresource.is_empty()
        || !matches!(w.operation, "CREATE" | "UPDATE" | "DELETE")
    {
        return None;
    }
    let member_of = w.old_object.and_then(group_of);
    let claims = w.object.and_then(group_of);
    let group = member_of.or(claims)?;
    if exempt(cfg, w) || group_writer(w, member_of) {
        return None;
    }
    let (kind, ns, name) = (w.kind, w.namespace, w.name);
    let view = format!("kubectl get resourcegroup {group} -n {ns} -o yaml");
    Some(match (member_of, w.operation) {
        (None, _) => format!(
            "{kind} {ns}/{name} claims to be a member of ResourceGroup '{group}' (a controller \
             ownerReference to it), but only the Interlock controller creates members: add its \
             manifest to the group's spec.resources instead (see `{view}`)"
        ),
        (Some(_), "DELETE") => format!(
            "{kind} {ns}/{name} is managed by ResourceGroup '{group}': the Interlock controller \
             would recreate it. To delete it, remove it from the group's spec.resources (the \
             controller prunes it) or delete the group (see `{view}`)"
        ),
        (Some(_), _) => format!(
            "{kind} {ns}/{name} is managed by ResourceGroup '{group}': direct changes (including \
             removing its ownerReference or applyset.kubernetes.io/part-of label) are reverted by \
             the Interlock controller. Change its manifest in the group's spec.resources instead: \
             `{view}`, then `kubectl edit resourcegroup {group} -n {ns}`"
        ),
    })
}

/// What the boundary adds to a response.
pub(super) enum Outcome {
    Pass,
    Deny(String),
    Warn(String),
}

impl Outcome {
    /// The refusal, when the write is refused: no policy needs to run.
    pub(super) fn denial(&self, resp: &AdmissionResponse) -> Option<AdmissionResponse> {
        let Outcome::Deny(m) = self else { return None };
        let mut r = resp.clone().deny(m.clone());
        r.result.code = 403;
        r.result.reason = "Forbidden".into();
        Some(r)
    }

    /// The policies' answer, with the boundary's warning in warn mode.
    pub(super) fn warn(self, mut resp: AdmissionResponse) -> AdmissionResponse {
        if let Outcome::Warn(m) = self {
            resp.warnings.get_or_insert_with(Vec::new).push(m);
        }
        resp
    }
}

/// The boundary's outcome for `req`. `old` is parsed only when its text
/// could name a ResourceGroup at all.
pub(super) fn check(
    cfg: &Boundary,
    req: &AdmissionRequest<DynamicObject>,
    object: Option<&Json>,
    old: Option<&super::Old>,
) -> Outcome {
    if cfg.mode == Mode::Off {
        return Outcome::Pass;
    }
    let parsed;
    let old_object = match old {
        Some(super::Old::Json(j)) => Some(j),
        Some(super::Old::Text(t)) if t.get().contains(KIND) => {
            parsed = serde_json::from_str::<Json>(t.get()).ok();
            parsed.as_ref()
        }
        _ => None,
    };
    let options = req.options.as_ref().map(|o| &o.0);
    let groups = req.user_info.groups.as_deref().unwrap_or_default();
    let w = Write {
        operation: super::operation(&req.operation).as_str(),
        subresource: req.sub_resource.as_deref().unwrap_or_default(),
        kind: &req.kind.kind,
        namespace: req.namespace.as_deref().unwrap_or_default(),
        name: &req.name,
        username: req.user_info.username.as_deref().unwrap_or_default(),
        groups,
        field_manager: options.and_then(|o| o.get("fieldManager")?.as_str()),
        precondition_uid: options.and_then(|o| o.pointer("/preconditions/uid")?.as_str()),
        object,
        old_object,
    };
    match decide(cfg, &w) {
        None => Outcome::Pass,
        Some(m) => {
            tracing::info!(
                user = w.username, operation = w.operation, kind = w.kind,
                namespace = w.namespace, name = w.name, mode = ?cfg.mode,
                "write to a ResourceGroup member by someone else"
            );
            let m = format!("interlock ownership boundary: {m}");
            if cfg.mode == Mode::Warn {
                Outcome::Warn(m)
            } else {
                Outcome::Deny(m)
            }
        }
    }
}

#[cfg(test)]
#[path = "boundary_tests.rs"]
mod tests;
