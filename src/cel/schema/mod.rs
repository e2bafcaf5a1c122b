//! OpenAPI schemas as static CEL types, as kube-apiserver derives them
//! (`k8s.io/apiserver/pkg/cel/common/schemas.go`, `SchemaDeclType`, and
//! `DeclType.MaybeAssignTypeName`) when its type-checking controller
//! types `object`, `oldObject` and `params` of a ValidatingAdmissionPolicy.
//!
//! Only what typing reads is kept: `type`, `format` (the string formats
//! that change the type, and `int-or-string`), `$ref`, `properties`,
//! `items`, an `additionalProperties` schema, `x-kubernetes-int-or-string`
//! and `x-kubernetes-embedded-resource`. kube ignores the rest when it
//! types an expression (`x-kubernetes-preserve-unknown-fields`, `required`,
//! `nullable`, `enum` and the size limits only feed its cost estimate).

use super::types::{StructTy, Ty};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One schema node. Deserializes from OpenAPI v3 JSON (a CRD's
/// `openAPIV3Schema`, an apiserver's `/openapi/v3`) and from the compact
/// form it serializes to (one-letter keys).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    #[serde(
        rename = "t",
        alias = "type",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub ty: Option<String>,
    #[serde(
        rename = "f",
        alias = "format",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub format: Option<String>,
    /// A definition's name (`io.k8s.api.core.v1.PodSpec`), the
    /// `#/components/schemas/` prefix removed.
    #[serde(
        rename = "r",
        alias = "$ref",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub reference: Option<String>,
    #[serde(
        rename = "p",
        alias = "properties",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub properties: BTreeMap<String, Schema>,
    #[serde(
        rename = "i",
        alias = "items",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub items: Option<Box<Schema>>,
    /// `additionalProperties` when it is a schema (`true`/`false` type
    /// nothing, as in kube).
    #[serde(
        rename = "a",
        alias = "additionalProperties",
        default,
        deserialize_with = "schema_or_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub additional_properties: Option<Box<Schema>>,
    #[serde(
        rename = "is",
        alias = "x-kubernetes-int-or-string",
        default,
        skip_serializing_if = "is_false"
    )]
    pub int_or_string: bool,
    #[serde(
        rename = "er",
        alias = "x-kubernetes-embedded-resource",
        default,
        skip_serializing_if = "is_false"
    )]
    pub embedded_resource: bool,
    /// `x-kubernetes-preserve-unknown-fields`: a CRD's object whose
    /// undeclared fields are kept (server-side apply merges them as it
    /// deduces them: maps by key, lists replaced).
    #[serde(
        rename = "pu",
        alias = "x-kubernetes-preserve-unknown-fields",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub preserve_unknown_fields: bool,
    /// `x-kubernetes-list-type` (`atomic`, `set`, `map`): how
    /// server-side apply merges the list (`k8s::apply`).
    #[serde(
        rename = "lt",
        alias = "x-kubernetes-list-type",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`: the keys of a `map` list's items.
    #[serde(
        rename = "lk",
        alias = "x-kubernetes-list-map-keys",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type` (`atomic`, `granular`).
    #[serde(
        rename = "mt",
        alias = "x-kubernetes-map-type",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub map_type: Option<String>,
    /// `x-kubernetes-patch-strategy`, which decides a list's merge when it
    /// has no list type.
    #[serde(
        rename = "ps",
        alias = "x-kubernetes-patch-strategy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub patch_strategy: Option<String>,
    /// `x-kubernetes-patch-merge-key`.
    #[serde(
        rename = "pk",
        alias = "x-kubernetes-patch-merge-key",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub patch_merge_key: Option<String>,
    /// kube-openapi wraps a `$ref` in `allOf` to keep its description;
    /// [`Schema::normalize`] turns it into the `$ref`.
    #[serde(rename = "allOf", default, skip_serializing)]
    pub all_of: Vec<Schema>,
}

fn is_false(b: &bool) -> bool {
    !b
}

fn schema_or_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<Schema>>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Bool(_) => Ok(None),
        v => serde_json::from_value(v)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

const REF_PREFIX: &str = "#/components/schemas/";
const INT_OR_STRING: &str = "int-or-string";

impl Schema {
    fn object() -> Schema {
        Schema {
            ty: Some("object".into()),
            ..Schema::default()
        }
    }

    fn string() -> Schema {
        Schema {
            ty: Some("string".into()),
            ..Schema::default()
        }
    }

    /// Keeps only what typing reads: a `$ref` (also one wrapped in
    /// `allOf`) replaces the whole node, as kube's `PopulateRefs` does.
    pub fn normalize(&mut self) {
        if self.reference.is_none() {
            self.reference = ref_in_all_of(&self.all_of);
        }
        if let Some(r) = self.reference.take() {
            let name = r.strip_prefix(REF_PREFIX).unwrap_or(&r).to_string();
            *self = Schema {
                reference: Some(name),
                map_type: self.map_type.take(),
                ..Schema::default()
            };
            return;
        }
        self.all_of.clear();
        let typing_format = matches!(
            self.format.as_deref(),
            Some("byte" | "duration" | "date" | "date-time" | INT_OR_STRING)
        );
        if !typing_format {
            self.format = None;
        }
        self.properties.values_mut().for_each(Schema::normalize);
        for s in [&mut self.items, &mut self.additional_properties]
            .into_iter()
            .flatten()
        {
            s.normalize();
        }
    }

    fn is_int_or_string(&self) -> bool {
        self.int_or_string || self.format.as_deref() == Some(INT_OR_STRING)
    }

