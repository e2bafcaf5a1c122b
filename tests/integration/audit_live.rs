//! The continuous audit (`serve --audit`, `controller --audit`) against the
//! real control plane, with kubectl as the tenant: the audit runs in
//! process over the same cluster state `serve` builds (policies, watched
//! inventory), so its write counters can be read directly.
//!
//! The tests run one at a time (`SERIAL`): each starts an audit of its own
//! after creating its objects (objects stored before any policy), and every
//! audit writes the reports of every namespace of the shared cluster.

use crate::audit_cli::deployment;
use crate::support;

use interlock::audit::live::{LiveAudit, LiveOptions};
use interlock::cluster::reload::{self, Sources, Supervisor};
use interlock::cluster::{ClusterOptions, Companion};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;

static SERIAL: Mutex<()> = Mutex::new(());

/// One runtime for every audit, on threads that outlive each test.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

fn policy(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("policies")
        .join(name)
        .join("policy.yaml")
}

/// A continuous audit over its own cluster state; stopped on drop.
struct Audit {
    audit: LiveAudit,
    task: tokio::task::JoinHandle<()>,
    supervisor: Option<Supervisor>,
}

impl Audit {
    fn start(cluster: &TestCluster, full_interval: Duration) -> Audit {
        Audit::start_with(cluster, full_interval, false)
    }

    /// `cluster_vaps`: `--audit-cluster-vaps`.
    fn start_with(cluster: &TestCluster, full_interval: Duration, cluster_vaps: bool) -> Audit {
        let sources = Sources {
            policies: vec![
                policy("pod-references-exist"),
                policy("unique-ingress-host"),
            ],
            ..Sources::default()
        };
        let (state, kinds) =
            reload::initial(&sources, ClusterOptions::default()).expect("policies load");
        let state = Arc::new(state);
        let audit = LiveAudit::new(LiveOptions {
            full_interval,
            tick: Duration::from_millis(200),
            write_reports: true,
            report_format: Default::default(),
            cluster_vaps,
        });
        let _rt = runtime().enter();
        let client = cluster.client();
        let supervisor = Supervisor::start(state.clone(), Some(client.clone()), sources, kinds);
        let task = audit.start(state, client);
        Audit {
            audit,
            task,
            supervisor: Some(supervisor),
        }
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(s) = self.supervisor.take() {
            runtime().block_on(s.shutdown());
        }
    }
}

