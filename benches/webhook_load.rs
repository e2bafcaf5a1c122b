//! Load generator for the admission webhook: AdmissionReviews of a realistic
//! Deployment over TLS keep-alive connections on loopback, as the
//! kube-apiserver sends them.
//!
//! `cargo bench --bench webhook_load` runs two phases against an in-process
//! server (an allow-all test reviewer unless you plug in the engine):
//! 1. fixed rate (open loop): `LOAD_RATE` requests/s for `LOAD_SECS` over
//!    `LOAD_CONNS` connections; latency is measured from each request's
//!    *scheduled* time, so a stalled server cannot hide queueing
//!    (no coordinated omission). Target: p99 < 2 ms at 2,000 req/s.
//! 2. saturation (closed loop): `LOAD_SAT_CONNS` connections send as fast as
//!    answers come back for `LOAD_SECS`. Target: >= 10,000 req/s on 2 cores.
//!
//! Environment (all optional):
//! `LOAD_RATE` (2000), `LOAD_SECS` (5), `LOAD_CONNS` (16), `LOAD_SAT_CONNS`
//! (32), `LOAD_PROTO` (`h1` or `h2`, default h1), `LOAD_EVAL_THREADS`
//! (server `--eval-threads`, default one per CPU), `LOAD_PATH` (/validate).
//! `LOAD_TARGET=127.0.0.1:8443` and `LOAD_CA=ca.crt` measure a separately
//! started `interlock serve` instead (loopback addresses only); then the
//! client does not share its process with the server.
//!
//! In-process, client and server share the machine's cores, so saturation
//! numbers are a lower bound for the server alone.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use interlock::server::{Reviewer, Server, ServerConfig};
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

type Body = BoxBody<Bytes, Infallible>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Allows everything after looking at the object, like a cheap policy.
struct AllowAll;
impl Reviewer for AllowAll {
    fn validate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let containers = req
            .object
            .as_ref()
            .and_then(|o| o.data.pointer("/spec/template/spec/containers"))
            .and_then(|c| c.as_array())
            .map_or(0, Vec::len);
        let resp = AdmissionResponse::from(req);
        if containers == 0 {
            resp.deny("no containers")
        } else {
            resp
        }
    }
    fn mutate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        AdmissionResponse::from(req)
    }
    fn ready(&self) -> bool {
        true
    }
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A Deployment of about 3 KB, the size of a typical tenant workload.
fn review_body(uid: u64) -> Vec<u8> {
    let container = |name: &str, image: &str| {
        json!({
            "name": name, "image": image,
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME",
                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                          "limits": {"cpu": "1", "memory": "512Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5},
            "securityContext": {"runAsNonRoot": true, "readOnlyRootFilesystem": true,
                                "allowPrivilegeEscalation": false,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]
        })
    };
    let object = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a",
                     "labels": {"app": "web", "team": "a", "tier": "frontend"},
                     "annotations": {"deployment.kubernetes.io/revision": "3"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web", "team": "a"}},
                "spec": {
                    "serviceAccountName": "web",
                    "containers": [container("web", "registry.internal/team-a/web:1.4.2"),
                                   container("sidecar", "registry.internal/shared/proxy:2.0.1")],
                    "volumes": [{"name": "config", "configMap": {"name": "web-config"}}]
                }
            }
        }
    });
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("load-{uid}"),
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": "web", "namespace": "team-a", "operation": "UPDATE",
            "userInfo": {"username": "system:serviceaccount:ci:deployer",
                         "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": object, "oldObject": object, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}
        }
    }))
    .unwrap_or_default()
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Body>),
    H2(hyper::client::conn::http2::SendRequest<Body>),
}

