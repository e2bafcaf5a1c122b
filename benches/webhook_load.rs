//! Load generator for the admission webhook: AdmissionReviews of realistic
//! objects over TLS keep-alive connections on loopback, as the
//! kube-apiserver sends them, against the real admission engine (the bundled
//! policy library over an inventory of a synthetic cluster).
//!
//! `cargo bench --bench webhook_load` generates a cluster of `LOAD_OBJECTS`
//! objects with `benches/support/gen_cluster.rs` (the generator of
//! `benches/check.rs`), then measures two in-process servers one after the
//! other with the same requests:
//! - **baseline**: an allow-all reviewer (parsing, TLS, HTTP, encoding: the
//!   server's own cost);
//! - **engine**: `interlock::admission::Engine` with the bundled policies and
//!   every generated object in its inventory, as `interlock serve
//!   --inventory DIR` runs.
//!
//! Each server gets two phases:
//! 1. fixed rate (open loop): `LOAD_RATE` requests/s for `LOAD_SECS` over
//!    `LOAD_CONNS` connections; latency is measured from each request's
//!    *scheduled* time, so a stalled server cannot hide queueing
//!    (no coordinated omission). Target: p99 < 2 ms at 2,000 req/s.
//! 2. saturation (closed loop): `LOAD_SAT_CONNS` connections send as fast as
//!    answers come back for `LOAD_SECS`. Target: >= 10,000 req/s on 2 cores.
//!
//! The requests are a fixed mix, in every window of 20: 6 Deployment UPDATEs
//! (pod-references-exist looks up ConfigMaps, Secrets and the
//! ServiceAccount; pod security, limits and image tags), 4 Pod CREATEs of
//! new pods of existing Deployments, 3 Ingress UPDATEs (unique host index,
//! which finds the Ingress itself and must skip it), 3 Service UPDATEs
//! (unique selector index), 1 PodDisruptionBudget UPDATE (lists the
//! namespace's Deployments and matches their labels), 2 HPA UPDATEs
//! (`inventory.get` of the target) and 1 Ingress CREATE in another
//! namespace claiming an existing host, which must be denied. Every answer
//! is checked against the expected decision (a mismatch counts as an
//! error). Objects of the generator's deliberate violations are left out of
//! the samples by a dry-run pre-flight through the engine, so the expected
//! decision of each body is known.
//!
//! 3. with the whole library, `LOAD_RELOAD_ROUNDS` (3) rounds of the
//!    fixed-rate phase quiet, then while a thread changes the policies every
//!    `LOAD_RELOAD_EVERY_MS` (500 ms), as an applied InterlockPolicy object
//!    does under `serve --cluster-policies` (compiled outside the lock,
//!    swapped in by `Cluster::install`; support/policy_reload.rs): each
//!    round's two p99s side by side, and the median ratio. Target (issue
//!    32): no more than 2x.
//!
//! Environment (all optional):
//! `LOAD_OBJECTS` (50000), `LOAD_RATE` (2000), `LOAD_SECS` (5),
//! `LOAD_CONNS` (16), `LOAD_SAT_CONNS` (32), `LOAD_BODIES` (distinct
//! request bodies, 4096), `LOAD_PROTO` (`h1` or `h2`, default h1),
//! `LOAD_EVAL_THREADS` (server `--eval-threads`, default one per CPU),
//! `LOAD_PATH` (/validate), `LOAD_SKIP_BASELINE=1`, `LOAD_RELOAD_EVERY_MS`
//! (500), `LOAD_RELOAD_ROUNDS` (3), `LOAD_PENDING_TTL` (seconds an admitted
//! write stays recorded; long for repeatable callgrind counts), `LOAD_POLICIES` (comma-separated names: load
//! only these policies of the library, to profile one).
//! `LOAD_TARGET=127.0.0.1:8443`, `LOAD_CA=ca.crt` and `LOAD_CLUSTER=DIR`
//! measure a separately started server instead (loopback addresses only):
//! the cluster is written to DIR, start `interlock serve --inventory DIR`
//! on it, then run the bench again with the same variables (the client then
//! does not share its process with the server, only the cores).
//!
//! **The pinned form** (issue 34): `LOAD_SERVER_BIN=target/release/interlock`
//! starts that binary as `interlock serve --inventory DIR` on CPU 0 and
//! runs the client (this process) on the other CPUs; with
//! `LOAD_BASELINE_BIN=other/interlock` too, `LOAD_RUNS` (3) rounds of the
//! two in alternating order, each server started afresh, then the medians
//! of each with the ratio: p50/p99 at the fixed rate, the server's CPU per
//! request (its process's `/proc/PID/task/*/schedstat`), saturation of its
//! one core (support/pinned_ab.rs).
//!
//! In-process, client and server share the machine's cores, so the
//! saturation figures are a lower bound for the server alone. The server
//! runs on its own tokio runtime, and each phase reports the CPU time per
//! request of the server's threads (that runtime and the evaluation pool)
//! and of the client's, from `/proc/self/task/*/schedstat`. `LOAD_PIN=1`
//! pins the server's threads to CPU 0 and the client's to the others: the
//! saturation figure is then what the server serves on one core. The
//! machine's load average is printed next to the figures: the machine may
//! be shared.

#[path = "support/gen_cluster.rs"]
mod gen_cluster;
#[path = "support/pinned_ab.rs"]
mod pinned_ab;
#[path = "support/policy_reload.rs"]
mod policy_reload;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use interlock::admission::{Engine, EngineOptions};
use interlock::cluster::reload::inventory_from_files;
use interlock::inventory::Inventory;
use interlock::policy::PolicySet;
use interlock::server::{Reviewer, Server, ServerConfig};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::DynamicObject;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value as Json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

