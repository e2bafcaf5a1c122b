//! The admission webhook server against real TLS clients on 127.0.0.1.
//!
//! The engine is replaced by a recording test double ([`TestReviewer`]);
//! what is under test is the server: TLS versions, routes, limits, error
//! answers, certificate reload, client certificates and graceful shutdown.

use crate::support::rng;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use interlock::certs::{self, CertBundle, CertsOptions};
use interlock::server::{Reviewer, Server, ServerConfig};
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use rng::Rng;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

type Body = BoxBody<Bytes, Infallible>;

mod certificate;
mod connections;
mod cost_lane;
mod idle_flood;

// ---------------------------------------------------------------- the double

/// Records every call. Behaviour by uid prefix: `deny` denies, `panic`
/// panics, `slow` sleeps `delay` first; mutate always adds a label.
#[derive(Default)]
struct TestReviewer {
    calls: Mutex<Vec<(String, String)>>,
    /// The name of the thread each request was evaluated on.
    threads: Mutex<Vec<String>>,
    ready: AtomicBool,
    delay: Mutex<Duration>,
    evaluations: Counter,
}

impl TestReviewer {
    fn ready() -> Arc<Self> {
        let r = TestReviewer::default();
        r.ready.store(true, Ordering::SeqCst);
        Arc::new(r)
    }
    fn record(&self, endpoint: &str, req: &AdmissionRequest<DynamicObject>) {
        self.evaluations.inc();
        self.threads
            .lock()
            .expect("lock")
            .push(std::thread::current().name().unwrap_or("").to_owned());
        self.calls
            .lock()
            .expect("lock")
            .push((endpoint.to_owned(), req.uid.clone()));
        if req.uid.starts_with("panic") {
            panic!("test reviewer asked to panic");
        }
        if req.uid.starts_with("slow") {
            let d = *self.delay.lock().expect("lock");
            std::thread::sleep(d);
        }
    }
    fn uids(&self) -> Vec<String> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .map(|(_, u)| u.clone())
            .collect()
    }
}

impl Reviewer for TestReviewer {
    fn validate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        self.record("validate", req);
        let resp = AdmissionResponse::from(req);
        if req.uid.starts_with("deny") {
            resp.deny("test policy says no")
        } else {
            resp
        }
    }
    fn mutate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        self.record("mutate", req);
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/labels", "value": {"interlock.dev/seen": "yes"}}
        ]))
        .expect("patch");
        AdmissionResponse::from(req)
            .with_patch(patch)
            .expect("with_patch")
    }
    fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
    fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "test_reviewer_evaluations",
            "Evaluations by the test double",
            self.evaluations.clone(),
        );
    }
}

// ------------------------------------------------------------------ fixtures

fn bundle() -> CertBundle {
    certs::generate(&CertsOptions::new(["localhost", "127.0.0.1"])).expect("generate certs")
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).expect("pem")
}

struct TestServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), interlock::server::ServerError>>,
    reviewer: Arc<TestReviewer>,
    _dir: tempfile::TempDir,
    dir: PathBuf,
}

impl TestServer {
    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("server stops")
            .expect("join")
            .expect("serve ok");
    }
}

/// Write `b` into `dir` as plain files.
fn write_plain(dir: &Path, b: &CertBundle) {
    certs::write(dir, b, true).expect("write certs");
}

/// Publish `b` the way kubelet updates a mounted Secret: a new timestamped
/// directory, a `..data_tmp` symlink to it renamed over `..data`, and
/// `tls.crt` / `tls.key` symlinks through `..data`.
#[cfg(unix)]
fn kubelet_publish(dir: &Path, generation: &str, b: &CertBundle) {
    use std::os::unix::fs::symlink;
    let gen_dir = dir.join(generation);
    certs::write(&gen_dir, b, true).expect("write generation");
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(generation, &tmp).expect("symlink ..data_tmp");
    std::fs::rename(&tmp, dir.join("..data")).expect("swap ..data");
    for f in ["tls.crt", "tls.key", "ca.crt"] {
        let link = dir.join(f);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(format!("..data/{f}"), &link).expect("file symlink");
        }
    }
}

fn config_for(dir: &Path) -> ServerConfig {
    let mut c = ServerConfig::new(dir.join("tls.crt"), dir.join("tls.key"));
    c.listen = "127.0.0.1:0".parse().expect("addr");
    c.cert_poll_interval = Duration::from_millis(50);
    c.shutdown_timeout = Duration::from_secs(5);
    c
}

async fn start_with(
    b: &CertBundle,
    reviewer: Arc<TestReviewer>,
    tweak: impl FnOnce(&mut ServerConfig),
    kubelet_layout: bool,
) -> TestServer {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().to_owned();
    if kubelet_layout {
        #[cfg(unix)]
        kubelet_publish(&dir, "..2026_01_01_00_00_00.1", b);
    } else {
        write_plain(&dir, b);
    }
    let mut config = config_for(&dir);
    tweak(&mut config);
    let server = Server::bind(config, reviewer.clone()).await.expect("bind");
    let addr = server.local_addr();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = rx.await;
    }));
    TestServer {
        addr,
        stop: Some(tx),
        task,
        reviewer,
        _dir: tmp,
        dir,
    }
}

async fn start(b: &CertBundle) -> TestServer {
    start_with(b, TestReviewer::ready(), |_| {}, false).await
}

// -------------------------------------------------------------------- client

struct ClientOpts {
    roots: Vec<CertificateDer<'static>>,
    versions: Vec<&'static rustls::SupportedProtocolVersion>,
    alpn: Vec<Vec<u8>>,
    client_cert: Option<(CertificateDer<'static>, PrivateKeyDer<'static>)>,
}

impl ClientOpts {
    fn trusting(cas: &[&CertBundle]) -> Self {
        ClientOpts {
            roots: cas.iter().map(|b| der(&b.ca_cert_pem)).collect(),
            versions: vec![&rustls::version::TLS13, &rustls::version::TLS12],
            alpn: vec![b"http/1.1".to_vec()],
            client_cert: None,
        }
    }
    fn tls_config(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for r in &self.roots {
            roots.add(r.clone()).expect("root");
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&self.versions)
        .expect("versions")
        .with_root_certificates(roots);
        let mut config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => builder
                .with_client_auth_cert(vec![cert.clone()], key.clone_key())
                .expect("client cert"),
        };
        // Resumed sessions would report the old certificate: always do a full handshake.
        config.resumption = rustls::client::Resumption::disabled();
        config.alpn_protocols = self.alpn.clone();
        Arc::new(config)
    }
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Body>),
    H2(hyper::client::conn::http2::SendRequest<Body>),
}

