//! Policies: documents, compilation, matching and decisions. The same
//! [`PolicySet::evaluate`] serves `check`, `serve` and audit; only the
//! [`Inventory`] differs.

pub mod claims;
pub mod exceptions;
pub mod files;
pub mod finding;
pub mod host;
pub mod load;
mod matching;
pub mod model;
pub mod overrides;
mod projection;
/// The kinds table lives in [`crate::k8s::kinds`]; this name stays for callers.
pub use crate::k8s::kinds as resources;
pub mod selector;
pub mod typecheck;

pub use finding::Action;

use crate::cel::value::{Key, Str};
use crate::cel::{checker, k8s_authz, Activation, CompileError, Env, Program, Ty, Value};
use crate::inventory::{IndexId, Inventory, Lookup, ObjectKey, ObjectKeyRef, Source};
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use host::{InventoryHost, SelfIdentity};
use model::{BindingSpec, MatchResources, ParamRef, PolicySpec};
use serde_json::Value as Json;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    Fail,
    Ignore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// admissionregistration.k8s.io ValidatingAdmissionPolicy.
    Vap,
    /// interlock.dev InterlockPolicy.
    Interlock,
}

/// A policy that could not be loaded, with where and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}:{}{}: {policy}: {message}", location.file, location.line, column.map(|c| format!(":{c}")).unwrap_or_default())]
pub struct PolicyError {
    /// The document, or (once located) the line of the failing expression.
    pub location: Source,
    /// The column of the failing expression's error in the file, once located.
    pub column: Option<usize>,
    pub policy: String,
    pub message: String,
    /// The expression that did not compile: its field and its error.
    pub expression: Option<(String, CompileError)>,
}

impl PolicyError {
    /// Puts the error at the line and column of the expression in `doc`'s
    /// file (read again; the loader keeps no text), or at least at the
    /// line of its field.
    fn locate(&mut self, doc: &crate::manifest::Document) {
        let Some((pointer, e)) = &self.expression else {
            return;
        };
        let Some(key_line) = doc.line_of_pointer(pointer) else {
            return;
        };
        self.location.line = key_line;
        let value = doc.value.pointer(pointer).and_then(Json::as_str);
        let text = match &doc.source {
            crate::manifest::Source::File(path) => std::fs::read_to_string(path).ok(),
            crate::manifest::Source::Stdin => None,
        };
        let key = pointer.rsplit('/').next().unwrap_or_default();
        if let (Some(value), Some(text)) = (value, text) {
            if let Some((line, column)) =
                crate::manifest::position_in_scalar(&text, key_line, key, value, e.line, e.column)
            {
                self.location.line = line;
                self.column = Some(column);
            }
        }
    }
}

/// Why a policy document did not compile.
struct Failure {
    message: String,
    /// The JSON pointer of the expression that failed, and its error.
    expression: Option<(String, CompileError)>,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure {
            message,
            expression: None,
        }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Failure {
        message.to_string().into()
    }
}

struct CompiledValidation {
    expression: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    reason: Option<String>,
}

pub struct CompiledPolicy {
    pub name: String,
    pub kind: PolicyKind,
    pub source: Source,
    failure_policy: FailurePolicy,
    param_kind: Option<GroupKind>,
    /// The paramKind as written.
    param_kind_version: Option<GroupVersionKind>,
    matcher: MatchResources,
    match_conditions: Vec<(String, Program)>,
    variables: Vec<Program>,
    validations: Vec<CompiledValidation>,
    audit_annotations: Vec<(String, Program)>,
    pub mutations: Vec<Program>,
    indexes: HashMap<String, IndexId>,
    claims: Vec<claims::Claim>,
    bindings: Vec<Binding>,
    slots: Slots,
    /// The kinds the policy reads from the inventory, as written.
    kinds_read: Vec<GroupVersionKind>,
    /// The same kinds, any version.
    group_kinds_read: Vec<GroupKind>,
    /// Whether some lookup computes its apiVersion or kind: `serve` cannot
    /// know to watch that kind, so the lookup finds only what is watched
    /// for other reasons.
    computed_lookup: bool,
    /// Whether any expression reads `request` (building it is not free).
    reads_request: bool,
    /// Whether any expression reads `oldObject` (it may not be parsed yet).
    reads_old_object: bool,
    /// Whether any expression reads `authorizer` or
    /// `authorizer.requestResource`.
    reads_authorizer: bool,
    /// Whether any expression looks objects up in the inventory or reads
    /// `namespaceObject` (see [`CompiledPolicy::needs_inventory`]).
    expressions_read_inventory: bool,
    /// What the policy's expressions were compiled in (`interlock eval
    /// --policy` compiles more in it).
    env: Env,
    /// What compiles but will not work as meant: lookups of kinds that do
    /// not exist, or whose kind is computed (which `serve` cannot watch).
    pub warnings: Vec<String>,
}

/// Why an expression evaluated in a policy's context gave no value.
#[derive(Debug, thiserror::Error)]
pub enum ExpressionError {
    #[error("{0}")]
    Compile(CompileError),
    #[error("{0}")]
    Eval(String),
}

#[derive(Clone, Copy)]
struct Slots {
    object: usize,
    old_object: usize,
    request: usize,
    params: usize,
    namespace_object: usize,
    authorizer: usize,
    request_resource: usize,
}

struct Binding {
    name: Option<String>,
    actions: Vec<Action>,
    /// The actions for admission requests, when they differ (an
    /// InterlockPolicy's `admissionActions`).
    admission_actions: Option<Vec<Action>>,
    /// The actions for objects read from files (`check`, `test`), when
    /// they differ (an InterlockPolicy's `checkActions`).
    check_actions: Option<Vec<Action>>,
    matcher: Option<MatchResources>,
    param_ref: Option<ParamRef>,
}

/// `oldObject`: parsed, or the request's text of it, parsed when first
/// read. Most policies never read it, and it is as large as `object`.
#[derive(Debug, Clone, Default)]
pub enum OldObject<'a> {
    #[default]
    None,
    Json(&'a Json),
    /// Valid JSON text (the server parsed it as a raw value).
    Text(&'a str, OnceCell<Json>),
}

impl OldObject<'_> {
    pub fn get(&self) -> Option<&Json> {
        match self {
            OldObject::None => None,
            OldObject::Json(j) => Some(j),
            OldObject::Text(text, parsed) => Some(parsed.get_or_init(|| {
                serde_json::from_str(text).unwrap_or_else(|e| {
                    // Only nesting deeper than the server's parser allows
                    // gets here; the object is then read as null.
                    tracing::warn!(error = %e, "oldObject could not be parsed");
                    Json::Null
                })
            })),
        }
    }
}

/// The operation of a request. Offline requests (`check`, `test`, `eval`)
/// are a CREATE, UPDATE or DELETE; kube-apiserver also sends CONNECT.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Operation {
    #[default]
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    /// As AdmissionRequest spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }

    /// `CREATE`, `UPDATE` or `DELETE` (as AdmissionRequest spells them):
    /// the operations a request made offline can have.
    pub fn parse(s: &str) -> Option<Operation> {
        match s {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            _ => None,
        }
    }
}

/// The identity offline requests are made as (`check`, `audit`, `test`,
/// `eval --policy`): a fixed auditor, see docs/architecture.md.
pub const OFFLINE_USER: &str = "system:serviceaccount:interlock-system:auditor";

/// How a request made offline (`check`, `test`, `eval`) sends an object:
/// everything of an AdmissionRequest that the object does not say.
#[derive(Debug, Clone, Default)]
pub struct RequestShape {
    pub operation: Operation,
    pub user: String,
    /// `None`: `system:authenticated` only.
    pub groups: Option<Vec<String>>,
    pub subresource: String,
    pub dry_run: bool,
}

