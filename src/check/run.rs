//! `interlock check`: every object in the inputs, checked against every
//! matching policy, with all the objects as the inventory.

use super::producers;
use super::render::kustomize::{self, KustomizeMode, Renderer};
use super::render::{helm, Rendered};
use crate::inventory::{Inventory, ObjectKey, Prepared, Source};
use crate::k8s::openapi::{self, Schemas};
use crate::k8s::pod_template;
use crate::manifest::{self, Document, LoadOptions};
use crate::policy::{self, Action, PolicyKind, PolicySet, Request, RequestShape};
use crate::report::{
    Evaluated, Finding, InputError, ObjectRef, RelatedObject, Report, SourceLocation,
};
use rayon::prelude::*;
use serde_json::Value as Json;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;

mod alternatives;
mod bodies;
mod evaluate;
mod items;
mod mutations;
mod render;

use alternatives::Alternatives;
use bodies::{Bodies, Body};
use evaluate::*;
pub(super) use items::default_namespace;
use items::*;
use render::*;

/// The identity offline checks run as (docs/architecture.md: a fixed auditor identity).
pub const DEFAULT_USER: &str = crate::policy::OFFLINE_USER;

#[derive(Debug, Clone, Default)]
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
    /// The namespace of namespaced objects that have none (`kubectl apply
    /// -n`); `None` or empty: `default`.
    pub namespace: Option<String>,
    /// Files or folders of objects that lookups see but that are not
    /// checked (a cluster's baseline, objects made by hand or by operators).
    pub inventory: Vec<PathBuf>,
    /// Globs of files and folders to leave out of `inputs` and `inventory`.
    pub exclude: Vec<String>,
    /// How each object is sent (`interlock test`); `None`: a CREATE by
    /// `user`.
    pub shape: Option<RequestShape>,
    /// The stored objects an UPDATE replaces, by key (`interlock test`).
    pub old_objects: HashMap<ObjectKey, Json>,
    /// `--disable` and `--action`.
    pub overrides: policy::overrides::Overrides,
    /// `--show-mutations`: report the patch MutatingAdmissionPolicies make
    /// to each object.
    pub show_mutations: bool,
    /// `--no-defaults`: check objects as written, without kube-apiserver's
    /// defaulting (`k8s::defaults`).
    pub no_defaults: bool,
    /// `--kustomize`: render kustomizations (the default) or read raw files.
    pub kustomize: KustomizeMode,
    /// `--values`: values files for every Helm chart rendered.
    pub values: Vec<PathBuf>,
    /// `--remote-bases error`: a kustomization whose remote base cannot be
    /// fetched is an error (exit 2), not a notice.
    pub remote_bases_fail: bool,
    /// The inputs are the whole cluster (a policy's test case): what they
    /// do not hold does not exist. Otherwise they are a repository, part
    /// of what a cluster holds, and `check` reports only what they settle
    /// (Secrets supplied out of band, namespaces the files cannot show,
    /// conflicts between alternative renders are notices).
    pub whole_cluster: bool,
    /// Images a tool of the repository builds or tags (Skaffold, Tilt,
    /// release scripts): pinned before the policies see them
    /// (`built_images`). Found by `run`.
    pub built_images: super::built_images::BuiltImages,
    /// Kustomizations rendered in place of one that could not be
    /// rendered here (`stand_in`). Found by `run`.
    pub stand_ins: super::stand_in::StandIns,
}

impl CheckOptions {
    /// What kube-apiserver does to an object before admission sees it:
    /// the namespace kubectl sends it to, nulls dropped, built-in defaults.
    pub fn as_admitted(&self, value: &mut Json) {
        default_namespace(value, self.namespace());
        drop_nulls(value);
        self.built_images.pin(value);
        if !self.no_defaults {
            crate::k8s::defaults::apply(value);
        }
    }

    fn namespace(&self) -> &str {
        self.namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
    }

    /// The request that checks `object` (sent by `user`).
    pub(crate) fn request<'a>(&'a self, object: &'a Json, user: &str) -> Option<Request<'a>> {
        match &self.shape {
            None => Request::create(object, user),
            Some(shape) => {
                let old = ObjectKey::of(object).and_then(|k| self.old_objects.get(&k));
                Request::build(object, old, shape)
            }
        }
    }

