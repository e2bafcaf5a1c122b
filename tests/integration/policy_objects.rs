//! InterlockPolicy objects against the real control plane, with kubectl as
//! the platform engineer: a policy applied as an object is enforced by two
//! running webhook replicas (`serve --cluster-policies`), its status reads
//! Ready at its generation, a broken edit leaves the previous generation in
//! force and shows the error with its position, and deleting it stops
//! enforcement.
//!
//! InterlockPolicy objects are cluster-scoped and every test shares the
//! cluster: the policy here has a name of its own and matches only this
//! test's namespaces, and is deleted at the end.

use crate::support;

use serde_json::{json, Value};
use std::process::Output;
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::webhook::{namespace_labelled, Scope, Webhook};

/// One replica per scope: each registers its own configurations, so each
/// namespace below is judged by one known replica.
const REPLICA_A: Scope = Scope {
    config: "interlock-policy-objects-a",
    label: "interlock-policy-objects-a",
    groups: &[""],
    resources: &["configmaps"],
};
const REPLICA_B: Scope = Scope {
    config: "interlock-policy-objects-b",
    label: "interlock-policy-objects-b",
    groups: &[""],
    resources: &["configmaps"],
};

/// Generous: a failure deadline, not a speed claim.
const PATIENCE: Duration = Duration::from_secs(90);

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A policy that denies ConfigMaps holding a `forbidden` key, in
/// `namespaces` only.
fn policy(name: &str, namespaces: &[&str], expression: &str) -> String {
    policy_on(name, namespaces, "configmaps", expression)
}

fn policy_on(name: &str, namespaces: &[&str], resource: &str, expression: &str) -> String {
    json!({
        "apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                    "operator": "In", "values": namespaces}]},
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "resources": [resource], "operations": ["CREATE", "UPDATE"]}]},
            "validationActions": ["Deny"],
            "validations": [{"expression": expression, "message": "the key forbidden is not allowed"}]
        }
    })
    .to_string()
}

const RULE: &str = "!has(object.data) || !('forbidden' in object.data)";

/// Whether a ConfigMap with the forbidden key is denied in `ns` now (one
/// server-side dry run; the webhook declares no side effects).
pub(crate) fn denied(cluster: &TestCluster, ns: &str) -> bool {
    dry_run_denied(
        cluster,
        ns,
        &["configmap", "probe", "--from-literal=forbidden=1"],
    )
}

/// Whether a Service named forbidden-* is denied in `ns` now.
fn service_denied(cluster: &TestCluster, ns: &str) -> bool {
    dry_run_denied(
        cluster,
        ns,
        &["service", "clusterip", "forbidden-probe", "--tcp=80:80"],
    )
}

/// `kubectl create WHAT --dry-run=server` in `ns`: whether this test's
/// policies denied it (any other refusal fails the test).
fn dry_run_denied(cluster: &TestCluster, ns: &str, what: &[&str]) -> bool {
    let mut args = vec!["-n", ns, "create"];
    args.extend_from_slice(what);
    args.push("--dry-run=server");
    let out = cluster.kubectl(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || stderr.contains("the key forbidden is not allowed"),
        "refused for another reason: {stderr}"
    );
    !out.status.success()
}

/// Polls until `f` holds, or fails with `what`.
pub(crate) fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn get(cluster: &TestCluster, name: &str) -> Value {
    let out = ok(
        &cluster.kubectl(&["get", "interlockpolicy", name, "-o", "json"]),
        "get the policy",
    );
    serde_json::from_str(&out).expect("JSON")
}

/// The policy's Ready condition once its status speaks of its generation.
fn ready_at_generation(cluster: &TestCluster, name: &str) -> Option<Value> {
    let o = get(cluster, name);
    let generation = &o["metadata"]["generation"];
    if &o["status"]["observedGeneration"] != generation {
        return None;
    }
    let conditions = o["status"]["conditions"].as_array()?;
    conditions.iter().find(|c| c["type"] == "Ready").cloned()
}

fn start_replica(cluster: &TestCluster, scope: &Scope, lease: &str, extra: &[&str]) -> Webhook {
    let mut args = vec!["--cluster-policies", "--policy-status-lease", lease];
    args.extend_from_slice(extra);
    support::webhook::start_scoped(cluster, scope, &args)
}

