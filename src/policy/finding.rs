//! The finding model every front-end reports in: what rule, which object,
//! where, and what action. `check` and `audit` print it (crate::report), the
//! controller writes it into a group's status.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::manifest::{Document, LoadError};

/// What a violated rule does, as in a ValidatingAdmissionPolicyBinding's
/// `validationActions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Action {
    /// The request would be refused; `check` exits 1.
    Deny,
    /// The request would pass with a warning.
    Warn,
    /// The request would pass and the violation is recorded in the audit log.
    Audit,
}

impl Action {
    /// `Deny`, `Warn` or `Audit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "Deny",
            Action::Warn => "Warn",
            Action::Audit => "Audit",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Action> {
        match s {
            "Deny" => Some(Action::Deny),
            "Warn" => Some(Action::Warn),
            "Audit" => Some(Action::Audit),
            _ => None,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which object a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    /// `apiVersion`, e.g. `apps/v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `kind`, e.g. `Deployment`.
    pub kind: String,
    /// `metadata.namespace`, `None` for cluster-scoped objects or when unset.
    pub namespace: Option<String>,
    /// `metadata.name` (or `generateName` followed by `*`).
    pub name: String,
}

impl ObjectRef {
    /// The reference of a loaded document.
    pub fn from_document(doc: &Document) -> ObjectRef {
        let name = match doc.name() {
            Some(n) => n.to_string(),
            None => {
                let g = doc
                    .value
                    .get("metadata")
                    .and_then(|m| m.get("generateName"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("{g}*")
            }
        };
        ObjectRef {
            api_version: doc.api_version().to_string(),
            kind: doc.kind().to_string(),
            namespace: doc.namespace().map(str::to_string),
            name,
        }
    }
}

impl fmt::Display for ObjectRef {
    /// `Kind namespace/name`, or `Kind name` without a namespace.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// A place in an input file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourceLocation {
    /// The file as given on the command line (or found under a directory
    /// given there), or `<stdin>`.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The kustomization or Helm chart whose rendering produced the
    /// object, when `file` is the source it was rendered from.
    #[serde(
        default,
        rename = "renderedBy",
        skip_serializing_if = "Option::is_none"
    )]
    pub rendered_by: Option<String>,
}

impl SourceLocation {
    /// A place in a file as written.
    pub fn at(file: impl Into<String>, line: usize) -> SourceLocation {
        SourceLocation {
            file: file.into(),
            line,
            rendered_by: None,
        }
    }

    /// Where a loaded document starts.
    pub fn from_document(doc: &Document) -> SourceLocation {
        SourceLocation {
            file: doc.source.to_string(),
            line: doc.line,
            rendered_by: doc.rendered_by.as_deref().map(str::to_string),
        }
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if let Some(by) = &self.rendered_by {
            write!(f, " (rendered from {by})")?;
        }
        Ok(())
    }
}

/// Another object involved in a cross-object finding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RelatedObject {
    /// The object.
    pub object: ObjectRef,
    /// Where it is defined, when it came from a file.
    pub source: Option<SourceLocation>,
}

/// One violated rule for one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Name of the policy.
    pub policy: String,
    /// Name of the binding, for ValidatingAdmissionPolicies.
    pub binding: Option<String>,
    /// What the violation does.
    pub action: Action,
    /// The object that violates the rule.
    pub object: ObjectRef,
    /// The message, as the API server would show it.
    pub message: String,
    /// Where the object is defined.
    pub source: SourceLocation,
    /// Other objects involved (for example the other Ingress using a host).
    pub related: Vec<RelatedObject>,
    /// The validation's `reason` (`Invalid`, `Forbidden`, ...), if given.
    pub reason: Option<String>,
}

/// An input that could not be read or compiled.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InputError {
    /// The file, or `<stdin>`.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong, in words a user can act on.
    pub message: String,
}

impl From<&LoadError> for InputError {
    fn from(e: &LoadError) -> Self {
        InputError {
            file: e.source.to_string(),
            line: e.line,
            column: e.column,
            message: e.message(),
        }
    }
}

impl fmt::Display for InputError {
    /// `file:line:column: message`, leaving out what is not known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

/// One (policy, object) pair that a policy evaluated, passing or not. Only
/// the JUnit writer uses these, to list passing test cases.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Evaluated {
    /// Name of the policy.
    pub policy: String,
    /// The object.
    pub object: ObjectRef,
    /// Where the object is defined.
    pub source: SourceLocation,
}
