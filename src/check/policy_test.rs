//! `interlock test`: runs PolicyTest cases (`policies/NAME/tests/*.yaml`):
//! each case is a PolicyTest document that lists the expected findings of
//! one policy, followed by the objects checked (which are the inventory).

use super::run::{check_documents, CheckOptions, DEFAULT_USER};
use crate::manifest::{self, Document, LoadOptions};
use crate::report::{Finding, Report};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TestSpec {
    #[serde(default)]
    expect: Vec<Expectation>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Expectation {
    object: Target,
    action: String,
    #[serde(default)]
    message_contains: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Target {
    kind: String,
    #[serde(default)]
    namespace: Option<String>,
    name: String,
}

/// The result of one case file.
#[derive(Debug)]
pub struct CaseResult {
    pub file: PathBuf,
    pub name: String,
    pub failures: Vec<String>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Finds `tests/*.yaml` under each policy folder below `roots`.
pub fn discover(roots: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for root in roots {
        walk(root, &mut out);
    }
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<(PathBuf, PathBuf)>) {
    let policy = dir.join("policy.yaml");
    let tests = dir.join("tests");
    if policy.is_file() && tests.is_dir() {
        if let Ok(rd) = std::fs::read_dir(&tests) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                    out.push((policy.clone(), p));
                }
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() && e.file_name() != "tests" {
                walk(&e.path(), out);
            }
        }
    }
}

pub fn run_case(policy_file: &Path, case_file: &Path) -> CaseResult {
    let mut result = CaseResult {
        file: case_file.to_path_buf(),
        name: String::new(),
        failures: vec![],
    };
    let opts = LoadOptions::default();
    let policies = manifest::load_paths(&[policy_file], &opts);
    let case = manifest::load_paths(&[case_file], &opts);
    for e in policies.errors.iter().chain(case.errors.iter()) {
        result.failures.push(format!("input error: {e}"));
    }
    let (header, objects): (Vec<&Document>, Vec<&Document>) = case
        .documents
        .iter()
        .partition(|d| d.kind() == "PolicyTest");
    let Some(header) = header.first() else {
        result
            .failures
            .push("the first document must be a PolicyTest".into());
        return result;
    };
    result.name = header.name().unwrap_or_default().to_string();
    let spec: TestSpec = match header
        .value
        .get("spec")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
    {
        Ok(s) => s.unwrap_or(TestSpec { expect: vec![] }),
        Err(e) => {
            result.failures.push(format!("PolicyTest spec: {e}"));
            return result;
        }
    };
    let objects: Vec<Document> = objects.into_iter().cloned().collect();
    let mut report = Report::default();
    let check = CheckOptions {
        policies: vec![],
        inputs: vec![],
        user: DEFAULT_USER.into(),
        record_evaluated: false,
        whole_objects: false,
        ..Default::default()
    };
    check_documents(&policies.documents, &objects, &check, &mut report);
    for e in &report.errors {
        result.failures.push(format!("error: {e}"));
    }
    compare(&spec.expect, &report.results, &mut result.failures);
    result
}

fn matches(e: &Expectation, f: &Finding) -> bool {
    f.object.kind == e.object.kind
        && f.object.name == e.object.name
        && f.object.namespace.as_deref().unwrap_or("")
            == e.object.namespace.as_deref().unwrap_or("")
        && f.action.as_str() == e.action
        && e.message_contains
            .as_deref()
            .is_none_or(|m| f.message.contains(m))
}

fn compare(expect: &[Expectation], found: &[Finding], failures: &mut Vec<String>) {
    let mut used = vec![false; found.len()];
    for e in expect {
        match found
            .iter()
            .enumerate()
            .find(|(i, f)| !used[*i] && matches(e, f))
        {
            Some((i, _)) => used[i] = true,
            None => failures.push(format!(
                "expected {} on {} {}/{} (message containing {:?}), not found",
                e.action,
                e.object.kind,
                e.object.namespace.as_deref().unwrap_or(""),
                e.object.name,
                e.message_contains.as_deref().unwrap_or("")
            )),
        }
    }
    for (f, _) in found.iter().zip(used).filter(|(_, u)| !u) {
        failures.push(format!(
            "unexpected {} on {} {}/{}: {}",
            f.action,
            f.object.kind,
            f.object.namespace.as_deref().unwrap_or(""),
            f.object.name,
            f.message
        ));
    }
}
