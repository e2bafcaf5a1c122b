//! Compiling policy documents: bindings attach to their policies,
//! expressions are type-checked, indexes are declared in the set (the
//! caller declares them in an inventory: compiling touches none).

use super::*;

impl PolicySet {
    /// [`PolicySet::compile`] for documents as the manifest loader reads
    /// them (files, the bundled library).
    pub fn compile_documents(
        docs: Vec<crate::manifest::Document>,
    ) -> (PolicySet, Vec<PolicyError>) {
        PolicySet::compile_documents_with(docs, &[])
    }

    /// [`PolicySet::compile_documents`] with documents that are not read
    /// from files (the cluster's InterlockPolicy objects) after them.
    pub fn compile_documents_with(
        docs: Vec<crate::manifest::Document>,
        objects: &[(Json, Source)],
    ) -> (PolicySet, Vec<PolicyError>) {
        let pairs: Vec<(Json, Source)> = docs
            .iter()
            .map(|d| (d.value.clone(), Source::of(d)))
            .chain(objects.iter().cloned())
            .collect();
        let (set, mut errors) = PolicySet::compile(&pairs);
        for e in errors.iter_mut().filter(|e| e.expression.is_some()) {
            if let Some(d) = docs.iter().find(|d| Source::of(d) == e.location) {
                e.locate(d);
            }
        }
        (set, errors)
    }

