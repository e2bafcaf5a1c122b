//! Issue 36: a small body that buys a lot of CPU. Eight client loops of the
//! costliest review under 128 KiB that the bundled library admits (found by
//! a generator, measured against the real engine) must not make a tenant's
//! cheap reviews wait: the cost estimate sends the costly ones to the heavy
//! lane, which leaves one evaluation thread to everything else.

use super::*;

use crate::support::admission_engine;

/// The size the generator stays under: the size-only lane's threshold,
/// which let these bodies through as light.
const SMALL: usize = 128 * 1024;
/// Client loops of the costly body.
const LOOPS: usize = 8;
/// Cheap reviews probed while they run.
const PROBES: usize = 300;
/// The probes take about 3 s; past this, they stop and the test fails.
const PROBING: Duration = Duration::from_secs(20);

/// A dry-run review by `user` of `object` in namespace `a`.
fn review_of(uid: &str, user: &str, kind: (&str, &str, &str, &str), object: Value) -> Vec<u8> {
    let (group, version, kind, resource) = kind;
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": object["metadata"]["name"], "namespace": "a", "operation": "CREATE",
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": object, "oldObject": null, "dryRun": true,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    }))
    .expect("json")
}

/// One shape the generator tries: per container, `refs` references of
/// kind `via` (to ConfigMaps or Secrets that do not exist: each is looked
/// up, and each earns a warning) and `plain` literal env entries.
#[derive(Debug, Clone, Copy)]
struct Shape {
    refs: usize,
    via: &'static str,
    plain: usize,
}

/// A Pod of `containers` containers of `shape`, valid for every bundled
/// policy that denies at admission (pinned image, limits, no privileges).
fn pod(shape: Shape, containers: usize) -> Value {
    let containers: Vec<Value> = (0..containers)
        .map(|c| {
            let mut env: Vec<Value> = (0..shape.refs)
                .map(|r| {
                    json!({"name": format!("R{r}"), "valueFrom": {shape.via:
                        {"name": format!("m-{c}-{r}"), "key": "k"}}})
                })
                .collect();
            env.extend((0..shape.plain).map(|e| json!({"name": format!("P{e}"), "value": "v"})));
            json!({"name": format!("c{c}"), "image": "registry.example/app:1.0", "env": env,
                   "resources": {"limits": {"cpu": "100m", "memory": "64Mi"},
                                 "requests": {"cpu": "100m", "memory": "64Mi"}}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "costly", "namespace": "a"},
           "spec": {"serviceAccountName": "sa", "containers": containers}})
}

fn pod_review(shape: Shape, containers: usize) -> Vec<u8> {
    review_of(
        "costly",
        "alice",
        ("", "v1", "Pod", "pods"),
        pod(shape, containers),
    )
}

/// The costliest admitted Pod review under [`SMALL`]: for each shape, as
/// many containers as fit, evaluated twice through the function the server
/// answers with; the slowest kept. Bounded: 22 evaluations of well under a
/// second each in a debug build (0.1 to 0.3 s measured).
fn worst_small_body(engine: &interlock::admission::Engine) -> (Vec<u8>, Shape, Duration) {
    let mut worst: Option<(Vec<u8>, Shape, Duration)> = None;
    for via in ["configMapKeyRef", "secretKeyRef"] {
        for (refs, plain) in [(1, 0), (4, 0), (10, 0), (30, 0), (5, 10), (0, 20)] {
            let shape = Shape { refs, via, plain };
            if refs == 0 && via == "secretKeyRef" {
                continue;
            }
            // Containers cost the same bytes each: fill up to the limit.
            let one = pod_review(shape, 1).len();
            let per = pod_review(shape, 2).len() - one;
            let mut n = 1 + (SMALL - 1 - one) / per;
            let mut body = pod_review(shape, n);
            while body.len() >= SMALL {
                n -= 1;
                body = pod_review(shape, n);
            }
            // The faster of two runs: less noise from the machine's load.
            let mut took = Duration::MAX;
            let mut answer = Vec::new();
            for _ in 0..2 {
                let start = Instant::now();
                let (status, a) = interlock::server::answer_body(engine, false, &body);
                took = took.min(start.elapsed());
                assert_eq!(status, 200);
                answer = a;
            }
            let answer = response_of(&answer);
            assert_eq!(answer["allowed"], true, "{shape:?} x {n}: {answer}");
            eprintln!("{shape:?} x {n} containers: {} bytes, {took:?}", body.len());
            if worst.as_ref().is_none_or(|w| took > w.2) {
                worst = Some((body, shape, took));
            }
        }
    }
    worst.expect("at least one shape")
}

/// Cheap reviews: a Lease that no policy matches, a small ConfigMap.
fn cheap(i: usize) -> Vec<u8> {
    if i.is_multiple_of(2) {
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": format!("l{i}"), "namespace": "a"},
            "spec": {"holderIdentity": "x"}});
        review_of(
            &format!("p{i}"),
            "alice",
            ("coordination.k8s.io", "v1", "Lease", "leases"),
            lease,
        )
    } else {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("c{i}"), "namespace": "a"}, "data": {"k": "v"}});
        review_of(
            &format!("p{i}"),
            "alice",
            ("", "v1", "ConfigMap", "configmaps"),
            cm,
        )
    }
}

