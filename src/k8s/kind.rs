//! Typed names of kinds and resources: what a `(String, String)` pair used
//! to carry, with its meaning in its type. Each is a pair of shared strings:
//! cloning one is two reference counts, and each hashes and orders exactly
//! as the tuple of its strings (in field order) did.

use std::fmt;
use std::sync::Arc;

/// A kind in an API group, any version: `Deployment` in `apps`, `Pod` in
/// the core group (`""`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKind {
    pub group: Arc<str>,
    pub kind: Arc<str>,
}

impl GroupKind {
    pub fn new(group: impl Into<Arc<str>>, kind: impl Into<Arc<str>>) -> GroupKind {
        GroupKind {
            group: group.into(),
            kind: kind.into(),
        }
    }

    /// The group and kind of an object (empty when absent).
    pub fn of(object: &serde_json::Value) -> GroupKind {
        let (group, kind) = super::kinds::group_kind(object);
        GroupKind::new(group, kind)
    }

    /// Namespaces, which every policy set reads.
    pub fn namespace() -> &'static GroupKind {
        static NAMESPACE: std::sync::LazyLock<GroupKind> =
            std::sync::LazyLock::new(|| GroupKind::new("", "Namespace"));
        &NAMESPACE
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Whether this is `kind` of `group`.
    pub fn is(&self, group: &str, kind: &str) -> bool {
        &*self.group == group && &*self.kind == kind
    }

    /// The kind in `version` of its group.
    pub fn with_version(&self, version: &str) -> GroupVersionKind {
        GroupVersionKind::new(&self.group, version, self.kind.clone())
    }
}

/// As kube prints it: `Deployment.apps`, or `Pod` in the core group.
impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

/// A kind at one version of its group, as an object's `apiVersion` and
/// `kind` name it. The apiVersion is kept as written (`apps/v1`, `v1`), so
/// that it reads back unchanged; the group and version are its parts.
/// Ordered and hashed as the pair (apiVersion, kind).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupVersionKind {
    api_version: Arc<str>,
    kind: Arc<str>,
}

impl GroupVersionKind {
    pub fn from_api_version(
        api_version: impl Into<Arc<str>>,
        kind: impl Into<Arc<str>>,
    ) -> GroupVersionKind {
        GroupVersionKind {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    /// From its parts, as an AdmissionRequest names a kind.
    pub fn new(group: &str, version: &str, kind: impl Into<Arc<str>>) -> GroupVersionKind {
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        GroupVersionKind::from_api_version(api_version, kind)
    }

    /// The apiVersion and kind of an object, if it has both.
    pub fn of(object: &serde_json::Value) -> Option<GroupVersionKind> {
        let field = |f: &str| object.get(f).and_then(serde_json::Value::as_str);
        Some(GroupVersionKind::from_api_version(
            field("apiVersion")?,
            field("kind")?,
        ))
    }

    /// `apps/v1`, or `v1` in the core group.
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    pub fn group(&self) -> &str {
        super::kinds::group_of(&self.api_version)
    }

    pub fn version(&self) -> &str {
        super::kinds::version_of(&self.api_version)
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }

    pub fn group_kind(&self) -> GroupKind {
        GroupKind {
            group: self.group().into(),
            kind: self.kind.clone(),
        }
    }
}

/// As kube prints it: `Deployment.v1.apps`, or `Pod.v1` in the core group.
impl fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (group, version) = (self.group(), self.version());
        if group.is_empty() {
            write!(f, "{}.{version}", self.kind)
        } else {
            write!(f, "{}.{version}.{group}", self.kind)
        }
    }
}

/// A resource in an API group: `deployments` in `apps`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    pub group: Arc<str>,
    pub resource: Arc<str>,
}

impl GroupResource {
    pub fn new(group: impl Into<Arc<str>>, resource: impl Into<Arc<str>>) -> GroupResource {
        GroupResource {
            group: group.into(),
            resource: resource.into(),
        }
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    pub fn resource(&self) -> &str {
        &self.resource
    }
}

/// As kube prints it: `deployments.apps`, or `pods` in the core group.
impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// An object's namespace (empty for a cluster-scoped one) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamespacedName {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl NamespacedName {
    pub fn new(namespace: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> NamespacedName {
        NamespacedName {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// As kubectl names it: `namespace/name`, or `name` when cluster-scoped.
impl fmt::Display for NamespacedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

#[cfg(test)]
#[path = "kind_tests.rs"]
mod tests;
