//! Runs `interlock serve` against a test cluster and registers it as a
//! validating and mutating webhook by URL on 127.0.0.1.

use super::cluster::TestCluster;
use serde_json::json;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const LABEL: &str = "interlock-webhook-test";

pub struct Webhook {
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Webhook {
    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const MUTATION_POLICY: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata:
  name: label-configmaps
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["CREATE"]}
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: >
          has(object.metadata.labels) ?
            [JSONPatch{op: "add", path: "/metadata/labels/interlock.dev~1checked", value: "true"}] :
            [JSONPatch{op: "add", path: "/metadata/labels", value: {"interlock.dev/checked": "true"}}]
"#;

/// Which writes a webhook is registered for: its configurations' name, the
/// label of the namespaces it sees, and its rules' groups and resources.
pub struct Scope {
    pub config: &'static str,
    pub label: &'static str,
    pub groups: &'static [&'static str],
    pub resources: &'static [&'static str],
}

/// The tests' usual webhook: Ingresses, ConfigMaps and Pods.
pub const TEST_SCOPE: Scope = Scope {
    config: "interlock-test",
    label: LABEL,
    groups: &["", "networking.k8s.io"],
    resources: &["ingresses", "configmaps", "pods"],
};

/// Starts `interlock serve` (with `extra` arguments) for `cluster` and
/// registers it; returns once it answers.
pub fn start(cluster: &TestCluster, extra: &[&str]) -> Webhook {
    let policy = root()
        .join("policies/unique-ingress-host/policy.yaml")
        .display()
        .to_string();
    let mut args = vec!["-p", policy.as_str()];
    args.extend_from_slice(extra);
    start_scoped(cluster, &TEST_SCOPE, &args)
}

/// [`start`] for another scope, with only the given policy arguments (and
/// the mutation that tells when it answers).
pub fn start_scoped(cluster: &TestCluster, scope: &Scope, extra: &[&str]) -> Webhook {
    start_scoped_as(cluster, cluster.kubeconfig(), scope, extra)
}

/// [`start_scoped`] with the credentials of `kubeconfig` (a
/// ServiceAccount's, to prove the shipped roles suffice).
pub fn start_scoped_as(
    cluster: &TestCluster,
    kubeconfig: &std::path::Path,
    scope: &Scope,
    extra: &[&str],
) -> Webhook {
    {
        let dir = tempfile::tempdir().unwrap();
        let certs = interlock::certs::generate(&interlock::certs::CertsOptions::new(["127.0.0.1"]))
            .unwrap();
        std::fs::write(dir.path().join("tls.crt"), &certs.cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), &certs.key_pem).unwrap();
        // For configurations made by `interlock webhook-config --ca-bundle`, and
        // for tests that register more configurations for the same server.
        std::fs::write(dir.path().join("ca.crt"), &certs.ca_cert_pem).unwrap();
        std::fs::write(dir.path().join("mutate.yaml"), MUTATION_POLICY).unwrap();
        let port = free_port();
        let args: Vec<String> = vec![
            "serve".into(),
            "--tls-cert".into(),
            dir.path().join("tls.crt").display().to_string(),
            "--tls-key".into(),
            dir.path().join("tls.key").display().to_string(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "-p".into(),
            dir.path().join("mutate.yaml").display().to_string(),
        ];
        // Claims of unique keys need their namespace; a test that does not
        // name one runs a single replica and needs none.
        let claims_named = ["--claims-namespace", "--no-claims"]
            .iter()
            .any(|f| extra.contains(f));
        let claims_off = (!claims_named).then_some("--no-claims");
        let args: Vec<String> = args
            .into_iter()
            .chain(extra.iter().copied().chain(claims_off).map(String::from))
            .collect();
        let kubeconfig = kubeconfig.to_path_buf();
        let log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
        // The child is started from a thread that lives as long as the
        // process, so PR_SET_PDEATHSIG stops it when the tests end.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
            cmd.args(&args)
                .env("KUBECONFIG", kubeconfig)
                .env("RUST_LOG", "info")
                .stdout(Stdio::null())
                .stderr(log);
            // SAFETY: prctl is async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let child = cmd.spawn();
            tx.send(child.map(|_| ()).map_err(|e| e.to_string()))
                .unwrap();
            loop {
                std::thread::park();
            }
        });
        rx.recv().unwrap().expect("start interlock serve");
        register_scoped(cluster, port, &certs.ca_cert_pem, scope);
        let hook = Webhook { port, dir };
        wait_until_answering_in(cluster, &hook, scope.label);
        hook
    }
}

