//! The type-check warnings kube-apiserver writes into a
//! ValidatingAdmissionPolicy's `status.typeChecking.expressionWarnings`
//! (`admission/plugin/policy/validating/typechecking.go`, run by
//! kube-controller-manager's status controller): each validation's
//! expression and messageExpression checked again with `object` and
//! `oldObject` typed from the schema of every kind the policy's resource
//! rules name (at most 10 a rule), `params` from its paramKind's schema.
//! Warnings only: the policy loads and evaluates as before.

use super::{CompiledPolicy, PolicyKind};
use crate::cel::{CompileError, Env, Ty};
use crate::k8s::openapi::{Gvk, Schemas};

/// kube's `maxTypesToCheck`: a rule stops adding kinds at the tenth.
const MAX_TYPES_TO_CHECK: usize = 10;

/// cel-go's `maxErrorsToReport`.
const MAX_ERRORS: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpressionWarning {
    /// `spec.validations[0].expression`.
    pub field_ref: String,
    /// kube's text: one `GROUP/VERSION, Kind=KIND: ERROR: <input>:L:C: ...`
    /// block per kind whose schema the expression does not fit.
    pub warning: String,
}

impl CompiledPolicy {
    /// The warnings kube-apiserver's type checker gives this policy, with
    /// `schemas` as what its REST mapper and schema resolver know. Object
    /// types are named after their kind (`Deployment.spec`); kube adds a
    /// number that changes with every check (`Deployment123456789.spec`).
    pub fn type_check_warnings(&self, schemas: &Schemas) -> Vec<ExpressionWarning> {
        if self.kind != PolicyKind::Vap {
            return Vec::new();
        }
        self.schema_warnings(schemas)
    }

    /// The same check for a policy of either kind: what an InterlockPolicy
    /// object's status reports as a VAP's does.
    pub fn schema_warnings(&self, schemas: &Schemas) -> Vec<ExpressionWarning> {
        let params = self.params_type(schemas);
        let envs: Vec<(Gvk, Env)> = types_to_check(&self.matcher, schemas)
            .into_iter()
            .filter_map(|gvk| {
                let object = schemas.resource_type(&gvk, &gvk.kind)?;
                let env = self.typed_env(object, params.clone());
                Some((gvk, env))
            })
            .collect();
        let mut out = Vec::new();
        for (i, v) in self.validations.iter().enumerate() {
            let sources = std::iter::once(("expression", &v.expression)).chain(
                v.message_expression
                    .iter()
                    .map(|m| ("messageExpression", m)),
            );
            for (field, program) in sources {
                let warning = check_expression(&envs, program.source());
                if !warning.is_empty() {
                    out.push(ExpressionWarning {
                        field_ref: format!("spec.validations[{i}].{field}"),
                        warning,
                    });
                }
            }
        }
        out
    }

    /// `params` typed from the paramKind's schema; `dyn` when it has none.
    fn params_type(&self, schemas: &Schemas) -> Ty {
        let Some(param_kind) = &self.param_kind_version else {
            return Ty::Dyn;
        };
        let (api_version, kind) = (param_kind.api_version(), param_kind.kind());
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.to_string(),
        };
        schemas.resource_type(&gvk, kind).unwrap_or(Ty::Dyn)
    }

    /// The policy's environment with the schema's types; its variables
    /// retyped in order, as kube compiles them again in that environment.
    fn typed_env(&self, object: Ty, params: Ty) -> Env {
        let mut env = self.env.clone();
        env.add_typed_variable("object", object.clone());
        env.add_typed_variable("oldObject", object);
        env.add_typed_variable("params", params);
        for (i, v) in self.variables.iter().enumerate() {
            let ty = env
                .check_expression(v.source())
                .ok()
                .and_then(|c| c.static_type().cloned())
                .map_or(Ty::Dyn, |t| variable_type(&t));
            env.retype_lazy_variable(i, ty);
        }
        env
    }
}

/// The type `variables.NAME` gets from its expression's type
/// (`convertCelTypeToDeclType`): object and library types are `dyn`,
/// lists and maps keep their (converted) parameters; the result of a host
/// function stays unknown.
pub fn variable_type(t: &Ty) -> Ty {
    match t {
        Ty::Int
        | Ty::Uint
        | Ty::Double
        | Ty::Bool
        | Ty::String
        | Ty::Bytes
        | Ty::Null
        | Ty::Duration
        | Ty::Timestamp
        | Ty::Unknown => t.clone(),
        Ty::List(e) => Ty::list(variable_type(e)),
        Ty::Map(k, v) => Ty::map(variable_type(k), variable_type(v)),
        _ => Ty::Dyn,
    }
}

/// kube's `TypeCheckingResults.String()`: a `GVK: issues\n` block per
/// kind the expression does not check against, joined by newlines.
fn check_expression(envs: &[(Gvk, Env)], src: &str) -> String {
    let blocks: Vec<String> = envs
        .iter()
        .filter_map(|(gvk, env)| {
            let issues = env.type_issues(src);
            (!issues.is_empty()).then(|| format!("{gvk}: {}\n", display(&issues)))
        })
        .collect();
    blocks.join("\n")
}

/// cel-go's `Errors.ToDisplayString`.
fn display(issues: &[CompileError]) -> String {
    let mut lines: Vec<String> = issues
        .iter()
        .take(MAX_ERRORS)
        .map(|e| e.to_string())
        .collect();
    if issues.len() > MAX_ERRORS {
        lines.push(format!(
            "{} more errors were truncated",
            issues.len() - MAX_ERRORS
        ));
    }
    lines.join("\n")
}

/// kube's `typesToCheck`: the kinds of the resource rules' groups,
/// versions and resources (a wildcard group or version skips the rule; a
/// wildcard resource or a subresource is left out), sorted by group,
/// version, kind.
fn types_to_check(m: &super::model::MatchResources, schemas: &Schemas) -> Vec<Gvk> {
    let mut gvks: Vec<Gvk> = Vec::new();
    for rule in &m.resource_rules {
        let wildcard = |list: &[String]| list.iter().any(|s| s.contains('*'));
        if wildcard(&rule.api_groups) || wildcard(&rule.api_versions) {
            continue;
        }
        let groups = sorted(rule.api_groups.iter());
        let versions = sorted(rule.api_versions.iter());
        let resources = sorted(rule.resources.iter().filter(|r| !r.contains(['*', '/'])));
        let mut count = 0;
        for g in &groups {
            for v in &versions {
                for r in &resources {
                    for gvk in schemas.kinds_for(g, v, r) {
                        if !gvks.contains(&gvk) {
                            gvks.push(gvk);
                        }
                        count += 1;
                        if count == MAX_TYPES_TO_CHECK {
                            gvks.sort();
                            return gvks;
                        }
                    }
                }
            }
        }
    }
    gvks.sort();
    gvks
}

fn sorted<'a>(list: impl Iterator<Item = &'a String>) -> Vec<&'a String> {
    let mut v: Vec<&String> = list.collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests;
