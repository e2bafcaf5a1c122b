//! `interlock check`: every object in the inputs, checked against every
//! matching policy, with all the objects as the inventory.

use super::report::{
    self, Evaluated, Finding, InputError, ObjectRef, RelatedObject, Report, SourceLocation,
};
use crate::inventory::{Inventory, ObjectKey, Source};
use crate::manifest::{self, Document, LoadOptions};
use crate::policy::{self, Action, PolicySet, Request};
use rayon::prelude::*;
use serde_json::Value as Json;
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
    // The documents are consumed: each object is held once (shared by the
    // inventory and the evaluation), and its field positions are dropped.
    let items = loaded
        .documents
        .into_par_iter()
        .map(Item::from_document)
        .collect();
    let leftovers = check_items(&policy_docs, items, opts, &mut report);
    // Freeing every object of a large input takes a noticeable fraction of
    // the run on one core, and the report does not need them: free them on
    // a thread of their own (the process may well exit before it is done).
    if leftovers.0.len() >= BACKGROUND_DROP_MIN {
        std::thread::spawn(move || drop(leftovers));
    } else {
        drop(leftovers);
    }
    report.sort();
    report
}

/// Inputs at least this large are freed on a background thread.
const BACKGROUND_DROP_MIN: usize = 5_000;

/// One resource to check: its object (shared with the inventory) and what
/// the report says about it.
struct Item {
    value: Arc<Json>,
    key: Option<ObjectKey>,
    object: ObjectRef,
    source: SourceLocation,
}

/// Puts a namespaced object without a namespace into `default`, as kubectl
/// does when it sends it.
fn default_namespace(value: &mut Json) {
    let group = value
        .get("apiVersion")
        .and_then(Json::as_str)
        .map(crate::policy::resources::group_of)
        .unwrap_or("");
    let kind = value.get("kind").and_then(Json::as_str).unwrap_or("");
    if crate::policy::resources::is_namespaced(group, kind) != Some(true) {
        return;
    }
    if let Some(meta) = value.get_mut("metadata").and_then(Json::as_object_mut) {
        if meta
            .get("namespace")
            .and_then(Json::as_str)
            .is_none_or(str::is_empty)
        {
            meta.insert("namespace".into(), "default".into());
        }
    }
}

impl Item {
    fn new(d: &Document, value: Arc<Json>) -> Item {
        let mut object = ObjectRef::from_document(d);
        object.namespace = value
            .pointer("/metadata/namespace")
            .and_then(Json::as_str)
            .map(str::to_string);
        Item {
            key: ObjectKey::of(&value),
            object,
            source: SourceLocation::from_document(d),
            value,
        }
    }

    fn from_document(mut d: Document) -> Item {
        default_namespace(&mut d.value);
        let object = ObjectRef::from_document(&d);
        let value = Arc::new(std::mem::take(&mut d.value));
        Item {
            key: ObjectKey::of(&value),
            object,
            source: SourceLocation::from_document(&d),
            value,
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
    let items = resources
        .iter()
        .map(|d| {
            let mut value = d.value.clone();
            default_namespace(&mut value);
            Item::new(d, Arc::new(value))
        })
        .collect();
    check_items(policy_docs, items, opts, report);
}

/// Checks the items; returns them with the inventory, for the caller to free.
fn check_items(
    policy_docs: &[Document],
    items: Vec<Item>,
    opts: &CheckOptions,
    report: &mut Report,
) -> (Vec<Item>, Inventory) {
    let mut inventory = Inventory::new();
    let policies = compile_policies(policy_docs, &mut inventory, report);
    let mut sources: HashMap<ObjectKey, usize> = HashMap::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let Some(key) = it.key.clone() else { continue };
        let source = Source {
            file: it.source.file.clone(),
            line: it.source.line,
        };
        match inventory.upsert(it.value.clone(), Some(source)) {
            Ok(index_errors) => {
                for e in index_errors {
                    report.errors.push(InputError {
                        file: it.source.file.clone(),
                        line: Some(it.source.line),
                        column: None,
                        message: e.to_string(),
                    });
                }
            }
            Err(e) => report.errors.push(InputError {
                file: it.source.file.clone(),
                line: Some(it.source.line),
                column: None,
                message: e,
            }),
        }
        sources.insert(key, i);
    }
    report.objects = items.len();
    report.policies = policies.len();
    let per_object: Vec<(Vec<Finding>, Vec<Evaluated>)> = items
        .par_iter()
        .map(|it| check_one(it, &items, &policies, &inventory, &sources, opts))
        .collect();
    for (findings, evaluated) in per_object {
        report.results.extend(findings);
        report.evaluated.extend(evaluated);
    }
    (items, inventory)
}

fn check_one(
    it: &Item,
    items: &[Item],
    policies: &PolicySet,
    inventory: &Inventory,
    sources: &HashMap<ObjectKey, usize>,
    opts: &CheckOptions,
) -> (Vec<Finding>, Vec<Evaluated>) {
    let Some(req) = Request::create(&it.value, &opts.user) else {
        return (vec![], vec![]);
    };
    let (verdicts, _) = policies.evaluate(&req, inventory);
    let object = &it.object;
    let source = &it.source;
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
                .map(|&i| RelatedObject {
                    object: items[i].object.clone(),
                    source: Some(items[i].source.clone()),
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
