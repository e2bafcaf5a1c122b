//! The authorizer library under `interlock controller`: a policy's
//! `authorizer...check()` on a ResourceGroup's members asks the real
//! kube-apiserver (a SubjectAccessReview) about the group's ServiceAccount,
//! so what a group may hold follows RBAC for the identity that writes it.
//! The controller runs as its shipped ServiceAccount (impersonated), bound
//! to the shipped roles only (manifests/base/controller.yaml, rbac.yaml):
//! until the ClusterRole its authorizer binding names exists, every review
//! is forbidden and the group is refused as not answered, then applied on
//! a retry once it does.
//!
//! A cluster of its own: the controller of tests/integration/controller.rs
//! reconciles every group of the shared cluster with other policies.

use crate::support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;

const CONTROLLER_SA: &str = "system:serviceaccount:interlock-system:interlock-controller";

/// Members (ConfigMaps) may only be written by a ServiceAccount that may
/// read the namespace's Secrets, and that may create them.
const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: writer-reads-secrets
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE, UPDATE]}
  validations:
    - expression: "authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('get').allowed()"
      message: "the writer may not read this namespace's Secrets"
    - expression: "authorizer.requestResource.check('create').allowed()"
      message: "the writer may not create this ConfigMap"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: writer-reads-secrets
spec:
  policyName: writer-reads-secrets
  validationActions: [Deny]
"#;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn kubectl_ok(c: &TestCluster, args: &[&str]) {
    let out = c.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn apply(c: &TestCluster, v: &Value) {
    let out = c.kubectl_stdin(&["apply", "-f", "-"], &v.to_string());
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn manifest(name: &str) -> String {
    root()
        .join("manifests/base")
        .join(name)
        .display()
        .to_string()
}

/// ServiceAccounts `reader` (may manage ConfigMaps and read Secrets) and
/// `writer` (may manage ConfigMaps only).
fn tenant(c: &TestCluster) -> String {
    let ns = c.create_namespace("ctrlauthz");
    let role = |name: &str, rules: Value| {
        [
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": name, "namespace": ns}, "rules": rules}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": name, "namespace": ns},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                   "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]}),
        ]
    };
    let configmaps = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]});
    let secrets = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]});
    let mut items = role("reader", json!([configmaps, secrets])).to_vec();
    items.extend(role("writer", json!([configmaps])));
    apply(
        c,
        &json!({"apiVersion": "v1", "kind": "List", "items": items}),
    );
    ns
}

fn group(ns: &str, name: &str, sa: &str, member: &str) -> Value {
    json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"serviceAccountName": sa, "resources": [
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": member},
                "data": {"owner": name}}]}})
}

