//! A half-installed cluster, against the real control plane: `serve` and
//! `controller` stay unready while what they need is missing, name it in
//! one log line (again only when what is missing changes), and become
//! ready once it is there. Each test has a cluster of its own: they create
//! namespaces, CRDs and roles that others must not see.
//!
//! And the controller's leader election across an API server outage
//! longer than its lease: it stops reconciling, campaigns again when the
//! API server is back, and converges a new group without a restart.

use crate::support;

use base64::Engine as _;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::controller::Controller;
use support::tenant::*;

/// The log line of a process held unready by what is missing.
const UNREADY: &str = "the cluster lacks what this process needs";

/// Polls `f` until it holds, for at most `limit` (a generous bound).
fn eventually(what: &str, limit: Duration, log: impl Fn() -> String, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < limit,
            "{what}: not after {limit:?}\nlog:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The log lines that say the process is held unready.
fn unready_lines(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(UNREADY)).collect()
}

/// `interlock serve` as a child process, killed on drop.
struct Serve {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    fn start(kubeconfig: &Path, args: &[&str]) -> Serve {
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = interlock::certs::generate(&interlock::certs::CertsOptions::new(["127.0.0.1"]))
            .expect("certificates");
        for (file, pem) in [
            ("tls.crt", &certs.cert_pem),
            ("tls.key", &certs.key_pem),
            ("ca.crt", &certs.ca_cert_pem),
        ] {
            std::fs::write(dir.path().join(file), pem).expect("write certificate");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let path = |f: &str| dir.path().join(f).display().to_string();
        let policy = root().join("policies/unique-ingress-host/policy.yaml");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
        cmd.args([
            "serve",
            "--tls-cert",
            &path("tls.crt"),
            "--tls-key",
            &path("tls.key"),
        ])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("-p")
        .arg(policy)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info")
        // A local run: the namespace defaults as outside a cluster.
        .env_remove("POD_NAMESPACE")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("serve.log")).expect("log"));
        let child = support::cluster::spawn_tied_to_process(cmd).expect("start interlock serve");
        Serve { child, port, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }

    /// `/readyz`'s status code (0: no answer).
    fn readyz(&self) -> u16 {
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "5",
            ])
            .arg("--cacert")
            .arg(self.dir.path().join("ca.crt"))
            .arg(format!("https://127.0.0.1:{}/readyz", self.port))
            .output()
            .expect("run curl");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Waits for the one line naming `part`, checks the process unready then
/// and still after a few re-checks, with no second line for the same
/// thing missing.
fn held_unready(what: &str, log: impl Fn() -> String, ready: impl Fn() -> bool, part: &str) {
    eventually(
        &format!("{what} logs what is missing"),
        Duration::from_secs(90),
        &log,
        || unready_lines(&log()).iter().any(|l| l.contains(part)),
    );
    assert!(!ready(), "{what} is ready without {part}:\n{}", log());
    // Several re-checks (every 2 s) find the same: still one line.
    std::thread::sleep(Duration::from_secs(7));
    assert!(!ready(), "{what} became ready without {part}:\n{}", log());
    let log = log();
    assert_eq!(
        unready_lines(&log).len(),
        1,
        "{what}: one line, not one per retry:\n{log}"
    );
}

#[test]
fn serve_without_its_namespace_stays_unready_until_it_is_created() {
    let c = TestCluster::start();
    let ns = "interlock-claims-home";
    let hook = Serve::start(c.kubeconfig(), &["--claims-namespace", ns]);
    held_unready(
        "serve",
        || hook.log(),
        || hook.readyz() == 200,
        &format!("namespace {ns} does not exist (kubectl create namespace {ns}"),
    );
    ok(&c.kubectl(&["create", "namespace", ns]), "create namespace");
    eventually(
        "serve ready",
        Duration::from_secs(90),
        || hook.log(),
        || hook.readyz() == 200,
    );
    assert!(
        hook.log().contains("prerequisites present"),
        "{}",
        hook.log()
    );
}

