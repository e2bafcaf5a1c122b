//! Soak of `interlock serve` (the binary, as deployed) under hostile and
//! heavy load at once (issue 17, "How it must be shown").
//!
//! The server runs with the bundled library loaded from `policies/` plus
//! one adversarial policy (below), over a generated cluster of
//! `SOAK_OBJECTS` (50,000) objects given as `--inventory`. Four clients:
//! - **normal**: an open-loop steady rate (`SOAK_RATE`, 200 req/s) of the
//!   webhook_load mix: Deployment, Ingress and Service UPDATEs and Pod
//!   CREATEs of objects of the cluster; each body's decision is learnt
//!   first by a dry run, and any other answer later is an error. Latency is
//!   measured from each request's scheduled time (no coordinated omission).
//! - **churn**: creates and deletes ConfigMaps and Ingresses
//!   (`SOAK_CHURN`, 20 req/s). An admitted create of a kind policies look
//!   up is recorded under the write lock and expires after 30 s (with
//!   `--inventory` there is no watch to replace it): writers contend with
//!   readers all along, the freeze of issue 17.
//! - **adversarial** (`SOAK_HOSTILE`, 1 req/s): Pods of bodies just under
//!   the 3 MiB limit (an env list of ConfigMap references), bodies over it
//!   (413), and Secrets whose keys make the adversarial policy's
//!   expressions quadratic in time and memory (cost and memory budgets).
//! - **probe**: `GET /healthz` every 100 ms; the worst answer time.
//!
//! First a quiet phase (normal traffic alone, `SOAK_QUIET_SECS`, 60 s),
//! then the soak (`--duration SECS` or `SOAK_SECS`, 600 s). Printed: per
//! minute the normal p50/p99, errors and the server's RSS; at the end p50
//! and p99 beside the quiet run's, errors by client, the adversarial
//! answers by status, RSS first/last/max, and the `/healthz` worst case.
//! Without `--bench` (`cargo test --benches`) it makes a tiny smoke run.
//! `SOAK_SERVER=PATH` runs another build of `interlock` as the server;
//! `SOAK_HOSTILE_MIX` picks the adversarial requests (see `main`).

#[path = "support/gen_cluster.rs"]
mod gen_cluster;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value as Json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

type Body = BoxBody<Bytes, Infallible>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Quadratic in the keys of a Secret: the cost budget stops the first,
/// the memory budget the second.
const ADVERSARIAL_POLICY: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata:
  name: soak-adversarial
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["secrets"], operations: ["CREATE", "UPDATE"]}
  validations:
    - expression: "object.?data.orValue({}).all(k, object.data.all(j, k == j || !k.startsWith(j)))"
      message: "a key is a prefix of another"
    - expression: "object.?data.orValue({}).map(k, object.data.map(j, k + j).join(',')).join(';').size() > 0"
      message: "no keys"
"#;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn duration_arg() -> Option<f64> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--duration")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

/// `VmRSS` of a process, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------- requests

fn review(
    uid: u64,
    gvr: (&str, &str, &str, &str),
    op: &str,
    object: &Json,
    old: Option<&Json>,
    dry: bool,
) -> Bytes {
    let (group, version, kind, resource) = gvr;
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let res = json!({"group": group, "version": version, "resource": resource});
    let subject = old.unwrap_or(object);
    let object = if op == "DELETE" {
        Json::Null
    } else {
        object.clone()
    };
    let body = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("00000000-0000-4000-8000-{uid:012}"),
            "kind": gvk, "resource": res, "requestKind": gvk, "requestResource": res,
            "name": subject["metadata"]["name"], "namespace": subject["metadata"]["namespace"],
            "operation": op,
            "userInfo": {"username": "system:serviceaccount:ci:deployer",
                         "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": object,
            "oldObject": old, "dryRun": dry,
        }
    });
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

