//! Why a mutation made no patch: kube-apiserver's words for a
//! MutatingAdmissionPolicy's failures (they reach the client unchanged),
//! and for an InterlockPolicy's the field that failed.

use crate::k8s::apply::ApplyError;

#[derive(Debug, thiserror::Error)]
pub(super) enum MutationFault {
    #[error("failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")]
    NoParams,
    #[error("matchCondition '{name}' must evaluate to bool, got {got}")]
    ConditionNotBool { name: String, got: String },
    #[error("matchCondition '{name}': {error}")]
    Condition {
        name: String,
        error: crate::cel::EvalError,
    },
    #[error("spec.mutations[{index}] must yield a list of JSONPatch, got {got}")]
    NotAList { index: usize, got: String },
    #[error("spec.mutations[{index}]: {error}")]
    Mutation {
        index: usize,
        error: crate::cel::EvalError,
    },
    /// The errors of a MutatingAdmissionPolicy's matchConditions, or of its
    /// mutation's expression, as kube-apiserver words them.
    #[error("{0}")]
    Expression(String),
    #[error("type mismatch: JSONPatchType.expression should evaluate to array, got {0}")]
    NotJsonPatch(String),
    #[error("unsupported return type from ApplyConfiguration expression: {0}")]
    NotApplyConfiguration(String),
    #[error("error applying patch: {0}")]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Patch(#[from] super::json_patch::PatchError),
}
