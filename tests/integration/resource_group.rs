//! ResourceGroups through the binary: `interlock crd` and the committed
//! manifest, and `interlock check` over groups (members checked as objects
//! of the group's namespace, reported at the group's file and line).

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn interlock(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run interlock")
}

fn json_report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn crd_prints_the_committed_manifest() {
    let out = interlock(&["crd", "ResourceGroup"]);
    assert_eq!(out.status.code(), Some(0));
    let committed = std::fs::read(root().join("manifests/base/crd-resourcegroup.yaml")).unwrap();
    assert!(
        out.stdout == committed,
        "manifests/base/crd-resourcegroup.yaml is stale: run `interlock crd ResourceGroup > manifests/base/crd-resourcegroup.yaml`"
    );
    let exception =
        std::fs::read(root().join("manifests/base/crd-interlockexception.yaml")).unwrap();
    let policy = std::fs::read(root().join("manifests/base/crd-interlockpolicy.yaml")).unwrap();
    let one = interlock(&["crd", "InterlockPolicy"]);
    assert_eq!(one.stdout, policy, "the InterlockPolicy CRD alone");
    let tenants =
        std::fs::read(root().join("manifests/base/crd-interlocknamespacepolicy.yaml")).unwrap();
    let one = interlock(&["crd", "InterlockNamespacePolicy"]);
    assert_eq!(
        one.stdout, tenants,
        "the InterlockNamespacePolicy CRD alone"
    );
    let all = interlock(&["crd"]);
    assert_eq!(
        all.stdout,
        [committed, exception, policy, tenants].concat(),
        "every CRD, in order"
    );
    let kustomization =
        std::fs::read_to_string(root().join("manifests/base/kustomization.yaml")).unwrap();
    assert!(kustomization.contains("- crd-resourcegroup.yaml"));
    assert!(kustomization.contains("- crd-interlockexception.yaml"));
    assert!(kustomization.contains("- crd-interlockpolicy.yaml"));
    assert!(kustomization.contains("- crd-interlocknamespacepolicy.yaml"));
}

#[test]
fn the_example_group_is_clean() {
    let out = interlock(&["check", "-o", "json", "examples/groups/shop.yaml"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v = json_report(&out);
    assert_eq!(v["summary"]["objects"], 7, "the group and its 6 members");
    assert_eq!(v["results"], serde_json::json!([]));
}

#[test]
fn the_release_example_is_clean() {
    let out = interlock(&["check", "-o", "json", "examples/groups/release.yaml"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v = json_report(&out);
    assert_eq!(v["summary"]["objects"], 4, "the group and its 3 members");
    assert_eq!(v["results"], serde_json::json!([]));
}

#[test]
fn members_are_checked_in_the_group_namespace_and_reported_at_the_group() {
    let file = "tests/groups/broken-shop.yaml";
    let out = interlock(&["check", "-o", "json", file]);
    assert_eq!(out.status.code(), Some(1), "a Deny finding exits 1");
    let v = json_report(&out);
    let results = v["results"].as_array().unwrap();
    let find = |policy: &str| {
        results
            .iter()
            .find(|r| r["policy"] == policy)
            .unwrap_or_else(|| panic!("no {policy} finding in {results:?}"))
    };
    // A missing reference is a Warn offline: the files cannot settle it.
    for (policy, action) in [
        ("disallow-latest-tag", "Deny"),
        ("pod-references-exist", "Warn"),
    ] {
        let r = find(policy);
        assert_eq!(r["action"], action);
        assert_eq!(r["object"]["kind"], "Deployment");
        assert_eq!(r["object"]["name"], "web");
        assert_eq!(r["object"]["namespace"], "team-b");
        assert_eq!(r["source"]["file"], file);
        assert_eq!(r["source"]["line"], 4, "the group's line");
    }
    // The ConfigMap of the group is found by the lookup; the other is not.
    let message = find("pod-references-exist")["message"].as_str().unwrap();
    assert!(message.contains("ConfigMap missing-config"), "{message}");
    assert!(!message.contains("present"), "{message}");
    assert_eq!(results.len(), 2, "{results:?}");
}

#[test]
fn a_member_out_of_scope_is_an_input_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("group.yaml");
    std::fs::write(
        &path,
        "apiVersion: interlock.dev/v1alpha1\nkind: ResourceGroup\nmetadata:\n  name: g\n  namespace: a\nspec:\n  serviceAccountName: sa\n  resources:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: c, namespace: b}\n",
    )
    .unwrap();
    let out = interlock(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("group.yaml:9"), "{text}");
    assert!(
        text.contains("members live in the group's namespace a"),
        "{text}"
    );
}

#[test]
fn check_applies_the_group_rules_at_the_group() {
    let file = "tests/groups/rule-breaking.yaml";
    let out = interlock(&["check", "-o", "json", file]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a group rule denies: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v = json_report(&out);
    let results = v["results"].as_array().unwrap();
    let mut found: Vec<(&str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["policy"].as_str().unwrap_or(""),
                r["object"]["kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("group-ingress-backend-member", "Ingress"),
            ("group-service-selects-member", "Service")
        ],
        "{results:?}"
    );
    for r in results {
        assert_eq!(r["action"], "Deny");
        assert_eq!(r["object"]["namespace"], "team-c");
        assert_eq!(r["source"]["file"], file);
        assert_eq!(r["source"]["line"], 5, "the group's line");
    }
    // The same members with the selector and port fixed: clean.
    let fixed = std::fs::read_to_string(root().join(file))
        .unwrap()
        .replace("{app: wbe}", "{app: web}")
        .replace("port: {number: 8080}", "port: {number: 80}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixed.yaml");
    std::fs::write(&path, fixed).unwrap();
    let out = interlock(&["check", "-o", "json", path.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
