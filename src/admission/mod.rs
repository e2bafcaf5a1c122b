//! The admission engine: AdmissionRequests in, decisions and JSON patches
//! out, over the shared policy engine and a live (or file) inventory.
//! It implements [`crate::server::Reviewer`].

pub mod boundary;
pub mod claims;
mod group;
mod namespace_policy;
pub mod serve;
pub mod webhook_rules;

use crate::cel::k8s_authz::Authorizer;
use crate::cluster::live::Live;
use crate::cluster::{Cluster, ClusterOptions, State};
use crate::inventory::view::Nothing;
use crate::inventory::{Inventory, Lookup};
use crate::k8s::kind::GroupVersionKind;
use crate::k8s::kinds::group_of;
use crate::policy::{
    Action, OldObject, Outcome, Part, Partial, PolicySet, Request, RequestAuthorizer, Verdict,
};
use crate::server::{ParsedReview, Reviewer};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::DynamicObject;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::value::RawValue;
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Name objects of other namespaces only by kind in messages, so one
    /// tenant never learns another tenant's object names.
    pub redact_other_namespaces: bool,
    /// How long an admitted write the watch has not shown yet stays in the
    /// inventory (so concurrent requests see it).
    pub pending_ttl: Duration,
    /// Who may write ResourceGroup members (src/admission/boundary.rs).
    pub boundary: boundary::Boundary,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            redact_other_namespaces: true,
            pending_ttl: Duration::from_secs(30),
            boundary: boundary::Boundary::default(),
        }
    }
}

#[derive(Clone, Default)]
struct Metrics {
    decisions: Family<Vec<(String, String)>, Counter>,
    eval_errors: Counter,
    pending: Gauge,
    /// Decisions made again under the write lock because a write since
    /// the first evaluation touched a kind it read: contention on one kind.
    reevaluations: Counter,
}

/// Admission over the shared cluster state.
pub struct Engine {
    cluster: Arc<Cluster>,
    options: EngineOptions,
    metrics: Metrics,
    /// Claims of unique keys on the API server (serve against a cluster).
    claims: Option<Arc<claims::Claims>>,
    /// A task beside admission whose metrics /metrics serves too.
    companion: Option<Arc<dyn crate::cluster::Companion>>,
    /// Answers `authorizer...check()` (serve against a cluster).
    authorizer: Option<(Arc<dyn Authorizer>, crate::cluster::authz::Metrics)>,
}

impl Engine {
    /// An engine over its own cluster state (tests, `--inventory` files).
    pub fn new(policies: PolicySet, inventory: Inventory, options: EngineOptions) -> Engine {
        let cluster = Cluster::new(policies, inventory, ClusterOptions::default());
        Engine::over(Arc::new(cluster), options)
    }

    /// An engine over cluster state shared with other front-ends.
    pub fn over(cluster: Arc<Cluster>, options: EngineOptions) -> Engine {
        Engine {
            cluster,
            options,
            metrics: Metrics::default(),
            claims: None,
            companion: None,
            authorizer: None,
        }
    }

    /// Answers the policies' `authorizer...check()` with `authorizer`,
    /// whose checks `metrics` counts.
    pub fn with_authorizer(
        mut self,
        authorizer: Arc<dyn Authorizer>,
        metrics: crate::cluster::authz::Metrics,
    ) -> Engine {
        self.authorizer = Some((authorizer, metrics));
        self
    }

    /// Arbitrates the keys of policies with `claims` through `claims`.
    pub fn with_claims(mut self, claims: Arc<claims::Claims>) -> Engine {
        self.claims = Some(claims);
        self
    }

    /// Serves `companion`'s metrics with the engine's.
    pub fn with_companion(mut self, companion: Arc<dyn crate::cluster::Companion>) -> Engine {
        self.companion = Some(companion);
        self
    }

    fn authorizer(&self) -> Option<&Arc<dyn Authorizer>> {
        self.authorizer.as_ref().map(|(a, _)| a)
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    pub fn set_ready(&self, ready: bool) {
        self.cluster.set_ready(ready);
    }

    /// Runs `f` with write access to the state (policy reloads).
    pub fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.cluster.update(f)
    }

