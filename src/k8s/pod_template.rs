//! Pod templates in kinds no policy names: a CRD such as an Argo Rollout
//! (`spec.template`) or a custom cron kind (`spec.jobTemplate.spec.template`)
//! makes Pods as a Deployment does, yet the pod policies list the built-in
//! kinds only. Recognised by shape, each template becomes a `PodTemplate`
//! (v1), a kind every pod policy already reads (`template.spec`), so
//! policies need not know the CRD.

use serde_json::{json, Value as Json};

/// The annotation a made PodTemplate carries: the object and the field it
/// was taken from.
pub const TEMPLATE_OF: &str = "interlock.dev/template-of";

/// Where a kind keeps a pod template, as JSON pointers.
pub const TEMPLATE_PATHS: &[&str] = &["/spec/template", "/spec/jobTemplate/spec/template"];

/// One pod template found in an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    /// The JSON pointer of the template in the object.
    pub pointer: &'static str,
    /// A `PodTemplate` named and placed as the object, holding the template.
    pub pod_template: Json,
}

/// A template is a mapping whose `spec.containers` is a non-empty list:
/// the shape of a PodTemplateSpec, which other `template` fields (a
/// SealedSecret's, an ExternalSecret's) do not have.
fn is_pod_template(t: &Json) -> bool {
    t.pointer("/spec/containers")
        .and_then(Json::as_array)
        .is_some_and(|c| !c.is_empty())
}

/// Whether `object` holds a pod template (cheap: no copy).
pub fn has_embedded(object: &Json) -> bool {
    TEMPLATE_PATHS
        .iter()
        .any(|p| object.pointer(p).is_some_and(is_pod_template))
}

/// The pod templates of `object`, each as a PodTemplate.
pub fn embedded(object: &Json) -> Vec<Embedded> {
    let s = |p: &str| object.pointer(p).and_then(Json::as_str).unwrap_or("");
    let (kind, name, namespace) = (s("/kind"), s("/metadata/name"), s("/metadata/namespace"));
    TEMPLATE_PATHS
        .iter()
        .filter_map(|&pointer| {
            let template = object.pointer(pointer).filter(|t| is_pod_template(t))?;
            let owner = if namespace.is_empty() {
                format!("{kind} {name}")
            } else {
                format!("{kind} {namespace}/{name}")
            };
            let field = pointer.trim_start_matches('/').replace('/', ".");
            let mut metadata = json!({"name": name,
                "annotations": {TEMPLATE_OF: format!("{owner} ({field})")}});
            if !namespace.is_empty() {
                metadata["namespace"] = json!(namespace);
            }
            Some(Embedded {
                pointer,
                pod_template: json!({"apiVersion": "v1", "kind": "PodTemplate",
                    "metadata": metadata, "template": template}),
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "pod_template_tests.rs"]
mod tests;