    fn load_options(&self) -> LoadOptions {
        LoadOptions {
            // Every copy of an object is checked; `check_items` reports
            // the copies as notices.
            reject_duplicate_objects: false,
            skip_non_objects: true,
            exclude: self.exclude.clone(),
            ..LoadOptions::default()
        }
    }
}

/// How to turn kustomize and Helm sources into objects, for the notice
/// about skipped files.
pub const RENDER_HINT: &str = "render kustomize with `kubectl kustomize DIR | interlock check -` and Helm charts with `helm template NAME CHART | interlock check -`";

/// Loads policy documents from paths, or the bundled library.
pub fn load_policy_documents(paths: &[PathBuf], report: &mut Report) -> Vec<Document> {
    let loaded = policy::files::load_documents(paths);
    report.add_load_errors(&loaded.errors);
    loaded.documents
}

/// Compiles the policies into `inventory` (declaring their indexes).
pub fn compile_policies(
    docs: &[Document],
    inventory: &mut Inventory,
    report: &mut Report,
) -> PolicySet {
    let policy_docs: Vec<Document> = docs
        .iter()
        .filter(|d| policy::is_policy_document(&d.value))
        .cloned()
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
    let (set, errors) = PolicySet::compile_documents(policy_docs);
    if let Err(e) = inventory.set_indexes(&set.index_decls()) {
        report.errors.push(InputError {
            file: "policies".into(),
            line: None,
            column: None,
            message: format!("an index declared by the policies does not compile: {e}"),
        });
    }
    for e in errors {
        report.errors.push(InputError {
            file: e.location.file.clone(),
            line: Some(e.location.line),
            column: e.column,
            message: format!("policy {}: {}", e.policy, e.message),
        });
    }
    for p in set.policies.iter() {
        for w in &p.warnings {
            report.notices.push(InputError {
                file: p.source.file.clone(),
                line: Some(p.source.line),
                column: None,
                message: format!("policy {}: {w}", p.name),
            });
        }
    }
    report.policy_names = set.policies.iter().map(|p| p.name.clone()).collect();
    set
}

/// The CustomResourceDefinitions among the files checked, whose schemas
/// type the policies that match their kinds (collected as the files load,
/// before the inventory projects them away).
#[derive(Default)]
struct CrdSchemas(Mutex<Vec<Document>>);

impl CrdSchemas {
    fn note(&self, d: &Document) {
        if d.value["apiVersion"] == "apiextensions.k8s.io/v1"
            && d.value["kind"] == "CustomResourceDefinition"
        {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(d.clone());
        }
    }

    /// The built-in schemas plus these CRDs' (a CRD that cannot be read
    /// is a notice: it only costs its warnings).
    fn schemas(self, report: &mut Report) -> Cow<'static, Schemas> {
        let crds = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
        if crds.is_empty() {
            return Cow::Borrowed(openapi::builtin());
        }
        let mut schemas = openapi::builtin().clone();
        for d in crds {
            if let Err(e) = schemas.add_crd(&d.value) {
                report.notices.push(InputError {
                    file: d.source.to_string(),
                    line: Some(d.line),
                    column: None,
                    message: format!("{}: its schema cannot type policies: {e}", d.display_name()),
                });
            }
        }
        Cow::Owned(schemas)
    }
}

/// kube-apiserver's type-check warnings (what its controller writes into
/// a ValidatingAdmissionPolicy's `status.typeChecking`), as notices: they
/// change no finding and no exit code. Without such a policy the schemas
/// are not even read.
fn type_check_notices(policies: &PolicySet, schemas: &Schemas, report: &mut Report) {
    if !policies.policies.iter().any(|p| p.kind == PolicyKind::Vap) {
        return;
    }
    for p in policies.policies.iter() {
        for w in p.type_check_warnings(schemas) {
            report.notices.push(InputError {
                file: p.source.file.clone(),
                line: Some(p.source.line),
                column: None,
                message: format!(
                    "policy {}: kube-apiserver's type check of {}: {}",
                    p.name,
                    w.field_ref,
                    w.warning.trim_end()
                ),
            });
        }
    }
}