    fn ty_is(&self, t: &str) -> bool {
        self.ty.as_deref() == Some(t)
    }

    /// kube's `WithTypeAndObjectMeta`: `kind`, `apiVersion` and
    /// `metadata.name`/`generateName` are always there at a resource root
    /// (looked for with `$ref`s resolved, as kube resolves them first).
    fn with_type_and_object_meta(&self, defs: &dyn Definitions) -> Schema {
        let get = |s: &Schema, name: &str| -> Option<Schema> {
            let p = s.properties.get(name)?;
            match &p.reference {
                Some(r) => defs.definition(r).cloned(),
                None => Some(p.clone()),
            }
        };
        let string = |s: Option<Schema>| s.is_some_and(|s| s.ty_is("string"));
        let complete = string(get(self, "kind"))
            && string(get(self, "apiVersion"))
            && get(self, "metadata").is_some_and(|m| {
                m.ty_is("object") && string(get(&m, "name")) && string(get(&m, "generateName"))
            });
        let mut result = self.clone();
        if !complete {
            let mut metadata = Schema::object();
            metadata.properties.insert("name".into(), Schema::string());
            metadata
                .properties
                .insert("generateName".into(), Schema::string());
            result.properties.insert("kind".into(), Schema::string());
            result
                .properties
                .insert("apiVersion".into(), Schema::string());
            result.properties.insert("metadata".into(), metadata);
        }
        result
    }
}

fn ref_in_all_of(all_of: &[Schema]) -> Option<String> {
    all_of
        .iter()
        .find_map(|s| s.reference.clone().or_else(|| ref_in_all_of(&s.all_of)))
}

/// The definitions a schema's `$ref`s name.
pub trait Definitions {
    fn definition(&self, name: &str) -> Option<&Schema>;
}

impl Definitions for BTreeMap<String, Schema> {
    fn definition(&self, name: &str) -> Option<&Schema> {
        self.get(name)
    }
}

/// The CEL type of a resource's schema, its object types named after
/// `type_name` and their paths (`Deployment.spec.template`), or `None`
/// when kube would not expose it (a schema without a type).
pub fn resource_type(root: &Schema, defs: &dyn Definitions, type_name: &str) -> Option<Ty> {
    let mut d = Decl {
        defs,
        visited: Vec::new(),
    };
    d.decl(root, Some(true), type_name)
}

struct Decl<'d> {
    defs: &'d dyn Definitions,
    /// The `$ref`s being expanded: a cycle becomes an empty object, as in
    /// kube's `PopulateRefs`.
    visited: Vec<String>,
}

impl Decl<'_> {
    /// `root`: whether `s` is a resource root (`None`: it is one when it
    /// is an embedded resource).
    fn decl(&mut self, s: &Schema, root: Option<bool>, name: &str) -> Option<Ty> {
        let Some(r) = &s.reference else {
            return self.resolved(s, root, name);
        };
        if self.visited.contains(r) {
            return self.resolved(&Schema::object(), root, name);
        }
        let target = self.defs.definition(r)?;
        self.visited.push(r.clone());
        let t = self.resolved(target, root, name);
        self.visited.pop();
        t
    }

    fn resolved(&mut self, s: &Schema, root: Option<bool>, name: &str) -> Option<Ty> {
        if s.is_int_or_string() {
            return Some(Ty::Dyn);
        }
        let with_meta;
        let s = if root.unwrap_or(s.embedded_resource) {
            with_meta = s.with_type_and_object_meta(self.defs);
            &with_meta
        } else {
            s
        };
        match s.ty.as_deref()? {
            "array" => {
                let items = s.items.as_deref()?;
                Some(Ty::list(self.decl(items, None, &format!("{name}.@idx"))?))
            }
            "object" => self.object(s, name),
            "string" => Some(match s.format.as_deref() {
                Some("byte") => Ty::Bytes,
                Some("duration") => Ty::Duration,
                Some("date" | "date-time") => Ty::Timestamp,
                _ => Ty::String,
            }),
            "boolean" => Some(Ty::Bool),
            "number" => Some(Ty::Double),
            "integer" => Some(Ty::Int),
            _ => None,
        }
    }

    fn object(&mut self, s: &Schema, name: &str) -> Option<Ty> {
        if let Some(values) = &s.additional_properties {
            let v = self.decl(values, None, &format!("{name}.@elem"))?;
            return Some(Ty::map(Ty::String, v));
        }
        let mut fields = Vec::new();
        for (field, prop) in &s.properties {
            let Some(escaped) = escape(field) else {
                continue;
            };
            if let Some(t) = self.decl(prop, None, &format!("{name}.{escaped}")) {
                fields.push((escaped.into(), t));
            }
        }
        Some(Ty::Struct(Arc::new(StructTy {
            name: name.into(),
            fields,
        })))
    }
}

/// A word kube's `cel.Escape` writes as `__word__`: the literals, `in`,
/// and the CEL lexer's reserved words (`object.metadata.namespace` still
/// finds such a field).
pub fn is_escaped_word(ident: &str) -> bool {
    matches!(ident, "true" | "false" | "null" | "in") || crate::cel::lexer::is_reserved(ident)
}

/// kube's `cel.Escape`: a property name as a CEL field name, or `None`
/// when it cannot be one (the property is then not exposed).
pub fn escape(ident: &str) -> Option<String> {
    if ident.is_empty() || ident.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if is_escaped_word(ident) {
        return Some(format!("__{ident}__"));
    }
    let mut out = String::with_capacity(ident.len());
    let mut chars = ident.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests;
