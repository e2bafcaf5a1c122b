//! Differential test of policy creation (issue 16): every expression of
//! `tests/vap-corpus/creation/expressions.tsv` becomes one
//! ValidatingAdmissionPolicy, created with `--dry-run=server` on a real
//! kube-apiserver and compiled by Interlock. A refusal is a comparison,
//! not a failure: both must accept, or both refuse with the same
//! message (cel-go's `ERROR: <input>:L:C: ...` line, or kube-apiserver's
//! `must evaluate to ...`).
//!
//! Prints the agreement by class. Fails on any disagreement that
//! `tests/vap-corpus/creation/known-disagreements.txt` does not list, and
//! on a listed one that now agrees (so the list only shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::support::cluster::TestCluster;
use interlock::inventory::Source;
use interlock::policy::PolicySet;
use serde_json::{json, Value as Json};

struct Case {
    class: String,
    expression: String,
}

fn corpus() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vap-corpus/creation");
    let text = std::fs::read_to_string(dir.join("expressions.tsv")).expect("expressions.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (class, expression) = l.split_once('\t').expect("class<TAB>expression");
            Case {
                class: class.to_string(),
                expression: expression.to_string(),
            }
        })
        .collect()
}

fn known_disagreements() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vap-corpus/creation/known-disagreements.txt");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn policy(i: usize, case: &Case) -> Json {
    let validation = if case.class == "messageExpression" {
        json!({"expression": "true", "messageExpression": case.expression})
    } else {
        json!({"expression": case.expression})
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": format!("creation-{i}")},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                "operations": ["CREATE"]}]},
            "validations": [validation],
        }
    })
}

/// The comparable part of a refusal: cel-go's first error line, or the
/// result-type message.
pub(crate) fn normalize(text: &str) -> String {
    if let Some(i) = text.find("ERROR: <input>:") {
        return text[i..]
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
    }
    if let Some(i) = text.find("program instantiation failed: ") {
        return text[i..]
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
    }
    if let Some(i) = text.find("must evaluate to") {
        let rest = &text[i..];
        return rest
            .lines()
            .next()
            .unwrap_or_default()
            .trim_end_matches(['"', ']'])
            .trim()
            .to_string();
    }
    text.trim().to_string()
}

fn interlock_answer(doc: &Json) -> Option<String> {
    let source = Source {
        file: "creation.yaml".into(),
        line: 1,
    };
    let (_, errors) = PolicySet::compile(&[(doc.clone(), source)]);
    errors.first().map(|e| normalize(&e.message))
}

#[test]
fn policy_creation_agrees_with_kube_apiserver() {
    let cases = corpus();
    assert!(
        cases.len() >= 300,
        "the corpus has {} expressions",
        cases.len()
    );
    let cluster = TestCluster::shared();
    let next = AtomicUsize::new(0);
    let kube: Mutex<BTreeMap<usize, Option<String>>> = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                let doc = policy(i, case).to_string();
                let out = cluster.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], &doc);
                let answer = (!out.status.success())
                    .then(|| normalize(&String::from_utf8_lossy(&out.stderr)));
                kube.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(i, answer);
            });
        }
    });
    let kube = kube.into_inner().unwrap_or_else(|e| e.into_inner());
    let known = known_disagreements();
    // Per class: agreeing, total, refused by both.
    let mut by_class: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut unexpected = Vec::new();
    let mut seen_known = BTreeSet::new();
    for (i, case) in cases.iter().enumerate() {
        let theirs = &kube[&i];
        let ours = interlock_answer(&policy(i, case));
        let agree = theirs == &ours;
        let entry = by_class.entry(&case.class).or_default();
        entry.1 += 1;
        if agree {
            entry.0 += 1;
            entry.2 += usize::from(ours.is_some());
            continue;
        }
        let key = format!("{}\t{}", case.class, case.expression);
        let line = format!(
            "{key}\n    kube-apiserver: {}\n    Interlock:      {}",
            theirs.as_deref().unwrap_or("accepted"),
            ours.as_deref().unwrap_or("accepted")
        );
        eprintln!("DISAGREE {line}");
        if known.contains(&key) {
            seen_known.insert(key);
        } else {
            unexpected.push(line);
        }
    }
    let (mut a, mut n) = (0, 0);
    for (class, (agree, total, refused)) in &by_class {
        eprintln!("creation agreement {class}: {agree}/{total} ({refused} refused by both)");
        a += agree;
        n += total;
    }
    eprintln!("creation agreement: {a}/{n}");
    let stale: Vec<&String> = known.difference(&seen_known).collect();
    assert!(
        unexpected.is_empty(),
        "{} new disagreements:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    assert!(
        stale.is_empty(),
        "listed disagreements that now agree: {stale:?}"
    );
}
