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
        ("batch", "Job"),
        ("apps", "Deployment"),
        ("networking.k8s.io", "Ingress"),
        ("example.com", "Widget"),
    ];
    for w in order.windows(2) {
        assert!(rank(w[0].0, w[0].1) < rank(w[1].0, w[1].1), "{w:?}");
    }
    // A kind of the same name in another group is not the core one.
    assert_eq!(rank("example.com", "Service"), 9);
    // A migration Job runs before the workloads that need it.
    assert!(rank("batch", "Job") < rank("batch", "CronJob"));
    assert!(rank("batch", "Job") < rank("", "Pod"));
}
