//! The live inventory across 410 Gone: with the watch cache off, etcd
//! compacted and watches re-established every second, every re-connect
//! gets 410 and re-lists. Rules must keep answering from a complete index
//! (never an empty one) and never from a stale one.

use crate::support;

use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};
use support::cluster::{Options, TestCluster};
use support::webhook::{apply, ingress, namespace};

fn etcd_revision(cluster: &TestCluster) -> String {
    let out = Command::new(cluster.bin("etcdctl"))
        .args([
            "--endpoints",
            cluster.etcd_url(),
            "endpoint",
            "status",
            "-w",
            "json",
        ])
        .output()
        .expect("etcdctl");
    let v: Value = serde_json::from_slice(&out.stdout).expect("etcdctl json");
    v[0]["Status"]["header"]["revision"].to_string()
}

fn compact(cluster: &TestCluster) {
    let rev = etcd_revision(cluster);
    let out = Command::new(cluster.bin("etcdctl"))
        .args(["--endpoints", cluster.etcd_url(), "compaction", &rev])
        .output()
        .expect("etcdctl");
    assert!(
        out.status.success() || String::from_utf8_lossy(&out.stderr).contains("compacted"),
        "{out:?}"
    );
}

#[test]
fn rules_answer_from_a_complete_and_fresh_index_across_410_gone() {
    let cluster = TestCluster::start_with(Options {
        apiserver_args: vec!["--watch-cache=false".into()],
        ..Options::default()
    });
    let _logs = cluster.logs_on_panic();
    let hook = support::webhook::start(&cluster, &["--watch-timeout", "1"]);
    let a = namespace(&cluster, "owner");
    let b = namespace(&cluster, "other");
    for (name, host) in [
        ("keep", "keep.relist.example"),
        ("gone", "gone.relist.example"),
    ] {
        let out = apply(&cluster, &ingress(&a, name, host), &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = cluster.kubectl(&["-n", &a, "delete", "ingress", "gone"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 0;
    // Keep compacting until the Ingress watch has had 410 Gone and re-listed.
    let relisted = |log: &str| {
        log.lines()
            .any(|l| l.contains("re-listing") && l.contains("Ingress") && l.contains("Expired"))
    };
    while !relisted(&hook.log()) {
        assert!(
            Instant::now() < deadline,
            "no 410 re-list happened; log:\n{}",
            hook.log()
        );
        compact(&cluster);
        std::thread::sleep(Duration::from_millis(700));
        // Never answered from an empty index: the live host stays taken.
        let out = apply(
            &cluster,
            &ingress(&b, &format!("dup-{i}"), "keep.relist.example"),
            &[],
        );
        assert!(
            !out.status.success(),
            "a duplicate of a live host was admitted during re-lists"
        );
        i += 1;
    }
    // Never answered from a stale index: the deleted Ingress's host is free.
    let out = apply(&cluster, &ingress(&b, "new", "gone.relist.example"), &[]);
    assert!(
        out.status.success(),
        "a deleted Ingress still holds its host: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = apply(
        &cluster,
        &ingress(&b, "dup-final", "keep.relist.example"),
        &[],
    );
    assert!(
        !out.status.success(),
        "after re-lists the live host must still be taken"
    );
}
