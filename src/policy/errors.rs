//! Why a policy did not load or an expression gave no value.

use super::*;

/// A policy that could not be loaded, with where and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}:{}{}: {policy}: {message}", location.file, location.line, column.map(|c| format!(":{c}")).unwrap_or_default())]
pub struct PolicyError {
    /// The document, or (once located) the line of the failing expression.
    pub location: Source,
    /// The column of the failing expression's error in the file, once located.
    pub column: Option<usize>,
    pub policy: String,
    pub message: String,
    /// The expression that did not compile: its field and its error.
    pub expression: Option<(String, CompileError)>,
}

impl PolicyError {
    /// Puts the error at the line and column of the expression in `doc`'s
    /// file (read again; the loader keeps no text), or at least at the
    /// line of its field.
    pub(super) fn locate(&mut self, doc: &crate::manifest::Document) {
        let Some((pointer, e)) = &self.expression else {
            return;
        };
        let Some(key_line) = doc.line_of_pointer(pointer) else {
            return;
        };
        self.location.line = key_line;
        let value = doc.value.pointer(pointer).and_then(Json::as_str);
        let text = match &doc.source {
            crate::manifest::Source::File(path) => std::fs::read_to_string(path).ok(),
            crate::manifest::Source::Stdin => None,
        };
        let key = pointer.rsplit('/').next().unwrap_or_default();
        if let (Some(value), Some(text)) = (value, text) {
            if let Some((line, column)) =
                crate::manifest::position_in_scalar(&text, key_line, key, value, e.line, e.column)
            {
                self.location.line = line;
                self.column = Some(column);
            }
        }
    }
}

/// Why a policy document did not compile.
pub(super) struct Failure {
    pub(super) message: String,
    /// The JSON pointer of the expression that failed, and its error.
    pub(super) expression: Option<(String, CompileError)>,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure {
            message,
            expression: None,
        }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Failure {
        message.to_string().into()
    }
}

/// Why an expression evaluated in a policy's context gave no value.
#[derive(Debug, thiserror::Error)]
pub enum ExpressionError {
    #[error("{0}")]
    Compile(CompileError),
    #[error("{0}")]
    Eval(String),
}

/// kube-apiserver's words for an expression of the wrong static type
/// (admission/plugin/cel/compile.go).
pub(super) fn must_evaluate_to(want: &[Ty], got: &Ty) -> String {
    match want {
        [one] => format!(
            "must evaluate to {} but got {}",
            one.declared_name(),
            got.declared_name()
        ),
        _ => {
            let names: Vec<String> = want.iter().map(Ty::declared_name).collect();
            format!(
                "must evaluate to one of [{}] but got {}",
                names.join(" "),
                got.declared_name()
            )
        }
    }
}

/// A policy document the engine cannot use as written. It stays wrong until
/// the document changes: callers report it, they never retry it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

impl From<String> for SpecError {
    fn from(message: String) -> SpecError {
        SpecError(message)
    }
}

impl From<&str> for SpecError {
    fn from(message: &str) -> SpecError {
        SpecError(message.to_string())
    }
}

impl From<super::claims::ClaimError> for Failure {
    fn from(e: super::claims::ClaimError) -> Failure {
        Failure::from(e.to_string())
    }
}

impl From<SpecError> for Failure {
    fn from(e: SpecError) -> Failure {
        Failure::from(e.0)
    }
}

pub(super) fn spec<T: serde::de::DeserializeOwned>(doc: &Json) -> Result<T, SpecError> {
    let spec = doc.get("spec").cloned().ok_or("has no spec")?;
    Ok(serde_json::from_value(spec).map_err(|e| format!("spec: {e}"))?)
}
