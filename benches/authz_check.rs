//! `authorizer...check()` under `serve`: what one check costs when it asks
//! the real kube-apiserver (a SubjectAccessReview) and when the answer is
//! cached, measured on an evaluation thread as the webhook makes them.
//!
//! ```text
//! cargo bench --bench authz_check -- --checks 500
//! ```
//!
//! Under `cargo test --all-targets` (no `--bench`) it is a smoke run of a
//! few checks that asserts the answers follow RBAC, not speed.

#[path = "../tests/support/cluster.rs"]
#[allow(dead_code)]
mod cluster;

use cluster::TestCluster;
use interlock::cel::k8s_authz::{Attributes, Authorizer, UserInfo};
use interlock::cluster::authz::SarAuthorizer;
use std::time::{Duration, Instant};

fn kubectl_ok(c: &TestCluster, args: &[&str]) {
    let out = c.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn user(name: &str) -> UserInfo {
    UserInfo {
        username: name.into(),
        groups: vec!["system:authenticated".into()],
        ..UserInfo::default()
    }
}

fn secrets(namespace: &str) -> Attributes {
    Attributes::Resource {
        group: String::new(),
        resource: "secrets".into(),
        subresource: String::new(),
        namespace: namespace.into(),
        name: String::new(),
        verb: "get".into(),
        field_selector: String::new(),
        label_selector: String::new(),
    }
}

/// Median and 90th percentile of `samples`.
fn summary(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.9))
}

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let smoke = !all.iter().any(|a| a == "--bench");
    let checks = all
        .iter()
        .position(|a| a == "--checks")
        .and_then(|i| all.get(i + 1)?.parse().ok())
        .unwrap_or(if smoke { 5 } else { 500 });

    let c = TestCluster::start();
    kubectl_ok(
        &c,
        &[
            "create",
            "clusterrole",
            "secret-reader",
            "--verb=get",
            "--resource=secrets",
        ],
    );
    kubectl_ok(
        &c,
        &[
            "create",
            "clusterrolebinding",
            "alice",
            "--clusterrole=secret-reader",
            "--user=alice",
        ],
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = {
        let _in_runtime = rt.enter();
        c.client()
    };
    let authz = SarAuthorizer::new(client, rt.handle().clone());
    // RBAC's informer: wait until alice's grant shows (not cached while denied:
    // each namespace is a new question).
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0.. {
        let d = authz.authorize(&user("alice"), &secrets(&format!("warm-{i}")), None);
        if d.is_some_and(|d| d.allowed) {
            break;
        }
        assert!(Instant::now() < deadline, "RBAC never allowed alice");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Each namespace a new question: every check is a SubjectAccessReview.
    let mut api = Vec::with_capacity(checks);
    for i in 0..checks {
        let who = if i % 2 == 0 { "alice" } else { "bob" };
        let t = Instant::now();
        let d = authz
            .authorize(&user(who), &secrets(&format!("ns-{i}")), None)
            .expect("no interrupt");
        api.push(t.elapsed());
        assert_eq!(d.allowed, who == "alice", "{who}: {d:?}");
        assert_eq!(d.error, None);
    }
    // The same question again: answered from the cache.
    let mut cached = Vec::with_capacity(checks * 10);
    for _ in 0..checks * 10 {
        let t = Instant::now();
        let d = authz.authorize(&user("alice"), &secrets("ns-0"), None);
        cached.push(t.elapsed());
        assert!(d.is_some_and(|d| d.allowed));
    }
    let (api_median, api_p90) = summary(api);
    let (cached_median, cached_p90) = summary(cached);
    println!(
        "authorizer check, {checks} SubjectAccessReviews (half allowed) and {} cached answers:",
        checks * 10
    );
    println!("  SubjectAccessReview: median {api_median:?}, p90 {api_p90:?}");
    println!("  cached:              median {cached_median:?}, p90 {cached_p90:?}");
    println!(
        "  ratio (median):      {:.0}x",
        api_median.as_secs_f64() / cached_median.as_secs_f64().max(1e-9)
    );
    if smoke {
        println!("(smoke run: figures are not meaningful; use --bench)");
    }
}
