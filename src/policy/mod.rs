//! Policies: documents, compilation, matching and decisions. The same
//! [`PolicySet::evaluate`] serves `check`, `serve` and audit; only the
//! [`Inventory`] differs.

pub mod claims;
mod compile;
mod errors;
mod evaluate;
pub mod exceptions;
pub mod files;
pub mod finding;
pub mod host;
mod indexes;
mod json_patch;
pub mod load;
mod matching;
pub mod model;
mod mutate;
mod mutating;
mod mutation_error;
pub mod objects;
pub mod overrides;
mod projection;
mod queries;
mod request;
pub mod tenant;
/// The kinds table lives in [`crate::k8s::kinds`]; this name stays for callers.
pub use crate::k8s::kinds as resources;
pub mod selector;
pub mod typecheck;

pub use errors::{ExpressionError, PolicyError, SpecError};
pub use finding::Action;
pub use mutate::MutationError;
pub use mutating::{Admitted, MutationFailure};
pub use request::{OldObject, Operation, Request, RequestAuthorizer, RequestShape, OFFLINE_USER};

use errors::*;
use evaluate::*;
use indexes::DeclaredIndex;

use crate::cel::value::{Key, Str};
use crate::cel::{checker, k8s_authz, Activation, CompileError, Env, Program, Ty, Value};
use crate::inventory::{IndexDecl, IndexId, Inventory, Lookup, ObjectKey, ObjectKeyRef, Source};
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
    /// admissionregistration.k8s.io MutatingAdmissionPolicy (v1, v1beta1).
    Map,
}

/// How a MutatingAdmissionPolicy's mutation patches the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 operations from `JSONPatch{...}` values.
    JsonPatch,
    /// An `Object{...}` merged as server-side apply merges.
    ApplyConfiguration,
}

/// Whether a MutatingAdmissionPolicy runs again when a later mutation
/// changed the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reinvocation {
    #[default]
    Never,
    IfNeeded,
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
    /// The namespace an InterlockNamespacePolicy is confined to.
    pub tenant: Option<Arc<str>>,
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
    /// Per mutation, its patch type (InterlockPolicy: always JSONPatch).
    patch_types: Vec<PatchType>,
    reinvocation: Reinvocation,
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

/// What [`PolicySet::evaluate`] found for one request, and what the
/// evaluation read: the policies it matched, kept with the set they belong
/// to, answer what it read ([`Outcome::kinds_read`]) and what it would be
/// while the inventory is unready ([`Outcome::unready`]) without asking the
/// set again.
#[derive(Debug, Default)]
pub struct Outcome {
    pub verdicts: Vec<Verdict>,
    pub annotations: AuditAnnotations,
    matched: Matched,
}

/// The policies whose matchConstraints matched, as indexes into the set
/// that evaluated (shared, so an outcome costs no copy of it).
#[derive(Default)]
struct Matched {
    set: Arc<[CompiledPolicy]>,
    indexes: Vec<usize>,
}

impl std::fmt::Debug for Matched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.indexes
                    .iter()
                    .filter_map(|&i| self.set.get(i))
                    .map(|p| &p.name),
            )
            .finish()
    }
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
    /// A [`Part::Detached`] pass: whether a policy it left out may match
    /// (resource rules only), so that an attached pass is needed.
    attached_may_match: bool,
    verdicts: Vec<(usize, Verdict)>,
    annotations: Vec<(usize, (String, String))>,
}

impl Partial {
    /// Whether a policy that reads the inventory may match the request (its
    /// resource rules do; selectors are not looked at): known after a
    /// [`Part::Detached`] pass, which looked at every policy's rules.
    pub fn may_need_inventory(&self) -> bool {
        self.attached_may_match
    }

    /// Both passes' findings in policy order, as one pass over all the
    /// policies would have made them.
    pub fn merge(mut self, other: Partial) -> Partial {
        self.attached_may_match |= other.attached_may_match;
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
    /// The indexes the policies declared (see [`PolicySet::index_decls`]).
    indexes: Arc<[DeclaredIndex]>,
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
            Some(
                "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
                    | "MutatingAdmissionPolicy"
                    | "MutatingAdmissionPolicyBinding"
            )
        ) | (
            Some(INTERLOCK_GROUP),
            Some(
                "InterlockPolicy" | tenant::KIND | exceptions::FILE_KIND | exceptions::CLUSTER_KIND
            )
        )
    )
}

impl PolicySet {
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
}

#[cfg(test)]
mod tests;
