//! `interlock controller` against a real kube-apiserver, etcd and
//! kube-controller-manager (garbage collector on), with kubectl as the
//! tenant. One controller process serves the steps of each test, in
//! sequence, each in its own namespace.

use crate::support;

use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;
use support::tenant::*;

/// The shared cluster with the CRD installed.
fn cluster() -> &'static TestCluster {
    static READY: OnceLock<()> = OnceLock::new();
    let c = TestCluster::shared();
    READY.get_or_init(|| support::controller::install_resource_group_crd(c));
    c
}

fn log_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
}

/// Every controller log of this run.
fn logs() -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(log_dir()).into_iter().flatten().flatten() {
        out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
    }
    out
}

/// Tests share one controller and run one at a time: each holds the guard
/// throughout, since one of them restarts the controller and counts writes.
fn controller() -> std::sync::MutexGuard<'static, Option<Controller>> {
    static C: Mutex<Option<Controller>> = Mutex::new(None);
    let mut g = C.lock().unwrap_or_else(|p| p.into_inner());
    if g.is_none() {
        *g = Some(Controller::start(
            cluster(),
            log_dir(),
            &["--no-leader-election"],
        ));
    }
    g
}

/// A namespace with ServiceAccount `deployer`, allowed to manage
/// ConfigMaps, Services, ServiceAccounts and Deployments (not Secrets).
fn tenant(prefix: &str) -> String {
    let rules = [
        all_verbs("", &["configmaps", "services", "serviceaccounts"]),
        all_verbs("apps", &["deployments"]),
    ];
    namespace_with_deployer(cluster(), prefix, &rules)
}

fn group(ns: &str, name: &str, resources: Value) -> Value {
    json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"serviceAccountName": "deployer", "resources": resources}})
}

fn config_map(name: &str, mode: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"mode": mode}})
}

/// A Service without a selector (endpoints managed by hand): the group rule
/// that a selector must select a workload of the group does not apply, and
/// no workload is needed (this cluster runs no Deployment controller, so a
/// Deployment would never be Ready).
fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
           "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
}

fn apply(v: &Value) {
    ok(
        &cluster().kubectl_stdin(&["apply", "-f", "-"], &v.to_string()),
        "kubectl apply",
    );
}