// The binary's allocator (src/main.rs), so that the in-process server costs
// what `interlock serve` does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Body = BoxBody<Bytes, Infallible>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Allows everything after looking at the object: the server's own cost.
struct AllowAll;
impl Reviewer for AllowAll {
    fn validate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let resp = AdmissionResponse::from(req);
        if req.object.as_ref().is_some_and(|o| o.data.is_null()) {
            resp.deny("no object")
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

/// `VmRSS` and `VmHWM` of this process, in MiB.
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets VmHWM to the current RSS (Linux >= 4.0); false if refused.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Thread name prefixes of the server's side of the process: its own tokio
/// runtime (TLS, HTTP) and the evaluation pool. Every other thread is the
/// client's.
const SERVER_THREADS: [&str; 2] = ["server-io", "interlock-eval"];

/// CPU time so far of each thread of the process (ns on CPU, from
/// `/proc/self/task/*/schedstat`), by thread id, with whether it is one of
/// the server's.
fn thread_cpu() -> std::collections::HashMap<u64, (bool, u64)> {
    let mut out = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let Some(tid) = path
            .file_name()
            .and_then(|n| n.to_str()?.parse::<u64>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let ns: u64 = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let server = SERVER_THREADS.iter().any(|p| comm.starts_with(p));
        out.insert(tid, (server, ns));
    }
    out
}

/// CPUs of the machine (not of this thread: pinning narrows
/// `available_parallelism`).
fn cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// `LOAD_PIN=1`: the server's threads on CPU 0, every other thread (the
/// client's) on the other CPUs, so that the server's throughput on one core
/// is measured without the client taking turns on it.
fn pin_threads() -> Result<(), BoxError> {
    let cpus = cpus();
    if cpus < 2 {
        return Err("LOAD_PIN needs at least two CPUs".into());
    }
    for (tid, (server, _)) in thread_cpu() {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
        // sched_setaffinity only read and write the set passed to them.
        let ok = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if server {
                libc::CPU_SET(0, &mut set);
            } else {
                (1..cpus).for_each(|c| libc::CPU_SET(c, &mut set));
            }
            libc::sched_setaffinity(tid as libc::pid_t, std::mem::size_of_val(&set), &set) == 0
        };
        if !ok {
            return Err(format!(
                "sched_setaffinity({tid}): {}",
                std::io::Error::last_os_error()
            )
            .into());
        }
    }
    Ok(())
}

/// CPU time (ns) the server's and the client's threads spent between two
/// [`thread_cpu`] snapshots. A thread that ended in between loses its last
/// share (none of the measured ones ends during a phase).
fn cpu_between(
    before: &std::collections::HashMap<u64, (bool, u64)>,
    after: &std::collections::HashMap<u64, (bool, u64)>,
) -> (u64, u64) {
    let (mut server, mut client) = (0, 0);
    for (tid, (is_server, ns)) in after {
        let spent = ns.saturating_sub(before.get(tid).map_or(0, |b| b.1));
        if *is_server {
            server += spent;
        } else {
            client += spent;
        }
    }
    (server, client)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

// ---------------------------------------------------------------------------
// Requests

/// One request body and the decision the engine must give.
#[derive(Clone)]
struct Sample {
    body: Bytes,
    allowed: bool,
    what: &'static str,
}

struct Gvr {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    resource: &'static str,
}

const DEPLOYMENT: Gvr = Gvr {
    group: "apps",
    version: "v1",
    kind: "Deployment",
    resource: "deployments",
};
const POD: Gvr = Gvr {
    group: "",
    version: "v1",
    kind: "Pod",
    resource: "pods",
};
const SERVICE: Gvr = Gvr {
    group: "",
    version: "v1",
    kind: "Service",
    resource: "services",
};
const INGRESS: Gvr = Gvr {
    group: "networking.k8s.io",
    version: "v1",
    kind: "Ingress",
    resource: "ingresses",
};
const PDB: Gvr = Gvr {
    group: "policy",
    version: "v1",
    kind: "PodDisruptionBudget",
    resource: "poddisruptionbudgets",
};
const HPA: Gvr = Gvr {
    group: "autoscaling",
    version: "v2",
    kind: "HorizontalPodAutoscaler",
    resource: "horizontalpodautoscalers",
};

fn review(uid: usize, gvr: &Gvr, object: &Json, old: Option<&Json>) -> Json {
    let gvk = json!({"group": gvr.group, "version": gvr.version, "kind": gvr.kind});
    let res = json!({"group": gvr.group, "version": gvr.version, "resource": gvr.resource});
    let (operation, options) = if old.is_some() {
        ("UPDATE", "UpdateOptions")
    } else {
        ("CREATE", "CreateOptions")
    };
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("00000000-0000-4000-8000-{uid:012}"),
            "kind": gvk, "resource": res, "requestKind": gvk, "requestResource": res,
            "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:ci:deployer",
                         "uid": "5e0c7a3e-1b5e-4c1a-9d1e-2b6f0f1d1a10",
                         "groups": ["system:serviceaccounts", "system:serviceaccounts:ci",
                                    "system:authenticated"]},
            "object": object, "oldObject": old, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": options,
                        "fieldManager": "kubectl-client-side-apply"}
        }
    })
}

/// What the server keeps on a stored object and a manifest lacks.
fn as_stored(o: &Json, n: usize) -> Json {
    let mut o = o.clone();
    if let Some(m) = o["metadata"].as_object_mut() {
        m.entry("uid")
            .or_insert_with(|| json!(format!("9a0b6a4e-0000-4000-8000-{n:012}")));
        m.insert("resourceVersion".into(), json!(format!("{}", 100_000 + n)));
        m.insert("generation".into(), json!(3));
        m.insert("creationTimestamp".into(), json!("2025-01-02T03:04:05Z"));
    }
    o
}