struct Conn {
    sender: Sender,
    peer_cert: Vec<u8>,
    version: rustls::ProtocolVersion,
    alpn: Option<Vec<u8>>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn connect(addr: SocketAddr, opts: &ClientOpts) -> Result<Conn, BoxError> {
    let tcp = TcpStream::connect(addr).await?;
    // As Go's clients (kube-apiserver) do: without it, a request written
    // in two segments waits for the server's delayed ACK (about 40 ms).
    tcp.set_nodelay(true)?;
    let connector = TlsConnector::from(opts.tls_config());
    let name = ServerName::IpAddress(addr.ip().into());
    let tls = connector.connect(name, tcp).await?;
    let (_, session) = tls.get_ref();
    let peer_cert = session
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .unwrap_or_default();
    let version = session.protocol_version().ok_or("no version")?;
    let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
    let io = TokioIo::new(tls);
    let sender = if alpn.as_deref() == Some(b"h2") {
        let (s, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
        tokio::spawn(conn);
        Sender::H2(s)
    } else {
        let (s, conn) = hyper::client::conn::http1::handshake(io).await?;
        tokio::spawn(conn);
        Sender::H1(s)
    };
    Ok(Conn {
        sender,
        peer_cert,
        version,
        alpn,
    })
}

impl Conn {
    async fn send(&mut self, req: Request<Body>) -> Result<(StatusCode, Bytes), BoxError> {
        let resp = match &mut self.sender {
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
        Ok((status, body))
    }
    async fn post(&mut self, path: &str, body: Vec<u8>) -> Result<(StatusCode, Bytes), BoxError> {
        let req = Request::post(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)).boxed())?;
        self.send(req).await
    }
    async fn get(&mut self, path: &str) -> Result<(StatusCode, Bytes), BoxError> {
        let req = Request::get(path)
            .header("host", "localhost")
            .body(Full::new(Bytes::new()).boxed())?;
        self.send(req).await
    }
}

fn review(uid: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "cm",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": "default"},
                "data": {"a": "b"}
            },
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

fn review_bytes(uid: &str) -> Vec<u8> {
    serde_json::to_vec(&review(uid)).expect("json")
}

fn response_of(body: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(body).unwrap_or_else(|e| {
        panic!(
            "answer is not JSON ({e}): {}",
            String::from_utf8_lossy(body)
        )
    });
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1", "{v}");
    assert_eq!(v["kind"], "AdmissionReview", "{v}");
    v["response"].clone()
}

/// Value of one sample line in the /metrics text (`name{labels}` exactly as written).
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn scrape(addr: SocketAddr, ca: &CertBundle) -> String {
    let mut c = connect(addr, &ClientOpts::trusting(&[ca]))
        .await
        .expect("connect");
    let (status, body) = c.get("/metrics").await.expect("metrics");
    assert_eq!(status, StatusCode::OK);
    String::from_utf8(body.to_vec()).expect("utf8")
}

// --------------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls12_and_tls13_succeed_with_alpn() {
    let b = bundle();
    let s = start(&b).await;
    for (version, expect) in [
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
    ] {
        for alpn in [b"h2".to_vec(), b"http/1.1".to_vec()] {
            let mut opts = ClientOpts::trusting(&[&b]);
            opts.versions = vec![version];
            opts.alpn = vec![alpn.clone()];
            let mut c = connect(s.addr, &opts).await.expect("handshake");
            assert_eq!(c.version, expect);
            assert_eq!(c.alpn.as_deref(), Some(alpn.as_slice()));
            assert_eq!(c.peer_cert, der(&b.cert_pem).to_vec());
            let (status, body) = c.get("/healthz").await.expect("healthz");
            assert_eq!(status, StatusCode::OK);
            assert_eq!(&body[..], b"ok\n");
        }
    }
    s.shutdown().await;
}