    /// Runs `f` with read access to the state.
    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        self.cluster.read(f)
    }

    fn decide(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        with_json_objects(req, |o, old| self.decide_json(req, o, old))
    }

    /// The decision on `req` whose objects are `object` and `old_object`
    /// (`req.object` and `req.old_object` are not read).
    fn decide_json(
        &self,
        req: &AdmissionRequest<DynamicObject>,
        object: Option<Json>,
        old_object: Option<Old>,
    ) -> AdmissionResponse {
        let resp = AdmissionResponse::from(req);
        let boundary = boundary::check(
            &self.options.boundary,
            req,
            object.as_ref(),
            old_object.as_ref(),
        );
        if let Some(refused) = boundary.denial(&resp) {
            return refused;
        }
        let r = request(req, object.as_ref(), old_object.as_ref(), self.authorizer());
        let writes = !req.dry_run && matches!(req.operation, Operation::Create | Operation::Update);
        // Policies that never read the inventory are evaluated on the
        // published snapshot, without the lock: however long they run, no
        // writer waits for them. The rest read the inventory one lookup at a
        // time ([`Live`]), so no writer waits long for them either, and so
        // no reader waits behind a writer.
        let published = self.cluster.published();
        let policies = &published.policies;
        // Only kinds that policies look up are worth a record: the
        // inventory holds no others (a Pod, or the Scale of a
        // deployments/scale request, would only wait there to expire).
        let records = writes && object.as_ref().is_some_and(|o| read_kind(policies, o));
        let detached = Detached {
            partial: policies.evaluate_part(&r, &Nothing, Part::Detached),
            generation: published.generation,
        };
        let (first, seen) = if group::is_group_write(&r) {
            // A group's verdicts read the state as a whole.
            self.cluster.expire_pending();
            self.read(|st| {
                let out = self.decide_now(View::locked(st, &r), &r, &detached);
                (out, Some(st.seen()))
            })
        } else if records || detached.partial.may_need_inventory() {
            // The readiness flag is read after the start: a reload that
            // needs a re-list clears it in the same update that installs
            // the policies.
            let (published, seen) = self.cluster.start_reading();
            let live = Live::new(&self.cluster);
            let view = View {
                policies: &published.policies,
                generation: published.generation,
                inventory: &live,
                group: None,
            };
            (self.decide_now(view, &r, &detached), Some(seen))
        } else {
            (policies.conclude(&r, detached.partial.clone()), None)
        };
        if writes && !first.denied() {
            if let Some(refused) = self.claim(&r, object.as_ref()) {
                return boundary.warn(self.answer(resp, &r, refused, vec![]));
            }
        }
        let outcome = if records && !first.denied() {
            // An admitted write of a kind that policies look up is recorded
            // under the write lock, in the same section as the decision on
            // the state it records into: the one above if the policies are
            // the same and no write since its first lookup touched a kind
            // they read, else a new one. So two requests never both pass a
            // uniqueness rule.
            let mut st = self.cluster.write();
            let st = &mut *st;
            st.pending.expire(&mut st.inventory);
            let out = if seen.is_some_and(|seen| st.still_holds(seen, &first)) {
                first
            } else {
                self.metrics.reevaluations.inc();
                self.decide_now(View::locked(st, &r), &r, &detached)
            };
            // A decision whose deadline passed is answered 503 and the
            // apiserver applies the webhook's failurePolicy: recording the
            // write would only make it block others until it expires.
            if !out.denied() && !crate::cel::interrupt::cancelled() {
                if let Some(o) = &object {
                    st.pending
                        .record(&mut st.inventory, o, self.options.pending_ttl);
                }
            }
            self.metrics.pending.set(st.pending.len() as i64);
            out
        } else {
            first
        };
        let mut verdicts = outcome.verdicts;
        verdicts.extend(namespace_policy::verdicts(&r));
        boundary.warn(self.answer(resp, &r, verdicts, outcome.annotations))
    }

    /// The outcome of `r` on `view`. While the inventory is not synced,
    /// the policies that read it answer by their failurePolicy instead.
    fn decide_now(&self, view: View, r: &Request, detached: &Detached) -> Outcome {
        let mut outcome = evaluate(&view, r, detached);
        if !self.cluster.is_ready() {
            if let Some(verdicts) = outcome.unready() {
                outcome.verdicts = verdicts;
                outcome.annotations.clear();
            }
        }
        outcome
    }

    /// Claims the unique keys an admitted write holds (see [`claims`]);
    /// the verdicts that refuse it when a key is another holder's, or when
    /// a claim cannot be made under a fail-closed policy. Runs outside the
    /// lock: it waits on the API server.
    fn claim(&self, r: &Request, object: Option<&Json>) -> Option<Vec<Verdict>> {
        let claims = self.claims.as_ref()?;
        let object = object?;
        let wanted = self.read(|st| st.policies.claims_of(r, &st.inventory, object));
        if wanted.is_empty() {
            return None;
        }
        let subject = format!("{} {}/{}", r.gvk.kind(), r.namespace, r.name);
        let (error, refused) = claims.claim(&self.cluster, &wanted, &subject).err()?;
        let message = match &error {
            claims::ClaimError::Taken { key, holder, .. } => {
                let holder = if self.options.redact_other_namespaces
                    && holder.split('/').next() != Some(r.namespace.as_str())
                {
                    "another namespace".to_string()
                } else {
                    holder.clone()
                };
                format!("{key} is being claimed by {holder} through another webhook replica; retry if that write does not persist")
            }
            claims::ClaimError::Api { .. } if !refused.fail_closed => return None,
            claims::ClaimError::Api { .. } => error.to_string(),
        };
        Some(vec![Verdict {
            policy: refused.policy.clone(),
            binding: None,
            action: Action::Deny,
            message,
            reason: Some("Conflict".into()),
            related: vec![],
        }])
    }

    fn answer(
        &self,
        mut resp: AdmissionResponse,
        r: &Request,
        verdicts: Vec<Verdict>,
        annotations: Vec<(String, String)>,
    ) -> AdmissionResponse {
        resp.audit_annotations.extend(annotations);
        let mut warnings = Vec::new();
        let mut denials = Vec::new();
        for v in &verdicts {
            let message = self.describe(v, &r.namespace);
            let decision = match v.action {
                Action::Deny => "deny",
                Action::Warn => "warn",
                Action::Audit => "audit",
            };
            self.metrics
                .decisions
                .get_or_create(&vec![
                    ("policy".into(), v.policy.clone()),
                    ("decision".into(), decision.into()),
                ])
                .inc();
            match v.action {
                Action::Deny => denials.push((v, message)),
                Action::Warn => warnings.push(message),
                Action::Audit => {
                    resp.audit_annotations
                        .insert(format!("interlock.dev/{}", v.policy), message);
                }
            }
        }
        if !warnings.is_empty() {
            resp.warnings = Some(warnings);
        }
        if let Some((first, _)) = denials.first() {
            let text: Vec<String> = denials.iter().map(|(_, m)| m.clone()).collect();
            let (code, reason) = status_of(first.reason.as_deref());
            resp = resp.deny(text.join("; "));
            resp.result.code = code;
            resp.result.reason = reason.into();
        }
        resp
    }

    /// `policy 'p' denied the request: message (related: ...)`, naming
    /// related objects elsewhere only by kind when redaction is on.
    fn describe(&self, v: &Verdict, namespace: &str) -> String {
        let message = if self.options.redact_other_namespaces {
            crate::policy::redact(&v.message, &v.related, namespace)
        } else {
            v.message.clone()
        };
        let mut related = Vec::new();
        for k in &v.related {
            let visible = !self.options.redact_other_namespaces
                || &*k.namespace == namespace
                || k.namespace.is_empty();
            if visible {
                related.push(k.to_string());
            } else {
                related.push(format!("{} in another namespace", k.gk.kind));
            }
        }
        related.dedup();
        let subject = match &v.binding {
            Some(b) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{b}'",
                v.policy
            ),
            None => format!("interlock policy '{}'", v.policy),
        };
        let mut out = format!("{subject}: {message}");
        if !related.is_empty() {
            out.push_str(&format!(" (conflicts with {})", related.join(", ")));
        }
        out
    }

    fn patch(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        with_json_objects(req, |o, old| self.patch_json(req, o, old))
    }

    fn patch_json(
        &self,
        req: &AdmissionRequest<DynamicObject>,
        object: Option<Json>,
        old: Option<Old>,
    ) -> AdmissionResponse {
        let resp = AdmissionResponse::from(req);
        let Some(obj) = object.as_ref() else {
            return resp;
        };
        let r = request(req, Some(obj), old.as_ref(), self.authorizer());
        // As in validation: mutations read the inventory one lookup at a
        // time, and only when they may need it.
        let published = self.cluster.published();
        let mutated = if published.policies.may_need_inventory(&r) {
            published.policies.mutate(&r, &Live::new(&self.cluster))
        } else {
            published.policies.mutate(&r, &Nothing)
        };
        let ops = match mutated {
            Ok(ops) if ops.is_empty() => return resp,
            Ok(ops) => ops,
            Err(e) => return resp.deny(e.to_string()),
        };
        match build_patch(obj, ops) {
            Ok(patch) => match resp.clone().with_patch(patch) {
                Ok(r) => r,
                Err(e) => resp.deny(format!("interlock could not encode the patch: {e}")),
            },
            Err(e) => {
                self.metrics.eval_errors.inc();
                resp.deny(e)
            }
        }
    }
}

