use super::*;
use std::fs;

/// A policy on ConfigMaps that reads everything a case can set: the
/// operation, oldObject, the user and groups, dryRun, the subresource and
/// the inventory; and a mutation.
const POLICY: &str = r#"apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: configmap-rules}
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: [v1]
        resources: [configmaps, configmaps/status]
        operations: [CREATE, UPDATE, DELETE]
  validations:
    - expression: "request.operation != 'UPDATE' || object.metadata.?labels.?owner.orValue('') == oldObject.metadata.?labels.?owner.orValue('')"
      message: the owner label cannot change
    - expression: "request.operation != 'DELETE' || request.userInfo.username == 'admin'"
      messageExpression: "'only admin deletes, not ' + request.userInfo.username"
    - expression: "!request.dryRun || 'reviewers' in request.userInfo.groups"
      message: dry runs are for reviewers
    - expression: "request.?subResource.orValue('') != 'status'"
      message: no status writes
    - expression: "request.operation == 'DELETE' || !('ref' in object.?data.orValue({})) || inventory.get('v1', 'Secret', object.metadata.namespace, object.data.ref).hasValue()"
      message: the referenced Secret must exist
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: "object.metadata.?labels.orValue({}).size() > 0 ? [] : [JSONPatch{op: 'add', path: '/metadata/labels', value: {'team': 'none'}}]"
"#;

fn cm(name: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: a{extra}}}\n"
    )
}

/// A policy folder with the given cases (file name, text).
fn library(policy: &str, cases: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("configmap-rules");
    fs::create_dir_all(p.join("tests")).unwrap();
    fs::write(p.join("policy.yaml"), policy).unwrap();
    for (name, text) in cases {
        fs::write(p.join("tests").join(name), text).unwrap();
    }
    dir
}

fn header(name: &str, spec: &str) -> String {
    format!("apiVersion: interlock.dev/v1alpha1\nkind: PolicyTest\nmetadata: {{name: {name}}}\nspec:\n{spec}")
}

fn run_dir(dir: &tempfile::TempDir, run: Option<&str>) -> Summary {
    super::run(&TestOptions {
        paths: vec![dir.path().to_path_buf()],
        run: run.map(str::to_string),
        ..TestOptions::default()
    })
}

fn failures(s: &Summary) -> Vec<String> {
    s.cases
        .iter()
        .flat_map(|c| c.failures.iter().map(move |f| format!("{}: {f}", c.name)))
        .collect()
}

#[test]
fn update_delete_user_groups_dry_run_and_subresource_cases() {
    let update = header(
        "owner-changes",
        "  oldObjects:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: a, labels: {owner: x}}}
  expect:
    - object: {kind: ConfigMap, namespace: a, name: c}
      action: Deny
      messageContains: owner label
",
    ) + &cm("c", ", labels: {owner: z}");
    let delete = header(
        "delete-by-bob",
        "  request: {operation: DELETE, user: bob}
  expect:
    - object: {kind: ConfigMap, namespace: a, name: c}
      action: Deny
      messageMatches: '^only admin deletes, not bob$'
",
    ) + &cm("c", "");
    let admin = header(
        "delete-by-admin",
        "  request: {operation: DELETE, user: admin}\n  expect: []\n",
    ) + &cm("c", "");
    let dry = header(
        "dry-run",
        "  request: {dryRun: true, groups: [devs]}
  expect:
    - {object: {kind: ConfigMap, namespace: a, name: c}, action: Deny, messageContains: reviewers}
",
    ) + &cm("c", ", labels: {l: v}");
    let reviewer = header(
        "dry-run-by-reviewer",
        "  request: {dryRun: true, groups: [reviewers]}\n  expect: []\n",
    ) + &cm("c", ", labels: {l: v}");
    let status = header(
        "status",
        "  request: {subResource: status}
  expect:
    - {object: {kind: ConfigMap, namespace: a, name: c}, action: Deny, messageContains: status}
",
    ) + &cm("c", ", labels: {l: v}");
    let dir = library(
        POLICY,
        &[
            ("update.yaml", update),
            ("delete.yaml", delete),
            ("admin.yaml", admin),
            ("dry.yaml", dry),
            ("reviewer.yaml", reviewer),
            ("status.yaml", status),
        ],
    );
    let s = run_dir(&dir, None);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.cases.len(), 6);
    assert_eq!(failures(&s), Vec::<String>::new());
    assert_eq!(s.exit_code(), 0);
}

