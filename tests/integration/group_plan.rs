//! `interlock plan` against a real kube-apiserver and etcd, with a
//! controller applying the groups and kubectl as the tenant: a new group,
//! a changed one, one a policy denies, one the API server's dry run
//! refuses and one in conflict with another group, and the cluster left
//! exactly as it was.

use crate::support;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;
use support::tenant::*;

/// A namespace with ServiceAccount `deployer`, allowed to manage
/// ConfigMaps, Services and Deployments (not Secrets).
fn tenant(c: &TestCluster, prefix: &str) -> String {
    let rules = [
        all_verbs("", &["configmaps", "services"]),
        all_verbs("apps", &["deployments"]),
    ];
    namespace_with_deployer(c, prefix, &rules)
}

fn group(ns: &str, name: &str, resources: Value) -> Value {
    json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"serviceAccountName": "deployer", "resources": resources}})
}

fn config_map(name: &str, mode: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"mode": mode}})
}

/// A Service without a selector: no workload needed for it to be ready.
fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
           "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
}

/// `interlock plan ARGS` against `c`, with the group written to a file.
fn plan(c: &TestCluster, dir: &Path, group: &Value, args: &[&str]) -> Output {
    let file = dir.join("group.json");
    std::fs::write(&file, group.to_string()).expect("group file");
    std::process::Command::new(env!("CARGO_BIN_EXE_interlock"))
        .arg("plan")
        .args(args)
        .arg(&file)
        .env("KUBECONFIG", c.kubeconfig())
        .output()
        .expect("run interlock plan")
}

/// The JSON report of `plan -o json`, and its one group.
fn plan_json(c: &TestCluster, dir: &Path, g: &Value) -> (i32, Value) {
    let out = plan(c, dir, g, &["-o", "json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        report["groups"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    (out.status.code().unwrap_or(-1), report["groups"][0].clone())
}

/// (action, kind, name) of every member of a planned group, sorted.
fn actions(g: &Value) -> Vec<(String, String, String)> {
    let mut out: Vec<_> = g["members"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            (s("action"), s("kind"), s("name"))
        })
        .collect();
    out.sort();
    out
}

fn member<'a>(g: &'a Value, name: &str) -> &'a Value {
    g["members"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["name"] == name))
        .unwrap_or_else(|| panic!("no member {name}: {g}"))
}

fn condition(conditions: &Value, type_: &str) -> (String, String) {
    conditions
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (s("status"), s("reason"))
        })
        .unwrap_or_default()
}