const DEPLOYMENT: (&str, &str, &str, &str) = ("apps", "v1", "Deployment", "deployments");
const POD: (&str, &str, &str, &str) = ("", "v1", "Pod", "pods");
const SERVICE: (&str, &str, &str, &str) = ("", "v1", "Service", "services");
const INGRESS: (&str, &str, &str, &str) = ("networking.k8s.io", "v1", "Ingress", "ingresses");
const CONFIGMAP: (&str, &str, &str, &str) = ("", "v1", "ConfigMap", "configmaps");
const SECRET: (&str, &str, &str, &str) = ("", "v1", "Secret", "secrets");

fn stored(o: &Json, n: u64) -> Json {
    let mut o = o.clone();
    if let Some(m) = o["metadata"].as_object_mut() {
        m.entry("uid")
            .or_insert_with(|| json!(format!("9a0b6a4e-0000-4000-8000-{n:012}")));
        m.insert("resourceVersion".into(), json!(format!("{}", 100_000 + n)));
    }
    o
}

/// The normal mix, as (body, dry-run body) pairs.
fn normal_requests(docs: &[Json], n: usize) -> Vec<(Bytes, Bytes)> {
    let of = |kind: &str| -> Vec<&Json> {
        docs.iter()
            .filter(|d| d["kind"] == kind && d["metadata"]["namespace"].is_string())
            .collect()
    };
    let kinds = [
        (of("Deployment"), DEPLOYMENT),
        (of("Ingress"), INGRESS),
        (of("Service"), SERVICE),
        (of("Pod"), POD),
    ];
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (objs, gvr) = &kinds[i % kinds.len()];
        if objs.is_empty() {
            continue;
        }
        let o = objs[(i / kinds.len()) % objs.len()];
        let uid = i as u64;
        let pair = |op: &str, new: &Json, old: Option<&Json>| {
            (
                review(uid, *gvr, op, new, old, false),
                review(uid, *gvr, op, new, old, true),
            )
        };
        out.push(if gvr.2 == "Pod" {
            let mut p = o.clone();
            p["metadata"]["name"] = json!(format!("soak-{i:06}"));
            pair("CREATE", &p, None)
        } else {
            let old = stored(o, uid);
            let mut new = old.clone();
            new["metadata"]["labels"]["soak.interlock.dev/round"] = json!(format!("r{}", i % 97));
            pair("UPDATE", &new, Some(&old))
        });
    }
    out
}

/// Churn request `i`: a create, then a delete, of a ConfigMap or an Ingress.
fn churn_request(i: u64, namespace: &str) -> Bytes {
    let n = i / 2;
    let object = if n.is_multiple_of(2) {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": format!("churn-{n}"), "namespace": namespace}, "data": {"k": "v"}})
    } else {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": format!("churn-{n}"), "namespace": namespace},
               "spec": {"rules": [{"host": format!("churn-{n}.soak.example.com")}]}})
    };
    let gvr = if n.is_multiple_of(2) {
        CONFIGMAP
    } else {
        INGRESS
    };
    if i.is_multiple_of(2) {
        review(1_000_000 + i, gvr, "CREATE", &object, None, false)
    } else {
        review(
            1_000_000 + i,
            gvr,
            "DELETE",
            &object,
            Some(&stored(&object, i)),
            false,
        )
    }
}

/// Adversarial request `i`: a Pod body just under `limit`, one over it, or
/// a Secret of `keys` keys for the quadratic policy.
fn hostile_request(i: u64, namespace: &str, limit: usize, keys: usize) -> (Bytes, &'static str) {
    match i % 3 {
        0 | 1 => {
            let target = if i.is_multiple_of(3) {
                limit - 64 * 1024
            } else {
                limit + 64 * 1024
            };
            let entry = |k: usize| {
                json!({"name": format!("E{k:06}"),
                "valueFrom": {"configMapKeyRef": {"name": format!("cm-{:03}", k % 500), "key": "k"}}})
            };
            let per = serde_json::to_vec(&entry(0)).map_or(100, |v| v.len() + 1);
            let env: Vec<Json> = (0..target / per).map(entry).collect();
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("hostile-{i}"), "namespace": namespace},
                "spec": {"containers": [{"name": "c", "image": "registry.example.com/x:1", "env": env}]}});
            let what = if i.is_multiple_of(3) {
                "pod under the body limit"
            } else {
                "pod over the body limit"
            };
            (
                review(2_000_000 + i, POD, "CREATE", &pod, None, false),
                what,
            )
        }
        _ => {
            let data: serde_json::Map<String, Json> = (0..keys)
                .map(|k| (format!("key-{k:06}"), json!("dmFsdWU=")))
                .collect();
            let secret = json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("hostile-{i}"), "namespace": namespace}, "data": data});
            (
                review(2_000_000 + i, SECRET, "CREATE", &secret, None, false),
                "quadratic secret",
            )
        }
    }
}

