//! MutatingAdmissionPolicies: their fields, and the mutations they make as
//! kube-apiserver's mutating admission makes them (the policies in order,
//! each mutation patched over what the ones before made, the object
//! defaulted after each, and a second pass of the `IfNeeded` policies when
//! something changed).

use super::mutation_error::MutationFault;
use super::*;
use crate::k8s::openapi::{self, Schemas};

/// The apiVersions kube-apiserver serves each admissionregistration kind at.
pub(super) fn check_api_version(kind: PolicyKind, doc: &Json) -> Result<(), SpecError> {
    let served: &[&str] = match kind {
        PolicyKind::Map => &["v1", "v1beta1", "v1alpha1"],
        _ => return Ok(()),
    };
    let api_version = doc.get("apiVersion").and_then(Json::as_str).unwrap_or("");
    match api_version.split_once('/') {
        Some((VAP_GROUP, v)) if served.contains(&v) => Ok(()),
        _ => Err(SpecError(format!(
            "apiVersion {api_version:?}: a MutatingAdmissionPolicy or its binding is {VAP_GROUP}/v1 (or v1beta1, v1alpha1)"
        ))),
    }
}

/// Fields that belong to other kinds, and the reinvocationPolicy.
pub(super) fn check_fields(kind: PolicyKind, spec: &PolicySpec) -> Result<Reinvocation, Failure> {
    if kind != PolicyKind::Map {
        if spec.reinvocation_policy.is_some() && kind == PolicyKind::Vap {
            return Err("spec.reinvocationPolicy is a MutatingAdmissionPolicy field".into());
        }
        return Ok(Reinvocation::Never);
    }
    let foreign = [
        ("validations", !spec.validations.is_empty()),
        ("auditAnnotations", !spec.audit_annotations.is_empty()),
        ("validationActions", !spec.validation_actions.is_empty()),
        ("admissionActions", !spec.admission_actions.is_empty()),
        ("checkActions", !spec.check_actions.is_empty()),
        ("paramRef", spec.param_ref.is_some()),
        ("indexes", !spec.indexes.is_empty()),
        ("claims", !spec.claims.is_empty()),
    ];
    if let Some((field, _)) = foreign.iter().find(|(_, set)| *set) {
        return Err(format!("spec.{field}: not a MutatingAdmissionPolicy field").into());
    }
    if spec.mutations.is_empty() {
        return Err(
            "spec.mutations: Required value: mutations must contain at least one item".into(),
        );
    }
    match spec.reinvocation_policy.as_deref() {
        None => Err("spec.reinvocationPolicy: Required value".into()),
        Some("Never") => Ok(Reinvocation::Never),
        Some("IfNeeded") => Ok(Reinvocation::IfNeeded),
        Some(other) => Err(format!(
            "spec.reinvocationPolicy: Unsupported value: {other:?}: supported values: \"IfNeeded\", \"Never\""
        )
        .into()),
    }
}

/// A mutation's patch type, the field of its expression, and the
/// expression.
pub(super) fn mutation_expression(
    kind: PolicyKind,
    i: usize,
    m: &model::Mutation,
) -> Result<(PatchType, String, &str), Failure> {
    let field = |f: &str| format!("mutations/{i}/{f}/expression");
    let map = kind == PolicyKind::Map;
    let at = format!("spec.mutations[{i}]");
    match (m.patch_type.as_str(), &m.json_patch, &m.apply_configuration) {
        ("JSONPatch", Some(p), None) => Ok((PatchType::JsonPatch, field("jsonPatch"), &p.expression)),
        ("ApplyConfiguration", None, Some(p)) if map => {
            Ok((PatchType::ApplyConfiguration, field("applyConfiguration"), &p.expression))
        }
        ("JSONPatch", None, _) => Err(format!("{at}.jsonPatch: Required value: must be specified when patchType is JSONPatch").into()),
        ("JSONPatch", _, Some(_)) => Err(format!("{at}.applyConfiguration: Invalid value: \"{{applyConfiguration}}\": must not be specified when patchType is JSONPatch").into()),
        ("ApplyConfiguration", _, None) if map => Err(format!("{at}.applyConfiguration: Required value: must be specified when patchType is ApplyConfiguration").into()),
        ("ApplyConfiguration", Some(_), _) if map => Err(format!("{at}.jsonPatch: Invalid value: \"{{jsonPatch}}\": must not be specified when patchType is ApplyConfiguration").into()),
        ("", _, _) if map => Err(format!("{at}.patchType: Required value").into()),
        (t, _, _) if map => Err(format!("{at}.patchType: Unsupported value: {t:?}: supported values: \"ApplyConfiguration\", \"JSONPatch\"").into()),
        (t, _, _) => Err(format!("{at}: patchType {t:?} is not supported; use JSONPatch with jsonPatch.expression").into()),
    }
}