/// `--cluster-policies` on a cluster without the InterlockPolicy CRD: the
/// flag says the objects are wanted, so serve is unready and names the CRD
/// to install in one line, then is ready once it is installed. (Without
/// the flag nothing of the kind is read: every other serve test runs so.)
#[test]
fn serve_with_cluster_policies_stays_unready_until_the_crd_is_installed() {
    let c = TestCluster::start();
    let hook = Serve::start(c.kubeconfig(), &["--no-claims", "--cluster-policies"]);
    held_unready(
        "serve",
        || hook.log(),
        || hook.readyz() == 200,
        "InterlockPolicy (interlock.dev/v1alpha1) is not served (kubectl apply -f manifests/base/crd-interlockpolicy.yaml",
    );
    let crd = root().join("manifests/base/crd-interlockpolicy.yaml");
    ok(
        &c.kubectl(&["apply", "-f", crd.to_str().expect("UTF-8 path")]),
        "install the CRD",
    );
    eventually(
        "serve ready",
        Duration::from_secs(120),
        || hook.log(),
        || hook.readyz() == 200,
    );
}

#[test]
fn controller_without_its_namespace_and_crd_names_each_until_both_exist() {
    let c = TestCluster::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = "interlock-lease-home";
    let ctl = Controller::spawn_as(
        c.kubeconfig(),
        dir.path(),
        &["--lease-namespace", ns, "--identity", "only"],
    );
    let crd_missing = "ResourceGroup (interlock.dev/v1alpha1) is not served (kubectl apply -f manifests/base/crd-resourcegroup.yaml";
    held_unready(
        "controller",
        || ctl.log(),
        || ctl.ready(),
        &format!("namespace {ns} does not exist"),
    );
    let first = ctl.log();
    assert!(
        unready_lines(&first)[0].contains(crd_missing),
        "the same line names the CRD:\n{first}"
    );
    assert!(
        !first.contains("lease not readable"),
        "no campaign before the prerequisites:\n{first}"
    );

    // What is missing changes: a second line, naming only the CRD.
    ok(&c.kubectl(&["create", "namespace", ns]), "create namespace");
    eventually(
        "a second line",
        Duration::from_secs(90),
        || ctl.log(),
        || unready_lines(&ctl.log()).len() == 2,
    );
    let log = ctl.log();
    let second = unready_lines(&log)[1];
    assert!(second.contains(crd_missing), "{second}");
    assert!(!second.contains("does not exist"), "{second}");
    assert!(!ctl.ready(), "ready without the CRD:\n{log}");

    support::controller::install_resource_group_crd(&c);
    eventually(
        "controller ready",
        Duration::from_secs(90),
        || ctl.log(),
        || ctl.ready(),
    );
    eventually(
        "leading",
        Duration::from_secs(90),
        || ctl.log(),
        || {
            let out = c.kubectl(&[
                "-n",
                ns,
                "get",
                "lease",
                "interlock-controller",
                "-o",
                "json",
            ]);
            out.status.success()
                && serde_json::from_slice::<serde_json::Value>(&out.stdout)
                    .is_ok_and(|l| l["spec"]["holderIdentity"] == "only")
        },
    );
}

/// A kubeconfig in `dir` that authenticates with `token` only.
fn token_kubeconfig(c: &TestCluster, dir: &Path, token: &str) -> PathBuf {
    let ca = base64::engine::general_purpose::STANDARD.encode(c.serving_ca_pem());
    let kc = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": c.url(), "certificate-authority-data": ca}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c"
    });
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kc.to_string()).expect("write kubeconfig");
    path
}

