//! `interlock check`: every object in the inputs, checked against every
//! matching policy, with all the objects as the inventory.

use super::producers;
use super::render::kustomize::{self, KustomizeMode, Renderer};
use super::render::{helm, Rendered};
use crate::inventory::{Inventory, ObjectKey, Prepared, Source};
use crate::k8s::openapi::{self, Schemas};
use crate::k8s::pod_template;
use crate::manifest::{self, Document, LoadOptions};
use crate::policy::{self, PolicyKind, PolicySet, Request, RequestShape};
use crate::report::{
    Evaluated, Finding, InputError, ObjectRef, RelatedObject, Report, SourceLocation,
};
use rayon::prelude::*;
use serde_json::Value as Json;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;

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
    pub(crate) fn as_admitted(&self, value: &mut Json) {
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
    let (set, errors) = PolicySet::compile_documents(policy_docs, inventory);
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
fn type_check_notices(policies: &PolicySet, crds: CrdSchemas, report: &mut Report) {
    if !policies.policies.iter().any(|p| p.kind == PolicyKind::Vap) {
        return;
    }
    let schemas = crds.schemas(report);
    for p in policies.policies.iter() {
        for w in p.type_check_warnings(&schemas) {
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
        inventory.set_projection(policies.projection(&inventory));
    }
    // Each object is parsed once; its file's worker keeps only what the
    // inventory keeps of it (projected, index keys computed) and compact
    // JSON (parsed again when it is checked), so no more than a file's worth
    // of parsed objects per thread is alive at once.
    let mut load = opts.load_options();
    let mut stand_ins = super::stand_in::StandIns::default();
    let mut rendered = render_kustomizations(opts, &mut load, &mut report, &mut stand_ins);
    rendered.extend(render_charts(opts, &mut load, &mut report));
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
    let mut loaded = manifest::load_files_map(&opts.inputs, &load, |d| {
        crds.note(&d);
        expanded_items(d, &inventory, &policies, opts)
    });
    loaded.items.extend(
        rendered
            .into_par_iter()
            .map(|d| {
                crds.note(&d);
                expanded_items(d, &inventory, &policies, opts)
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
    type_check_notices(&policies, crds, &mut report);
    let files = loaded.files;
    let skipped_files = skipped.len();
    let items = flatten_items(loaded.items, &mut report);
    let inventory = check_items(items, &policies, inventory, opts, &mut report);
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

/// Renders the inputs' top-level kustomizations (see `kustomize`) and
/// claims the files kustomize owns, so that they are not also read raw.
fn render_kustomizations(
    opts: &CheckOptions,
    load: &mut LoadOptions,
    report: &mut Report,
    stand_ins: &mut super::stand_in::StandIns,
) -> Vec<Document> {
    if opts.kustomize == KustomizeMode::Never {
        return vec![];
    }
    let layout = kustomize::layout(&opts.inputs, &opts.exclude);
    report.errors.extend(layout.errors);
    if layout.claimed.is_empty() {
        return vec![];
    }
    load.claimed = std::sync::Arc::new(layout.claimed);
    if let Some(first) = layout.unreferenced.first() {
        report.notices.push(InputError {
            file: first.display().to_string(),
            line: None,
            column: None,
            message: format!(
                "left out {} in kustomize trees that no kustomization references: {}",
                plural_files(layout.unreferenced.len()),
                first_names(layout.unreferenced.iter().map(|p| p.display().to_string()))
            ),
        });
    }
    let Some(first) = layout.roots.first() else {
        return vec![];
    };
    let Some(renderer) = Renderer::from_path() else {
        report.errors.push(InputError {
            file: first.display().to_string(),
            line: None,
            column: None,
            message: "holds a kustomization, and neither `kustomize` nor `kubectl` is on PATH to render it: install kubectl (it renders with `kubectl kustomize`) or kustomize, or pass --kustomize never to check the raw files as written".into(),
        });
        return vec![];
    };
    report.notices.push(InputError {
        file: first.display().to_string(),
        line: None,
        column: None,
        message: format!(
            "rendered {} with `{}`: {}",
            match layout.roots.len() {
                1 => "1 kustomization".to_string(),
                n => format!("{n} kustomizations"),
            },
            renderer.describe(),
            first_names(layout.roots.iter().map(|p| p.display().to_string()))
        ),
    });
    let mut docs = Vec::new();
    for r in kustomize::render_all(&renderer, &layout.roots, load, stand_ins) {
        // A well-formed layout that needs the network is not broken input;
        // a CI job that must not pass on it says so.
        let r = match r {
            Rendered::NotHere(e) if opts.remote_bases_fail => Rendered::Failed(e),
            r => r,
        };
        r.sort_into(&mut docs, &mut report.errors, &mut report.notices);
    }
    docs
}

/// Renders the inputs' Helm charts when helm is on PATH (see
/// `render::helm`); without it their files are skipped with a notice.
fn render_charts(
    opts: &CheckOptions,
    load: &mut LoadOptions,
    report: &mut Report,
) -> Vec<Document> {
    // `--kustomize never` reads every source as written, charts too.
    if opts.kustomize == KustomizeMode::Never {
        return vec![];
    }
    let Some(helm) = helm::helm_on_path() else {
        return vec![];
    };
    let charts = helm::charts(&opts.inputs, &opts.exclude);
    let Some(first) = charts.roots.first() else {
        return vec![];
    };
    let mut claimed = (*load.claimed).clone();
    claimed.extend(charts.claimed);
    load.claimed = std::sync::Arc::new(claimed);
    report.notices.push(InputError {
        file: first.display().to_string(),
        line: None,
        column: None,
        message: format!(
            "rendered {} with `helm template` and {}: {}",
            match charts.roots.len() {
                1 => "1 chart".to_string(),
                n => format!("{n} charts"),
            },
            if opts.values.is_empty() {
                "the charts' default values".to_string()
            } else {
                format!(
                    "the values of {}",
                    first_names(opts.values.iter().map(|p| p.display().to_string()))
                )
            },
            first_names(charts.roots.iter().map(|p| p.display().to_string()))
        ),
    });
    let mut docs = Vec::new();
    let namespace = opts.namespace.as_deref();
    for r in helm::render_all(&helm, &charts.roots, &opts.values, namespace, load) {
        r.sort_into(&mut docs, &mut report.errors, &mut report.notices);
    }
    docs
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

/// Inventories at least this large are freed on a background thread.
const BACKGROUND_DROP_MIN: usize = 5_000;

/// One resource to check: the object as compressed compact JSON, what the
/// inventory keeps of it, and what the report says about it.
struct Item {
    /// `None` when no policy can match the object (nothing to check).
    body: Option<Box<[u8]>>,
    /// What the object will make in a cluster (see `producers`).
    made: Vec<Prepared>,
    /// Namespaces where the object makes objects the files do not show
    /// (`producers::unshown_in`).
    unshown_in: Vec<String>,
    /// The Secrets its pod spec names (`producers::secret_references`).
    secret_refs: Vec<String>,
    /// Can it be checked at all (as a CREATE request)?
    reviewable: bool,
    prepared: Option<Result<Prepared, crate::inventory::NoIdentity>>,
    object: ObjectRef,
    source: SourceLocation,
    /// A pod template taken out of an object (not an object of its own).
    derived: bool,
    /// Findings known before any policy runs: a ResourceGroup's group rules.
    group_findings: Vec<Finding>,
}

/// Puts a namespaced object without a namespace into `namespace`, as
/// kubectl does when it sends it (`default`, or `kubectl apply -n`).
pub(super) fn default_namespace(value: &mut Json, namespace: &str) {
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
            meta.insert("namespace".into(), namespace.into());
        }
    }
}

impl Item {
    fn from_document(
        mut d: Document,
        inventory: &Inventory,
        policies: &PolicySet,
        opts: &CheckOptions,
        user: &str,
    ) -> Item {
        opts.as_admitted(&mut d.value);
        let mut object = ObjectRef::from_document(&d);
        object.namespace = d
            .value
            .pointer("/metadata/namespace")
            .and_then(Json::as_str)
            .map(str::to_string);
        let request = opts.request(&d.value, user);
        let reviewable = request.is_some();
        let body = request.is_some_and(|r| policies.may_match(&r)).then(|| {
            // Serialising a `serde_json::Value` cannot fail (string keys only).
            let json = serde_json::to_vec(&d.value).unwrap_or_default();
            // JSON of Kubernetes objects compresses about 5x, at GB/s.
            lz4_flex::block::compress_prepend_size(&json).into_boxed_slice()
        });
        let made = producers::made_by(&d.value)
            .iter()
            .filter_map(|m| inventory.prepare(m).ok())
            .collect();
        let unshown_in = producers::unshown_in(&d.value, opts.namespace());
        let secret_refs = producers::secret_references(&d.value);
        Item {
            reviewable,
            made,
            unshown_in,
            secret_refs,
            prepared: Some(inventory.prepare(&d.value)),
            object,
            source: SourceLocation::from_document(&d),
            body,
            derived: false,
            group_findings: vec![],
        }
    }

    /// The pod templates of `d` when no policy matches its kind (a CRD
    /// that makes Pods, see `k8s::pod_template`): each checked as a
    /// PodTemplate, its findings reported on `d` at the template's line.
    /// Not in the inventory: nothing in a cluster stores them.
    fn templates_of(d: &Document, policies: &PolicySet, opts: &CheckOptions) -> Vec<Item> {
        if !pod_template::has_embedded(&d.value) {
            return vec![];
        }
        let namespaced = crate::policy::resources::is_namespaced(
            crate::policy::resources::group_of(d.api_version()),
            d.kind(),
        )
        .unwrap_or(true);
        if policies.may_match_kind(d.api_version(), d.kind(), namespaced) {
            return vec![];
        }
        pod_template::embedded(&d.value)
            .into_iter()
            .map(|e| {
                let mut template = e.pod_template;
                default_namespace(&mut template, opts.namespace());
                drop_nulls(&mut template);
                let mut object = ObjectRef::from_document(d);
                object.namespace = template
                    .pointer("/metadata/namespace")
                    .and_then(Json::as_str)
                    .map(str::to_string);
                let json = serde_json::to_vec(&template).unwrap_or_default();
                Item {
                    reviewable: true,
                    made: vec![],
                    unshown_in: vec![],
                    secret_refs: vec![],
                    prepared: None,
                    object,
                    source: SourceLocation {
                        line: d.line_of_pointer(e.pointer).unwrap_or(d.line),
                        ..SourceLocation::from_document(d)
                    },
                    body: Some(lz4_flex::block::compress_prepend_size(&json).into_boxed_slice()),
                    derived: true,
                    group_findings: vec![],
                }
            })
            .collect()
    }
}

/// The items of a document: itself, the members of a ResourceGroup
/// (checked as written by the group's ServiceAccount), and the pod
/// templates of a kind no policy matches.
fn expanded_items(
    d: Document,
    inventory: &Inventory,
    policies: &PolicySet,
    opts: &CheckOptions,
) -> (Vec<Item>, Vec<InputError>) {
    let mut errors = non_string_metadata(&d);
    let e = crate::group::expand::expand(d);
    errors.extend(e.errors);
    let mut items = Vec::with_capacity(e.documents.len());
    let mut group_at = None;
    for (d, u) in e.documents {
        let user = u.as_deref().unwrap_or(&opts.user);
        items.extend(Item::templates_of(&d, policies, opts));
        group_at.get_or_insert(items.len());
        items.push(Item::from_document(d, inventory, policies, opts, user));
    }
    // The group is the first document; its rules' findings are reported at
    // its file and line, like its members' findings.
    if let Some(group) = group_at.and_then(|i| items.get_mut(i)) {
        let source = group.source.clone();
        group.group_findings = e
            .findings
            .iter()
            .map(|f| group_finding(f, &source))
            .collect();
    }
    (items, errors)
}

/// Labels and annotations whose values are not strings: kube-apiserver
/// refuses the object, and a policy that reads them as strings fails. Most
/// are YAML 1.1 booleans (`app: y`) and numbers (`version: 2`) left unquoted.
fn non_string_metadata(d: &Document) -> Vec<InputError> {
    fn walk(v: &Json, at: &str, d: &Document, out: &mut Vec<InputError>) {
        match v {
            Json::Object(map) => {
                for (k, child) in map {
                    let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                    if k == "metadata" {
                        for field in ["labels", "annotations"] {
                            let Some(Json::Object(m)) = child.get(field) else {
                                continue;
                            };
                            for (key, value) in
                                m.iter().filter(|(_, v)| v.is_boolean() || v.is_number())
                            {
                                let pointer = format!(
                                    "{here}/{field}/{}",
                                    key.replace('~', "~0").replace('/', "~1")
                                );
                                out.push(InputError {
                                    file: d.source.to_string(),
                                    line: d.line_of_pointer(&pointer).or(Some(d.line)),
                                    column: None,
                                    message: format!(
                                        "{}: {field} value {key}: {value} is a {}, not a string (YAML 1.1 reads y, yes, on, true, n, no, off, false and unquoted numbers so); kube-apiserver refuses the object: quote the value as written ({key}: \"...\")",
                                        d.display_name(),
                                        if value.is_boolean() { "boolean" } else { "number" },
                                    ),
                                });
                            }
                        }
                    }
                    walk(child, &here, d, out);
                }
            }
            Json::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{at}/{i}"), d, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&d.value, "", d, &mut out);
    out
}

fn group_finding(f: &crate::group::crd::GroupFinding, source: &SourceLocation) -> Finding {
    use crate::group::crd::FindingAction;
    Finding {
        policy: f.policy.clone(),
        binding: f.binding.clone(),
        action: match f.action {
            FindingAction::Deny => policy::Action::Deny,
            FindingAction::Warn => policy::Action::Warn,
            FindingAction::Audit => policy::Action::Audit,
        },
        object: ObjectRef {
            api_version: f.object.api_version.clone(),
            kind: f.object.kind.clone(),
            namespace: f.object.namespace.clone(),
            name: f.object.name.clone(),
        },
        message: f.message.clone(),
        source: source.clone(),
        related: vec![],
        reason: None,
    }
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
        inventory.set_projection(policies.projection(&inventory));
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
    let items = resources
        .iter()
        .map(|d| expanded_items(d.clone(), &inventory, &policies, opts))
        .collect();
    let items = flatten_items(items, report);
    let inventory = check_items(items, &policies, inventory, opts, report);
    (policies, inventory)
}

/// Fills the inventory with the items, checks each; returns the inventory
/// for the caller to free.
///
/// Every copy of an object given more than once (overlays, variants) is
/// checked; the inventory holds the first copy, which is what lookups by
/// other objects see. Each later copy is a notice, and so is every lookup
/// that read a key given more than once (saying which copy it read).
fn check_items(
    mut items: Vec<Item>,
    policies: &PolicySet,
    mut inventory: Inventory,
    opts: &CheckOptions,
    report: &mut Report,
) -> Inventory {
    let mut sources: HashMap<ObjectKey, usize> = HashMap::with_capacity(items.len());
    // Key -> every copy after the first, in input order.
    let mut copies: HashMap<ObjectKey, Vec<usize>> = HashMap::new();
    for (i, it) in items.iter_mut().enumerate() {
        // An object without a name (only generateName) is checked but is
        // not in the inventory.
        let Some(Ok(prepared)) = it.prepared.take() else {
            continue;
        };
        let key = prepared.key().clone();
        if sources.contains_key(&key) {
            copies.entry(key).or_default().push(i);
            continue;
        }
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
    // What the objects make, where no object of that name is given.
    for it in items.iter_mut() {
        for m in std::mem::take(&mut it.made) {
            if inventory.get(m.key()).is_none() {
                let source = Source {
                    file: it.source.file.clone(),
                    line: it.source.line,
                };
                inventory.insert(m, Some(source));
            }
        }
    }
    if !opts.whole_cluster {
        supplied_out_of_band(&items, &mut inventory, report, opts.namespace());
    }
    for (key, later) in &copies {
        let first = &items[sources[key]].source;
        for &i in later {
            report.notices.push(InputError {
                file: items[i].source.file.clone(),
                line: Some(items[i].source.line),
                column: None,
                message: format!(
                    "{key} is given {} times (first at {first}): every copy is checked; lookups by other objects see the first",
                    later.len() + 1
                ),
            });
        }
    }
    let unsettled = Unsettled::of(&items);
    report.objects = items.iter().filter(|it| !it.derived).count();
    report.policies = policies.len();
    let duplicated = Duplicated {
        copies: &copies,
        sources: &sources,
    };
    let units = ApplyUnits::of(&items, &duplicated);
    let bodies: Vec<Option<Box<[u8]>>> = items.iter_mut().map(|it| it.body.take()).collect();
    let ctx = CheckContext {
        items: &items,
        policies,
        inventory: &inventory,
        duplicated: &duplicated,
        units: &units,
        unsettled: &unsettled,
        opts,
    };
    let per_object: Vec<Checked> = bodies
        .into_par_iter()
        .enumerate()
        .map(|(i, body)| {
            // The bytes were compressed from serde_json's own output.
            let value: Option<Json> = body.and_then(|body| {
                let json = lz4_flex::block::decompress_size_prepended(&body).ok()?;
                serde_json::from_slice(&json).ok()
            });
            check_one(value.as_ref(), i, &ctx)
        })
        .collect();
    for it in items.iter_mut() {
        report.results.append(&mut it.group_findings);
    }
    for c in per_object {
        report.results.extend(c.findings);
        report.evaluated.extend(c.evaluated);
        report.notices.extend(c.notices);
    }
    inventory
}

/// Secrets are kept out of repositories by design: credentials are made
/// by hand, by a secret manager or by a script the README names. So a
/// Secret a pod names that the inputs do not give (none written, none made
/// by a SealedSecret, ExternalSecret, Certificate or another known
/// producer) is taken as supplied out of band: it is put in the inventory,
/// and one notice per namespace says so. On real repositories a missing
/// Secret was judged wrong 479 times in 485 (tests/realworld); the true
/// ones were near misses, a name one edit or one suffix away from a Secret
/// the inputs do give in that namespace (`hnc-resourcelist` made by a
/// Certificate, `hnc-resourcelist-apiextension` mounted), so such a name
/// is still reported ([`near_miss`]).
///
/// An object of a kind this build does not know the scope of (an
/// OpenShift DeploymentConfig) keeps no namespace; the policies read it in
/// `default_ns`, and so does this.
fn supplied_out_of_band(
    items: &[Item],
    inventory: &mut Inventory,
    report: &mut Report,
    default_ns: &str,
) {
    let mut wanted: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> =
        Default::default();
    for it in items.iter().filter(|it| !it.secret_refs.is_empty()) {
        let ns = it.object.namespace.as_deref().unwrap_or(default_ns);
        wanted
            .entry(ns)
            .or_default()
            .extend(it.secret_refs.iter().map(String::as_str));
    }
    for (ns, names) in wanted {
        let given: Vec<String> = inventory
            .list("", "Secret", Some(ns))
            .iter()
            .map(|e| e.key.name.to_string())
            .collect();
        let assumed: Vec<&str> = names
            .into_iter()
            .filter(|n| !given.iter().any(|g| g == n || near_miss(n, g)))
            .collect();
        if assumed.is_empty() {
            continue;
        }
        for name in &assumed {
            let made = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": ns,
                             "annotations": {producers::PRODUCED_BY: "supplied out of band"}}});
            if let Ok(p) = inventory.prepare(&made) {
                inventory.insert(p, None);
            }
        }
        report.notices.push(InputError {
            file: ns.to_string(),
            line: None,
            column: None,
            message: format!(
                "namespace {ns}: the {} its pods name ({}) {} not given in the inputs and {} taken as supplied out of band, not reported missing",
                if assumed.len() == 1 { "Secret" } else { "Secrets" },
                assumed.iter().take(10).copied().collect::<Vec<_>>().join(", "),
                if assumed.len() == 1 { "is" } else { "are" },
                if assumed.len() == 1 { "is" } else { "are" },
            ),
        });
    }
}

/// Whether `wanted` looks like a slip for `given`: one is the other plus a
/// `-suffix`, or they differ by at most two edits (the shorter at least
/// six long either way: `db` and `db-credentials` are two Secrets).
fn near_miss(wanted: &str, given: &str) -> bool {
    let suffixed = |long: &str, short: &str| {
        short.len() >= 6
            && long
                .strip_prefix(short)
                .is_some_and(|rest| rest.starts_with('-'))
    };
    if suffixed(wanted, given) || suffixed(given, wanted) {
        return true;
    }
    wanted.len() >= 6 && given.len() >= 6 && edit_distance(wanted, given) <= 2
}

/// Levenshtein distance, in bytes (Secret names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Namespaces whose objects the files cannot show in full: `kube-system`,
/// which every distribution fills (cluster DNS, kube-proxy, its network
/// and cloud agents), and those where a HelmRelease or an Argo CD
/// Application of the inputs installs what it fetches from elsewhere.
/// There a lookup that found nothing settles nothing: a finding of a
/// policy that looks objects up and names no object it found (a PDB that
/// selects nothing, a missing reference) is uncertain, and `check`
/// reports only what is certain.
struct Unsettled(HashMap<String, String>);

impl Unsettled {
    fn of(items: &[Item]) -> Self {
        let mut why: HashMap<String, String> = HashMap::new();
        why.insert(
            "kube-system".into(),
            "the cluster's own components live in kube-system".into(),
        );
        for it in items {
            for ns in &it.unshown_in {
                why.entry(ns.clone()).or_insert_with(|| {
                    format!(
                        "{} installs into namespace {ns} objects that are not in the files",
                        it.object
                    )
                });
            }
        }
        Unsettled(why)
    }

    /// Why a finding of `policy` on `it` is uncertain, if it is.
    fn why(
        &self,
        it: &Item,
        policy: &str,
        related: &[ObjectKey],
        policies: &PolicySet,
    ) -> Option<&str> {
        let ns = it.object.namespace.as_deref()?;
        let why = self.0.get(ns)?;
        (related.is_empty() && policies.looks_up_objects(policy)).then_some(why.as_str())
    }
}

/// Keys given more than once, and where each first copy is.
struct Duplicated<'a> {
    copies: &'a HashMap<ObjectKey, Vec<usize>>,
    sources: &'a HashMap<ObjectKey, usize>,
}

/// Which objects are applied together, for conflicts between objects.
/// The raw files are one install, applied with everything; each top-level
/// render (a kustomization, a chart) is one install of its own, and two
/// renders are alternatives (overlays of one base, an install in two
/// modes) that are not applied together for certain. A raw file that
/// repeats objects a render gives (an install YAML committed as the
/// output of a kustomization) is another such alternative.
struct ApplyUnits {
    /// Per item: `None` for the shared raw files, else its unit.
    unit: Vec<Option<String>>,
}

impl ApplyUnits {
    fn of(items: &[Item], duplicated: &Duplicated<'_>) -> Self {
        let mut rendered_copies: HashSet<&str> = HashSet::new();
        for (key, later) in duplicated.copies {
            let all: Vec<usize> = std::iter::once(duplicated.sources[key])
                .chain(later.iter().copied())
                .collect();
            if all.iter().any(|&i| items[i].source.rendered_by.is_some()) {
                rendered_copies.extend(
                    all.iter()
                        .filter(|&&i| items[i].source.rendered_by.is_none())
                        .map(|&i| items[i].source.file.as_str()),
                );
            }
        }
        let unit = items
            .iter()
            .map(|it| match &it.source.rendered_by {
                Some(r) => Some(r.clone()),
                None => rendered_copies
                    .contains(it.source.file.as_str())
                    .then(|| it.source.file.clone()),
            })
            .collect();
        ApplyUnits { unit }
    }

    /// Whether some copy of `key` is applied together with item `i`. A key
    /// no input gives (the baseline inventory, a made object) is taken as
    /// applied with everything.
    fn applied_with(&self, key: &ObjectKey, i: usize, duplicated: &Duplicated<'_>) -> bool {
        let Some(&first) = duplicated.sources.get(key) else {
            return true;
        };
        let mine = &self.unit[i];
        std::iter::once(first)
            .chain(duplicated.copies.get(key).into_iter().flatten().copied())
            .any(|c| mine.is_none() || self.unit[c].is_none() || self.unit[c] == *mine)
    }
}

/// What every object's check reads.
#[derive(Clone, Copy)]
struct CheckContext<'a> {
    items: &'a [Item],
    policies: &'a PolicySet,
    inventory: &'a Inventory,
    duplicated: &'a Duplicated<'a>,
    units: &'a ApplyUnits,
    unsettled: &'a Unsettled,
    opts: &'a CheckOptions,
}

/// What checking one object gave.
struct Checked {
    findings: Vec<Finding>,
    evaluated: Vec<Evaluated>,
    notices: Vec<InputError>,
}

/// Drops mapping entries whose value is null, as kube-apiserver does when
/// it decodes a manifest into its type (Helm often renders `volumes:` with
/// nothing under it); a null label or annotation value is the empty string.
pub(super) fn drop_nulls(value: &mut Json) {
    #[derive(Clone, Copy, PartialEq)]
    enum Place {
        Any,
        /// A `metadata` mapping.
        Metadata,
        /// Its `labels` or `annotations`.
        Strings,
    }
    fn walk(value: &mut Json, place: Place) {
        match value {
            Json::Object(map) => {
                if place == Place::Strings {
                    for v in map.values_mut().filter(|v| v.is_null()) {
                        *v = Json::String(String::new());
                    }
                }
                map.retain(|_, v| !v.is_null());
                for (k, v) in map.iter_mut() {
                    let next = match (place, k.as_str()) {
                        (_, "metadata") => Place::Metadata,
                        (Place::Metadata, "labels" | "annotations") => Place::Strings,
                        _ => Place::Any,
                    };
                    walk(v, next);
                }
            }
            Json::Array(items) => items.iter_mut().for_each(|v| walk(v, Place::Any)),
            _ => {}
        }
    }
    walk(value, Place::Any);
}

/// `value`: `None` when no policy can match the object.
fn check_one(value: Option<&Json>, i: usize, ctx: &CheckContext<'_>) -> Checked {
    let CheckContext {
        items,
        policies,
        inventory,
        duplicated,
        units,
        unsettled,
        opts,
    } = *ctx;
    let it = &items[i];
    let mut checked = Checked {
        findings: vec![],
        evaluated: vec![],
        notices: vec![],
    };
    if !it.reviewable {
        return checked;
    }
    let request = value.and_then(|v| opts.request(v, &opts.user));
    let mut verdicts = match &request {
        Some(req) if duplicated.copies.is_empty() => policies.evaluate(req, inventory).verdicts,
        Some(req) => {
            let (verdicts, read) = crate::policy::host::recording_lookups(|| {
                policies.evaluate(req, inventory).verdicts
            });
            let mut read: Vec<&ObjectKey> = read
                .iter()
                .filter(|k| duplicated.copies.contains_key(*k))
                .collect();
            read.sort();
            read.dedup();
            for key in read {
                let first = &items[duplicated.sources[key]].source;
                let others: Vec<String> = duplicated.copies[key]
                    .iter()
                    .map(|&c| items[c].source.to_string())
                    .collect();
                checked.notices.push(InputError {
                    file: it.source.file.clone(),
                    line: Some(it.source.line),
                    column: None,
                    message: format!(
                        "{}: lookups read {key}, which is given {} times: they used the copy at {first} (not {})",
                        it.object,
                        others.len() + 1,
                        others.join(", ")
                    ),
                });
            }
            verdicts
        }
        None => vec![],
    };
    verdicts.retain(|v| {
        if opts.whole_cluster {
            return true;
        }
        let Some(why) = unsettled.why(it, &v.policy, &v.related, policies) else {
            return true;
        };
        checked.notices.push(InputError {
            file: it.source.file.clone(),
            line: Some(it.source.line),
            column: None,
            message: format!(
                "{}: {} not reported: what it looked for may exist where the files cannot show it ({why})",
                it.object, v.policy
            ),
        });
        false
    });
    verdicts.retain_mut(|v| {
        let rendered_by = it.source.rendered_by.as_deref();
        match opts.stand_ins.judge(rendered_by, &it.object, v, policies) {
            super::stand_in::Judged::Kept => true,
            super::stand_in::Judged::Notice(message) => {
                checked.notices.push(InputError {
                    file: it.source.file.clone(),
                    line: Some(it.source.line),
                    column: None,
                    message,
                });
                false
            }
        }
    });
    verdicts.retain(|v| {
        if opts.whole_cluster {
            return true;
        }
        let together = v.related.is_empty()
            || v.related.iter().any(|k| units.applied_with(k, i, duplicated));
        if !together {
            checked.notices.push(InputError {
                file: it.source.file.clone(),
                line: Some(it.source.line),
                column: None,
                message: format!(
                    "{}: {} not reported: every object it conflicts with ({}) comes from another render of the install, and alternatives are not applied together",
                    it.object,
                    v.policy,
                    v.related.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                ),
            });
        }
        together
    });
    let object = &it.object;
    let source = &it.source;
    checked.findings = verdicts
        .into_iter()
        .map(|v| Finding {
            policy: v.policy,
            binding: v.binding,
            action: v.action,
            object: object.clone(),
            message: v.message,
            source: source.clone(),
            related: v
                .related
                .iter()
                .filter_map(|k| duplicated.sources.get(k))
                .map(|&i| RelatedObject {
                    object: items[i].object.clone(),
                    source: Some(items[i].source.clone()),
                })
                .collect(),
            reason: v.reason,
        })
        .collect();
    // JUnit lists a test case only where a policy applies to the object.
    if opts.record_evaluated {
        if let Some(req) = &request {
            checked.evaluated = policies
                .applying_to(req, inventory)
                .map(|p| Evaluated {
                    policy: p.name.clone(),
                    object: object.clone(),
                    source: source.clone(),
                })
                .collect();
        }
    }
    checked
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
