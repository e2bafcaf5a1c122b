//! Reliability of the long-running processes: the policies loaded and the
//! reloads refused show on `/metrics` of `serve` and of the controller.

use crate::support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// A child process, killed on drop, with its log.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// Starts `interlock ARGS`, killed if the test process dies.
    fn start(args: Vec<String>, env: Vec<(String, PathBuf)>, log: PathBuf) -> Process {
        let file = std::fs::File::create(&log).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
        cmd.args(args)
            .envs(env)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file);
        let child = support::cluster::spawn_tied_to_process(cmd).expect("start interlock");
        Process { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `GET path` over HTTP/1.0, through TLS trusting `ca` when given.
fn get(port: u16, path: &str, ca: Option<&str>) -> Option<String> {
    exchange(
        port,
        &format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n"),
        ca,
    )
}

/// `POST path` of a JSON `body` over HTTP/1.0 and TLS.
fn post(port: u16, path: &str, body: &str, ca: &str) -> Option<String> {
    let head = format!(
        "POST {path} HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    exchange(port, &(head + body), Some(ca))
}

/// Sends `request`; the body of the answer.
fn exchange(port: u16, request: &str, ca: Option<&str>) -> Option<String> {
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut out = Vec::new();
    match ca {
        None => {
            let mut s = tcp;
            s.write_all(request.as_bytes()).ok()?;
            s.read_to_end(&mut out).ok()?;
        }
        Some(ca) => {
            use rustls::pki_types::pem::PemObject;
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes()).ok()?)
                .ok()?;
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .ok()?
            .with_root_certificates(roots)
            .with_no_client_auth();
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").ok()?;
            let conn = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
            let mut s = rustls::StreamOwned::new(conn, tcp);
            s.write_all(request.as_bytes()).ok()?;
            // The server may close without close_notify: keep what came.
            let _ = s.read_to_end(&mut out);
        }
    }
    let text = String::from_utf8(out).ok()?;
    text.starts_with("HTTP/1.")
        .then(|| text.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
}

/// The value of the sample named exactly `series`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Scrapes until `series` is `want` (the reload loop polls every 3 s).
fn wait_for(
    scrape: impl Fn() -> Option<String>,
    series: &str,
    want: f64,
    log: impl Fn() -> String,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = None;
    while Instant::now() < deadline {
        if let Some(text) = scrape() {
            last = sample(&text, series);
            if last == Some(want) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{series} stayed {last:?}, never {want}; log:\n{}", log());
}

const BROKEN: &str = "apiVersion: interlock.dev/v1alpha1\nkind: InterlockPolicy\nmetadata: {name: broken}\nspec:\n  validations:\n    - expression: 'object.('\n";

fn copy_policy(dir: &Path, name: &str) {
    let from = root().join(format!("policies/{name}/policy.yaml"));
    std::fs::copy(from, dir.join(format!("{name}.yaml"))).expect("copy policy");
}

/// Edits `dir` as an operator would and follows the two metrics: a set that
/// does not compile counts a failure and keeps the old count; a good one
/// moves the gauge.
fn reloads_show_on(dir: &Path, scrape: impl Fn() -> Option<String>, log: impl Fn() -> String) {
    wait_for(&scrape, "interlock_policies_loaded", 1.0, &log);
    wait_for(&scrape, "interlock_policy_reload_failures_total", 0.0, &log);
    std::fs::write(dir.join("broken.yaml"), BROKEN).expect("write");
    wait_for(&scrape, "interlock_policy_reload_failures_total", 1.0, &log);
    let text = scrape().expect("scrape");
    assert_eq!(
        sample(&text, "interlock_policies_loaded"),
        Some(1.0),
        "{text}"
    );
    std::fs::remove_file(dir.join("broken.yaml")).expect("rm");
    copy_policy(dir, "unique-ingress-host");
    wait_for(&scrape, "interlock_policies_loaded", 2.0, &log);
    let text = scrape().expect("scrape");
    assert_eq!(
        sample(&text, "interlock_policy_reload_failures_total"),
        Some(1.0),
        "{text}"
    );
}

#[test]
fn serve_metrics_show_policies_loaded_and_reloads_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).expect("mkdir");
    copy_policy(&policies, "disallow-latest-tag");
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n",
    )
    .expect("write");
    let certs = interlock::certs::generate(&interlock::certs::CertsOptions::new(["127.0.0.1"]))
        .expect("certs");
    std::fs::write(dir.path().join("tls.crt"), &certs.cert_pem).expect("write");
    std::fs::write(dir.path().join("tls.key"), &certs.key_pem).expect("write");
    let port = free_port();
    let p = |s: &str| dir.path().join(s).display().to_string();
    let args = vec![
        "serve".into(),
        "--tls-cert".into(),
        p("tls.crt"),
        "--tls-key".into(),
        p("tls.key"),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "-p".into(),
        p("policies"),
        "--inventory".into(),
        p("inventory.yaml"),
    ];
    let serve = Process::start(args, vec![], dir.path().join("serve.log"));
    let ca = certs.ca_cert_pem.clone();
    reloads_show_on(
        &policies,
        || get(port, "/metrics", Some(&ca)),
        || serve.log(),
    );
}