impl RequestShape {
    /// A CREATE by `user`, as `interlock check` sends every object.
    pub fn create(user: &str) -> RequestShape {
        RequestShape {
            user: user.into(),
            ..RequestShape::default()
        }
    }
}

/// An admission request, or an object checked offline as one.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub operation: Operation,
    pub object: Option<&'a Json>,
    pub old_object: OldObject<'a>,
    /// The kind of the object (its group, version and kind).
    pub gvk: GroupVersionKind,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub username: String,
    pub groups: Vec<String>,
    pub dry_run: bool,
    pub uid: String,
    /// Whether the object is the cluster's (an admission request, an audit,
    /// a group's validation) rather than one read from files (`check`,
    /// `test`), which an InterlockPolicy's `checkActions` apply to.
    pub live: bool,
    /// Who answers `authorizer...check()`: only admission requests under
    /// `serve` have one; offline the check is an evaluation error.
    pub authorizer: Option<RequestAuthorizer<'a>>,
}

/// The authorizer of an admission request, with what of its user the
/// request's own fields (`username`, `groups`) lack.
#[derive(Debug, Clone, Copy)]
pub struct RequestAuthorizer<'a> {
    pub authorizer: &'a Arc<dyn k8s_authz::Authorizer>,
    pub uid: &'a str,
    pub extra: Option<&'a std::collections::BTreeMap<String, Vec<String>>>,
}

impl<'a> Request<'a> {
    /// The request `interlock check` makes for each object: a CREATE.
    ///
    /// An object with only `metadata.generateName` (a Helm hook Job, a
    /// `kubectl create` Job) is a request too: kube-apiserver runs admission
    /// before it generates the name, so policies see the generateName and an
    /// empty `request.name`. `None` only without apiVersion, kind or metadata.
    pub fn create(object: &'a Json, username: &str) -> Option<Request<'a>> {
        Request::build(object, None, &RequestShape::create(username))
    }

    /// The request that `shape` makes of `object`: a CREATE or UPDATE
    /// sends it (an UPDATE with `old` as oldObject), a DELETE sends it as
    /// oldObject and no object, as kube-apiserver does. `None` as for
    /// [`Request::create`].
    pub fn build(
        object: &'a Json,
        old: Option<&'a Json>,
        shape: &RequestShape,
    ) -> Option<Request<'a>> {
        let mut r = Request::named(object, &shape.user)?;
        r.operation = shape.operation;
        match shape.operation {
            Operation::Create | Operation::Connect => {}
            Operation::Update => r.old_object = old.map_or(OldObject::None, OldObject::Json),
            Operation::Delete => {
                r.object = None;
                r.old_object = OldObject::Json(object);
            }
        }
        if let Some(groups) = &shape.groups {
            r.groups = groups.clone();
        }
        r.subresource = shape.subresource.clone();
        r.dry_run = shape.dry_run;
        Some(r)
    }

    /// A CREATE of `object` by `username`.
    fn named(object: &'a Json, username: &str) -> Option<Request<'a>> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let meta = object.get("metadata")?;
        let field = |f: &str| meta.get(f).and_then(Json::as_str).unwrap_or("");
        let (group, name) = (resources::group_of(api_version), field("name"));
        if name.is_empty() && field("generateName").is_empty() {
            return None;
        }
        // A Namespace request carries the Namespace's own name as namespace.
        let namespace = if group.is_empty() && kind == "Namespace" {
            name
        } else {
            field("namespace")
        };
        Some(Request {
            operation: Operation::Create,
            object: Some(object),
            old_object: OldObject::None,
            gvk: GroupVersionKind::from_api_version(api_version, kind),
            resource: resources::resource_of(group, kind),
            subresource: String::new(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            username: username.to_string(),
            groups: vec!["system:authenticated".into()],
            dry_run: false,
            uid: String::new(),
            live: false,
            authorizer: None,
        })
    }

    /// What the `authorizer` variable asks, for the request's user.
    fn authority(&self) -> Option<Arc<k8s_authz::Authority>> {
        let a = self.authorizer?;
        Some(Arc::new(k8s_authz::Authority {
            authorizer: a.authorizer.clone(),
            user: k8s_authz::UserInfo {
                username: self.username.clone(),
                uid: a.uid.to_string(),
                groups: self.groups.clone(),
                extra: a.extra.cloned().unwrap_or_default(),
            },
        }))
    }

    /// Is this a request on a Namespace itself? Its `namespace` is then the
    /// Namespace's name, but it is cluster-scoped and has no namespaceObject.
    pub fn is_namespace_request(&self) -> bool {
        self.gvk.group().is_empty() && self.resource == "namespaces"
    }

    /// Is this a request from kube-apiserver (which gives every admission
    /// request a uid), rather than one made offline by `check`, an audit or
    /// a group's validation (which have none)?
    pub fn is_admission(&self) -> bool {
        !self.uid.is_empty()
    }

    /// Is the requested object namespaced?
    pub fn is_namespaced(&self) -> bool {
        !self.namespace.is_empty() && !self.is_namespace_request()
    }

    /// The `request` variable, shaped like kube-apiserver's AdmissionRequest:
    /// subResource is left out for the main resource, and name and namespace
    /// when empty (reading them is "no such key"). Built as CEL values, not
    /// JSON: policies read a field or two of it on every request.
    pub fn to_value(&self) -> Value<'static> {
        fn map(entries: Vec<(&'static str, Value<'static>)>) -> Value<'static> {
            Value::map(
                entries
                    .into_iter()
                    .map(|(k, v)| (Key::String(Str::Borrowed(k)), v))
                    .collect(),
            )
        }
        let s = |v: &str| Value::string(v);
        let gvk = |last: &'static str, value: &str| {
            map(vec![
                ("group", s(self.gvk.group())),
                ("version", s(self.gvk.version())),
                (last, s(value)),
            ])
        };
        let kind = gvk("kind", self.gvk.kind());
        let resource = gvk("resource", &self.resource);
        let mut entries = vec![
            ("uid", s(&self.uid)),
            ("kind", kind.clone()),
            ("resource", resource.clone()),
        ];
        if !self.subresource.is_empty() {
            entries.push(("subResource", s(&self.subresource)));
        }
        entries.extend([("requestKind", kind), ("requestResource", resource)]);
        if !self.name.is_empty() {
            entries.push(("name", s(&self.name)));
        }
        if !self.namespace.is_empty() {
            entries.push(("namespace", s(&self.namespace)));
        }
        let groups = self.groups.iter().map(|g| s(g)).collect();
        entries.extend([
            ("operation", s(self.operation.as_str())),
            (
                "userInfo",
                map(vec![
                    ("username", s(&self.username)),
                    ("groups", Value::list(groups)),
                ]),
            ),
            ("dryRun", Value::Bool(self.dry_run)),
        ]);
        map(entries)
    }

    pub(crate) fn reviewed(&self) -> Option<&Json> {
        self.object.or_else(|| self.old_object.get())
    }
}

/// One outcome of one policy (and binding) for one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub policy: String,
    pub binding: Option<String>,
    pub action: Action,
    pub message: String,
    pub reason: Option<String>,
    pub related: Vec<ObjectKey>,
}

/// `message` with every related object of another namespace named only by
/// its kind: a group's status and its admission answer are read by its
/// tenant, who must not learn another tenant's object names. Longer names
/// go first, so that a name which is a prefix of another leaks nothing.
pub fn redact(message: &str, related: &[ObjectKey], namespace: &str) -> String {
    let mut hidden: Vec<(String, String)> = related
        .iter()
        .filter(|k| !k.namespace.is_empty() && &*k.namespace != namespace)
        .map(|k| {
            (
                format!("{}/{}", k.namespace, k.name),
                format!("{} in another namespace", k.gk.kind),
            )
        })
        .collect();
    hidden.sort_by_key(|h| std::cmp::Reverse(h.0.len()));
    hidden
        .iter()
        .fold(message.to_string(), |m, (name, kind)| m.replace(name, kind))
}

