//! InterlockExceptions as cluster objects, against the real control plane:
//! `kubectl` creates one, `interlock serve` admits what it excepts as soon
//! as it sees it, `interlock audit` reports the finding as excepted, a
//! deletion denies again, and a tenant's exception never excepts another
//! namespace's object.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::webhook::{apply, ingress, namespace_labelled, Scope};

/// A webhook of its own (other tests register theirs at the same time).
const SCOPE: Scope = Scope {
    config: "interlock-exception-crd-test",
    label: "interlock-exception-crd-test",
    groups: &["", "networking.k8s.io"],
    resources: &["ingresses"],
};

const HOST: &str = "promo.exception-crd.example";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn exception(ns: &str, name: &str, namespaces: &[&str]) -> String {
    serde_json::json!({
        "apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockException",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"policies": ["unique-ingress-host"], "namespaces": namespaces,
                 "reason": "spring campaign"}
    })
    .to_string()
}

/// Applies `obj` until `want(admitted)` holds; returns the last output.
/// The webhook sees an exception's creation or deletion through a watch,
/// a moment after kubectl returns.
fn apply_until(cluster: &TestCluster, obj: &Value, want: bool) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = apply(cluster, obj, &[]);
        if out.status.success() == want || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn audit(cluster: &TestCluster, ns: &str) -> Value {
    let policy = root().join("policies/unique-ingress-host/policy.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(["audit", "-o", "json", "-n", ns, "-p"])
        .arg(policy)
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("run interlock audit");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "audit output is not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn kubectl_made_exceptions_apply_at_once_only_in_their_namespace_and_go_when_deleted() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    support::webhook::install_crd(
        cluster,
        "manifests/base/crd-interlockexception.yaml",
        "interlockexceptions.interlock.dev",
    );
    let policy = root().join("policies/unique-ingress-host/policy.yaml");
    let hook = support::webhook::start_scoped(cluster, &SCOPE, &["-p", policy.to_str().unwrap()]);
    let ns = |prefix| namespace_labelled(cluster, prefix, SCOPE.label);
    let (owner, tenant_a, tenant_b) = (ns("exc-crd-owner"), ns("exc-crd-a"), ns("exc-crd-b"));

    ok(
        &apply(cluster, &ingress(&owner, "shop", HOST), &[]),
        "the host's owner",
    );
    let promo = ingress(&tenant_a, "promo", HOST);
    let refused = apply(cluster, &promo, &[]);
    assert!(!refused.status.success(), "a duplicate host is refused");

    // Tenant A excepts its own Ingress, and tries to except tenant B's.
    let theirs = exception(&tenant_a, "for-b", &[&tenant_b]);
    ok(
        &cluster.kubectl_stdin(&["apply", "-f", "-"], &theirs),
        "kubectl creates the exception naming another namespace",
    );
    let mine = exception(&tenant_a, "campaign", &[]);
    ok(
        &cluster.kubectl_stdin(&["apply", "-f", "-"], &mine),
        "kubectl creates the exception",
    );
    let admitted = apply_until(cluster, &promo, true);
    assert!(
        admitted.status.success(),
        "the excepted Ingress is admitted once the exception is seen: {}\nserver log:\n{}",
        String::from_utf8_lossy(&admitted.stderr),
        hook.log()
    );
    // Both exceptions were seen (watch events come in order): neither
    // excepts tenant B's Ingress.
    let other = apply(cluster, &ingress(&tenant_b, "promo", HOST), &[]);
    assert!(
        !other.status.success(),
        "another tenant's Ingress is still refused"
    );
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(stderr.contains("unique-ingress-host"), "{stderr}");
    let log = hook.log();
    assert!(
        log.contains("excepts only objects of") && log.contains("InterlockException ignored"),
        "the exception naming another namespace is ignored, and logged: {log}"
    );

    // The one-shot audit reads the exception from the cluster too.
    let report = audit(cluster, &tenant_a);
    let results = report["results"].as_array().expect("results");
    let finding = results
        .iter()
        .find(|r| r["object"]["name"] == "promo")
        .unwrap_or_else(|| panic!("no finding for promo: {report}"));
    assert_eq!(finding["action"], "Audit", "{finding}");
    let message = finding["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "excepted by InterlockException {tenant_a}/campaign (spring campaign): "
        )),
        "{message}"
    );

    // Deleted: the same write is refused again.
    ok(
        &cluster.kubectl(&["-n", &tenant_a, "delete", "interlockexception", "campaign"]),
        "kubectl deletes the exception",
    );
    let second = ingress(&tenant_a, "promo-2", HOST);
    let denied = apply_until(cluster, &second, false);
    assert!(
        !denied.status.success(),
        "refused again once the deletion is seen\nserver log:\n{}",
        hook.log()
    );
}