#[test]
fn a_wrong_expectation_fails_with_what_was_found() {
    let case = header(
        "wrong",
        "  request: {operation: DELETE, user: bob}
  expect:
    - {object: {kind: ConfigMap, namespace: a, name: c}, action: Deny, messageMatches: 'carol', count: 1}
",
    ) + &cm("c", "");
    let dir = library(POLICY, &[("wrong.yaml", case)]);
    let s = run_dir(&dir, None);
    let f = failures(&s);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f[0].contains("expected 1 Deny on ConfigMap a/c with a message matching /carol/, found 0"),
        "{f:?}"
    );
    assert!(
        f[1].contains("unexpected Deny on ConfigMap a/c: only admin deletes, not bob"),
        "{f:?}"
    );
    assert_eq!(s.exit_code(), 1);
}

#[test]
fn counts_take_that_many_findings() {
    // One object fails one validation: two findings are not there.
    let case = header(
        "two",
        "  request: {subResource: status}
  expect:
    - {object: {kind: ConfigMap, namespace: a, name: c}, action: Deny, count: 2}
",
    ) + &cm("c", ", labels: {l: v}");
    let dir = library(POLICY, &[("two.yaml", case)]);
    let f = failures(&run_dir(&dir, None));
    assert_eq!(
        f,
        vec!["two: expected 2 Deny on ConfigMap a/c, found 1".to_string()]
    );
}

#[test]
fn context_objects_are_seen_but_not_checked() {
    // The Secret is in the inventory only; the ConfigMap in it that would
    // fail (a missing ref) is not checked.
    let case = header(
        "context",
        "  inventory:
    - {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: a}}
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: other, namespace: a}, data: {ref: missing}}
  expect:
    - {object: {kind: ConfigMap, namespace: a, name: bad}, action: Deny, messageContains: Secret}
",
    ) + &cm("good", ", labels: {l: v}}\ndata: {ref: s")
        + &cm("bad", ", labels: {l: v}}\ndata: {ref: nope");
    let dir = library(POLICY, &[("context.yaml", case)]);
    let s = run_dir(&dir, None);
    assert_eq!(failures(&s), Vec::<String>::new());
}

#[test]
fn mutations_are_compared_as_patch_and_as_patched_object() {
    let pass = header(
        "mutated",
        "  expect: []
  expectMutations:
    - object: {kind: ConfigMap, namespace: a, name: c}
      patch: [{op: add, path: /metadata/labels, value: {team: none}}]
      patched: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: a, labels: {team: none}}}
",
    ) + &cm("c", "") + &cm("labelled", ", labels: {l: v}");
    let fail = header(
        "not-as-expected",
        "  expect: []
  expectMutations:
    - object: {kind: ConfigMap, namespace: a, name: c}
      patched: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: a, labels: {team: core}}}
",
    ) + &cm("c", "") + &cm("d", "");
    let dir = library(POLICY, &[("pass.yaml", pass), ("fail.yaml", fail)]);
    let f = failures(&run_dir(&dir, None));
    assert_eq!(
        f,
        vec![
            r#"not-as-expected: mutating ConfigMap a/c: the patched object differs at /metadata/labels/team: expected "core", got "none""#.to_string(),
            r#"not-as-expected: unexpected mutation of ConfigMap a/d: [{"op":"add","path":"/metadata/labels","value":{"team":"none"}}]"#.to_string(),
        ]
    );
}

#[test]
fn run_filters_cases_by_policy_and_name() {
    let a = header("alpha", "  expect: []\n") + &cm("c", ", labels: {l: v}");
    let b = header("beta", "  expect: []\n") + &cm("c", ", labels: {l: v}");
    let dir = library(POLICY, &[("a.yaml", a), ("b.yaml", b)]);
    let s = run_dir(&dir, Some("configmap-rules/be"));
    assert_eq!(
        s.cases.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["beta"]
    );
    let none = run_dir(&dir, Some("gamma"));
    assert_eq!(none.exit_code(), 2);
    assert!(
        none.errors[0].contains("no case matches"),
        "{:?}",
        none.errors
    );
}