/// Every matching policy's verdicts, and for a ResourceGroup those of its
/// members too.
/// The verdicts of the policies that never read the inventory, made on the
/// policies of `generation` outside the lock.
struct Detached {
    partial: Partial,
    generation: u64,
}

/// What a decision reads: policies of one generation and an inventory,
/// and the whole state when the request writes a ResourceGroup.
struct View<'a> {
    policies: &'a PolicySet,
    generation: u64,
    inventory: &'a dyn Lookup,
    group: Option<&'a State>,
}

impl<'a> View<'a> {
    /// The state as this thread holds it under the lock.
    fn locked(st: &'a State, r: &Request) -> Self {
        View {
            policies: &st.policies,
            generation: st.generation(),
            inventory: &st.inventory,
            group: group::is_group_write(r).then_some(st),
        }
    }
}

/// The outcome of `r` on `view`: `detached` completed by the policies that
/// read the inventory, or everything again if the policies changed since.
fn evaluate(view: &View, r: &Request, detached: &Detached) -> Outcome {
    let policies = view.policies;
    let mut outcome = if view.generation == detached.generation {
        let attached = policies.evaluate_part(r, view.inventory, Part::Attached);
        policies.conclude(r, detached.partial.clone().merge(attached))
    } else {
        policies.evaluate(r, view.inventory)
    };
    if let Some(st) = view.group {
        outcome.verdicts.extend(group::verdicts(st, r));
    }
    outcome
}