/// Audit annotations produced by a policy (key is `policy/key`).
pub type AuditAnnotations = Vec<(String, String)>;

/// What [`PolicySet::evaluate`] found for one request.
#[derive(Debug, Default)]
pub struct Outcome {
    pub verdicts: Vec<Verdict>,
    pub annotations: AuditAnnotations,
    /// Indexes of the policies whose matchConstraints matched, in the set
    /// that evaluated (valid only for that set: see
    /// [`PolicySet::inventory_readers`], [`PolicySet::kinds_read_by`]).
    matched: Vec<usize>,
}

impl Outcome {
    /// Whether some verdict refuses the request.
    pub fn denied(&self) -> bool {
        self.verdicts.iter().any(|v| v.action == Action::Deny)
    }
}

/// Compiled policies and exceptions. Immutable once compiled and cheap to
/// clone (shared slices), so that evaluations can work on a snapshot of
/// the serving set without holding the cluster state's lock.
/// Which policies one pass of [`PolicySet::evaluate_part`] evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    All,
    /// Those that never read the inventory ([`CompiledPolicy::needs_inventory`]).
    Detached,
    /// Those that may.
    Attached,
}

impl Part {
    fn selects(self, p: &CompiledPolicy) -> bool {
        match self {
            Part::All => true,
            Part::Detached => !p.needs_inventory(),
            Part::Attached => p.needs_inventory(),
        }
    }
}

/// What some policies found for one request, each verdict and annotation
/// with the index of the policy that made it.
#[derive(Debug, Default, Clone)]
pub struct Partial {
    matched: Vec<usize>,
    verdicts: Vec<(usize, Verdict)>,
    annotations: Vec<(usize, (String, String))>,
}

impl Partial {
    /// Both passes' findings in policy order, as one pass over all the
    /// policies would have made them.
    pub fn merge(mut self, other: Partial) -> Partial {
        self.matched.extend(other.matched);
        self.matched.sort_unstable();
        self.verdicts.extend(other.verdicts);
        // Stable: a policy's own verdicts keep their order.
        self.verdicts.sort_by_key(|(i, _)| *i);
        self.annotations.extend(other.annotations);
        self.annotations.sort_by_key(|(i, _)| *i);
        self
    }
}

#[derive(Default, Clone)]
pub struct PolicySet {
    pub policies: Arc<[CompiledPolicy]>,
    /// PolicyException documents loaded with the policies.
    pub exceptions: Arc<[exceptions::Exception]>,
    /// InterlockException objects of the cluster (set by its watcher or
    /// an audit's list; kept across policy reloads).
    pub cluster_exceptions: Arc<[exceptions::Exception]>,
}

const VAP_GROUP: &str = "admissionregistration.k8s.io";
pub const INTERLOCK_GROUP: &str = "interlock.dev";

/// Per-policy evaluation budget (kube-apiserver's RuntimeCELCostBudget).
const POLICY_COST_BUDGET: u64 = 10_000_000;

/// Is this document a policy document we understand?
pub fn is_policy_document(doc: &Json) -> bool {
    let group = doc
        .get("apiVersion")
        .and_then(Json::as_str)
        .map(resources::group_of);
    let kind = doc.get("kind").and_then(Json::as_str);
    matches!(
        (group, kind),
        (
            Some(VAP_GROUP),
            Some("ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding")
        ) | (
            Some(INTERLOCK_GROUP),
            Some("InterlockPolicy" | exceptions::FILE_KIND | exceptions::CLUSTER_KIND)
        )
    )
}

impl PolicySet {
    /// [`PolicySet::compile`] for documents as the manifest loader reads
    /// them (files, the bundled library).
    pub fn compile_documents(
        docs: Vec<crate::manifest::Document>,
        inventory: &mut Inventory,
    ) -> (PolicySet, Vec<PolicyError>) {
        let pairs: Vec<(Json, Source)> = docs
            .iter()
            .map(|d| (d.value.clone(), Source::of(d)))
            .collect();
        let (set, mut errors) = PolicySet::compile(&pairs, inventory);
        for e in errors.iter_mut().filter(|e| e.expression.is_some()) {
            if let Some(d) = docs.iter().find(|d| Source::of(d) == e.location) {
                e.locate(d);
            }
        }
        (set, errors)
    }

    /// Compiles every policy document; bindings attach to their policies.
    /// Indexes are declared in `inventory`. Documents that fail are
    /// reported and left out; the rest load.
    pub fn compile(
        docs: &[(Json, Source)],
        inventory: &mut Inventory,
    ) -> (PolicySet, Vec<PolicyError>) {
        let mut policies: Vec<CompiledPolicy> = Vec::new();
        let mut exception_list = Vec::new();
        let mut errors = Vec::new();
        let mut bindings = Vec::new();
        let mut exception_sources = Vec::new();
        for (doc, source) in docs {
            let name = doc
                .pointer("/metadata/name")
                .and_then(Json::as_str)
                .unwrap_or("<unnamed>")
                .to_string();
            let err = |message: String| PolicyError {
                location: source.clone(),
                column: None,
                policy: name.clone(),
                message,
                expression: None,
            };
            let kind = match doc.get("kind").and_then(Json::as_str) {
                Some(k) if exceptions::is_exception_kind(k) => {
                    match exceptions::Exception::parse(&name, doc) {
                        Ok(e) => {
                            exception_list.push(e);
                            exception_sources.push(source.clone());
                        }
                        Err(e) => errors.push(err(e.0)),
                    }
                    continue;
                }
                Some("ValidatingAdmissionPolicyBinding") => {
                    match spec::<BindingSpec>(doc) {
                        Ok(b) => bindings.push((name.clone(), b, source.clone())),
                        Err(e) => errors.push(err(e.0)),
                    }
                    continue;
                }
                Some("ValidatingAdmissionPolicy") => PolicyKind::Vap,
                Some("InterlockPolicy") => PolicyKind::Interlock,
                other => {
                    errors.push(err(format!(
                        "not a policy document (kind {other:?}); expected ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding or InterlockPolicy"
                    )));
                    continue;
                }
            };
            match spec::<PolicySpec>(doc)
                .map_err(Failure::from)
                .and_then(|s| compile_policy(&name, kind, s, inventory))
            {
                Ok(mut p) => {
                    p.source = source.clone();
                    policies.push(p);
                }
                Err(f) => errors.push(PolicyError {
                    expression: f.expression,
                    ..err(f.message)
                }),
            }
        }
        for (name, b, source) in bindings {
            let actions: Result<Vec<Action>, String> = b
                .validation_actions
                .iter()
                .map(|a| {
                    Action::parse(a).ok_or_else(|| {
                        format!(
                            "spec.validationActions: unknown action {a:?}; use Deny, Warn or Audit"
                        )
                    })
                })
                .collect();
            let actions = match actions {
                Ok(a) if a.is_empty() => {
                    Err("spec.validationActions must not be empty".to_string())
                }
                other => other,
            };
            let result = actions.and_then(|actions| {
                let policy = policies
                    .iter_mut()
                    .find(|p| p.kind == PolicyKind::Vap && p.name == b.policy_name)
                    .ok_or_else(|| {
                        format!("binds policy {:?}, which was not loaded", b.policy_name)
                    })?;
                if policy.param_kind.is_some() && b.param_ref.is_none() {
                    return Err(
                        "the policy has a paramKind, so the binding needs a paramRef".to_string(),
                    );
                }
                policy.bindings.push(Binding {
                    name: Some(name.clone()),
                    actions,
                    admission_actions: None,
                    check_actions: None,
                    matcher: b.match_resources,
                    param_ref: b.param_ref,
                });
                Ok(())
            });
            if let Err(message) = result {
                errors.push(PolicyError {
                    location: source,
                    column: None,
                    policy: name,
                    message,
                    expression: None,
                });
            }
        }
        // An exception for a policy that is not loaded (a typo) excepts
        // nothing: say so rather than let the policy deny unexpectedly.
        for (e, source) in exception_list.iter().zip(exception_sources) {
            for p in e.policies() {
                if !policies.iter().any(|c| &c.name == p) {
                    errors.push(PolicyError {
                        location: source.clone(),
                        column: None,
                        policy: e.name.clone(),
                        message: format!("spec.policies: {p:?} is not a loaded policy"),
                        expression: None,
                    });
                }
            }
        }
        let set = PolicySet {
            policies: policies.into(),
            exceptions: exception_list.into(),
            cluster_exceptions: Arc::default(),
        };
        (set, errors)
    }

