//! The policy author's commands through the binary: `interlock test` and
//! `interlock eval --policy`.

use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};
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

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

pub(crate) const HPA: &str = "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: team-a}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 5
";

const STATEFULSET: &str = "apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: team-a}
spec:
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: 'nginx:1.27.3'}]}
";

#[test]
fn test_of_the_library_as_junit_and_json() {
    let o = interlock(&["test", "policies/hpa-target-exists", "-o", "junit"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let xml = stdout(&o);
    assert!(
        xml.contains(r#"<testsuite name="hpa-target-exists" tests="5" failures="0" skipped="0">"#),
        "{xml}"
    );

    let o = interlock(&[
        "test",
        "--run",
        "unique-ingress-host/duplicate",
        "-o",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: Json = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["passed"], 1);
    assert_eq!(v["cases"][0]["name"], "duplicate-host-across-namespaces");
}

#[test]
fn test_says_why_nothing_ran() {
    let o = interlock(&["test", "no/such/folder"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stdout(&o),
        "error: no/such/folder: no such file or folder\n"
    );
    let o = interlock(&["test", "docs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stdout(&o).contains("docs: no policy.yaml in this folder or below it"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_compile_error_is_reported_once_at_the_expression() {
    let dir = tempfile::tempdir().unwrap();
    let policy = std::fs::read_to_string(root().join("policies/hpa-target-exists/policy.yaml"))
        .unwrap()
        .replace(
            "variables.sameName.size() > 0",
            "variables.sameName.size() > 0 &&&",
        );
    write(dir.path(), "hpa/policy.yaml", &policy);
    for case in ["a", "b"] {
        let text = format!(
            "apiVersion: interlock.dev/v1alpha1\nkind: PolicyTest\nmetadata: {{name: {case}}}\nspec: {{expect: []}}\n---\n{HPA}"
        );
        write(dir.path(), &format!("hpa/tests/{case}.yaml"), &text);
    }
    let o = interlock(&["test", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let out = stdout(&o);
    assert_eq!(out.matches("error:").count(), 1, "{out}");
    // The messageExpression is a folded block scalar; the error is on its
    // fourth line, where `&&&` is.
    let line = policy
        .lines()
        .position(|l| l.contains("&&&"))
        .expect("the broken line")
        + 1;
    let column = policy.lines().nth(line - 1).unwrap().find("&&&").unwrap() + 1;
    assert!(
        out.contains(&format!("policy.yaml:{line}:")),
        "expected line {line} (column near {column}):\n{out}"
    );
    assert!(
        out.contains("spec.validations[0].messageExpression"),
        "{out}"
    );
    assert_eq!(
        out.matches("not run: the policy does not compile").count(),
        2,
        "{out}"
    );
}

#[test]
fn eval_with_a_policy_sees_its_variables_and_request() {
    let dir = tempfile::tempdir().unwrap();
    let hpa = write(dir.path(), "hpa.yaml", HPA);
    let inv = write(dir.path(), "inv/sts.yaml", STATEFULSET);
    let policy = "policies/hpa-target-exists/policy.yaml";
    let o = interlock(&[
        "eval",
        "--policy",
        policy,
        "--object",
        hpa.to_str().unwrap(),
        "--inventory",
        inv.parent().unwrap().to_str().unwrap(),
        "-e",
        "variables.sameName",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["value"], json!(["StatefulSet"]));

    // A list literal is homogeneous, as in kube-apiserver: request's fields
    // are typed (string), oldObject's are dyn, hence string(...).
    let o = interlock(&[
        "eval", "--policy", policy, "--object", hpa.to_str().unwrap(),
        "--operation", "UPDATE", "--old-object", hpa.to_str().unwrap(),
        "--user", "alice", "--group", "devs",
        "-e", "[request.operation, request.userInfo.username, request.userInfo.groups[0], request.namespace, string(oldObject.metadata.name)]",
    ]);
    let v: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["value"],
        json!(["UPDATE", "alice", "devs", "team-a", "web"])
    );

    // A validation, with its message when it does not hold.
    let o = interlock(&[
        "eval",
        "--policy",
        policy,
        "--object",
        hpa.to_str().unwrap(),
        "--inventory",
        inv.parent().unwrap().to_str().unwrap(),
        "--validation",
        "0",
    ]);
    let v: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["value"], false);
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("(but a StatefulSet named web does: fix spec.scaleTargetRef.kind)"),
        "{v}"
    );

    let o = interlock(&[
        "eval",
        "--policy",
        policy,
        "--validation",
        "3",
        "--object",
        hpa.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has 1 validation(s)"));
}

#[test]
fn eval_takes_an_expression_that_starts_with_a_minus() {
    let o = interlock(&["eval", "-e", "-1 + 3"]);
    assert_eq!(o.status.code(), Some(0));
    let v: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v, json!({"type": "int", "value": 2}));
}