#[test]
fn controller_metrics_show_policies_loaded_and_reloads_refused() {
    let cluster = support::cluster::TestCluster::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    copy_policy(dir.path(), "disallow-latest-tag");
    let admin = free_port();
    let args = vec![
        "controller".into(),
        "--no-leader-election".into(),
        "--admin-addr".into(),
        format!("127.0.0.1:{admin}"),
        "-p".into(),
        dir.path().display().to_string(),
    ];
    let env = vec![("KUBECONFIG".to_string(), cluster.kubeconfig().to_path_buf())];
    let log = tempfile::NamedTempFile::new()
        .expect("log")
        .into_temp_path();
    let controller = Process::start(args, env, log.to_path_buf());
    reloads_show_on(
        dir.path(),
        || get(admin, "/metrics", None),
        || controller.log(),
    );
}

// ------------------------------------------------- claims across replicas

use support::webhook::{namespace_labelled, start_scoped, Scope};

/// Two replicas behind one Service, as the API server would reach them:
/// each configuration sends the Ingresses of half of the namespaces (its
/// label) to one replica, so concurrent creates race across replicas.
const REPLICA_A: Scope = Scope {
    config: "reliab-replica-a",
    label: "reliab-replica-a",
    groups: &["", "networking.k8s.io"],
    resources: &["ingresses", "configmaps"],
};
const REPLICA_B: Scope = Scope {
    config: "reliab-replica-b",
    label: "reliab-replica-b",
    groups: &["", "networking.k8s.io"],
    resources: &["ingresses", "configmaps"],
};

/// A started replica: its port and CA.
struct Replica {
    port: u16,
    ca: String,
}

/// Starts both replicas with `extra` arguments (and the unique-host rule).
fn replicas(cluster: &support::cluster::TestCluster, extra: &[&str]) -> [Replica; 2] {
    let policy = root()
        .join("policies/unique-ingress-host/policy.yaml")
        .display()
        .to_string();
    let mut args = vec!["-p", policy.as_str()];
    args.extend_from_slice(extra);
    // The processes live until the test process ends; so do their folders.
    [&REPLICA_A, &REPLICA_B].map(|scope| {
        let hook = start_scoped(cluster, scope, &args);
        let ca = std::fs::read_to_string(hook.dir.path().join("ca.crt")).expect("ca");
        let port = hook.port;
        std::mem::forget(hook);
        Replica { port, ca }
    })
}

/// An Ingress CREATE of `host` in `ns`, as the API server sends it.
fn review(ns: &str, host: &str) -> String {
    let mut ingress = support::webhook::ingress(ns, "direct", host);
    ingress["metadata"]["uid"] = serde_json::json!(format!("{ns}-uid"));
    let gvk = serde_json::json!({"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"});
    let gvr =
        serde_json::json!({"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"});
    serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": format!("{ns}-review"), "kind": gvk, "resource": gvr,
            "requestKind": gvk, "requestResource": gvr, "name": "direct", "namespace": ns,
            "operation": "CREATE", "userInfo": {"username": "alice"},
            "object": ingress, "dryRun": false}})
    .to_string()
}

/// Reviews of one host for the first two namespaces, one through each
/// replica, neither persisted (no watch can tell the other replica):
/// which were allowed.
fn one_through_each(replicas: &[Replica; 2], namespaces: &[String], host: &str) -> [bool; 2] {
    [0, 1].map(|i| {
        let r = &replicas[i];
        let answer =
            post(r.port, "/validate", &review(&namespaces[i], host), &r.ca).expect("answer");
        answer.contains("\"allowed\":true")
    })
}

/// Creates an Ingress `name` claiming `host` in each of `namespaces`, all
/// at once; returns the namespaces whose create was admitted.
fn race(
    cluster: &support::cluster::TestCluster,
    namespaces: &[String],
    name: &str,
    host: &str,
) -> Vec<String> {
    use k8s_openapi::api::networking::v1::Ingress;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = cluster.client();
        let creates = namespaces.iter().map(|ns| {
            let api: kube::Api<Ingress> = kube::Api::namespaced(client.clone(), ns);
            let ingress: Ingress =
                serde_json::from_value(support::webhook::ingress(ns, name, host)).expect("ingress");
            async move {
                let r = api
                    .create(&kube::api::PostParams::default(), &ingress)
                    .await;
                (ns.clone(), r)
            }
        });
        let start = Instant::now();
        let results = futures::future::join_all(creates).await;
        eprintln!(
            "{} concurrent creates of {host} through 2 replicas took {:?}",
            namespaces.len(),
            start.elapsed()
        );
        let mut admitted = Vec::new();
        for (ns, r) in results {
            match r {
                Ok(_) => admitted.push(ns),
                Err(kube::Error::Api(s)) => assert!(
                    s.message.contains("unique-ingress-host"),
                    "refused for another reason: {}",
                    s.message
                ),
                Err(e) => panic!("create failed: {e}"),
            }
        }
        admitted
    })
}

