//! The PolicyTest document: what a case sends and what it expects.

use crate::policy::{Operation, RequestShape};
use serde::Deserialize;
use serde_json::Value as Json;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TestSpec {
    #[serde(default)]
    pub expect: Vec<Expectation>,
    /// How every checked object is sent; default a CREATE (an UPDATE when
    /// `oldObjects` are given) by the offline auditor.
    #[serde(default)]
    pub request: RequestSpec,
    /// The stored versions an UPDATE replaces, matched to the checked
    /// objects by apiVersion group, kind, namespace and name.
    #[serde(default)]
    pub old_objects: Vec<Json>,
    /// Objects that lookups see but that are not checked.
    #[serde(default)]
    pub inventory: Vec<Json>,
    /// What the policies' mutations do; when given, an object left out
    /// must not be mutated.
    #[serde(default)]
    pub expect_mutations: Option<Vec<MutationExpectation>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RequestSpec {
    #[serde(default)]
    pub operation: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub groups: Option<Vec<String>>,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub sub_resource: String,
}

/// A `spec.request` that makes no request.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    #[error("spec.request.operation: {0:?} is not CREATE, UPDATE or DELETE")]
    Operation(String),
    #[error("spec.oldObjects are given but spec.request.operation is {0}: old objects belong to an UPDATE")]
    OldObjects(&'static str),
}

impl RequestSpec {
    /// The shape of the requests; `updates` when oldObjects are given.
    pub fn shape(&self, updates: bool, default_user: &str) -> Result<RequestShape, ShapeError> {
        let operation = match self.operation.as_deref() {
            None if updates => Operation::Update,
            None => Operation::Create,
            Some(op) => {
                Operation::parse(op).ok_or_else(|| ShapeError::Operation(op.to_string()))?
            }
        };
        if updates && operation != Operation::Update {
            return Err(ShapeError::OldObjects(operation.as_str()));
        }
        Ok(RequestShape {
            operation,
            user: self.user.clone().unwrap_or_else(|| default_user.into()),
            groups: self.groups.clone(),
            subresource: self.sub_resource.clone(),
            dry_run: self.dry_run,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Expectation {
    pub object: Target,
    pub action: String,
    #[serde(default)]
    pub message_contains: Option<String>,
    /// A regular expression the message must match (anywhere in it).
    #[serde(default)]
    pub message_matches: Option<String>,
    /// How many findings match exactly (several validations, or several
    /// params); default 1.
    #[serde(default)]
    pub count: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct MutationExpectation {
    pub object: Target,
    /// The JSON patch (RFC 6902) the mutations yield, in order.
    #[serde(default)]
    pub patch: Option<Vec<Json>>,
    /// The object once the patch is applied.
    #[serde(default)]
    pub patched: Option<Json>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Target {
    pub kind: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub name: String,
}

impl Target {
    pub fn is(&self, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        self.kind == kind
            && self.name == name
            && self.namespace.as_deref().unwrap_or("") == namespace.unwrap_or("")
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) if !ns.is_empty() => write!(f, "{} {ns}/{}", self.kind, self.name),
            _ => write!(f, "{} {}", self.kind, self.name),
        }
    }
}
