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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals() {
        assert_eq!(resource_of("networking.k8s.io", "Ingress"), "ingresses");
        assert_eq!(resource_of("example.com", "Policy"), "policies");
        assert_eq!(resource_of("example.com", "Widget"), "widgets");
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
        assert_eq!(version_of("apps/v1"), "v1");
    }
}