/// 25 namespaces behind each replica.
fn namespaces(cluster: &support::cluster::TestCluster, prefix: &str) -> Vec<String> {
    (0..50)
        .map(|i| {
            let scope = if i % 2 == 0 { &REPLICA_A } else { &REPLICA_B };
            namespace_labelled(cluster, &format!("{prefix}-{i}"), scope.label)
        })
        .collect()
}

/// Two webhook replicas, five rounds of 50 concurrent creates of Ingresses
/// claiming one host from 50 namespaces: exactly one is admitted in each,
/// because each replica claims the host on the API server (a Lease) before
/// it admits. Without claims the figures are printed (how many duplicates
/// got through). And the race made certain: two reviews of one host, one
/// through each replica, neither persisted, are both allowed without
/// claims and only the first with them. When
/// the winner is deleted the claim is released (after the grace period)
/// and another namespace may take the host.
#[test]
fn two_replicas_never_both_admit_a_duplicate_host() {
    let cluster = support::cluster::TestCluster::shared();
    let _logs = cluster.logs_on_panic();

    const ROUNDS: usize = 5;
    let unclaimed = replicas(cluster, &["--no-claims"]);
    let spaces = namespaces(cluster, "noclaim");
    // The race, made certain: each replica admits what the other did not
    // see persisted.
    assert_eq!(
        one_through_each(&unclaimed, &spaces, "direct-a.example.com"),
        [true, true]
    );
    let without: Vec<usize> = (0..ROUNDS)
        .map(|r| {
            race(
                cluster,
                &spaces,
                &format!("web-{r}"),
                &format!("race-a{r}.example.com"),
            )
            .len()
        })
        .collect();
    eprintln!("without claims, admitted of 50 in each round: {without:?}");

    let claims_ns = cluster.create_namespace("claims");
    let claimed = replicas(
        cluster,
        &["--claims-namespace", &claims_ns, "--claim-grace", "3s"],
    );
    let spaces = namespaces(cluster, "claim");
    assert_eq!(
        one_through_each(&claimed, &spaces, "direct-b.example.com"),
        [true, false],
        "the second replica must find the first one's claim"
    );
    let mut winners = Vec::new();
    for r in 0..ROUNDS {
        let admitted = race(
            cluster,
            &spaces,
            &format!("web-{r}"),
            &format!("race-b{r}.example.com"),
        );
        eprintln!("with claims, round {r}: {} of 50 admitted", admitted.len());
        assert_eq!(admitted.len(), 1, "round {r}: admitted in {admitted:?}");
        winners.push(admitted[0].clone());
    }
    let out = cluster.kubectl(&[
        "get", "leases", "-n", &claims_ns, "-l", "interlock.dev/claim=true", "-o",
        r#"jsonpath={range .items[*]}{.metadata.annotations.interlock\.dev/claim-key}={.spec.holderIdentity}{"\n"}{end}"#,
    ]);
    let claims = String::from_utf8_lossy(&out.stdout).to_string();
    for (r, winner) in winners.iter().enumerate() {
        let host = format!("race-b{r}.example.com=");
        let held: Vec<&str> = claims.lines().filter(|l| l.starts_with(&host)).collect();
        assert_eq!(
            held,
            [format!("{host}{winner}")],
            "one claim per host, held by its winner:\n{claims}"
        );
    }
    let winner = &winners[0];

    // The winner goes: its claim is released and another namespace (behind
    // either replica) gets the host.
    let out = cluster.kubectl(&["delete", "ingress", "web-0", "-n", winner]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let others: Vec<&String> = spaces.iter().filter(|ns| *ns != winner).take(2).collect();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = String::new();
    'outer: while Instant::now() < deadline {
        for ns in &others {
            let out = support::webhook::apply(
                cluster,
                &support::webhook::ingress(ns, "web-0", "race-b0.example.com"),
                &[],
            );
            if out.status.success() {
                break 'outer;
            }
            last = String::from_utf8_lossy(&out.stderr).to_string();
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(
        Instant::now() < deadline,
        "the host was never released: {last}"
    );
}