/// A hand-made TLS 1.1 ClientHello (no supported_versions extension).
fn tls11_client_hello() -> Vec<u8> {
    let mut body = vec![0x03, 0x02]; // client_version TLS 1.1
    body.extend([0x5a; 32]); // random
    body.push(0); // empty session id
    let suites: [u16; 4] = [0xc013, 0xc014, 0x002f, 0x0035];
    body.extend(((suites.len() * 2) as u16).to_be_bytes());
    for s in suites {
        body.extend(s.to_be_bytes());
    }
    body.extend([1, 0]); // compression: null
    let mut hs = vec![1]; // ClientHello
    hs.extend(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend(body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend((hs.len() as u16).to_be_bytes());
    rec.extend(hs);
    rec
}

/// A TLS 1.1 ClientHello whose SNI names an IP address: rustls logs a
/// warning as it decodes the hello, then refuses the version.
fn client_hello_with_ip_sni() -> Vec<u8> {
    let host = b"127.0.0.1";
    let mut names = vec![0]; // host_name
    names.extend((host.len() as u16).to_be_bytes());
    names.extend(host);
    let mut ext = vec![0, 0]; // server_name
    ext.extend(((names.len() + 2) as u16).to_be_bytes());
    ext.extend((names.len() as u16).to_be_bytes());
    ext.extend(names);
    let mut rec = tls11_client_hello();
    // Append the extensions block and fix the two lengths before it.
    rec.extend((ext.len() as u16).to_be_bytes());
    rec.extend(&ext);
    let added = ext.len() + 2;
    let hs_len = u32::from_be_bytes([0, rec[6], rec[7], rec[8]]) as usize + added;
    rec[6..9].copy_from_slice(&(hs_len as u32).to_be_bytes()[1..]);
    let rec_len = u16::from_be_bytes([rec[3], rec[4]]) as usize + added;
    rec[3..5].copy_from_slice(&(rec_len as u16).to_be_bytes());
    rec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls11_is_refused() {
    let b = bundle();
    let s = start(&b).await;
    let mut tcp = TcpStream::connect(s.addr).await.expect("tcp");
    tcp.write_all(&tls11_client_hello()).await.expect("hello");
    let mut buf = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf))
        .await
        .expect("server answers")
        .expect("read");
    // A fatal alert record (rustls says handshake_failure, 40); never a ServerHello.
    assert!(n >= 7, "short answer: {:?}", &buf[..n]);
    assert_eq!(buf[0], 0x15, "expected an alert, got {:?}", &buf[..n]);
    assert_eq!(buf[5], 2, "expected a fatal alert, got {:?}", &buf[..n]);
    assert!(
        [40, 70].contains(&buf[6]),
        "expected handshake_failure or protocol_version, got {:?}",
        &buf[..n]
    );
    let metrics = scrape(s.addr, &b).await;
    assert_eq!(
        metric(
            &metrics,
            "interlock_tls_handshake_failures_total{reason=\"error\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let b = bundle();
    let reviewer = Arc::new(TestReviewer::default()); // not ready
    let s = start_with(&b, reviewer.clone(), |_| {}, false).await;
    let mut c = connect(s.addr, &ClientOpts::trusting(&[&b]))
        .await
        .expect("connect");
    assert_eq!(c.get("/healthz").await.expect("healthz").0, StatusCode::OK);
    assert_eq!(
        c.get("/readyz").await.expect("readyz").0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    reviewer.ready.store(true, Ordering::SeqCst);
    assert_eq!(c.get("/readyz").await.expect("readyz").0, StatusCode::OK);
    assert_eq!(c.get("/nope").await.expect("404").0, StatusCode::NOT_FOUND);
    assert_eq!(
        c.get("/validate").await.expect("405").0,
        StatusCode::METHOD_NOT_ALLOWED
    );

    let (status, _) = c
        .post("/validate", review_bytes("m-1"))
        .await
        .expect("post");
    assert_eq!(status, StatusCode::OK);
    let text = scrape(s.addr, &b).await;
    for name in [
        "# TYPE interlock_admission_requests counter",
        "# TYPE interlock_admission_request_duration_seconds histogram",
        "# TYPE interlock_admission_in_flight_requests gauge",
        "# TYPE interlock_tls_certificate_reloads counter",
        "# TYPE interlock_tls_certificate_reload_failures counter",
        "# TYPE interlock_test_reviewer_evaluations counter",
    ] {
        assert!(text.contains(name), "missing {name:?} in\n{text}");
    }
    assert_eq!(
        metric(
            &text,
            "interlock_admission_requests_total{endpoint=\"validate\",decision=\"allowed\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "interlock_test_reviewer_evaluations_total"),
        Some(1.0)
    );
    assert_eq!(
        metric(&text, "interlock_admission_in_flight_requests"),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &text,
            "interlock_admission_request_duration_seconds_count{endpoint=\"validate\"}"
        ),
        Some(1.0)
    );
    assert!(text.trim_end().ends_with("# EOF"));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_reviews_round_trip_with_uid() {
    let b = bundle();
    let s = start(&b).await;
    for alpn in [b"http/1.1".to_vec(), b"h2".to_vec()] {
        let mut opts = ClientOpts::trusting(&[&b]);
        opts.alpn = vec![alpn.clone()];
        let mut c = connect(s.addr, &opts).await.expect("connect");
        let tag = String::from_utf8_lossy(&alpn).replace('/', "");

        // Allowed; the apiserver's ?timeout= query is ignored.
        let uid = format!("allow-{tag}");
        let (status, body) = c
            .post("/validate?timeout=10s", review_bytes(&uid))
            .await
            .expect("validate");
        assert_eq!(status, StatusCode::OK);
        let r = response_of(&body);
        assert_eq!(r["uid"], uid.as_str());
        assert_eq!(r["allowed"], true);
        assert!(r.get("patch").is_none());

        // Denied, with the reviewer's message.
        let uid = format!("deny-{tag}");
        let (status, body) = c.post("/validate", review_bytes(&uid)).await.expect("deny");
        assert_eq!(status, StatusCode::OK);
        let r = response_of(&body);
        assert_eq!(r["uid"], uid.as_str());
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["message"], "test policy says no");

        // Mutate: a base64 JSON patch.
        let uid = format!("mutate-{tag}");
        let (status, body) = c
            .post("/mutate?timeout=10s", review_bytes(&uid))
            .await
            .expect("mutate");
        assert_eq!(status, StatusCode::OK);
        let r = response_of(&body);
        assert_eq!(r["uid"], uid.as_str());
        assert_eq!(r["allowed"], true);
        assert_eq!(r["patchType"], "JSONPatch");
        // kube encodes the bytes as a JSON array of numbers, which Go's
        // decoder accepts for []byte like the usual base64 string.
        let patch: Vec<u8> = match &r["patch"] {
            Value::String(b64) => {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .expect("base64")
            }
            other => serde_json::from_value(other.clone()).expect("patch bytes"),
        };
        let patch: Value = serde_json::from_slice(&patch).expect("patch json");
        assert_eq!(patch[0]["path"], "/metadata/labels");

        // A panicking reviewer: 500 with the uid, and the server lives on.
        let uid = format!("panic-{tag}");
        let (status, body) = c
            .post("/validate", review_bytes(&uid))
            .await
            .expect("panic");
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        let r = response_of(&body);
        assert_eq!(r["uid"], uid.as_str());
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["code"], 500);
        assert_eq!(c.get("/healthz").await.expect("alive").0, StatusCode::OK);
    }
    let uids = s.reviewer.uids();
    for want in ["allow-http1.1", "deny-h2", "mutate-h2", "panic-http1.1"] {
        assert!(
            uids.iter().any(|u| u == want),
            "{want} not recorded: {uids:?}"
        );
    }
    let text = scrape(s.addr, &b).await;
    assert_eq!(
        metric(
            &text,
            "interlock_admission_requests_total{endpoint=\"validate\",decision=\"denied\"}"
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "interlock_admission_requests_total{endpoint=\"mutate\",decision=\"patched\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        metric(
            &text,
            "interlock_admission_requests_total{endpoint=\"validate\",decision=\"error\"}"
        ),
        Some(2.0)
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_limits() {
    let b = bundle();
    let s = start(&b).await;
    let mut c = connect(s.addr, &ClientOpts::trusting(&[&b]))
        .await
        .expect("connect");

    // An UPDATE with object and oldObject near etcd's 1.5 MiB limit fits the default.
    let mut big = review("big-update");
    let filler = "x".repeat(1_400_000);
    big["request"]["operation"] = json!("UPDATE");
    big["request"]["object"]["data"]["a"] = json!(filler);
    big["request"]["oldObject"] = big["request"]["object"].clone();
    let big = serde_json::to_vec(&big).expect("json");
    assert!(big.len() > 2_800_000 && big.len() < 3 * 1024 * 1024);
    let (status, body) = c.post("/validate", big).await.expect("big");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response_of(&body)["uid"], "big-update");

    // One byte over the limit, with Content-Length: 413 before the body is
    // read. Over HTTP/2 the client gets the answer; over HTTP/1.1 the server
    // closes the connection after answering, so a client still writing may
    // see the reset instead.
    let oversized = vec![b' '; 3 * 1024 * 1024 + 1];
    let mut opts = ClientOpts::trusting(&[&b]);
    opts.alpn = vec![b"h2".to_vec()];
    let mut h2 = connect(s.addr, &opts).await.expect("connect h2");
    let (status, body) = h2
        .post("/validate", oversized.clone())
        .await
        .expect("oversized");
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(response_of(&body)["status"]["code"], 413);
    match c.post("/validate", oversized).await {
        Ok((status, _)) => assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE),
        // The server answered and closed while the client was writing.
        Err(e) => eprintln!("HTTP/1.1 oversized body: {e}"),
    }

    // Oversized and streamed (no Content-Length): 413 once the limit is crossed.
    let mut c = connect(s.addr, &opts).await.expect("connect h2");
    let chunks =
        (0..64).map(|_| Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b' '; 64 * 1024]))));
    let req = Request::post("/validate")
        .header("host", "localhost")
        .body(BodyExt::boxed(StreamBody::new(futures::stream::iter(
            chunks,
        ))))
        .expect("request");
    let (status, _) = c.send(req).await.expect("chunked");
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(!s.reviewer.uids().is_empty());
    let text = scrape(s.addr, &b).await;
    assert_eq!(
        metric(
            &text,
            "interlock_admission_requests_total{endpoint=\"validate\",decision=\"too_large\"}"
        ),
        Some(3.0),
        "{text}"
    );
    s.shutdown().await;
}