    /// Every verdict of every matching policy for one request, and which
    /// policies matched: the one question admission, check, audit and the
    /// controller ask the policy set per object.
    pub fn evaluate(&self, req: &Request, inventory: &dyn Lookup) -> Outcome {
        self.conclude(req, self.evaluate_part(req, inventory, Part::All))
    }

    /// The verdicts of the policies `part` selects, before exceptions:
    /// [`PolicySet::conclude`] finishes one pass or the merge of several.
    pub fn evaluate_part(&self, req: &Request, inventory: &dyn Lookup, part: Part) -> Partial {
        let mut partial = Partial::default();
        let shared = Shared::default();
        let mut verdicts = Vec::new();
        let mut annotations = Vec::new();
        for (i, p) in self.policies.iter().enumerate() {
            if !part.selects(p) || !matching::matches(&p.matcher, req, inventory, false) {
                continue;
            }
            partial.matched.push(i);
            p.evaluate(req, &shared, inventory, &mut verdicts, &mut annotations);
            partial.verdicts.extend(verdicts.drain(..).map(|v| (i, v)));
            partial
                .annotations
                .extend(annotations.drain(..).map(|a| (i, a)));
        }
        partial
    }

    /// The outcome of the policies evaluated in `partial`, in policy order,
    /// with the exceptions applied.
    pub fn conclude(&self, req: &Request, partial: Partial) -> Outcome {
        let mut outcome = Outcome {
            verdicts: partial.verdicts.into_iter().map(|(_, v)| v).collect(),
            annotations: partial.annotations.into_iter().map(|(_, a)| a).collect(),
            matched: partial.matched,
        };
        exceptions::apply(
            &[&self.exceptions, &self.cluster_exceptions],
            req,
            &mut outcome.verdicts,
        );
        outcome
    }

    /// Whether a policy that reads the inventory may match `req` (its
    /// resource rules do; selectors are not looked at).
    pub fn may_need_inventory(&self, req: &Request) -> bool {
        self.policies
            .iter()
            .any(|p| p.needs_inventory() && matching::rules_match(&p.matcher, req))
    }

    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// Whether the policy named `name` looks objects up in the inventory
    /// (a finding of one may rest on what it did not find).
    pub fn looks_up_objects(&self, name: &str) -> bool {
        self.policies
            .iter()
            .any(|p| p.name == name && (p.computed_lookup || !p.kinds_read.is_empty()))
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }
}

/// kube-apiserver's words for an expression of the wrong static type
/// (admission/plugin/cel/compile.go).
fn must_evaluate_to(want: &[Ty], got: &Ty) -> String {
    match want {
        [one] => format!(
            "must evaluate to {} but got {}",
            one.declared_name(),
            got.declared_name()
        ),
        _ => {
            let names: Vec<String> = want.iter().map(Ty::declared_name).collect();
            format!(
                "must evaluate to one of [{}] but got {}",
                names.join(" "),
                got.declared_name()
            )
        }
    }
}

/// A policy document the engine cannot use as written. It stays wrong until
/// the document changes: callers report it, they never retry it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

impl From<String> for SpecError {
    fn from(message: String) -> SpecError {
        SpecError(message)
    }
}

impl From<&str> for SpecError {
    fn from(message: &str) -> SpecError {
        SpecError(message.to_string())
    }
}

impl From<SpecError> for Failure {
    fn from(e: SpecError) -> Failure {
        Failure::from(e.0)
    }
}

fn spec<T: serde::de::DeserializeOwned>(doc: &Json) -> Result<T, SpecError> {
    let spec = doc.get("spec").cloned().ok_or("has no spec")?;
    Ok(serde_json::from_value(spec).map_err(|e| format!("spec: {e}"))?)
}