async fn connect(addr: SocketAddr, tls: Arc<rustls::ClientConfig>) -> Result<Sender, BoxError> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let stream = TlsConnector::from(tls)
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await?;
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(stream);
    Ok(if h2 {
        let (s, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
        tokio::spawn(conn);
        Sender::H2(s)
    } else {
        let (s, conn) = hyper::client::conn::http1::handshake(io).await?;
        tokio::spawn(conn);
        Sender::H1(s)
    })
}

async fn send(sender: &mut Sender, path: &str, body: Bytes) -> Result<(), BoxError> {
    let req = Request::post(format!("{path}?timeout=5s"))
        .header("host", "interlock.interlock-system.svc")
        .header("content-type", "application/json")
        .body(Full::new(body).boxed())?;
    let resp = match sender {
        Sender::H1(s) => {
            s.ready().await?;
            s.send_request(req).await?
        }
        Sender::H2(s) => {
            s.ready().await?;
            s.send_request(req).await?
        }
    };
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    if !status.is_success() || !body.windows(14).any(|w| w == b"\"allowed\":true") {
        return Err(format!("{status}: {}", String::from_utf8_lossy(&body)).into());
    }
    Ok(())
}

struct Phase {
    latencies_us: Vec<u64>,
    errors: usize,
    elapsed: Duration,
}

fn report(name: &str, p: &mut Phase) {
    p.latencies_us.sort_unstable();
    let n = p.latencies_us.len();
    let q = |x: f64| -> f64 {
        if n == 0 {
            return f64::NAN;
        }
        let i = ((n as f64 * x).ceil() as usize).clamp(1, n) - 1;
        p.latencies_us[i] as f64 / 1000.0
    };
    println!(
        "{name}: {n} ok, {} errors, {:.0} req/s | latency ms p50 {:.3} p90 {:.3} p99 {:.3} p99.9 {:.3} max {:.3}",
        p.errors,
        n as f64 / p.elapsed.as_secs_f64(),
        q(0.50),
        q(0.90),
        q(0.99),
        q(0.999),
        q(1.0),
    );
}

async fn fixed_rate(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    path: &'static str,
    rate: f64,
    conns: usize,
    secs: f64,
) -> Phase {
    // Connect first (handshakes are not part of the schedule).
    let mut senders = Vec::with_capacity(conns);
    for _ in 0..conns {
        senders.push(connect(addr, tls.clone()).await);
    }
    let start = Instant::now() + Duration::from_millis(50);
    let per_conn = Duration::from_secs_f64(conns as f64 / rate);
    let total_per_conn = (rate * secs / conns as f64).ceil() as u64;
    // Bodies made up front: the client's JSON encoding is not the server's cost.
    let bodies: Arc<Vec<Bytes>> = Arc::new((0..256).map(|i| Bytes::from(review_body(i))).collect());
    let mut tasks = Vec::new();
    for (c, sender) in senders.into_iter().enumerate() {
        let bodies = bodies.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(total_per_conn as usize);
            let mut errors = 0;
            let Ok(mut sender) = sender else {
                return (lat, total_per_conn as usize);
            };
            let offset = per_conn.mul_f64(c as f64 / conns as f64);
            for i in 0..total_per_conn {
                let scheduled = start + offset + per_conn.mul_f64(i as f64);
                tokio::time::sleep_until(scheduled.into()).await;
                let body = bodies[(c + i as usize) % bodies.len()].clone();
                match send(&mut sender, path, body).await {
                    Ok(()) => lat.push(scheduled.elapsed().as_micros() as u64),
                    Err(e) => {
                        if errors == 0 {
                            eprintln!("error: {e}");
                        }
                        errors += 1;
                    }
                }
            }
            (lat, errors)
        }));
    }
    collect(tasks, start).await
}

