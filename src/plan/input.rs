//! The ResourceGroups of `plan`'s files: every one read, or every problem
//! named by file, line and field.

use crate::group::crd::ResourceGroupSpec;
use crate::group::expand::is_group;
use crate::manifest::{load_paths, Document, LoadOptions};
use serde_json::{json, Value};
use std::path::PathBuf;

/// One group of the files.
#[derive(Debug, Clone)]
pub struct InputGroup {
    /// `file:line` of the document.
    pub source: String,
    /// As written; `None`: the kubeconfig's namespace.
    pub namespace: Option<String>,
    pub name: String,
    pub spec: ResourceGroupSpec,
}

/// An input that cannot be planned (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct InputError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// Reads every ResourceGroup of `paths`; other documents are ignored.
pub fn read(paths: &[PathBuf]) -> Result<Vec<InputGroup>, Vec<InputError>> {
    let loaded = load_paths(paths, &LoadOptions::default());
    let mut errors: Vec<InputError> = loaded
        .errors
        .iter()
        .map(|e| InputError {
            file: e.source.to_string(),
            line: e.line.unwrap_or(0),
            message: e.message(),
        })
        .collect();
    let mut groups = Vec::new();
    for doc in loaded.documents.iter().filter(|d| is_group(&d.value)) {
        match group(doc) {
            Ok(g) => groups.push(g),
            Err(e) => errors.push(e),
        }
    }
    if groups.is_empty() && errors.is_empty() {
        errors.push(InputError {
            file: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            line: 0,
            message: "no ResourceGroup in the files".into(),
        });
    }
    if errors.is_empty() {
        Ok(groups)
    } else {
        Err(errors)
    }
}

fn group(doc: &Document) -> Result<InputGroup, InputError> {
    let error = |pointer: &str, message: String| InputError {
        file: doc.source.to_string(),
        line: doc.line_of_pointer(pointer).unwrap_or(doc.line),
        message: format!("{}: {message}", doc.display_name()),
    };
    let name = doc
        .name()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| error("/metadata", "metadata.name is required".into()))?;
    let raw = doc.value.get("spec").cloned().unwrap_or(Value::Null);
    let spec = serde_json::from_value::<ResourceGroupSpec>(raw.clone()).map_err(|e| {
        let field = bad_field(&raw);
        let pointer = field
            .as_deref()
            .map_or("/spec".to_string(), |f| format!("/spec/{f}"));
        let named = field.map_or("spec".to_string(), |f| format!("spec.{f}"));
        error(&pointer, format!("{named}: {e}"))
    })?;
    Ok(InputGroup {
        source: format!("{}:{}", doc.source, doc.line),
        namespace: doc.namespace().map(str::to_string),
        name: name.to_string(),
        spec,
    })
}

/// The first field of `spec` that does not read on its own (the error of
/// the whole spec names no field).
fn bad_field(spec: &Value) -> Option<String> {
    let fields = spec.as_object()?;
    if !fields.contains_key("serviceAccountName") {
        return Some("serviceAccountName".into());
    }
    fields
        .iter()
        .find(|(k, v)| {
            let mut alone = json!({"serviceAccountName": "x"});
            alone[k.as_str()] = (*v).clone();
            serde_json::from_value::<ResourceGroupSpec>(alone).is_err()
        })
        .map(|(k, _)| k.clone())
}

#[cfg(test)]
#[path = "input_tests.rs"]
mod tests;
