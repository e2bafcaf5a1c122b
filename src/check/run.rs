//! `interlock check`: every object in the inputs, checked against every
//! matching policy, with all the objects as the inventory.

use super::report::{
    self, Evaluated, Finding, InputError, ObjectRef, RelatedObject, Report, SourceLocation,
};
use crate::inventory::{Inventory, ObjectKey, Prepared, Source};
use crate::manifest::{self, Document, LoadOptions};
use crate::policy::{self, Action, PolicySet, Request};
use rayon::prelude::*;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::path::PathBuf;

/// The identity offline checks run as (docs/architecture.md: a fixed auditor identity).
pub const DEFAULT_USER: &str = "system:serviceaccount:interlock-system:auditor";

pub struct CheckOptions {
    /// Policy files or folders; empty means the bundled library.
    pub policies: Vec<PathBuf>,
    pub inputs: Vec<PathBuf>,
    pub user: String,
    /// Record passing (policy, object) pairs for JUnit.
    pub record_evaluated: bool,
    /// Keep whole objects in the inventory instead of the fields the
    /// policies read (to compare: the results must be the same).
    pub whole_objects: bool,
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

/// Compiles the policies into `inventory` (declaring their indexes).
pub fn compile_policies(
    docs: &[Document],
    inventory: &mut Inventory,
    report: &mut Report,
) -> PolicySet {
    let pairs: Vec<_> = docs
        .iter()
        .filter(|d| policy::is_policy_document(&d.value))
        .map(|d| (d.value.clone(), Source::of(d)))
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
    let mut inventory = Inventory::new();
    let policies = compile_policies(&policy_docs, &mut inventory, &mut report);
    if !opts.whole_objects {
        inventory.set_projection(policies.projection(&inventory));
    }
    // Each object is parsed once; its file's worker keeps only what the
    // inventory keeps of it (projected, index keys computed) and compact
    // JSON (parsed again when it is checked), so no more than a file's worth
    // of parsed objects per thread is alive at once.
    let (items, errors) = manifest::load_paths_map(&opts.inputs, &LoadOptions::default(), |d| {
        expanded_items(d, &inventory, &policies, &opts.user)
    });
    report.add_load_errors(&errors);
    let items = flatten_items(items, &mut report);
    let inventory = check_items(items, &policies, inventory, opts, &mut report);
    // Freeing a large inventory takes a noticeable fraction of the run on
    // one core, and the report does not need it: free it on a thread of
    // its own (the process may well exit before it is done).
    if inventory.len() >= BACKGROUND_DROP_MIN {
        std::thread::spawn(move || drop(inventory));
    }
    report.sort();
    report
}

/// Inventories at least this large are freed on a background thread.
const BACKGROUND_DROP_MIN: usize = 5_000;

/// One resource to check: the object as compressed compact JSON, what the
/// inventory keeps of it, and what the report says about it.
struct Item {
    /// `None` when no policy can match the object (nothing to check).
    body: Option<Box<[u8]>>,
    /// Can it be checked at all (as a CREATE request)?
    reviewable: bool,
    prepared: Option<Result<Prepared, String>>,
    object: ObjectRef,
    source: SourceLocation,
}

/// Puts a namespaced object without a namespace into `default`, as kubectl
/// does when it sends it.
fn default_namespace(value: &mut Json) {
    let (group, kind) = crate::policy::resources::group_kind(value);
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
    fn from_document(
        mut d: Document,
        inventory: &Inventory,
        policies: &PolicySet,
        user: &str,
    ) -> Item {
        default_namespace(&mut d.value);
        let mut object = ObjectRef::from_document(&d);
        object.namespace = d
            .value
            .pointer("/metadata/namespace")
            .and_then(Json::as_str)
            .map(str::to_string);
        let request = Request::create(&d.value, user);
        let reviewable = request.is_some();
        let body = request.is_some_and(|r| policies.may_match(&r)).then(|| {
            // Serialising a `serde_json::Value` cannot fail (string keys only).
            let json = serde_json::to_vec(&d.value).unwrap_or_default();
            // JSON of Kubernetes objects compresses about 5x, at GB/s.
            lz4_flex::block::compress_prepend_size(&json).into_boxed_slice()
        });
        Item {
            reviewable,
            prepared: Some(inventory.prepare(&d.value)),
            object,
            source: SourceLocation::from_document(&d),
            body,
        }
    }
}

/// The items of a document: itself, and the members of a ResourceGroup
/// (checked as written by the group's ServiceAccount).
fn expanded_items(
    d: Document,
    inventory: &Inventory,
    policies: &PolicySet,
    user: &str,
) -> (Vec<Item>, Vec<InputError>) {
    let e = crate::group::expand::expand(d);
    let items = e
        .documents
        .into_iter()
        .map(|(d, u)| Item::from_document(d, inventory, policies, u.as_deref().unwrap_or(user)))
        .collect();
    (items, e.errors)
}

fn flatten_items(
    per_document: Vec<(Vec<Item>, Vec<InputError>)>,
    report: &mut Report,
) -> Vec<Item> {
    let mut items = Vec::with_capacity(per_document.len());
    for (mut its, errors) in per_document {
        items.append(&mut its);
        report.errors.extend(errors);
    }
    items
}

/// Checks `resources` against the policies in `policy_docs`.
pub fn check_documents(
    policy_docs: &[Document],
    resources: &[Document],
    opts: &CheckOptions,
    report: &mut Report,
) {
    let mut inventory = Inventory::new();
    let policies = compile_policies(policy_docs, &mut inventory, report);
    if !opts.whole_objects {
        inventory.set_projection(policies.projection(&inventory));
    }
    let items = resources
        .iter()
        .map(|d| expanded_items(d.clone(), &inventory, &policies, &opts.user))
        .collect();
    let items = flatten_items(items, report);
    check_items(items, &policies, inventory, opts, report);
}

/// Fills the inventory with the items, checks each; returns the inventory
/// for the caller to free.
fn check_items(
    mut items: Vec<Item>,
    policies: &PolicySet,
    mut inventory: Inventory,
    opts: &CheckOptions,
    report: &mut Report,
) -> Inventory {
    let mut sources: HashMap<ObjectKey, usize> = HashMap::with_capacity(items.len());
    for (i, it) in items.iter_mut().enumerate() {
        // An object without a name (only generateName) is checked but is
        // not in the inventory.
        let Some(Ok(prepared)) = it.prepared.take() else {
            continue;
        };
        let key = prepared.key().clone();
        let source = Source {
            file: it.source.file.clone(),
            line: it.source.line,
        };
        let error = |message: String| InputError {
            file: it.source.file.clone(),
            line: Some(it.source.line),
            column: None,
            message,
        };
        for e in inventory.insert(prepared, Some(source)) {
            report.errors.push(error(e.to_string()));
        }
        sources.insert(key, i);
    }
    report.objects = items.len();
    report.policies = policies.len();
    let bodies: Vec<Option<Box<[u8]>>> = items.iter_mut().map(|it| it.body.take()).collect();
    let per_object: Vec<(Vec<Finding>, Vec<Evaluated>)> = bodies
        .into_par_iter()
        .enumerate()
        .map(|(i, body)| {
            // The bytes were compressed from serde_json's own output.
            let value: Option<Json> = body.and_then(|body| {
                let json = lz4_flex::block::decompress_size_prepended(&body).ok()?;
                serde_json::from_slice(&json).ok()
            });
            check_one(
                value.as_ref(),
                i,
                &items,
                policies,
                &inventory,
                &sources,
                opts,
            )
        })
        .collect();
    for (findings, evaluated) in per_object {
        report.results.extend(findings);
        report.evaluated.extend(evaluated);
    }
    inventory
}

/// `value`: `None` when no policy can match the object.
fn check_one(
    value: Option<&Json>,
    i: usize,
    items: &[Item],
    policies: &PolicySet,
    inventory: &Inventory,
    sources: &HashMap<ObjectKey, usize>,
    opts: &CheckOptions,
) -> (Vec<Finding>, Vec<Evaluated>) {
    let it = &items[i];
    if !it.reviewable {
        return (vec![], vec![]);
    }
    let verdicts = match value.and_then(|v| Request::create(v, &opts.user)) {
        Some(req) => policies.evaluate(&req, inventory).0,
        None => vec![],
    };
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
