//! Files that are known not to hold Kubernetes objects: kustomize and Helm
//! sources, Skaffold configuration, plain data. `interlock check` over a
//! repository skips them (with a notice that says how to render kustomize
//! and Helm into objects) instead of failing on every one of their
//! documents.
//!
//! Only files that are certainly not objects are skipped: a document that
//! has an `apiVersion`, a `kind` or a `metadata` and is not one of the
//! known tool configurations is an object, and a malformed one stays an
//! error.

use std::fmt;
use std::path::Path;

use serde_json::Value;

use super::error::Source;
use super::yaml::RawDoc;

/// Why a file was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    /// `kustomization.yaml` and kustomize's own kinds (Kustomization,
    /// Component): kustomize input, rendered by `kubectl kustomize`.
    Kustomize,
    /// `Chart.yaml`, `Chart.lock`, `values*.yaml`, and everything in a
    /// folder that has a `Chart.yaml` (templates): rendered by `helm
    /// template`.
    Helm,
    /// `skaffold.yaml` (Skaffold's `Config`).
    Skaffold,
    /// Documents without `apiVersion`, `kind` and `metadata`: data (a
    /// dashboard, a configuration file, a JSON fixture).
    NotObjects,
    /// A template by its name (`.tmpl`, `.tpl`, `.gotmpl`, `.j2`, `.ftl`)
    /// that does not parse as YAML: not manifests until a tool renders it.
    Template,
    /// Documents with `apiVersion` and `kind` but no `metadata`: a tool's
    /// configuration shaped like an object (a generator's input, an
    /// istioctl profile, a component configuration that a
    /// configMapGenerator reads). kube-apiserver stores nothing without a
    /// name, so no cluster would hold one.
    Configuration,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SkipReason::Kustomize => "kustomize input",
            SkipReason::Helm => "Helm chart",
            SkipReason::Skaffold => "Skaffold configuration",
            SkipReason::NotObjects => "no Kubernetes objects",
            SkipReason::Template => "a template, not YAML until rendered",
            SkipReason::Configuration => "configuration without a name (not an object)",
        })
    }
}

/// A file left out, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub source: Source,
    pub reason: SkipReason,
    /// What the file makes when it is rendered, as minimal objects: the
    /// ConfigMaps and Secrets of a kustomization's `configMapGenerator` and
    /// `secretGenerator` (in its `namespace`, or none). Workloads in the
    /// same repository refer to them by these names.
    pub makes: Vec<Value>,
}

/// The ConfigMaps and Secrets a kustomization's generators make.
pub(crate) fn kustomize_generated(docs: &[RawDoc]) -> Vec<Value> {
    let mut out = Vec::new();
    for k in docs.iter().filter(|d| !d.empty).map(|d| &d.value) {
        let namespace = k.get("namespace").and_then(Value::as_str);
        for (field, kind) in [
            ("configMapGenerator", "ConfigMap"),
            ("secretGenerator", "Secret"),
        ] {
            let generators = k.get(field).and_then(Value::as_array).map(Vec::as_slice);
            for g in generators.unwrap_or_default() {
                let Some(name) = g.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let ns = g.get("namespace").and_then(Value::as_str).or(namespace);
                let mut meta = serde_json::json!({"name": name,
                    "annotations": {"interlock.dev/produced-by": "a kustomize generator"}});
                if let Some(ns) = ns {
                    meta["namespace"] = ns.into();
                }
                out.push(serde_json::json!({"apiVersion": "v1", "kind": kind, "metadata": meta}));
            }
        }
    }
    out
}

/// Known by its name (or by a `Chart.yaml` in one of its folders).
pub(crate) fn by_path(path: &Path) -> Option<SkipReason> {
    let name = path.file_name()?.to_str()?;
    let lower = name.to_ascii_lowercase();
    let yaml = lower.ends_with(".yaml") || lower.ends_with(".yml");
    let stem = lower.trim_end_matches(".yaml").trim_end_matches(".yml");
    if stem == "kustomization" || name == "Kustomization" {
        return Some(SkipReason::Kustomize);
    }
    if name == "Chart.yaml" || name == "Chart.lock" {
        return Some(SkipReason::Helm);
    }
    if yaml && (stem == "values" || stem.starts_with("values-") || stem.starts_with("values.")) {
        return Some(SkipReason::Helm);
    }
    if yaml && stem == "skaffold" {
        return Some(SkipReason::Skaffold);
    }
    if is_kustomize_patch(path) {
        return Some(SkipReason::Kustomize);
    }
    // A chart's templates (and its sub-charts): not objects until rendered.
    let in_chart = path
        .ancestors()
        .skip(1)
        .take(8)
        .filter(|d| !d.as_os_str().is_empty())
        .any(|d| d.join("Chart.yaml").is_file());
    in_chart.then_some(SkipReason::Helm)
}

