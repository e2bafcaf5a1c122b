//! `interlock serve` against a real kube-apiserver: the webhook registered by
//! URL on 127.0.0.1, kubectl as the tenant.

mod support;

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use support::cluster::TestCluster;

const LABEL: &str = "interlock-webhook-test";

struct Webhook {
    port: u16,
    _dir: tempfile::TempDir,
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

/// Starts `interlock serve` once for this test binary and registers it.
fn webhook() -> &'static Webhook {
    static HOOK: OnceLock<Webhook> = OnceLock::new();
    HOOK.get_or_init(|| {
        let cluster = TestCluster::shared();
        let dir = tempfile::tempdir().unwrap();
        let certs = interlock::certs::generate(&interlock::certs::CertsOptions::new(["127.0.0.1"]))
            .unwrap();
        std::fs::write(dir.path().join("tls.crt"), &certs.cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), &certs.key_pem).unwrap();
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
            root()
                .join("policies/unique-ingress-host/policy.yaml")
                .display()
                .to_string(),
            "-p".into(),
            dir.path().join("mutate.yaml").display().to_string(),
        ];
        let kubeconfig = cluster.kubeconfig().to_path_buf();
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
        register(cluster, port, &certs.ca_cert_pem);
        let hook = Webhook { port, _dir: dir };
        wait_until_answering(cluster, &hook);
        hook
    })
}

fn register(cluster: &TestCluster, port: u16, ca: &str) {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let hook = |path: &str, resources: serde_json::Value| {
        json!({
            "name": format!("{path}.interlock.dev"),
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/{path}"), "caBundle": ca},
            "rules": [{"apiGroups": ["", "networking.k8s.io"], "apiVersions": ["v1"],
                       "operations": ["CREATE", "UPDATE"], "resources": resources}],
            "namespaceSelector": {"matchLabels": {LABEL: "true"}},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
        })
    };
    let configs = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "interlock-test"}, "webhooks": [hook("validate", json!(["ingresses", "configmaps"]))]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "interlock-test"}, "webhooks": [hook("mutate", json!(["configmaps"]))]},
    ]});
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &configs.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn namespace(cluster: &TestCluster, prefix: &str) -> String {
    let ns = cluster.create_namespace(prefix);
    let out = cluster.kubectl(&["label", "namespace", &ns, &format!("{LABEL}=true")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ns
}

/// Polls with probe ConfigMaps until the mutation shows: the webhook is
/// registered, ready and reachable.
fn wait_until_answering(cluster: &TestCluster, hook: &Webhook) {
    let ns = namespace(cluster, "probe");
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

fn ingress(ns: &str, name: &str, host: &str) -> serde_json::Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}})
}

fn apply(cluster: &TestCluster, obj: &serde_json::Value, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["apply", "-f", "-"];
    args.extend_from_slice(extra);
    cluster.kubectl_stdin(&args, &obj.to_string())
}

#[test]
fn a_duplicate_host_is_refused_with_our_message_and_no_other_tenant_names() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    webhook();
    let a = namespace(cluster, "tenant-a");
    let b = namespace(cluster, "tenant-b");
    let first = apply(cluster, &ingress(&a, "shop", "shop.e2e.example"), &[]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let second = apply(cluster, &ingress(&b, "copycat", "shop.e2e.example"), &[]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "the duplicate host was admitted");
    assert!(err.contains("unique-ingress-host"), "{err}");
    assert!(err.contains("shop.e2e.example"), "{err}");
    assert!(
        !err.contains(&a),
        "the message leaks the other tenant's namespace: {err}"
    );
    // The owner can still update its own Ingress.
    let mut update = ingress(&a, "shop", "shop.e2e.example");
    update["metadata"]["labels"] = json!({"tier": "front"});
    let out = apply(cluster, &update, &[]);
    assert!(
        out.status.success(),
        "an UPDATE was blocked by its own old version: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A distinct host passes.
    let out = apply(cluster, &ingress(&b, "own", "blog.e2e.example"), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn server_dry_run_is_evaluated_and_leaves_nothing_behind() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    webhook();
    let ns = namespace(cluster, "dry-run");
    let out = apply(
        cluster,
        &ingress(&ns, "trial", "dry.e2e.example"),
        &["--dry-run=server"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let get = cluster.kubectl(&["-n", &ns, "get", "ingress", "trial"]);
    assert!(!get.status.success(), "dry run stored the object");
    // Nothing was recorded either: the host is still free for a real create.
    let out = apply(cluster, &ingress(&ns, "real", "dry.e2e.example"), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_mutation_is_visible_in_the_stored_object() {
    let cluster = TestCluster::shared();
    webhook();
    let ns = namespace(cluster, "mutate");
    let out = cluster.kubectl(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "settings",
        "--from-literal=a=b",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cluster.kubectl(&[
        "-n",
        &ns,
        "get",
        "configmap",
        "settings",
        "-o",
        "jsonpath={.metadata.labels.interlock\\.dev/checked}",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "true");
}

#[test]
fn fifty_parallel_creates_of_one_host_admit_exactly_one() {
    let cluster = TestCluster::shared();
    webhook();
    let ns = namespace(cluster, "race");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let admitted = rt.block_on(async {
        let api: Api<Ingress> = Api::namespaced(cluster.client(), &ns);
        let creates = (0..50).map(|i| {
            let api = api.clone();
            let obj: Ingress =
                serde_json::from_value(ingress(&ns, &format!("racer-{i}"), "race.e2e.example"))
                    .unwrap();
            async move { api.create(&PostParams::default(), &obj).await }
        });
        futures::future::join_all(creates).await
    });
    let ok = admitted.iter().filter(|r| r.is_ok()).count();
    let refused_by_us = admitted
        .iter()
        .filter(|r| matches!(r, Err(e) if e.to_string().contains("unique-ingress-host")))
        .count();
    assert_eq!(ok, 1, "admitted {ok} of 50 Ingresses claiming one host");
    assert_eq!(
        refused_by_us, 49,
        "every other create is refused by the policy"
    );
}
