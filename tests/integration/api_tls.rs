//! Issue 36: a wrong CA in the kubeconfig read like a dead address
//! ("client error (Connect)"). Now the message says the TLS handshake
//! with the API server failed, why, and which CA of the kubeconfig was
//! trusted; a dead address still reads as one.

use crate::support::cluster::TestCluster;
use base64::Engine;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The first error of `interlock audit -o json` with `kubeconfig`, which
/// must exit 2.
fn audit_error(kubeconfig: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(["audit", "-o", "json"])
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("run interlock audit");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(2), "{report:#}");
    report["errors"][0]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {report:#}"))
        .to_owned()
}

/// The shared cluster's kubeconfig with each line rewritten by `edit`.
fn kubeconfig_with(
    cluster: &TestCluster,
    dir: &Path,
    edit: impl Fn(&str) -> String,
) -> std::path::PathBuf {
    let text = std::fs::read_to_string(cluster.kubeconfig()).expect("kubeconfig");
    let edited: Vec<String> = text.lines().map(edit).collect();
    let path = dir.join("kubeconfig");
    std::fs::write(&path, edited.join("\n") + "\n").expect("write");
    path
}

#[test]
fn a_wrong_ca_in_the_kubeconfig_is_named_and_not_mistaken_for_a_dead_address() {
    let cluster = TestCluster::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let other = interlock::certs::generate(&interlock::certs::CertsOptions::new(["elsewhere"]))
        .expect("another CA");
    let other_ca = base64::engine::general_purpose::STANDARD.encode(&other.ca_cert_pem);
    let wrong_ca = kubeconfig_with(cluster, dir.path(), |line| {
        match line.split_once("certificate-authority-data:") {
            Some((indent, _)) => format!("{indent}certificate-authority-data: {other_ca}"),
            None => line.to_owned(),
        }
    });
    let message = audit_error(&wrong_ca);
    assert!(
        message.contains("the TLS handshake with the API server failed")
            && message.contains("invalid peer certificate")
            && message.contains("certificate-authority-data of cluster \"test\""),
        "{message}"
    );

    let dead_dir = tempfile::tempdir().expect("tempdir");
    let dead = kubeconfig_with(cluster, dead_dir.path(), |line| {
        match line.split_once("server:") {
            Some((indent, _)) => format!("{indent}server: https://127.0.0.1:1"),
            None => line.to_owned(),
        }
    });
    let message = audit_error(&dead);
    assert!(!message.contains("TLS handshake"), "{message}");
}
