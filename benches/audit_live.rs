//! The continuous audit, in process, over a generated cluster (default 50k
//! objects, the bundled library): a full pass (time, memory), the cost of
//! one change (a ConfigMap deleted, then put back: evaluations and time),
//! and admission latency with full passes running beside it against
//! without, side by side in one run. Beside admission the audit runs in
//! three modes: the read lock held for whole batches, unpaced (how it
//! first ran); short holds, unpaced; short holds, paced (how it runs).
//!
//! `cargo bench --bench audit_live` or
//! `cargo bench --bench audit_live -- --objects 20000 --rounds 3`.
//!
//! In process: the audit's store is filled from the generated files, not
//! from watches, and no report is written. What a real apiserver adds (the
//! watch lists, one server-side apply per namespace whose results changed)
//! is not measured here; tests/integration/audit_live.rs shows it works.
//!
//! Heap bytes are counted exactly by a global allocator that tracks what is
//! live, so the memory figures do not move with the machine's load.

#[path = "support/gen_cluster.rs"]
mod gen_cluster;

use interlock::admission::{Engine, EngineOptions};
use interlock::audit::live::pass::{self, Auditor};
use interlock::audit::live::store::Shared;
use interlock::cluster::{Cluster, ClusterOptions};
use interlock::inventory::ObjectKey;
use interlock::k8s::kinds::group_of;
use interlock::manifest::{self, LoadOptions};
use interlock::policy::load::LoadedPolicies;
use interlock::server::Reviewer;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use kube::core::DynamicObject;
use serde_json::{json, Value as Json};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The cluster state `serve` would hold (bundled policies, the read kinds
/// projected in the inventory) and the audit's store of matched objects.
fn build(docs: &[Json]) -> (Arc<Cluster>, Shared, usize) {
    let loaded = LoadedPolicies::from_paths(&[]).expect("bundled policies");
    let mut inventory = loaded.inventory().expect("inventory");
    let policies = loaded.policies;
    let store = Shared::default();
    let before = live();
    let mut matched = 0;
    for d in docs {
        let (v, k) = (
            d["apiVersion"].as_str().unwrap_or(""),
            d["kind"].as_str().unwrap_or(""),
        );
        let namespaced = d["metadata"]["namespace"].is_string();
        if policies.may_match_kind(v, k, namespaced) {
            store.lock().upsert(d.clone());
            matched += 1;
        }
    }
    let store_bytes = live() - before;
    for d in docs {
        let (v, k) = (
            d["apiVersion"].as_str().unwrap_or(""),
            d["kind"].as_str().unwrap_or(""),
        );
        if policies.reads_kind(group_of(v), k) {
            let _ = inventory.upsert(d, None);
        }
    }
    let cluster = Cluster::new(policies, inventory, ClusterOptions::default());
    cluster.set_ready(true);
    println!(
        "store: {matched} matched objects, {:.1} MiB ({:.0} B/object), compressed whole",
        mib(store_bytes),
        store_bytes as f64 / matched.max(1) as f64
    );
    (Arc::new(cluster), store, matched)
}

fn full_passes(cluster: &Cluster, store: &Shared, auditor: &mut Auditor, rounds: usize) {
    let (mut wall, mut busy) = (vec![], vec![]);
    let before = live();
    let (mut evaluated, mut holds) = (0, 0);
    for _ in 0..rounds {
        let t = Instant::now();
        let p = auditor.pass(cluster, store, true, None);
        wall.push(t.elapsed().as_secs_f64());
        busy.push(p.busy.as_secs_f64());
        (evaluated, holds) = (p.evaluated, p.holds);
    }
    let results = auditor.findings().count();
    println!(
        "full pass: {evaluated} objects evaluated, {results} results | median {:.2} s paced ({:.2} s evaluating, {:.1} µs/object, {holds} holds of the read lock) over {rounds} | results held: {:.2} MiB",
        median(wall),
        median(busy.clone()),
        median(busy) * 1e6 / evaluated.max(1) as f64,
        mib(live().saturating_sub(before))
    );
}

/// A ConfigMap some Deployment mounts.
fn referenced_config_map(docs: &[Json]) -> Json {
    let names: std::collections::HashSet<(String, String)> = docs
        .iter()
        .filter(|d| d["kind"] == "Deployment")
        .flat_map(|d| {
            let ns = d["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string();
            d.pointer("/spec/template/spec/volumes")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .filter_map(move |v| {
                    Some((
                        ns.clone(),
                        v.pointer("/configMap/name")?.as_str()?.to_string(),
                    ))
                })
        })
        .collect();
    docs.iter()
        .find(|d| {
            d["kind"] == "ConfigMap"
                && names.contains(&(
                    d["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    d["metadata"]["name"].as_str().unwrap_or("").to_string(),
                ))
        })
        .cloned()
        .expect("a mounted ConfigMap")
}

/// Deletes a mounted ConfigMap and puts it back, `rounds` times: what each
/// change re-evaluates (the objects whose policies read ConfigMaps, not
/// every matched object) and how long that takes.
fn one_change(
    cluster: &Cluster,
    store: &Shared,
    auditor: &mut Auditor,
    cm: &Json,
    matched: usize,
    rounds: usize,
) {
    let key = ObjectKey::of(cm).expect("key");
    auditor.pass(cluster, store, false, None);
    let (mut del, mut put) = (vec![], vec![]);
    let (mut del_n, mut put_n, mut delta) = (0, 0, 0);
    for _ in 0..rounds {
        let before = auditor.findings().count();
        cluster.update_inventory(|inv, _| inv.remove(&key));
        let t = Instant::now();
        let p = auditor.pass(cluster, store, false, None);
        del.push((t.elapsed().as_secs_f64(), p.busy.as_secs_f64()));
        del_n = p.evaluated;
        delta = auditor.findings().count() as isize - before as isize;
        cluster.update_inventory(|inv, _| inv.upsert(cm, None).map(|_| ()).expect("upsert"));
        let t = Instant::now();
        let p = auditor.pass(cluster, store, false, None);
        put.push((t.elapsed().as_secs_f64(), p.busy.as_secs_f64()));
        put_n = p.evaluated;
    }
    let t = Instant::now();
    let idle = auditor.pass(cluster, store, false, None).evaluated;
    let idle_secs = t.elapsed().as_secs_f64();
    let ms = |v: &[(f64, f64)], i: usize| {
        1e3 * median(v.iter().map(|p| if i == 0 { p.0 } else { p.1 }).collect())
    };
    println!(
        "one change: ConfigMap {key} deleted: {del_n} of {matched} matched objects evaluated, median {:.1} ms paced ({:.1} ms evaluating), results {delta:+} | put back: {put_n} evaluations, median {:.1} ms ({:.1} ms evaluating) | nothing changed: {idle} evaluations, {:.3} ms",
        ms(&del, 0), ms(&del, 1), ms(&put, 0), ms(&put, 1),
        idle_secs * 1e3
    );
}

/// AdmissionRequests a tenant would send: new Ingresses (their hosts
/// looked up in the index, the write recorded under the write lock) and
/// new Deployments (their references looked up).
fn requests(docs: &[Json], n: usize) -> Vec<AdmissionRequest<DynamicObject>> {
    let pick = |kind: &'static str| docs.iter().filter(move |d| d["kind"] == kind);
    pick("Ingress")
        .zip(pick("Deployment"))
        .take(n)
        .enumerate()
        .flat_map(|(i, (ing, dep))| {
            let mut ing = ing.clone();
            ing["metadata"]["name"] = json!(format!("bench-{i}"));
            ing["spec"]["rules"][0]["host"] = json!(format!("bench-{i}.example"));
            let mut dep = dep.clone();
            dep["metadata"]["name"] = json!(format!("bench-{i}"));
            [
                review(
                    i * 2,
                    "networking.k8s.io",
                    "v1",
                    "Ingress",
                    "ingresses",
                    ing,
                ),
                review(i * 2 + 1, "apps", "v1", "Deployment", "deployments", dep),
            ]
        })
        .collect()
}

fn review(
    uid: usize,
    group: &str,
    version: &str,
    kind: &str,
    resource: &str,
    object: Json,
) -> AdmissionRequest<DynamicObject> {
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let res = json!({"group": group, "version": version, "resource": resource});
    let r = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("00000000-0000-4000-8000-{uid:012}"),
            "kind": gvk, "resource": res, "requestKind": gvk, "requestResource": res,
            "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:ci:deployer", "groups": ["system:authenticated"]},
            "object": object, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    });
    serde_json::from_value::<AdmissionReview<DynamicObject>>(r)
        .expect("review")
        .try_into()
        .expect("request")
}

