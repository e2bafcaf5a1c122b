//! The continuous audit end to end: `interlock serve --audit` and
//! `interlock controller --audit` as processes, kubectl as the tenant, and
//! the controller as its shipped ServiceAccount (impersonated), bound only
//! to the shipped roles (manifests/base/controller.yaml, audit-rbac.yaml).
//!
//! A cluster of its own: these processes audit every namespace and write
//! their reports, which would race the other modules' audits on the shared
//! one. The tests run one at a time (`SERIAL`), and each process is killed
//! when its test ends.

use crate::audit_cli::deployment;
use crate::audit_live::{
    apply, config_map, eventually, install_crds, kubectl_ok, report, results_become,
};
use crate::support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use support::cluster::TestCluster;
use support::controller::Controller;

static SERIAL: Mutex<()> = Mutex::new(());

/// The ServiceAccount the shipped manifests run the controller as.
const CONTROLLER_SA: &str = "system:serviceaccount:interlock-system:interlock-controller";

fn cluster() -> &'static TestCluster {
    static C: OnceLock<TestCluster> = OnceLock::new();
    C.get_or_init(|| {
        let c = TestCluster::start();
        install_crds(&c);
        c
    })
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The policies every process here runs: the same set, so that two audits
/// of the cluster would write the same reports.
fn policy_args() -> Vec<String> {
    ["pod-references-exist", "unique-ingress-host"]
        .iter()
        .flat_map(|p| {
            [
                "-p".to_string(),
                root()
                    .join("policies")
                    .join(p)
                    .join("policy.yaml")
                    .display()
                    .to_string(),
            ]
        })
        .collect()
}

/// `interlock ARGS` as a child process, its standard error in a log file;
/// killed when dropped.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn start(kubeconfig: &Path, dir: &Path, args: &[String]) -> Process {
        let log = dir.join(format!("{}.log", args[0]));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
        cmd.args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let child = support::cluster::spawn_tied_to_process(cmd).expect("start interlock");
        Process { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `interlock serve --audit` with a certificate of its own, as the admin.
fn serve_with_audit(c: &TestCluster, dir: &Path) -> Process {
    let certs = interlock::certs::generate(&interlock::certs::CertsOptions::new(["127.0.0.1"]))
        .expect("certs");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &certs.cert_pem).expect("cert");
    std::fs::write(&key, &certs.key_pem).expect("key");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut args: Vec<String> = [
        "serve",
        "--tls-cert",
        &cert.display().to_string(),
        "--tls-key",
        &key.display().to_string(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--no-claims",
        "--audit",
    ]
    .map(String::from)
    .to_vec();
    args.extend(policy_args());
    Process::start(c.kubeconfig(), dir, &args)
}

/// The shipped controller: its Namespace, ServiceAccount, roles and
/// bindings (its Deployment too, inert here: no kubelet).
fn install_controller_manifests(c: &TestCluster) {
    support::controller::install_resource_group_crd(c);
    for f in ["namespace.yaml", "controller.yaml"] {
        let path = root().join("manifests/base").join(f).display().to_string();
        kubectl_ok(c, &["apply", "-f", &path]);
    }
}

fn audit_rbac() -> PathBuf {
    root().join("manifests/base/audit-rbac.yaml")
}

fn controller_args() -> Vec<String> {
    let mut args: Vec<String> = vec!["--audit".into()];
    args.extend(policy_args());
    args
}

/// `interlock controller --audit` with [`policy_args`] and `extra`.
fn start_controller(kubeconfig: &Path, dir: &Path, extra: &[&str]) -> Controller {
    let mut args = controller_args();
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Controller::start_as(kubeconfig, dir, &args)
}

/// Controllers started one after another: without the Lease, each would
/// wait for the last one's to expire.
const NO_LEASE: &[&str] = &["--no-leader-election"];

#[test]
fn serve_with_audit_reports_a_violation_made_with_kubectl_and_clears_it_when_fixed() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let c = cluster();
    let _logs = c.logs_on_panic();
    let dir = tempfile::tempdir().expect("dir");
    let serve = serve_with_audit(c, dir.path());
    // Not a namespace any webhook sees: the write is stored as it is.
    let ns = c.create_namespace("e2e-serve");
    apply(c, &ns, &deployment("broken", "absent"));
    let found = eventually("serve's audit reports the Deployment", || {
        report(c, &ns).filter(|r| r["summary"]["fail"] == 1)
    });
    assert_eq!(
        found["results"][0]["resources"][0]["name"],
        "broken",
        "{found:#}\n{}",
        serve.log()
    );
    apply(c, &ns, &config_map("absent"));
    let fixed = results_become(c, &ns, &[]);
    assert_eq!(fixed["summary"]["fail"], 0, "{fixed:#}");
}