/// Why the mutations' operations make no patch for the object.
#[derive(Debug, thiserror::Error)]
enum PatchError {
    #[error("mutation is not a valid JSON patch: {0}")]
    Invalid(serde_json::Error),
    #[error("mutation patch does not apply to the object: {0}")]
    DoesNotApply(json_patch::PatchError),
}

/// Parses the operations and checks that they apply to the object.
fn build_patch(object: &Json, ops: Vec<Json>) -> Result<json_patch::Patch, PatchError> {
    let patch: json_patch::Patch =
        serde_json::from_value(Json::Array(ops)).map_err(PatchError::Invalid)?;
    let mut doc = object.clone();
    json_patch::patch(&mut doc, &patch).map_err(PatchError::DoesNotApply)?;
    Ok(patch)
}

/// Is `object` of a kind that some policy looks up in the inventory?
fn read_kind(policies: &PolicySet, object: &Json) -> bool {
    let field = |name| object.get(name).and_then(Json::as_str);
    match (field("apiVersion"), field("kind")) {
        (Some(api_version), Some(kind)) => policies.reads_kind(group_of(api_version), kind),
        _ => false,
    }
}

/// HTTP code and reason for a validation's `reason`, as kube-apiserver
/// answers for ValidatingAdmissionPolicy.
fn status_of(reason: Option<&str>) -> (u16, &'static str) {
    match reason {
        Some("Forbidden") => (403, "Forbidden"),
        Some("Unauthorized") => (401, "Unauthorized"),
        Some("RequestEntityTooLarge") => (413, "RequestEntityTooLarge"),
        Some("ServiceUnavailable") => (503, "ServiceUnavailable"),
        Some("Conflict") => (409, "Conflict"),
        _ => (422, "Invalid"),
    }
}

fn to_json(o: Option<&DynamicObject>) -> Result<Option<Json>, serde_json::Error> {
    o.map(serde_json::to_value).transpose()
}

