//! The bundled policy library's own test cases (policies/NAME/tests/*.yaml)
//! and `interlock check` over examples/, end to end through the binary.

use interlock::check::policy_test::{discover, run_case};
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_bundled_policy_case_passes() {
    let cases = discover(&[root().join("policies")]);
    assert!(
        cases.len() >= 20,
        "expected the library's test cases, found {}",
        cases.len()
    );
    let failures: Vec<String> = cases
        .iter()
        .map(|(p, c)| run_case(p, c))
        .filter(|r| !r.passed())
        .map(|r| format!("{}: {}", r.file.display(), r.failures.join("; ")))
        .collect();
    assert!(
        failures.is_empty(),
        "failing policy cases:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_cross_object_policy_has_allowed_and_denied_cases() {
    for name in [
        "unique-ingress-host",
        "unique-service-selector",
        "pod-references-exist",
        "pdb-selects-workload",
        "hpa-target-exists",
    ] {
        let cases = discover(&[root().join("policies").join(name)]);
        assert!(cases.len() >= 3, "{name} has {} cases", cases.len());
    }
}

/// `serve` watches the kinds that lookups name with constants; a lookup that
/// computes its kind finds only what is watched for other reasons. Before
/// the library named every kind it looks up, `serve` on a cluster refused
/// a Pod mounting an existing ConfigMap, and an HPA scaling an existing
/// StatefulSet, as referring to objects that do not exist.
#[test]
fn serve_watches_every_kind_the_library_looks_up() {
    let mut report = interlock::check::Report::default();
    let docs = interlock::check::run::load_policy_documents(&[], &mut report);
    let mut inventory = interlock::inventory::Inventory::new();
    let (set, errors) = interlock::policy::PolicySet::compile_documents(docs, &mut inventory);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(set.with_computed_lookups(), Vec::<&str>::new());
    let kinds = set.kinds_read();
    for (api_version, kind) in [
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "ReplicaSet"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "ServiceAccount"),
        ("v1", "PersistentVolumeClaim"),
    ] {
        assert!(
            kinds.contains(&(api_version.to_owned(), kind.to_owned())),
            "{api_version} {kind} is not watched: {kinds:?}"
        );
    }
}

fn interlock(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run interlock")
}

#[test]
fn check_examples_reports_the_deliberate_violations_as_json() {
    let out = interlock(&["check", "-o", "json", "examples"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a Deny finding exits 1; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let results = v["results"].as_array().expect("results");
    assert_eq!(
        v["summary"]["violations"].as_u64(),
        Some(results.len() as u64)
    );
    let has = |policy: &str, kind: &str, name: &str| {
        results.iter().any(|r| {
            r["policy"] == policy
                && r["object"]["kind"] == kind
                && r["object"]["name"] == name
                && r["action"] == "Deny"
        })
    };
    assert!(has("unique-ingress-host", "Ingress", "blog-promo"));
    assert!(has(
        "hpa-target-exists",
        "HorizontalPodAutoscaler",
        "blog-frontend"
    ));
    assert!(has("pod-security-baseline", "Pod", "debug-toolbox"));
    for r in results {
        assert!(r["source"]["file"]
            .as_str()
            .is_some_and(|f| f.starts_with("examples/")));
        assert!(r["source"]["line"].as_u64().is_some_and(|l| l >= 1));
    }
}

#[test]
fn bad_input_exits_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: [unclosed\n",
    )
    .unwrap();
    let out = interlock(&["check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("bad.yaml:"), "{text}");
}

#[test]
fn a_policy_that_does_not_compile_exits_2_with_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.yaml");
    std::fs::write(&p, "apiVersion: interlock.dev/v1alpha1\nkind: InterlockPolicy\nmetadata:\n  name: broken\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE]}]\n  validations:\n    - expression: \"objct.spec != null\"\n").unwrap();
    let out = interlock(&["check", "-p", p.to_str().unwrap(), "examples"]);
    assert_eq!(out.status.code(), Some(2));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("p.yaml:1"), "{text}");
    assert!(text.contains("undeclared reference to 'objct'"), "{text}");
    assert!(text.contains("spec.validations[0].expression"), "{text}");
}

#[test]
fn eval_prints_type_and_value() {
    let out = interlock(&["eval", "-e", "duration('1h') + duration('30m')"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"type": "google.protobuf.Duration", "value": "5400s"})
    );
    let out = interlock(&["eval", "-e", "{'a': [1, 2u, 3.5]}.a"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "mixed list literal is a compile error"
    );
    let out = interlock(&["eval", "-e", "1 / 0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("division by zero"));
    let out = interlock(&["eval", "-e", "objct"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<input>:1:1"));
}

#[test]
fn eval_reads_objects_and_the_inventory() {
    let out = interlock(&[
        "eval",
        "-e",
        "inventory.list('networking.k8s.io/v1', 'Ingress', '').map(i, i.metadata.name).sort()",
        "--inventory",
        "examples",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "list");
    assert!(v["value"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n == "blog-promo"));
}
