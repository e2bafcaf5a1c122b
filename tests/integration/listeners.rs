//! Every listener a long-running command is asked for is bound, or the
//! command exits 2 with a message naming the flag and the address.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Issue 36: `interlock controller` ran on without its admin endpoint (no
/// probes, no metrics, not a log line) when `--admin-addr` was taken. Now
/// it exits 2 at once, naming the flag and the address. The address is
/// bound before the cluster is looked for, so no cluster is needed: with
/// the old order this test fails on "no cluster to reconcile against".
#[test]
fn the_controller_exits_2_when_its_admin_address_is_taken() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let dir = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(["controller", "--no-leader-election", "--admin-addr"])
        .arg(addr.to_string())
        .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null())
        .output()
        .expect("run interlock controller");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--admin-addr") && stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
    // Generous: it must not have waited for anything.
    assert!(started.elapsed() < Duration::from_secs(60));
    drop(taken);
}
