//! What is checked: one item per object read, with the pod templates and
//! ResourceGroup members it carries expanded.

use super::*;
use crate::check::json_at::JsonAt;

/// Inventories at least this large are freed on a background thread.
pub(super) const BACKGROUND_DROP_MIN: usize = 5_000;

/// One resource to check: the object as compressed compact JSON, what the
/// inventory keeps of it, and what the report says about it.
pub(super) struct Item {
    /// `None` when no policy can match the object (nothing to check).
    pub(super) body: Option<Body>,
    /// What the object will make in a cluster (see `producers`).
    pub(super) made: Vec<Prepared>,
    /// Namespaces where the object makes objects the files do not show
    /// (`producers::unshown_in`).
    pub(super) unshown_in: Vec<String>,
    /// The Secrets its pod spec names (`producers::secret_references`).
    pub(super) secret_refs: Vec<String>,
    /// Can it be checked at all (as a CREATE request)?
    pub(super) reviewable: bool,
    pub(super) prepared: Option<Result<Prepared, crate::inventory::NoIdentity>>,
    pub(super) object: ObjectRef,
    pub(super) source: SourceLocation,
    /// A pod template taken out of an object (not an object of its own).
    pub(super) derived: bool,
    /// Findings known before any policy runs: a ResourceGroup's group rules.
    pub(super) group_findings: Vec<Finding>,
}

/// Puts a namespaced object without a namespace into `namespace`, as
/// kubectl does when it sends it (`default`, or `kubectl apply -n`).
pub(in crate::check) fn default_namespace(value: &mut Json, namespace: &str) {
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
    pub(super) fn from_document(
        mut d: Document,
        inventory: &Inventory,
        policies: &PolicySet,
        opts: &CheckOptions,
        user: &str,
        bodies: &Bodies,
    ) -> Item {
        opts.as_admitted(&mut d.value);
        let mut object = ObjectRef::from_document(&d);
        object.namespace = d
            .value
            .at("/metadata/namespace")
            .and_then(Json::as_str)
            .map(str::to_string);
        let request = opts.request(&d.value, user);
        let reviewable = request.is_some();
        let body = request.is_some_and(|r| policies.may_match(&r)).then(|| {
            // Serialising a `serde_json::Value` cannot fail (string keys only).
            bodies.keep(&serde_json::to_vec(&d.value).unwrap_or_default())
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
    pub(super) fn templates_of(
        d: &Document,
        policies: &PolicySet,
        opts: &CheckOptions,
        bodies: &Bodies,
    ) -> Vec<Item> {
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
                    .at("/metadata/namespace")
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
                    body: Some(bodies.keep(&json)),
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
pub(super) fn expanded_items(
    d: Document,
    inventory: &Inventory,
    policies: &PolicySet,
    opts: &CheckOptions,
    bodies: &Bodies,
) -> (Vec<Item>, Vec<InputError>) {
    let mut errors = non_string_metadata(&d);
    let e = crate::group::expand::expand(d);
    errors.extend(e.errors);
    let mut items = Vec::with_capacity(e.documents.len());
    let mut group_at = None;
    for (d, u) in e.documents {
        let user = u.as_deref().unwrap_or(&opts.user);
        items.extend(Item::templates_of(&d, policies, opts, bodies));
        group_at.get_or_insert(items.len());
        items.push(Item::from_document(
            d, inventory, policies, opts, user, bodies,
        ));
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
pub(super) fn non_string_metadata(d: &Document) -> Vec<InputError> {
    let mut out = Vec::new();
    // The path is kept as segments and made a pointer only for a value
    // reported (the walk visits every node of every object).
    walk_metadata(&d.value, &mut Vec::new(), d, &mut out);
    out
}

/// One step of a JSON pointer.
enum Step<'v> {
    Key(&'v str),
    Index(usize),
}

/// RFC 6901: `/` then the step, `~` and `/` escaped.
fn pointer(steps: &[Step<'_>]) -> String {
    let mut p = String::new();
    for s in steps {
        p.push('/');
        match s {
            Step::Key(k) => p.push_str(&k.replace('~', "~0").replace('/', "~1")),
            Step::Index(i) => p.push_str(&i.to_string()),
        }
    }
    p
}

fn walk_metadata<'v>(v: &'v Json, at: &mut Vec<Step<'v>>, d: &Document, out: &mut Vec<InputError>) {
    match v {
        Json::Object(map) => {
            for (k, child) in map {
                at.push(Step::Key(k));
                if k == "metadata" {
                    non_string_values(child, at, d, out);
                }
                walk_metadata(child, at, d, out);
                at.pop();
            }
        }
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(Step::Index(i));
                walk_metadata(item, at, d, out);
                at.pop();
            }
        }
        _ => {}
    }
}

/// The boolean and number values of `metadata`'s labels and annotations.
fn non_string_values<'v>(
    metadata: &'v Json,
    at: &mut Vec<Step<'v>>,
    d: &Document,
    out: &mut Vec<InputError>,
) {
    for field in ["labels", "annotations"] {
        let Some(Json::Object(m)) = metadata.get(field) else {
            continue;
        };
        for (key, value) in m.iter().filter(|(_, v)| v.is_boolean() || v.is_number()) {
            at.extend([Step::Key(field), Step::Key(key)]);
            let pointer = pointer(at);
            at.truncate(at.len() - 2);
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

pub(super) fn group_finding(
    f: &crate::group::crd::GroupFinding,
    source: &SourceLocation,
) -> Finding {
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

pub(super) fn flatten_items(
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