/// An UPDATE: the stored object, and the same with one label changed.
fn update(uid: usize, gvr: &Gvr, stored: &Json) -> Json {
    let old = as_stored(stored, uid);
    let mut new = old.clone();
    new["metadata"]["labels"]["load.interlock.dev/round"] = json!(format!("r{}", uid % 97));
    new["metadata"]["generation"] = json!(4);
    review(uid, gvr, &new, Some(&old))
}

/// Candidate requests (not yet checked) from the objects of a few namespaces.
fn candidates(docs: &[Json], n: usize) -> Vec<(Json, bool, &'static str)> {
    let of = |kind: &str| -> Vec<&Json> {
        docs.iter()
            .filter(|d| d["kind"] == kind && d["metadata"]["namespace"].is_string())
            .collect()
    };
    let (deployments, pods, services, ingresses, pdbs, hpas) = (
        of("Deployment"),
        of("Pod"),
        of("Service"),
        of("Ingress"),
        of("PodDisruptionBudget"),
        of("HorizontalPodAutoscaler"),
    );
    let namespaces: Vec<&str> = deployments
        .iter()
        .filter_map(|d| d["metadata"]["namespace"].as_str())
        .collect();
    if [&deployments, &pods, &services, &ingresses, &pdbs, &hpas]
        .iter()
        .any(|v| v.is_empty())
    {
        return vec![];
    }
    // Positions in each window of 20 (see the header).
    const MIX: [&str; 20] = [
        "deploy", "pod", "ingress", "service", "deploy", "hpa", "pod", "deploy", "service",
        "ingress", "deploy", "pod", "pdb", "deploy", "dup-host", "service", "pod", "ingress",
        "deploy", "hpa",
    ];
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let k = i / 20 * 7 + i % 7; // spreads each kind over the samples
        let pick = |v: &[&Json]| v[k % v.len()].clone();
        let item = match MIX[i % 20] {
            "deploy" => (
                update(i, &DEPLOYMENT, &pick(&deployments)),
                true,
                "Deployment UPDATE",
            ),
            "pod" => {
                // A new pod of an existing ReplicaSet, as its controller creates it.
                let mut p = pick(&pods);
                let name = p["metadata"]["name"].as_str().unwrap_or("pod").to_owned();
                let stem = name.rsplit_once('-').map_or(name.as_str(), |(a, _)| a);
                p["metadata"]["name"] = json!(format!("{stem}-l{i:05}"));
                p["metadata"]["generateName"] = json!(format!("{stem}-"));
                if let Some(m) = p["metadata"].as_object_mut() {
                    m.remove("uid");
                }
                if let Some(s) = p["spec"].as_object_mut() {
                    s.remove("nodeName");
                }
                (review(i, &POD, &p, None), true, "Pod CREATE")
            }
            "ingress" => (
                update(i, &INGRESS, &pick(&ingresses)),
                true,
                "Ingress UPDATE",
            ),
            "service" => (
                update(i, &SERVICE, &pick(&services)),
                true,
                "Service UPDATE",
            ),
            "pdb" => (update(i, &PDB, &pick(&pdbs)), true, "PDB UPDATE"),
            "hpa" => (update(i, &HPA, &pick(&hpas)), true, "HPA UPDATE"),
            _ => {
                // Another tenant claims an existing host: denied.
                let mut ing = pick(&ingresses);
                let ns = namespaces[(k * 7 + 3) % namespaces.len()];
                if ing["metadata"]["namespace"] == ns {
                    continue;
                }
                ing["metadata"]["namespace"] = json!(ns);
                ing["metadata"]["name"] = json!(format!("copy-{i}"));
                (
                    review(i, &INGRESS, &ing, None),
                    false,
                    "Ingress CREATE (duplicate host)",
                )
            }
        };
        out.push(item);
    }
    out
}

/// Policies and inventory as `interlock serve --inventory DIR` builds them.
fn build_engine(dir: &Path) -> Result<Engine, BoxError> {
    let loaded = interlock::bundled::documents();
    if let Some(e) = loaded.errors.first() {
        return Err(format!("bundled policies: {e}").into());
    }
    // `LOAD_POLICIES=a,b`: only these policies of the library (to profile one).
    let only = std::env::var("LOAD_POLICIES").ok();
    let documents = loaded
        .documents
        .into_iter()
        .filter(|d| {
            only.as_deref().is_none_or(|only| {
                let name = d.value["metadata"]["name"].as_str().unwrap_or("");
                only.split(',').any(|o| o == name)
            })
        })
        .collect();
    let mut inventory = Inventory::new();
    let (policies, errors) = PolicySet::compile_documents(documents);
    if let Some(e) = errors.first() {
        return Err(format!("bundled policies: {e}").into());
    }
    inventory.set_indexes(&policies.index_decls())?;
    // As `serve` does: keep only what the policies read.
    inventory.set_projection(policies.projection());
    inventory_from_files(&mut inventory, &[dir.to_path_buf()])?;
    let mut options = EngineOptions::default();
    // Under callgrind, admitted writes would expire as the slowed clock
    // passes the TTL, and instruction counts would vary from run to run.
    if let Some(secs) = std::env::var("LOAD_PENDING_TTL")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        options.pending_ttl = std::time::Duration::from_secs(secs);
    }
    let engine = Engine::new(policies, inventory, options);
    engine.set_ready(true);
    Ok(engine)
}

