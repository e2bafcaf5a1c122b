//! The OpenAPI schemas of Kubernetes 1.36's built-in kinds, offline, and
//! the CustomResourceDefinitions given alongside them: what
//! kube-apiserver's ValidatingAdmissionPolicy type checker resolves a
//! matched kind to (kube-controller-manager's REST mapper and schema
//! resolver).
//!
//! `schemas.json` is generated from a real kube-apiserver v1.36.3 by
//! `tests/integration/celwarn_schemas.rs` (which fails when it differs from
//! the live server's `/openapi/v3`): every served resource (group, version,
//! resource, kind, root definition) and the definitions reachable from
//! them, trimmed to what typing reads (`cel::schema`).

use crate::cel::schema::{self, Definitions, Schema};
use crate::cel::Ty;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// One served resource: `[group, version, resource, kind, definition]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource(pub String, pub String, pub String, pub String, pub String);

impl Resource {
    fn gvk(&self) -> Gvk {
        Gvk {
            group: self.0.clone(),
            version: self.1.clone(),
            kind: self.3.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl std::fmt::Display for Gvk {
    /// apimachinery's `GroupVersionKind.String()`: `apps/v1, Kind=Deployment`
    /// (`/v1, Kind=Pod` for the core group).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// Resources and the schema definitions their kinds resolve to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Schemas {
    pub resources: Vec<Resource>,
    pub definitions: BTreeMap<String, Schema>,
}

impl Definitions for Schemas {
    fn definition(&self, name: &str) -> Option<&Schema> {
        self.definitions.get(name)
    }
}

/// The built-in kinds of Kubernetes 1.36 (parsed once).
pub fn builtin() -> &'static Schemas {
    static BUILTIN: OnceLock<Schemas> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        serde_json::from_str(include_str!("schemas.json")).expect("the bundled schemas parse")
    })
}

/// The definition name a CustomResourceDefinition's version gets here.
fn crd_definition(group: &str, version: &str, kind: &str) -> String {
    format!("crd:{group}/{version}/{kind}")
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

impl Schemas {
    /// The kinds a resource rule's group, version and resource name map
    /// to, as kube's `RESTMapper.KindsFor`: the empty (core) group matches
    /// every group (`""`, `v1`, `events` is core's Event and
    /// events.k8s.io's), core first.
    pub fn kinds_for(&self, group: &str, version: &str, resource: &str) -> Vec<Gvk> {
        let resource = resource.to_ascii_lowercase();
        let mut kinds: Vec<&Resource> = self
            .resources
            .iter()
            .filter(|r| (group.is_empty() || r.0 == group) && r.1 == version && r.2 == resource)
            .collect();
        kinds.sort_by_key(|r| !r.0.is_empty());
        kinds.into_iter().map(Resource::gvk).collect()
    }

    /// `gvk`'s schema as a CEL type whose object types are named after
    /// `type_name`; `None` when no schema is known (`dyn` when kube would
    /// not expose it).
    pub fn resource_type(&self, gvk: &Gvk, type_name: &str) -> Option<Ty> {
        let r = self.resources.iter().find(|r| r.gvk() == *gvk)?;
        let root = self.definitions.get(&r.4)?;
        Some(schema::resource_type(root, self, type_name).unwrap_or(Ty::Dyn))
    }

    /// The root schema of a kind at a version, if known.
    pub fn root(&self, group: &str, version: &str, kind: &str) -> Option<&Schema> {
        let r = self
            .resources
            .iter()
            .find(|r| r.0 == group && r.1 == version && r.3 == kind)?;
        self.definitions.get(&r.4)
    }

    /// Adds the served versions of a CustomResourceDefinition (a manifest's
    /// JSON) that have a schema, as kube-apiserver publishes them: its
    /// `metadata` is the full ObjectMeta, `apiVersion` and `kind` strings.
    pub fn add_crd(&mut self, crd: &serde_json::Value) -> Result<(), CrdError> {
        let spec = &crd["spec"];
        let missing = |field| CrdError::Missing { field };
        let group = spec["group"].as_str().ok_or(missing("group"))?;
        let plural = spec["names"]["plural"]
            .as_str()
            .ok_or(missing("names.plural"))?;
        let kind = spec["names"]["kind"]
            .as_str()
            .ok_or(missing("names.kind"))?;
        let versions = spec["versions"].as_array().ok_or(missing("versions"))?;
        for (i, v) in versions.iter().enumerate() {
            let version = v["name"]
                .as_str()
                .ok_or(CrdError::MissingVersionName { at: i })?;
            if v["served"] == false {
                continue;
            }
            let Some(raw) = v["schema"].get("openAPIV3Schema") else {
                continue;
            };
            let mut root: Schema = serde_json::from_value(raw.clone())
                .map_err(|error| CrdError::Schema { at: i, error })?;
            root.normalize();
            publish(&mut root, true);
            let name = crd_definition(group, version, kind);
            self.resources
                .retain(|r| !(r.0 == group && r.1 == version && r.2 == plural));
            self.resources.push(Resource(
                group.into(),
                version.into(),
                plural.into(),
                kind.into(),
                name.clone(),
            ));
            self.definitions.insert(name, root);
        }
        Ok(())
    }
}

/// Why a CustomResourceDefinition's schemas cannot be read; the field is
/// under `spec`.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("spec.{field} is missing")]
    Missing { field: &'static str },
    #[error("spec.versions[{at}].name is missing")]
    MissingVersionName { at: usize },
    #[error("spec.versions[{at}].schema.openAPIV3Schema: {error}")]
    Schema { at: usize, error: serde_json::Error },
}

/// What kube-apiserver's CRD OpenAPI builder adds to the root and to
/// every embedded resource: `apiVersion`, `kind` and the full ObjectMeta.
fn publish(s: &mut Schema, root: bool) {
    for p in s.properties.values_mut() {
        publish(p, false);
    }
    for p in [&mut s.items, &mut s.additional_properties]
        .into_iter()
        .flatten()
    {
        publish(p, false);
    }
    if root || s.embedded_resource {
        let string = || Schema {
            ty: Some("string".into()),
            ..Schema::default()
        };
        s.properties.insert("apiVersion".into(), string());
        s.properties.insert("kind".into(), string());
        let meta = Schema {
            reference: Some(OBJECT_META.into()),
            ..Schema::default()
        };
        s.properties.insert("metadata".into(), meta);
    }
}

#[cfg(test)]
mod tests;