/// Whether the rules of replica A's ValidatingWebhookConfiguration name
/// `resource`.
fn rules_name(cluster: &TestCluster, resource: &str) -> bool {
    let out = ok(
        &cluster.kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            REPLICA_A.config,
            "-o",
            "jsonpath={.webhooks[*].rules[*].resources}",
        ]),
        "get the webhook configuration",
    );
    out.contains(&format!("\"{resource}\""))
}

#[test]
fn a_policy_object_is_enforced_by_every_replica_and_reports_its_generation() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    support::webhook::install_crd(
        cluster,
        "manifests/base/crd-interlockpolicy.yaml",
        "interlockpolicies.interlock.dev",
    );
    let ns_a = namespace_labelled(cluster, "ilp-a", REPLICA_A.label);
    let ns_b = namespace_labelled(cluster, "ilp-b", REPLICA_B.label);
    let name = format!("no-forbidden-{ns_a}");
    let lease = format!("interlock-policy-status-{ns_a}");
    // Replica A keeps its webhook configuration's rules in step (item 3).
    let a = start_replica(
        cluster,
        &REPLICA_A,
        &lease,
        &["--sync-webhook-rules", REPLICA_A.config],
    );
    let b = start_replica(cluster, &REPLICA_B, &lease, &[]);
    assert!(
        !denied(cluster, &ns_a) && !denied(cluster, &ns_b),
        "no policy yet"
    );

    let namespaces = [ns_a.as_str(), ns_b.as_str()];
    ok(
        &cluster.kubectl_stdin(&["apply", "-f", "-"], &policy(&name, &namespaces, RULE)),
        "apply the policy",
    );
    until("both replicas enforce the new policy", || {
        denied(cluster, &ns_a) && denied(cluster, &ns_b)
    });
    until("the status is Ready at generation 1", || {
        ready_at_generation(cluster, &name).is_some_and(|c| c["status"] == "True")
    });
    assert_eq!(get(cluster, &name)["status"]["observedGeneration"], 1);

    // A broken edit: the status names the field and the position, and the
    // generation that compiled keeps being enforced.
    ok(
        &cluster.kubectl_stdin(
            &["apply", "-f", "-"],
            &policy(&name, &namespaces, "object.("),
        ),
        "apply the broken edit",
    );
    let mut condition = Value::Null;
    until(
        "the status reports the broken generation 2",
        || match ready_at_generation(cluster, &name) {
            Some(c) if c["status"] == "False" => {
                condition = c;
                true
            }
            _ => false,
        },
    );
    assert_eq!(get(cluster, &name)["status"]["observedGeneration"], 2);
    assert_eq!(condition["reason"], "CompileError", "{condition}");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("spec.validations[0].expression")
            && message.contains("<input>:1:")
            && message.contains("generation 1 stays in force"),
        "{message}"
    );
    assert!(
        denied(cluster, &ns_a) && denied(cluster, &ns_b),
        "generation 1 is still enforced by both replicas"
    );

    // A policy on a kind the webhook was not sent: the rules follow it,
    // and Services start being judged; removing it restores the rules.
    let services = format!("no-forbidden-services-{ns_a}");
    until("the rules name ConfigMaps and not Services", || {
        rules_name(cluster, "configmaps") && !rules_name(cluster, "services")
    });
    assert!(!service_denied(cluster, &ns_a), "Services are not sent yet");
    let rule = "!object.metadata.name.startsWith('forbidden')";
    ok(
        &cluster.kubectl_stdin(
            &["apply", "-f", "-"],
            &policy_on(&services, &namespaces, "services", rule),
        ),
        "apply the Service policy",
    );
    until("the rules name Services and Services are judged", || {
        rules_name(cluster, "services") && service_denied(cluster, &ns_a)
    });
    ok(
        &cluster.kubectl(&["delete", "interlockpolicy", &services]),
        "delete the Service policy",
    );
    until("the rules no longer name Services", || {
        !rules_name(cluster, "services") && rules_name(cluster, "configmaps")
    });
    assert!(!service_denied(cluster, &ns_a));

    ok(
        &cluster.kubectl(&["delete", "interlockpolicy", &name]),
        "delete the policy",
    );
    until("no replica enforces the deleted policy", || {
        !denied(cluster, &ns_a) && !denied(cluster, &ns_b)
    });
    for hook in [&a, &b] {
        assert!(
            hook.log().contains("policies reloaded"),
            "each replica reloaded: {}",
            hook.log()
        );
    }
}
