//! One entry of `spec.resources`, read and checked on its own: is it a
//! usable manifest, and does it belong in the group's namespace?

use crate::policy::resources::{group_of, is_namespaced};
use serde_json::{Map, Value};

/// Whether a kind's objects live in a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// Answers which kinds exist and whether they are namespaced (in the
/// controller: API discovery; offline: the built-in kinds).
pub trait ScopeOracle {
    /// `None` when the kind is unknown.
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope>;
}

impl<F: Fn(&str, &str) -> Option<Scope>> ScopeOracle for F {
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
        self(api_version, kind)
    }
}

/// The built-in Kubernetes kinds the project knows, and ResourceGroup.
pub struct BuiltinScopes;

impl ScopeOracle for BuiltinScopes {
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
        let group = group_of(api_version);
        if group == super::crd::GROUP && kind == super::crd::KIND {
            return Some(Scope::Namespaced);
        }
        is_namespaced(group, kind).map(|n| if n { Scope::Namespaced } else { Scope::Cluster })
    }
}

/// A member that is a usable manifest of the group's namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// Position in `spec.resources`.
    pub index: usize,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The manifest with `metadata.namespace` set to the group's, and
    /// without `status` and the fields the server owns (uid,
    /// resourceVersion, managedFields, ...): they are never applied, and
    /// comparing them would make a converged member look changed forever.
    pub object: Value,
}

impl Member {
    /// API group of the member (`""` for the core group).
    pub fn api_group(&self) -> &str {
        group_of(&self.api_version)
    }

    /// `Kind name`, for messages.
    pub fn display(&self) -> String {
        format!("{} {}", self.kind, self.name)
    }
}

/// Why a member cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberError {
    /// Not a usable manifest.
    #[error("member {index} ({what}): {reason}")]
    Invalid {
        index: usize,
        what: String,
        reason: String,
    },
    /// Outside the group's namespace, cluster-scoped, or of an unknown kind.
    #[error("member {index} ({what}): {reason}")]
    OutOfScope {
        index: usize,
        what: String,
        reason: String,
    },
}

impl MemberError {
    pub fn index(&self) -> usize {
        match self {
            MemberError::Invalid { index, .. } | MemberError::OutOfScope { index, .. } => *index,
        }
    }
}

/// Server-owned metadata, never part of what a group applies.
const SERVER_METADATA: [&str; 8] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Reads entry `index` of `spec.resources` of a group in `namespace`.
/// `unknown_is_namespaced`: offline, a kind the project does not know may
/// be a custom resource of the cluster, so it is given the benefit of the
/// doubt; the controller asks the API server and refuses unknown kinds.
pub fn parse_member(
    index: usize,
    raw: &Value,
    namespace: &str,
    scopes: &dyn ScopeOracle,
    unknown_is_namespaced: bool,
) -> Result<Member, MemberError> {
    let what = describe(raw);
    let invalid = |reason: &str| MemberError::Invalid {
        index,
        what: what.clone(),
        reason: reason.to_string(),
    };
    let out_of_scope = |reason: String| MemberError::OutOfScope {
        index,
        what: what.clone(),
        reason,
    };
    let Some(map) = raw.as_object() else {
        return Err(invalid("not an object"));
    };
    let api_version = non_empty(map, "apiVersion").ok_or_else(|| invalid("no apiVersion"))?;
    let kind = non_empty(map, "kind").ok_or_else(|| invalid("no kind"))?;
    let Some(meta) = map.get("metadata").and_then(Value::as_object) else {
        return Err(invalid("no metadata"));
    };
    let name = non_empty(meta, "name").ok_or_else(|| {
        invalid("no metadata.name (generateName would create a new object on every pass)")
    })?;
    match meta.get("namespace").unwrap_or(&Value::Null) {
        Value::Null => {}
        Value::String(ns) if ns.is_empty() || ns == namespace => {}
        Value::String(ns) => {
            return Err(out_of_scope(format!(
                "in namespace {ns}; members live in the group's namespace {namespace}"
            )))
        }
        _ => return Err(invalid("metadata.namespace is not a string")),
    }
    if has_controller_owner(meta) {
        return Err(invalid("names a controller in metadata.ownerReferences; the group is the controller of its members"));
    }
    match scopes.scope(api_version, kind) {
        Some(Scope::Namespaced) => {}
        None if unknown_is_namespaced => {}
        Some(Scope::Cluster) => {
            return Err(out_of_scope(format!(
                "{kind} is cluster-scoped; a group holds only objects of its namespace"
            )))
        }
        None => {
            return Err(out_of_scope(format!(
                "the API server does not serve {kind} in {api_version}"
            )))
        }
    }
    Ok(Member {
        index,
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        object: cleaned(map, namespace),
    })
}

fn non_empty<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn has_controller_owner(meta: &Map<String, Value>) -> bool {
    meta.get("ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
}

/// `Kind name` from whatever the entry has, for messages about it.
fn describe(raw: &Value) -> String {
    let kind = raw.get("kind").and_then(Value::as_str).unwrap_or("?");
    let name = raw
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    format!("{kind} {name}")
}

fn cleaned(map: &Map<String, Value>, namespace: &str) -> Value {
    let mut object = map.clone();
    object.remove("status");
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        for key in SERVER_METADATA {
            meta.remove(key);
        }
        meta.insert("namespace".into(), namespace.into());
    }
    Value::Object(object)
}

#[cfg(test)]
#[path = "member_tests.rs"]
mod tests;
