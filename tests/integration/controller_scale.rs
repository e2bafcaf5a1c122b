//! The controller at scale, against a real kube-apiserver of its own: the
//! work of one group's pass does not grow with the other groups of its
//! namespace, a new member costs no read, and a restart decides every
//! converged group from its caches with no write and no warning. And what
//! the cheaper path must keep: an object the caches do not show is still
//! never adopted from another owner.

use crate::support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;
use support::tenant::*;

const MEMBERS: usize = 3;
const OTHERS: usize = 30;

/// A namespace with ServiceAccount `deployer`, allowed to manage ConfigMaps.
fn tenant(c: &TestCluster) -> String {
    namespace_with_deployer(c, "rg-scale", &[all_verbs("", &["configmaps"])])
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

/// kube-apiserver's count of GETs of ConfigMaps (this test's kubectl reads
/// only ResourceGroups, so these are the controller's).
fn configmap_gets(c: &TestCluster) -> u64 {
    let out = c.kubectl(&["get", "--raw", "/metrics"]);
    ok(&out, "kube-apiserver metrics");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains(r#"resource="configmaps""#) && l.contains(r#"verb="GET""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
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
    assert_eq!(
        writes_after, writes,
        "a converged group's pass writes nothing"
    );
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
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);

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
    let gets = configmap_gets(&c);
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &list.to_string()),
        "the other groups",
    );
    wait_ready(&c, &ctl, &ns, OTHERS + 1);
    let gets = configmap_gets(&c) - gets;
    // The old path read every new member once (90 GETs); now a GET is
    // left only for a pass that raced its members' watch events.
    assert!(
        gets * 4 <= (OTHERS * MEMBERS) as u64,
        "{gets} GETs of ConfigMaps for {} new members",
        OTHERS * MEMBERS
    );
    let crowded = observed_per_pass(&c, &ctl, &ns, "first");
    assert_eq!(
        crowded, alone,
        "with {OTHERS} other groups in the namespace a pass observes as much as alone"
    );
}

/// kube-apiserver's request counts by (resource, verb), for the kinds a
/// pass could touch (this test's kubectl reads only ResourceGroups, by LIST).
fn requests(c: &TestCluster) -> std::collections::BTreeMap<(String, String), u64> {
    let out = c.kubectl(&["get", "--raw", "/metrics"]);
    ok(&out, "kube-apiserver metrics");
    let mut by = std::collections::BTreeMap::new();
    let text = String::from_utf8_lossy(&out.stdout);
    for l in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let label = |k: &str| l.split(&format!("{k}=\"")).nth(1)?.split('"').next();
        let (Some(resource), Some(verb)) = (label("resource"), label("verb")) else {
            continue;
        };
        if !["configmaps", "resourcegroups", "subjectaccessreviews"].contains(&resource) {
            continue;
        }
        let n = l
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        *by.entry((resource.to_string(), verb.to_string()))
            .or_default() += n as u64;
    }
    by
}

#[test]
fn a_restart_over_converged_groups_lists_once_decides_from_caches_and_writes_nothing() {
    const GROUPS: usize = 30;
    let c = TestCluster::start();
    let _logs = c.logs_on_panic();
    support::controller::install_resource_group_crd(&c);
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = tenant(&c);
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);
    let groups: Vec<Value> = (0..GROUPS).map(|i| group(&ns, &format!("g-{i}"))).collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": groups});
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &list.to_string()),
        "the groups",
    );
    wait_ready(&c, &ctl, &ns, GROUPS);
    quiet(&ctl);
    drop(ctl);

    // The restart: every group decided from caches, no write, and no pass
    // started before the inventory and the member cache had listed (which
    // would fail and warn once per group).
    let before = requests(&c);
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);
    let start = Instant::now();
    while ctl.passes() < GROUPS as u64 {
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
    assert_eq!(
        writes, 0,
        "a restart writes nothing for converged groups:\n{log}"
    );
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
    assert_eq!(ready_groups(&c, &ns).len(), GROUPS, "all Ready observed");
    // Requests: lists and watches only, none per group (no GET, no write,
    // no review); the kubectl reads of `ready_groups` are LISTs too.
    let after = requests(&c);
    let made: Vec<_> = after
        .iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    let per_group: Vec<_> = made
        .iter()
        .filter(|((_, verb), _)| !matches!(verb.as_str(), "LIST" | "WATCH"))
        .collect();
    assert!(per_group.is_empty(), "requests after the restart: {made:?}");
    let configmap_lists: u64 = made
        .iter()
        .filter(|((r, verb), _)| r == "configmaps" && verb == "LIST")
        .map(|(_, n)| n)
        .sum();
    assert!(
        configmap_lists <= 2,
        "the member cache (and the inventory) list ConfigMaps once: {made:?}"
    );
}