/// One notice for every file skipped as not holding objects.
fn skipped_notice(skipped: &[manifest::Skipped], report: &mut Report) {
    let Some(first) = skipped.first() else { return };
    let mut reasons: Vec<String> = skipped.iter().map(|s| s.reason.to_string()).collect();
    reasons.sort();
    reasons.dedup();
    let mut names: Vec<String> = skipped
        .iter()
        .take(5)
        .map(|s| s.source.to_string())
        .collect();
    if skipped.len() > 5 {
        names.push(format!("and {} more", skipped.len() - 5));
    }
    report.notices.push(InputError {
        file: first.source.to_string(),
        line: None,
        column: None,
        message: format!(
            "skipped {} that hold no Kubernetes objects ({}): {}; {RENDER_HINT}, or leave files out with --exclude GLOB",
            if skipped.len() == 1 { "1 file".to_string() } else { format!("{} files", skipped.len()) },
            reasons.join(", "),
            names.join(", "),
        ),
    });
}

pub fn run(opts: &CheckOptions) -> Report {
    let opts = &CheckOptions {
        built_images: super::built_images::BuiltImages::find(&opts.inputs),
        ..opts.clone()
    };
    let mut report = Report::default();
    let mut policy_docs = load_policy_documents(&opts.policies, &mut report);
    if let Err(errors) = opts.overrides.apply(&mut policy_docs) {
        report
            .errors
            .extend(errors.into_iter().map(|message| InputError {
                file: policy_origin(opts),
                line: None,
                column: None,
                message,
            }));
    }
    let mut inventory = Inventory::new();
    let policies = compile_policies(&policy_docs, &mut inventory, &mut report);
    if !opts.whole_objects {
        inventory.set_projection(policies.projection());
    }
    // Each object is parsed once; its file's worker keeps only what the
    // inventory keeps of it (projected, index keys computed) and compact
    // JSON (parsed again when it is checked), so no more than a file's worth
    // of parsed objects per thread is alive at once.
    let mut load = opts.load_options();
    let mut stand_ins = super::stand_in::StandIns::default();
    let mut rendered = render_kustomizations(opts, &mut load, &mut report, &mut stand_ins);
    rendered.extend(render_charts(opts, &mut load, &mut report, &mut stand_ins));
    let opts = &CheckOptions {
        stand_ins,
        ..opts.clone()
    };
    let mut skipped = Vec::new();
    let crds = CrdSchemas::default();
    if !opts.inventory.is_empty() {
        let loaded = manifest::load_files_map(&opts.inventory, &load, |mut d| {
            crds.note(&d);
            opts.as_admitted(&mut d.value);
            let made: Vec<_> = producers::made_by(&d.value)
                .iter()
                .filter_map(|m| inventory.prepare(m).ok())
                .collect();
            (inventory.prepare(&d.value), Source::of(&d), made)
        });
        report.add_load_errors(&loaded.errors);
        skipped.extend(loaded.skipped);
        let mut made_all = Vec::new();
        for (prepared, source, made) in loaded.items {
            made_all.extend(made.into_iter().map(|m| (m, source.clone())));
            // Objects with only a generateName have no key to look up.
            if let Ok(p) = prepared {
                for e in inventory.insert(p, Some(source.clone())) {
                    report.errors.push(InputError {
                        file: source.file.clone(),
                        line: Some(source.line),
                        column: None,
                        message: e.to_string(),
                    });
                }
            }
        }
        // What the baseline's objects make, where nothing of that name is
        // given (checked objects replace them later).
        for (m, source) in made_all {
            if inventory.get(m.key()).is_none() {
                inventory.insert(m, Some(source));
            }
        }
    }
    let bodies = Bodies::default();
    let mut loaded = manifest::load_files_map(&opts.inputs, &load, |d| {
        crds.note(&d);
        expanded_items(d, &inventory, &policies, opts, &bodies)
    });
    loaded.items.extend(
        rendered
            .into_par_iter()
            .map(|d| {
                crds.note(&d);
                expanded_items(d, &inventory, &policies, opts, &bodies)
            })
            .collect::<Vec<_>>(),
    );
    report.add_load_errors(&loaded.errors);
    skipped.extend(loaded.skipped);
    // What kustomize generators make, where no object of that name is
    // given (a checked object of that name replaces it).
    for s in &skipped {
        for mut made in s.makes.iter().cloned() {
            opts.as_admitted(&mut made);
            if let Ok(m) = inventory.prepare(&made) {
                if inventory.get(m.key()).is_none() {
                    let source = Source {
                        file: s.source.to_string(),
                        line: 1,
                    };
                    inventory.insert(m, Some(source));
                }
            }
        }
    }
    skipped_notice(&skipped, &mut report);
    // The schemas are read only for policies that use them.
    let schemas = if policies.has_mutating_policies()
        || policies.policies.iter().any(|p| p.kind == PolicyKind::Vap)
    {
        crds.schemas(&mut report)
    } else {
        Cow::Borrowed(openapi::builtin())
    };
    type_check_notices(&policies, &schemas, &mut report);
    let files = loaded.files;
    let skipped_files = skipped.len();
    let items = flatten_items(loaded.items, &mut report);
    let inventory = check_items(
        items,
        &policies,
        &schemas,
        inventory,
        opts,
        &bodies,
        &mut report,
    );
    // Nothing checked is not "all fine": say so, and fail the run.
    if report.errors.is_empty() && policies.is_empty() {
        report.errors.push(InputError {
            file: policy_origin(opts),
            line: None,
            column: None,
            message: "no policies were loaded: nothing was checked; give policy files or folders with -p, or leave -p out for the bundled library".into(),
        });
    }
    if report.errors.is_empty() && report.objects == 0 {
        report.errors.push(InputError {
            file: opts
                .inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            line: None,
            column: None,
            message: format!(
                "no Kubernetes objects in the inputs ({files} file(s) read, {skipped_files} skipped as not objects): nothing was checked"
            ),
        });
    }
    // Freeing a large inventory takes a noticeable fraction of the run on
    // one core, and the report does not need it: free it on a thread of
    // its own (the process may well exit before it is done).
    if inventory.len() >= BACKGROUND_DROP_MIN {
        std::thread::spawn(move || drop(inventory));
    }
    report.sort();
    report
}