/// Keeps the candidates whose dry-run decision is the expected one (the
/// generator sows violations: a Deployment reading a missing ConfigMap, a
/// host claimed twice...); returns the samples and how many were dropped.
fn preflight(engine: &Engine, cands: Vec<(Json, bool, &'static str)>) -> (Vec<Sample>, usize) {
    let mut kept = Vec::new();
    let mut dropped = 0;
    for (review, allowed, what) in cands {
        let mut dry = review.clone();
        dry["request"]["dryRun"] = json!(true);
        let req: Option<AdmissionRequest<DynamicObject>> =
            serde_json::from_value::<AdmissionReview<DynamicObject>>(dry)
                .ok()
                .and_then(|r| r.try_into().ok());
        let Some(req) = req else {
            dropped += 1;
            continue;
        };
        let resp = engine.validate(&req);
        if resp.allowed != allowed {
            dropped += 1;
            continue;
        }
        let Ok(body) = serde_json::to_vec(&review) else {
            dropped += 1;
            continue;
        };
        kept.push(Sample {
            body: Bytes::from(body),
            allowed,
            what,
        });
    }
    (kept, dropped)
}

/// CPU time per request kind of the server's path (parse, engine, encode:
/// `interlock::server::answer_body`) called directly on one thread (no
/// HTTP, no TLS), beside kube's AdmissionReview parser alone. `LOAD_DIRECT_ONLY=1` stops
/// after this (for `perf record` / callgrind on the engine alone).
fn direct(engine: &Engine, samples: &[Sample], rounds: usize) {
    type Times = (Duration, Duration, usize, Duration, usize);
    let mut by_kind: std::collections::BTreeMap<&str, Times> = Default::default();
    for _ in 0..rounds {
        for s in samples {
            // kube's parser (what the engine cost before the server parsed
            // objects as JSON), then the server's whole path.
            let t = Instant::now();
            let req: Option<AdmissionRequest<DynamicObject>> =
                serde_json::from_slice::<AdmissionReview<DynamicObject>>(&s.body)
                    .ok()
                    .and_then(|r| r.try_into().ok());
            let parsed = t.elapsed();
            if let Some(req) = req {
                std::hint::black_box(engine.validate(&req));
            }
            let old = t.elapsed();
            let t = Instant::now();
            let answer = interlock::server::answer_body(engine, false, &s.body);
            let e = by_kind.entry(s.what).or_default();
            e.0 += parsed;
            e.1 += t.elapsed();
            e.2 += 1;
            e.3 += old;
            e.4 += s.body.len();
            std::hint::black_box(answer);
        }
    }
    let us = |d: Duration, n: usize| d.as_secs_f64() * 1e6 / n.max(1) as f64;
    let (mut tp, mut te, mut tn, mut to) = (Duration::ZERO, Duration::ZERO, 0, Duration::ZERO);
    for (what, (p, e, n, o, bytes)) in &by_kind {
        println!(
            "  {what:32} {:5.1} KB: kube parse {:6.1} us, + Engine::validate {:6.1} us | server path {:6.1} us",
            *bytes as f64 / (*n).max(1) as f64 / 1e3,
            us(*p, *n),
            us(*o, *n),
            us(*e, *n)
        );
        tp += *p;
        te += *e;
        to += *o;
        tn += n;
    }
    println!(
        "  {:32}          kube parse {:6.1} us, + Engine::validate {:6.1} us | server path {:6.1} us  (one thread, {tn} calls)",
        "mix",
        us(tp, tn),
        us(to, tn),
        us(te, tn)
    );
}

/// The server's path on one thread, then on one thread per CPU at once
/// over the same engine: the mean CPU time per request of each. Threads
/// that run slower together than alone share something they write (a lock,
/// a reference count) or contend for a cache.
fn direct_parallel(engine: &Engine, samples: &[Sample], rounds: usize) {
    let run = || {
        let start = thread_cpu_now();
        for _ in 0..rounds {
            for s in samples {
                std::hint::black_box(interlock::server::answer_body(engine, false, &s.body));
            }
        }
        (thread_cpu_now() - start).as_secs_f64() * 1e6 / (rounds * samples.len()).max(1) as f64
    };
    let alone = run();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let together: Vec<f64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(run)).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(f64::NAN))
            .collect()
    });
    let mean = together.iter().sum::<f64>() / together.len() as f64;
    println!(
        "  server path, CPU per request: {alone:.1} us on one thread; {mean:.1} us on {threads} threads at once ({})",
        ratio(mean, alone)
    );
}

/// CPU time of the calling thread.
fn thread_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

// ---------------------------------------------------------------------------
// Transport

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

/// Sends one review; an error unless the answer is 200 with the expected
/// decision.
async fn send(
    sender: &mut Sender,
    path: &str,
    sample: &Sample,
    expect: bool,
) -> Result<(), BoxError> {
    let req = Request::post(format!("{path}?timeout=10s"))
        .header("host", "interlock.interlock-system.svc")
        .header("content-type", "application/json")
        .body(Full::new(sample.body.clone()).boxed())?;
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
    let needle: &[u8] = if expect {
        b"\"allowed\":true"
    } else {
        b"\"allowed\":false"
    };
    if !status.is_success() || !body.windows(needle.len()).any(|w| w == needle) {
        return Err(format!(
            "{} expected allowed={expect}, got {status}: {}",
            sample.what,
            String::from_utf8_lossy(&body[..body.len().min(600)])
        )
        .into());
    }
    Ok(())
}

struct Phase {
    latencies_us: Vec<u64>,
    errors: usize,
    elapsed: Duration,
    /// CPU time of the server's and of the client's threads during the
    /// phase (ns); zero when the server is another process.
    cpu_server_ns: u64,
    cpu_client_ns: u64,
}