/// `interlock_audit_violations` of pod-references-exist in `ns`, as
/// /metrics would show it; `None` without such a series.
fn violations(audit: &Audit, ns: &str) -> Option<i64> {
    let mut registry = prometheus_client::registry::Registry::default();
    audit
        .audit
        .register_metrics(registry.sub_registry_with_prefix("interlock"));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    let series = format!("namespace=\"{ns}\"");
    text.lines()
        .find(|l| {
            l.starts_with("interlock_audit_violations{")
                && l.contains("policy=\"pod-references-exist\"")
                && l.contains(&series)
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

pub(crate) fn install_crds(cluster: &TestCluster) {
    let crds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests/policyreport/crds.yaml");
    let crds = crds.display().to_string();
    kubectl_ok(cluster, &["apply", "--server-side", "-f", &crds]);
    kubectl_ok(
        cluster,
        &[
            "wait",
            "--for=condition=Established",
            "crd/policyreports.wgpolicyk8s.io",
            "crd/clusterpolicyreports.wgpolicyk8s.io",
        ],
    );
}

pub(crate) fn kubectl_ok(cluster: &TestCluster, args: &[&str]) -> String {
    let out = cluster.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn apply(cluster: &TestCluster, ns: &str, yaml: &str) {
    let out = cluster.kubectl_stdin(&["-n", ns, "apply", "-f", "-"], yaml);
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The namespace's report as kubectl shows it, if there is one.
pub(crate) fn report(cluster: &TestCluster, ns: &str) -> Option<Value> {
    let out = cluster.kubectl(&["-n", ns, "get", "polr", "interlock", "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("report JSON"))
}

/// `policy Kind/name` of each result of a report.
pub(crate) fn results(report: &Value) -> Vec<String> {
    let mut v: Vec<String> = report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let o = &r["resources"][0];
            format!(
                "{} {}/{}",
                r["policy"].as_str().unwrap_or(""),
                o["kind"].as_str().unwrap_or(""),
                o["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    v.sort();
    v
}

/// Waits (a deadline for progress, not a timing assertion) until `f` holds.
pub(crate) fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub(crate) fn results_become(cluster: &TestCluster, ns: &str, want: &[&str]) -> Value {
    eventually(&format!("{ns}'s report holds {want:?}"), || {
        report(cluster, ns).filter(|r| results(r) == want)
    })
}

pub(crate) fn config_map(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{k: v}}\n")
}

fn ingress(name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}}}\nspec:\n  rules:\n    - host: {host}\n"
    )
}

#[test]
fn objects_stored_before_the_audit_are_reported_and_a_deleted_config_map_reports_its_deployment() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    install_crds(cluster);
    let ns = cluster.create_namespace("auditd-refs");
    // Stored before any policy: a Deployment whose ConfigMap is missing,
    // and one whose ConfigMap exists.
    apply(cluster, &ns, &deployment("broken", "absent"));
    apply(cluster, &ns, &config_map("settings"));
    apply(cluster, &ns, &deployment("web", "settings"));
    let audit = Audit::start(cluster, Duration::from_secs(3600));
    results_become(cluster, &ns, &["pod-references-exist Deployment/broken"]);

    kubectl_ok(cluster, &["-n", &ns, "delete", "configmap", "settings"]);
    results_become(
        cluster,
        &ns,
        &[
            "pod-references-exist Deployment/broken",
            "pod-references-exist Deployment/web",
        ],
    );

    // The gauges of the process's /metrics say the same.
    let gauge = || violations(&audit, &ns);
    eventually("the gauge counts both Deployments", || {
        (gauge() == Some(2)).then_some(())
    });

    // Fixing both clears the results; the report stays, empty.
    apply(cluster, &ns, &config_map("settings"));
    apply(cluster, &ns, &config_map("absent"));
    let fixed = results_become(cluster, &ns, &[]);
    assert_eq!(fixed["summary"]["fail"], 0, "{fixed:#}");
    eventually("the gauge's series goes away", || {
        gauge().is_none().then_some(())
    });
    assert!(audit.audit.metrics.evaluations() > 0);
}

#[test]
fn an_unchanged_report_is_not_written_again() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    install_crds(cluster);
    let ns = cluster.create_namespace("auditd-quiet");
    apply(cluster, &ns, &deployment("broken", "absent"));
    // A full pass every second: each one evaluates everything again.
    let audit = Audit::start(cluster, Duration::from_secs(1));
    let first = results_become(cluster, &ns, &["pod-references-exist Deployment/broken"]);
    let metrics = &audit.audit.metrics;
    let writes = metrics.writes_in(&ns);
    assert_eq!(writes, 1, "one write made the report");
    let passes = metrics.full_passes();
    eventually("three more full passes", || {
        (metrics.full_passes() >= passes + 3).then_some(())
    });
    assert_eq!(
        metrics.writes_in(&ns),
        writes,
        "no write for the same results"
    );
    let now = report(cluster, &ns).expect("report");
    assert_eq!(
        now["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
        "the stored report was not touched"
    );
    drop(audit);

    // A new process over the same cluster: the stored report is what it
    // last wrote, so a restart writes nothing either.
    let again = Audit::start(cluster, Duration::from_secs(1));
    let metrics = &again.audit.metrics;
    eventually("two full passes after a restart", || {
        (metrics.full_passes() >= 2).then_some(())
    });
    assert_eq!(metrics.writes_in(&ns), 0, "a restart rewrites nothing");

    // A change is written once.
    apply(cluster, &ns, &deployment("second", "absent"));
    results_become(
        cluster,
        &ns,
        &[
            "pod-references-exist Deployment/broken",
            "pod-references-exist Deployment/second",
        ],
    );
    assert_eq!(metrics.writes_in(&ns), 1);
}

#[test]
fn a_tenants_report_never_names_another_tenants_objects() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    install_crds(cluster);
    let a = cluster.create_namespace("auditd-tenant-a");
    let b = cluster.create_namespace("auditd-tenant-b");
    // A host that names neither namespace (the message quotes it).
    let host = format!("shop-{}.example", std::process::id());
    apply(cluster, &a, &ingress("secret-shop", &host));
    apply(cluster, &b, &ingress("copy", &host));
    let _audit = Audit::start(cluster, Duration::from_secs(3600));
    let ra = results_become(cluster, &a, &["unique-ingress-host Ingress/secret-shop"]);
    let rb = results_become(cluster, &b, &["unique-ingress-host Ingress/copy"]);
    let text_b = rb.to_string();
    assert!(!text_b.contains("secret-shop"), "{rb:#}");
    assert!(!text_b.contains(&a), "{rb:#}");
    assert!(
        text_b.contains("Ingress in another namespace"),
        "the conflict is still explained: {rb:#}"
    );
    let text_a = ra.to_string();
    assert!(!text_a.contains(&b), "{ra:#}");
    assert!(!text_a.contains("\"copy\""), "{ra:#}");

    // The namespace goes, and with it the conflict and its report.
    kubectl_ok(cluster, &["delete", "namespace", &b, "--wait=false"]);
    results_become(cluster, &a, &[]);
}

/// kube-apiserver's own ValidatingAdmissionPolicy, with a ConfigMap param
/// naming the data key every ConfigMap of `ns` must have, bound to `ns`
/// only (the cluster is shared).
fn cluster_vap(name: &str, ns: &str) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": name},
         "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "operations": ["CREATE", "UPDATE"]}]},
            "validations": [{"expression": "has(object.data) && params.data.key in object.data",
                "message": "a ConfigMap here needs the key its params name"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": name},
         "spec": {"policyName": name, "validationActions": ["Deny"],
            "paramRef": {"name": "vap-params", "namespace": ns, "parameterNotFoundAction": "Deny"},
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}}
    ]})
    .to_string()
}