fn compile_policy(
    name: &str,
    kind: PolicyKind,
    spec: PolicySpec,
    inventory: &mut Inventory,
) -> Result<CompiledPolicy, Failure> {
    let mut env = match kind {
        PolicyKind::Vap => Env::kubernetes(),
        PolicyKind::Interlock => Env::interlock(),
    };
    let slots = Slots {
        object: env.add_variable("object"),
        old_object: env.add_variable("oldObject"),
        request: env.add_typed_variable("request", checker::request_type()),
        params: env.add_variable("params"),
        namespace_object: env.add_typed_variable("namespaceObject", checker::namespace_type()),
        authorizer: env.add_typed_variable("authorizer", Ty::Named(k8s_authz::AUTHORIZER.into())),
        request_resource: env.add_typed_variable(
            "authorizer.requestResource",
            Ty::Named(k8s_authz::RESOURCE_CHECK.into()),
        ),
    };
    if kind == PolicyKind::Vap && spec.param_kind.is_none() {
        env.hide_variable("params");
    }
    host::declare(&mut env, kind == PolicyKind::Interlock);
    env.enable_lazy_variables();
    let failure_policy = match spec.failure_policy.as_deref() {
        None | Some("Fail") => FailurePolicy::Fail,
        Some("Ignore") => FailurePolicy::Ignore,
        Some(other) => {
            return Err(format!("spec.failurePolicy: {other:?} is not Fail or Ignore").into())
        }
    };
    let matcher = spec
        .match_constraints
        .clone()
        .ok_or("spec.matchConstraints is required: say which resources the policy applies to")?;
    let vap = kind == PolicyKind::Vap;
    // `field` is the expression's JSON pointer below spec, as
    // `validations/0/expression`; messages spell it `spec.validations[0].expression`.
    let compile_as =
        |env: &Env, field: String, src: &str, want: &[Ty]| -> Result<Program, Failure> {
            let failure = |e: CompileError| Failure {
                message: format!("{}: {e}", field_name(&field)),
                expression: Some((format!("/spec/{field}"), e)),
            };
            // kube-apiserver compares the result type before it plans the
            // program.
            let checked = env.check_expression(src).map_err(failure)?;
            match checked.static_type() {
                Some(t) if vap && !want.is_empty() && *t != Ty::Unknown && !want.contains(t) => {
                    Err(format!("{}: {}", field_name(&field), must_evaluate_to(want, t)).into())
                }
                _ => checked.plan().map_err(failure),
            }
        };
    let compile = |env: &Env, field: String, src: &str| compile_as(env, field, src, &[Ty::Bool]);
    let compile_string =
        |env: &Env, field: String, src: &str| compile_as(env, field, src, &[Ty::String]);
    let mut variables = Vec::new();
    for (i, v) in spec.variables.iter().enumerate() {
        let program = compile_as(
            &env,
            format!("variables/{i}/expression"),
            &v.expression,
            &[],
        )?;
        let ty = program.static_type().cloned().unwrap_or(Ty::Dyn);
        // kube-apiserver declares a variable of an object type as `dyn`.
        let ty = if vap {
            typecheck::variable_type(&ty)
        } else {
            ty
        };
        variables.push(program);
        env.add_typed_lazy_variable(&v.name, ty);
    }
    let match_conditions: Vec<(String, Program)> = spec
        .match_conditions
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Ok((
                c.name.clone(),
                compile(
                    &env,
                    format!("matchConditions/{i}/expression"),
                    &c.expression,
                )?,
            ))
        })
        .collect::<Result<_, Failure>>()?;
    // kube-apiserver declares no authorizer for messageExpressions.
    let mut message_env = env.clone();
    message_env.hide_variable("authorizer");
    message_env.hide_variable("authorizer.requestResource");
    let mut validations = Vec::new();
    for (i, v) in spec.validations.iter().enumerate() {
        validations.push(CompiledValidation {
            expression: compile(&env, format!("validations/{i}/expression"), &v.expression)?,
            message: v.message.clone(),
            message_expression: v
                .message_expression
                .as_deref()
                .map(|m| {
                    compile_string(
                        &message_env,
                        format!("validations/{i}/messageExpression"),
                        m,
                    )
                })
                .transpose()?,
            reason: v.reason.clone(),
        });
    }
    let audit_annotations: Vec<(String, Program)> = spec
        .audit_annotations
        .iter()
        .enumerate()
        .map(|(i, a)| {
            Ok((
                a.key.clone(),
                compile_as(
                    &env,
                    format!("auditAnnotations/{i}/valueExpression"),
                    &a.value_expression,
                    &[Ty::String, Ty::Null],
                )?,
            ))
        })
        .collect::<Result<_, Failure>>()?;
    let mutations: Vec<Program> = spec
        .mutations
        .iter()
        .enumerate()
        .map(|(i, m)| match (m.patch_type.as_str(), &m.json_patch) {
            ("JSONPatch", Some(p)) => compile_as(&env, format!("mutations/{i}/jsonPatch/expression"), &p.expression, &[]),
            (t, _) => Err(format!("spec.mutations[{i}]: patchType {t:?} is not supported; use JSONPatch with jsonPatch.expression").into()),
        })
        .collect::<Result<_, Failure>>()?;
    let mut indexes = HashMap::new();
    for (i, ix) in spec.indexes.iter().enumerate() {
        let id = inventory
            .declare_index(&ix.api_version, &ix.kind, &ix.keys)
            .map_err(|e| format!("spec.indexes[{i}].keys ({}): {e}", ix.name))?;
        indexes.insert(ix.name.clone(), id);
    }
    if kind == PolicyKind::Vap && !spec.claims.is_empty() {
        return Err("spec.claims is an InterlockPolicy field".into());
    }
    let claims = claims::compile(&spec.claims, &indexes)?;
    let param_kind_version = spec
        .param_kind
        .as_ref()
        .map(|p| GroupVersionKind::from_api_version(p.api_version.as_str(), p.kind.as_str()));
    let param_kind = param_kind_version
        .as_ref()
        .map(GroupVersionKind::group_kind);
    let mut bindings = Vec::new();
    let parse_actions = |field: &str, list: &[String]| -> Result<Vec<Action>, String> {
        list.iter()
            .map(|a| {
                Action::parse(a).ok_or_else(|| {
                    format!("spec.{field}: unknown action {a:?}; use Deny, Warn or Audit")
                })
            })
            .collect()
    };
    if kind == PolicyKind::Vap && !spec.admission_actions.is_empty() {
        return Err("spec.admissionActions is an InterlockPolicy field; a ValidatingAdmissionPolicy's actions are its bindings' validationActions".into());
    }
    if kind == PolicyKind::Vap && !spec.check_actions.is_empty() {
        return Err("spec.checkActions is an InterlockPolicy field; a ValidatingAdmissionPolicy's actions are its bindings' validationActions".into());
    }
    if kind == PolicyKind::Interlock {
        let actions = if spec.validation_actions.is_empty() {
            vec![Action::Deny]
        } else {
            parse_actions("validationActions", &spec.validation_actions)?
        };
        let admission_actions = if spec.admission_actions.is_empty() {
            None
        } else {
            Some(parse_actions("admissionActions", &spec.admission_actions)?)
        };
        let check_actions = if spec.check_actions.is_empty() {
            None
        } else {
            Some(parse_actions("checkActions", &spec.check_actions)?)
        };
        if param_kind.is_some() && spec.param_ref.is_none() {
            return Err("spec.paramKind is set, so spec.paramRef is required".into());
        }
        bindings.push(Binding {
            name: None,
            actions,
            admission_actions,
            check_actions,
            matcher: None,
            param_ref: spec.param_ref.clone(),
        });
    }
    let mut kinds_read: Vec<GroupVersionKind> = spec
        .indexes
        .iter()
        .map(|i| GroupVersionKind::from_api_version(i.api_version.as_str(), i.kind.as_str()))
        .collect();
    kinds_read.extend(param_kind_version.clone());
    let programs = variables
        .iter()
        .chain(match_conditions.iter().map(|(_, p)| p))
        .chain(
            validations
                .iter()
                .flat_map(|v| std::iter::once(&v.expression).chain(v.message_expression.as_ref())),
        )
        .chain(audit_annotations.iter().map(|(_, a)| a))
        .chain(mutations.iter());
    let programs: Vec<&Program> = programs.collect();
    let reads_request = programs.iter().any(|p| p.uses_global(slots.request));
    let reads_old_object = programs.iter().any(|p| p.uses_global(slots.old_object));
    let reads_authorizer = programs
        .iter()
        .any(|p| p.uses_global(slots.authorizer) || p.uses_global(slots.request_resource));
    let expressions_read_inventory = programs.iter().any(|p| {
        p.uses_global(slots.namespace_object)
            || p.host_calls()
                .iter()
                .any(|(id, _)| *id != host::SELECTOR_MATCHES)
    });
    let mut computed_lookup = false;
    let mut warnings = Vec::new();
    for p in programs {
        for (id, args) in p.host_calls() {
            if matches!(id, host::GET | host::LIST) {
                match (
                    args.first().cloned().flatten(),
                    args.get(1).cloned().flatten(),
                ) {
                    (Some(v), Some(k)) => {
                        warnings.extend(resources::unknown_kind_warning(&v, &k));
                        kinds_read.push(GroupVersionKind::from_api_version(v, k));
                    }
                    _ => {
                        computed_lookup = true;
                        tracing::warn!(policy = name, "an inventory lookup names its kind with a non-constant; that kind is not watched")
                    }
                }
            }
        }
    }
    if computed_lookup {
        warnings.push("an inventory lookup computes its apiVersion or kind: `serve` cannot know to watch that kind, so at admission the lookup finds only objects of kinds watched for other lookups; name the kind with a constant (one lookup per kind)".into());
    }
    warnings.dedup();
    Ok(CompiledPolicy {
        group_kinds_read: kinds_read
            .iter()
            .map(GroupVersionKind::group_kind)
            .collect(),
        kinds_read,
        computed_lookup,
        reads_request,
        reads_old_object,
        reads_authorizer,
        expressions_read_inventory,
        name: name.to_string(),
        kind,
        source: Source {
            file: String::new(),
            line: 0,
        },
        failure_policy,
        param_kind,
        param_kind_version,
        matcher,
        match_conditions,
        variables,
        validations,
        audit_annotations,
        mutations,
        indexes,
        claims,
        bindings,
        slots,
        env,
        warnings,
    })
}

/// `validations/0/expression` as `spec.validations[0].expression`.
fn field_name(pointer: &str) -> String {
    let mut out = String::from("spec");
    for seg in pointer.split('/') {
        if seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            out.push('.');
            out.push_str(seg);
        }
    }
    out
}

/// What every policy's evaluation of one request sees alike, computed when
/// the first policy that matches needs it.
#[derive(Default)]
struct Shared<'i> {
    /// The `request` variable.
    request: OnceCell<Value<'static>>,
    /// The `namespaceObject` variable (parsed from the inventory).
    namespace_object: OnceCell<Option<std::borrow::Cow<'i, Json>>>,
    /// The reviewed object, which lookups never return.
    me: OnceCell<SelfIdentity>,
    /// What `authorizer` asks for the request's user.
    authority: OnceCell<Option<Arc<k8s_authz::Authority>>>,
}

