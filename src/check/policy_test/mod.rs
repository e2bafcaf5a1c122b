//! `interlock test`: runs PolicyTest cases (`policies/NAME/tests/*.yaml`):
//! each case is a PolicyTest document that lists the expected findings of
//! one policy, followed by the objects checked (which are the inventory).
//! The format is documented in policies/README.md.

mod against;
mod compare;
mod discover;
mod output;
mod spec;
#[cfg(test)]
mod tests;

use super::run::{check_documents_with, compile_policies, CheckOptions, DEFAULT_USER};
use crate::inventory::{Inventory, ObjectKey};
use crate::manifest::{self, Document, LoadOptions};
use crate::policy::finding::Finding;
use crate::report::Report;
use regex::Regex;
use serde_json::Value as Json;
use spec::TestSpec;
use std::path::{Path, PathBuf};

pub use against::{Answer, Comparison, Row};
pub use discover::{discover, find, Discovered};
pub use output::TestFormat;

/// What `interlock test` runs.
#[derive(Debug, Clone, Default)]
pub struct TestOptions {
    /// Policy folders, folders of them, or case files.
    pub paths: Vec<PathBuf>,
    /// Run only the cases whose `POLICY/CASE` matches this regular expression.
    pub run: Option<String>,
    /// Also send the cases of ValidatingAdmissionPolicies to the cluster of
    /// the kubeconfig and compare its answers.
    pub against_cluster: bool,
    /// `--no-defaults`: send the case's objects as written.
    pub no_defaults: bool,
}

/// The result of one case file.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The name of the policy's folder.
    pub policy: String,
    pub file: PathBuf,
    pub name: String,
    pub failures: Vec<String>,
    /// Not evaluated (the policy does not compile).
    pub not_run: bool,
    /// kube-apiserver's answers beside Interlock's (`--against-cluster`).
    pub cluster: Option<Comparison>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && !self.not_run
    }
}

/// Everything one `interlock test` found.
#[derive(Debug, Default)]
pub struct Summary {
    pub cases: Vec<CaseResult>,
    /// Why something could not run: missing paths, files that are not
    /// PolicyTests, policies that do not compile (each said once).
    pub errors: Vec<String>,
    /// What compiles but will not work as meant (a lookup of a kind that
    /// does not exist), once per policy.
    pub warnings: Vec<String>,
}

impl Summary {
    pub fn failed(&self) -> usize {
        self.cases.iter().filter(|c| !c.passed()).count()
    }

    /// 2 when something could not run, 1 when a case failed, else 0.
    pub fn exit_code(&self) -> i32 {
        if !self.errors.is_empty() {
            2
        } else {
            i32::from(self.failed() > 0)
        }
    }
}

/// Finds and runs the cases under `opts.paths`.
pub fn run(opts: &TestOptions) -> Summary {
    let mut summary = Summary::default();
    let filter = match opts.run.as_deref().map(Regex::new).transpose() {
        Ok(f) => f,
        Err(e) => {
            summary.errors.push(format!("--run: {e}"));
            return summary;
        }
    };
    let against = match opts.against_cluster.then(against::Against::connect) {
        None => None,
        Some(Ok(a)) => Some(a),
        Some(Err(e)) => {
            summary.errors.push(e.to_string());
            return summary;
        }
    };
    let found = find(&opts.paths);
    summary.errors.extend(found.errors);
    for (policy_file, cases) in &found.policies {
        let runner = Runner {
            filter: filter.as_ref(),
            against: against.as_ref(),
            no_defaults: opts.no_defaults,
        };
        runner.policy(policy_file, cases, &mut summary);
    }
    if let (Some(pattern), true) = (&opts.run, summary.cases.is_empty()) {
        if summary.errors.is_empty() {
            summary.errors.push(format!(
                "--run {pattern}: no case matches; cases are named POLICY/CASE (the folder of policy.yaml, the PolicyTest's metadata.name)"
            ));
        }
    }
    summary
}

/// The folder name of a policy file: what cases are grouped by.
fn policy_name(policy_file: &Path) -> String {
    policy_file
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| policy_file.display().to_string())
}