#[test]
fn a_cluster_vap_created_after_an_object_never_judges_it_but_the_audit_reports_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // A cluster of its own: when the last policy with a ConfigMap paramKind
    // goes, kube-apiserver 1.36 stops finding ConfigMap params for policies
    // created after it ("no params found for policy binding"), which broke
    // the CEL fuzz differential's bindings on the shared cluster.
    let own = TestCluster::start_with(support::cluster::Options {
        controller_manager: false,
        ..support::cluster::Options::default()
    });
    let cluster = &own;
    let _logs = cluster.logs_on_panic();
    install_crds(cluster);
    let ns = cluster.create_namespace("auditd-vaps");
    let name = format!("needs-owner-{ns}");
    // Stored before the policy exists; the params say the key is `owner`
    // (and have it: the params are ConfigMaps of the namespace too).
    apply(cluster, &ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vap-params}\ndata: {key: owner, owner: platform}\n");
    apply(cluster, &ns, &config_map("settings"));
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &cluster_vap(&name, &ns));
    assert!(
        out.status.success(),
        "the VAP: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let audit = Audit::start_with(cluster, Duration::from_secs(3600), true);

    // kube-apiserver enforces it on writes...
    eventually("kube-apiserver enforces the new VAP", || {
        let out = cluster.kubectl_stdin(
            &["-n", &ns, "apply", "--dry-run=server", "-f", "-"],
            &config_map("another"),
        );
        String::from_utf8_lossy(&out.stderr)
            .contains("a ConfigMap here needs the key its params name")
            .then_some(())
    });
    // ...but never judged the stored object, which stays as it was.
    kubectl_ok(cluster, &["-n", &ns, "get", "configmap", "settings"]);
    let finding = format!("{name} ConfigMap/settings");
    results_become(cluster, &ns, &[&finding]);

    // Fixed (the update is judged by kube-apiserver and passes): cleared.
    kubectl_ok(
        cluster,
        &[
            "-n",
            &ns,
            "patch",
            "configmap",
            "settings",
            "--type=merge",
            "-p",
            r#"{"data":{"owner":"shop"}}"#,
        ],
    );
    results_become(cluster, &ns, &[]);
    assert!(audit.audit.metrics.evaluations() > 0);
    for kind in [
        "validatingadmissionpolicybinding",
        "validatingadmissionpolicy",
    ] {
        kubectl_ok(cluster, &["delete", kind, &name]);
    }
}
