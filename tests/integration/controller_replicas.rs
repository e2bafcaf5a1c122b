//! `interlock controller` as more than one process, and as seen by
//! kube-apiserver, against the real control plane:
//! - two replicas with leader election: exactly one reconciles; when it
//!   dies, the other takes over and converges a new group;
//! - a group that cannot be applied backs off: kube-apiserver's audit log
//!   counts the requests made about it over a minute.

use crate::support;

use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use support::cluster::{Options, TestCluster};
use support::controller::Controller;
use support::tenant::*;

/// A namespace with ServiceAccount `deployer`, allowed to manage
/// ConfigMaps and Services (not Secrets).
pub(crate) fn tenant(c: &TestCluster, prefix: &str) -> String {
    namespace_with_deployer(c, prefix, &[all_verbs("", &["configmaps", "services"])])
}

pub(crate) fn apply_group(c: &TestCluster, ns: &str, name: &str, resources: Value) {
    let g = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"serviceAccountName": "deployer", "resources": resources}});
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &g.to_string()),
        "kubectl apply",
    );
}

pub(crate) fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn get(c: &TestCluster, ns: &str, what: &str) -> Option<Value> {
    let out = c.kubectl(&["get", "-n", ns, what, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl json"))
}

/// Polls until `f` holds (for at most `limit`, a generous bound), else
/// panics with the last value and `logs`.
fn eventually<T: std::fmt::Debug>(
    what: &str,
    limit: Duration,
    logs: impl Fn() -> String,
    mut f: impl FnMut() -> (bool, T),
) -> T {
    let start = Instant::now();
    loop {
        let (done, v) = f();
        if done {
            return v;
        }
        if start.elapsed() > limit {
            panic!("{what}: still {v:?}\nlogs:\n{}", logs());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// (status, reason) of a condition of the group, if its status describes
/// the current generation.
fn condition(rg: &Value, type_: &str) -> Option<(String, String)> {
    if rg["status"]["observedGeneration"] != rg["metadata"]["generation"] {
        return None;
    }
    let c = rg["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str().unwrap_or("").to_string(),
    ))
}

pub(crate) fn wait_condition(
    c: &TestCluster,
    ns: &str,
    name: &str,
    type_: &str,
    status: &str,
    logs: impl Fn() -> String,
) -> Value {
    eventually(
        &format!("{name}: {type_}={status}"),
        Duration::from_secs(120),
        logs,
        || {
            let rg = get(c, ns, &format!("resourcegroup/{name}")).unwrap_or(Value::Null);
            let done = condition(&rg, type_).is_some_and(|(s, _)| s == status);
            (done, rg)
        },
    )
}

/// (holder, transitions) of the Lease.
fn lease(c: &TestCluster, ns: &str, name: &str) -> (String, i64) {
    let l = get(c, ns, &format!("lease/{name}")).unwrap_or(Value::Null);
    (
        l["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        l["spec"]["leaseTransitions"].as_i64().unwrap_or(0),
    )
}

#[test]
fn two_replicas_one_reconciles_and_the_other_takes_over_when_it_dies() {
    // A cluster of its own: the controller tests run a controller of their
    // own on the shared one, which would reconcile these groups too.
    let own = TestCluster::start();
    let c = &own;
    support::controller::install_resource_group_crd(c);
    let dir = tempfile::tempdir().expect("tempdir");
    let lease_ns = c.create_namespace("lease");
    let replica = |identity: &str| {
        Controller::start(
            c,
            dir.path(),
            &[
                "--lease-namespace",
                &lease_ns,
                "--lease-name",
                "interlock-controller",
                "--identity",
                identity,
            ],
        )
    };
    let a = replica("replica-a");
    let logs = crate::support::controller::logs_in;
    eventually(
        "replica-a holds the lease",
        Duration::from_secs(60),
        || logs(dir.path()),
        || {
            let l = lease(c, &lease_ns, "interlock-controller");
            (l.0 == "replica-a", l)
        },
    );
    let b = replica("replica-b");

    // Only the leader reconciles: the group converges by its writes, and
    // the follower has run no reconcile and written nothing.
    let ns = tenant(c, "leader");
    apply_group(
        c,
        &ns,
        "first",
        json!([config_map("one", json!({"k": "v"}))]),
    );
    wait_condition(c, &ns, "first", "Ready", "True", || logs(dir.path()));
    assert!(a.writes() > 0, "the leader wrote:\n{}", a.log());
    assert_eq!(
        (b.passes(), b.writes()),
        (0, 0),
        "the follower reconciled:\n{}",
        b.log()
    );
    assert_eq!(lease(c, &lease_ns, "interlock-controller").0, "replica-a");
    let first_version =
        get(c, &ns, "configmap/one").expect("member")["metadata"]["resourceVersion"].clone();

    // The leader dies without giving the lease up (SIGKILL): the other
    // replica takes it once it expires and converges a new group.
    drop(a);
    apply_group(
        c,
        &ns,
        "second",
        json!([config_map("two", json!({"k": "v"}))]),
    );
    wait_condition(c, &ns, "second", "Ready", "True", || logs(dir.path()));
    let (holder, transitions) = lease(c, &lease_ns, "interlock-controller");
    assert_eq!(holder, "replica-b");
    assert!(
        transitions >= 1,
        "a takeover is a transition: {transitions}"
    );
    assert!(b.writes() > 0, "the new leader wrote:\n{}", b.log());
    assert!(b.log().contains("leading"), "{}", b.log());
    // The group the old leader converged is not rewritten by the new one.
    assert_eq!(
        get(c, &ns, "configmap/one").expect("member")["metadata"]["resourceVersion"],
        first_version
    );
}

/// Every request kube-apiserver records, at metadata level.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// The requests of the audit log, from byte `from` on, made about objects
/// of namespace `ns` by anything but kubectl (the test's own hand).
fn audited(log: &Path, from: usize, ns: &str) -> Vec<Value> {
    let text = std::fs::read(log).unwrap_or_default();
    String::from_utf8_lossy(&text[from.min(text.len())..])
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && e["objectRef"]["namespace"] == ns)
        .filter(|e| {
            !e["userAgent"]
                .as_str()
                .is_some_and(|a| a.starts_with("kubectl"))
        })
        .collect()
}

fn summary(events: &[Value]) -> String {
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for e in events {
        let key = format!(
            "{} {} {}{}",
            e["verb"].as_str().unwrap_or("?"),
            e["objectRef"]["resource"].as_str().unwrap_or("?"),
            e["responseStatus"]["code"],
            if e["requestURI"].as_str().unwrap_or("").contains("dryRun") {
                " (dry run)"
            } else {
                ""
            }
        );
        *by.entry(key).or_default() += 1;
    }
    format!("{by:#?}")
}

#[test]
fn a_group_that_cannot_be_applied_backs_off_as_kube_apiserver_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("audit-policy.yaml");
    std::fs::write(&policy, AUDIT_POLICY).expect("audit policy");
    let audit = dir.path().join("audit.log");
    let c = TestCluster::start_with(Options {
        apiserver_args: vec![
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", audit.display()),
            "--audit-log-mode=blocking".into(),
        ],
        ..Options::default()
    });
    support::controller::install_resource_group_crd(&c);
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);
    let ns = tenant(&c, "broken");
    let from = std::fs::metadata(&audit)
        .map(|m| m.len() as usize)
        .unwrap_or(0);
    let window = Instant::now();

    // Two ways to fail for good: a Secret beyond the ServiceAccount's
    // rights (403 on the dry run), and a ConfigMap key the API server
    // refuses (422 on the dry run).
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "stringData": {"k": "v"}});
    apply_group(
        &c,
        &ns,
        "forbidden",
        json!([config_map("cfg", json!({"k": "v"})), secret]),
    );
    apply_group(
        &c,
        &ns,
        "invalid",
        json!([config_map("bad", json!({"not a key!": "v"}))]),
    );
    let reason = |name: &str| {
        let rg = wait_condition(&c, &ns, name, "Applied", "False", || ctl.log());
        condition(&rg, "Applied").map(|c| c.1)
    };
    assert_eq!(reason("forbidden").as_deref(), Some("Forbidden"));
    assert_eq!(reason("invalid").as_deref(), Some("ApplyFailed"));

    // A minute from the first apply, with nothing changing.
    std::thread::sleep(Duration::from_secs(60).saturating_sub(window.elapsed()));
    let events = audited(&audit, from, &ns);
    let about = |group: &str, members: &[&str]| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| {
                let name = e["objectRef"]["name"].as_str().unwrap_or("");
                name == group || members.contains(&name)
            })
            .collect()
    };
    let forbidden = about("forbidden", &["cfg", "token"]);
    let invalid = about("invalid", &["bad"]);
    println!(
        "requests in a minute by the controller, per group:\n forbidden {}\n invalid {}\n all {}",
        forbidden.len(),
        invalid.len(),
        summary(&events)
    );
    // A pass costs a handful of requests (reads of the members, a dry
    // run, a status write). A loop retrying even once a second would make
    // hundreds in this minute; backoff and the slow requeue make few.
    for (name, n) in [("forbidden", forbidden.len()), ("invalid", invalid.len())] {
        assert!(n > 0, "{name}: the audit log saw the group's requests");
        assert!(
            n <= 40,
            "{name}: {n} requests in a minute: {}\n{}",
            summary(&events),
            ctl.log()
        );
    }
    // And none of them wrote a member.
    let member_writes: Vec<&Value> = events
        .iter()
        .filter(|e| e["objectRef"]["resource"] != "resourcegroups")
        .filter(|e| !["get", "list", "watch"].contains(&e["verb"].as_str().unwrap_or("")))
        .filter(|e| !e["requestURI"].as_str().unwrap_or("").contains("dryRun"))
        .collect();
    assert!(member_writes.is_empty(), "{member_writes:#?}");
    assert_eq!(
        ctl.counter("interlock_controller_writes_total{verb=\"apply\"}"),
        0
    );
}