/// Every body, small or large, is evaluated on an evaluation thread, never
/// on the async worker that read it (issue 17: an evaluation blocked on the
/// engine's lock froze the workers, `/healthz` included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_body_is_evaluated_off_the_async_workers() {
    let b = bundle();
    let reviewer = TestReviewer::ready();
    let small = review_bytes("allow-small");
    let mut large = review("allow-large");
    large["request"]["object"]["data"]["padding"] = json!("x".repeat(100_000));
    let large = serde_json::to_vec(&large).expect("json");
    let s = start_with(&b, reviewer.clone(), |_| {}, false).await;
    let mut c = connect(s.addr, &ClientOpts::trusting(&[&b]))
        .await
        .expect("connect");
    for body in [small, large] {
        let (status, answer) = c.post("/validate", body).await.expect("validate");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(response_of(&answer)["allowed"], true);
    }
    let threads = reviewer.threads.lock().expect("lock").clone();
    assert_eq!(threads.len(), 2, "{threads:?}");
    assert!(
        threads.iter().all(|t| t.starts_with("interlock-eval")),
        "{threads:?}"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_limit_and_deadline() {
    let b = bundle();
    let reviewer = TestReviewer::ready();
    *reviewer.delay.lock().expect("lock") = Duration::from_millis(800);
    let s = start_with(
        &b,
        reviewer,
        |c| {
            c.max_body_bytes = 4096;
            c.request_timeout = Duration::from_millis(200);
        },
        false,
    )
    .await;
    let mut c = connect(s.addr, &ClientOpts::trusting(&[&b]))
        .await
        .expect("connect");
    let mut r = review("small");
    r["request"]["object"]["data"]["a"] = json!("y".repeat(5000));
    let (status, _) = c
        .post("/validate", serde_json::to_vec(&r).expect("json"))
        .await
        .expect("post");
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    let started = Instant::now();
    let (status, body) = c
        .post("/validate", review_bytes("slow-1"))
        .await
        .expect("slow");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        started.elapsed() < Duration::from_millis(700),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(response_of(&body)["allowed"], false);
    let text = scrape(s.addr, &b).await;
    assert_eq!(
        metric(
            &text,
            "interlock_admission_requests_total{endpoint=\"validate\",decision=\"timeout\"}"
        ),
        Some(1.0),
        "{text}"
    );
    s.shutdown().await;
}

/// Bodies that are not AdmissionReviews: each gets 400 with an
/// AdmissionReview-shaped answer; none kills the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_bodies_get_400() {
    let b = bundle();
    let s = start(&b).await;
    let mut c = connect(s.addr, &ClientOpts::trusting(&[&b]))
        .await
        .expect("connect");
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let no_request = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec();
    let mut no_uid = review("x");
    no_uid["request"]
        .as_object_mut()
        .expect("obj")
        .remove("uid");
    let cases: Vec<Vec<u8>> = vec![
        vec![],
        b"{".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"\"AdmissionReview\"".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x80],
        deep.into_bytes(),
        no_request,
        serde_json::to_vec(&no_uid).expect("json"),
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1e999}}"#
            .to_vec(),
    ];
    for (i, body) in cases.into_iter().enumerate() {
        for path in ["/validate", "/mutate"] {
            let (status, answer) = c.post(path, body.clone()).await.expect("answer");
            assert_eq!(status, StatusCode::BAD_REQUEST, "case {i} on {path}");
            let r = response_of(&answer);
            assert_eq!(r["allowed"], false, "case {i}");
            assert_eq!(r["status"]["code"], 400, "case {i}");
            assert!(r["status"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()));
        }
    }
    assert!(s.reviewer.uids().is_empty(), "reviewer called on garbage");
    assert_eq!(c.get("/healthz").await.expect("alive").0, StatusCode::OK);
    s.shutdown().await;
}

fn mutate_bytes(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            1 => v.truncate(rng.below(v.len() + 1)),
            2 => {
                let i = rng.below(v.len() + 1);
                let junk: Vec<u8> = (0..rng.below(16)).map(|_| rng.next() as u8).collect();
                v.splice(i..i, junk);
            }
            3 if !v.is_empty() => {
                let a = rng.below(v.len());
                let b = (a + rng.below(64)).min(v.len());
                let piece = v[a..b].to_vec();
                let i = rng.below(v.len() + 1);
                v.splice(i..i, piece);
            }
            4 => {
                let tokens: [&[u8]; 8] = [
                    b"null", b"{}", b"[]", b"\"", b"1e400", b"-0", b"\\u0000", b"true",
                ];
                let t = tokens[rng.below(tokens.len())];
                let i = rng.below(v.len() + 1);
                v.splice(i..i, t.iter().copied());
            }
            _ => {
                let len = rng.below(32);
                v = (0..len).map(|_| rng.next() as u8).collect();
            }
        }
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_bodies_never_crash_the_server() {
    let b = bundle();
    let s = start(&b).await;
    let mut c = connect(s.addr, &ClientOpts::trusting(&[&b]))
        .await
        .expect("connect");
    let seed = review_bytes("fuzz-seed");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut ok, mut bad) = (0, 0);
    for i in 0..400 {
        let body = mutate_bytes(&mut rng, &seed);
        let path = if i % 2 == 0 { "/validate" } else { "/mutate" };
        let (status, answer) = c.post(path, body.clone()).await.expect("server answers");
        match status {
            StatusCode::OK => ok += 1,
            StatusCode::BAD_REQUEST => bad += 1,
            other => panic!("{other} for {:?}", String::from_utf8_lossy(&body)),
        }
        let r = response_of(&answer);
        assert!(r["allowed"].is_boolean());
    }
    assert!(bad > 100, "mutations too gentle: ok={ok} bad={bad}");
    assert_eq!(c.get("/healthz").await.expect("alive").0, StatusCode::OK);
    s.shutdown().await;
}

