//! `interlock test --against-cluster` against the real control plane: the
//! cases of a ValidatingAdmissionPolicy are sent to kube-apiserver too, both
//! answers printed side by side, a disagreement flagged, and nothing left
//! behind in the cluster.

use crate::support;

use std::process::{Command, Output};
use support::cluster::TestCluster;

fn test_against(cluster: &TestCluster, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(["test", "--against-cluster"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("run interlock test")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_library_vap_agrees_with_kube_apiserver_case_by_case() {
    // A cluster of its own: the assertion below is about every
    // `interlock-test-*` namespace, and tests on the shared cluster make
    // namespaces of that name too (the suite once failed on that race).
    let own = TestCluster::start();
    let cluster = &own;
    let _logs = cluster.logs_on_panic();
    let out = test_against(cluster, &["policies/disallow-latest-tag"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("KUBE-APISERVER"), "{stdout}");
    assert!(!stdout.contains("DIFFERS"), "{stdout}");
    let denied = stdout
        .lines()
        .map(str::trim_start)
        .find(|l| l.contains("Pod team-a/port-no-tag "))
        .unwrap_or_else(|| panic!("no row for the Pod: {stdout}"));
    assert!(denied.starts_with("same"), "{denied}");
    assert_eq!(
        denied.matches("Deny: ").count(),
        2,
        "both deny it: {denied}"
    );
    // The scratch namespaces and renamed policies are gone (namespaces
    // may still be terminating: their deletion has started).
    let left = cluster.kubectl(&["get", "validatingadmissionpolicies", "-o", "name"]);
    let left = text(&left.stdout);
    assert!(!left.contains("disallow-latest-tag-"), "{left}");
    let namespaces = cluster.kubectl(&[
        "get",
        "namespaces",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}",
    ]);
    for line in text(&namespaces.stdout).lines() {
        if line.starts_with("interlock-test-") {
            assert!(line.ends_with("Terminating"), "left behind: {line}");
        }
    }
}

#[test]
fn a_disagreement_is_flagged_and_fails_the_run() {
    let cluster = TestCluster::shared();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("no-empty-cm");
    std::fs::create_dir_all(policy.join("tests")).unwrap();
    std::fs::write(
        policy.join("policy.yaml"),
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: cm-needs-data}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}
  validations:
    - {expression: 'has(object.data)', message: a ConfigMap needs data}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: cm-needs-data}
spec: {policyName: cm-needs-data, validationActions: [Deny]}
",
    )
    .unwrap();
    // The second ConfigMap's name is one kube-apiserver refuses by itself
    // (not a DNS subdomain): Interlock, offline, admits it.
    std::fs::write(
        policy.join("tests/cases.yaml"),
        "apiVersion: interlock.dev/v1alpha1
kind: PolicyTest
metadata: {name: empty-and-bad-name}
spec:
  expect:
    - {object: {kind: ConfigMap, namespace: a, name: empty}, action: Deny, messageContains: needs data}
---
{apiVersion: v1, kind: ConfigMap, metadata: {name: empty, namespace: a}}
---
{apiVersion: v1, kind: ConfigMap, metadata: {name: Bad_Name, namespace: a}, data: {k: v}}
",
    )
    .unwrap();
    let out = test_against(cluster, &[policy.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    // The side-by-side rows (the failures above them name objects too).
    let row = |name: &str| {
        stdout
            .lines()
            .map(str::trim_start)
            .filter(|l| l.starts_with("same") || l.starts_with("DIFFERS"))
            .find(|l| l.contains(&format!("ConfigMap a/{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}: {stdout}"))
            .to_string()
    };
    assert!(row("empty").starts_with("same"), "{stdout}");
    let bad = row("Bad_Name");
    assert!(bad.starts_with("DIFFERS"), "{stdout}");
    assert!(bad.contains("admitted") && bad.contains("error: "), "{bad}");
    assert!(
        stdout.contains("kube-apiserver disagrees"),
        "the disagreement is a failure of the case: {stdout}"
    );
}

#[test]
fn an_interlock_policy_is_not_sent() {
    let cluster = TestCluster::shared();
    let out = test_against(
        cluster,
        &[
            "policies/hpa-target-exists",
            "--run",
            "hpa-target-exists/.*",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(
            "not sent to the cluster: kube-apiserver does not know the kind InterlockPolicy"
        ),
        "{stdout}"
    );
}

/// UPDATE cases go as a PUT over the old version, DELETE cases as a
/// DELETE of an object created for it: kube-apiserver sees the same
/// operation and oldObject as Interlock.
#[test]
fn update_and_delete_cases_are_sent_as_such() {
    let cluster = TestCluster::shared();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("keep");
    std::fs::create_dir_all(policy.join("tests")).unwrap();
    std::fs::write(
        policy.join("policy.yaml"),
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: keep}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps], operations: [UPDATE, DELETE]}
  validations:
    - expression: \"oldObject.data.mode != 'keep' || (request.operation == 'UPDATE' && object.data.mode == 'keep')\"
      messageExpression: \"request.operation + ' of a kept ConfigMap'\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: keep}
spec: {policyName: keep, validationActions: [Deny]}
",
    )
    .unwrap();
    std::fs::write(
        policy.join("tests/update.yaml"),
        "apiVersion: interlock.dev/v1alpha1
kind: PolicyTest
metadata: {name: update}
spec:
  oldObjects:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: kept, namespace: a}, data: {mode: keep}}
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: free, namespace: a}, data: {mode: free}}
  expect:
    - {object: {kind: ConfigMap, namespace: a, name: kept}, action: Deny, messageContains: UPDATE of a kept}
---
{apiVersion: v1, kind: ConfigMap, metadata: {name: kept, namespace: a}, data: {mode: gone}}
---
{apiVersion: v1, kind: ConfigMap, metadata: {name: free, namespace: a}, data: {mode: gone}}
",
    )
    .unwrap();
    std::fs::write(
        policy.join("tests/delete.yaml"),
        "apiVersion: interlock.dev/v1alpha1
kind: PolicyTest
metadata: {name: delete}
spec:
  request: {operation: DELETE}
  expect:
    - {object: {kind: ConfigMap, namespace: a, name: kept}, action: Deny, messageContains: DELETE of a kept}
---
{apiVersion: v1, kind: ConfigMap, metadata: {name: kept, namespace: a}, data: {mode: keep}}
---
{apiVersion: v1, kind: ConfigMap, metadata: {name: free, namespace: a}, data: {mode: free}}
",
    )
    .unwrap();
    let out = test_against(cluster, &[policy.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let rows: Vec<&str> = stdout
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("same") || l.starts_with("DIFFERS"))
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(rows.iter().all(|r| r.starts_with("same")), "{stdout}");
    for op in ["UPDATE", "DELETE"] {
        let denied = format!("Deny: {op} of a kept ConfigMap");
        assert!(
            rows.iter().any(|r| r.matches(&denied).count() == 2),
            "both deny the {op}: {stdout}"
        );
    }
}