enum Params<'a> {
    /// No paramKind: evaluate once with `params` null.
    None,
    Found(Vec<std::borrow::Cow<'a, Json>>),
    /// paramKind set but nothing found, with the binding's instruction.
    Missing {
        deny: bool,
    },
}

impl CompiledPolicy {
    pub fn reads_inventory(&self) -> bool {
        self.kind == PolicyKind::Interlock
    }

    /// Whether evaluating the policy may read the inventory at all: its
    /// expressions look objects up or read `namespaceObject`, it has a
    /// paramKind, or a namespaceSelector (its own or a binding's) reads the
    /// request's Namespace. A policy that does not is evaluated without the
    /// cluster state's lock, however long it runs.
    pub fn needs_inventory(&self) -> bool {
        self.expressions_read_inventory
            || self.param_kind.is_some()
            || !self.kinds_read.is_empty()
            || self.computed_lookup
            || self.matcher.namespace_selector.is_some()
            || self.bindings.iter().any(|b| {
                b.matcher
                    .as_ref()
                    .is_some_and(|m| m.namespace_selector.is_some())
            })
    }

    /// The verdicts of a policy whose matchConstraints matched `req`.
    fn evaluate<'i>(
        &self,
        req: &Request,
        shared: &Shared<'i>,
        inv: &'i dyn Lookup,
        out: &mut Vec<Verdict>,
        annotations: &mut AuditAnnotations,
    ) {
        let fail = self.failure_policy == FailurePolicy::Fail;
        // Audit annotations of every binding and param, by key: kube-apiserver
        // publishes each distinct value once, joined with ", ".
        let mut collected: Vec<(String, Vec<String>)> = Vec::new();
        for b in &self.bindings {
            if let Some(m) = &b.matcher {
                if !matching::matches(m, req, inv, true) {
                    continue;
                }
            }
            let actions = match (&b.admission_actions, &b.check_actions) {
                (Some(a), _) if req.is_admission() => a,
                (_, Some(a)) if !req.is_admission() && !req.live => a,
                _ => &b.actions,
            };
            let verdict =
                move |message: String, reason: Option<String>, related: Vec<ObjectKey>| {
                    actions.iter().map(move |a| Verdict {
                        policy: self.name.clone(),
                        binding: b.name.clone(),
                        action: *a,
                        message: message.clone(),
                        reason: reason.clone(),
                        related: related.clone(),
                    })
                };
            match self.params(b, req, inv) {
                Params::None => {
                    self.evaluate_with(req, shared, inv, None, b, &verdict, out, &mut collected)
                }
                Params::Found(list) => {
                    for p in list {
                        self.evaluate_with(req, shared, inv, Some(&p), b, &verdict, out, &mut collected);
                    }
                }
                // A configuration error: under failurePolicy Fail it denies,
                // whatever the binding's actions (kube-apiserver's dispatcher).
                Params::Missing { deny: true } if fail => out.push(self.config_error(
                    b,
                    "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction".into(),
                )),
                Params::Missing { .. } => {}
            }
        }
        for (key, values) in collected {
            annotations.push((format!("{}/{key}", self.name), values.join(", ")));
        }
    }

    fn params<'i>(&self, b: &Binding, req: &Request, inv: &'i dyn Lookup) -> Params<'i> {
        let Some(param_kind) = &self.param_kind else {
            return Params::None;
        };
        let (group, kind) = (param_kind.group(), param_kind.kind());
        let Some(r) = &b.param_ref else {
            return Params::None;
        };
        let namespaced = resources::is_namespaced(group, kind).unwrap_or(true);
        let ns = match (&r.namespace, namespaced) {
            (Some(ns), _) if !ns.is_empty() => ns.clone(),
            (_, true) => req.namespace.clone(),
            _ => String::new(),
        };
        let deny = r.parameter_not_found_action.as_deref() != Some("Allow");
        let found: Vec<std::borrow::Cow<Json>> = match (&r.name, &r.selector) {
            (Some(name), _) => {
                let key = ObjectKeyRef {
                    group,
                    kind,
                    namespace: &ns,
                    name,
                };
                inv.find(key).map(|e| e.object.json()).into_iter().collect()
            }
            (None, Some(sel)) => inv
                .list(
                    group,
                    kind,
                    if ns.is_empty() && !namespaced {
                        Some("")
                    } else if ns.is_empty() {
                        None
                    } else {
                        Some(&ns)
                    },
                )
                .into_iter()
                .map(|e| e.object.json())
                .filter(|o| sel.matches(selector::labels(o)).unwrap_or(false))
                .collect(),
            (None, None) => vec![],
        };
        if found.is_empty() {
            return Params::Missing { deny };
        }
        Params::Found(found)
    }

    /// Evaluates `expr` as one of the policy's own expressions: with its
    /// `variables`, its params (`params`, else what its first binding's
    /// paramRef finds) and its indexes, for `req`. Returns the value's type
    /// and the value.
    pub fn evaluate_expression(
        &self,
        expr: &str,
        req: &Request,
        inv: &dyn Lookup,
        params: Option<&Json>,
    ) -> Result<(String, Json), ExpressionError> {
        let program = self.env.compile(expr).map_err(ExpressionError::Compile)?;
        let found = match (params, self.bindings.first()) {
            (None, Some(b)) => match self.params(b, req, inv) {
                Params::Found(mut list) => Some(list.swap_remove(0).into_owned()),
                _ => None,
            },
            _ => None,
        };
        let params = params.or(found.as_ref());
        let shared = Shared::default();
        self.with_activation_reading(req, &shared, inv, params, true, |act, _| {
            program
                .eval(act)
                .map(|v| (v.type_name(), v.to_json()))
                .map_err(|e| ExpressionError::Eval(e.to_string()))
        })
    }

    /// Builds the activation a policy's expressions see and runs `f` with it.
    fn with_activation<'i, R>(
        &self,
        req: &Request,
        shared: &Shared<'i>,
        inv: &'i dyn Lookup,
        params: Option<&Json>,
        f: impl FnOnce(&Activation<'_, '_>, &InventoryHost<'_>) -> R,
    ) -> R {
        self.with_activation_reading(req, shared, inv, params, false, f)
    }

    /// [`CompiledPolicy::with_activation`]; `everything`: set `request`
    /// and `oldObject` even when no expression of the policy reads them.
    fn with_activation_reading<'i, R>(
        &self,
        req: &Request,
        shared: &Shared<'i>,
        inv: &'i dyn Lookup,
        params: Option<&Json>,
        everything: bool,
        f: impl FnOnce(&Activation<'_, '_>, &InventoryHost<'_>) -> R,
    ) -> R {
        let namespace_object = shared
            .namespace_object
            .get_or_init(|| namespace_object(req, inv));
        let host = InventoryHost {
            inventory: inv,
            indexes: &self.indexes,
            me: shared.me.get_or_init(|| SelfIdentity::of(req)).clone(),
            related: Default::default(),
        };
        let null = Json::Null;
        let s = self.slots;
        // The request's interrupt (see `crate::cel::interrupt`): the
        // server sets it when the request's deadline passes.
        let mut act = Activation::new_with_slots(8)
            .with_lazy(&self.variables)
            .with_cost_limit(POLICY_COST_BUDGET)
            .with_current_interrupt();
        act.set(s.object, Value::from_json(req.object.unwrap_or(&null)));
        if self.reads_old_object || everything {
            act.set(
                s.old_object,
                Value::from_json(req.old_object.get().unwrap_or(&null)),
            );
        }
        if self.reads_request || everything {
            act.set(
                s.request,
                shared.request.get_or_init(|| req.to_value()).clone(),
            );
        }
        if self.reads_authorizer || everything {
            let authority = shared.authority.get_or_init(|| req.authority());
            act.set(s.authorizer, k8s_authz::authorizer(authority.clone()));
            act.set(
                s.request_resource,
                k8s_authz::request_resource(
                    authority.clone(),
                    req.gvk.group(),
                    &req.resource,
                    &req.subresource,
                    &req.namespace,
                    &req.name,
                ),
            );
        }
        act.set(s.params, Value::from_json(params.unwrap_or(&null)));
        act.set(
            s.namespace_object,
            Value::from_json(namespace_object.as_deref().unwrap_or(&null)),
        );
        let act = if self.reads_inventory() {
            act.with_host(&host)
        } else {
            act
        };
        f(&act, &host)
    }

    /// A denial that does not go through the binding's validationActions:
    /// configuration errors and failing audit annotations.
    fn config_error(&self, b: &Binding, message: String) -> Verdict {
        Verdict {
            policy: self.name.clone(),
            binding: b.name.clone(),
            action: Action::Deny,
            message,
            reason: Some("Invalid".into()),
            related: vec![],
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn evaluate_with<'i, I>(
        &self,
        req: &Request,
        shared: &Shared<'i>,
        inv: &'i dyn Lookup,
        params: Option<&Json>,
        binding: &Binding,
        verdict: &dyn Fn(String, Option<String>, Vec<ObjectKey>) -> I,
        out: &mut Vec<Verdict>,
        annotations: &mut Vec<(String, Vec<String>)>,
    ) where
        I: Iterator<Item = Verdict>,
    {
        self.with_activation(req, shared, inv, params, |act, host| {
            self.decide(act, host, binding, verdict, out, annotations)
        })
    }

    fn decide<I>(
        &self,
        act: &Activation<'_, '_>,
        host: &InventoryHost<'_>,
        binding: &Binding,
        verdict: &dyn Fn(String, Option<String>, Vec<ObjectKey>) -> I,
        out: &mut Vec<Verdict>,
        annotations: &mut Vec<(String, Vec<String>)>,
    ) where
        I: Iterator<Item = Verdict>,
    {
        let fail = self.failure_policy == FailurePolicy::Fail;
        // Every matchCondition is evaluated: one that is false skips the
        // policy, even when another fails; only when none is false do the
        // errors count (kube-apiserver's matchconditions.Matcher). A result
        // that is neither false nor an error matches.
        let mut condition_errors: Vec<String> = Vec::new();
        for (_, cond) in &self.match_conditions {
            match cond.eval(act) {
                Ok(Value::Bool(false)) => return,
                Ok(_) => {}
                Err(e) => {
                    let message = self.expression_error(cond, &e);
                    if !condition_errors.contains(&message) {
                        condition_errors.push(message);
                    }
                }
            }
        }
        if !condition_errors.is_empty() {
            if fail {
                out.extend(verdict(
                    aggregate(&condition_errors),
                    Some("Invalid".into()),
                    vec![],
                ));
            }
            return;
        }
        for v in &self.validations {
            let failed_message = match v.expression.eval(act) {
                Ok(Value::Bool(true)) => continue,
                // Anything but true fails the validation (a non-bool result
                // is not an error in kube-apiserver).
                Ok(_) => self.message(v, act),
                Err(e) => {
                    if !fail {
                        continue;
                    }
                    self.expression_error(&v.expression, &e)
                }
            };
            let mut related = host.related.borrow().clone();
            related.sort();
            related.dedup();
            out.extend(verdict(
                failed_message,
                v.reason.clone().or(Some("Invalid".into())),
                related,
            ));
        }
        for (key, p) in &self.audit_annotations {
            let value = match p.eval(act) {
                Ok(Value::String(s)) => {
                    truncate(s.as_str().trim(), MAX_AUDIT_ANNOTATION_VALUE_LENGTH).to_string()
                }
                Ok(Value::Null) => continue,
                // A wrong type is an error whatever the failurePolicy.
                Ok(other) => {
                    out.push(self.config_error(
                        binding,
                        format!(
                            "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                            p.source(),
                            other.type_name()
                        ),
                    ));
                    continue;
                }
                Err(e) => {
                    if fail {
                        out.push(self.config_error(binding, self.expression_error(p, &e)));
                    }
                    continue;
                }
            };
            if value.is_empty() {
                continue;
            }
            match annotations.iter_mut().find(|(k, _)| k == key) {
                Some((_, values)) => {
                    if !values.contains(&value) {
                        values.push(value);
                    }
                }
                None => annotations.push((key.clone(), vec![value])),
            }
        }
    }

    /// The message of a failed validation: the messageExpression's string
    /// (trimmed; not when blank, multi-line or too long), else the message,
    /// else `failed expression: <expression>`.
    fn message(&self, v: &CompiledValidation, act: &Activation) -> String {
        if let Some(m) = &v.message_expression {
            if let Ok(Value::String(s)) = m.eval(act) {
                let s = s.as_str().trim();
                if !s.is_empty()
                    && s.len() <= MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE
                    && !s.contains('\n')
                {
                    return s.to_string();
                }
            }
        }
        match v.message.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => m.to_string(),
            _ => format!("failed expression: {}", v.expression.source().trim()),
        }
    }
}

