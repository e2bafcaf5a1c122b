//! Kubernetes label selectors.

use super::model::LabelSelector;
use serde_json::{Map, Value as Json};

/// A `matchExpressions` operator Kubernetes does not define.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown label selector operator {0:?}; use In, NotIn, Exists or DoesNotExist")]
pub struct UnknownOperator(pub String);

impl LabelSelector {
    /// Does the selector select an object with these labels? An empty
    /// selector selects everything, as in Kubernetes.
    pub fn matches(&self, labels: Option<&Map<String, Json>>) -> Result<bool, UnknownOperator> {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Json::as_str);
        for (k, v) in &self.match_labels {
            if get(k) != Some(v.as_str()) {
                return Ok(false);
            }
        }
        for r in &self.match_expressions {
            let value = get(&r.key);
            let ok = match r.operator.as_str() {
                "In" => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                "NotIn" => value.is_none_or(|v| !r.values.iter().any(|x| x == v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                other => return Err(UnknownOperator(other.to_string())),
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The labels of an object, if it has any.
pub fn labels(object: &Json) -> Option<&Map<String, Json>> {
    object.get("metadata")?.get("labels")?.as_object()
}

#[cfg(test)]
#[path = "selector_tests.rs"]
mod tests;