fn get(ns: &str, what: &str) -> Option<Value> {
    let out = cluster().kubectl(&["get", "-n", ns, what, "-o", "json", "--show-managed-fields"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl json"))
}

/// Polls until `f` holds (60 s), else panics with the last value and the log.
fn eventually<T: std::fmt::Debug>(what: &str, mut f: impl FnMut() -> (bool, T)) -> T {
    let start = Instant::now();
    loop {
        let (done, v) = f();
        if done {
            return v;
        }
        if start.elapsed() > Duration::from_secs(60) {
            panic!("{what}: still {v:?}\ncontroller logs:\n{}", logs());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn condition(rg: &Value, type_: &str) -> (String, String) {
    rg["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

/// Waits until the group's status describes its current generation and
/// `type_` has `status`; returns the group.
fn wait_condition(ns: &str, name: &str, type_: &str, status: &str) -> Value {
    eventually(&format!("{name}: {type_}={status}"), || {
        let rg = get(ns, &format!("resourcegroup/{name}")).unwrap_or(Value::Null);
        let current = rg["status"]["observedGeneration"] == rg["metadata"]["generation"];
        (current && condition(&rg, type_).0 == status, rg)
    })
}

#[test]
fn a_valid_group_converges_reverts_edits_prunes_and_is_deleted_with_its_members() {
    let _controller = controller();
    let ns = tenant("rg-valid");
    apply(&group(
        &ns,
        "shop",
        json!([config_map("settings", "live"), service("web"),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web"}}]),
    ));
    let rg = wait_condition(&ns, "shop", "Ready", "True");
    assert_eq!(condition(&rg, "Valid").0, "True");
    assert_eq!(condition(&rg, "Applied").0, "True");
    let uid = rg["metadata"]["uid"].as_str().expect("uid").to_string();
    for what in ["configmap/settings", "service/web", "serviceaccount/web"] {
        let m = get(&ns, what).unwrap_or_else(|| panic!("{what} was not created"));
        let owner = &m["metadata"]["ownerReferences"][0];
        assert_eq!(owner["uid"], uid.as_str(), "{what}: ownerReference by UID");
        assert_eq!(owner["controller"], true);
        assert!(m["metadata"]["labels"]["applyset.kubernetes.io/part-of"]
            .as_str()
            .is_some_and(|l| l.starts_with("applyset-")));
        let managers: Vec<&str> = m["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["manager"].as_str())
            .collect();
        assert!(managers.contains(&"interlock"), "{what}: {managers:?}");
    }
    assert_eq!(rg["status"]["members"].as_array().map(Vec::len), Some(3));
    let id = rg["metadata"]["labels"]["applyset.kubernetes.io/id"]
        .as_str()
        .unwrap_or("");
    assert!(
        id.starts_with("applyset-"),
        "the group is an ApplySet parent: {}",
        rg["metadata"]
    );
    assert_eq!(
        get(&ns, "configmap/settings").expect("member")["metadata"]["labels"]
            ["applyset.kubernetes.io/part-of"],
        id
    );

    // A hand edit is reverted; a hand deletion comes back.
    ok(
        &cluster().kubectl(&[
            "patch",
            "-n",
            &ns,
            "configmap/settings",
            "--type=merge",
            "-p",
            r#"{"data":{"mode":"hacked"}}"#,
        ]),
        "edit by hand",
    );
    eventually("the edit is reverted", || {
        let m = get(&ns, "configmap/settings").unwrap_or(Value::Null);
        (m["data"]["mode"] == "live", m["data"].clone())
    });
    ok(
        &cluster().kubectl(&["delete", "-n", &ns, "service/web"]),
        "delete by hand",
    );
    eventually("the Service comes back", || {
        let s = get(&ns, "service/web");
        (s.is_some(), s.is_some())
    });

    // A member dropped from spec is pruned.
    apply(&group(
        &ns,
        "shop",
        json!([config_map("settings", "live"), service("web")]),
    ));
    eventually("the ServiceAccount is pruned", || {
        let gone = get(&ns, "serviceaccount/web").is_none();
        (gone, gone)
    });

    // Deleting the group deletes its members, then the group.
    ok(
        &cluster().kubectl(&["delete", "-n", &ns, "resourcegroup/shop", "--wait=false"]),
        "delete the group",
    );
    eventually("members and group are gone", || {
        let left: Vec<&str> = ["configmap/settings", "service/web", "resourcegroup/shop"]
            .into_iter()
            .filter(|w| get(&ns, w).is_some())
            .collect();
        (left.is_empty(), format!("{left:?}"))
    });
}

#[test]
fn an_invalid_group_writes_nothing_and_says_why() {
    let guard = controller();
    let ctl = guard.as_ref().expect("controller");
    let ns = tenant("rg-invalid");
    let latest = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:latest",
                                  "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}});
    apply(&group(
        &ns,
        "bad",
        json!([config_map("settings", "x"), latest]),
    ));
    let rg = wait_condition(&ns, "bad", "Valid", "False");
    assert_eq!(condition(&rg, "Valid").1, "PolicyViolation");
    let findings = rg["status"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        findings
            .iter()
            .any(|f| f["policy"] == "disallow-latest-tag" && f["object"]["name"] == "web"),
        "{findings:?}"
    );
    assert!(
        get(&ns, "configmap/settings").is_none(),
        "nothing of an invalid group is written"
    );

    // A group rule: a Service whose selector matches no workload of the group.
    let typo = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "typo"},
        "spec": {"selector": {"app": "wbe"}, "ports": [{"port": 80}]}});
    apply(&group(&ns, "typo", json!([typo])));
    let rg = wait_condition(&ns, "typo", "Valid", "False");
    assert!(
        rg["status"]["findings"]
            .to_string()
            .contains("group-service-selects-member"),
        "{}",
        rg["status"]
    );
    assert!(get(&ns, "service/typo").is_none());

    // Out of scope: another namespace, a cluster-scoped kind.
    let mut other = config_map("elsewhere", "x");
    other["metadata"]["namespace"] = json!("kube-system");
    apply(&group(
        &ns,
        "scope",
        json!([other, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "grabbed"}}]),
    ));
    let rg = wait_condition(&ns, "scope", "Valid", "False");
    assert_eq!(condition(&rg, "Valid").1, "MemberOutOfScope");
    assert!(get("kube-system", "configmap/elsewhere").is_none());

    // Beyond the ServiceAccount's rights (no Secrets): refused by the API
    // server on the dry run, so the ConfigMap listed with it is not written.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "stringData": {"k": "v"}});
    apply(&group(
        &ns,
        "rights",
        json!([config_map("cfg", "x"), secret]),
    ));
    let rg = wait_condition(&ns, "rights", "Applied", "False");
    assert_eq!(
        condition(&rg, "Applied").1,
        "Forbidden",
        "{:?}",
        rg["status"]
    );
    assert!(get(&ns, "secret/token").is_none());
    assert!(get(&ns, "configmap/cfg").is_none(), "no half-applied group");

    // A group that cannot be applied is not retried in a hot loop: once its
    // status says why, it waits for a change (or the slow resync).
    std::thread::sleep(Duration::from_secs(2));
    let (passes, writes) = (ctl.passes(), ctl.writes());
    std::thread::sleep(Duration::from_secs(10));
    let (more_passes, more_writes) = (ctl.passes() - passes, ctl.writes() - writes);
    assert!(
        more_passes <= 2,
        "{more_passes} reconciles in 10 s of nothing changing"
    );
    assert_eq!(more_writes, 0, "no write while nothing changes");

    // No apiVersion: the CRD's schema (embedded resources) refuses it at
    // once, naming the member.
    let junk = group(
        &ns,
        "junk",
        json!([{"kind": "ConfigMap", "metadata": {"name": "a"}}]),
    );
    let out = cluster().kubectl_stdin(&["apply", "-f", "-"], &junk.to_string());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spec.resources[0].apiVersion"), "{err}");

    // A kind the cluster does not serve: named in status, nothing written.
    apply(&group(
        &ns,
        "widget",
        json!([config_map("w1", "x"),
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}]),
    ));
    let rg = wait_condition(&ns, "widget", "Valid", "False");
    assert_eq!(condition(&rg, "Valid").1, "MemberOutOfScope");
    assert!(
        rg["status"].to_string().contains("Widget"),
        "{}",
        rg["status"]
    );
    assert!(get(&ns, "configmap/w1").is_none());
}

#[test]
fn a_restarted_controller_converges_with_zero_writes_and_orphans_on_request() {
    let mut guard = controller();
    let ns = tenant("rg-restart");
    let mut g = group(&ns, "kept", json!([config_map("a", "1"), service("b")]));
    g["spec"]["deletionPolicy"] = json!("Orphan");
    apply(&g);
    wait_condition(&ns, "kept", "Ready", "True");
    let versions = || -> Vec<Value> {
        ["configmap/a", "service/b", "resourcegroup/kept"]
            .iter()
            .map(|w| {
                get(&ns, w)
                    .map(|o| o["metadata"]["resourceVersion"].clone())
                    .unwrap_or(Value::Null)
            })
            .collect()
    };
    // Let the passes that follow the first writes settle.
    std::thread::sleep(Duration::from_secs(3));
    let before = versions();

    // Restart: every group is listed and reconciled again.
    *guard = None;
    *guard = Some(Controller::start(
        cluster(),
        log_dir(),
        &["--no-leader-election"],
    ));
    std::thread::sleep(Duration::from_secs(8));
    let c = guard.as_ref().expect("controller");
    assert!(c.log().contains("reconciling"), "{}", c.log());
    assert_eq!(
        c.writes(),
        0,
        "a converged cluster gets no write after a restart:\n{}",
        c.log()
    );
    assert_eq!(versions(), before, "nothing was rewritten");

    // Orphan: members stay, released from the group.
    ok(
        &cluster().kubectl(&["delete", "-n", &ns, "resourcegroup/kept", "--wait=false"]),
        "delete",
    );
    eventually("the group is gone", || {
        let gone = get(&ns, "resourcegroup/kept").is_none();
        (gone, gone)
    });
    let cm = get(&ns, "configmap/a").expect("an orphaned member stays");
    assert!(
        cm["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{cm}"
    );
    assert!(
        cm["metadata"]["labels"]["applyset.kubernetes.io/part-of"].is_null(),
        "{cm}"
    );
}
