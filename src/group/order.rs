//! Apply order: what others depend on first (identities and permissions,
//! configuration, storage, Services), then workloads, then what refers to
//! workloads (autoscalers, disruption budgets, Ingresses, network
//! policies); everything else last. Deletion runs in reverse.

/// The rank of a kind in apply order (lower first).
pub fn rank(api_group: &str, kind: &str) -> u8 {
    match (api_group, kind) {
        ("", "ServiceAccount") => 0,
        ("rbac.authorization.k8s.io", "Role") => 1,
        ("rbac.authorization.k8s.io", "RoleBinding") => 2,
        ("", "ConfigMap" | "Secret") => 3,
        ("", "PersistentVolumeClaim") => 4,
        ("", "Service") => 5,
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch", "Job" | "CronJob")
        | ("", "Pod") => 6,
        ("autoscaling", "HorizontalPodAutoscaler")
        | ("policy", "PodDisruptionBudget")
        | ("networking.k8s.io", "Ingress" | "NetworkPolicy") => 7,
        _ => 8,
    }
}

/// The sort key of an object in apply order: rank, then name, then kind,
/// so the order does not depend on the order of `spec.resources`.
pub fn sort_key<'a>(api_group: &str, kind: &'a str, name: &'a str) -> (u8, &'a str, &'a str) {
    (rank(api_group, kind), name, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_come_first() {
        let order = [
            ("", "ServiceAccount"),
            ("rbac.authorization.k8s.io", "Role"),
            ("rbac.authorization.k8s.io", "RoleBinding"),
            ("", "ConfigMap"),
            ("", "PersistentVolumeClaim"),
            ("", "Service"),
            ("apps", "Deployment"),
            ("networking.k8s.io", "Ingress"),
            ("example.com", "Widget"),
        ];
        for w in order.windows(2) {
            assert!(rank(w[0].0, w[0].1) < rank(w[1].0, w[1].1), "{w:?}");
        }
        // A kind of the same name in another group is not the core one.
        assert_eq!(rank("example.com", "Service"), 8);
    }
}