fn operation(op: &Operation) -> crate::policy::Operation {
    use crate::policy::Operation as Op;
    match op {
        Operation::Create => Op::Create,
        Operation::Update => Op::Update,
        Operation::Delete => Op::Delete,
        Operation::Connect => Op::Connect,
    }
}

/// Calls `f` with kube's parsed objects as JSON (the `validate`/`mutate`
/// path); an object that does not serialise is denied.
fn with_json_objects(
    req: &AdmissionRequest<DynamicObject>,
    f: impl FnOnce(Option<Json>, Option<Old>) -> AdmissionResponse,
) -> AdmissionResponse {
    match (
        to_json(req.object.as_ref()),
        to_json(req.old_object.as_ref()),
    ) {
        (Ok(o), Ok(old)) => f(o, old.map(Old::Json)),
        (Err(e), _) | (_, Err(e)) => {
            AdmissionResponse::from(req).deny(format!("interlock could not read the object: {e}"))
        }
    }
}

/// `oldObject` as the engine gets it: from kube's parser, or as the
/// server's text of it, parsed only if a policy reads it.
enum Old {
    Json(Json),
    Text(Box<RawValue>),
}

fn request<'a>(
    req: &'a AdmissionRequest<DynamicObject>,
    object: Option<&'a Json>,
    old: Option<&'a Old>,
    authorizer: Option<&'a Arc<dyn Authorizer>>,
) -> Request<'a> {
    Request {
        operation: operation(&req.operation),
        object,
        old_object: match old {
            None => OldObject::None,
            Some(Old::Json(j)) => OldObject::Json(j),
            Some(Old::Text(t)) => OldObject::Text(t.get(), Default::default()),
        },
        gvk: GroupVersionKind::new(&req.kind.group, &req.kind.version, req.kind.kind.as_str()),
        resource: req.resource.resource.clone(),
        subresource: req.sub_resource.clone().unwrap_or_default(),
        namespace: req.namespace.clone().unwrap_or_default(),
        name: req.name.clone(),
        username: req.user_info.username.clone().unwrap_or_default(),
        groups: req.user_info.groups.clone().unwrap_or_default(),
        dry_run: req.dry_run,
        uid: req.uid.clone(),
        live: true,
        authorizer: authorizer.map(|authorizer| RequestAuthorizer {
            authorizer,
            uid: req.user_info.uid.as_deref().unwrap_or_default(),
            extra: req.user_info.extra.as_ref(),
        }),
    }
}

impl Reviewer for Engine {
    fn validate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        self.decide(req)
    }

    fn mutate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        self.patch(req)
    }

    fn validate_parsed(&self, review: ParsedReview) -> AdmissionResponse {
        self.decide_json(
            &review.request,
            review.object,
            review.old_object.map(Old::Text),
        )
    }

    fn mutate_parsed(&self, review: ParsedReview) -> AdmissionResponse {
        self.patch_json(
            &review.request,
            review.object,
            review.old_object.map(Old::Text),
        )
    }

    fn ready(&self) -> bool {
        self.cluster.is_ready()
    }

    fn reads_inventory(&self, api_version: &str, kind: &str, namespaced: bool) -> bool {
        self.cluster
            .published()
            .policies
            .inventory_readers_may_match_kind(api_version, kind, namespaced)
    }

    fn register_metrics(&self, registry: &mut Registry) {
        self.cluster.reloads.register(registry);
        if let Some((_, metrics)) = &self.authorizer {
            metrics.register(registry);
        }
        if let Some(c) = &self.claims {
            c.register_metrics(registry);
        }
        registry.register(
            "policy_decisions",
            "Admission decisions by policy and decision",
            self.metrics.decisions.clone(),
        );
        registry.register(
            "evaluation_errors",
            "Mutations that failed to apply",
            self.metrics.eval_errors.clone(),
        );
        registry.register(
            "pending_writes",
            "Admitted writes not yet seen by the watch",
            self.metrics.pending.clone(),
        );
        registry.register(
            "reevaluations",
            "Admission decisions evaluated again before recording the write, because a write since changed a kind their policies read",
            self.metrics.reevaluations.clone(),
        );
        if let Some(c) = &self.companion {
            c.register_metrics(registry);
        }
    }
}

#[cfg(test)]
mod tests;
