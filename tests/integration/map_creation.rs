//! Differential test of MutatingAdmissionPolicy creation (issue 33): every
//! case of `tests/map-corpus/creation/cases.jsonl` is a MutatingAdmissionPolicy
//! (a base spec with the case's fields merged over it), created with
//! `--dry-run=server` on a real kube-apiserver and compiled by Interlock.
//! Both must accept it, or both refuse it, Interlock with one of the errors
//! kube-apiserver gives (the same field and message; for an expression,
//! cel-go's `ERROR: <input>:L:C: ...` line or the result-type message).
//!
//! Prints `MAP creation agreement: A/N`; fails on a disagreement that
//! `tests/map-corpus/creation/known-disagreements.txt` does not list, and on
//! a listed one that agrees.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::cel_creation_e2e::normalize;
use crate::support::cluster::TestCluster;
use interlock::inventory::Source;
use interlock::policy::PolicySet;
use serde_json::{json, Value as Json};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/map-corpus/creation")
}

/// (class, what, the policy).
fn corpus() -> Vec<(String, String, Json)> {
    let text = std::fs::read_to_string(dir().join("cases.jsonl")).expect("cases.jsonl");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            let mut parts = l.splitn(3, '\t');
            let (class, what, spec) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            let spec: Json = serde_json::from_str(spec).unwrap_or_else(|e| panic!("{l}: {e}"));
            (class.to_string(), what.to_string(), policy(i, &spec))
        })
        .collect()
}

fn policy(i: usize, overrides: &Json) -> Json {
    let mut spec = json!({
        "failurePolicy": "Fail",
        "reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
            "operations": ["CREATE"]}]},
        "mutations": [{"patchType": "ApplyConfiguration",
                       "applyConfiguration": {"expression": "Object{data: {'x': 'y'}}"}}],
    });
    for (k, v) in overrides.as_object().into_iter().flatten() {
        match v {
            Json::Null => {
                spec.as_object_mut().expect("an object").remove(k);
            }
            v => spec[k] = v.clone(),
        }
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": format!("map-creation-{i}")},
        "spec": spec,
    })
}

/// Each error kube-apiserver lists: `field: message`, the message
/// normalized as the VAP creation test does.
fn kube_errors(stderr: &str) -> Vec<String> {
    let rest = stderr
        .split_once(" is invalid: ")
        .map_or(stderr, |(_, r)| r);
    let items: Vec<&str> = if rest.trim_start().starts_with('*') || rest.starts_with('\n') {
        rest.split("\n* ").skip(1).collect()
    } else {
        vec![rest]
    };
    items.into_iter().map(error_key).collect()
}

/// `field: message` with the message normalized.
fn error_key(e: &str) -> String {
    let e = e.trim().trim_start_matches("* ");
    match e.split_once(": ") {
        Some((field, message)) if field.starts_with("spec") => {
            let field = field.split_whitespace().next().unwrap_or(field);
            let message = match message.split_once(": Invalid value: ") {
                Some((_, m)) => m,
                None => message,
            };
            format!("{field}: {}", normalize(message))
        }
        _ => normalize(e),
    }
}

fn interlock_error(doc: &Json) -> Option<String> {
    let source = Source {
        file: "creation.yaml".into(),
        line: 1,
    };
    let (_, errors) = PolicySet::compile(&[(doc.clone(), source)]);
    errors.first().map(|e| error_key(&e.message))
}

fn known_disagreements() -> BTreeSet<String> {
    std::fs::read_to_string(dir().join("known-disagreements.txt"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split('\t').next().map(str::to_string))
        .collect()
}

#[test]
fn map_creation_agrees_with_kube_apiserver() {
    let cases = corpus();
    assert!(cases.len() >= 30, "the corpus has {} cases", cases.len());
    let cluster = TestCluster::shared();
    let known = known_disagreements();
    let (mut agree, mut refused) = (0, 0);
    let mut unexpected = Vec::new();
    let mut seen_known = BTreeSet::new();
    for (class, what, doc) in &cases {
        let out =
            cluster.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], &doc.to_string());
        let theirs =
            (!out.status.success()).then(|| kube_errors(&String::from_utf8_lossy(&out.stderr)));
        let ours = interlock_error(doc);
        let same = match (&theirs, &ours) {
            (None, None) => true,
            (Some(t), Some(o)) => t.contains(o),
            _ => false,
        };
        if same {
            agree += 1;
            refused += usize::from(ours.is_some());
            continue;
        }
        let line = format!(
            "{class}: {what}\n    kube-apiserver: {}\n    Interlock:      {}",
            theirs.map_or("accepted".into(), |t| t.join(" | ")),
            ours.as_deref().unwrap_or("accepted")
        );
        eprintln!("DISAGREE {line}");
        if known.contains(what) {
            seen_known.insert(what.clone());
        } else {
            unexpected.push(line);
        }
    }
    eprintln!(
        "MAP creation agreement: {agree}/{} ({refused} refused by both)",
        cases.len()
    );
    let stale: Vec<&String> = known.difference(&seen_known).collect();
    assert!(
        unexpected.is_empty(),
        "{} disagreements:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    assert!(
        stale.is_empty(),
        "listed disagreements that now agree: {stale:?}"
    );
}
