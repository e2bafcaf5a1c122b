//! The admission engine: AdmissionRequests in, decisions and JSON patches
//! out, over the shared policy engine and a live (or file) inventory.
//! It implements [`crate::server::Reviewer`].

pub mod boundary;
pub mod claims;
mod group;
pub mod serve;

use crate::cel::k8s_authz::Authorizer;
use crate::cluster::live::Live;
use crate::cluster::{Cluster, ClusterOptions, State};
use crate::inventory::view::Nothing;
use crate::inventory::{Inventory, Lookup};
use crate::k8s::kind::GroupVersionKind;
use crate::k8s::kinds::group_of;
use crate::policy::{
    Action, FailurePolicy, OldObject, Outcome, Part, Partial, PolicySet, Request,
    RequestAuthorizer, Verdict,
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
        } else if records || policies.may_need_inventory(&r) {
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
        boundary.warn(self.answer(resp, &r, outcome.verdicts, outcome.annotations))
    }

    /// The outcome of `r` on `view`. While the inventory is not synced,
    /// the policies that read it answer by their failurePolicy instead.
    fn decide_now(&self, view: View, r: &Request, detached: &Detached) -> Outcome {
        let mut outcome = evaluate(&view, r, detached);
        let readers = view.policies.inventory_readers(&outcome).next().is_some();
        if readers && !self.cluster.is_ready() {
            outcome.verdicts = Self::unready(view.policies, &outcome);
            outcome.annotations.clear();
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

    /// The verdicts of inventory-reading policies while the inventory is
    /// not synced: Deny where their failurePolicy is Fail.
    fn unready(policies: &PolicySet, outcome: &Outcome) -> Vec<Verdict> {
        policies
            .inventory_readers(outcome)
            .filter(|p| p.failure_policy() == FailurePolicy::Fail)
            .map(|p| Verdict {
                policy: p.name.clone(),
                binding: None,
                action: Action::Deny,
                message: "the cluster inventory is still loading; retry in a few seconds".into(),
                reason: Some("ServiceUnavailable".into()),
                related: vec![],
            })
            .collect()
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

/// Parses the operations and checks that they apply to the object.
fn build_patch(object: &Json, ops: Vec<Json>) -> Result<json_patch::Patch, String> {
    let patch: json_patch::Patch = serde_json::from_value(Json::Array(ops))
        .map_err(|e| format!("mutation is not a valid JSON patch: {e}"))?;
    let mut doc = object.clone();
    json_patch::patch(&mut doc, &patch)
        .map_err(|e| format!("mutation patch does not apply to the object: {e}"))?;
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
mod tests {
    use super::*;
    use crate::inventory::ObjectKey;
    use kube::core::admission::AdmissionReview;
    use serde_json::json;

    /// The shared unique-host policy, plus a mutation.
    fn policy() -> String {
        format!(
            "{}{}",
            crate::fixtures::UNIQUE_HOST,
            "  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: \"[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'checked': 'yes'}}]\"
"
        )
    }

    fn engine(ready: bool) -> Engine {
        engine_with(ready, EngineOptions::default())
    }

    fn engine_with(ready: bool, options: EngineOptions) -> Engine {
        engine_of(&policy(), ready, options)
    }

    fn engine_of(policies: &str, ready: bool, options: EngineOptions) -> Engine {
        let docs = crate::manifest::load_str(
            crate::manifest::Source::file("p.yaml"),
            policies,
            crate::manifest::Format::Yaml,
            &Default::default(),
        );
        assert!(docs.errors.is_empty(), "{:?}", docs.errors);
        let mut inv = Inventory::new();
        let (set, errors) = PolicySet::compile_documents(docs.documents, &mut inv);
        assert!(errors.is_empty(), "{errors:?}");
        inv.set_projection(set.projection(&inv));
        let e = Engine::new(set, inv, options);
        e.set_ready(ready);
        e
    }

    /// Through the server's parse (oldObject kept as text), a policy that
    /// reads oldObject sees it, and an objectSelector matches the old
    /// object's labels.
    #[test]
    fn old_object_is_read_when_a_policy_reads_it() {
        const POLICIES: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: immutable-mode}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["UPDATE"]}
  validations:
    - expression: "object.data.mode == oldObject.data.mode"
      message: mode is immutable
---
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: frozen-label}
spec:
  validationActions: [Deny]
  matchConstraints:
    objectSelector: {matchLabels: {frozen: "yes"}}
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["UPDATE"]}
  validations:
    - expression: "false"
      message: frozen
"#;
        let e = engine_of(POLICIES, true, EngineOptions::default());
        let answer = |old_labels: Json, old_mode: &str, mode: &str| {
            let cm = |labels: Json, mode: &str| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "c", "namespace": "n", "labels": labels},
                       "data": {"mode": mode}})
            };
            let body = json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": "u", "operation": "UPDATE", "name": "c", "namespace": "n",
                    "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                    "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                    "userInfo": {"username": "alice"},
                    "object": cm(json!({}), mode),
                    "oldObject": cm(old_labels, old_mode),
                }
            });
            let (status, out) =
                crate::server::answer_body(&e, false, &serde_json::to_vec(&body).unwrap());
            assert_eq!(status, 200);
            let out: Json = serde_json::from_slice(&out).unwrap();
            let message = out["response"]["status"]["message"]
                .as_str()
                .map(str::to_owned);
            (out["response"]["allowed"] == true, message)
        };
        assert_eq!(answer(json!({}), "a", "a"), (true, None));
        let (allowed, message) = answer(json!({}), "a", "b");
        assert!(!allowed && message.unwrap().contains("mode is immutable"));
        let (allowed, message) = answer(json!({"frozen": "yes"}), "a", "a");
        assert!(!allowed && message.unwrap().contains("frozen"));
    }

    #[test]
    fn an_expired_record_never_blocks_requests_that_would_not_record() {
        let e = engine_with(
            true,
            EngineOptions {
                pending_ttl: Duration::from_millis(300),
                ..EngineOptions::default()
            },
        );
        // Admitted, then (say) refused by another admission step: the watch
        // never shows it, and its record expires.
        assert!(e.validate(&review("a", "one", "x.example", false)).allowed);
        assert!(!e.validate(&review("b", "two", "x.example", true)).allowed);
        std::thread::sleep(Duration::from_millis(400));
        // A dry run records nothing, yet it must not see the expired record.
        assert!(e.validate(&review("b", "two", "x.example", true)).allowed);
        // Expired before the decision, not after it: a decision made again
        // under the write lock would stall every request for as long as
        // its lookups take.
        assert_eq!(e.metrics.reevaluations.get(), 0);
    }

    fn review(ns: &str, name: &str, host: &str, dry_run: bool) -> AdmissionRequest<DynamicObject> {
        let obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"namespace": ns, "name": name}, "spec": {"rules": [{"host": host}]}});
        let r: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
                "resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
                "name": name, "namespace": ns, "operation": "CREATE",
                "userInfo": {"username": "alice"}, "object": obj, "dryRun": dry_run}
        }))
        .unwrap();
        r.try_into().unwrap()
    }

    fn group_review(ns: &str, resources: serde_json::Value) -> AdmissionRequest<DynamicObject> {
        let obj = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"namespace": ns, "name": "shop"},
            "spec": {"serviceAccountName": "deployer", "resources": resources}});
        let r: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-2", "kind": {"group": "interlock.dev", "version": "v1alpha1", "kind": "ResourceGroup"},
                "resource": {"group": "interlock.dev", "version": "v1alpha1", "resource": "resourcegroups"},
                "name": "shop", "namespace": ns, "operation": "CREATE",
                "userInfo": {"username": "alice"}, "object": obj}
        }))
        .unwrap();
        r.try_into().unwrap()
    }

    /// A group is judged at admission by its members, against the
    /// inventory with them in place: a host another tenant holds is refused,
    /// without naming that tenant's object; two members of one group may
    /// not claim one host either.
    #[test]
    fn a_resource_group_is_refused_for_its_members_findings() {
        let e = engine(true);
        assert!(
            e.validate(&review("other", "theirs", "taken.example", false))
                .allowed
        );
        let ing = |name: &str, host: &str| {
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name}, "spec": {"rules": [{"host": host}]}})
        };
        let resp = e.validate(&group_review("t", json!([ing("web", "taken.example")])));
        assert!(!resp.allowed);
        let m = &resp.result.message;
        assert!(m.contains("member Ingress web: unique-host"), "{m}");
        assert!(
            m.contains("Ingress in another namespace") && !m.contains("theirs"),
            "{m}"
        );
        let resp = e.validate(&group_review(
            "t",
            json!([ing("a", "new.example"), ing("b", "new.example")]),
        ));
        assert!(!resp.allowed, "two members claim one host");
        assert!(
            e.validate(&group_review("t", json!([ing("a", "free.example")])))
                .allowed
        );
    }

    #[test]
    fn unready_inventory_answers_by_failure_policy() {
        let e = engine(false);
        let resp = e.validate(&review("a", "one", "x.example", false));
        assert!(!resp.allowed);
        assert!(
            resp.result.message.contains("still loading"),
            "{}",
            resp.result.message
        );
        assert_eq!(resp.result.code, 503);
    }

    #[test]
    fn an_admitted_write_is_seen_by_the_next_request_and_names_are_redacted() {
        let e = engine(true);
        // A dry run is evaluated but not recorded.
        assert!(e.validate(&review("a", "one", "x.example", true)).allowed);
        assert!(e.validate(&review("a", "one", "x.example", false)).allowed);
        let resp = e.validate(&review("b", "two", "x.example", false));
        assert!(!resp.allowed, "the pending write must block the duplicate");
        let m = &resp.result.message;
        assert!(
            m.starts_with(
                "interlock policy 'unique-host': host taken by Ingress in another namespace"
            ),
            "{m}"
        );
        assert!(!m.contains("a/one"), "{m}");
        assert_eq!(resp.result.code, 422);
        // In the same namespace the conflicting object is named.
        let resp = e.validate(&review("a", "three", "x.example", false));
        assert!(
            resp.result.message.contains("a/one"),
            "{}",
            resp.result.message
        );
    }

    #[test]
    fn fifty_parallel_creates_of_one_host_admit_exactly_one() {
        let e = std::sync::Arc::new(engine(true));
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let e = e.clone();
                std::thread::spawn(move || {
                    let req = review(&format!("ns-{i}"), "shop", "race.example", false);
                    // The server's path: the objects as parsed JSON.
                    let parsed = ParsedReview {
                        object: req
                            .object
                            .as_ref()
                            .map(|o| serde_json::to_value(o).unwrap()),
                        old_object: None,
                        request: AdmissionRequest {
                            object: None,
                            ..req
                        },
                    };
                    e.validate_parsed(parsed).allowed
                })
            })
            .collect();
        let admitted = handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .filter(|&a| a)
            .count();
        assert_eq!(admitted, 1, "admitted {admitted} of 50 creates of one host");
    }

    /// A decision made under the read lock is made again before its write
    /// is recorded only if a write since changed a kind its policies read,
    /// or the policies changed.
    #[test]
    fn an_evaluation_holds_unless_a_write_since_changed_a_kind_it_reads() {
        // One policy on Pods that looks up ConfigMaps, one on Services whose
        // lookup computes its kind.
        const LOOKUPS: &str = r#"
---
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: config-exists}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"]}
  validations:
    - expression: "inventory.get('v1', 'ConfigMap', object.metadata.namespace, object.spec.config).hasValue()"