    /// Compiles every policy document; bindings attach to their policies.
    /// The indexes the policies declare are the set's
    /// ([`PolicySet::index_decls`]): an inventory that serves it declares
    /// them ([`Inventory::set_indexes`]). Documents that fail are reported
    /// and left out; the rest load.
    pub fn compile(docs: &[(Json, Source)]) -> (PolicySet, Vec<PolicyError>) {
        let mut policies: Vec<CompiledPolicy> = Vec::new();
        let mut indexes = Vec::new();
        let mut exception_list = Vec::new();
        let mut errors = Vec::new();
        let mut bindings = Vec::new();
        let mut exception_sources = Vec::new();
        for (doc, source) in docs {
            let tenant_namespace = tenant::namespace_of(doc);
            let name = doc
                .pointer("/metadata/name")
                .and_then(Json::as_str)
                .unwrap_or("<unnamed>");
            let name = match tenant_namespace {
                Some(ns) => tenant::qualified(ns, name),
                None => name.to_string(),
            };
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
                Some(
                    k @ ("ValidatingAdmissionPolicyBinding" | "MutatingAdmissionPolicyBinding"),
                ) => {
                    let of = if k.starts_with("Mutating") {
                        PolicyKind::Map
                    } else {
                        PolicyKind::Vap
                    };
                    match mutating::check_api_version(of, doc)
                        .and_then(|()| spec::<BindingSpec>(doc))
                    {
                        Ok(b) => bindings.push((name.clone(), b, source.clone(), of)),
                        Err(e) => errors.push(err(e.0)),
                    }
                    continue;
                }
                Some("ValidatingAdmissionPolicy") => PolicyKind::Vap,
                Some("MutatingAdmissionPolicy") => PolicyKind::Map,
                Some("InterlockPolicy") => PolicyKind::Interlock,
                Some(tenant::KIND) if tenant_namespace.is_some() => PolicyKind::Interlock,
                Some(tenant::KIND) => {
                    errors.push(err(format!(
                        "metadata.namespace is required: an {} applies to its own namespace",
                        tenant::KIND
                    )));
                    continue;
                }
                other => {
                    errors.push(err(format!(
                        "not a policy document (kind {other:?}); expected ValidatingAdmissionPolicy, MutatingAdmissionPolicy, their bindings, InterlockPolicy or InterlockNamespacePolicy"
                    )));
                    continue;
                }
            };
            if let Err(e) = mutating::check_api_version(kind, doc) {
                errors.push(err(e.0));
                continue;
            }
            match spec::<PolicySpec>(doc)
                .map_err(Failure::from)
                .and_then(|s| compile_policy(&name, kind, s, tenant_namespace, &mut indexes))
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
        for (name, b, source, of) in bindings {
            let actions: Result<Vec<Action>, BindingError> = b
                .validation_actions
                .iter()
                .map(|a| Action::parse(a).ok_or_else(|| BindingError::UnknownAction(a.clone())))
                .collect();
            let actions = match actions {
                Ok(a) if a.is_empty() && of == PolicyKind::Vap => Err(BindingError::NoActions),
                Ok(a) if !a.is_empty() && of == PolicyKind::Map => {
                    Err(BindingError::ActionsOnMutating)
                }
                other => other,
            };
            let result = actions.and_then(|actions| {
                let policy = policies
                    .iter_mut()
                    .find(|p| p.kind == of && p.name == b.policy_name)
                    .ok_or_else(|| BindingError::NotLoaded(b.policy_name.clone()))?;
                if policy.param_kind.is_some() && b.param_ref.is_none() {
                    return Err(BindingError::NoParamRef);
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
            if let Err(e) = result {
                errors.push(PolicyError {
                    location: source,
                    column: None,
                    policy: name,
                    message: e.to_string(),
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
            indexes: indexes.into(),
            exceptions: exception_list.into(),
            cluster_exceptions: Arc::default(),
        };
        (set, errors)
    }
}

/// Why a binding does not attach to its policy.
#[derive(Debug, thiserror::Error)]
enum BindingError {
    #[error("spec.validationActions: unknown action {0:?}; use Deny, Warn or Audit")]
    UnknownAction(String),
    #[error("spec.validationActions must not be empty")]
    NoActions,
    #[error("spec.validationActions is a ValidatingAdmissionPolicyBinding field; a MutatingAdmissionPolicyBinding has none")]
    ActionsOnMutating,
    #[error("binds policy {0:?}, which was not loaded")]
    NotLoaded(String),
    #[error("the policy has a paramKind, so the binding needs a paramRef")]
    NoParamRef,
}

pub(super) fn compile_policy(
    name: &str,
    kind: PolicyKind,
    spec: PolicySpec,
    tenant_namespace: Option<&str>,
    declared: &mut Vec<DeclaredIndex>,
) -> Result<CompiledPolicy, Failure> {
    let (mut env, slots) = policy_env(kind, &spec);
    let failure_policy = failure_policy_of(kind, &spec)?;
    let matcher = spec.match_constraints.clone().ok_or(match kind {
        PolicyKind::Map => "spec.matchConstraints: Required value",
        _ => "spec.matchConstraints is required: say which resources the policy applies to",
    })?;
    let reinvocation = mutating::check_fields(kind, &spec)?;
    let expressions = Expressions::compile(&mut env, kind, &spec)?;
    if let Some(ns) = tenant_namespace {
        let beyond = tenant::reach(ns, &spec, Some(&expressions));
        if !beyond.is_empty() {
            return Err(beyond.join("; ").into());
        }
    }
    let indexes = declare_indexes(&spec, declared)?;
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
    let bindings = own_binding(kind, &spec, param_kind.is_some())?
        .into_iter()
        .collect();
    let mut kinds_read: Vec<GroupVersionKind> = spec
        .indexes
        .iter()
        .map(|i| GroupVersionKind::from_api_version(i.api_version.as_str(), i.kind.as_str()))
        .collect();
    kinds_read.extend(param_kind_version.clone());
    let reads = Reads::of(name, &slots, &expressions.programs(), &mut kinds_read);
    let Expressions {
        variables,
        match_conditions,
        validations,
        audit_annotations,
        mutations,
        patch_types,
    } = expressions;
    Ok(CompiledPolicy {
        group_kinds_read: kinds_read
            .iter()
            .map(GroupVersionKind::group_kind)
            .collect(),
        kinds_read,
        computed_lookup: reads.computed_lookup,
        reads_request: reads.request,
        reads_old_object: reads.old_object,
        reads_authorizer: reads.authorizer,
        expressions_read_inventory: reads.inventory,
        name: name.to_string(),
        kind,
        tenant: tenant_namespace.map(Arc::from),
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
        patch_types,
        reinvocation,
        indexes,
        claims,
        bindings,
        slots,
        env,
        warnings: reads.warnings,
    })
}

/// The CEL environment of a policy of `kind`, and where its variables sit.
pub(super) fn policy_env(kind: PolicyKind, spec: &PolicySpec) -> (Env, Slots) {
    let mut env = match kind {
        PolicyKind::Vap => Env::kubernetes(),
        PolicyKind::Map => Env::kubernetes_mutating(),
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
    if kind != PolicyKind::Interlock && spec.param_kind.is_none() {
        env.hide_variable("params");
    }
    // kube-apiserver declares `variables` for a MutatingAdmissionPolicy
    // even when it has none (a ValidatingAdmissionPolicy's is undeclared).
    if kind == PolicyKind::Map && spec.variables.is_empty() {
        let none = checker::StructTy::new("kubernetes.variables", vec![]);
        env.add_typed_variable("variables", Ty::Struct(Arc::new(none)));
    }
    host::declare(&mut env, kind == PolicyKind::Interlock);
    env.enable_lazy_variables();
    (env, slots)
}

fn failure_policy_of(kind: PolicyKind, spec: &PolicySpec) -> Result<FailurePolicy, Failure> {
    match spec.failure_policy.as_deref() {
        None | Some("Fail") => Ok(FailurePolicy::Fail),
        Some("Ignore") => Ok(FailurePolicy::Ignore),
        Some(other) if kind == PolicyKind::Map => Err(format!(
            "spec.failurePolicy: Unsupported value: {other:?}: supported values: \"Fail\", \"Ignore\""
        )
        .into()),
        Some(other) => Err(format!("spec.failurePolicy: {other:?} is not Fail or Ignore").into()),
    }
}

/// Compiles one expression. `field` is its JSON pointer below spec, as
/// `validations/0/expression`; messages spell it
/// `spec.validations[0].expression`. A ValidatingAdmissionPolicy's
/// expression must have one of the types in `want` (any when empty).
fn compile_as(
    env: &Env,
    vap: bool,
    field: String,
    src: &str,
    want: &[Ty],
) -> Result<Program, Failure> {
    let failure = |e: CompileError| Failure {
        message: format!("{}: {e}", field_name(&field)),
        expression: Some((format!("/spec/{field}"), e)),
    };
    // kube-apiserver compares the result type before it plans the program.
    let checked = env.check_expression(src).map_err(failure)?;
    match checked.static_type() {
        Some(t) if vap && !want.is_empty() && *t != Ty::Unknown && !want.contains(t) => {
            Err(format!("{}: {}", field_name(&field), must_evaluate_to(want, t)).into())
        }
        _ => checked.plan().map_err(failure),
    }
}

/// Every expression of a policy, compiled.
pub(super) struct Expressions {
    variables: Vec<Program>,
    match_conditions: Vec<(String, Program)>,
    validations: Vec<CompiledValidation>,
    audit_annotations: Vec<(String, Program)>,
    mutations: Vec<Program>,
    patch_types: Vec<PatchType>,
}

impl Expressions {
    /// Compiles them in the order kube-apiserver does; each variable is
    /// declared in `env` for the expressions after it.
    pub(super) fn compile(
        env: &mut Env,
        kind: PolicyKind,
        spec: &PolicySpec,
    ) -> Result<Expressions, Failure> {
        // kube-apiserver's typing rules hold for its own kinds.
        let vap = kind != PolicyKind::Interlock;
        let mut variables = Vec::new();
        for (i, v) in spec.variables.iter().enumerate() {
            let field = format!("variables/{i}/expression");
            let program = compile_as(env, vap, field, &v.expression, &[])?;
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
        let env = &*env;
        let boolean = |field: String, src: &str| compile_as(env, vap, field, src, &[Ty::Bool]);
        let match_conditions = spec
            .match_conditions
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let field = format!("matchConditions/{i}/expression");
                Ok((c.name.clone(), boolean(field, &c.expression)?))
            })
            .collect::<Result<_, Failure>>()?;
        // kube-apiserver declares no authorizer for messageExpressions.
        let mut message_env = env.clone();
        message_env.hide_variable("authorizer");
        message_env.hide_variable("authorizer.requestResource");
        let mut validations = Vec::new();
        for (i, v) in spec.validations.iter().enumerate() {
            let message_expression = v.message_expression.as_deref().map(|m| {
                let field = format!("validations/{i}/messageExpression");
                compile_as(&message_env, vap, field, m, &[Ty::String])
            });
            validations.push(CompiledValidation {
                expression: boolean(format!("validations/{i}/expression"), &v.expression)?,
                message: v.message.clone(),
                message_expression: message_expression.transpose()?,
                reason: v.reason.clone(),
            });
        }
        let audit_annotations = spec
            .audit_annotations
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let field = format!("auditAnnotations/{i}/valueExpression");
                let want = [Ty::String, Ty::Null];
                Ok((
                    a.key.clone(),
                    compile_as(env, vap, field, &a.value_expression, &want)?,
                ))
            })
            .collect::<Result<_, Failure>>()?;
        let mut mutations = Vec::new();
        let mut patch_types = Vec::new();
        for (i, m) in spec.mutations.iter().enumerate() {
            let (patch_type, field, expression) = mutating::mutation_expression(kind, i, m)?;
            let want = match kind {
                PolicyKind::Map => vec![mutating::result_type(patch_type)],
                _ => vec![],
            };
            mutations.push(compile_as(env, vap, field, expression, &want)?);
            patch_types.push(patch_type);
        }
        Ok(Expressions {
            variables,
            match_conditions,
            validations,
            audit_annotations,
            mutations,
            patch_types,
        })
    }

    /// Each expression with its field, as messages spell it.
    pub(super) fn fields(&self) -> Vec<(String, &Program)> {
        let mut out = named("variables", "expression", &self.variables);
        let conditions: Vec<&Program> = self.match_conditions.iter().map(|(_, p)| p).collect();
        out.extend(named("matchConditions", "expression", conditions));
        for (i, v) in self.validations.iter().enumerate() {
            out.push((format!("spec.validations[{i}].expression"), &v.expression));
            if let Some(m) = &v.message_expression {
                out.push((format!("spec.validations[{i}].messageExpression"), m));
            }
        }
        let annotations: Vec<&Program> = self.audit_annotations.iter().map(|(_, p)| p).collect();
        out.extend(named("auditAnnotations", "valueExpression", annotations));
        out.extend(named("mutations", "jsonPatch.expression", &self.mutations));
        out
    }

    fn programs(&self) -> Vec<&Program> {
        self.variables
            .iter()
            .chain(self.match_conditions.iter().map(|(_, p)| p))
            .chain(
                self.validations.iter().flat_map(|v| {
                    std::iter::once(&v.expression).chain(v.message_expression.as_ref())
                }),
            )
            .chain(self.audit_annotations.iter().map(|(_, a)| a))
            .chain(self.mutations.iter())
            .collect()
    }
}

/// Each program of a list field with its field name.
fn named<'p>(
    field: &str,
    leaf: &str,
    programs: impl IntoIterator<Item = &'p Program>,
) -> Vec<(String, &'p Program)> {
    programs
        .into_iter()
        .enumerate()
        .map(|(i, p)| (format!("spec.{field}[{i}].{leaf}"), p))
        .collect()
}

/// Declares the policy's indexes among the set's (an identical declaration
/// shares its id); their ids by name.
fn declare_indexes(
    spec: &PolicySpec,
    declared: &mut Vec<DeclaredIndex>,
) -> Result<HashMap<String, IndexId>, Failure> {
    let mut indexes = HashMap::new();
    for (i, ix) in spec.indexes.iter().enumerate() {
        let decl = IndexDecl {
            gk: GroupKind::new(resources::group_of(&ix.api_version), ix.kind.as_str()),
            keys: ix.keys.clone(),
        };
        let id = match declared.iter().position(|d| d.decl == decl) {
            Some(id) => id,
            None => {
                let d = DeclaredIndex::compile(decl)
                    .map_err(|e| format!("spec.indexes[{i}].keys ({}): {e}", ix.name))?;
                declared.push(d);
                declared.len() - 1
            }
        };
        indexes.insert(ix.name.clone(), id);
    }
    Ok(indexes)
}

/// An InterlockPolicy's own binding (its actions and paramRef); a
/// ValidatingAdmissionPolicy has none, and none of those fields.
fn own_binding(
    kind: PolicyKind,
    spec: &PolicySpec,
    has_param_kind: bool,
) -> Result<Option<Binding>, Failure> {
    let parse_actions = |field: &str, list: &[String]| -> Result<Vec<Action>, Failure> {
        list.iter()
            .map(|a| {
                Action::parse(a).ok_or_else(|| {
                    Failure::from(format!(
                        "spec.{field}: unknown action {a:?}; use Deny, Warn or Audit"
                    ))
                })
            })
            .collect()
    };
    let optional = |field: &str, list: &[String]| -> Result<Option<Vec<Action>>, Failure> {
        (!list.is_empty())
            .then(|| parse_actions(field, list))
            .transpose()
    };
    if kind == PolicyKind::Map {
        return Ok(None);
    }
    if kind == PolicyKind::Vap {
        if !spec.admission_actions.is_empty() {
            return Err("spec.admissionActions is an InterlockPolicy field; a ValidatingAdmissionPolicy's actions are its bindings' validationActions".into());
        }
        if !spec.check_actions.is_empty() {
            return Err("spec.checkActions is an InterlockPolicy field; a ValidatingAdmissionPolicy's actions are its bindings' validationActions".into());
        }
        return Ok(None);
    }
    let actions = if spec.validation_actions.is_empty() {
        vec![Action::Deny]
    } else {
        parse_actions("validationActions", &spec.validation_actions)?
    };
    let admission_actions = optional("admissionActions", &spec.admission_actions)?;
    let check_actions = optional("checkActions", &spec.check_actions)?;
    if has_param_kind && spec.param_ref.is_none() {
        return Err("spec.paramKind is set, so spec.paramRef is required".into());
    }
    Ok(Some(Binding {
        name: None,
        actions,
        admission_actions,
        check_actions,
        matcher: None,
        param_ref: spec.param_ref.clone(),
    }))
}

/// What a policy's expressions read, found once at compile time.
struct Reads {
    request: bool,
    old_object: bool,
    authorizer: bool,
    /// Lookups or `namespaceObject`.
    inventory: bool,
    /// A lookup whose kind is not a constant.
    computed_lookup: bool,
    warnings: Vec<String>,
}

impl Reads {
    /// Also adds the kinds the lookups name to `kinds_read`.
    fn of(
        name: &str,
        slots: &Slots,
        programs: &[&Program],
        kinds_read: &mut Vec<GroupVersionKind>,
    ) -> Reads {
        let uses = |slot: usize| programs.iter().any(|p| p.uses_global(slot));
        let inventory = programs.iter().any(|p| {
            p.uses_global(slots.namespace_object)
                || p.host_calls()
                    .iter()
                    .any(|(id, _)| *id != host::SELECTOR_MATCHES)
        });
        let mut computed_lookup = false;
        let mut warnings = Vec::new();
        for p in programs {
            for (id, args) in p.host_calls() {
                if !matches!(id, host::GET | host::LIST) {
                    continue;
                }
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
        if computed_lookup {
            warnings.push("an inventory lookup computes its apiVersion or kind: `serve` cannot know to watch that kind, so at admission the lookup finds only objects of kinds watched for other lookups; name the kind with a constant (one lookup per kind)".into());
        }
        warnings.dedup();
        Reads {
            request: uses(slots.request),
            old_object: uses(slots.old_object),
            authorizer: uses(slots.authorizer) || uses(slots.request_resource),
            inventory,
            computed_lookup,
            warnings,
        }
    }
}

/// `validations/0/expression` as `spec.validations[0].expression`.
pub(super) fn field_name(pointer: &str) -> String {
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
