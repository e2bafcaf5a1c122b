//! A ResourceQuota that cannot hold a group's new members, against the
//! real control plane (kube-controller-manager keeps the quota's
//! `status.used`): the group is refused before any write, with the quota
//! and its numbers in status, and converges as soon as the quota is raised
//! (woken by the quota's watch, not by a backoff or the 5-minute requeue).

use crate::support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::cluster::{Options, TestCluster};
use support::controller::Controller;
use support::tenant::*;

const GROUP: &str = "four-configmaps";
const MEMBERS: [&str; 4] = ["quota-a", "quota-b", "quota-c", "quota-d"];

fn get(c: &TestCluster, ns: &str, what: &str) -> Value {
    let out = c.kubectl(&["get", "-n", ns, what, "-o", "json"]);
    if !out.status.success() {
        return Value::Null;
    }
    serde_json::from_slice(&out.stdout).expect("kubectl json")
}

/// Polls `f` until it yields a value; `limit` is a generous bound.
fn until<T>(
    what: &str,
    limit: Duration,
    logs: impl Fn() -> String,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?}\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Sets the quota's `count/configmaps` and waits until the quota
/// controller has counted it; the ConfigMaps used then.
fn set_quota(c: &TestCluster, ns: &str, hard: Option<i64>) -> i64 {
    // Under 1000, so that the canonical form kube stores is the same digits.
    let hard_text = hard.map_or("100".to_string(), |h| h.to_string());
    let q = json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "objects", "namespace": ns},
        "spec": {"hard": {"count/configmaps": hard_text}}});
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &q.to_string()),
        "quota",
    );
    until(
        "the quota counted",
        Duration::from_secs(60),
        || format!("{:#}", get(c, ns, "resourcequota/objects")),
        || {
            let q = get(c, ns, "resourcequota/objects");
            let s = |p: &str| q.pointer(p).and_then(Value::as_str).map(str::to_string);
            let counted = s("/status/hard/count~1configmaps") == Some(hard_text.clone());
            let used = s("/status/used/count~1configmaps")?.parse().ok()?;
            counted.then_some(used)
        },
    )
}

fn stored_members(c: &TestCluster, ns: &str) -> Vec<&'static str> {
    MEMBERS
        .into_iter()
        .filter(|m| !get(c, ns, &format!("configmap/{m}")).is_null())
        .collect()
}

fn condition(rg: &Value, type_: &str) -> Option<Value> {
    if rg["status"]["observedGeneration"] != rg["metadata"]["generation"] {
        return None;
    }
    rg["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

#[test]
fn a_quota_short_of_room_writes_no_member_and_a_raise_converges_the_group() {
    // kube-controller-manager's quota controller keeps `status.used`.
    let c = TestCluster::start_with(Options {
        controller_manager: true,
        extra_controllers: vec!["resourcequota-controller".into()],
        ..Options::default()
    });
    let _logs = c.logs_on_panic();
    support::controller::install_resource_group_crd(&c);
    let dir = tempfile::tempdir().expect("tempdir");
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);
    // The tenant writes its group itself, as `deployer`.
    let ns = namespace_with_deployer(
        &c,
        "quota",
        &[
            all_verbs("", &["configmaps"]),
            all_verbs(
                "interlock.dev",
                &["resourcegroups", "resourcegroups/finalizers"],
            ),
        ],
    );
    let used = set_quota(&c, &ns, None);
    let used = set_quota(&c, &ns, Some(used + 3));

    let members: Vec<Value> = MEMBERS
        .iter()
        .map(|m| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": m}, "data": {"k": "v"}}))
        .collect();
    let group = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": GROUP, "namespace": ns},
        "spec": {"serviceAccountName": "deployer", "resources": members}});
    let tenant = format!("system:serviceaccount:{ns}:deployer");
    ok(
        &c.kubectl_stdin(&["apply", "--as", &tenant, "-f", "-"], &group.to_string()),
        "the tenant's kubectl apply",
    );

    let held = until(
        "Applied=False",
        Duration::from_secs(120),
        || ctl.log(),
        || {
            let rg = get(&c, &ns, &format!("resourcegroup/{GROUP}"));
            condition(&rg, "Applied")
                .filter(|a| a["status"] == "False")
                .map(|a| (rg, a))
        },
    );
    let (rg, applied) = held;
    assert_eq!(applied["reason"], "QuotaExceeded", "{applied:#}");
    let message = applied["message"].as_str().unwrap_or("");
    let numbers = format!(
        "ResourceQuota {ns}/objects allows 3 more count/configmaps ({used} of {} used) and the group would create 4",
        used + 3
    );
    assert!(message.starts_with(&numbers), "{message}");
    assert!(message.ends_with("Written on this pass: none; not written: ConfigMap quota-a, ConfigMap quota-b, ConfigMap quota-c, ConfigMap quota-d"), "{message}");
    for m in rg["status"]["members"].as_array().expect("members") {
        assert_eq!(m["state"], "Pending", "{m:#}");
        assert!(
            m["message"].as_str().unwrap_or("").contains("not written"),
            "{m:#}"
        );
    }
    assert_eq!(
        stored_members(&c, &ns),
        Vec::<&str>::new(),
        "no member stored"
    );
    let writes_while_held = ctl.writes();

    // Room for four: the quota's watch wakes the group. The bound is under
    // the 4 minutes (at least) of the safety-net requeue, so only the watch
    // can meet it.
    set_quota(&c, &ns, Some(used + 4));
    until(
        "Ready=True after the raise",
        Duration::from_secs(90),
        || ctl.log(),
        || {
            let rg = get(&c, &ns, &format!("resourcegroup/{GROUP}"));
            condition(&rg, "Ready").filter(|r| r["status"] == "True")
        },
    );
    assert_eq!(stored_members(&c, &ns), MEMBERS.to_vec());
    assert!(
        ctl.writes() >= writes_while_held + 4,
        "the four creates are counted"
    );
}
