//! What `interlock plan` says about each member, from the reconcile's own
//! decision ([`super::plan::plan`]): the pure part, without a cluster. The
//! member's action comes from the state the plan gives it and whether the
//! object exists; an update's changes are the fields in which the stored
//! object and the server's dry run of the apply differ.

use super::crd::{MemberState, MemberStatus};
use crate::policy::resources::group_of;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// What applying the group would do to one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The object does not exist: it would be created.
    Create,
    /// The stored object lacks or contradicts some field of the member.
    Update,
    /// The stored object holds the member: no write.
    Unchanged,
    /// Owned by the group, no longer listed: it would be deleted.
    Prune,
    /// Owned by the group, no longer listed, kept (`prune: false`).
    Keep,
    /// An object of that name belongs to someone else: never adopted.
    Conflict,
    /// Not a usable member (invalid, listed twice, out of scope).
    Refused,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Unchanged => "unchanged",
            Action::Prune => "prune",
            Action::Keep => "keep",
            Action::Conflict => "conflict",
            Action::Refused => "refused",
        }
    }
}

/// The action on a member as the plan left it in `status`; `exists`: the
/// object is stored now.
pub fn action_of(status: &MemberStatus, exists: bool) -> Action {
    match status.state {
        MemberState::Applied => Action::Unchanged,
        MemberState::Conflict => Action::Conflict,
        MemberState::Invalid | MemberState::OutOfScope => Action::Refused,
        MemberState::Pruning | MemberState::Deleting => Action::Prune,
        MemberState::Unlisted | MemberState::Orphaned => Action::Keep,
        MemberState::Pending
        | MemberState::Waiting
        | MemberState::Blocked
        | MemberState::Failed
            if exists =>
        {
            Action::Update
        }
        MemberState::Pending
        | MemberState::Waiting
        | MemberState::Blocked
        | MemberState::Failed => Action::Create,
    }
}

/// One field an update changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// `data.mode`, `spec.template.spec.containers[0].image`,
    /// `metadata.labels["app.kubernetes.io/name"]`.
    pub path: String,
    /// Absent: the field is added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// Absent: the field is removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

/// Metadata the server rewrites on every write: a difference there is not
/// a change the group makes.
const SERVER_METADATA: [&str; 4] = ["resourceVersion", "managedFields", "generation", "uid"];

/// The fields in which `after` (the dry run's result) differs from
/// `stored`, in path order. Lists of the same length are compared element
/// by element; a list that changes length is one change.
pub fn changed_fields(stored: &Value, after: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    diff(&mut out, String::new(), Some(stored), Some(after), true);
    out
}

fn diff(
    out: &mut Vec<FieldChange>,
    path: String,
    before: Option<&Value>,
    after: Option<&Value>,
    root: bool,
) {
    match (before, after) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => {
            let keys: BTreeMap<&String, ()> = b.keys().chain(a.keys()).map(|k| (k, ())).collect();
            for k in keys.into_keys() {
                if root && k == "status" {
                    continue;
                }
                if path == "metadata" && SERVER_METADATA.contains(&k.as_str()) {
                    continue;
                }
                diff(out, join(&path, k), b.get(k), a.get(k), false);
            }
        }
        (Some(Value::Array(b)), Some(Value::Array(a))) if b.len() == a.len() => {
            for (i, (x, y)) in b.iter().zip(a).enumerate() {
                diff(out, format!("{path}[{i}]"), Some(x), Some(y), false);
            }
        }
        (b, a) if b == a => {}
        (b, a) => out.push(FieldChange {
            path,
            before: b.cloned(),
            after: a.cloned(),
        }),
    }
}

fn join(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{}]", Value::String(key.to_string())),
    }
}

/// (API group, kind, namespace, name) of a stored object or a member.
pub type ObjectId = (String, String, String, String);

/// The id of a stored object (any version of its kind).
pub fn id_of(v: &Value) -> Option<ObjectId> {
    let s = |p: &str| v.pointer(p).and_then(Value::as_str);
    Some((
        group_of(s("/apiVersion")?).to_string(),
        s("/kind")?.to_string(),
        s("/metadata/namespace").unwrap_or("").to_string(),
        s("/metadata/name")?.to_string(),
    ))
}

/// The id of a member as the status names it.
pub fn member_id(m: &MemberStatus) -> ObjectId {
    (
        group_of(&m.api_version).to_string(),
        m.kind.clone(),
        m.namespace.clone(),
        m.name.clone(),
    )
}

/// `observed` with `written` put in place of the objects of the same id
/// and `removed` taken out: the members as they would be stored after the
/// apply, for the conditions the group would get then.
pub fn after_apply(observed: &[Value], written: &[Value], removed: &[ObjectId]) -> Vec<Value> {
    let replaced: Vec<ObjectId> = written.iter().filter_map(id_of).collect();
    observed
        .iter()
        .filter(|o| id_of(o).is_none_or(|id| !replaced.contains(&id) && !removed.contains(&id)))
        .chain(written)
        .cloned()
        .collect()
}

#[cfg(test)]
#[path = "preview_tests.rs"]
mod tests;