/// A copy of the admin's kubeconfig that impersonates `user`, in `dir`.
pub fn kubeconfig_as(cluster: &TestCluster, dir: &std::path::Path, user: &str) -> PathBuf {
    let admin = std::fs::read_to_string(cluster.kubeconfig()).expect("kubeconfig");
    let key_line = admin
        .lines()
        .find(|l| l.trim_start().starts_with("client-key-data:"))
        .expect("client-key-data");
    let indent = &key_line[..key_line.len() - key_line.trim_start().len()];
    let acting = admin.replace(key_line, &format!("{key_line}\n{indent}as: {user}"));
    let path = dir.join("kubeconfig-as");
    std::fs::write(&path, acting).expect("kubeconfig");
    path
}

pub fn register(cluster: &TestCluster, port: u16, ca: &str) {
    register_scoped(cluster, port, ca, &TEST_SCOPE)
}

pub fn register_scoped(cluster: &TestCluster, port: u16, ca: &str, scope: &Scope) {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let hook = |path: &str, resources: serde_json::Value| {
        json!({
            "name": format!("{path}.interlock.dev"),
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/{path}"), "caBundle": ca},
            "rules": [{"apiGroups": scope.groups, "apiVersions": ["*"],
                       "operations": ["CREATE", "UPDATE"], "resources": resources}],
            "namespaceSelector": {"matchLabels": {scope.label: "true"}},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
        })
    };
    let configs = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": scope.config}, "webhooks": [hook("validate", json!(scope.resources))]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": scope.config}, "webhooks": [hook("mutate", json!(["configmaps"]))]},
    ]});
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &configs.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn namespace(cluster: &TestCluster, prefix: &str) -> String {
    namespace_labelled(cluster, prefix, LABEL)
}

/// A new namespace that the webhook of `label`'s scope sees.
pub fn namespace_labelled(cluster: &TestCluster, prefix: &str, label: &str) -> String {
    let ns = cluster.create_namespace(prefix);
    let out = cluster.kubectl(&["label", "namespace", &ns, &format!("{label}=true")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ns
}

/// Polls with probe ConfigMaps until the mutation shows: the webhook is
/// registered, ready and reachable.
pub fn wait_until_answering(cluster: &TestCluster, hook: &Webhook) {
    wait_until_answering_in(cluster, hook, LABEL)
}

fn wait_until_answering_in(cluster: &TestCluster, hook: &Webhook, label: &str) {
    let ns = namespace_labelled(cluster, "probe", label);
    let deadline = Instant::now() + Duration::from_secs(120);
    for i in 0.. {
        let name = format!("probe-{i}");
        let out = cluster.kubectl(&["-n", &ns, "create", "configmap", &name, "-o", "json"]);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if v.pointer("/metadata/labels/interlock.dev~1checked") == Some(&json!("true")) {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the webhook on port {} never answered; last kubectl stderr: {}",
            hook.port,
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub fn ingress(ns: &str, name: &str, host: &str) -> serde_json::Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}})
}

pub fn apply(
    cluster: &TestCluster,
    obj: &serde_json::Value,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec!["apply", "-f", "-"];
    args.extend_from_slice(extra);
    cluster.kubectl_stdin(&args, &obj.to_string())
}

/// Applies the CRD committed at `file` (relative to the repository) and
/// waits until `crd` (its name) is established.
pub fn install_crd(cluster: &TestCluster, file: &str, crd: &str) {
    let path = root().join(file);
    for args in [
        vec!["apply", "-f", path.to_str().expect("a UTF-8 path")],
        vec![
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{crd}"),
        ],
    ] {
        let out = cluster.kubectl(&args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
