//! `interlock audit` against the real control plane: the binary run once
//! per question with the cluster's admin kubeconfig, each test in
//! namespaces of its own (`-n`), since other tests share the cluster.
//!
//! The audit ends by itself, so it is run with `output()` from the test
//! thread: unlike `serve` or `controller`, it needs no long-lived spawning
//! thread for PR_SET_PDEATHSIG.

use crate::support::cluster::TestCluster;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs `interlock audit -o json ARGS`; returns the exit status and the
/// JSON report.
fn audit(cluster: &TestCluster, args: &[&str]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_interlock"))
        .arg("audit")
        .args(["-o", "json"])
        .args(args)
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("run interlock audit");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "audit output is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn policy(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("policies")
        .join(name)
        .join("policy.yaml")
        .display()
        .to_string()
}

fn apply(cluster: &TestCluster, ns: &str, yaml: &str) {
    let out = cluster.kubectl_stdin(&["-n", ns, "apply", "-f", "-"], yaml);
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kubectl_ok(cluster: &TestCluster, args: &[&str]) {
    let out = cluster.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `(policy, action, "Kind ns/name")` of each result.
fn results(report: &Value) -> Vec<(String, String, String)> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let o = &r["object"];
            (
                r["policy"].as_str().unwrap_or("").to_string(),
                r["action"].as_str().unwrap_or("").to_string(),
                format!(
                    "{} {}/{}",
                    o["kind"].as_str().unwrap_or(""),
                    o["namespace"].as_str().unwrap_or(""),
                    o["name"].as_str().unwrap_or("")
                ),
            )
        })
        .collect()
}

/// A Deployment that mounts `config_map` (also used by audit_live).
pub(crate) fn deployment(name: &str, config_map: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
        - {{name: c, image: "registry.example/app:1.0"}}
      volumes:
        - {{name: v, configMap: {{name: {config_map}}}}}
"#
    )
}

#[test]
fn objects_stored_before_any_policy_are_reported_with_what_they_conflict_with() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("audit-hosts");
    // No webhook, no policy: both Ingresses are stored.
    let host = format!("{ns}.example");
    for name in ["first", "second"] {
        apply(
            cluster,
            &ns,
            &format!(
                "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}}}\nspec:\n  rules:\n    - host: {host}\n"
            ),
        );
    }
    let (code, report) = audit(cluster, &["-p", &policy("unique-ingress-host"), "-n", &ns]);
    assert_eq!(code, 1, "a Deny result: {report:#}");
    let mut found = results(&report);
    found.sort();
    assert_eq!(
        found,
        vec![
            (
                "unique-ingress-host".into(),
                "Deny".into(),
                format!("Ingress {ns}/first")
            ),
            (
                "unique-ingress-host".into(),
                "Deny".into(),
                format!("Ingress {ns}/second")
            ),
        ],
        "{report:#}"
    );
    let first = report["results"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["object"]["name"] == "first"))
        .expect("first reported");
    assert_eq!(first["source"]["file"], "cluster");
    assert_eq!(first["related"][0]["object"]["name"], "second", "{first:#}");
    assert_eq!(report["summary"]["objects"], 2, "{report:#}");
}

#[test]
fn a_deployment_is_reported_while_its_config_map_is_missing_and_only_in_its_namespace() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("audit-refs");
    let other = cluster.create_namespace("audit-refs-other");
    let refs = policy("pod-references-exist");
    apply(
        cluster,
        &ns,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n",
    );
    apply(cluster, &ns, &deployment("web", "settings"));
    // Another tenant's broken Deployment.
    apply(cluster, &other, &deployment("theirs", "absent"));

    let (code, report) = audit(cluster, &["-p", &refs, "-n", &ns]);
    assert_eq!(code, 0, "everything referenced exists: {report:#}");
    assert_eq!(results(&report), vec![]);
    assert_eq!(report["summary"]["objects"], 1, "{report:#}");

    kubectl_ok(cluster, &["-n", &ns, "delete", "configmap", "settings"]);
    let (code, report) = audit(cluster, &["-p", &refs, "-n", &ns]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        results(&report),
        vec![(
            "pod-references-exist".into(),
            // Warn at admission, Deny in an audit.
            "Deny".into(),
            format!("Deployment {ns}/web")
        )],
        "only this namespace's objects: {report:#}"
    );
    assert!(
        report["results"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("settings")),
        "{report:#}"
    );

    // Without a filter, the other tenant's Deployment is there too.
    let (_, everything) = audit(cluster, &["-p", &refs]);
    let all = results(&everything);
    assert!(
        all.iter()
            .any(|r| r.2 == format!("Deployment {other}/theirs")),
        "{all:?}"
    );

    apply(
        cluster,
        &ns,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n",
    );
    let (code, report) = audit(cluster, &["-p", &refs, "-n", &ns]);
    assert_eq!(code, 0, "fixed: {report:#}");
    assert_eq!(results(&report), vec![]);
}

#[test]
fn a_cluster_that_cannot_be_reached_is_exit_2_with_an_input_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(["audit", "-o", "json"])
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("run interlock audit");
    assert_eq!(out.status.code(), Some(2));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["errors"][0]["file"], "cluster", "{report:#}");
}