/// Stream requests over a kept-alive connection and over fresh connections
/// while `rotate` changes the certificate files; then check that fresh
/// connections get `new` and that no request failed.
async fn rotation_under_load(
    s: &TestServer,
    trust: &[&CertBundle],
    old: &CertBundle,
    new: &CertBundle,
    rotate: impl FnOnce(),
) {
    let opts = Arc::new(ClientOpts::trusting(trust));
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let served = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let kept_ok = Arc::new(AtomicUsize::new(0));

    let mut kept = connect(s.addr, &opts).await.expect("kept-alive connection");
    assert_eq!(kept.peer_cert, der(&old.cert_pem).to_vec());
    let keep_task = {
        let (stop, failures, kept_ok) = (stop.clone(), failures.clone(), kept_ok.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                match kept
                    .post("/validate", review_bytes(&format!("keep-{i}")))
                    .await
                {
                    Ok((StatusCode::OK, _)) => {
                        kept_ok.fetch_add(1, Ordering::SeqCst);
                    }
                    other => failures
                        .lock()
                        .expect("lock")
                        .push(format!("kept {i}: {other:?}")),
                }
            }
        })
    };
    let fresh_task = {
        let (stop, failures, served, opts, addr) = (
            stop.clone(),
            failures.clone(),
            served.clone(),
            opts.clone(),
            s.addr,
        );
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                match connect(addr, &opts).await {
                    Ok(mut c) => {
                        served.lock().expect("lock").push(c.peer_cert.clone());
                        match c
                            .post("/validate", review_bytes(&format!("fresh-{i}")))
                            .await
                        {
                            Ok((StatusCode::OK, _)) => {}
                            other => failures
                                .lock()
                                .expect("lock")
                                .push(format!("fresh {i}: {other:?}")),
                        }
                    }
                    Err(e) => failures
                        .lock()
                        .expect("lock")
                        .push(format!("connect {i}: {e}")),
                }
            }
        })
    };

    tokio::time::sleep(Duration::from_millis(200)).await;
    rotate();
    let new_der = der(&new.cert_pem).to_vec();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if served.lock().expect("lock").last() == Some(&new_der) {
            break;
        }
        assert!(Instant::now() < deadline, "new certificate never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = kept_ok.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::SeqCst);
    keep_task.await.expect("keep task");
    fresh_task.await.expect("fresh task");

    let failures = failures.lock().expect("lock");
    assert!(failures.is_empty(), "failed requests: {failures:?}");
    assert!(
        kept_ok.load(Ordering::SeqCst) > before,
        "kept-alive connection stalled"
    );
    let served = served.lock().expect("lock");
    eprintln!(
        "rotation: {} kept-alive requests, {} fresh connections, no failure",
        kept_ok.load(Ordering::SeqCst),
        served.len()
    );
    assert!(
        served.len() >= 5,
        "too few fresh connections: {}",
        served.len()
    );
    let first_new = served
        .iter()
        .position(|c| *c == new_der)
        .expect("new served");
    assert!(
        served[first_new..].iter().all(|c| *c == new_der),
        "old certificate served after the new one"
    );
    assert!(served[..first_new]
        .iter()
        .all(|c| *c == der(&old.cert_pem).to_vec()));
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_rotation_by_kubelet_symlink_swap_and_by_file_replace() {
    let (b1, b2, b3) = (bundle(), bundle(), bundle());
    let s = start_with(&b1, TestReviewer::ready(), |_| {}, true).await;
    assert!(std::fs::symlink_metadata(s.dir.join("tls.crt"))
        .expect("link")
        .file_type()
        .is_symlink());
    let dir = s.dir.clone();
    rotation_under_load(&s, &[&b1, &b2, &b3], &b1, &b2, || {
        kubelet_publish(&dir, "..2026_02_01_00_00_00.2", &b2)
    })
    .await;
    let text = scrape(s.addr, &b2).await;
    assert_eq!(
        metric(&text, "interlock_tls_certificate_reloads_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "interlock_tls_certificate_reload_failures_total"),
        Some(0.0)
    );

    // Plain files replaced in place (as `interlock certs --force` does).
    let dir = s.dir.clone();
    rotation_under_load(&s, &[&b1, &b2, &b3], &b2, &b3, || {
        for f in ["tls.crt", "tls.key", "ca.crt"] {
            std::fs::remove_file(dir.join(f)).expect("unlink symlink");
        }
        write_plain(&dir, &b3);
    })
    .await;
    let text = scrape(s.addr, &b3).await;
    assert_eq!(
        metric(&text, "interlock_tls_certificate_reloads_total"),
        Some(2.0),
        "{text}"
    );
    s.shutdown().await;
}

/// Replaces a file in one step, as a Secret volume does: a poll never reads
/// it half-written (which would count as one more distinct failure).
fn replace(path: &Path, content: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_new_certificate_keeps_the_old_one() {
    let (b1, b2) = (bundle(), bundle());
    let s = start(&b1).await;
    let trust = ClientOpts::trusting(&[&b1, &b2]);
    let served = |c: &Conn| c.peer_cert.clone();

    // Garbage certificate.
    replace(&s.dir.join("tls.crt"), b"not a certificate");
    tokio::time::sleep(Duration::from_millis(400)).await; // several polls
    let c = connect(s.addr, &trust).await.expect("still serving");
    assert_eq!(served(&c), der(&b1.cert_pem).to_vec());
    let text = scrape(s.addr, &b1).await;
    assert_eq!(
        metric(&text, "interlock_tls_certificate_reload_failures_total"),
        Some(1.0),
        "counted once per distinct content: {text}"
    );

    // A certificate whose key does not match.
    replace(&s.dir.join("tls.crt"), b2.cert_pem.as_bytes());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let c = connect(s.addr, &trust).await.expect("still serving");
    assert_eq!(served(&c), der(&b1.cert_pem).to_vec());
    // Missing key file.
    std::fs::remove_file(s.dir.join("tls.key")).expect("rm");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let text = scrape(s.addr, &b1).await;
    assert_eq!(
        metric(&text, "interlock_tls_certificate_reload_failures_total"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "interlock_tls_certificate_reloads_total"),
        Some(0.0)
    );

    // The matching key arrives: the new pair is served.
    std::fs::write(s.dir.join("tls.key"), &b2.key_pem).expect("write");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let c = connect(s.addr, &trust).await.expect("connect");
        if served(&c) == der(&b2.cert_pem).to_vec() {
            break;
        }
        assert!(Instant::now() < deadline, "valid pair never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = scrape(s.addr, &b2).await;
    assert_eq!(
        metric(&text, "interlock_tls_certificate_reloads_total"),
        Some(1.0)
    );
    s.shutdown().await;
}

/// A client CA and a client certificate signed by it.
fn client_identity() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().expect("key");
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "test client CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca, &ca_key);
    let key = KeyPair::generate().expect("key");
    let mut leaf = CertificateParams::default();
    leaf.distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = leaf.signed_by(&key, &issuer).expect("leaf");
    (
        ca_cert.pem(),
        cert.der().clone(),
        PrivateKeyDer::try_from(key.serialize_der()).expect("key der"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_ca_mode_requires_a_valid_client_certificate() {
    let b = bundle();
    let (ca_pem, cert, key) = client_identity();
    let (other_ca, other_cert, other_key) = client_identity();
    drop(other_ca);
    let ca_file = tempfile::NamedTempFile::new().expect("tmp");
    std::fs::write(ca_file.path(), &ca_pem).expect("write ca");
    let ca_path = ca_file.path().to_owned();
    let s = start_with(
        &b,
        TestReviewer::ready(),
        move |c| c.client_ca = Some(ca_path),
        false,
    )
    .await;

    // Without a certificate: the handshake or the first request fails.
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut opts = ClientOpts::trusting(&[&b]);
        opts.versions = vec![version];
        let outcome = match connect(s.addr, &opts).await {
            Err(e) => Err(e.to_string()),
            Ok(mut c) => c
                .post("/validate", review_bytes("anon"))
                .await
                .map(|r| r.0)
                .map_err(|e| e.to_string()),
        };
        assert!(
            outcome.is_err(),
            "{version:?}: request without client cert got {outcome:?}"
        );
    }
    // A certificate from another CA.
    let mut opts = ClientOpts::trusting(&[&b]);
    opts.client_cert = Some((other_cert, other_key));
    let outcome = match connect(s.addr, &opts).await {
        Err(e) => Err(e.to_string()),
        Ok(mut c) => c
            .post("/validate", review_bytes("stranger"))
            .await
            .map(|r| r.0)
            .map_err(|e| e.to_string()),
    };
    assert!(outcome.is_err(), "foreign client cert got {outcome:?}");

    // The right certificate.
    let mut opts = ClientOpts::trusting(&[&b]);
    opts.client_cert = Some((cert, key));
    let mut c = connect(s.addr, &opts).await.expect("mutual TLS");
    let (status, body) = c
        .post("/validate", review_bytes("apiserver"))
        .await
        .expect("post");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response_of(&body)["uid"], "apiserver");
    assert_eq!(s.reviewer.uids(), ["apiserver"]);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_in_flight_requests() {
    let b = bundle();
    let reviewer = TestReviewer::ready();
    *reviewer.delay.lock().expect("lock") = Duration::from_millis(600);
    let mut s = start_with(&b, reviewer, |_| {}, false).await;
    let opts = ClientOpts::trusting(&[&b]);
    let mut c = connect(s.addr, &opts).await.expect("connect");
    let mut idle = connect(s.addr, &opts).await.expect("idle connection");
    assert_eq!(
        idle.get("/healthz").await.expect("healthz").0,
        StatusCode::OK
    );

    let in_flight =
        tokio::spawn(async move { c.post("/validate", review_bytes("slow-inflight")).await });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        s.reviewer.uids(),
        ["slow-inflight"],
        "request reached the reviewer"
    );
    let started = Instant::now();
    let _ = s.stop.take().expect("stop").send(());

    let (status, body) = in_flight
        .await
        .expect("join")
        .expect("in-flight request completed");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response_of(&body)["uid"], "slow-inflight");
    tokio::time::timeout(Duration::from_secs(5), &mut s.task)
        .await
        .expect("server stopped")
        .expect("join")
        .expect("serve ok");
    assert!(started.elapsed() < Duration::from_secs(3));
    // The listener is closed and idle connections were closed.
    assert!(TcpStream::connect(s.addr).await.is_err(), "still accepting");
    assert!(
        idle.get("/healthz").await.is_err(),
        "idle connection still open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshake_is_dropped() {
    let b = bundle();
    let s = start_with(
        &b,
        TestReviewer::ready(),
        |c| c.tls_handshake_timeout = Duration::from_millis(200),
        false,
    )
    .await;
    let mut tcp = TcpStream::connect(s.addr).await.expect("tcp");
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(3), tcp.read(&mut buf))
        .await
        .expect("server closes the stalled connection")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let text = scrape(s.addr, &b).await;
    assert_eq!(
        metric(
            &text,
            "interlock_tls_handshake_failures_total{reason=\"timeout\"}"
        ),
        Some(1.0),
        "{text}"
    );
    s.shutdown().await;
}

// ------------------------------------------------------- a real SIGTERM

const CHILD_ENV: &str = "INTERLOCK_TEST_SIGTERM_CHILD";

/// Runs only as a child process of `sigterm_finishes_in_flight_request`:
/// serves with the real signal handler and prints its address.
#[test]
fn sigterm_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // not the child: nothing to do
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let reviewer = TestReviewer::ready();
        *reviewer.delay.lock().expect("lock") = Duration::from_millis(800);
        let config = config_for(Path::new(&dir));
        let server = Server::bind(config, reviewer).await.expect("bind");
        println!("LISTENING {}", server.local_addr());
        server
            .serve(interlock::server::shutdown_signal())
            .await
            .expect("serve");
        println!("STOPPED");
    });
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_request() {
    use tokio::io::AsyncBufReadExt;
    let b = bundle();
    let dir = tempfile::tempdir().expect("tempdir");
    write_plain(dir.path(), &b);
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "server_tls::sigterm_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn child");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let addr: SocketAddr = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.expect("read") {
            // libtest prints "test sigterm_child ... " before the test's output.
            if let Some((_, a)) = line.split_once("LISTENING ") {
                return a.trim().parse().expect("addr");
            }
        }
        panic!("child exited before listening");
    })
    .await
    .expect("child listens");

    let mut c = connect(addr, &ClientOpts::trusting(&[&b]))
        .await
        .expect("connect");
    let in_flight =
        tokio::spawn(async move { c.post("/validate", review_bytes("slow-sigterm")).await });
    tokio::time::sleep(Duration::from_millis(250)).await;
    let pid = child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());

    let (status, body) = in_flight
        .await
        .expect("join")
        .expect("in-flight request completed");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response_of(&body)["uid"], "slow-sigterm");
    let exit = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("child exits")
        .expect("wait");
    assert!(exit.success(), "child exit: {exit:?}");
    let mut rest = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        rest.push(line);
    }
    assert!(rest.iter().any(|l| l.contains("STOPPED")), "{rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limit_queues_within_the_deadline() {
    let b = bundle();
    let reviewer = TestReviewer::ready();
    *reviewer.delay.lock().expect("lock") = Duration::from_millis(300);
    let s = start_with(
        &b,
        reviewer,
        |c| {
            c.max_concurrent_requests = 1;
            c.request_timeout = Duration::from_millis(500);
            c.eval_threads = Some(4);
        },
        false,
    )
    .await;
    let opts = ClientOpts::trusting(&[&b]);
    let mut c1 = connect(s.addr, &opts).await.expect("connect");
    let mut c2 = connect(s.addr, &opts).await.expect("connect");
    let mut c3 = connect(s.addr, &opts).await.expect("connect");
    // Three slow requests at once, one slot: the first runs (300 ms), the
    // second waits for it and finishes at ~600 ms, past the 500 ms deadline,
    // and so does the third.
    let (r1, r2, r3) = tokio::join!(
        c1.post("/validate", review_bytes("slow-a")),
        c2.post("/validate", review_bytes("slow-b")),
        c3.post("/validate", review_bytes("slow-c")),
    );
    let mut statuses: Vec<StatusCode> = [r1, r2, r3]
        .into_iter()
        .map(|r| r.expect("answer").0)
        .collect();
    statuses.sort();
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::SERVICE_UNAVAILABLE
        ]
    );
    // Never more than one evaluation at a time reached the reviewer before
    // the deadline: exactly one request was evaluated in time.
    let text = scrape(s.addr, &b).await;
    assert_eq!(
        metric(
            &text,
            "interlock_admission_requests_total{endpoint=\"validate\",decision=\"timeout\"}"
        ),
        Some(2.0),
        "{text}"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_delay_reports_not_ready_while_still_serving() {
    let b = bundle();
    let mut s = start_with(
        &b,
        TestReviewer::ready(),
        |c| c.shutdown_delay = Duration::from_millis(600),
        false,
    )
    .await;
    let opts = ClientOpts::trusting(&[&b]);
    let mut c = connect(s.addr, &opts).await.expect("connect");
    assert_eq!(c.get("/readyz").await.expect("readyz").0, StatusCode::OK);
    let _ = s.stop.take().expect("stop").send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    // During the delay: not ready, but new connections and requests are served.
    assert_eq!(
        c.get("/readyz").await.expect("readyz").0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let mut fresh = connect(s.addr, &opts).await.expect("still accepting");
    let (status, _) = fresh
        .post("/validate", review_bytes("during-delay"))
        .await
        .expect("served");
    assert_eq!(status, StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(5), &mut s.task)
        .await
        .expect("stopped")
        .expect("join")
        .expect("ok");
    assert!(TcpStream::connect(s.addr).await.is_err());
}

// ------------------------------------------- issue 17: freezes, idling, caps

/// What the server logged at WARN and above, once `capture_logs` ran (the
/// subscriber is process-wide: other tests' lines land here too).
static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct LogSink;

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().expect("logs").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_ansi(false)
        .with_writer(|| LogSink)
        .try_init();
}

/// Polls `f` every 50 ms until it is true or `within` passed.
async fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f()
}