#[derive(Clone, Copy, Default)]
struct Figures {
    rate: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    max: f64,
    /// Requests/s the server's threads alone would serve on every core of
    /// the machine at the CPU time per request they spent (NaN when not
    /// measured).
    server_capacity: f64,
    /// CPU time of the server per request, us (NaN when not measured).
    server_cpu_us: f64,
}

fn report(name: &str, p: &mut Phase, pinned: bool) -> Figures {
    p.latencies_us.sort_unstable();
    let n = p.latencies_us.len();
    let q = |x: f64| -> f64 {
        if n == 0 {
            return f64::NAN;
        }
        let i = ((n as f64 * x).ceil() as usize).clamp(1, n) - 1;
        p.latencies_us[i] as f64 / 1000.0
    };
    let mut f = Figures {
        rate: n as f64 / p.elapsed.as_secs_f64(),
        p50: q(0.50),
        p90: q(0.90),
        p99: q(0.99),
        p999: q(0.999),
        max: q(1.0),
        server_capacity: f64::NAN,
        server_cpu_us: f64::NAN,
    };
    println!(
        "  {name}: {n} ok, {} errors, {:.0} req/s | latency ms p50 {:.3} p90 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} | load {}",
        p.errors, f.rate, f.p50, f.p90, f.p99, f.p999, f.max, loadavg()
    );
    let requests = (n + p.errors).max(1) as f64;
    if p.cpu_server_ns > 0 {
        let server_us = p.cpu_server_ns as f64 / 1e3 / requests;
        f.server_cpu_us = server_us;
        let cores = cpus() as f64;
        let client_us = p.cpu_client_ns as f64 / 1e3 / requests;
        if pinned {
            // Measured on one core; the cores scale it (evaluation runs
            // under a read lock, in parallel).
            f.server_capacity = cores * f.rate;
            println!(
                "    CPU per request: server {server_us:.1} us, client {client_us:.1} us; the server pinned to 1 core served {:.0} req/s: on {cores} cores {:.0} req/s",
                f.rate, f.server_capacity
            );
        } else {
            f.server_capacity = cores * 1e6 / server_us;
            println!(
                "    CPU per request: server {server_us:.1} us (TLS, HTTP, parse, engine, encode), client {client_us:.1} us; the server alone on {cores} cores: {:.0} req/s",
                f.server_capacity
            );
        }
    }
    f
}

struct Run {
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    path: &'static str,
    samples: Arc<Vec<Sample>>,
    /// false: expect every answer to allow (the baseline).
    engine: bool,
}

impl Run {
    fn expect(&self, s: &Sample) -> bool {
        !self.engine || s.allowed
    }
}