/// Longest audit annotation value kube-apiserver publishes, in bytes.
const MAX_AUDIT_ANNOTATION_VALUE_LENGTH: usize = 10 * 1024;

/// Longest messageExpression result kube-apiserver uses, in bytes.
const MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE: usize = 5 * 1024;

/// kube-apiserver's message for an expression that fails to evaluate.
fn expression_error(p: &Program, e: &crate::cel::EvalError) -> String {
    format!("expression '{}' resulted in error: {e}", p.source())
}

impl CompiledPolicy {
    /// [`expression_error`], and for an InterlockPolicy what the failure
    /// means and how to fix the policy (a ValidatingAdmissionPolicy's
    /// message stays kube-apiserver's, word for word).
    fn expression_error(&self, p: &Program, e: &crate::cel::EvalError) -> String {
        let message = expression_error(p, e);
        match (self.kind, evaluation_hint(&e.to_string())) {
            (PolicyKind::Interlock, Some(hint)) => format!(
                "{message}. This is an error in policy {}, not in your object: {hint}",
                self.name
            ),
            _ => message,
        }
    }
}

/// What an evaluation error says about the policy, for its author.
fn evaluation_hint(error: &str) -> Option<String> {
    let tail = error.rsplit(": ").next().unwrap_or(error);
    if error.contains("no such key: ") {
        let field = tail.split_whitespace().next().unwrap_or(tail);
        return Some(format!(
            "the object has no field '{field}' where the expression reads it (the field is optional, or defaulted only by the apiserver); the policy should read it as `.?{field}.orValue(DEFAULT)` or test `has(....{field})` first"
        ));
    }
    if error.contains("no such overload") {
        return Some("a value has another type than the expression expects (a number or boolean where a string is expected: YAML reads `y`, `yes`, `on`, `true` and unquoted numbers as such); the policy should convert it with string(...) or check its type, and the manifest should quote such values".into());
    }
    None
}

/// Several errors as one message, like Kubernetes' `utilerrors.NewAggregate`.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The Namespace of a namespaced request, from the inventory; offline a
/// namespace not given as a file is assumed to exist with only its name label.
fn namespace_object<'i>(req: &Request, inv: &'i dyn Lookup) -> Option<std::borrow::Cow<'i, Json>> {
    if !req.is_namespaced() {
        return None;
    }
    let key = ObjectKeyRef {
        group: "",
        kind: "Namespace",
        namespace: "",
        name: &req.namespace,
    };
    Some(match inv.find(key) {
        Some(e) => e.object.json(),
        None => std::borrow::Cow::Owned(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": req.namespace, "labels": {"kubernetes.io/metadata.name": req.namespace}}
        })),
    })
}

/// A mutation that could not be computed under failurePolicy Fail.
#[derive(Debug, Clone, thiserror::Error)]
#[error("policy {policy}: {message}")]
pub struct MutationError {
    pub policy: String,
    pub message: String,
}

