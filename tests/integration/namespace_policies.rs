//! Tenant policies against the real control plane, with kubectl as a
//! tenant (a user bound to the shipped `interlock-namespace-policy-editor`
//! role in its namespace only): the tenant cannot create an InterlockPolicy
//! but can create an InterlockNamespacePolicy in its namespace; that
//! policy is enforced by `serve --namespace-policies` in its namespace and
//! not in another, and its status reads Ready at its generation; one that
//! reads another namespace is refused by the webhook when it is created,
//! and one with claims by the CRD's own validation rule.

use crate::support;

use crate::policy_objects::{denied, until};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};
use support::cluster::TestCluster;
use support::tenant::ok;
use support::webhook::{kubeconfig_as, namespace_labelled, Scope};

/// ConfigMaps, and the tenants' policies themselves (refused at admission
/// when they reach further).
const SCOPE: Scope = Scope {
    config: "interlock-namespace-policies",
    label: "interlock-namespace-policies",
    groups: &["", "interlock.dev"],
    resources: &["configmaps", "interlocknamespacepolicies"],
};

const TENANT: &str = "tenant-ilnp";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// kubectl as the tenant, with `stdin` when given.
fn as_tenant(kubeconfig: &Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let kubectl = support::cluster::control_plane_dir()
        .expect("the control plane's kubectl")
        .join("kubectl");
    let mut child = Command::new(kubectl)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", kubeconfig.with_extension("cache"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().expect("kubectl")
}

/// A policy of `kind` denying ConfigMaps with a `forbidden` key; `reads`,
/// when given, is a namespace its rule also lists ConfigMaps of.
fn policy(kind: &str, ns: Option<&str>, name: &str, reads: Option<&str>) -> String {
    let mut rule = "!has(object.data) || !('forbidden' in object.data)".to_string();
    if let Some(other) = reads {
        rule = format!("{rule} || inventory.list('v1', 'ConfigMap', '{other}').size() > 100");
    }
    let mut doc = json!({
        "apiVersion": "interlock.dev/v1alpha1", "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "operations": ["CREATE", "UPDATE"]}]},
            "validationActions": ["Deny"],
            "validations": [{"expression": rule, "message": "the key forbidden is not allowed"}]
        }
    });
    if let Some(ns) = ns {
        doc["metadata"]["namespace"] = json!(ns);
    }
    doc.to_string()
}

/// The tenant policy's status once it speaks of its generation.
fn status_at_generation(cluster: &TestCluster, ns: &str, name: &str) -> Option<Value> {
    let out = cluster.kubectl(&[
        "-n",
        ns,
        "get",
        "interlocknamespacepolicy",
        name,
        "-o",
        "json",
    ]);
    let o: Value = serde_json::from_slice(&out.stdout).ok()?;
    (o["status"]["observedGeneration"] == o["metadata"]["generation"]).then(|| o["status"].clone())
}

#[test]
fn a_tenants_policy_judges_its_namespace_only_and_cannot_reach_further() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    for (file, crd) in [
        (
            "crd-interlockpolicy.yaml",
            "interlockpolicies.interlock.dev",
        ),
        (
            "crd-interlocknamespacepolicy.yaml",
            "interlocknamespacepolicies.interlock.dev",
        ),
    ] {
        support::webhook::install_crd(cluster, &format!("manifests/base/{file}"), crd);
    }
    let roles = root().join("manifests/base/policy-rbac.yaml");
    ok(
        &cluster.kubectl(&["apply", "-f", &roles.display().to_string()]),
        "the shipped policy roles",
    );
    let own = namespace_labelled(cluster, "ilnp-own", SCOPE.label);
    let other = namespace_labelled(cluster, "ilnp-other", SCOPE.label);
    ok(
        &cluster.kubectl(&[
            "-n",
            &own,
            "create",
            "rolebinding",
            "tenant-policies",
            "--clusterrole=interlock-namespace-policy-editor",
            &format!("--user={TENANT}"),
        ]),
        "bind the tenant",
    );
    let lease = format!("interlock-policy-status-{own}");
    let hook = support::webhook::start_scoped(
        cluster,
        &SCOPE,
        &[
            "--cluster-policies",
            "--namespace-policies",
            "--policy-status-lease",
            &lease,
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let tenant = kubeconfig_as(cluster, dir.path(), TENANT);
    let apply = |doc: &str| as_tenant(&tenant, &["apply", "-f", "-"], doc);

    // RBAC: the cluster's kind is the platform's, the namespaced one the tenant's.
    let cluster_policy = policy("InterlockPolicy", None, &format!("tenant-try-{own}"), None);
    let refused = apply(&cluster_policy);
    assert!(
        !refused.status.success() && text(&refused).contains("forbidden"),
        "a tenant cannot create an InterlockPolicy: {}",
        text(&refused)
    );
    let elsewhere = policy("InterlockNamespacePolicy", Some(&other), "mine", None);
    assert!(
        !apply(&elsewhere).status.success(),
        "nor a policy in another namespace"
    );

    let kind = "InterlockNamespacePolicy";
    ok(
        &apply(&policy(kind, Some(&own), "no-forbidden", None)),
        "the tenant creates its namespace's policy",
    );
    until("the tenant's policy is enforced in its namespace", || {
        denied(cluster, &own)
    });
    // One reload brought the policy in: the other namespace is not judged.
    assert!(!denied(cluster, &other), "another namespace is not judged");
    until("its status is Ready at generation 1", || {
        status_at_generation(cluster, &own, "no-forbidden")
            .is_some_and(|s| s["conditions"][0]["status"] == "True")
    });

    // Reading another namespace is refused when the policy is written,
    // naming the field and the namespace.
    let reaching = policy(kind, Some(&own), "reaches", Some(&other));
    let out = apply(&reaching);
    let stderr = text(&out);
    assert!(
        !out.status.success(),
        "a policy reading another namespace is created"
    );
    assert!(
        stderr.contains("spec.validations[0].expression: inventory.list reads namespace")
            && stderr.contains(&other)
            && stderr.contains("reads only its own"),
        "{stderr}"
    );
    // Claims are refused by the CRD's own rule, before any webhook.
    let mut claims: Value =
        serde_json::from_str(&policy(kind, Some(&own), "claims", None)).unwrap();
    claims["spec"]["claims"] = json!([{"index": "x", "holder": "object.metadata.name"}]);
    let out = apply(&claims.to_string());
    assert!(
        !out.status.success() && text(&out).contains("spec.claims: an InterlockNamespacePolicy"),
        "{}",
        text(&out)
    );

    ok(
        &as_tenant(
            &tenant,
            &[
                "-n",
                &own,
                "delete",
                "interlocknamespacepolicy",
                "no-forbidden",
            ],
            "",
        ),
        "the tenant deletes its policy",
    );
    until("the deleted policy is no longer enforced", || {
        !denied(cluster, &own)
    });
    assert!(hook.log().contains("policies reloaded"), "{}", hook.log());
}