async fn saturation(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    path: &'static str,
    conns: usize,
    secs: f64,
) -> Phase {
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let body = Bytes::from(review_body(42));
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (tls, body) = (tls.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0;
            let Ok(mut sender) = connect(addr, tls).await else {
                return (lat, 1);
            };
            while Instant::now() < end {
                let t = Instant::now();
                match send(&mut sender, path, body.clone()).await {
                    Ok(()) => lat.push(t.elapsed().as_micros() as u64),
                    Err(_) => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    collect(tasks, start).await
}

async fn collect(tasks: Vec<tokio::task::JoinHandle<(Vec<u64>, usize)>>, start: Instant) -> Phase {
    let mut p = Phase {
        latencies_us: Vec::new(),
        errors: 0,
        elapsed: Duration::ZERO,
    };
    for t in tasks {
        if let Ok((lat, errors)) = t.await {
            p.latencies_us.extend(lat);
            p.errors += errors;
        }
    }
    p.elapsed = start.elapsed();
    p
}

fn main() -> Result<(), BoxError> {
    // `cargo test --benches` runs this with `--bench` absent: do a tiny smoke run.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let secs: f64 = if smoke { 0.3 } else { env("LOAD_SECS", 5.0) };
        // The smoke run (`cargo test --all-targets`, debug build) only checks
        // that the generator and the server work together.
        let rate: f64 = if smoke {
            200.0
        } else {
            env("LOAD_RATE", 2000.0)
        };
        let conns: usize = if smoke { 4 } else { env("LOAD_CONNS", 16) };
        let sat_conns: usize = if smoke { 4 } else { env("LOAD_SAT_CONNS", 32) };
        let path: &'static str = if std::env::var("LOAD_PATH").as_deref() == Ok("/mutate") {
            "/mutate"
        } else {
            "/validate"
        };
        let alpn: Vec<u8> = if std::env::var("LOAD_PROTO").as_deref() == Ok("h2") {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        };

        let _dir;
        let (addr, ca_pem, stop) = match std::env::var("LOAD_TARGET") {
            Ok(target) => {
                let addr: SocketAddr = target.parse()?;
                if !addr.ip().is_loopback() {
                    return Err("LOAD_TARGET must be a loopback address".into());
                }
                let ca = std::fs::read(std::env::var("LOAD_CA")?)?;
                (addr, ca, None)
            }
            Err(_) => {
                let dir = tempfile::tempdir()?;
                let b = interlock::certs::generate(&interlock::certs::CertsOptions::new([
                    "127.0.0.1",
                ]))?;
                interlock::certs::write(dir.path(), &b, true)?;
                let mut config =
                    ServerConfig::new(dir.path().join("tls.crt"), dir.path().join("tls.key"));
                config.listen = "127.0.0.1:0".parse()?;
                config.eval_threads = std::env::var("LOAD_EVAL_THREADS")
                    .ok()
                    .and_then(|v| v.parse().ok());
                let server = Server::bind(config, Arc::new(AllowAll)).await?;
                let addr = server.local_addr();
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                tokio::spawn(server.serve(async move {
                    let _ = rx.await;
                }));
                _dir = dir;
                (addr, b.ca_cert_pem.into_bytes(), Some(tx))
            }
        };

        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&ca_pem) {
            roots.add(c?)?;
        }
        let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
        tls.alpn_protocols = vec![alpn.clone()];
        let tls = Arc::new(tls);

        println!(
            "webhook_load: {} {path}, body {} bytes, {}",
            String::from_utf8_lossy(&alpn),
            review_body(0).len(),
            if stop.is_some() {
                "in-process server"
            } else {
                "external server"
            }
        );
        let mut p = fixed_rate(addr, tls.clone(), path, rate, conns, secs).await;
        report(&format!("fixed rate {rate:.0}/s x {conns} conns"), &mut p);
        let mut s = saturation(addr, tls, path, sat_conns, secs).await;
        report(&format!("saturation x {sat_conns} conns"), &mut s);
        if let Some(stop) = stop {
            let _ = stop.send(());
        }
        if smoke && (p.errors > 0 || s.errors > 0) {
            return Err("errors during the smoke run".into());
        }
        Ok(())
    })
}
