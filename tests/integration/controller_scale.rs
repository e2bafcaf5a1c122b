//! The controller at scale, against a real kube-apiserver of its own: the
//! work of one group's pass does not grow with the other groups of its
//! namespace, and a restart decides every converged group from its caches
//! with no write and no warning.

use crate::support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;

const MEMBERS: usize = 3;
const OTHERS: usize = 30;

fn ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespace with ServiceAccount `deployer`, allowed to manage ConfigMaps.
fn tenant(c: &TestCluster) -> String {
    let ns = c.create_namespace("rg-scale");
    let rbac = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "deployer", "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "deployer", "namespace": ns},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "deployer", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deployer"},
         "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": ns}]}]});
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &rbac.to_string()),
        "tenant RBAC",
    );
    ns
}

/// A group of `MEMBERS` ConfigMaps named after it.
fn group(ns: &str, name: &str) -> Value {
    let members: Vec<Value> = (0..MEMBERS)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("{name}-{i}")}, "data": {"n": i.to_string()}})
        })
        .collect();
    json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"serviceAccountName": "deployer", "resources": members}})
}

/// Names of the groups of `ns` that are Ready at their generation.
fn ready_groups(c: &TestCluster, ns: &str) -> Vec<String> {
    let out = c.kubectl(&["get", "-n", ns, "resourcegroups", "-o", "json"]);
    ok(&out, "list groups");
    let list: Value = serde_json::from_slice(&out.stdout).expect("kubectl json");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter(|rg| {
            let current = rg["status"]["observedGeneration"] == rg["metadata"]["generation"];
            let ready = rg["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            current && ready
        })
        .filter_map(|rg| rg["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

fn wait_ready(c: &TestCluster, ctl: &Controller, ns: &str, n: usize) {
    let start = Instant::now();
    loop {
        let ready = ready_groups(c, ns);
        if ready.len() == n {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "{} of {n} groups Ready: {ready:?}\n{}",
            ready.len(),
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The controller's (passes, objects observed, writes) counters.
fn counters(ctl: &Controller) -> (u64, u64, u64) {
    (
        ctl.passes(),
        ctl.counter("interlock_controller_observed_objects_total"),
        ctl.writes(),
    )
}

/// Waits until no pass has run for 3 s (the passes that follow writes and
/// their watch events are over) and returns the counters then.
fn quiet(ctl: &Controller) -> (u64, u64, u64) {
    let start = Instant::now();
    let mut last = counters(ctl);
    let mut since = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let now = counters(ctl);
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= Duration::from_secs(3) {
            return now;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the controller never went quiet: {now:?}\n{}",
            ctl.log()
        );
    }
}

/// Forces passes of `name` (a touch of its annotations: a watch event, no
/// change to decide) and returns the objects observed per pass, checking
/// that a converged group's pass writes nothing.
fn observed_per_pass(c: &TestCluster, ctl: &Controller, ns: &str, name: &str) -> f64 {
    let (passes, observed, writes) = quiet(ctl);
    let stamp = format!("touched={}", passes);
    ok(
        &c.kubectl(&[
            "annotate",
            "-n",
            ns,
            &format!("resourcegroup/{name}"),
            &stamp,
            "--overwrite",
        ]),
        "touch the group",
    );
    let start = Instant::now();
    while ctl.passes() == passes {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no pass after a touch\n{}",
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (passes_after, observed_after, writes_after) = quiet(ctl);
    assert_eq!(writes_after, writes, "a converged group's pass writes nothing");
    // Every group has as many members, so the mean is one pass's count even
    // if another group's pass ran meanwhile.
    (observed_after - observed) as f64 / (passes_after - passes) as f64
}

#[test]
fn a_pass_visits_its_own_members_however_many_groups_share_the_namespace() {
    let c = TestCluster::start();
    let _logs = c.logs_on_panic();
    support::controller::install_resource_group_crd(&c);
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = tenant(&c);
    let mut ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);

    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &group(&ns, "first").to_string()),
        "the first group",
    );
    wait_ready(&c, &ctl, &ns, 1);
    let alone = observed_per_pass(&c, &ctl, &ns, "first");
    assert_eq!(
        alone, MEMBERS as f64,
        "a pass of a group alone observes its members"
    );

    let others: Vec<Value> = (0..OTHERS)
        .map(|i| group(&ns, &format!("other-{i}")))
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": others});
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &list.to_string()),
        "the other groups",
    );
    wait_ready(&c, &ctl, &ns, OTHERS + 1);
    let crowded = observed_per_pass(&c, &ctl, &ns, "first");
    assert_eq!(
        crowded, alone,
        "with {OTHERS} other groups in the namespace a pass observes as much as alone"
    );

    // A restart: every group decided from caches, no write, and no pass
    // started before the inventory and the member cache had listed (which
    // would fail and warn once per group).
    drop(ctl);
    ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);
    let start = Instant::now();
    while ctl.passes() < (OTHERS + 1) as u64 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} passes after the restart\n{}",
            ctl.passes(),
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let (passes, observed, writes) = quiet(&ctl);
    let log = ctl.log();
    assert_eq!(writes, 0, "a restart writes nothing for converged groups:\n{log}");
    assert_eq!(
        ctl.counter("interlock_controller_reconcile_errors_total"),
        0,
        "no pass failed after the restart:\n{log}"
    );
    assert!(!log.contains("reconcile failed"), "{log}");
    assert_eq!(
        observed,
        passes * MEMBERS as u64,
        "each pass after the restart observed its own members only"
    );
    assert_eq!(ready_groups(&c, &ns).len(), OTHERS + 1);
}
