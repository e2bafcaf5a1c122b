//! Evaluating compiled policies against one request.

use super::*;

impl PolicySet {
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
            if !part.selects(p) {
                if part == Part::Detached && !partial.attached_may_match {
                    partial.attached_may_match = matching::rules_match(&p.matcher, req);
                }
                continue;
            }
            // A MutatingAdmissionPolicy has nothing to decide (`admit` runs it).
            if p.kind == PolicyKind::Map || !p.matches(req, inventory) {
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
            matched: Matched {
                set: self.policies.clone(),
                indexes: partial.matched,
            },
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
}

/// What every policy's evaluation of one request sees alike, computed when
/// the first policy that matches needs it.
#[derive(Default)]
pub(super) struct Shared<'i> {
    /// The `request` variable.
    request: OnceCell<Value<'static>>,
    /// The `namespaceObject` variable (parsed from the inventory).
    namespace_object: OnceCell<Option<std::borrow::Cow<'i, Json>>>,
    /// The reviewed object, which lookups never return.
    me: OnceCell<SelfIdentity>,
    /// What `authorizer` asks for the request's user.
    authority: OnceCell<Option<Arc<k8s_authz::Authority>>>,
}

pub(super) enum Params<'a> {
    /// No paramKind: evaluate once with `params` null.
    None,
    Found(Vec<std::borrow::Cow<'a, Json>>),
    /// paramKind set but nothing found, with the binding's instruction.
    Missing {
        deny: bool,
    },
}

impl CompiledPolicy {
    /// Whether the policy's matchConstraints match `req`; a tenant's
    /// policy matches only objects of its own namespace.
    pub(super) fn matches(&self, req: &Request, inv: &dyn Lookup) -> bool {
        let in_reach = self
            .tenant
            .as_deref()
            .is_none_or(|ns| !req.is_namespace_request() && req.namespace == ns);
        in_reach && matching::matches(&self.matcher, req, inv, false)
    }

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
    pub(super) fn evaluate<'i>(
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

    pub(super) fn params<'i>(&self, b: &Binding, req: &Request, inv: &'i dyn Lookup) -> Params<'i> {
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
    pub(super) fn with_activation<'i, R>(
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
    pub(super) fn with_activation_reading<'i, R>(
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
            confined: self.tenant.as_deref(),
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
    pub(super) fn config_error(&self, b: &Binding, message: String) -> Verdict {
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
    pub(super) fn evaluate_with<'i, I>(
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

    pub(super) fn decide<I>(
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
    pub(super) fn message(&self, v: &CompiledValidation, act: &Activation) -> String {
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
pub(super) const MAX_AUDIT_ANNOTATION_VALUE_LENGTH: usize = 10 * 1024;

/// Longest messageExpression result kube-apiserver uses, in bytes.
pub(super) const MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE: usize = 5 * 1024;

/// kube-apiserver's message for an expression that fails to evaluate.
pub(super) fn expression_error(p: &Program, e: &crate::cel::EvalError) -> String {
    format!("expression '{}' resulted in error: {e}", p.source())
}

impl CompiledPolicy {
    /// [`expression_error`], and for an InterlockPolicy what the failure
    /// means and how to fix the policy (a ValidatingAdmissionPolicy's
    /// message stays kube-apiserver's, word for word).
    pub(super) fn expression_error(&self, p: &Program, e: &crate::cel::EvalError) -> String {
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
pub(super) fn evaluation_hint(error: &str) -> Option<String> {
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
pub(super) fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character.
pub(super) fn truncate(s: &str, max: usize) -> &str {
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
pub(super) fn namespace_object<'i>(
    req: &Request,
    inv: &'i dyn Lookup,
) -> Option<std::borrow::Cow<'i, Json>> {
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