#[test]
fn nothing_to_run_is_an_error_that_says_why() {
    let empty = tempfile::tempdir().unwrap();
    let s = run_dir(&empty, None);
    assert_eq!(s.exit_code(), 2);
    assert!(
        s.errors[0].contains("no policy.yaml in this folder or below it"),
        "{:?}",
        s.errors
    );

    let missing = super::run(&TestOptions {
        paths: vec![empty.path().join("nope")],
        ..TestOptions::default()
    });
    assert!(
        missing.errors[0].ends_with("nope: no such file or folder"),
        "{:?}",
        missing.errors
    );

    let not_a_test = library(POLICY, &[("x.yaml", cm("c", ""))]);
    let s = run_dir(&not_a_test, None);
    assert_eq!(s.exit_code(), 2);
    assert!(
        s.errors[0].contains("not a PolicyTest: the first document is ConfigMap a/c"),
        "{:?}",
        s.errors
    );

    let untested = library(POLICY, &[]);
    let s = run_dir(&untested, None);
    assert!(s.errors[0].contains("has no case files"), "{:?}", s.errors);
}

#[test]
fn a_policy_that_does_not_compile_is_reported_once() {
    let broken = POLICY.replace("request.operation != 'UPDATE'", "request.operation !=");
    let a = header("a", "  expect: []\n") + &cm("c", "");
    let b = header("b", "  expect: []\n") + &cm("c", "");
    let dir = library(&broken, &[("a.yaml", a), ("b.yaml", b)]);
    let s = run_dir(&dir, None);
    assert_eq!(s.errors.len(), 1, "{:?}", s.errors);
    assert!(s.cases.iter().all(|c| c.not_run && c.failures.is_empty()));
    assert_eq!(s.exit_code(), 2);
}

#[test]
fn an_update_without_its_old_object_is_a_failure() {
    let case = header("no-old", "  request: {operation: UPDATE}\n  expect: []\n") + &cm("c", "");
    let dir = library(POLICY, &[("c.yaml", case)]);
    let f = failures(&run_dir(&dir, None));
    assert!(
        f.iter()
            .any(|f| f.contains("needs its old version in spec.oldObjects")),
        "{f:?}"
    );
}

#[test]
fn json_and_junit_reports() {
    let ok = header("ok", "  expect: []\n") + &cm("c", ", labels: {l: v}");
    let bad = header("bad", "  request: {subResource: status}\n  expect: []\n")
        + &cm("c", ", labels: {l: v}");
    let dir = library(POLICY, &[("ok.yaml", ok), ("bad.yaml", bad)]);
    let s = run_dir(&dir, None);
    let json = s.to_json();
    assert_eq!(json["passed"], 1);
    assert_eq!(json["failed"], 1);
    assert_eq!(json["cases"][0]["name"], "bad");
    assert_eq!(json["cases"][0]["result"], "failed");
    let mut xml = Vec::new();
    s.write(TestFormat::Junit, &mut xml).unwrap();
    let xml = String::from_utf8(xml).unwrap();
    assert!(
        xml.contains(r#"<testsuite name="configmap-rules" tests="2" failures="1" skipped="0">"#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<testcase classname="configmap-rules" name="bad""#),
        "{xml}"
    );
    assert!(
        xml.contains("<failure message=\"unexpected Deny on ConfigMap a/c: no status writes\">"),
        "{xml}"
    );
}

#[test]
fn a_yaml_1_1_boolean_label_is_named_with_its_line() {
    let case = header("bool", "  expect: []\n") + &cm("c", ", labels: {app: y}");
    let dir = library(POLICY, &[("c.yaml", case)]);
    let f = failures(&run_dir(&dir, None));
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].contains("c.yaml:9: ConfigMap a/c: labels value app: true is a boolean, not a string"),
        "{f:?}"
    );
    assert!(
        f[0].contains("quote the value as written (app: \"...\")"),
        "{f:?}"
    );
}

#[test]
fn a_mutating_admission_policy_case_expects_the_patched_object() {
    let policy = &crate::fixtures::ADD_OWNER_MAP.replace("add-owner", "configmap-rules");
    let expect = |owner: &str| {
        header(
            &format!("owner-{owner}"),
            &format!(
                "  expect: []
  expectMutations:
    - object: {{kind: ConfigMap, namespace: a, name: c}}
      patched: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c, namespace: a, labels: {{l: v, owner: {owner}}}}}}}
"
            ),
        ) + &cm("c", ", labels: {l: v}")
    };
    let dir = library(
        policy,
        &[
            ("pass.yaml", expect("platform")),
            ("fail.yaml", expect("me")),
        ],
    );
    assert_eq!(
        failures(&run_dir(&dir, None)),
        vec![r#"owner-me: mutating ConfigMap a/c: the patched object differs at /metadata/labels/owner: expected "me", got "platform""#.to_string()]
    );
}
