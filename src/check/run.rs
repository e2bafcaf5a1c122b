//! `interlock check`: every object in the inputs, checked against every
//! matching policy, with all the objects as the inventory.

use super::report::{
    self, Evaluated, Finding, InputError, ObjectRef, RelatedObject, Report, SourceLocation,
};
use crate::inventory::{Inventory, ObjectKey, Source};
use crate::manifest::{self, Document, LoadOptions};
use crate::policy::{self, Action, PolicySet, Request};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The identity offline checks run as (DESIGN.md: a fixed auditor identity).
pub const DEFAULT_USER: &str = "system:serviceaccount:interlock-system:auditor";

pub struct CheckOptions {
    /// Policy files or folders; empty means the bundled library.
    pub policies: Vec<PathBuf>,
    pub inputs: Vec<PathBuf>,
    pub user: String,
    /// Record passing (policy, object) pairs for JUnit.
    pub record_evaluated: bool,
}

/// Loads policy documents from paths, or the bundled library.
pub fn load_policy_documents(paths: &[PathBuf], report: &mut Report) -> Vec<Document> {
    let loaded = if paths.is_empty() {
        crate::bundled::documents()
    } else {
        manifest::load_paths(paths, &LoadOptions::default())
    };
    report.add_load_errors(&loaded.errors);
    loaded.documents
}

fn source_of(d: &Document) -> Source {
    Source {
        file: d.source.to_string(),
        line: d.line,
    }
}

/// Compiles the policies into `inventory` (declaring their indexes).
pub fn compile_policies(
    docs: &[Document],
    inventory: &mut Inventory,
    report: &mut Report,
) -> PolicySet {
    let pairs: Vec<_> = docs
        .iter()
        .filter(|d| policy::is_policy_document(&d.value))
        .map(|d| (d.value.clone(), source_of(d)))
        .collect();
    for d in docs
        .iter()
        .filter(|d| !policy::is_policy_document(&d.value))
    {
        report.errors.push(InputError {
            file: d.source.to_string(),
            line: Some(d.line),
            column: None,
            message: format!(
                "{} is not a policy; policy files hold ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding or InterlockPolicy documents (param objects belong with the resources)",
                d.display_name()
            ),
        });
    }
    let (set, errors) = PolicySet::compile(&pairs, inventory);
    for e in errors {
        report.errors.push(InputError {
            file: e.location.file.clone(),
            line: Some(e.location.line),
            column: None,
            message: format!("policy {}: {}", e.policy, e.message),
        });
    }
    report.policy_names = set.policies.iter().map(|p| p.name.clone()).collect();
    set
}

pub fn run(opts: &CheckOptions) -> Report {
    let mut report = Report::default();
    let policy_docs = load_policy_documents(&opts.policies, &mut report);
    let loaded = manifest::load_paths(&opts.inputs, &LoadOptions::default());
    report.add_load_errors(&loaded.errors);
    check_documents(&policy_docs, &loaded.documents, opts, &mut report);
    report.sort();
    report
}

/// Puts namespaced objects without a namespace into `default`, as kubectl
/// does when it sends them.
fn default_namespace(d: &mut Document) {
    let api_version = d.api_version().to_string();
    let group = crate::policy::resources::group_of(&api_version).to_string();
    let kind = d.kind().to_string();
    if crate::policy::resources::is_namespaced(&group, &kind) != Some(true) {
        return;
    }
    if let Some(meta) = d.value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        if meta
            .get("namespace")
            .and_then(|n| n.as_str())
            .is_none_or(str::is_empty)
        {
            meta.insert("namespace".into(), "default".into());
        }
    }
}

/// Checks `resources` against the policies in `policy_docs`.
pub fn check_documents(
    policy_docs: &[Document],
    resources: &[Document],
    opts: &CheckOptions,
    report: &mut Report,
) {
    let mut resources = resources.to_vec();
    resources.iter_mut().for_each(default_namespace);
    let resources = &resources[..];
    let mut inventory = Inventory::new();
    let policies = compile_policies(policy_docs, &mut inventory, report);
    let mut sources: HashMap<ObjectKey, &Document> = HashMap::new();
    for d in resources {
        let Some(key) = ObjectKey::of(&d.value) else {
            continue;
        };
        match inventory.upsert(Arc::new(d.value.clone()), Some(source_of(d))) {
            Ok(index_errors) => {
                for e in index_errors {
                    report.errors.push(InputError {
                        file: d.source.to_string(),
                        line: Some(d.line),
                        column: None,
                        message: e.to_string(),
                    });
                }
            }
            Err(e) => report.errors.push(InputError {
                file: d.source.to_string(),
                line: Some(d.line),
                column: None,
                message: e,
            }),
        }
        sources.insert(key, d);
    }
    report.objects = resources.len();
    report.policies = policies.len();
    let per_object: Vec<(Vec<Finding>, Vec<Evaluated>)> = resources
        .par_iter()
        .map(|d| check_one(d, &policies, &inventory, &sources, opts))
        .collect();
    for (findings, evaluated) in per_object {
        report.results.extend(findings);
        report.evaluated.extend(evaluated);
    }
}

fn check_one(
    d: &Document,
    policies: &PolicySet,
    inventory: &Inventory,
    sources: &HashMap<ObjectKey, &Document>,
    opts: &CheckOptions,
) -> (Vec<Finding>, Vec<Evaluated>) {
    let Some(req) = Request::create(&d.value, &opts.user) else {
        return (vec![], vec![]);
    };
    let (verdicts, _) = policies.evaluate(&req, inventory);
    let object = ObjectRef::from_document(d);
    let source = SourceLocation::from_document(d);
    let findings = verdicts
        .into_iter()
        .map(|v| Finding {
            policy: v.policy,
            binding: v.binding,
            action: match v.action {
                Action::Deny => report::Action::Deny,
                Action::Warn => report::Action::Warn,
                Action::Audit => report::Action::Audit,
            },
            object: object.clone(),
            message: v.message,
            source: source.clone(),
            related: v
                .related
                .iter()
                .filter_map(|k| sources.get(k))
                .map(|rd| RelatedObject {
                    object: ObjectRef::from_document(rd),
                    source: Some(SourceLocation::from_document(rd)),
                })
                .collect(),
            reason: v.reason,
        })
        .collect();
    let evaluated = if opts.record_evaluated {
        policies
            .policies
            .iter()
            .map(|p| Evaluated {
                policy: p.name.clone(),
                object: object.clone(),
                source: source.clone(),
            })
            .collect()
    } else {
        vec![]
    };
    (findings, evaluated)
}