// --------------------------------------------------------------- transport

type Sender = hyper::client::conn::http1::SendRequest<Body>;

async fn connect(addr: SocketAddr, tls: Arc<rustls::ClientConfig>) -> Result<Sender, BoxError> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let stream = TlsConnector::from(tls)
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await?;
    let (s, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(s)
}

/// Sends `body` (GET when empty); the status and the answer.
async fn send(s: &mut Sender, path: &str, body: &Bytes) -> Result<(u16, Bytes), BoxError> {
    let builder = if body.is_empty() {
        Request::get(path)
    } else {
        Request::post(path)
    };
    let req = builder
        .header("host", "interlock.interlock-system.svc")
        .header("content-type", "application/json")
        .body(Full::new(body.clone()).boxed())?;
    s.ready().await?;
    let resp = s.send_request(req).await?;
    let status = resp.status().as_u16();
    Ok((status, resp.into_body().collect().await?.to_bytes()))
}

fn allowed(answer: &[u8]) -> Option<bool> {
    let has = |n: &[u8]| answer.windows(n.len()).any(|w| w == n);
    if has(b"\"allowed\":true") {
        Some(true)
    } else if has(b"\"allowed\":false") {
        Some(false)
    } else {
        None
    }
}

fn client_tls(ca_pem: &[u8]) -> Result<Arc<rustls::ClientConfig>, BoxError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(c?)?;
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(tls))
}

// ------------------------------------------------------------------ server

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(dir: &Path, cluster: &Path) -> Result<Server, BoxError> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    std::fs::write(dir.join("adversarial.yaml"), ADVERSARIAL_POLICY)?;
    let p = |f: &str| dir.join(f).display().to_string();
    // `SOAK_SERVER`: another build of the binary (a release build when
    // this harness is a debug one).
    let binary =
        std::env::var("SOAK_SERVER").unwrap_or_else(|_| env!("CARGO_BIN_EXE_interlock").into());
    let args: Vec<String> = vec![
        "serve".into(),
        "--tls-cert".into(),
        p("tls.crt"),
        "--tls-key".into(),
        p("tls.key"),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "-p".into(),
        root.join("policies").display().to_string(),
        "-p".into(),
        p("adversarial.yaml"),
        "--inventory".into(),
        cluster.display().to_string(),
    ];
    let mut command = Command::new(binary);
    // SAFETY: prctl is async-signal-safe. The server dies with the bench.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = command
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("serve.log"))?)
        .spawn()?;
    Ok(Server {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    })
}