async fn fixed_rate(run: Arc<Run>, rate: f64, conns: usize, secs: f64) -> Phase {
    // Connect first (handshakes are not part of the schedule).
    let mut senders = Vec::with_capacity(conns);
    for _ in 0..conns {
        senders.push(connect(run.addr, run.tls.clone()).await);
    }
    let start = Instant::now() + Duration::from_millis(50);
    let period = Duration::from_secs_f64(1.0 / rate);
    let total = (rate * secs).ceil() as usize;
    // tokio's timer ticks in milliseconds: a request scheduled by
    // `sleep_until` would leave up to 1 ms late, which the latency (counted
    // from the scheduled time) would charge to the server. A thread sleeping
    // with the OS timer (~0.1 ms slack) hands each request, at its time, to
    // the connections in turn.
    let mut queues = Vec::with_capacity(conns);
    let mut tasks = Vec::new();
    for sender in senders {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
        queues.push(tx);
        let run = run.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(total / conns + 1);
            let mut errors = 0;
            let Ok(mut sender) = sender else {
                let mut lost = 0;
                while rx.recv().await.is_some() {
                    lost += 1;
                }
                return (lat, lost);
            };
            while let Some((i, scheduled)) = rx.recv().await {
                let s = &run.samples[i % run.samples.len()];
                match send(&mut sender, run.path, s, run.expect(s)).await {
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
    let pacer = std::thread::spawn(move || {
        for i in 0..total {
            let scheduled = start + period.mul_f64(i as f64);
            let now = Instant::now();
            if scheduled > now {
                std::thread::sleep(scheduled - now);
            }
            // A busy connection queues the request: that wait is latency.
            let _ = queues[i % queues.len()].send((i, scheduled));
        }
    });
    let phase = collect(tasks, start).await;
    let _ = pacer.join();
    phase
}

async fn saturation(run: Arc<Run>, conns: usize, secs: f64) -> Phase {
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for c in 0..conns {
        let run = run.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0;
            let Ok(mut sender) = connect(run.addr, run.tls.clone()).await else {
                return (lat, 1);
            };
            let mut i = c * 997;
            while Instant::now() < end {
                let s = &run.samples[i % run.samples.len()];
                i += 1;
                let t = Instant::now();
                match send(&mut sender, run.path, s, run.expect(s)).await {
                    Ok(()) => lat.push(t.elapsed().as_micros() as u64),
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

async fn collect(tasks: Vec<tokio::task::JoinHandle<(Vec<u64>, usize)>>, start: Instant) -> Phase {
    let mut p = Phase {
        latencies_us: Vec::new(),
        errors: 0,
        elapsed: Duration::ZERO,
        cpu_server_ns: 0,
        cpu_client_ns: 0,
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

struct Settings {
    /// `LOAD_PIN`: the server on one core, the client on the others.
    pinned: bool,
    rate: f64,
    conns: usize,
    sat_conns: usize,
    secs: f64,
}

/// Both phases against one server; (fixed-rate, saturation, errors). The
/// server's CPU time is that of its threads in this process, or with
/// `server_pid`, of that process (pinned to one core).
async fn measure(
    run: Arc<Run>,
    s: &Settings,
    server_pid: Option<u32>,
) -> (Figures, Figures, usize) {
    let snapshot = || (thread_cpu(), server_pid.map(pinned_ab::process_cpu_ns));
    let spent = |before: &(_, Option<u64>), after: &(_, Option<u64>)| {
        let (server, client) = cpu_between(&before.0, &after.0);
        match (before.1, after.1) {
            (Some(b), Some(a)) => (a.saturating_sub(b), server + client),
            _ => (server, client),
        }
    };
    let pinned = s.pinned || server_pid.is_some();
    let before = snapshot();
    let mut p = fixed_rate(run.clone(), s.rate, s.conns, s.secs).await;
    (p.cpu_server_ns, p.cpu_client_ns) = spent(&before, &snapshot());
    let fixed = report(
        &format!("fixed rate {:.0}/s x {} conns", s.rate, s.conns),
        &mut p,
        pinned,
    );
    let before = snapshot();
    let mut q = saturation(run, s.sat_conns, s.secs).await;
    (q.cpu_server_ns, q.cpu_client_ns) = spent(&before, &snapshot());
    let sat = report(
        &format!("saturation x {} conns", s.sat_conns),
        &mut q,
        pinned,
    );
    (fixed, sat, p.errors + q.errors)
}

/// An in-process server for `reviewer` on the server's runtime `rt` (its
/// threads are counted apart from the client's); the sender stops it.
async fn start_server(
    rt: &tokio::runtime::Handle,
    certs: &Path,
    reviewer: Arc<dyn Reviewer>,
) -> Result<(SocketAddr, tokio::sync::oneshot::Sender<()>), BoxError> {
    let mut config = ServerConfig::new(certs.join("tls.crt"), certs.join("tls.key"));
    config.listen = "127.0.0.1:0".parse()?;
    config.eval_threads = std::env::var("LOAD_EVAL_THREADS")
        .ok()
        .and_then(|v| v.parse().ok());
    // Bound on the server's runtime, so that its sockets are driven there.
    let server = rt.spawn(Server::bind(config, reviewer)).await??;
    let addr = server.local_addr();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    rt.spawn(server.serve(async move {
        let _ = rx.await;
    }));
    Ok((addr, tx))
}

fn client_tls(ca_pem: &[u8], alpn: &[u8]) -> Result<Arc<rustls::ClientConfig>, BoxError> {
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
    tls.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(tls))
}

/// A serving certificate for 127.0.0.1 written to `dir/certs`, and a
/// client configuration that trusts it.
fn server_certs(dir: &Path, alpn: &[u8]) -> Result<(PathBuf, Arc<rustls::ClientConfig>), BoxError> {
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs)?;
    let b = interlock::certs::generate(&interlock::certs::CertsOptions::new(["127.0.0.1"]))?;
    interlock::certs::write(&certs, &b, true)?;
    let tls = client_tls(b.ca_cert_pem.as_bytes(), alpn)?;
    Ok((certs, tls))
}

/// Objects of the first namespace files of the cluster, for the samples.
fn sample_documents(dir: &Path, files: usize) -> Vec<Json> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.retain(|p| {
        p.extension().is_some_and(|e| e == "yaml")
            && p.file_name().is_some_and(|n| n != "namespaces.yaml")
    });
    paths.sort();
    // Every k-th file, so that samples come from all over the cluster.
    let step = (paths.len() / files.max(1)).max(1);
    let chosen: Vec<PathBuf> = paths.into_iter().step_by(step).take(files).collect();
    interlock::manifest::load_paths(&chosen, &Default::default())
        .documents
        .into_iter()
        .map(|d| d.value)
        .collect()
}

/// The engine's count of decisions made again under the write lock, read
/// from its metrics as the server's `/metrics` would show it.
fn reevaluations(engine: &Engine) -> u64 {
    let mut registry = prometheus_client::registry::Registry::default();
    engine.register_metrics(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("metrics encode");
    text.lines()
        .find_map(|l| l.strip_prefix("reevaluations_total "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the engine counts re-evaluations")
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() && b.is_finite() {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

/// The fixed-rate phase again, quiet and then while the policies are
/// reloaded every `LOAD_RELOAD_EVERY_MS` (500), as an InterlockPolicy
/// object's changes reload them under `serve --cluster-policies`
/// (support/policy_reload.rs), `LOAD_RELOAD_ROUNDS` (3) times in turn: each
/// reloading phase beside the quiet one run right before it, in the same
/// state, and the median of the rounds' p99 ratios (a shared machine moves
/// one phase's p99 by more than the reloads do). Returns the errors.
async fn reload_under_load(run: Arc<Run>, engine: &Arc<Engine>, s: &Settings) -> usize {
    // At least three changes in a phase, however short (the smoke run).
    let every = Duration::from_millis(env("LOAD_RELOAD_EVERY_MS", 500))
        .min(Duration::from_secs_f64(s.secs / 3.0));
    let rounds = env("LOAD_RELOAD_ROUNDS", 3usize).max(1);
    let mut ratios = Vec::new();
    let mut errors = 0;
    for round in 1..=rounds {
        let (quiet, e) = reload_phase(&run, engine, s, None).await;
        errors += e;
        let (during, e) = reload_phase(&run, engine, s, Some(every)).await;
        errors += e;
        ratios.push(during.p99 / quiet.p99);
        println!(
            "  round {round}: p99 quiet {:.3} ms, reloading {:.3} ms ({})",
            quiet.p99,
            during.p99,
            ratio(during.p99, quiet.p99)
        );
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    println!(
        "reload under load: median p99 ratio (reloading / quiet) of {rounds} rounds {median:.2}x (<= 2x: {})",
        if median <= 2.0 { "met" } else { "MISSED" },
    );
    errors
}

/// One fixed-rate phase, reloading every `every` when given; its figures
/// and errors (reload failures included).
async fn reload_phase(
    run: &Arc<Run>,
    engine: &Arc<Engine>,
    s: &Settings,
    every: Option<Duration>,
) -> (Figures, usize) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let reloader = every.map(|every| {
        let (cluster, flag) = (engine.cluster().clone(), stop.clone());
        std::thread::spawn(move || policy_reload::run(cluster, every, flag))
    });
    let before = thread_cpu();
    let mut p = fixed_rate(run.clone(), s.rate, s.conns, s.secs).await;
    (p.cpu_server_ns, p.cpu_client_ns) = cpu_between(&before, &thread_cpu());
    stop.store(true, Ordering::Relaxed);
    let what = every.map_or("quiet".into(), |e| format!("reloading every {e:?}"));
    let name = format!("fixed rate {:.0}/s x {} conns, {what}", s.rate, s.conns);
    let figures = report(&name, &mut p, s.pinned);
    let Some(r) = reloader.and_then(|t| t.join().ok()) else {
        return (figures, p.errors);
    };
    let n = r.count.max(1) as f64;
    println!(
        "    {} reloads ({} failed), each: compile {:.1} ms, install (write lock) {:.3} ms",
        r.count,
        r.failures,
        r.compile.as_secs_f64() * 1e3 / n,
        r.install.as_secs_f64() * 1e3 / n,
    );
    (figures, p.errors + r.failures)
}

fn main() -> Result<(), BoxError> {
    // `cargo test --benches` runs this with `--bench` absent: do a tiny smoke run.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("client-io")
        .enable_all()
        .build()?;
    // The in-process server's own runtime, told apart by its thread names.
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name(SERVER_THREADS[0])
        .enable_all()
        .build()?;
    let server_rt = server_runtime.handle().clone();
    rt.block_on(async move {
        let objects: usize = if smoke {
            400
        } else {
            env("LOAD_OBJECTS", 50_000)
        };
        let settings = Settings {
            pinned: std::env::var("LOAD_PIN").is_ok_and(|v| v == "1"),
            secs: if smoke { 0.3 } else { env("LOAD_SECS", 5.0) },
            // The smoke run (`cargo test --all-targets`, debug build) only
            // checks that the generator, the engine and the server work
            // together.
            rate: if smoke {
                100.0
            } else {
                env("LOAD_RATE", 2000.0)
            },
            conns: if smoke { 4 } else { env("LOAD_CONNS", 16) },
            sat_conns: if smoke { 4 } else { env("LOAD_SAT_CONNS", 32) },
        };
        let n_bodies: usize = if smoke { 200 } else { env("LOAD_BODIES", 4096) };
        let path: &'static str = if std::env::var("LOAD_PATH").as_deref() == Ok("/mutate") {
            "/mutate"
        } else {
            "/validate"
        };
        let alpn: &[u8] = if std::env::var("LOAD_PROTO").as_deref() == Ok("h2") {
            b"h2"
        } else {
            b"http/1.1"
        };
        let external = std::env::var("LOAD_TARGET").ok();
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        println!(
            "webhook_load: {} {path}, {objects} objects, {cpus} CPUs, load {} ({})",
            String::from_utf8_lossy(alpn),
            loadavg(),
            if external.is_some() {
                "external server"
            } else {
                "in-process server: client and server share the cores"
            }
        );

        // The cluster.
        let tmp = tempfile::tempdir()?;
        let cluster_dir = match std::env::var("LOAD_CLUSTER") {
            Ok(d) => PathBuf::from(d),
            Err(_) => tmp.path().join("cluster"),
        };
        std::fs::create_dir_all(&cluster_dir)?;
        let t = Instant::now();
        let g = gen_cluster::generate(&cluster_dir, objects)?;
        println!(
            "cluster: {} objects in {} files ({:.1} MB) in {:.1}s; sown: {} duplicate hosts, {} missing ConfigMaps, {} dangling HPAs, {} latest tags",
            g.objects,
            g.files,
            g.bytes as f64 / 1e6,
            t.elapsed().as_secs_f64(),
            g.duplicate_hosts,
            g.missing_config_maps,
            g.dangling_hpas,
            g.latest_tags
        );
        let cands = candidates(&sample_documents(&cluster_dir, 120), n_bodies);
        if cands.is_empty() {
            return Err("the sample namespaces hold no candidate objects".into());
        }
        let (rss0, _) = rss_mib();

        // The engine (in-process always: the pre-flight decides the expected
        // answers).
        let t = Instant::now();
        let engine = Arc::new(build_engine(&cluster_dir)?);
        let load_secs = t.elapsed().as_secs_f64();
        let (rss1, hwm1) = rss_mib();
        let inventory_len = engine.read(|st| st.inventory.len());
        let policies = engine.read(|st| st.policies.len());
        println!(
            "engine: {policies} bundled policies, {inventory_len} objects in the inventory, loaded in {load_secs:.1}s; RSS {rss0:.0} MiB before, {rss1:.0} MiB after loading (+{:.0} MiB, {:.2} KiB/object), peak while loading {hwm1:.0} MiB",
            rss1 - rss0,
            (rss1 - rss0) * 1024.0 / inventory_len.max(1) as f64
        );
        let (samples, dropped) = preflight(&engine, cands);
        let denied = samples.iter().filter(|s| !s.allowed).count();
        println!(
            "requests: {} distinct bodies ({} denied), {} candidates dropped by the pre-flight, {:.1} KB mean body",
            samples.len(),
            denied,
            dropped,
            samples.iter().map(|s| s.body.len()).sum::<usize>() as f64
                / samples.len().max(1) as f64
                / 1e3
        );
        let whole_library = std::env::var("LOAD_POLICIES").is_err();
        if whole_library && (samples.len() < n_bodies * 9 / 10 || denied == 0) {
            return Err(format!(
                "the pre-flight kept {} of {n_bodies} bodies ({denied} denied): the generator or the policies changed",
                samples.len()
            )
            .into());
        }
        let sides = pinned_ab::sides();
        if !sides.is_empty() {
            if !whole_library {
                return Err("the pinned form serves the bundled library: unset LOAD_POLICIES".into());
            }
            drop(engine);
            let (certs, tls) = server_certs(tmp.path(), alpn)?;
            let base = Run {
                addr: ([127, 0, 0, 1], 0).into(),
                tls,
                path,
                samples: Arc::new(samples),
                engine: path == "/validate",
            };
            let runs = env("LOAD_RUNS", 3usize).max(1);
            let errors =
                pinned_ab::run(&sides, &base, &cluster_dir, &certs, &settings, runs).await?;
            if errors > 0 {
                println!("{errors} errors (wrong decision, HTTP error or transport error)");
            }
            return Ok(());
        }
        if !smoke {
            println!("direct engine calls, mean per request (load {}):", loadavg());
            direct(&engine, &samples, env("LOAD_DIRECT_ROUNDS", 2));
            direct_parallel(&engine, &samples, env("LOAD_DIRECT_ROUNDS", 2));
            if std::env::var("LOAD_DIRECT_ONLY").is_ok() {
                return Ok(());
            }
        }
        let samples = Arc::new(samples);
        let mut errors = 0;

        if let Some(target) = external {
            let addr: SocketAddr = target.parse()?;
            if !addr.ip().is_loopback() {
                return Err("LOAD_TARGET must be a loopback address".into());
            }
            drop(engine);
            let ca = std::fs::read(std::env::var("LOAD_CA")?)?;
            let run = Arc::new(Run {
                addr,
                tls: client_tls(&ca, alpn)?,
                path,
                samples,
                engine: true,
            });
            println!("external server at {addr}:");
            errors += measure(run, &settings, None).await.2;
        } else {
            let (certs, tls) = server_certs(tmp.path(), alpn)?;
            let baseline = if std::env::var("LOAD_SKIP_BASELINE").is_ok() {
                None
            } else {
                let (addr, stop) = start_server(&server_rt, &certs, Arc::new(AllowAll)).await?;
                if settings.pinned {
                    pin_threads()?;
                }
                println!("baseline (allow-all reviewer):");
                let run = Arc::new(Run {
                    addr,
                    tls: tls.clone(),
                    path,
                    samples: samples.clone(),
                    engine: false,
                });
                let m = measure(run, &settings, None).await;
                let _ = stop.send(());
                errors += m.2;
                Some(m)
            };
            let peak_reset = reset_peak_rss();
            let (addr, stop) = start_server(&server_rt, &certs, engine.clone()).await?;
            if settings.pinned {
                pin_threads()?;
            }
            println!("engine (bundled policies, {inventory_len} objects):");
            let run = Arc::new(Run {
                addr,
                tls,
                path,
                samples,
                engine: path == "/validate",
            });
            let reevaluated = reevaluations(&engine);
            let (fixed, sat, e) = measure(run.clone(), &settings, None).await;
            errors += e;
            if whole_library {
                errors += reload_under_load(run, &engine, &settings).await;
            }
            let _ = stop.send(());
            println!(
                "decisions evaluated twice (a write since changed a kind their policies read): {}",
                reevaluations(&engine) - reevaluated
            );
            let (rss2, hwm2) = rss_mib();
            let pending = engine
                .read(|st| st.inventory.len())
                .saturating_sub(inventory_len);
            println!(
                "memory: RSS {rss2:.0} MiB after the engine phases, peak {hwm2:.0} MiB {} ({pending} objects added by CREATEs)",
                if peak_reset {
                    "while serving"
                } else {
                    "over the whole run"
                }
            );
            if let Some((bf, bs, _)) = baseline {
                println!(
                    "engine / baseline: fixed rate p50 {} p99 {} | saturation throughput {} p50 {} p99 {}",
                    ratio(fixed.p50, bf.p50),
                    ratio(fixed.p99, bf.p99),
                    ratio(sat.rate, bs.rate),
                    ratio(sat.p50, bs.p50),
                    ratio(sat.p99, bs.p99),
                );
            }
            if !smoke {
                println!(
                    "targets: p99 at {:.0}/s {:.3} ms (< 2 ms: {}), saturation {:.0} req/s with the client on the same cores (>= 10,000: {}), the server alone {:.0} req/s (>= 10,000: {})",
                    settings.rate,
                    fixed.p99,
                    if fixed.p99 < 2.0 { "met" } else { "MISSED" },
                    sat.rate,
                    if sat.rate >= 10_000.0 { "met" } else { "MISSED" },
                    sat.server_capacity,
                    if sat.server_capacity >= 10_000.0 { "met" } else { "MISSED" },
                );
            }
        }
        if errors > 0 {
            println!("{errors} errors (wrong decision, HTTP error or transport error)");
            if smoke {
                return Err("errors during the smoke run".into());
            }
        }
        Ok(())
    })
}
