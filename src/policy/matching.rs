//! matchConstraints / matchResources, as kube-apiserver applies them.

use super::model::{MatchResources, ResourceRule};
use super::selector::labels;
use super::Request;
use crate::inventory::{Lookup, ObjectKeyRef};
use serde_json::Value as Json;

/// `binding`: a binding's matchResources, whose empty resourceRules do not
/// constrain (a policy's matchConstraints must name its resources).
pub fn matches(m: &MatchResources, req: &Request, inv: &dyn Lookup, binding: bool) -> bool {
    let unconstrained = binding && m.resource_rules.is_empty();
    if !unconstrained && !m.resource_rules.iter().any(|r| rule_matches(r, req)) {
        return false;
    }
    if m.exclude_resource_rules
        .iter()
        .any(|r| rule_matches(r, req))
    {
        return false;
    }
    if let Some(sel) = &m.object_selector {
        let ok = [req.object, req.old_object.get()]
            .into_iter()
            .flatten()
            .any(|o| sel.matches(labels(o)).unwrap_or(false));
        if !ok {
            return false;
        }
    }
    if let Some(sel) = &m.namespace_selector {
        if !namespace_matches(sel, req, inv) {
            return false;
        }
    }
    true
}

/// The resource-rule part of [`matches`] for a policy's matchConstraints:
/// true whenever `matches` could be.
pub fn rules_match(m: &MatchResources, req: &Request) -> bool {
    m.resource_rules.iter().any(|r| rule_matches(r, req))
        && !m
            .exclude_resource_rules
            .iter()
            .any(|r| rule_matches(r, req))
}

fn any_or(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

/// Could some object of the request's resource match `m`? The resource
/// rules without their resourceNames (names differ object by object); an
/// exclude rule excludes only when it names no objects. A one-shot audit
/// asks this of a probe request per kind to decide what to list.
pub fn may_match_resource(m: &MatchResources, req: &Request) -> bool {
    m.resource_rules
        .iter()
        .any(|r| rule_matches_resource(r, req))
        && !m
            .exclude_resource_rules
            .iter()
            .any(|r| r.resource_names.is_empty() && rule_matches_resource(r, req))
}

fn rule_matches(r: &ResourceRule, req: &Request) -> bool {
    rule_matches_resource(r, req)
        && (r.resource_names.is_empty() || r.resource_names.iter().any(|n| n == &req.name))
}

/// [`rule_matches`] for any name.
fn rule_matches_resource(r: &ResourceRule, req: &Request) -> bool {
    any_or(&r.operations, req.operation.as_str())
        && any_or(&r.api_groups, req.gvk.group())
        && any_or(&r.api_versions, req.gvk.version())
        && r.resources
            .iter()
            .any(|res| resource_matches(res, &req.resource, &req.subresource))
        && scope_matches(r.scope.as_deref(), req.is_namespaced())
}

/// `pods` matches the resource only, `pods/status` one subresource,
/// `*` every resource, `*/*` everything, `pods/*` every pods subresource,
/// `*/scale` that subresource of every resource.
fn resource_matches(pattern: &str, resource: &str, sub: &str) -> bool {
    let (pr, ps) = pattern.split_once('/').unwrap_or((pattern, ""));
    let res_ok = pr == "*" || pr == resource;
    let sub_ok = if pattern.contains('/') {
        ps == "*" || ps == sub
    } else {
        sub.is_empty()
    };
    res_ok && sub_ok
}

fn scope_matches(scope: Option<&str>, namespaced: bool) -> bool {
    match scope {
        None | Some("*") => true,
        Some("Namespaced") => namespaced,
        Some("Cluster") => !namespaced,
        Some(_) => false,
    }
}

fn namespace_matches(sel: &super::model::LabelSelector, req: &Request, inv: &dyn Lookup) -> bool {
    // Cluster-scoped objects other than Namespaces ignore namespaceSelector.
    let ns_name = if req.namespace.is_empty() {
        if req.gvk.kind() == "Namespace" && req.gvk.group().is_empty() {
            req.name.clone()
        } else {
            return true;
        }
    } else {
        req.namespace.clone()
    };
    let key = ObjectKeyRef {
        group: "",
        kind: "Namespace",
        namespace: "",
        name: &ns_name,
    };
    let object_labels = if req.gvk.kind() == "Namespace" && req.gvk.group().is_empty() {
        req.object.and_then(labels).cloned()
    } else {
        None
    };
    let ns_labels = object_labels.or_else(|| {
        inv.find(key)
            .and_then(|e| labels(&e.object.json()).cloned())
    });
    let ns_labels = ns_labels.unwrap_or_else(|| {
        let mut m = serde_json::Map::new();
        m.insert(
            "kubernetes.io/metadata.name".into(),
            Json::String(ns_name.clone()),
        );
        m
    });
    sel.matches(Some(&ns_labels)).unwrap_or(false)
}

#[cfg(test)]
#[path = "matching_tests.rs"]
mod tests;
