//! Apply order: what others depend on first (identities and permissions,
//! configuration, storage, Services), then Jobs, then the other workloads,
//! then what refers to workloads (autoscalers, disruption budgets,
//! Ingresses, network policies); everything else last. Deletion runs in
//! reverse.

/// The rank of a kind in apply order (lower first).
///
/// Jobs have a rank of their own, before the long-running workloads: a Job
/// in a group is typically a schema migration or a setup step that a
/// Deployment's new version needs done, and with `spec.waitForReady` a rank
/// waits for the previous one to be ready (a Job: `Complete`), which only
/// means something if the Job is in an earlier rank than the Deployment.
/// The change is compatible: ranks are not stored anywhere (status, labels
/// and annotations never carry them), every other kind keeps its relative
/// order, and without `waitForReady` all ranks are still applied in one
/// pass, so the only visible differences are that a pass writes its Jobs
/// before its Deployments and that deletion removes the long-running
/// workloads (and waits for them to go) before the Jobs. CronJobs stay
/// with the long-running workloads: they schedule Jobs, they do not finish.
pub fn rank(api_group: &str, kind: &str) -> u8 {
    match (api_group, kind) {
        ("", "ServiceAccount") => 0,
        ("rbac.authorization.k8s.io", "Role") => 1,
        ("rbac.authorization.k8s.io", "RoleBinding") => 2,
        ("", "ConfigMap" | "Secret") => 3,
        ("", "PersistentVolumeClaim") => 4,
        ("", "Service") => 5,
        ("batch", "Job") => 6,
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch", "CronJob")
        | ("", "Pod") => 7,
        ("autoscaling", "HorizontalPodAutoscaler")
        | ("policy", "PodDisruptionBudget")
        | ("networking.k8s.io", "Ingress" | "NetworkPolicy") => 8,
        _ => 9,
    }
}

/// The sort key of an object in apply order: rank, then name, then kind,
/// so the order does not depend on the order of `spec.resources`.
pub fn sort_key<'a>(api_group: &str, kind: &'a str, name: &'a str) -> (u8, &'a str, &'a str) {
    (rank(api_group, kind), name, kind)
}

#[cfg(test)]
#[path = "order_tests.rs"]
mod tests;