/// Latencies (ms) of `requests` answered in a loop for `secs`.
fn admission(engine: &Engine, requests: &[AdmissionRequest<DynamicObject>], secs: f64) -> Vec<f64> {
    let mut out = vec![];
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs {
        for r in requests {
            let t = Instant::now();
            std::hint::black_box(engine.validate(r));
            out.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    out.sort_by(f64::total_cmp);
    out
}

fn quantile(v: &[f64], q: f64) -> f64 {
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

/// How the audit beside admission holds the read lock and paces itself.
struct Mode {
    name: &'static str,
    hold: Duration,
    pace: f64,
}

const MODES: [Mode; 3] = [
    // What the audit did first: the lock held for a whole batch of
    // BATCH objects, passes as fast as the core allows.
    Mode {
        name: "batch holds, unpaced",
        hold: Duration::MAX,
        pace: 0.0,
    },
    Mode {
        name: "short holds, unpaced",
        hold: pass::HOLD,
        pace: 0.0,
    },
    // The audit as it runs.
    Mode {
        name: "short holds, paced",
        hold: pass::HOLD,
        pace: pass::PACE,
    },
];

/// Admission latencies (ms) while full passes run back to back beside it
/// on another thread, in `mode`: the worst case (the loop makes one an
/// hour, and smaller ones on changes).
fn beside(
    cluster: &Arc<Cluster>,
    store: &Shared,
    engine: &Engine,
    reqs: &[AdmissionRequest<DynamicObject>],
    mode: &Mode,
    secs: f64,
) -> (Vec<f64>, usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s, st) = (cluster.clone(), store.clone(), stop.clone());
    let (hold, pace) = (mode.hold, mode.pace);
    let auditor = std::thread::spawn(move || {
        let mut a = Auditor::default();
        (a.hold, a.pace) = (hold, pace);
        let mut n = 0;
        while !st.load(Ordering::Relaxed) {
            a.pass(&c, &s, true, None);
            n += 1;
        }
        n
    });
    std::thread::sleep(Duration::from_millis(200));
    let b = admission(engine, reqs, secs);
    stop.store(true, Ordering::Relaxed);
    (b, auditor.join().expect("auditor"))
}

fn admission_beside_audit(cluster: &Arc<Cluster>, store: &Shared, docs: &[Json], rounds: usize) {
    let engine = Engine::over(cluster.clone(), EngineOptions::default());
    let reqs = requests(docs, 50);
    let secs = 3.0;
    // (p50, p99) per round: alone, then beside each mode.
    let mut figures: Vec<Vec<(f64, f64)>> = vec![vec![]; MODES.len() + 1];
    let mut passes = vec![0; MODES.len()];
    let q = |v: &[f64]| (quantile(v, 0.5), quantile(v, 0.99));
    for _ in 0..rounds {
        let a = admission(&engine, &reqs, secs);
        let mut line = format!(
            "  round: alone p50 {:.3} p99 {:.3} max {:.3} ms",
            q(&a).0,
            q(&a).1,
            a[a.len() - 1]
        );
        figures[0].push(q(&a));
        for (i, mode) in MODES.iter().enumerate() {
            let (b, n) = beside(cluster, store, &engine, &reqs, mode, secs);
            passes[i] += n;
            figures[i + 1].push(q(&b));
            line += &format!(
                " | {}: p50 {:.3} p99 {:.3} max {:.3} ms",
                mode.name,
                q(&b).0,
                q(&b).1,
                b[b.len() - 1]
            );
        }
        println!("{line}");
    }
    let m = |v: &[(f64, f64)]| {
        (
            median(v.iter().map(|p| p.0).collect()),
            median(v.iter().map(|p| p.1).collect()),
        )
    };
    let alone = m(&figures[0]);
    println!(
        "admission (one thread, {} request kinds), medians of {rounds} rounds: alone p50 {:.3} ms p99 {:.3} ms",
        reqs.len(),
        alone.0,
        alone.1
    );
    for (i, mode) in MODES.iter().enumerate() {
        let b = m(&figures[i + 1]);
        println!(
            "  beside full passes, {}: p50 {:.3} ms p99 {:.3} ms | p99 ratio {:.2} | {} full passes ran beside",
            mode.name,
            b.0,
            b.1,
            b.1 / alone.1,
            passes[i]
        );
    }
}

fn main() {
    // `cargo test --all-targets` runs benches without `--bench`, in a debug
    // build: a small smoke run that every phase still goes through.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let objects = arg("--objects", if smoke { 1_000 } else { 50_000 });
    let rounds = arg("--rounds", if smoke { 1 } else { 5 }).max(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let g = gen_cluster::generate(dir.path(), objects).expect("generate");
    let loaded = manifest::load_paths(&[dir.path()], &LoadOptions::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors.first());
    let docs: Vec<Json> = loaded.documents.into_iter().map(|d| d.value).collect();
    println!(
        "cluster: {} objects generated ({} documents), bundled library, {} cpus",
        g.objects,
        docs.len(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let (cluster, store, matched) = build(&docs);
    let mut auditor = Auditor::default();
    full_passes(&cluster, &store, &mut auditor, rounds);
    let cm = referenced_config_map(&docs);
    one_change(&cluster, &store, &mut auditor, &cm, matched, rounds);
    admission_beside_audit(&cluster, &store, &docs, rounds.min(3));
}
