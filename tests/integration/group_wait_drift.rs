//! `spec.waitForReady` and `spec.drift` against a real kube-apiserver and
//! etcd, with kubectl as the tenant and as the hand that edits. The cluster
//! runs no Job or Deployment controller: the test writes a Job's status as
//! the Job controller would.
//!
//! No assertion is about elapsed time: every step polls for the state it
//! expects with a generous deadline, and "not created before" is checked
//! at the moment the group's status says it waits.

use crate::support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;
use support::tenant::*;

/// A cluster with the CRD, a controller, and a tenant namespace whose
/// `deployer` may manage ConfigMaps, Jobs and Deployments.
fn setup(prefix: &str) -> (TestCluster, tempfile::TempDir, Controller, String) {
    let c = TestCluster::start();
    let dir = tempfile::tempdir().expect("tempdir");
    support::controller::install_resource_group_crd(&c);
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);
    let rules = [
        all_verbs("", &["configmaps"]),
        all_verbs("batch", &["jobs"]),
        all_verbs("apps", &["deployments"]),
    ];
    let ns = namespace_with_deployer(&c, prefix, &rules);
    (c, dir, ctl, ns)
}

fn job(name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "migrate", "image": "registry.example/migrate:1"}]}}}})
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]}}}})
}

fn group(ns: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["serviceAccountName"] = json!("deployer");
    json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": "shop", "namespace": ns}, "spec": spec})
}

fn get(c: &TestCluster, ns: &str, what: &str) -> Value {
    let out = c.kubectl(&["get", "-n", ns, what, "-o", "json"]);
    if !out.status.success() {
        return Value::Null;
    }
    serde_json::from_slice(&out.stdout).expect("kubectl json")
}

fn condition<'a>(rg: &'a Value, type_: &str) -> &'a Value {
    rg["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

fn member<'a>(rg: &'a Value, kind: &str) -> &'a Value {
    rg["status"]["members"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["kind"] == kind))
        .unwrap_or(&Value::Null)
}