/// The type a mutation's expression must have (kube-apiserver checks it
/// at creation).
pub(super) fn result_type(patch_type: PatchType) -> Ty {
    match patch_type {
        PatchType::JsonPatch => Ty::list(Ty::Named("JSONPatch".into())),
        PatchType::ApplyConfiguration => Ty::Named("Object".into()),
    }
}

/// A MutatingAdmissionPolicy that could not mutate under failurePolicy
/// Fail: the request is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct MutationFailure {
    pub policy: String,
    pub binding: Option<String>,
    pub message: String,
}

impl std::fmt::Display for MutationFailure {
    /// kube-apiserver's message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.binding {
            Some(b) => write!(
                f,
                "policy '{}' with binding '{b}' denied request: {}",
                self.policy, self.message
            ),
            None => write!(
                f,
                "policy {:?} denied request: {}",
                self.policy, self.message
            ),
        }
    }
}

/// What the MutatingAdmissionPolicies did to one object.
#[derive(Debug, Clone, Default)]
pub struct Admitted {
    /// The object as they left it, when they changed it.
    pub object: Option<Json>,
    /// The policies that changed it, in order (once each).
    pub mutated_by: Vec<String>,
    /// Failures under failurePolicy Fail; the first refuses the request.
    pub failures: Vec<MutationFailure>,
}

/// One policy, binding and param to run.
struct Invocation<'p> {
    policy: &'p CompiledPolicy,
    binding: &'p Binding,
    params: Option<Json>,
}

impl PolicySet {
    /// Whether some MutatingAdmissionPolicy is loaded (else `admit` has
    /// nothing to do, and `check` does not call it).
    pub fn has_mutating_policies(&self) -> bool {
        self.policies.iter().any(|p| p.kind == PolicyKind::Map)
    }

    /// Runs the MutatingAdmissionPolicies over `req`'s object: in name
    /// order (kube-apiserver takes them in its informer's order, which no
    /// one can rely on), each mutation over the last one's output, the
    /// object defaulted after each; then, when some mutation changed the
    /// object, the `IfNeeded` policies once more.
    pub fn admit(&self, req: &Request, inv: &dyn Lookup) -> Admitted {
        self.admit_with(req, inv, openapi::builtin())
    }

    /// [`PolicySet::admit`] with `schemas` (the built-in ones and CRDs')
    /// for ApplyConfiguration's merge.
    pub fn admit_with(&self, req: &Request, inv: &dyn Lookup, schemas: &Schemas) -> Admitted {
        let out = Admitted::default();
        let Some(original) = req.object else {
            return out;
        };
        let mut maps: Vec<&CompiledPolicy> = self
            .policies
            .iter()
            .filter(|p| p.kind == PolicyKind::Map && !p.mutations.is_empty())
            .collect();
        if maps.is_empty() {
            return out;
        }
        maps.sort_by(|a, b| a.name.cmp(&b.name));
        let mut chain = Chain {
            req,
            inv,
            schemas,
            object: original.clone(),
            out,
            dirty: false,
        };
        let mut reinvoke: Vec<&CompiledPolicy> = Vec::new();
        for p in &maps {
            if chain.run_policy(p) && p.reinvocation == Reinvocation::IfNeeded {
                reinvoke.push(p);
            }
        }
        if chain.dirty {
            for p in reinvoke {
                chain.run_policy(p);
            }
        }
        let mut out = chain.out;
        if chain.object != *original {
            out.object = Some(chain.object);
        }
        out
    }
}

/// One request's way through the MutatingAdmissionPolicies.
struct Chain<'r, 'a> {
    req: &'r Request<'a>,
    inv: &'r dyn Lookup,
    schemas: &'r Schemas,
    /// The object as the mutations so far left it.
    object: Json,
    out: Admitted,
    /// Whether some mutation was applied (kube-apiserver then reinvokes).
    dirty: bool,
}

impl Chain<'_, '_> {
    /// The request, sending the object as it is now.
    fn current(&self) -> Request<'_> {
        Request {
            object: Some(&self.object),
            ..self.req.clone()
        }
    }

    /// Runs one policy's invocations; whether one ran (matched).
    fn run_policy(&mut self, p: &CompiledPolicy) -> bool {
        let current = self.current();
        if !matching::matches(&p.matcher, &current, self.inv, false) {
            return false;
        }
        let (invocations, failures) = p.invocations(&current, self.inv);
        self.out.failures.extend(failures);
        let mut ran = false;
        for invocation in invocations {
            ran |= invocation.run(self);
        }
        ran
    }
}