/// The notice that counts report writes, from a JSON report.
fn report_writes(report: &Value) -> String {
    report["notices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["message"].as_str())
        .find(|m| m.starts_with("PolicyReports:") || m.starts_with("Reports:"))
        .unwrap_or_else(|| panic!("no report notice: {report:#}"))
        .to_string()
}

fn install_crds(cluster: &TestCluster, file: &str, crds: &[&str]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    kubectl_ok(
        cluster,
        &["apply", "--server-side", "-f", &path.display().to_string()],
    );
    for crd in crds {
        kubectl_ok(
            cluster,
            &[
                "wait",
                "--for",
                "condition=established",
                "--timeout=60s",
                crd,
            ],
        );
    }
}

/// OpenReports: written when the cluster serves it (and PolicyReports
/// too), by flag otherwise; a kind the cluster lacks is an error naming the
/// file that installs it. On a cluster of its own: the shared one serves
/// only PolicyReports, which the other audit tests rely on.
#[test]
fn openreports_are_written_when_served_or_chosen() {
    let cluster = TestCluster::start();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("audit-openreports");
    let refs = policy("pod-references-exist");
    apply(&cluster, &ns, &deployment("web", "settings"));
    let args = |format: &'static str| {
        vec![
            "-p".to_string(),
            refs.clone(),
            "-n".into(),
            ns.clone(),
            "--write-reports".into(),
            "--report-format".into(),
            format.into(),
        ]
    };
    let run = |format: &'static str| {
        let a = args(format);
        audit(&cluster, &a.iter().map(String::as_str).collect::<Vec<_>>())
    };

    let (code, report) = run("openreports");
    assert_eq!(code, 2, "no OpenReports CRDs yet: {report:#}");
    let error = report["errors"].to_string();
    assert!(
        error.contains("manifests/openreports/crds.yaml"),
        "{report:#}"
    );

    install_crds(
        &cluster,
        "manifests/policyreport/crds.yaml",
        &["crd/policyreports.wgpolicyk8s.io"],
    );
    let (_, report) = run("auto");
    assert_eq!(
        report_writes(&report),
        "PolicyReports: 1 written, 0 unchanged"
    );

    install_crds(
        &cluster,
        "manifests/openreports/crds.yaml",
        &[
            "crd/reports.openreports.io",
            "crd/clusterreports.openreports.io",
        ],
    );
    let (code, report) = run("auto");
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report_writes(&report), "Reports: 1 written, 0 unchanged");
    let stored = stored(&cluster, &ns, "reports.openreports.io");
    assert_eq!(stored["summary"]["fail"], 1, "{stored:#}");
    assert_eq!(stored["results"][0]["policy"], "pod-references-exist");
    assert_eq!(stored["results"][0]["resources"][0]["name"], "web");

    let (_, report) = run("policyreport");
    assert_eq!(
        report_writes(&report),
        "PolicyReports: 0 written, 1 unchanged",
        "chosen by flag: the PolicyReport written before is still current"
    );
}

fn stored_report(cluster: &TestCluster, ns: &str) -> Value {
    stored(cluster, ns, "policyreport")
}

fn stored(cluster: &TestCluster, ns: &str, resource: &str) -> Value {
    let out = cluster.kubectl(&["-n", ns, "get", resource, "interlock", "-o", "json"]);
    assert!(
        out.status.success(),
        "kubectl get {resource}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("PolicyReport JSON")
}

#[test]
fn reports_follow_the_results_and_are_not_rewritten_when_nothing_changed() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    install_crds(
        cluster,
        "manifests/policyreport/crds.yaml",
        &["crd/policyreports.wgpolicyk8s.io"],
    );
    let ns = cluster.create_namespace("audit-polr");
    let refs = policy("pod-references-exist");
    apply(cluster, &ns, &deployment("web", "settings"));
    let args = ["-p", refs.as_str(), "-n", ns.as_str(), "--write-reports"];

    let (code, report) = audit(cluster, &args);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        report_writes(&report),
        "PolicyReports: 1 written, 0 unchanged"
    );
    let stored = stored_report(cluster, &ns);
    assert_eq!(stored["summary"]["fail"], 1, "{stored:#}");
    assert_eq!(stored["results"][0]["policy"], "pod-references-exist");
    assert_eq!(stored["results"][0]["resources"][0]["name"], "web");
    let version = stored["metadata"]["resourceVersion"].clone();

    let (_, again) = audit(cluster, &args);
    assert_eq!(
        report_writes(&again),
        "PolicyReports: 0 written, 1 unchanged"
    );
    assert_eq!(
        stored_report(cluster, &ns)["metadata"]["resourceVersion"],
        version,
        "an unchanged report is not written"
    );

    apply(
        cluster,
        &ns,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
    );
    let (code, fixed) = audit(cluster, &args);
    assert_eq!(code, 0, "{fixed:#}");
    assert_eq!(
        report_writes(&fixed),
        "PolicyReports: 1 written, 0 unchanged"
    );
    let stored = stored_report(cluster, &ns);
    assert_eq!(stored["results"], serde_json::json!([]), "{stored:#}");
    assert_eq!(stored["summary"]["fail"], 0);
}