/// The cheap reviews do not wait for costly evaluations while eight loops
/// of the worst small body run, sent by the same user (so fairness among tenants
/// does not help: only the lane by cost does). Two evaluation threads, as
/// on the 2-core machine the issue measured: the heavy lane holds one, and
/// the cheap reviews never wait for a costly evaluation to end, however
/// long it runs (their latency does not depend on it: the costly body took
/// 0.5 s, whole seconds under load, in a debug build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cheap_reviews_are_not_queued_behind_costly_small_ones() {
    let engine = Arc::new(admission_engine::engine());
    // What the estimate asks of the engine: pods are looked-up references'
    // kind (pod-references-exist), Leases nobody's.
    assert!(engine.reads_inventory("v1", "Pod", true));
    assert!(!engine.reads_inventory("coordination.k8s.io/v1", "Lease", true));
    let generator = Instant::now();
    let (costly, shape, took) = worst_small_body(&engine);
    eprintln!(
        "worst small body: {shape:?}, {} bytes, {took:?} to evaluate (generator: {:?})",
        costly.len(),
        generator.elapsed()
    );
    assert!(costly.len() < SMALL);

    let b = bundle();
    let tmp = tempfile::tempdir().expect("tempdir");
    write_plain(tmp.path(), &b);
    let mut config = config_for(tmp.path());
    config.eval_threads = Some(2);
    let server = Server::bind(config, engine).await.expect("bind");
    let addr = server.local_addr();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stop_rx.await;
    }));
    let opts = ClientOpts::trusting(&[&b]);

    // The prober's connection, warmed up before the load.
    let mut probe = connect(addr, &opts).await.expect("connect");
    for i in 0..4 {
        let (status, _) = probe.post("/validate", cheap(i)).await.expect("warm-up");
        assert_eq!(status, StatusCode::OK);
    }

    let stop = Arc::new(AtomicBool::new(false));
    // (answered 200, answered 503 by the deadline) per loop.
    let mut loops = Vec::new();
    for _ in 0..LOOPS {
        let (stop, body, opts) = (stop.clone(), costly.clone(), ClientOpts::trusting(&[&b]));
        loops.push(tokio::spawn(async move {
            let mut conn = connect(addr, &opts).await.expect("connect");
            let (mut ok, mut late) = (0usize, 0usize);
            while !stop.load(Ordering::SeqCst) {
                let (status, answer) = conn.post("/validate", body.clone()).await.expect("post");
                match status {
                    StatusCode::OK => {
                        assert_eq!(response_of(&answer)["allowed"], true);
                        ok += 1;
                    }
                    StatusCode::SERVICE_UNAVAILABLE => late += 1,
                    other => panic!("costly review answered {other}"),
                }
            }
            (ok, late)
        }));
    }
    // Every loop's first request is in: the heavy lane has a backlog.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let text = scrape(addr, &b).await;
        if metric(&text, "interlock_heavy_lane_requests_total").unwrap_or(0.0) >= LOOPS as f64 {
            break;
        }
        assert!(
            Instant::now() < until,
            "the costly reviews never reached the heavy lane: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut latencies = Vec::with_capacity(PROBES);
    let probing = Instant::now();
    for i in 0..PROBES {
        // Bounds the test's runtime when cheap reviews do wait (with the
        // size-only lane: p50 1 s, p99 2.5 s, five minutes for the probes).
        if probing.elapsed() > PROBING {
            break;
        }
        let start = Instant::now();
        let (status, answer) = probe.post("/validate", cheap(i)).await.expect("probe");
        latencies.push(start.elapsed());
        assert_eq!(status, StatusCode::OK);
        let answer = response_of(&answer);
        assert_eq!(answer["allowed"], true, "{answer}");
        assert_eq!(answer["uid"], format!("p{i}"));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let probing = probing.elapsed();
    stop.store(true, Ordering::SeqCst);
    let (mut ok, mut late) = (0, 0);
    for l in loops {
        let (o, t) = l.await.expect("loop");
        ok += o;
        late += t;
    }
    let text = scrape(addr, &b).await;
    let _ = stop_tx.send(());
    let _ = task.await;

    let probed = latencies.len();
    latencies.sort();
    let p50 = latencies[probed / 2];
    let p99 = latencies[probed * 99 / 100];
    let max = latencies[probed - 1];
    eprintln!(
        "cheap reviews under {LOOPS} loops of the costly one: p50 {p50:?}, p99 {p99:?}, \
         max {max:?}, {probed} in {probing:?}; costly answered {ok}, past the deadline {late}"
    );
    // Every costly review went to the heavy lane, no cheap one did.
    assert_eq!(
        metric(&text, "interlock_heavy_lane_requests_total"),
        Some((ok + late) as f64),
        "{text}"
    );
    // The costly ones were evaluated meanwhile: the lane was working.
    assert!(ok >= 2, "only {ok} costly reviews answered");
    // Not a speed figure but a queueing property, judged against the
    // costly evaluation measured in this run, so the machine's load moves
    // both sides: a cheap review queued with the costly ones waits for the
    // evaluation in progress and the backlog before it (the size-only lane
    // gave p50 1 s, p99 2.5 s), one that is not waits for none. An absolute
    // bound (p99 under 100 ms) failed once at 270 ms at load 13.
    assert!(
        p50 < took,
        "p50 {p50:?} is not below one costly evaluation ({took:?}): cheap reviews waited (p99 {p99:?}, max {max:?})"
    );
    assert!(
        p99 < took * (LOOPS as u32) / 2,
        "p99 {p99:?} is a backlog of costly evaluations ({took:?} each; p50 {p50:?}, max {max:?})"
    );
    assert_eq!(probed, PROBES, "the probes took over {PROBING:?}");
}