impl PolicySet {
    /// The JSON patch operations (RFC 6902, as JSON) that matching
    /// InterlockPolicies' mutations yield, in policy order.
    pub fn mutate(&self, req: &Request, inv: &dyn Lookup) -> Result<Vec<Json>, MutationError> {
        let mut ops = Vec::new();
        for p in self.policies.iter().filter(|p| !p.mutations.is_empty()) {
            if !matching::matches(&p.matcher, req, inv, false) {
                continue;
            }
            match p.mutation_ops(req, inv) {
                Ok(mut o) => ops.append(&mut o),
                Err(message) if p.failure_policy == FailurePolicy::Fail => {
                    return Err(MutationError {
                        policy: p.name.clone(),
                        message,
                    })
                }
                Err(message) => {
                    tracing::warn!(policy = %p.name, %message, "mutation ignored (failurePolicy Ignore)")
                }
            }
        }
        Ok(ops)
    }

    /// The policies that apply to a request: its matchConstraints match, and
    /// so do the matchResources of one of its bindings (matchConditions
    /// are not evaluated).
    pub fn applying_to<'s>(
        &'s self,
        req: &'s Request,
        inv: &'s Inventory,
    ) -> impl Iterator<Item = &'s CompiledPolicy> + 's {
        self.policies.iter().filter(move |p| {
            matching::matches(&p.matcher, req, inv, false)
                && p.bindings.iter().any(|b| {
                    b.matcher
                        .as_ref()
                        .is_none_or(|m| matching::matches(m, req, inv, true))
                })
        })
    }

    /// Could some policy match this request? Looks at resource rules only
    /// (not selectors, conditions or bindings), so `false` is certain.
    pub fn may_match(&self, req: &Request) -> bool {
        self.policies
            .iter()
            .any(|p| matching::rules_match(&p.matcher, req))
    }

    /// Could some policy match a CREATE of some object of this kind
    /// (`namespaced`: in a namespace)? Resource rules only, any name: the
    /// kinds an audit must list.
    pub fn may_match_kind(&self, api_version: &str, kind: &str, namespaced: bool) -> bool {
        self.may_match_kind_where(api_version, kind, namespaced, |_| true)
    }

    /// [`PolicySet::may_match_kind`] among the policies that look objects
    /// up in the inventory: whether a review of this kind may cost lookups
    /// (the server's cost estimate weighs its references only then).
    pub fn inventory_readers_may_match_kind(
        &self,
        api_version: &str,
        kind: &str,
        namespaced: bool,
    ) -> bool {
        self.may_match_kind_where(api_version, kind, namespaced, |p| {
            p.reads_inventory() && p.needs_inventory()
        })
    }

    fn may_match_kind_where(
        &self,
        api_version: &str,
        kind: &str,
        namespaced: bool,
        which: impl Fn(&CompiledPolicy) -> bool,
    ) -> bool {
        let probe = serde_json::json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": if namespaced {
                serde_json::json!({"name": "probe", "namespace": "probe"})
            } else {
                serde_json::json!({"name": "probe"})
            },
        });
        Request::create(&probe, "").is_some_and(|req| {
            self.policies
                .iter()
                .any(|p| which(p) && matching::may_match_resource(&p.matcher, &req))
        })
    }

    /// Of the policies an [`Outcome`] matched, those that read the
    /// inventory: they decide what happens while the inventory is not ready.
    /// The outcome must come from this set.
    pub fn inventory_readers<'s>(
        &'s self,
        outcome: &'s Outcome,
    ) -> impl Iterator<Item = &'s CompiledPolicy> + 's {
        self.matched(outcome)
            .filter(|p| p.reads_inventory() && p.needs_inventory())
    }

    /// The (group, kind) pairs that the evaluation behind `outcome` may have
    /// read from the inventory: those of every policy it matched, and
    /// Namespaces (namespace selectors, `namespaceObject`; a policy that did
    /// not match for its namespace's labels matches again only if they
    /// change). `None` when one of those policies computes a lookup's kind,
    /// which could then be any. The outcome must come from this set.
    pub fn kinds_read_by<'s>(&'s self, outcome: &'s Outcome) -> Option<Vec<&'s GroupKind>> {
        let mut kinds = vec![GroupKind::namespace()];
        for p in self.matched(outcome) {
            if p.computed_lookup {
                return None;
            }
            kinds.extend(&p.group_kinds_read);
        }
        Some(kinds)
    }

    fn matched<'s>(
        &'s self,
        outcome: &'s Outcome,
    ) -> impl Iterator<Item = &'s CompiledPolicy> + 's {
        outcome.matched.iter().filter_map(|&i| self.policies.get(i))
    }

    /// Does some policy read objects of this kind from the inventory (see
    /// [`PolicySet::kinds_read`])?
    pub fn reads_kind(&self, group: &str, kind: &str) -> bool {
        (group.is_empty() && kind == "Namespace")
            || self
                .policies
                .iter()
                .flat_map(|p| &p.group_kinds_read)
                .any(|gk| gk.is(group, kind))
    }

    /// Policies with a lookup whose apiVersion or kind is computed (see
    /// [`PolicySet::kinds_read`]).
    pub fn with_computed_lookups(&self) -> Vec<&str> {
        self.policies
            .iter()
            .filter(|p| p.computed_lookup)
            .map(|p| p.name.as_str())
            .collect()
    }

    /// Every (apiVersion, kind) the policies read from the inventory, when
    /// the calls name them with constants; Namespaces always.
    pub fn kinds_read(&self) -> Vec<GroupVersionKind> {
        let mut kinds = vec![GroupVersionKind::from_api_version("v1", "Namespace")];
        for p in self.policies.iter() {
            kinds.extend(p.kinds_read.iter().cloned());
        }
        kinds.sort();
        kinds.dedup();
        kinds
    }
}

impl CompiledPolicy {
    pub fn failure_policy(&self) -> FailurePolicy {
        self.failure_policy
    }

    /// The policy's matchConstraints (which requests it may apply to).
    pub fn match_constraints(&self) -> &MatchResources {
        &self.matcher
    }

    /// Whether some binding applies the policy at all: an unbound
    /// ValidatingAdmissionPolicy never evaluates.
    pub fn is_bound(&self) -> bool {
        !self.bindings.is_empty()
    }

    /// Whether a failed validation can refuse an admission request: some
    /// binding's admission actions include Deny. A policy that only warns or
    /// audits at admission loses nothing but the warning when the webhook
    /// is not called.
    pub fn may_deny_at_admission(&self) -> bool {
        self.bindings.iter().any(|b| {
            b.admission_actions
                .as_ref()
                .unwrap_or(&b.actions)
                .contains(&Action::Deny)
        })
    }

    fn mutation_ops(&self, req: &Request, inv: &dyn Lookup) -> Result<Vec<Json>, String> {
        self.with_activation(req, &Shared::default(), inv, None, |act, _| {
            for (name, cond) in &self.match_conditions {
                match cond.eval(act) {
                    Ok(Value::Bool(true)) => {}
                    Ok(Value::Bool(false)) => return Ok(vec![]),
                    Ok(other) => {
                        return Err(format!(
                            "matchCondition '{name}' must evaluate to bool, got {}",
                            other.type_name()
                        ))
                    }
                    Err(e) => return Err(format!("matchCondition '{name}': {e}")),
                }
            }
            let mut ops = Vec::new();
            for (i, m) in self.mutations.iter().enumerate() {
                match m.eval(act) {
                    Ok(Value::List(l)) => ops.extend(l.iter().map(|op| op.to_json())),
                    Ok(other) => {
                        return Err(format!(
                            "spec.mutations[{i}] must yield a list of JSONPatch, got {}",
                            other.type_name()
                        ))
                    }
                    Err(e) => return Err(format!("spec.mutations[{i}]: {e}")),
                }
            }
            Ok(ops)
        })
    }
}

#[cfg(test)]
mod tests;