impl CompiledPolicy {
    /// The bindings that match, with their params; the configuration
    /// errors that count under the policy's failurePolicy.
    fn invocations<'p>(
        &'p self,
        req: &Request,
        inv: &dyn Lookup,
    ) -> (Vec<Invocation<'p>>, Vec<MutationFailure>) {
        let mut invocations = Vec::new();
        let mut failures = Vec::new();
        for b in &self.bindings {
            if b.matcher
                .as_ref()
                .is_some_and(|m| !matching::matches(m, req, inv, true))
            {
                continue;
            }
            match self.params(b, req, inv) {
                Params::None => invocations.push(Invocation {
                    policy: self,
                    binding: b,
                    params: None,
                }),
                Params::Found(list) => invocations.extend(list.into_iter().map(|p| Invocation {
                    policy: self,
                    binding: b,
                    params: Some(p.into_owned()),
                })),
                Params::Missing { deny: true } if self.failure_policy == FailurePolicy::Fail => {
                    failures.push(self.failure(b, MutationFault::NoParams))
                }
                Params::Missing { .. } => {}
            }
        }
        (invocations, failures)
    }

    fn failure(&self, b: &Binding, fault: MutationFault) -> MutationFailure {
        MutationFailure {
            policy: self.name.clone(),
            binding: b.name.clone(),
            message: fault.to_string(),
        }
    }
}

impl Invocation<'_> {
    /// Runs the mutations if the matchConditions hold on the object;
    /// whether they did.
    fn run(&self, chain: &mut Chain) -> bool {
        let p = self.policy;
        let fail = p.failure_policy == FailurePolicy::Fail;
        let before = chain.object.clone();
        match self.conditions_hold(&chain.current(), chain.inv) {
            Ok(true) => {}
            Ok(false) => return false,
            Err(message) => {
                if fail {
                    chain.out.failures.push(p.failure(self.binding, message));
                }
                return false;
            }
        }
        for (i, program) in p.mutations.iter().enumerate() {
            let current = chain.current();
            let params = self.params.as_ref();
            let patched =
                p.with_activation(&current, &Shared::default(), chain.inv, params, |act, _| {
                    let value = program
                        .eval(act)
                        .map_err(|e| MutationFault::Expression(expression_error(program, &e)))?;
                    patch(
                        p.patch_types[i],
                        chain.schemas,
                        current.object.unwrap_or(&Json::Null),
                        &value,
                    )
                });
            match patched {
                Ok(mut new) => {
                    // kube-apiserver decodes the patched object into its
                    // type (nulls dropped) and defaults it.
                    drop_nulls(&mut new);
                    crate::k8s::defaults::apply(&mut new);
                    chain.object = new;
                    chain.dirty = true;
                }
                Err(message) if fail => chain.out.failures.push(p.failure(self.binding, message)),
                Err(message) => {
                    tracing::debug!(policy = %p.name, %message, "mutation ignored (failurePolicy Ignore)")
                }
            }
        }
        if chain.object != before && !chain.out.mutated_by.contains(&p.name) {
            chain.out.mutated_by.push(p.name.clone());
        }
        true
    }

    /// Every matchCondition on `current`'s object: false if one is
    /// false, else an error if one failed.
    fn conditions_hold(&self, current: &Request, inv: &dyn Lookup) -> Result<bool, MutationFault> {
        let p = self.policy;
        if p.match_conditions.is_empty() {
            return Ok(true);
        }
        p.with_activation(
            current,
            &Shared::default(),
            inv,
            self.params.as_ref(),
            |act, _| {
                let mut errors: Vec<String> = Vec::new();
                for (_, cond) in &p.match_conditions {
                    match cond.eval(act) {
                        Ok(Value::Bool(false)) => return Ok(false),
                        Ok(_) => {}
                        Err(e) => {
                            let message = expression_error(cond, &e);
                            if !errors.contains(&message) {
                                errors.push(message);
                            }
                        }
                    }
                }
                if errors.is_empty() {
                    Ok(true)
                } else {
                    Err(MutationFault::Expression(aggregate(&errors)))
                }
            },
        )
    }
}

/// `object` patched by a mutation's value.
fn patch(
    patch_type: PatchType,
    schemas: &Schemas,
    object: &Json,
    value: &Value,
) -> Result<Json, MutationFault> {
    match patch_type {
        PatchType::JsonPatch => {
            let Value::List(ops) = value else {
                return Err(MutationFault::NotJsonPatch(value.type_name()));
            };
            let ops: Vec<Json> = ops.iter().map(|op| op.to_json()).collect();
            Ok(super::json_patch::apply(object, &ops)?)
        }
        PatchType::ApplyConfiguration => {
            let Value::Map(_) = value else {
                return Err(MutationFault::NotApplyConfiguration(value.type_name()));
            };
            let gvk = object_gvk(object);
            let root = schemas.root(gvk.group(), gvk.version(), gvk.kind());
            Ok(crate::k8s::apply::apply(
                schemas,
                root,
                object,
                &value.to_json(),
            )?)
        }
    }
}

fn object_gvk(object: &Json) -> GroupVersionKind {
    let field = |f: &str| object.get(f).and_then(Json::as_str).unwrap_or("");
    GroupVersionKind::from_api_version(field("apiVersion"), field("kind"))
}

/// Drops object entries whose value is null, as decoding into a
/// Kubernetes type does.
fn drop_nulls(v: &mut Json) {
    match v {
        Json::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Json::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[cfg(test)]
#[path = "mutating_tests.rs"]
mod tests;
