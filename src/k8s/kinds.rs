//! What kube-apiserver calls each kind: its resource name and scope.
//! Offline there is no discovery, so built-in kinds come from this table and
//! other kinds get the conventional lower-case plural.

/// (group, kind, resource, namespaced)
const BUILTIN: &[(&str, &str, &str, bool)] = &[
    ("", "Pod", "pods", true),
    ("", "Service", "services", true),
    ("", "ConfigMap", "configmaps", true),
    ("", "Secret", "secrets", true),
    ("", "ServiceAccount", "serviceaccounts", true),
    ("", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    ("", "PersistentVolume", "persistentvolumes", false),
    ("", "Namespace", "namespaces", false),
    ("", "Node", "nodes", false),
    ("", "Endpoints", "endpoints", true),
    ("", "Event", "events", true),
    ("", "LimitRange", "limitranges", true),
    ("", "ResourceQuota", "resourcequotas", true),
    ("", "ReplicationController", "replicationcontrollers", true),
    ("", "PodTemplate", "podtemplates", true),
    ("apps", "Deployment", "deployments", true),
    ("apps", "StatefulSet", "statefulsets", true),
    ("apps", "DaemonSet", "daemonsets", true),
    ("apps", "ReplicaSet", "replicasets", true),
    ("apps", "ControllerRevision", "controllerrevisions", true),
    ("batch", "Job", "jobs", true),
    ("batch", "CronJob", "cronjobs", true),
    ("networking.k8s.io", "Ingress", "ingresses", true),
    ("networking.k8s.io", "IngressClass", "ingressclasses", false),
    (
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    (
        "policy",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    ("rbac.authorization.k8s.io", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    ("storage.k8s.io", "StorageClass", "storageclasses", false),
    (
        "scheduling.k8s.io",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
    (
        "interlock.dev",
        "InterlockPolicy",
        "interlockpolicies",
        false,
    ),
    ("interlock.dev", "ResourceGroup", "resourcegroups", true),
];

/// The group of an apiVersion: `apps/v1` → `apps`, `v1` → ``.
/// The group and kind of an object (empty when absent).
pub fn group_kind(object: &serde_json::Value) -> (&str, &str) {
    let field = |f: &str| object.get(f).and_then(serde_json::Value::as_str);
    (
        field("apiVersion").map_or("", group_of),
        field("kind").unwrap_or(""),
    )
}

pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

pub fn version_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or(api_version, |(_, v)| v)
}

/// The plural resource name of a kind.
pub fn resource_of(group: &str, kind: &str) -> String {
    if let Some((_, _, r, _)) = BUILTIN
        .iter()
        .find(|(g, k, _, _)| *g == group && *k == kind)
    {
        return r.to_string();
    }
    let lower = kind.to_ascii_lowercase();
    if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else if lower.ends_with('s') || lower.ends_with("ch") || lower.ends_with('x') {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// Whether a kind is namespaced, when we know; `None` for unknown kinds.
pub fn is_namespaced(group: &str, kind: &str) -> Option<bool> {
    BUILTIN
        .iter()
        .find(|(g, k, _, _)| *g == group && *k == kind)
        .map(|(_, _, _, n)| *n)
}

/// The built-in kinds of an API group (`""` for the core group); empty for
/// a group that is not built in (a custom resource's).
pub fn kinds_of_group(group: &str) -> Vec<&'static str> {
    BUILTIN
        .iter()
        .filter(|(g, ..)| *g == group)
        .map(|(_, k, ..)| *k)
        .collect()
}

/// A warning for a lookup of `kind` in `api_version` that names no
/// built-in kind of a built-in group (a misspelling: `Deploymnet`, a kind
/// of another group), listing the kinds that group has.
pub fn unknown_kind_warning(api_version: &str, kind: &str) -> Option<String> {
    let group = group_of(api_version);
    let known = kinds_of_group(group);
    if known.is_empty() || known.contains(&kind) {
        return None;
    }
    let elsewhere: Vec<String> = BUILTIN
        .iter()
        .filter(|(_, k, ..)| k.eq_ignore_ascii_case(kind))
        .map(|(g, k, ..)| match *g {
            "" => format!("{k} is in v1"),
            g => format!("{k} is in {g}"),
        })
        .collect();
    Some(format!(
        "looks up kind {kind:?} in {api_version}, which has no such kind{}: it finds nothing, and `serve` watches nothing for it; the kinds of {api_version} are {}",
        if elsewhere.is_empty() { String::new() } else { format!(" ({})", elsewhere.join(", ")) },
        known.join(", ")
    ))
}

#[cfg(test)]
#[path = "kinds_tests.rs"]
mod tests;