#[test]
fn serve_lacking_one_verb_names_the_permission_until_it_is_granted() {
    let c = TestCluster::start();
    let ns = "interlock-claims-rbac";
    // The webhook's ServiceAccount with the shipped claims role less
    // `delete`, and what the policy reads.
    let role = |verbs: &[&str]| {
        json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "hook", "namespace": ns}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "hook-reader"},
             "rules": [{"apiGroups": ["", "networking.k8s.io"], "resources": ["namespaces", "ingresses"],
                        "verbs": ["get", "list", "watch"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "hook-reader"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "hook-reader"},
             "subjects": [{"kind": "ServiceAccount", "name": "hook", "namespace": ns}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "hook-claims", "namespace": ns},
             "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": verbs}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "hook-claims", "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "hook-claims"},
             "subjects": [{"kind": "ServiceAccount", "name": "hook", "namespace": ns}]}]})
        .to_string()
    };
    ok(
        &c.kubectl_stdin(
            &["apply", "-f", "-"],
            &role(&["create", "get", "list", "update"]),
        ),
        "RBAC without delete",
    );
    let token = ok(
        &c.kubectl(&["-n", ns, "create", "token", "hook", "--duration", "1h"]),
        "kubectl create token",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = token_kubeconfig(&c, dir.path(), token.trim());
    let hook = Serve::start(&kubeconfig, &["--claims-namespace", ns]);
    held_unready(
        "serve",
        || hook.log(),
        || hook.readyz() == 200,
        &format!("not allowed to delete leases.coordination.k8s.io in namespace {ns}"),
    );
    let log = hook.log();
    let line = unready_lines(&log)[0];
    for granted in ["create", "get", "list", "update"] {
        assert!(
            !line.contains(&format!("not allowed to {granted} ")),
            "{granted} is granted: {line}"
        );
    }

    ok(
        &c.kubectl_stdin(
            &["apply", "-f", "-"],
            &role(&["create", "get", "list", "update", "delete"]),
        ),
        "grant delete",
    );
    eventually(
        "serve ready",
        Duration::from_secs(90),
        || hook.log(),
        || hook.readyz() == 200,
    );
}

#[test]
fn a_leader_rides_out_an_api_server_outage_longer_than_its_lease() {
    let c = TestCluster::start();
    support::controller::install_resource_group_crd(&c);
    let lease_ns = c.create_namespace("lease");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ctl = Controller::start(
        &c,
        dir.path(),
        &[
            "--lease-namespace",
            &lease_ns,
            "--lease-duration",
            "4s",
            "--identity",
            "solo",
        ],
    );
    let ns = super::controller_replicas::tenant(&c, "outage");
    let cm = |name: &str| super::controller_replicas::config_map(name, json!({"k": "v"}));
    super::controller_replicas::apply_group(&c, &ns, "before", json!([cm("one")]));
    super::controller_replicas::wait_condition(&c, &ns, "before", "Ready", "True", || ctl.log());

    // Down for three lease durations: the term ends while it is down.
    c.restart_apiserver(Duration::from_secs(12));
    eventually(
        "the leader stopped reconciling",
        Duration::from_secs(60),
        || ctl.log(),
        || ctl.log().contains("stopped reconciling; campaigning again"),
    );

    super::controller_replicas::apply_group(&c, &ns, "after", json!([cm("two")]));
    super::controller_replicas::wait_condition(&c, &ns, "after", "Ready", "True", || ctl.log());
    assert!(ctl.running(), "the controller exited:\n{}", ctl.log());
    let out = c.kubectl(&["-n", &ns, "get", "configmap", "two", "-o", "name"]);
    assert_eq!(ok(&out, "member").trim(), "configmap/two");
}

#[test]
fn outside_a_cluster_without_interlock_system_serve_uses_the_context_namespace() {
    let c = TestCluster::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::copy(c.kubeconfig(), &kubeconfig).expect("copy kubeconfig");
    let kc = kubeconfig.display().to_string();
    ok(
        &c.kubectl(&[
            "config",
            "set-context",
            "--current",
            "--namespace=team-home",
            "--kubeconfig",
            &kc,
        ]),
        "set the context's namespace",
    );
    ok(
        &c.kubectl(&["create", "namespace", "team-home"]),
        "create namespace",
    );
    // No --claims-namespace and no POD_NAMESPACE: the default applies.
    let hook = Serve::start(&kubeconfig, &[]);
    eventually(
        "serve ready",
        Duration::from_secs(90),
        || hook.log(),
        || hook.readyz() == 200,
    );
    let log = hook.log();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("using the kubeconfig context's namespace"))
        .collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains("team-home") && said[0].contains("interlock-system does not exist"),
        "{}",
        said[0]
    );
    assert!(unready_lines(&log).is_empty(), "{log}");
}