/// One policy that runs for minutes within its cost budget on a ConfigMap
/// named `slow` (two million `size()`s of a 1 MiB string), and one that
/// looks ConfigMaps up, so an admitted ConfigMap is recorded under the
/// engine's write lock.
const FREEZE_POLICIES: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: slow}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["CREATE"]}
  validations:
    - expression: "object.metadata.name != 'slow' || cel.bind(r, lists.range(2000000), r.all(i, object.data.big.size() > 0))"
---
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: config-exists}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"]}
  validations:
    - expression: "inventory.get('v1', 'ConfigMap', object.metadata.namespace, object.spec.config).hasValue()"
"#;

fn freeze_engine() -> Arc<interlock::admission::Engine> {
    use interlock::manifest::{load_str, Format, Source};
    let docs = load_str(
        Source::file("freeze.yaml"),
        FREEZE_POLICIES,
        Format::Yaml,
        &Default::default(),
    );
    assert!(docs.errors.is_empty(), "{:?}", docs.errors);
    let mut inv = interlock::inventory::Inventory::new();
    let (set, errors) = interlock::policy::PolicySet::compile_documents(docs.documents);
    inv.set_indexes(&set.index_decls()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    inv.set_projection(set.projection());
    let engine = interlock::admission::Engine::new(set, inv, Default::default());
    engine.set_ready(true);
    Arc::new(engine)
}

/// Issue 17, item 1: one evaluation running for minutes plus one admitted
/// write of a kind a policy looks up (which waits for the engine's write
/// lock) froze every request, `/healthz` included. Now `/healthz` answers
/// while both are in flight, the deadline interrupts the long evaluation
/// (so the write lock is granted and the write answered long before the
/// minutes the evaluation would take), and the interruption is counted.
///
/// The server runs on a runtime of its own with one worker, so that a
/// blocked worker is a frozen server whatever the scheduling; the clients
/// (and their timeouts) run on the test's runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_an_evaluation_runs_and_the_deadline_stops_it() {
    let b = bundle();
    let tmp = tempfile::tempdir().expect("tempdir");
    write_plain(tmp.path(), &b);
    let mut config = config_for(tmp.path());
    config.request_timeout = Duration::from_secs(3);
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = server_rt.spawn(async move {
        let server = Server::bind(config, freeze_engine()).await.expect("bind");
        let _ = addr_tx.send(server.local_addr());
        server
            .serve(async move {
                let _ = stop_rx.await;
            })
            .await
    });
    let addr = addr_rx.await.expect("bound");
    let opts = ClientOpts::trusting(&[&b]);
    let configmap = |uid: &str, name: &str, big: usize| {
        let mut r = review(uid);
        r["request"]["name"] = json!(name);
        r["request"]["object"]["metadata"]["name"] = json!(name);
        r["request"]["object"]["data"]["big"] = json!("x".repeat(big));
        serde_json::to_vec(&r).expect("json")
    };
    // Every connection is made first: handshakes are slow in a debug
    // build, and the point is where the requests are when /healthz asks.
    let mut slow_conn = connect(addr, &opts).await.expect("connect");
    let mut write_conn = connect(addr, &opts).await.expect("connect");
    let mut c = connect(addr, &opts).await.expect("connect");
    let post = |mut conn: Conn, body: Vec<u8>| {
        tokio::spawn(async move {
            let started = Instant::now();
            let answer = conn.post("/validate", body).await.expect("answer");
            (answer, started.elapsed())
        })
    };
    assert_eq!(c.get("/healthz").await.expect("healthz").0, StatusCode::OK);
    assert_eq!(
        slow_conn.get("/healthz").await.expect("healthz").0,
        StatusCode::OK
    );
    assert_eq!(
        write_conn.get("/healthz").await.expect("healthz").0,
        StatusCode::OK
    );

    let slow = post(slow_conn, configmap("slow-1", "slow", 1 << 20));
    tokio::time::sleep(Duration::from_millis(800)).await;
    // Waits for the engine's write lock, behind the slow evaluation's read.
    let write = post(write_conn, configmap("write-1", "fast", 10));
    tokio::time::sleep(Duration::from_millis(800)).await;

    let health = tokio::time::timeout(Duration::from_secs(2), c.get("/healthz"))
        .await
        .expect("/healthz answers while the evaluation runs")
        .expect("healthz");
    assert_eq!(health.0, StatusCode::OK);

    let ((status, body), _) = tokio::time::timeout(Duration::from_secs(30), slow)
        .await
        .expect("the slow request is answered")
        .expect("join");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body:?}");
    let ((status, body), took) = tokio::time::timeout(Duration::from_secs(30), write)
        .await
        .expect("the write is answered once the evaluation is interrupted")
        .expect("join");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response_of(&body)["allowed"], true, "{body:?}");
    // Generous: the evaluation alone would take minutes.
    assert!(took < Duration::from_secs(20), "{took:?}");

    let interrupted = "interlock_expression_deadline_interrupted_total";
    // Counted as the interrupted evaluation returns, which may be just
    // after the write it held up was answered.
    let mut text = scrape(addr, &b).await;
    for _ in 0..100 {
        if metric(&text, interrupted).is_some_and(|n| n >= 1.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        text = scrape(addr, &b).await;
    }
    assert!(
        metric(&text, interrupted).is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        metric(&text, "interlock_expression_errors_total").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    server_rt.shutdown_background();
}

/// Issue 17, item 3: a connection with no request in flight for the idle
/// timeout is closed, whether it never sent a request (HTTP/1.1 or HTTP/2)
/// or went quiet after one; a request that takes longer than the idle
/// timeout is not cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    let b = bundle();
    let reviewer = TestReviewer::ready();
    *reviewer.delay.lock().expect("lock") = Duration::from_millis(900);
    let s = start_with(
        &b,
        reviewer,
        |c| c.idle_timeout = Duration::from_millis(300),
        false,
    )
    .await;

    // A TLS connection that sends nothing after its handshake.
    for alpn in [b"http/1.1".to_vec(), b"h2".to_vec()] {
        let mut opts = ClientOpts::trusting(&[&b]);
        opts.alpn = vec![alpn.clone()];
        let tcp = TcpStream::connect(s.addr).await.expect("tcp");
        let mut tls = TlsConnector::from(opts.tls_config())
            .connect(ServerName::IpAddress(s.addr.ip().into()), tcp)
            .await
            .expect("handshake");
        let mut buf = vec![0u8; 1024];
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            // An HTTP/2 server speaks first (SETTINGS, then GOAWAY): read
            // until the end of the stream.
            loop {
                match tls.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(
            closed.is_ok(),
            "{}: a silent connection stayed open",
            String::from_utf8_lossy(&alpn)
        );
    }

    // Connections that went quiet after a request.
    for alpn in [b"http/1.1".to_vec(), b"h2".to_vec()] {
        let mut opts = ClientOpts::trusting(&[&b]);
        opts.alpn = vec![alpn.clone()];
        let mut c = connect(s.addr, &opts).await.expect("connect");
        assert_eq!(c.get("/healthz").await.expect("healthz").0, StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            c.get("/healthz").await.is_err(),
            "{}: an idle connection stayed open",
            String::from_utf8_lossy(&alpn)
        );
    }

    // A request in flight for three idle timeouts is answered.
    let mut c = connect(s.addr, &ClientOpts::trusting(&[&b]))
        .await
        .expect("connect");
    let (status, _) = c
        .post("/validate", review_bytes("slow-in-flight"))
        .await
        .expect("answered");
    assert_eq!(status, StatusCode::OK);
    drop(c);

    let text = scrape(s.addr, &b).await;
    assert!(
        metric(&text, "interlock_connections_closed_total{reason=\"idle\"}")
            .is_some_and(|n| n >= 4.0),
        "{text}"
    );
    s.shutdown().await;
}

/// Issue 17, item 3: past `max_connections`, a connection is closed as it
/// is accepted, with a log line and a count; once a connection closes, new
/// ones are served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_refused_with_a_log_line() {
    capture_logs();
    let b = bundle();
    let s = start_with(&b, TestReviewer::ready(), |c| c.max_connections = 2, false).await;
    let opts = ClientOpts::trusting(&[&b]);
    let mut first = connect(s.addr, &opts).await.expect("first");
    let mut second = connect(s.addr, &opts).await.expect("second");
    assert_eq!(first.get("/healthz").await.expect("ok").0, StatusCode::OK);
    assert_eq!(second.get("/healthz").await.expect("ok").0, StatusCode::OK);

    let third = tokio::time::timeout(Duration::from_secs(5), connect(s.addr, &opts))
        .await
        .expect("refused at once, not queued");
    assert!(third.is_err(), "a third connection was served");
    let logged = eventually(Duration::from_secs(5), || {
        String::from_utf8_lossy(&LOGS.lock().expect("logs"))
            .contains("connection refused: --max-connections connections are open")
    })
    .await;
    assert!(
        logged,
        "{}",
        String::from_utf8_lossy(&LOGS.lock().expect("logs"))
    );

    // A slot frees when a connection closes.
    drop(first);
    let mut again = None;
    for _ in 0..100 {
        if let Ok(mut c) = connect(s.addr, &opts).await {
            if c.get("/healthz").await.is_ok() {
                again = Some(c);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut again = again.expect("served again once a connection closed");
    let (status, text) = again.get("/metrics").await.expect("metrics");
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8_lossy(&text);
    assert!(
        metric(
            &text,
            "interlock_refused_connections_total{reason=\"max_connections\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "interlock_open_connections"),
        Some(2.0),
        "{text}"
    );
    drop(second);
    s.shutdown().await;
}

const ACCEPT_CHILD_ENV: &str = "INTERLOCK_TEST_ACCEPT_CHILD";

/// Runs only as a child process of `accept_failures_back_off_and_log_once`
/// and `handshake_warnings_are_rate_limited`: serves with the server's own
/// logging to stderr (and, unless `INTERLOCK_TEST_NO_FD_LIMIT` is set, a
/// file-descriptor limit a few dozen above what it has open), and prints
/// its address.
#[cfg(unix)]
#[test]
fn accept_child() {
    let Ok(dir) = std::env::var(ACCEPT_CHILD_ENV) else {
        return; // not the child: nothing to do
    };
    interlock::server::init_tracing(false);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut config = config_for(Path::new(&dir));
        // Certificates are read once: a poll would fail for want of fds too.
        config.cert_poll_interval = Duration::from_secs(3600);
        let server = Server::bind(config, TestReviewer::ready())
            .await
            .expect("bind");
        if std::env::var_os("INTERLOCK_TEST_NO_FD_LIMIT").is_none() {
            let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count() as u64);
            let limit = libc::rlimit {
                rlim_cur: open + 24,
                rlim_max: open + 24,
            };
            // SAFETY: setrlimit reads the struct it is given; no memory is shared.
            assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
        }
        println!("LISTENING {}", server.local_addr());
        server
            .serve(interlock::server::shutdown_signal())
            .await
            .expect("serve");
    });
}

/// Starts `accept_child` serving the certificates in `dir` (with a low fd
/// limit when `fd_limit`); its address, and its stderr lines as they come.
#[cfg(unix)]
async fn spawn_logging_child(
    dir: &Path,
    fd_limit: bool,
) -> (tokio::process::Child, SocketAddr, Arc<Mutex<Vec<String>>>) {
    use tokio::io::AsyncBufReadExt;
    let mut command = tokio::process::Command::new(std::env::current_exe().expect("exe"));
    command
        .args([
            "--exact",
            "server_tls::accept_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ACCEPT_CHILD_ENV, dir)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if !fd_limit {
        command.env("INTERLOCK_TEST_NO_FD_LIMIT", "1");
    }
    let mut child = command.spawn().expect("spawn child");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let addr: SocketAddr = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.expect("read") {
            if let Some((_, a)) = line.split_once("LISTENING ") {
                return a.trim().parse().expect("addr");
            }
        }
        panic!("child exited before listening");
    })
    .await
    .expect("child listens");
    let stderr = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut errors = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let collected = stderr.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = errors.next_line().await {
            // Poisoned only when the test already failed.
            if let Ok(mut lines) = collected.lock() {
                lines.push(line);
            }
        }
    });
    (child, addr, stderr)
}

