//! The generated ResourceGroup CRD against a real kube-apiserver: it is
//! accepted, `kubectl` knows the short name and the columns, defaults are
//! filled in, and the schema refuses what it should.

use crate::support;

use interlock::group::{plan, BuiltinScopes, GroupRef, PlanInput, ResourceGroup};
use serde_json::{json, Value};
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

fn install_crd(cluster: &TestCluster) {
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
}

#[test]
fn the_api_server_accepts_the_crd_and_validates_groups() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    install_crd(cluster);
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
    assert_eq!(spec["waitForReady"], false);
    assert_eq!(spec["readyTimeout"], "10m");
    assert_eq!(spec["drift"], "Revert");
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
            "bad-drift",
            "  serviceAccountName: d\n  drift: Ignore\n",
            "drift",
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

/// Zero-write convergence against the real API server's defaulting and
/// normalisation: every member of the example group (plus the cases that
/// the server rewrites: Secret stringData, CPU quantities, zero values the
/// server drops) is applied server-side as the controller would, read back,
/// and the next plan writes nothing.
#[test]
fn members_applied_server_side_converge_with_zero_writes() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    install_crd(cluster);
    let ns = cluster.create_namespace("rg-converge");
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/groups/shop.yaml"),
    )
    .unwrap();
    let text = text.replace("namespace: team-a", &format!("namespace: {ns}"));
    ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &text));
    let stored: Value = serde_json::from_str(&ok(cluster.kubectl(&[
        "-n",
        &ns,
        "get",
        "rg",
        "storefront",
        "-o",
        "json",
    ])))
    .unwrap();
    let mut rg: ResourceGroup = serde_json::from_value(stored).unwrap();
    rg.spec.resources.extend([
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
            "stringData": {"password": "s3cret"}, "data": {"user": "YWRtaW4="}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tool"},
            "spec": {"hostNetwork": false, "restartPolicy": "Never",
                "containers": [{"name": "t", "image": "busybox:1.36", "workingDir": "",
                    "resources": {"requests": {"cpu": 0.5, "memory": "1024Mi"},
                        "limits": {"cpu": "1000m", "memory": "1Gi"}}}]}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1024Mi"}}}}),
    ]);
    let group = GroupRef::of(&rg).unwrap();
    let planned = |observed: &[Value]| {
        plan(&PlanInput {
            group: &group,
            spec: &rg.spec,
            previous: None,
            observed,
            findings: &[],
            scopes: &BuiltinScopes,
            now: chrono::Utc::now(),
        })
    };
    let first = planned(&[]);
    assert_eq!(first.apply.len(), 9, "{:?}", first.status);
    let mut observed = Vec::new();
    for member in &first.apply {
        ok(cluster.kubectl_stdin(
            &[
                "apply",
                "--server-side",
                "--field-manager=interlock",
                "--force-conflicts",
                "-f",
                "-",
            ],
            &member.object.to_string(),
        ));
        // `kubectl get Kind.group`, or `Kind` for the core group.
        let t = &member.target;
        let kind = match t.api_version.split_once('/') {
            Some((group, _)) => format!("{}.{group}", t.kind),
            None => t.kind.clone(),
        };
        let live =
            ok(cluster.kubectl(&["-n", &ns, "get", &kind, &member.target.name, "-o", "json"]));
        observed.push(serde_json::from_str::<Value>(&live).unwrap());
    }
    let second = planned(&observed);
    let rewritten: Vec<String> = second
        .apply
        .iter()
        .map(|d| format!("{} {}", d.target.kind, d.target.name))
        .collect();
    assert!(
        rewritten.is_empty(),
        "converged members planned again: {rewritten:?}"
    );
    assert!(second.prune.is_empty());
    // The members carry the group's ownerReference by UID and its label.
    for live in &observed {
        assert_eq!(
            live["metadata"]["ownerReferences"][0]["uid"],
            json!(group.uid)
        );
        assert_eq!(
            live["metadata"]["labels"]["applyset.kubernetes.io/part-of"],
            json!(interlock::group::applyset_id(&ns, "storefront"))
        );
    }
}