---
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: any-kind}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: ["v1"], resources: ["services"], operations: ["CREATE"]}]}
  validations: [{expression: "!inventory.get('v1', object.spec.kind, 'n', 'x').hasValue()"}]
"#;
        let e = engine_of(
            &format!("{}{LOOKUPS}", policy()),
            true,
            EngineOptions::default(),
        );
        let object = |kind: &str, api: &str, name: &str| {
            json!({"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "n"},
                   "spec": {"rules": [{"host": "h.example"}], "config": "c", "kind": "Secret"}})
        };
        let ingress = object("Ingress", "networking.k8s.io/v1", "i");
        let pod = object("Pod", "v1", "p");
        let service = object("Service", "v1", "s");
        let holds = |seen: crate::cluster::Seen, o: &Json| {
            e.read(|st| {
                let outcome = st
                    .policies
                    .evaluate(&Request::create(o, "me").unwrap(), &st.inventory);
                st.still_holds(seen, &outcome)
            })
        };
        let add = |o: Json| {
            e.cluster
                .update_inventory(|inv, _| inv.upsert(&o, None).unwrap());
        };

        let seen = e.read(State::seen);
        assert!(holds(seen, &ingress) && holds(seen, &pod) && holds(seen, &service));
        add(object("ConfigMap", "v1", "c"));
        assert!(
            holds(seen, &ingress),
            "no policy on Ingresses reads ConfigMaps"
        );
        assert!(!holds(seen, &pod), "the Pod's policy reads ConfigMaps");
        assert!(!holds(seen, &service), "a computed kind may be any kind");

        let seen = e.read(State::seen);
        add(object("Ingress", "networking.k8s.io/v1", "other"));
        assert!(!holds(seen, &ingress), "the host index is on Ingresses");
        assert!(holds(seen, &pod));
        add(object("Namespace", "v1", "n"));
        assert!(
            !holds(seen, &pod),
            "selectors and namespaceObject read Namespaces"
        );

        let seen = e.read(State::seen);
        e.cluster.update_inventory(|inv, _| {
            inv.remove(&ObjectKey::of(&object("ConfigMap", "v1", "c")).unwrap())
        });
        assert!(!holds(seen, &pod), "a removal is a change");

        let seen = e.read(State::seen);
        e.update(|_| ());
        assert!(!holds(seen, &ingress), "the policies may have changed");
    }

    /// A write is recorded when its kind is one that policies look up,
    /// whether or not a policy that reads the inventory matched it; the
    /// inventory holds no other kinds, so a record of those would only wait
    /// to expire.
    /// A Pod must name an existing ConfigMap in `spec.config`.
    const CONFIG_EXISTS: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: config-exists}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"]}
  validations:
    - expression: "inventory.get('v1', 'ConfigMap', object.metadata.namespace, object.spec.config).hasValue()"
      message: no such ConfigMap
