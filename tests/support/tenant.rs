//! A tenant's namespace as the controller tests need it: a `deployer`
//! ServiceAccount that a group names, bound to a Role of the test's rules,
//! so the controller's writes as that account are exactly as allowed as the
//! rules say.

use super::cluster::TestCluster;
use serde_json::{json, Value};
use std::process::Output;

/// Asserts a command succeeded, naming `what` and its stderr; its stdout.
pub fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A Role rule: every verb on `resources` of `group`.
pub fn all_verbs(group: &str, resources: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": ["*"]})
}

/// Gives namespace `ns` the ServiceAccount `deployer`, allowed `rules`.
pub fn grant_deployer(c: &TestCluster, ns: &str, rules: &[Value]) {
    let rbac = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "deployer", "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "deployer", "namespace": ns}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "deployer", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deployer"},
         "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": ns}]}]});
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &rbac.to_string()),
        "tenant RBAC",
    );
}

/// A new namespace named from `prefix` with its `deployer` allowed `rules`.
pub fn namespace_with_deployer(c: &TestCluster, prefix: &str, rules: &[Value]) -> String {
    let ns = c.create_namespace(prefix);
    grant_deployer(c, &ns, rules);
    ns
}