#[test]
fn controller_with_audit_as_its_shipped_service_account_reports_and_clears() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let c = cluster();
    let _logs = c.logs_on_panic();
    install_controller_manifests(c);
    kubectl_ok(c, &["apply", "-f", &audit_rbac().display().to_string()]);
    let dir = tempfile::tempdir().expect("dir");
    let ns = c.create_namespace("e2e-controller");
    // Stored before the audit starts, and one made while it runs.
    apply(c, &ns, &deployment("before", "absent"));
    let kubeconfig = support::webhook::kubeconfig_as(c, dir.path(), CONTROLLER_SA);
    let ctl = start_controller(&kubeconfig, dir.path(), &[]);
    results_become(c, &ns, &["pod-references-exist Deployment/before"]);
    apply(c, &ns, &deployment("after", "absent"));
    results_become(
        c,
        &ns,
        &[
            "pod-references-exist Deployment/after",
            "pod-references-exist Deployment/before",
        ],
    );
    apply(c, &ns, &config_map("absent"));
    results_become(c, &ns, &[]);
    assert!(
        ctl.counter("interlock_audit_report_writes_total") >= 3,
        "this process wrote the reports: {}",
        ctl.log()
    );
    assert_eq!(ctl.counter("interlock_audit_report_write_errors_total"), 0);
    assert!(!ctl.log().contains("forbidden"), "{}", ctl.log());
}

/// The shipped audit role without the rules `drop` selects.
fn audit_role_without(drop: impl Fn(&Value) -> bool) -> String {
    let text = std::fs::read_to_string(audit_rbac()).expect("audit-rbac.yaml");
    let role = text.split("\n---\n").next().expect("the ClusterRole first");
    let mut role: Value = yaml_doc(role);
    role["rules"]
        .as_array_mut()
        .expect("rules")
        .retain(|r| !drop(r));
    role.to_string()
}

/// The first document of a YAML text, as JSON.
fn yaml_doc(yaml: &str) -> Value {
    use interlock::manifest::{load_str, Format, LoadOptions, Source};
    let loaded = load_str(Source::Stdin, yaml, Format::Yaml, &LoadOptions::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors.first());
    loaded
        .documents
        .into_iter()
        .next()
        .expect("a document")
        .value
}

fn grants_report_kinds(rule: &Value) -> bool {
    rule["apiGroups"][0] == "wgpolicyk8s.io"
}

fn rule_verbs(text: &str) -> Vec<String> {
    let role = yaml_doc(text.split("\n---\n").next().expect("role"));
    let mut verbs: Vec<String> = role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    verbs.sort();
    verbs.dedup();
    verbs
}

#[test]
fn the_audit_role_is_what_the_audit_needs_and_without_it_the_audit_says_so() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let c = cluster();
    let _logs = c.logs_on_panic();
    // Least: read (list, watch) and write by server-side apply (create,
    // patch); no get, no delete, no wildcard.
    let text = std::fs::read_to_string(audit_rbac()).expect("audit-rbac.yaml");
    assert_eq!(rule_verbs(&text), ["create", "list", "patch", "watch"]);
    assert!(!text.contains('*'), "no wildcard in {text}");

    install_controller_manifests(c);
    let dir = tempfile::tempdir().expect("dir");
    let ns = c.create_namespace("e2e-rbac");
    apply(c, &ns, &deployment("broken", "absent"));
    let kubeconfig = support::webhook::kubeconfig_as(c, dir.path(), CONTROLLER_SA);

    // Without the audit's binding, the controller's own role does not let
    // it list the kinds only the audit reads (PodTemplates,
    // ReplicationControllers): it waits, and says which grant is missing.
    let _ = c.kubectl(&[
        "delete",
        "clusterrolebinding",
        "interlock-audit",
        "--ignore-not-found",
    ]);
    let unbound = start_controller(&kubeconfig, dir.path(), NO_LEASE);
    let waiting = eventually("the audit names the kind it may not list", || {
        let log = unbound.log();
        log.lines()
            .find(|l| l.contains("not allowed to list and watch this kind"))
            .map(String::from)
    });
    assert!(waiting.contains("audit-rbac.yaml"), "{waiting}");
    assert!(
        waiting.contains("PodTemplate") || waiting.contains("ReplicationController"),
        "{waiting}"
    );
    assert_eq!(unbound.counter("interlock_audit_evaluations_total"), 0);
    assert!(
        report(c, &ns).is_none(),
        "nothing evaluated, nothing written"
    );
    drop(unbound);

    // The role without its PolicyReport rule: the audit evaluates, and says
    // it may not store the results.
    kubectl_ok(c, &["apply", "-f", &audit_rbac().display().to_string()]);
    let partial = audit_role_without(grants_report_kinds);
    kubectl_ok_stdin(c, &["apply", "-f", "-"], &partial);
    let unwritten = start_controller(&kubeconfig, dir.path(), NO_LEASE);
    let refused = eventually("the audit says it may not list reports", || {
        let log = unwritten.log();
        log.lines()
            .find(|l| l.contains("cannot list stored reports"))
            .map(String::from)
    });
    assert!(
        refused.contains("grant list, create and patch"),
        "{refused}"
    );
    eventually("the audit evaluated the namespace anyway", || {
        (unwritten.counter("interlock_audit_evaluations_total") > 0).then_some(())
    });
    assert_eq!(unwritten.counter("interlock_audit_report_writes_total"), 0);
    assert!(report(c, &ns).is_none(), "no report without the grant");
    drop(unwritten);

    // The shipped role: the report is written.
    kubectl_ok(c, &["apply", "-f", &audit_rbac().display().to_string()]);
    let _bound = start_controller(&kubeconfig, dir.path(), NO_LEASE);
    results_become(c, &ns, &["pod-references-exist Deployment/broken"]);
}

fn kubectl_ok_stdin(c: &TestCluster, args: &[&str], stdin: &str) {
    let out = c.kubectl_stdin(args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
