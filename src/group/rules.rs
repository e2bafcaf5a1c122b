//! Rules that only make sense inside a group, checked on its desired
//! members alone (no inventory): they hold whatever else the cluster holds.
//!
//! - `group-service-selects-member`: a Service of the group with a selector
//!   selects the pods of a workload of the same group. A Service that
//!   selects nothing of its group is almost always a typo in a label, and
//!   one that selects another group's pods couples two units that are
//!   applied and deleted apart.
//! - `group-ingress-backend-member`: an Ingress of the group routes to a
//!   Service of the same group, on a port that Service declares.
//!
//! They are built in rather than CEL policies: a policy sees one object and
//! the inventory, in which `kubectl`'s own ApplySets carry the same part-of
//! label, so it could not tell a ResourceGroup's members from theirs.

use super::crd::{FindingAction, FindingObject, GroupFinding};
use super::member::Member;
use serde_json::{Map, Value};

pub const SERVICE_SELECTS_MEMBER: &str = "group-service-selects-member";
pub const INGRESS_BACKEND_MEMBER: &str = "group-ingress-backend-member";

const WORKLOADS: &[&str] = &[
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
];

/// Every finding of the group rules over `members`.
pub fn check(members: &[Member]) -> Vec<GroupFinding> {
    let mut out = Vec::new();
    for m in members {
        match (m.api_group(), m.kind.as_str()) {
            ("", "Service") => service(m, members, &mut out),
            ("networking.k8s.io", "Ingress") => ingress(m, members, &mut out),
            _ => {}
        }
    }
    out
}

fn finding(policy: &str, m: &Member, message: String) -> GroupFinding {
    GroupFinding {
        policy: policy.into(),
        binding: None,
        action: FindingAction::Deny,
        object: FindingObject {
            api_version: m.api_version.clone(),
            kind: m.kind.clone(),
            namespace: Some(m.namespace.clone()),
            name: m.name.clone(),
        },
        message,
    }
}

fn string_map(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The labels of the pods a workload (or a bare Pod) makes.
fn pod_labels(m: &Member) -> Option<Map<String, Value>> {
    if m.api_group() == "" && m.kind == "Pod" {
        return Some(string_map(m.object.pointer("/metadata/labels")));
    }
    if m.api_group() == "apps" && WORKLOADS.contains(&m.kind.as_str())
        || m.api_group() == "batch" && m.kind == "Job"
    {
        return Some(string_map(
            m.object.pointer("/spec/template/metadata/labels"),
        ));
    }
    if m.api_group() == "batch" && m.kind == "CronJob" {
        return Some(string_map(
            m.object
                .pointer("/spec/jobTemplate/spec/template/metadata/labels"),
        ));
    }
    None
}

fn service(svc: &Member, members: &[Member], out: &mut Vec<GroupFinding>) {
    let selector = string_map(svc.object.pointer("/spec/selector"));
    if selector.is_empty() {
        // No selector: endpoints are managed by hand (or ExternalName).
        return;
    }
    let selects =
        |labels: &Map<String, Value>| selector.iter().all(|(k, v)| labels.get(k) == Some(v));
    if members.iter().filter_map(pod_labels).any(|l| selects(&l)) {
        return;
    }
    let wanted: Vec<String> = selector
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    out.push(finding(
        SERVICE_SELECTS_MEMBER,
        svc,
        format!(
            "Service {} selects {} but no workload of this group has pods with those labels; fix the selector or add the workload to spec.resources",
            svc.name,
            wanted.join(",")
        ),
    ));
}

/// The Services (name, port numbers, port names) of the group.
fn services(members: &[Member]) -> Vec<(&str, Vec<i64>, Vec<&str>)> {
    members
        .iter()
        .filter(|m| m.api_group() == "" && m.kind == "Service")
        .map(|m| {
            let ports = m.object.pointer("/spec/ports").and_then(Value::as_array);
            let numbers = ports
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("port")?.as_i64())
                .collect();
            let names = ports
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("name")?.as_str())
                .collect();
            (m.name.as_str(), numbers, names)
        })
        .collect()
}

/// Every `service` backend of an Ingress: default backend and rule paths.
fn backends(ing: &Value) -> Vec<&Value> {
    let mut out: Vec<&Value> = ing
        .pointer("/spec/defaultBackend/service")
        .into_iter()
        .collect();
    let rules = ing.pointer("/spec/rules").and_then(Value::as_array);
    for r in rules.into_iter().flatten() {
        let paths = r.pointer("/http/paths").and_then(Value::as_array);
        out.extend(
            paths
                .into_iter()
                .flatten()
                .filter_map(|p| p.pointer("/backend/service")),
        );
    }
    out
}

fn ingress(ing: &Member, members: &[Member], out: &mut Vec<GroupFinding>) {
    let services = services(members);
    for b in backends(&ing.object) {
        let Some(name) = b.get("name").and_then(Value::as_str) else {
            continue;
        };
        let Some((_, numbers, names)) = services.iter().find(|(n, _, _)| *n == name) else {
            out.push(finding(
                INGRESS_BACKEND_MEMBER,
                ing,
                format!("Ingress {} routes to Service {name}, which is not a member of this group; add it to spec.resources", ing.name),
            ));
            continue;
        };
        let port = b.get("port");
        let number = port.and_then(|p| p.get("number")).and_then(Value::as_i64);
        let port_name = port.and_then(|p| p.get("name")).and_then(Value::as_str);
        let known = number.is_none_or(|n| numbers.contains(&n))
            && port_name.is_none_or(|n| names.contains(&n));
        if !known {
            let asked = number
                .map(|n| n.to_string())
                .or(port_name.map(str::to_string))
                .unwrap_or_default();
            out.push(finding(
                INGRESS_BACKEND_MEMBER,
                ing,
                format!("Ingress {} routes to port {asked} of Service {name}, which declares no such port", ing.name),
            ));
        }
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