fn plural_files(n: usize) -> String {
    if n == 1 {
        "1 file".to_string()
    } else {
        format!("{n} files")
    }
}

/// The first five names, and how many more.
fn first_names(names: impl ExactSizeIterator<Item = String>) -> String {
    let total = names.len();
    let mut shown: Vec<String> = names.take(5).collect();
    if total > 5 {
        shown.push(format!("and {} more", total - 5));
    }
    shown.join(", ")
}

fn policy_origin(opts: &CheckOptions) -> String {
    if opts.policies.is_empty() {
        "<bundled library>".into()
    } else {
        opts.policies
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Checks `resources` against the policies in `policy_docs`.
pub fn check_documents(
    policy_docs: &[Document],
    resources: &[Document],
    opts: &CheckOptions,
    report: &mut Report,
) {
    check_documents_with(policy_docs, &[], resources, opts, report);
}

/// Checks `resources` against the policies in `policy_docs`, with
/// `context` objects in the inventory too (seen by lookups, not checked).
/// Returns the policies and the inventory the checks saw.
pub fn check_documents_with(
    policy_docs: &[Document],
    context: &[Document],
    resources: &[Document],
    opts: &CheckOptions,
    report: &mut Report,
) -> (PolicySet, Inventory) {
    let mut inventory = Inventory::new();
    let policies = compile_policies(policy_docs, &mut inventory, report);
    if !opts.whole_objects {
        inventory.set_projection(policies.projection());
    }
    for d in context {
        let mut value = d.value.clone();
        opts.as_admitted(&mut value);
        match inventory.prepare(&value) {
            Ok(p) => {
                for e in inventory.insert(p, Some(Source::of(d))) {
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
                message: e.to_string(),
            }),
        }
    }
    let bodies = Bodies::default();
    let items = resources
        .iter()
        .map(|d| expanded_items(d.clone(), &inventory, &policies, opts, &bodies))
        .collect();
    let items = flatten_items(items, report);
    let inventory = check_items(
        items,
        &policies,
        openapi::builtin(),
        inventory,
        opts,
        &bodies,
        report,
    );
    (policies, inventory)
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