"#;

    /// A CREATE of a core `kind` in namespace `n`.
    fn core_create(kind: &str, resource: &str, object: Json) -> AdmissionRequest<DynamicObject> {
        let r: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": kind},
                "resource": {"group": "", "version": "v1", "resource": resource},
                "name": object["metadata"]["name"], "namespace": "n", "operation": "CREATE",
                "userInfo": {"username": "alice"}, "object": object}
        }))
        .unwrap();
        r.try_into().unwrap()
    }

    #[test]
    fn only_kinds_that_policies_look_up_are_recorded() {
        let e = engine_of(CONFIG_EXISTS, true, EngineOptions::default());
        let create = |kind: &str, resource: &str, object: Json| {
            e.validate(&core_create(kind, resource, object)).allowed
        };
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "p", "namespace": "n"}, "spec": {"config": "c"}});
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "c", "namespace": "n"}});
        let pending = || e.read(|st| (st.pending.len(), st.inventory.len()));
        assert!(!create("Pod", "pods", pod.clone()));
        // No policy matches ConfigMaps, but one looks them up.
        assert!(create("ConfigMap", "configmaps", config));
        assert_eq!(pending(), (1, 1));
        assert!(create("Pod", "pods", pod), "the pending ConfigMap is seen");
        assert_eq!(pending(), (1, 1), "no policy looks Pods up: not recorded");
    }

    /// A policy that never reads the inventory is evaluated without the
    /// state's lock: while a writer holds it (or waits for it behind a long
    /// reader), requests that only such policies match are still decided.
    /// A policy that reads the inventory waits for the writer.
    #[test]
    fn only_policies_that_read_the_inventory_wait_for_the_lock() {
        const SECRET_HAS_DATA: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: secret-has-data}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["secrets"], operations: ["CREATE"]}
  validations:
    - expression: "object.?data.orValue({}).size() > 0"
      message: an empty Secret
