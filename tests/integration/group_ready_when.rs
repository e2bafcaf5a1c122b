//! `spec.readyWhen` against a real kube-apiserver and etcd: a member of a
//! custom kind installed by the test, whose status the test writes as its
//! operator would, is not ready until the group's expression holds; a
//! group whose expression does not compile is refused at admission.

use crate::support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;
use support::tenant::*;
use support::webhook::Scope;

const WIDGET_CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
    "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#;

fn install_widgets(c: &TestCluster) {
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], WIDGET_CRD),
        "the Widget CRD",
    );
    ok(
        &c.kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=60s",
        ]),
        "the Widget CRD established",
    );
}

/// A namespace whose ServiceAccount `deployer` may manage Widgets.
fn tenant(c: &TestCluster, ns: &str) {
    grant_deployer(c, ns, &[all_verbs("example.com", &["widgets"])]);
}

fn group(ns: &str, name: &str, expression: &str) -> Value {
    json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"serviceAccountName": "deployer",
            "resources": [{"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "gadget"}, "spec": {"size": 3}}],
            "readyWhen": [{"kind": "Widget", "expression": expression}]}})
}

fn get(c: &TestCluster, ns: &str, what: &str) -> Value {
    let out = c.kubectl(&["get", "-n", ns, what, "-o", "json"]);
    if !out.status.success() {
        return Value::Null;
    }
    serde_json::from_slice(&out.stdout).expect("kubectl json")
}

fn condition(rg: &Value, type_: &str) -> String {
    rg["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Polls (60 s) until the group's status describes its generation and `f`
/// holds; returns the group.
fn wait_for(
    c: &TestCluster,
    ctl: &Controller,
    ns: &str,
    what: &str,
    f: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let rg = get(c, ns, "resourcegroup/gadgets");
        let current = rg["status"]["observedGeneration"] == rg["metadata"]["generation"];
        if current && f(&rg) {
            return rg;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: {}\n{}",
            rg["status"],
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn ready_when_holds_a_custom_member_until_its_expression_is_true() {
    let c = TestCluster::start();
    let _logs = c.logs_on_panic();
    let dir = tempfile::tempdir().expect("tempdir");
    support::controller::install_resource_group_crd(&c);
    install_widgets(&c);
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);
    let ns = c.create_namespace("ready-when");
    tenant(&c, &ns);
    let expression = "object.?status.?phase.orValue('') == 'Running'";
    ok(
        &c.kubectl_stdin(
            &["apply", "-f", "-"],
            &group(&ns, "gadgets", expression).to_string(),
        ),
        "the group",
    );
    // Applied, and not ready: the generic rule would call a Widget without
    // conditions ready; the group's rule does not.
    let rg = wait_for(&c, &ctl, &ns, "applied, not ready", |rg| {
        condition(rg, "Applied") == "True" && condition(rg, "Ready") == "False"
    });
    let member = &rg["status"]["members"][0];
    assert_eq!(member["ready"], false, "{member}");
    assert_eq!(
        member["message"],
        format!("spec.readyWhen[0] is false: {expression}"),
        "{member}"
    );
    assert!(
        get(&c, &ns, "widget/gadget").is_object(),
        "the member exists"
    );

    // Its operator reports progress, then success, through the status
    // subresource.
    let status = |phase: &str| {
        ok(
            &c.kubectl(&[
                "patch",
                "-n",
                &ns,
                "widget/gadget",
                "--subresource=status",
                "--type=merge",
                "-p",
                &json!({"status": {"phase": phase}}).to_string(),
            ]),
            "the operator's status",
        )
    };
    status("Provisioning");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        condition(&get(&c, &ns, "resourcegroup/gadgets"), "Ready"),
        "False"
    );
    status("Running");
    let rg = wait_for(&c, &ctl, &ns, "ready", |rg| {
        condition(rg, "Ready") == "True"
    });
    assert_eq!(rg["status"]["members"][0]["ready"], true);
}

#[test]
fn a_ready_when_that_does_not_compile_is_refused_at_admission() {
    let c = TestCluster::start();
    let _logs = c.logs_on_panic();
    support::controller::install_resource_group_crd(&c);
    let scope = Scope {
        config: "interlock-test-groups",
        label: "interlock-test-groups",
        groups: &["", "interlock.dev"],
        resources: &["resourcegroups"],
    };
    let policy = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("policies/unique-ingress-host/policy.yaml")
        .display()
        .to_string();
    let hook = support::webhook::start_scoped(&c, &scope, &["-p", &policy]);
    let ns = support::webhook::namespace_labelled(&c, "ready-when-admission", scope.label);
    let broken = group(&ns, "gadgets", "object.status.phase ==");
    let out = c.kubectl_stdin(&["apply", "-f", "-"], &broken.to_string());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a broken readyWhen was admitted");
    assert!(
        err.contains("spec.readyWhen[0].expression: ERROR: <input>:1:"),
        "{err}\n{}",
        hook.log()
    );
    assert!(
        get(&c, &ns, "resourcegroup/gadgets").is_null(),
        "nothing stored"
    );
    // The same group with an expression that compiles is admitted.
    let fixed = group(
        &ns,
        "gadgets",
        "object.?status.?phase.orValue('') == 'Running'",
    );
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &fixed.to_string()),
        "a readyWhen that compiles",
    );
}