/// How the cases of one run are chosen and where else they are sent.
struct Runner<'a> {
    filter: Option<&'a Regex>,
    against: Option<&'a against::Against>,
    /// `--no-defaults`: the case's objects as written.
    no_defaults: bool,
}

impl Runner<'_> {
    fn policy(&self, policy_file: &Path, cases: &[PathBuf], out: &mut Summary) {
        let policy = policy_name(policy_file);
        let loaded = manifest::load_paths(&[policy_file], &LoadOptions::default());
        // A policy that does not compile is said once, not once per case.
        let mut report = Report::default();
        report.add_load_errors(&loaded.errors);
        compile_policies(&loaded.documents, &mut Inventory::new(), &mut report);
        let broken = !report.errors.is_empty();
        for e in &report.errors {
            out.errors.push(e.to_string());
        }
        for w in &report.notices {
            out.warnings.push(w.to_string());
        }
        for file in cases {
            let case = match load_case(file) {
                Ok(c) => c,
                Err(e) => {
                    out.errors.push(e.to_string());
                    continue;
                }
            };
            let name = case.name.clone();
            if self
                .filter
                .is_some_and(|f| !f.is_match(&format!("{policy}/{name}")))
            {
                continue;
            }
            let mut result = CaseResult {
                policy: policy.clone(),
                file: file.clone(),
                name,
                failures: vec![],
                not_run: broken,
                cluster: None,
            };
            if !broken {
                self.run(&loaded.documents, &case, &mut result);
            }
            out.cases.push(result);
        }
    }

    /// Runs one case into `result`, and sends it to the cluster when asked.
    fn run(&self, policy_docs: &[Document], case: &Case, result: &mut CaseResult) {
        let findings;
        (result.failures, findings) = run_loaded(policy_docs, case, self.no_defaults);
        let Some(against) = self.against else {
            return;
        };
        let docs: Vec<Json> = policy_docs
            .iter()
            .filter(|d| crate::policy::is_policy_document(&d.value))
            .map(|d| d.value.clone())
            .collect();
        let compared = against.compare(&docs, case, &findings);
        match &compared {
            Comparison::Rows(rows) => {
                result
                    .failures
                    .extend(rows.iter().filter(|r| !r.agrees()).map(|r| {
                        format!(
                            "{}: kube-apiserver disagrees: Interlock: {}; kube-apiserver: {}",
                            r.object, r.interlock, r.kube
                        )
                    }))
            }
            Comparison::Failed(e) => result.failures.push(e.clone()),
            Comparison::NotSent(_) => {}
        }
        result.cluster = Some(compared);
    }
}

/// A case file read: its PolicyTest and the objects it checks.
struct Case {
    name: String,
    header: Document,
    objects: Vec<Document>,
}

/// Why a file is not a case, with where.
#[derive(Debug, thiserror::Error)]
enum CaseError {
    #[error("{0}")]
    Input(manifest::LoadError),
    #[error("{file}:{line}: not a PolicyTest: the first document is {found}; a case file starts with a `kind: PolicyTest` document (policies/README.md)")]
    NotFirst {
        file: String,
        line: usize,
        found: String,
    },
    #[error("{0}: not a PolicyTest: the file holds no Kubernetes objects; a case file starts with a `kind: PolicyTest` document (policies/README.md)")]
    NoObjects(String),
    #[error("{file}:{line}: a second PolicyTest; one case per file")]
    Second { file: String, line: usize },
}

/// Reads a case file; an error says why it is not a case.
fn load_case(file: &Path) -> Result<Case, CaseError> {
    let mut loaded = manifest::load_paths(&[file], &LoadOptions::default());
    if !loaded.errors.is_empty() {
        return Err(CaseError::Input(loaded.errors.swap_remove(0)));
    }
    let mut docs = loaded.documents.into_iter();
    let header = match docs.next() {
        Some(d) if d.kind() == "PolicyTest" => d,
        Some(d) => {
            return Err(CaseError::NotFirst {
                file: d.source.to_string(),
                line: d.line,
                found: d.display_name(),
            })
        }
        None => return Err(CaseError::NoObjects(file.display().to_string())),
    };
    let objects: Vec<Document> = docs.collect();
    if let Some(d) = objects.iter().find(|d| d.kind() == "PolicyTest") {
        return Err(CaseError::Second {
            file: d.source.to_string(),
            line: d.line,
        });
    }
    Ok(Case {
        name: header.name().unwrap_or_default().to_string(),
        header,
        objects,
    })
}