"#;
        let policies = format!("{CONFIG_EXISTS}---\n{SECRET_HAS_DATA}");
        let e = Arc::new(engine_of(&policies, true, EngineOptions::default()));
        let decide = |kind: &'static str, resource: &'static str, object: Json| {
            let e = Arc::clone(&e);
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(e.validate(&core_create(kind, resource, object)));
            });
            rx
        };
        let writer = e.cluster().write();
        let secret = decide(
            "Secret",
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"}}),
        );
        let answer = secret
            .recv_timeout(Duration::from_secs(60))
            .expect("decided while a writer holds the state");
        assert!(!answer.allowed);
        assert!(format!("{:?}", answer.result).contains("an empty Secret"));
        let pod = decide(
            "Pod",
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p", "namespace": "n"}, "spec": {"config": "c"}}),
        );
        assert!(
            pod.recv_timeout(Duration::from_millis(300)).is_err(),
            "an inventory lookup must wait for the writer"
        );
        drop(writer);
        let answer = pod.recv_timeout(Duration::from_secs(60)).expect("decided");
        assert!(!answer.allowed, "no ConfigMap c");
    }

    /// A decision whose deadline passed (its interrupt set) records no
    /// pending write: the apiserver got 503 and applies the webhook's
    /// failurePolicy, and a record would block others' writes until it
    /// expired. With failurePolicy Ignore the interrupted evaluation
    /// allows, which without the check would have recorded the host.
    #[test]
    fn an_interrupted_decision_records_no_pending_write() {
        let ignoring = policy().replace(
            "spec:\n  matchConstraints:",
            "spec:\n  failurePolicy: Ignore\n  matchConstraints:",
        );
        assert_ne!(ignoring, policy());
        let e = engine_of(&ignoring, true, EngineOptions::default());
        let interrupt = crate::cel::Interrupt::new();
        interrupt.cancel();
        let resp = crate::cel::interrupt::scope(&interrupt, || {
            e.validate(&review("a", "one", "x.example", false))
        });
        assert!(resp.allowed, "failurePolicy Ignore: {:?}", resp.result);
        assert_eq!(interrupt.stats().interrupted, 1);
        assert_eq!(e.read(|st| st.pending.len()), 0);
        assert!(
            e.validate(&review("b", "two", "x.example", false)).allowed,
            "the interrupted write must not hold the host"
        );
    }

    #[test]
    fn mutations_answer_a_json_patch() {
        let e = engine(true);
        let resp = e.mutate(&review("a", "one", "y.example", false));
        assert!(resp.allowed);
        let patch: Json = serde_json::from_slice(resp.patch.as_deref().expect("a patch")).unwrap();
        assert_eq!(
            patch,
            json!([{"op": "add", "path": "/metadata/annotations", "value": {"checked": "yes"}}])
        );
    }

    /// Asks nobody: records each question and allows only alice.
    #[derive(Debug, Default)]
    struct Recorder(std::sync::Mutex<Vec<crate::cel::k8s_authz::UserInfo>>);

    impl Authorizer for Recorder {
        fn authorize(
            &self,
            user: &crate::cel::k8s_authz::UserInfo,
            _: &crate::cel::k8s_authz::Attributes,
            _: Option<&crate::cel::interrupt::Interrupt>,
        ) -> Option<crate::cel::k8s_authz::Decision> {
            self.0.lock().unwrap().push(user.clone());
            Some(crate::cel::k8s_authz::Decision {
                allowed: user.username == "alice",
                ..Default::default()
            })
        }
    }

    /// The AdmissionReview's whole userInfo reaches the authorizer; without
    /// one (serving from files) the check is the offline error.
    #[test]
    fn checks_ask_the_authorizer_about_the_requests_user() {
        const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: readers}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["CREATE"]}
  validations:
    - expression: "authorizer.group('').resource('secrets').namespace('n').check('get').allowed()"
      message: may not read secrets
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: readers}
spec: {policyName: readers, validationActions: [Deny]}
"#;
        let recorder = Arc::new(Recorder::default());
        let with = engine_of(POLICY, true, EngineOptions::default())
            .with_authorizer(recorder.clone(), crate::cluster::authz::Metrics::default());
        let without = engine_of(POLICY, true, EngineOptions::default());
        let answer = |e: &Engine, user: &str| {
            let body = json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": "u", "operation": "CREATE", "name": "c", "namespace": "n",
                    "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                    "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                    "userInfo": {"username": user, "uid": "uid-1", "groups": ["devs"],
                                 "extra": {"scopes": ["a", "b"]}},
                    "object": {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "c", "namespace": "n"}},
                }
            });
            let (_, out) =
                crate::server::answer_body(e, false, &serde_json::to_vec(&body).unwrap());
            let out: Json = serde_json::from_slice(&out).unwrap();
            let message = out["response"]["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (out["response"]["allowed"] == true, message)
        };
        assert_eq!(answer(&with, "alice"), (true, String::new()));
        let (allowed, message) = answer(&with, "bob");
        assert!(
            !allowed && message.contains("may not read secrets"),
            "{message}"
        );
        let asked = recorder.0.lock().unwrap().clone();
        assert_eq!(
            asked[0],
            crate::cel::k8s_authz::UserInfo {
                username: "alice".into(),
                uid: "uid-1".into(),
                groups: vec!["devs".into()],
                extra: [("scopes".into(), vec!["a".into(), "b".into()])].into(),
            }
        );
        assert_eq!(asked.len(), 2);
        let (allowed, message) = answer(&without, "alice");
        assert!(
            !allowed && message.contains("authorizer unavailable"),
            "{message}"
        );

        // A ResourceGroup's members are asked about as the controller will
        // write them: by the group's ServiceAccount, not by who writes the
        // group.
        let group = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "g", "operation": "CREATE", "name": "g", "namespace": "n",
                "kind": {"group": "interlock.dev", "version": "v1alpha1", "kind": "ResourceGroup"},
                "resource": {"group": "interlock.dev", "version": "v1alpha1", "resource": "resourcegroups"},
                "userInfo": {"username": "alice", "groups": ["devs"]},
                "object": {"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
                           "metadata": {"name": "g", "namespace": "n"},
                           "spec": {"serviceAccountName": "deployer", "resources": [
                               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]}},
            }
        });
        let (_, out) =
            crate::server::answer_body(&with, false, &serde_json::to_vec(&group).unwrap());
        let out: Json = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["response"]["allowed"], false, "{out}");
        assert!(
            out["response"]["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("member ConfigMap c: readers: may not read secrets"),
            "{out}"
        );
        let asked = recorder.0.lock().unwrap().clone();
        assert_eq!(asked.len(), 3);
        assert_eq!(
            asked[2],
            crate::group::validate::Writer {
                namespace: "n",
                service_account: "deployer"
            }
            .user()
        );
    }
}