async fn wait_ready(
    addr: SocketAddr,
    tls: &Arc<rustls::ClientConfig>,
    log: &Path,
) -> Result<(), BoxError> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(600) {
        if let Ok(mut s) = connect(addr, tls.clone()).await {
            if matches!(send(&mut s, "/readyz", &Bytes::new()).await, Ok((200, _))) {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(format!(
        "the server never became ready:\n{}",
        std::fs::read_to_string(log)?
    )
    .into())
}

// ----------------------------------------------------------------- clients

/// What the normal client saw: latencies (µs) by minute, errors.
#[derive(Default)]
struct Normal {
    by_minute: BTreeMap<u64, Vec<u64>>,
    errors: u64,
    first_errors: Vec<String>,
}

/// Open loop at `rate` over `conns` connections for `secs`.
async fn normal(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    requests: Arc<Vec<(Bytes, bool)>>,
    rate: f64,
    conns: usize,
    secs: f64,
) -> Normal {
    let start = tokio::time::Instant::now();
    let out = Arc::new(Mutex::new(Normal::default()));
    let tasks: Vec<_> = (0..conns)
        .map(|c| {
            let (tls, requests, out) = (tls.clone(), requests.clone(), out.clone());
            tokio::spawn(async move {
                let mut sender = connect(addr, tls.clone()).await.ok();
                let every = Duration::from_secs_f64(conns as f64 / rate);
                let mut k = 0u64;
                loop {
                    let at =
                        start + every.mul_f64(k as f64) + every.mul_f64(c as f64 / conns as f64);
                    if at.duration_since(start).as_secs_f64() >= secs {
                        break;
                    }
                    tokio::time::sleep_until(at).await;
                    let (body, expect) = &requests[(k as usize * conns + c) % requests.len()];
                    k += 1;
                    let r = match sender.as_mut() {
                        Some(s) => send(s, "/validate?timeout=10s", body).await,
                        None => Err("not connected".into()),
                    };
                    let latency = at.elapsed().as_micros() as u64;
                    let minute = at.duration_since(start).as_secs() / 60;
                    let wrong = match &r {
                        Ok((200, answer)) if allowed(answer) == Some(*expect) => None,
                        Ok((status, answer)) => Some(format!(
                            "{status}: {}",
                            String::from_utf8_lossy(&answer[..answer.len().min(300)])
                        )),
                        Err(e) => Some(e.to_string()),
                    };
                    let failed = wrong.is_some();
                    {
                        let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
                        o.by_minute.entry(minute).or_default().push(latency);
                        if let Some(w) = wrong {
                            o.errors += 1;
                            if o.first_errors.len() < 5 {
                                o.first_errors.push(w);
                            }
                        }
                    }
                    if failed {
                        sender = connect(addr, tls.clone()).await.ok();
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    Arc::try_unwrap(out)
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .unwrap_or_default()
}

/// Sends `make(i)` at `rate` until `stop`; counts answers by status (and
/// errors: transport failures, and 200s of the churn that deny).
async fn background(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    rate: f64,
    stop: Arc<AtomicBool>,
    make: impl Fn(u64) -> (Bytes, &'static str) + Send + 'static,
) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    let mut sender = connect(addr, tls.clone()).await.ok();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    // A slow answer delays the next request, no burst after it.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for i in 0.. {
        tick.tick().await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (body, what) = make(i);
        // At a low rate the server closes the connection between requests
        // (an HTTP/1.1 connection waiting for headers is closed after the
        // handshake timeout): that is no answer to count.
        if sender.as_ref().is_none_or(|s| s.is_closed()) {
            sender = connect(addr, tls.clone()).await.ok();
        }
        let r = match sender.as_mut() {
            Some(s) => send(s, "/validate?timeout=10s", &body).await,
            None => Err("not connected".into()),
        };
        let key = match &r {
            Ok((200, a)) => format!(
                "{what}: 200 allowed={}",
                allowed(a).map_or("?".into(), |b| b.to_string())
            ),
            Ok((status, _)) => format!("{what}: {status}"),
            Err(_) => format!("{what}: transport error"),
        };
        *counts.entry(key).or_insert(0) += 1;
        // A 413 closes the connection; so may an error.
        if !matches!(r, Ok((200, _))) {
            sender = connect(addr, tls.clone()).await.ok();
        }
    }
    counts
}

/// `/healthz` every 100 ms on one connection: the worst answer time (µs).
async fn probe(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    stop: Arc<AtomicBool>,
) -> (u64, u64) {
    let (mut worst, mut failures) = (0u64, 0u64);
    let mut sender = connect(addr, tls.clone()).await.ok();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let t = Instant::now();
        let ok = match sender.as_mut() {
            Some(s) => matches!(send(s, "/healthz", &Bytes::new()).await, Ok((200, _))),
            None => false,
        };
        worst = worst.max(t.elapsed().as_micros() as u64);
        if !ok {
            failures += 1;
            sender = connect(addr, tls.clone()).await.ok();
        }
    }
    (worst, failures)
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn p50_p99(mut v: Vec<u64>) -> (f64, f64) {
    v.sort_unstable();
    (percentile(&v, 0.5), percentile(&v, 0.99))
}

// -------------------------------------------------------------------- main

fn main() -> Result<(), BoxError> {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let objects: usize = if smoke {
        400
    } else {
        env("SOAK_OBJECTS", 50_000)
    };
    let secs: f64 = if smoke {
        3.0
    } else {
        duration_arg().unwrap_or_else(|| env("SOAK_SECS", 600.0))
    };
    let quiet_secs: f64 = if smoke {
        2.0
    } else {
        env("SOAK_QUIET_SECS", 60.0)
    };
    let rate: f64 = env("SOAK_RATE", 200.0);
    let churn_rate: f64 = env("SOAK_CHURN", 20.0);
    let hostile_rate: f64 = env("SOAK_HOSTILE", 1.0);
    let keys: usize = env("SOAK_SECRET_KEYS", 20_000);
    let conns: usize = env("SOAK_CONNS", 8);

    let dir = tempfile::tempdir()?;
    let cluster = dir.path().join("cluster");
    std::fs::create_dir_all(&cluster)?;
    let generated = gen_cluster::generate(&cluster, objects)?;
    let certs = interlock::certs::generate(&interlock::certs::CertsOptions::new(["127.0.0.1"]))?;
    std::fs::write(dir.path().join("tls.crt"), &certs.cert_pem)?;
    std::fs::write(dir.path().join("tls.key"), &certs.key_pem)?;
    let tls = client_tls(certs.ca_cert_pem.as_bytes())?;
    let t = Instant::now();
    let server = start_server(dir.path(), &cluster)?;
    let pid = server.child.id();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("soak-client")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        wait_ready(server.addr, &tls, &dir.path().join("serve.log")).await?;
        let addr = server.addr;
        println!(
            "soak: {} objects ({} files) loaded in {:.1}s; server RSS {:.0} MiB; load average {}",
            generated.objects,
            generated.files,
            t.elapsed().as_secs_f64(),
            rss_mib(pid),
            loadavg()
        );

        // The normal mix, each with the decision its dry run got.
        let docs: Vec<Json> = interlock::manifest::load_paths(&[&cluster], &Default::default())
            .documents
            .into_iter()
            .map(|d| d.value)
            .collect();
        let namespace = docs
            .iter()
            .find_map(|d| d["metadata"]["namespace"].as_str().map(str::to_string))
            .unwrap_or_else(|| "default".into());
        let mut requests = Vec::new();
        let mut sender = connect(addr, tls.clone()).await?;
        for (body, dry) in normal_requests(&docs, if smoke { 40 } else { 2000 }) {
            if let Ok((200, answer)) = send(&mut sender, "/validate", &dry).await {
                if let Some(a) = allowed(&answer) {
                    requests.push((body, a));
                }
            }
        }
        drop(docs);
        let denied = requests.iter().filter(|(_, a)| !a).count();
        println!("normal mix: {} bodies ({denied} denied by their dry run)", requests.len());
        let requests = Arc::new(requests);

        let quiet = normal(addr, tls.clone(), requests.clone(), rate, conns, quiet_secs).await;
        let (q50, q99) = p50_p99(quiet.by_minute.into_values().flatten().collect());
        println!(
            "quiet: {rate} req/s for {quiet_secs}s: p50 {q50:.2} ms, p99 {q99:.2} ms, errors {}; RSS {:.0} MiB; load {}",
            quiet.errors,
            rss_mib(pid),
            loadavg()
        );

        let stop = Arc::new(AtomicBool::new(false));
        let ns = namespace.clone();
        let churn = tokio::spawn(background(addr, tls.clone(), churn_rate, stop.clone(), move |i| {
            (churn_request(i, &ns), if i.is_multiple_of(2) { "churn create" } else { "churn delete" })
        }));
        let ns = namespace.clone();
        let limit = interlock::server::options::DEFAULT_MAX_BODY_BYTES;
        // Built once: making a 3 MiB body takes the client a good part of a
        // second, and on the runtime that also times the normal traffic it
        // would be measured as the server's latency.
        // `SOAK_HOSTILE_MIX` (default "0,1,2") picks which of them are sent:
        // 0 Pods under the body limit, 1 over it, 2 quadratic Secrets.
        let mix: String = env("SOAK_HOSTILE_MIX", "0,1,2".to_string());
        let hostile_bodies: Vec<(Bytes, &'static str)> = mix
            .split(',')
            .filter_map(|k| k.trim().parse::<u64>().ok())
            .map(|i| hostile_request(i, &ns, limit, keys))
            .collect();
        assert!(!hostile_bodies.is_empty(), "SOAK_HOSTILE_MIX names no request");
        let hostile = tokio::spawn(background(addr, tls.clone(), hostile_rate, stop.clone(), move |i| {
            hostile_bodies[i as usize % hostile_bodies.len()].clone()
        }));
        let healthz = tokio::spawn(probe(addr, tls.clone(), stop.clone()));
        let rss: Arc<Mutex<Vec<(u64, f64)>>> = Arc::default();
        let sampled = Arc::new(AtomicU64::new(0));
        let rss_task = {
            let (rss, sampled) = (rss.clone(), sampled.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(10));
                let start = Instant::now();
                loop {
                    tick.tick().await;
                    rss.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((start.elapsed().as_secs(), rss_mib(pid)));
                    sampled.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let soak = normal(addr, tls.clone(), requests, rate, conns, secs).await;
        stop.store(true, Ordering::Relaxed);
        rss_task.abort();
        let churned = churn.await?;
        let hostile = hostile.await?;
        let (worst, probe_failures) = healthz.await?;

        println!("soak: {secs}s at {rate} req/s normal, {churn_rate} req/s churn, {hostile_rate} req/s adversarial; load {}", loadavg());
        let mut all = Vec::new();
        for (minute, v) in &soak.by_minute {
            let (p50, p99) = p50_p99(v.clone());
            println!("  minute {minute:>3}: {:>6} requests, p50 {p50:.2} ms, p99 {p99:.2} ms", v.len());
            all.extend_from_slice(v);
        }
        let (s50, s99) = p50_p99(all);
        println!(
            "normal traffic: p50 {s50:.2} ms (quiet {q50:.2}), p99 {s99:.2} ms (quiet {q99:.2}, ratio {:.2}), errors {}",
            s99 / q99,
            soak.errors
        );
        for e in &soak.first_errors {
            println!("  error: {e}");
        }
        for (what, n) in churned.iter().chain(hostile.iter()) {
            println!("  {what}: {n}");
        }
        let rss = rss.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let max = rss.iter().map(|r| r.1).fold(f64::NAN, f64::max);
        let line: Vec<String> = rss.iter().map(|(t, m)| format!("{t}s {m:.0}")).collect();
        println!("server RSS MiB over time: {}", line.join(", "));
        println!(
            "RSS first {:.0} MiB, last {:.0} MiB, max {max:.0} MiB ({} samples)",
            rss.first().map_or(f64::NAN, |r| r.1),
            rss.last().map_or(f64::NAN, |r| r.1),
            sampled.load(Ordering::Relaxed)
        );
        println!("/healthz worst {:.1} ms, failures {probe_failures}", worst as f64 / 1000.0);
        if smoke && soak.errors > 0 {
            return Err(format!("smoke run: {} errors", soak.errors).into());
        }
        Ok::<(), BoxError>(())
    })
}
