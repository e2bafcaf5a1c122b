//! A ResourceGroup at admission: its members are judged as the controller
//! will judge them (`group::validate::spec_findings`), so `kubectl apply`
//! of an invalid group is refused at once with the findings, before
//! anything is stored. Under `serve` the members' `authorizer...check()`
//! asks about the group's ServiceAccount, as for the controller.

use crate::cluster::State;
use crate::group::crd::{FindingAction, ResourceGroupSpec, ResourceGroupStatus, API_VERSION, KIND};
use crate::group::member::BuiltinScopes;
use crate::inventory::ObjectKey;
use crate::k8s::kinds::group_of;
use crate::policy::{Action, Operation, Request, Verdict};

/// The policy name verdicts about a group's members carry.
pub const POLICY: &str = "resource-group-members";

/// Whether `r` writes a ResourceGroup's spec.
pub fn is_group_write(r: &Request) -> bool {
    r.gvk.kind() == KIND
        && r.gvk.group() == group_of(API_VERSION)
        && r.subresource.is_empty()
        && matches!(r.operation, Operation::Create | Operation::Update)
}

/// The members' findings, one verdict each, named `member KIND NAME:
/// policy: message`. A spec that does not parse is left to the API
/// server's schema validation.
pub fn verdicts(st: &State, r: &Request) -> Vec<Verdict> {
    let Some(object) = r.object else {
        return vec![];
    };
    let Some(spec) = object
        .get("spec")
        .and_then(|s| serde_json::from_value::<ResourceGroupSpec>(s.clone()).ok())
    else {
        return vec![];
    };
    // What the group owns now, as the controller last reported it.
    let current: Vec<ObjectKey> = r
        .old_object
        .get()
        .and_then(|o| o.get("status"))
        .and_then(|s| serde_json::from_value::<ResourceGroupStatus>(s.clone()).ok())
        .map(|s| {
            s.members
                .iter()
                .filter_map(|m| {
                    ObjectKey::of(
                        &serde_json::json!({"apiVersion": m.api_version, "kind": m.kind,
                        "metadata": {"namespace": m.namespace, "name": m.name}}),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    // Offline scopes: kinds the table does not know (custom resources) are
    // taken as namespaced here; the controller asks discovery.
    let findings = crate::group::validate::spec_findings(
        &st.policies,
        &st.inventory,
        &r.namespace,
        &spec,
        r.authorizer.map(|a| a.authorizer),
        &current,
        &BuiltinScopes,
        true,
    );
    let mut verdicts = ready_when_verdicts(&spec);
    verdicts.extend(findings.into_iter().map(|f| Verdict {
        policy: POLICY.into(),
        binding: None,
        action: match f.action {
            FindingAction::Deny => Action::Deny,
            FindingAction::Warn => Action::Warn,
            FindingAction::Audit => Action::Audit,
        },
        message: format!(
            "member {} {}: {}: {}",
            f.object.kind, f.object.name, f.policy, f.message
        ),
        reason: None,
        related: vec![],
    }));
    verdicts
}

/// A readyWhen expression that does not compile refuses the group, with
/// the expression's field and position, as a policy's would be refused;
/// so does a `spec.readyTimeout` that is not a duration.
fn ready_when_verdicts(spec: &ResourceGroupSpec) -> Vec<Verdict> {
    let rules = crate::group::ready::ReadyRules::compile(&spec.ready_when);
    let timeout = crate::group::wait::timeout(&spec.ready_timeout)
        .err()
        .map(|e| e.to_string());
    rules
        .errors()
        .map(|(i, e)| format!("spec.readyWhen[{i}].expression: {e}"))
        .chain(timeout)
        .map(|message| Verdict {
            policy: POLICY.into(),
            binding: None,
            action: Action::Deny,
            message,
            reason: None,
            related: vec![],
        })
        .collect()
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
