//! InterlockPolicy mutations: the JSON patch a request gets.

use super::mutating::{Admitted, MutationFailure};
use super::mutation_error::MutationFault;
use super::*;
use crate::k8s::openapi::Schemas;

/// A mutation that could not be computed under failurePolicy Fail.
#[derive(Debug, Clone, thiserror::Error)]
#[error("policy {policy}: {message}")]
pub struct MutationError {
    pub policy: String,
    pub message: String,
}

impl PolicySet {
    /// The JSON patch operations (RFC 6902, as JSON) the mutations make:
    /// the MutatingAdmissionPolicies' first (as one diff, see
    /// [`PolicySet::admit`]), then matching InterlockPolicies' in policy
    /// order, over the object the former left.
    pub fn mutate(&self, req: &Request, inv: &dyn Lookup) -> Result<Vec<Json>, MutationError> {
        let admitted = self.admit(req, inv);
        if let Some(f) = admitted.failures.first() {
            return Err(MutationError {
                policy: f.policy.clone(),
                message: f.message.clone(),
            });
        }
        let (mut ops, mutated) = match (&admitted.object, req.object) {
            (Some(m), Some(before)) => {
                let diff = serde_json::to_value(::json_patch::diff(before, m)).unwrap_or_default();
                let ops = diff.as_array().cloned().unwrap_or_default();
                (
                    ops,
                    Some(Request {
                        object: Some(m),
                        ..req.clone()
                    }),
                )
            }
            _ => (Vec::new(), None),
        };
        let req = mutated.as_ref().unwrap_or(req);
        let interlock = |p: &&CompiledPolicy| p.kind == PolicyKind::Interlock;
        for p in self
            .policies
            .iter()
            .filter(interlock)
            .filter(|p| !p.mutations.is_empty())
        {
            if !p.matches(req, inv) {
                continue;
            }
            match p.mutation_ops(req, inv) {
                Ok(mut o) => ops.append(&mut o),
                Err(fault) if p.failure_policy == FailurePolicy::Fail => {
                    return Err(MutationError {
                        policy: p.name.clone(),
                        message: fault.to_string(),
                    })
                }
                Err(message) => {
                    tracing::warn!(policy = %p.name, %message, "mutation ignored (failurePolicy Ignore)")
                }
            }
        }
        Ok(ops)
    }
}

impl PolicySet {
    /// Whether some policy mutates (a MutatingAdmissionPolicy, or an
    /// InterlockPolicy with mutations): else `check` runs no mutating
    /// admission at all.
    pub fn mutates(&self) -> bool {
        self.policies.iter().any(|p| !p.mutations.is_empty())
    }

    /// The whole mutating admission `check` runs offline, as `serve`'s
    /// `/mutate` answers it: the MutatingAdmissionPolicies
    /// ([`PolicySet::admit_with`]), then the matching InterlockPolicies'
    /// mutations in policy order over the object they leave. A Fail
    /// policy's error refuses the request as a MAP's does.
    pub fn admit_all(&self, req: &Request, inv: &dyn Lookup, schemas: &Schemas) -> Admitted {
        let mut out = self.admit_with(req, inv, schemas);
        let Some(original) = req.object else {
            return out;
        };
        if !out.failures.is_empty() {
            return out;
        }
        let mut object = out.object.clone().unwrap_or_else(|| original.clone());
        let interlock = |p: &&CompiledPolicy| p.kind == PolicyKind::Interlock;
        for p in self.policies.iter().filter(interlock) {
            if p.mutations.is_empty() {
                continue;
            }
            let current = Request {
                object: Some(&object),
                ..req.clone()
            };
            if !p.matches(&current, inv) {
                continue;
            }
            let next = p
                .mutation_ops(&current, inv)
                .and_then(|ops| Ok(super::json_patch::apply(&object, &ops)?));
            match next {
                Ok(next) if next != object => {
                    object = next;
                    out.mutated_by.push(p.name.clone());
                }
                Ok(_) => {}
                Err(fault) if p.failure_policy == FailurePolicy::Fail => {
                    out.failures.push(MutationFailure {
                        policy: p.name.clone(),
                        binding: None,
                        message: fault.to_string(),
                    });
                    return out;
                }
                Err(message) => {
                    tracing::warn!(policy = %p.name, %message, "mutation ignored (failurePolicy Ignore)")
                }
            }
        }
        if object != *original {
            out.object = Some(object);
        }
        out
    }
}

impl CompiledPolicy {
    pub(super) fn mutation_ops(
        &self,
        req: &Request,
        inv: &dyn Lookup,
    ) -> Result<Vec<Json>, MutationFault> {
        self.with_activation(req, &Shared::default(), inv, None, |act, _| {
            for (name, cond) in &self.match_conditions {
                match cond.eval(act) {
                    Ok(Value::Bool(true)) => {}
                    Ok(Value::Bool(false)) => return Ok(vec![]),
                    Ok(other) => {
                        return Err(MutationFault::ConditionNotBool {
                            name: name.clone(),
                            got: other.type_name(),
                        })
                    }
                    Err(error) => {
                        return Err(MutationFault::Condition {
                            name: name.clone(),
                            error,
                        })
                    }
                }
            }
            let mut ops = Vec::new();
            for (index, m) in self.mutations.iter().enumerate() {
                match m.eval(act) {
                    Ok(Value::List(l)) => ops.extend(l.iter().map(|op| op.to_json())),
                    Ok(other) => {
                        return Err(MutationFault::NotAList {
                            index,
                            got: other.type_name(),
                        })
                    }
                    Err(error) => return Err(MutationFault::Mutation { index, error }),
                }
            }
            Ok(ops)
        })
    }
}