/// Issue 17, item 7: some handshakes make rustls log a warning each (an IP
/// address as SNI, an unexpected message...), and a client can fail
/// thousands a second. Now rustls's warnings pass at
/// most once per interval, and the server's own "TLS handshake failed"
/// line, also once per interval, counts the rest; every failure is still
/// counted in the metrics.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_warnings_are_rate_limited() {
    let b = bundle();
    let dir = tempfile::tempdir().expect("tempdir");
    write_plain(dir.path(), &b);
    let (mut child, addr, stderr) = spawn_logging_child(dir.path(), false).await;
    for _ in 0..30 {
        let mut tcp = TcpStream::connect(addr).await.expect("tcp");
        tcp.write_all(&client_hello_with_ip_sni())
            .await
            .expect("hello");
        let mut buf = vec![0u8; 64];
        let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await;
    }
    let text = scrape(addr, &b).await;
    assert_eq!(
        metric(
            &text,
            "interlock_tls_handshake_failures_total{reason=\"error\"}"
        ),
        Some(30.0),
        "{text}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lines = stderr.lock().expect("lines").clone();
    let rustls = lines.iter().filter(|l| l.contains("rustls")).count();
    let ours = lines
        .iter()
        .filter(|l| l.contains("TLS handshake failed"))
        .count();
    assert!(rustls <= 1 && ours == 1, "{lines:#?}");
    let _ = child.start_kill();
}

