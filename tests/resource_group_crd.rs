//! The generated ResourceGroup CRD against a real kube-apiserver: it is
//! accepted, `kubectl` knows the short name and the columns, defaults are
//! filled in, and the schema refuses what it should.

mod support;

use std::process::Output;
use support::cluster::TestCluster;

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "command failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn group(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: interlock.dev/v1alpha1\nkind: ResourceGroup\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{spec}"
    )
}

#[test]
fn the_api_server_accepts_the_crd_and_validates_groups() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    ok(cluster.kubectl_stdin(
        &["apply", "--server-side", "-f", "-"],
        &interlock::group::crd_yaml(),
    ));
    ok(cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/resourcegroups.interlock.dev",
        "--timeout=60s",
    ]));
    let ns = cluster.create_namespace("rg-crd");
    let valid = group(
        &ns,
        "shop",
        "  serviceAccountName: deployer\n  resources:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: c}\n    data: {a: b}\n",
    );
    ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &valid));
    let stored: serde_json::Value = serde_json::from_str(&ok(
        cluster.kubectl(&["-n", &ns, "get", "rg", "shop", "-o", "json"])
    ))
    .unwrap();
    let spec = &stored["spec"];
    assert_eq!(spec["prune"], true, "{stored}");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["deletionPolicy"], "Delete");
    assert_eq!(spec["resources"][0]["data"]["a"], "b", "member fields kept");
    let typed: interlock::group::ResourceGroup = serde_json::from_value(stored).unwrap();
    assert_eq!(typed.spec.service_account_name, "deployer");
    let table = ok(cluster.kubectl(&["-n", &ns, "get", "rg"]));
    for column in ["NAME", "VALID", "APPLIED", "READY", "AGE", "shop"] {
        assert!(table.contains(column), "{table}");
    }

    let refused = [
        ("no-sa", "  resources: []\n", "serviceAccountName"),
        (
            "empty-sa",
            "  serviceAccountName: \"\"\n",
            "serviceAccountName",
        ),
        (
            "bad-policy",
            "  serviceAccountName: d\n  deletionPolicy: Keep\n",
            "deletionPolicy",
        ),
        (
            "no-kind",
            "  serviceAccountName: d\n  resources:\n  - apiVersion: v1\n    metadata: {name: c}\n",
            "kind",
        ),
    ];
    for (name, spec, field) in refused {
        let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &group(&ns, name, spec));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} was accepted");
        assert!(stderr.contains(field), "{name}: {stderr}");
    }
    let many: String = (0..=interlock::group::crd::MAX_MEMBERS)
        .map(|i| format!("  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}}}}}\n"))
        .collect();
    let out = cluster.kubectl_stdin(
        &["apply", "-f", "-"],
        &group(
            &ns,
            "big",
            &format!("  serviceAccountName: d\n  resources:\n{many}"),
        ),
    );
    assert!(!out.status.success(), "101 members accepted");
    assert!(String::from_utf8_lossy(&out.stderr).contains("100"));

    // Status goes through its subresource only.
    let patch = r#"{"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"","lastTransitionTime":"2026-12-01T12:00:00Z"}]}}"#;
    ok(cluster.kubectl(&[
        "-n",
        &ns,
        "patch",
        "rg",
        "shop",
        "--subresource=status",
        "--type=merge",
        "-p",
        patch,
    ]));
    let ready = ok(cluster.kubectl(&[
        "-n",
        &ns,
        "get",
        "rg",
        "shop",
        "-o",
        "jsonpath={.status.conditions[0].status}",
    ]));
    assert_eq!(ready, "True");
}