/// Runs one case file against `policy_file` (the policy must compile).
pub fn run_case(policy_file: &Path, case_file: &Path) -> CaseResult {
    let policy = policy_name(policy_file);
    let mut result = CaseResult {
        policy,
        file: case_file.to_path_buf(),
        name: String::new(),
        failures: vec![],
        not_run: false,
        cluster: None,
    };
    let loaded = manifest::load_paths(&[policy_file], &LoadOptions::default());
    for e in &loaded.errors {
        result.failures.push(format!("input error: {e}"));
    }
    match load_case(case_file) {
        Ok(case) => {
            result.name = case.name.clone();
            result
                .failures
                .extend(run_loaded(&loaded.documents, &case, false).0);
        }
        Err(e) => result.failures.push(e.to_string()),
    }
    result
}

/// Inline objects of the PolicyTest at `field`, as documents at their lines.
fn inline_documents(header: &Document, field: &str, values: &[Json]) -> Vec<Document> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let line = header
                .line_of_pointer(&format!("/spec/{field}/{i}"))
                .unwrap_or(header.line);
            Document::new(header.source.clone(), line, v.clone())
        })
        .collect()
}

/// The failures of one case, and the findings they were judged on.
fn run_loaded(
    policy_docs: &[Document],
    case: &Case,
    no_defaults: bool,
) -> (Vec<String>, Vec<Finding>) {
    let mut failures = Vec::new();
    let spec: TestSpec = match case.header.value.get("spec").cloned() {
        None => TestSpec::default(),
        Some(s) => match serde_json::from_value(s) {
            Ok(s) => s,
            Err(e) => return (vec![format!("PolicyTest spec: {e}")], Vec::new()),
        },
    };
    let shape = match spec
        .request
        .shape(!spec.old_objects.is_empty(), DEFAULT_USER)
    {
        Ok(s) => s,
        Err(e) => return (vec![e.to_string()], Vec::new()),
    };
    let mut check = CheckOptions {
        user: shape.user.clone(),
        shape: Some(shape.clone()),
        no_defaults,
        // A case's objects are the whole cluster it is judged in.
        whole_cluster: true,
        ..Default::default()
    };
    for mut old in spec.old_objects.iter().cloned() {
        check.as_admitted(&mut old);
        match ObjectKey::of(&old) {
            Some(k) => {
                check.old_objects.insert(k, old);
            }
            None => failures.push(
                "spec.oldObjects: an old object needs apiVersion, kind and metadata.name".into(),
            ),
        }
    }
    if shape.operation == crate::policy::Operation::Update {
        for d in &case.objects {
            let mut v = d.value.clone();
            super::run::default_namespace(&mut v, "default");
            if ObjectKey::of(&v).is_none_or(|k| !check.old_objects.contains_key(&k)) {
                failures.push(format!(
                    "{}:{}: an UPDATE of {} needs its old version in spec.oldObjects",
                    d.source,
                    d.line,
                    d.display_name()
                ));
            }
        }
    }
    let context = inline_documents(&case.header, "inventory", &spec.inventory);
    let mut report = Report::default();
    let (policies, inventory) =
        check_documents_with(policy_docs, &context, &case.objects, &check, &mut report);
    for e in &report.errors {
        failures.push(format!("error: {e}"));
    }
    compare::findings(&spec.expect, &report.results, &mut failures);
    if let Some(expected) = &spec.expect_mutations {
        let patches = compare::mutations(&case.objects, &policies, &inventory, &check);
        compare::patches(expected, &patches, &mut failures);
    }
    (failures, report.results)
}