fn get(c: &TestCluster, ns: &str, what: &str) -> Option<Value> {
    let out = c.kubectl(&["get", "-n", ns, what, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl json"))
}

/// (status, reason, message) of the group's condition `type_`.
fn condition(rg: &Value, type_: &str) -> (String, String, String) {
    let c = rg["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or_default();
    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
    (s("status"), s("reason"), s("message"))
}

/// Polls the group (60 s) until its status describes its generation and
/// `done` holds for it; panics with the group and the controller's log.
fn wait_group(
    c: &TestCluster,
    ctl: &Controller,
    ns: &str,
    name: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let rg = get(c, ns, &format!("resourcegroup/{name}")).unwrap_or(Value::Null);
        let current = rg["status"]["observedGeneration"] == rg["metadata"]["generation"];
        if current && done(&rg) {
            return rg;
        }
        if start.elapsed() > Duration::from_secs(60) {
            panic!("{name}: {rg:#}\ncontroller log:\n{}", ctl.log());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn start_controller(c: &TestCluster, dir: &Path) -> Controller {
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("policy file");
    let kubeconfig = support::webhook::kubeconfig_as(c, dir, CONTROLLER_SA);
    let policy = policy.display().to_string();
    Controller::start_as(
        &kubeconfig,
        dir,
        &["--no-leader-election", "-p", policy.as_str()],
    )
}

#[test]
fn members_are_judged_by_what_the_groups_service_account_may_do() {
    let c = TestCluster::start();
    let _logs = c.logs_on_panic();
    support::controller::install_resource_group_crd(&c);
    // The controller's own manifests, but not yet rbac.yaml: its
    // authorizer binding names a ClusterRole that does not exist.
    for f in ["namespace.yaml", "controller.yaml"] {
        kubectl_ok(&c, &["apply", "-f", &manifest(f)]);
    }
    let ns = tenant(&c);
    let dir = tempfile::tempdir().expect("dir");
    let ctl = start_controller(&c, dir.path());

    // Every review is forbidden: nothing is applied, and the status says
    // which question got no answer, and why.
    apply(&c, &group(&ns, "granted", "reader", "granted-config"));
    let rg = wait_group(&c, &ctl, &ns, "granted", |rg| {
        condition(rg, "Valid").1 == "AuthorizerUnavailable"
    });
    let (status, _, message) = condition(&rg, "Valid");
    assert_eq!(status, "False", "{rg:#}");
    assert!(
        message.contains(&format!(
            "ConfigMap granted-config: authorizer: no answer from kube-apiserver's authorizer whether system:serviceaccount:{ns}:reader may 'get' on resource 'secrets' of group '', namespace '{ns}'"
        )) && message.contains("SubjectAccessReview refused (403): subjectaccessreviews.authorization.k8s.io is forbidden"),
        "{message}"
    );
    assert_eq!(get(&c, &ns, "configmap/granted-config"), None);

    // The ClusterRole appears: a retry (backoff) asks again and applies.
    kubectl_ok(&c, &["apply", "-f", &manifest("rbac.yaml")]);
    let rg = wait_group(&c, &ctl, &ns, "granted", |rg| {
        condition(rg, "Applied").0 == "True"
    });
    assert_eq!(condition(&rg, "Valid").0, "True", "{rg:#}");
    let applied = get(&c, &ns, "configmap/granted-config").expect("member applied");
    assert_eq!(applied["data"]["owner"], "granted");

    // A ServiceAccount RBAC does not let read Secrets: refused with the
    // policy's message, nothing of it written.
    apply(&c, &group(&ns, "refused", "writer", "refused-config"));
    let rg = wait_group(&c, &ctl, &ns, "refused", |rg| {
        condition(rg, "Valid").0 == "False"
    });
    let (_, reason, message) = condition(&rg, "Valid");
    assert_eq!(reason, "PolicyViolation", "{rg:#}");
    assert_eq!(
        message,
        "ConfigMap refused-config: writer-reads-secrets: the writer may not read this namespace's Secrets"
    );
    assert_eq!(condition(&rg, "Applied").0, "False", "{rg:#}");
    assert_eq!(get(&c, &ns, "configmap/refused-config"), None);

    // Granted the read, the group is judged again at its next change;
    // changed until RBAC and the authorizer's cache of the denial (5 s)
    // both give the new answer.
    let secrets = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "writer-reads", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": ns}]});
    apply(&c, &secrets);
    let start = Instant::now();
    let owner = loop {
        let owner = format!("granted-{}", start.elapsed().as_millis());
        let mut changed = group(&ns, "refused", "writer", "refused-config");
        changed["spec"]["resources"][0]["data"]["owner"] = owner.clone().into();
        apply(&c, &changed);
        let rg = wait_group(&c, &ctl, &ns, "refused", |rg| {
            !condition(rg, "Valid").0.is_empty()
        });
        if condition(&rg, "Applied").0 == "True" || condition(&rg, "Valid").0 == "True" {
            break owner;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{rg:#}\n{}",
            ctl.log()
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    wait_group(&c, &ctl, &ns, "refused", |rg| {
        condition(rg, "Applied").0 == "True"
    });
    let applied = get(&c, &ns, "configmap/refused-config").expect("member applied");
    assert_eq!(applied["data"]["owner"], owner.as_str());
    assert!(
        ctl.counter("interlock_authorizer_checks_total") >= 4,
        "{}",
        ctl.log()
    );
}