/// Is `path` a patch that the kustomization.yaml of its folder applies
/// (`patches[].path`, `patchesStrategicMerge`, `patchesJson6902[].path`)?
/// A patch is a partial object: checking it would report what the base
/// already sets.
fn is_kustomize_patch(path: &Path) -> bool {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return false;
    };
    let Some(text) = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .iter()
        .find_map(|k| std::fs::read_to_string(dir.join(k)).ok())
    else {
        return false;
    };
    let parsed = super::yaml::parse_stream(&text, &super::LoadOptions::default());
    let Some(k) = parsed.docs.first().map(|d| &d.value) else {
        return false;
    };
    let named = |v: &Value| {
        v.as_str()
            .map(|p| p.trim_start_matches("./") == name)
            .unwrap_or(false)
    };
    let list = |field: &str| {
        k.get(field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    list("patchesStrategicMerge").iter().any(named)
        || list("patches")
            .iter()
            .chain(list("patchesJson6902").iter())
            .any(|p| p.get("path").is_some_and(named))
}

/// A document shaped like an object but without a name to be stored
/// under: a `kind` string (and an `apiVersion` string, or none), not a
/// list, and either no `metadata` key, or (for a kind that is not one of
/// Kubernetes' own) a `metadata` with neither `name` nor `generateName`.
/// Configuration or data of a tool (an istioctl profile or IstioOperator
/// with only a namespace, kwok's stages with `apiGroup`, `kind` and
/// `name`), not something a cluster stores. A built-in kind without a name
/// stays an error: that is a broken object.
pub(crate) fn is_configuration(v: &Value) -> bool {
    let Value::Object(map) = v else { return false };
    let shaped = map.get("apiVersion").is_none_or(Value::is_string)
        && map.get("kind").is_some_and(Value::is_string)
        && !super::object::is_list(v);
    if !shaped {
        return false;
    }
    match map.get("metadata") {
        None => true,
        Some(Value::Object(meta)) => {
            let named = |k: &str| meta.get(k).is_some_and(|n| !n.is_null());
            let (group, kind) = crate::k8s::kinds::group_kind(v);
            !named("name")
                && !named("generateName")
                && crate::k8s::kinds::is_namespaced(group, kind).is_none()
        }
        Some(_) => false,
    }
}

/// Known by what its documents hold: every document is a tool's
/// configuration, or none is shaped like an object.
/// Whether a file's name marks it as a template: one of its dot-separated
/// parts is a template engine's extension (`role.tmpl.yaml`,
/// `deploy.yaml.tpl`, `app.j2.yml`, `values.gotmpl`, FreeMarker's `.ftl`).
pub(crate) fn template_name(source: &super::Source) -> bool {
    let super::Source::File(path) = source else {
        return false;
    };
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    name.split('.').skip(1).any(|part| {
        matches!(
            part.to_ascii_lowercase().as_str(),
            "tmpl" | "tpl" | "gotmpl" | "template" | "j2" | "jinja" | "jinja2" | "ftl"
        )
    })
}

pub(crate) fn by_content(docs: &[RawDoc]) -> Option<SkipReason> {
    let docs: Vec<&Value> = docs.iter().filter(|d| !d.empty).map(|d| &d.value).collect();
    if docs.is_empty() {
        return None;
    }
    let reasons: Vec<Option<SkipReason>> = docs.iter().map(|v| of_document(v)).collect();
    let first = reasons[0]?;
    reasons.iter().all(|r| *r == Some(first)).then_some(first)
}

fn of_document(v: &Value) -> Option<SkipReason> {
    let Value::Object(map) = v else {
        // A list or a scalar at the top: data.
        return Some(SkipReason::NotObjects);
    };
    let api_version = map.get("apiVersion").and_then(Value::as_str);
    let kind = map.get("kind").and_then(Value::as_str);
    let group = api_version.and_then(|a| a.rsplit_once('/')).map(|(g, _)| g);
    if group == Some("kustomize.config.k8s.io") {
        return Some(SkipReason::Kustomize);
    }
    if group == Some("skaffold") && kind == Some("Config") {
        return Some(SkipReason::Skaffold);
    }
    // Chart.yaml under another name: apiVersion v1/v2 with a chart's
    // name and version, and no kind.
    if kind.is_none()
        && matches!(api_version, Some("v1" | "v2"))
        && map.contains_key("name")
        && map.contains_key("version")
        && !map.contains_key("metadata")
    {
        return Some(SkipReason::Helm);
    }
    // An outline with the keys but no values (`apiVersion:` and `kind:`
    // left empty, as a tutorial shows the shape of every object) holds no
    // object either.
    let object_like = ["apiVersion", "kind", "metadata"]
        .iter()
        .any(|f| map.get(*f).is_some_and(|v| !v.is_null()));
    (!object_like).then_some(SkipReason::NotObjects)
}

#[cfg(test)]
#[path = "skip_tests.rs"]
mod tests;