fn config_map(c: &TestCluster, v: &Value) -> Value {
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &v.to_string()),
        "a ConfigMap by hand",
    );
    get(
        c,
        v["metadata"]["namespace"].as_str().unwrap_or(""),
        &format!("configmap/{}", v["metadata"]["name"].as_str().unwrap_or("")),
    )
    .expect("stored")
}

fn get(c: &TestCluster, ns: &str, what: &str) -> Option<Value> {
    let out = c.kubectl(&["get", "-n", ns, what, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl json"))
}

fn wait_for(
    c: &TestCluster,
    ctl: &Controller,
    ns: &str,
    name: &str,
    f: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let rg = get(c, ns, &format!("resourcegroup/{name}")).unwrap_or(Value::Null);
        let current = rg["status"]["observedGeneration"] == rg["metadata"]["generation"];
        if current && f(&rg) {
            return rg;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{name}: {}\n{}",
            rg["status"],
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn condition(rg: &Value, type_: &str) -> (String, String) {
    rg["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").into(),
                c["reason"].as_str().unwrap_or("").into(),
            )
        })
        .unwrap_or_default()
}

#[test]
fn a_member_the_caches_do_not_show_is_read_before_any_write_and_never_adopted() {
    let c = TestCluster::start();
    let _logs = c.logs_on_panic();
    support::controller::install_resource_group_crd(&c);
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = tenant(&c);
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);

    // Unlabelled, so outside the controller's caches: one controlled by
    // another object, one that nobody claims.
    let owner = config_map(
        &c,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "owner", "namespace": ns}}),
    );
    let held = config_map(
        &c,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": ns, "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
             "uid": owner["metadata"]["uid"], "controller": true}]},
        "data": {"n": "theirs"}}),
    );
    config_map(
        &c,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "free", "namespace": ns}, "data": {"n": "old"}}),
    );

    let member = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"n": "ours"}})
    };
    let grab = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": "grab", "namespace": ns},
        "spec": {"serviceAccountName": "deployer", "resources": [member("grab-new"), member("held")]}});
    let take = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": "take", "namespace": ns},
        "spec": {"serviceAccountName": "deployer", "resources": [member("free")]}});
    for g in [&grab, &take] {
        ok(
            &c.kubectl_stdin(&["apply", "-f", "-"], &g.to_string()),
            "a group",
        );
    }

    let rg = wait_for(&c, &ctl, &ns, "grab", |rg| {
        condition(rg, "Applied").0 == "False"
    });
    assert_eq!(condition(&rg, "Applied").1, "Conflict", "{}", rg["status"]);
    let now = get(&c, &ns, "configmap/held").expect("held");
    assert_eq!(
        now["metadata"]["resourceVersion"], held["metadata"]["resourceVersion"],
        "another owner's object is not written: {now}"
    );
    assert!(
        get(&c, &ns, "configmap/grab-new").is_none(),
        "nothing of a group in conflict is written"
    );

    wait_for(&c, &ctl, &ns, "take", |rg| {
        condition(rg, "Ready").0 == "True"
    });
    let free = get(&c, &ns, "configmap/free").expect("free");
    assert_eq!(
        free["data"]["n"], "ours",
        "an object nobody claims is taken over: {free}"
    );
    assert!(free["metadata"]["labels"]["applyset.kubernetes.io/part-of"].is_string());
}
