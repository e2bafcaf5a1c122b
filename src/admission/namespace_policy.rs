//! An InterlockNamespacePolicy at admission: one that reaches beyond its
//! namespace (a lookup naming another namespace, claims, indexes, params)
//! is refused when it is written, naming the field (`policy::tenant`).
//! One that merely does not compile is admitted, as an InterlockPolicy is:
//! its status says why it is not in force.

use crate::policy::{tenant, Action, Operation, Request, Verdict, INTERLOCK_GROUP};

/// The policy name the refusal carries.
pub const POLICY: &str = "namespace-policy-reach";

/// The refusal of a tenant policy that reaches further (none otherwise).
pub fn verdicts(r: &Request) -> Vec<Verdict> {
    let writes_spec = r.gvk.kind() == tenant::KIND
        && r.gvk.group() == INTERLOCK_GROUP
        && r.subresource.is_empty()
        && matches!(r.operation, Operation::Create | Operation::Update);
    let refusal = r.object.filter(|_| writes_spec).and_then(tenant::refusal);
    refusal
        .map(|message| Verdict {
            policy: POLICY.into(),
            binding: None,
            action: Action::Deny,
            message,
            reason: Some("Forbidden".into()),
            related: Vec::new(),
        })
        .into_iter()
        .collect()
}

#[cfg(test)]
#[path = "namespace_policy_tests.rs"]
mod tests;