/// Issue 17, item 7: when file descriptors run out, `accept` fails until
/// connections close. The loop backs off instead of spinning, logs that
/// once per interval (it logged every 50 ms), counts every failure, and
/// serves again once descriptors are free.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_failures_back_off_and_log_once() {
    let b = bundle();
    let dir = tempfile::tempdir().expect("tempdir");
    write_plain(dir.path(), &b);
    let (mut child, addr, stderr) = spawn_logging_child(dir.path(), true).await;

    // Plain TCP connections that never handshake hold the child's fds.
    let mut held = Vec::new();
    for _ in 0..80 {
        if let Ok(Ok(c)) =
            tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await
        {
            held.push(c);
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let accept_lines = || {
        stderr
            .lock()
            .expect("lines")
            .iter()
            .filter(|l| l.contains("accept failed"))
            .count()
    };
    let logged = accept_lines();
    assert!(
        (1..=2).contains(&logged),
        "{logged} accept-failure lines in 2 s: {:?}",
        stderr.lock().expect("lines")
    );

    drop(held);
    let mut served = None;
    for _ in 0..100 {
        if let Ok(mut c) = connect(addr, &ClientOpts::trusting(&[&b])).await {
            if let Ok((StatusCode::OK, text)) = c.get("/metrics").await {
                served = Some(String::from_utf8_lossy(&text).into_owned());
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = served.expect("served again once descriptors were free");
    assert!(
        metric(&text, "interlock_accept_errors_total").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    let _ = child.start_kill();
}