fn get(c: &TestCluster, ns: &str, what: &str) -> Option<Value> {
    let out = c.kubectl(&["get", "-n", ns, what, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl json"))
}

/// The resourceVersion of each object (`None`: absent).
fn versions(c: &TestCluster, ns: &str, what: &[&str]) -> Vec<Option<String>> {
    what.iter()
        .map(|w| {
            get(c, ns, w).and_then(|o| o["metadata"]["resourceVersion"].as_str().map(String::from))
        })
        .collect()
}

fn wait_ready(c: &TestCluster, ctl: &Controller, ns: &str, name: &str) {
    let start = Instant::now();
    loop {
        let rg = get(c, ns, &format!("resourcegroup/{name}")).unwrap_or(Value::Null);
        let current = rg["status"]["observedGeneration"] == rg["metadata"]["generation"];
        if current && condition(&rg["status"]["conditions"], "Ready").0 == "True" {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{name} never Ready: {}\n{}",
            rg["status"],
            ctl.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn plan_shows_what_the_controller_would_do_and_writes_nothing() {
    let c = TestCluster::start();
    let _logs = c.logs_on_panic();
    let dir = tempfile::tempdir().expect("tempdir");
    support::controller::install_resource_group_crd(&c);
    let ctl = Controller::start(&c, dir.path(), &["--no-leader-election"]);
    let ns = tenant(&c, "plan");

    // A new group: every member created, nothing written by the plan.
    let shop = group(
        &ns,
        "shop",
        json!([config_map("settings", "live"), service("web")]),
    );
    let (code, g) = plan_json(&c, dir.path(), &shop);
    assert_eq!(code, 0, "{g}");
    assert_eq!(g["new"], true);
    assert_eq!(g["refused"], false);
    let created =
        |kind: &str, name: &str| ("create".to_string(), kind.to_string(), name.to_string());
    assert_eq!(
        actions(&g),
        [created("ConfigMap", "settings"), created("Service", "web")]
    );
    assert_eq!(condition(&g["conditions"], "Valid").0, "True", "{g}");
    assert_eq!(condition(&g["conditions"], "Applied").0, "True", "{g}");
    assert_eq!(
        versions(
            &c,
            &ns,
            &["resourcegroup/shop", "configmap/settings", "service/web"]
        ),
        [None, None, None],
        "a plan writes nothing"
    );

    // Applied by the controller; then a change: one field changed, one
    // member dropped, one added.
    ok(
        &c.kubectl_stdin(&["apply", "-f", "-"], &shop.to_string()),
        "apply the group",
    );
    wait_ready(&c, &ctl, &ns, "shop");
    let watched = [
        "resourcegroup/shop",
        "configmap/settings",
        "service/web",
        "configmap/extra",
    ];
    let before = versions(&c, &ns, &watched);
    let changed = group(
        &ns,
        "shop",
        json!([config_map("settings", "test"), config_map("extra", "x")]),
    );
    let (code, g) = plan_json(&c, dir.path(), &changed);
    assert_eq!(code, 0, "{g}");
    assert_eq!(g["new"], false);
    assert_eq!(
        actions(&g),
        [
            created("ConfigMap", "extra"),
            ("prune".into(), "Service".into(), "web".into()),
            ("update".into(), "ConfigMap".into(), "settings".into()),
        ]
    );
    let changes = &member(&g, "settings")["changes"];
    assert_eq!(
        changes,
        &json!([{"path": "data.mode", "before": "live", "after": "test"}]),
        "{g}"
    );
    let human = plan(&c, dir.path(), &changed, &[]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert_eq!(human.status.code(), Some(0), "{text}");
    assert!(
        text.contains(r#"data.mode: "live" -> "test""#) && text.contains("prune"),
        "{text}"
    );
    // An unchanged group: nothing but "unchanged".
    let (code, g) = plan_json(&c, dir.path(), &shop);
    assert_eq!(code, 0, "{g}");
    assert!(actions(&g).iter().all(|(a, _, _)| a == "unchanged"), "{g}");

    // A policy denies a member: exit 1 with the finding, nothing written.
    let latest = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app"},
        "spec": {"selector": {"matchLabels": {"app": "app"}},
                 "template": {"metadata": {"labels": {"app": "app"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx:latest",
                                  "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}});
    let (code, g) = plan_json(&c, dir.path(), &group(&ns, "bad", json!([latest])));
    assert_eq!(code, 1, "{g}");
    assert_eq!(g["refused"], true);
    let denied = g["findings"].as_array().into_iter().flatten().any(|f| {
        f["policy"] == "disallow-latest-tag"
            && f["action"] == "Deny"
            && f["object"]["name"] == "app"
    });
    assert!(denied, "{g}");
    assert_eq!(
        condition(&g["conditions"], "Valid"),
        ("False".into(), "PolicyViolation".into())
    );

    // Beyond the ServiceAccount's rights: the dry run is refused.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"},
        "stringData": {"k": "v"}});
    let (code, g) = plan_json(&c, dir.path(), &group(&ns, "rights", json!([secret])));
    assert_eq!(code, 1, "{g}");
    assert_eq!(
        condition(&g["conditions"], "Applied"),
        ("False".into(), "Forbidden".into()),
        "{g}"
    );
    let why = member(&g, "token")["message"].as_str().unwrap_or("");
    assert!(why.starts_with("refused by the dry run"), "{g}");

    // A member owned by another group: a conflict, never adopted.
    let (code, g) = plan_json(
        &c,
        dir.path(),
        &group(&ns, "other", json!([config_map("settings", "mine")])),
    );
    assert_eq!(code, 1, "{g}");
    assert_eq!(
        actions(&g),
        [("conflict".into(), "ConfigMap".into(), "settings".into())]
    );
    let why = member(&g, "settings")["message"].as_str().unwrap_or("");
    assert!(why.contains("belongs to ResourceGroup shop"), "{why}");

    // After all of these plans, the cluster is as it was.
    assert_eq!(versions(&c, &ns, &watched), before, "a plan writes nothing");
    for absent in [
        "resourcegroup/bad",
        "resourcegroup/rights",
        "resourcegroup/other",
        "deployment/app",
        "secret/token",
    ] {
        assert!(get(&c, &ns, absent).is_none(), "{absent} was written");
    }
}

#[test]
fn plan_names_the_file_line_and_field_of_a_bad_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: interlock.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: shop}\nspec:\n  serviceAccountName: deployer\n  prune: maybe\n",
    )
    .expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_interlock"))
        .arg("plan")
        .arg(&file)
        // No cluster is needed to refuse the input.
        .env("KUBECONFIG", dir.path().join("none"))
        .output()
        .expect("run interlock plan");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:6: ResourceGroup shop: spec.prune:",
            file.display()
        )),
        "{err}"
    );
}