/// Polls (120 s) until the group's status describes its generation and
/// `f` holds; returns the group.
fn wait_for(
    c: &TestCluster,
    ctl: &Controller,
    ns: &str,
    what: &str,
    f: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let rg = get(c, ns, "resourcegroup/shop");
        let current = rg["status"]["observedGeneration"] == rg["metadata"]["generation"];
        if current && f(&rg) {
            return rg;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{what}: {:#}\n{}",
            rg["status"],
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Polls (120 s) until `f` holds.
fn eventually(what: &str, ctl: &Controller, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{what}\n{}",
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn apply(c: &TestCluster, v: &Value) {
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &v.to_string()),
        "kubectl apply",
    );
}

/// Writes the status the Job controller writes when the Job's pod
/// succeeded, through the status subresource.
fn complete_job(c: &TestCluster, ns: &str, name: &str) {
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let cond = |t: &str| {
        json!({"type": t, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
            "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods"})
    };
    let status = json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1,
        "ready": 0, "terminating": 0, "uncountedTerminatedPods": {},
        "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}});
    ok(
        &c.kubectl(&[
            "patch",
            "-n",
            ns,
            &format!("job/{name}"),
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]),
        "the Job's status",
    );
}

#[test]
fn wait_for_ready_creates_the_deployment_only_once_the_job_completed() {
    let (c, _dir, ctl, ns) = setup("wait-ready");
    let _logs = c.logs_on_panic();
    let spec = json!({"waitForReady": true, "resources": [deployment("web"), job("migrate")]});
    apply(&c, &group(&ns, spec));

    // The Job is created; the group says it waits for it, and the
    // Deployment of the next rank does not exist.
    let rg = wait_for(&c, &ctl, &ns, "waiting for the Job", |rg| {
        rg["status"]["waitingFor"]["kind"] == "Job"
            && member(rg, "Job")["uid"].is_string()
            && member(rg, "Deployment")["state"] == "Waiting"
    });
    assert_eq!(rg["status"]["waitingFor"]["name"], "migrate");
    assert!(
        rg["status"]["waitingFor"]["since"].is_string(),
        "{:#}",
        rg["status"]
    );
    assert_eq!(condition(&rg, "Ready")["reason"], "Waiting");
    assert!(
        get(&c, &ns, "job/migrate").is_object(),
        "the Job is created"
    );
    assert!(
        get(&c, &ns, "deployment/web").is_null(),
        "the Deployment is created before the Job completed: {:#}",
        rg["status"]
    );

    // The Job completes: the Deployment is created, nothing waits.
    complete_job(&c, &ns, "migrate");
    let rg = wait_for(&c, &ctl, &ns, "the Deployment applied", |rg| {
        rg["status"]["waitingFor"].is_null() && member(rg, "Deployment")["state"] == "Applied"
    });
    assert!(get(&c, &ns, "deployment/web").is_object());
    assert_eq!(member(&rg, "Job")["ready"], true, "{:#}", rg["status"]);
    // No Deployment controller here: the group is applied, not ready.
    assert_eq!(condition(&rg, "Applied")["status"], "True");
}

#[test]
fn a_wait_longer_than_ready_timeout_is_a_timeout_and_undoes_nothing() {
    let (c, _dir, ctl, ns) = setup("wait-timeout");
    let _logs = c.logs_on_panic();
    let spec = json!({"waitForReady": true, "readyTimeout": "3s",
        "resources": [deployment("web"), job("migrate")]});
    apply(&c, &group(&ns, spec));
    let rg = wait_for(&c, &ctl, &ns, "timed out", |rg| {
        condition(rg, "Ready")["reason"] == "Timeout"
    });
    let ready = condition(&rg, "Ready");
    assert_eq!(ready["status"], "False");
    let message = ready["message"].as_str().unwrap_or("");
    assert!(
        message.contains("Job migrate not ready within 3s"),
        "{message}"
    );
    assert_eq!(rg["status"]["waitingFor"]["name"], "migrate");
    assert!(get(&c, &ns, "job/migrate").is_object(), "the Job stays");
    assert!(get(&c, &ns, "deployment/web").is_null());
    // The wait goes on: a Job that completes late lets the Deployment through.
    complete_job(&c, &ns, "migrate");
    wait_for(&c, &ctl, &ns, "the Deployment applied", |rg| {
        member(rg, "Deployment")["state"] == "Applied"
    });
    assert!(get(&c, &ns, "deployment/web").is_object());
}

fn drifted_members(ctl: &Controller) -> u64 {
    ctl.counter("interlock_controller_drifted_members")
}

#[test]
fn drift_report_keeps_a_hand_edit_lists_it_and_revert_puts_it_back() {
    let (c, _dir, ctl, ns) = setup("drift");
    let _logs = c.logs_on_panic();
    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"}, "data": {"mode": "live", "size": "1"}});
    let mut rg = group(&ns, json!({"drift": "Report", "resources": [settings]}));
    apply(&c, &rg);
    wait_for(&c, &ctl, &ns, "applied", |rg| {
        condition(rg, "Applied")["status"] == "True"
            && condition(rg, "Drifted")["status"] == "False"
    });
    let cm = get(&c, &ns, "configmap/settings");
    assert!(
        cm["metadata"]["annotations"]["interlock.dev/applied-hash"]
            .as_str()
            .is_some_and(|h| h.starts_with("sha256:")),
        "{cm:#}"
    );

    // A hand edit (kubectl as an administrator: no webhook runs here).
    ok(
        &c.kubectl(&[
            "patch",
            "-n",
            &ns,
            "configmap/settings",
            "--type=merge",
            "-p",
            r#"{"data": {"mode": "by-hand"}}"#,
        ]),
        "the hand edit",
    );
    let status = wait_for(&c, &ctl, &ns, "drift reported", |rg| {
        member(rg, "ConfigMap")["drift"] == json!(["data.mode"])
    });
    let drifted = condition(&status, "Drifted");
    assert_eq!(drifted["status"], "True", "{drifted}");
    assert!(
        drifted["message"]
            .as_str()
            .unwrap_or("")
            .contains("ConfigMap settings: data.mode"),
        "{drifted}"
    );
    assert_eq!(member(&status, "ConfigMap")["state"], "Applied");
    eventually("the metric counts the drifted member", &ctl, || {
        drifted_members(&ctl) == 1
    });
    // The pass that reported the drift wrote nothing to the member.
    assert_eq!(
        get(&c, &ns, "configmap/settings")["data"]["mode"],
        "by-hand",
        "the hand edit was reverted under drift: Report"
    );

    // Switching to Revert puts the field back and clears the report.
    rg["spec"]["drift"] = json!("Revert");
    apply(&c, &rg);
    eventually("the hand edit reverted", &ctl, || {
        get(&c, &ns, "configmap/settings")["data"]["mode"] == "live"
    });
    let status = wait_for(&c, &ctl, &ns, "no drift listed", |rg| {
        member(rg, "ConfigMap")["drift"].is_null() && condition(rg, "Drifted").is_null()
    });
    assert_eq!(condition(&status, "Applied")["status"], "True");
    eventually("the metric back to 0", &ctl, || drifted_members(&ctl) == 0);
}
