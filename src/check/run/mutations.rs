//! The mutating step of the admission chain `check` runs: what
//! MutatingAdmissionPolicies did to an object, said as findings (a refusal),
//! notices (findings that exist or vanish only because of a mutation) and
//! the patch (`--show-mutations`).

use super::*;
use crate::policy::{Admitted, Verdict};

/// The refusal of a request whose mutation failed under failurePolicy
/// Fail: kube-apiserver stops there, before validating admission.
pub(super) fn refusals(admitted: &Admitted) -> Vec<Verdict> {
    admitted
        .failures
        .iter()
        .map(|f| Verdict {
            policy: f.policy.clone(),
            binding: f.binding.clone(),
            action: policy::Action::Deny,
            message: f.to_string(),
            reason: Some("Invalid".into()),
            related: vec![],
        })
        .collect()
}

/// Notices for the findings the mutation made or removed (the object as
/// written is evaluated again, only for objects a mutation changed), and
/// the patch when asked for.
pub(super) fn compare(
    it: &Item,
    admitted: &Admitted,
    mutated: &Json,
    verdicts: &[Verdict],
    written: &Request,
    ctx: &CheckContext<'_>,
    checked: &mut Checked,
) {
    let by = admitted.mutated_by.join(", ");
    if ctx.opts.show_mutations {
        let before = written.object.unwrap_or(&Json::Null);
        let patch = serde_json::to_value(json_patch::diff(before, mutated)).unwrap_or_default();
        checked.mutation = Some(crate::report::ObjectMutation {
            object: it.object.clone(),
            source: it.source.clone(),
            policies: admitted.mutated_by.clone(),
            patch,
        });
    }
    if !admitted.failures.is_empty() {
        return;
    }
    let before = ctx.policies.evaluate(written, ctx.inventory).verdicts;
    let same = |a: &Verdict, b: &Verdict| {
        a.policy == b.policy && a.binding == b.binding && a.message == b.message
    };
    let notice = |message: String| InputError {
        file: it.source.file.clone(),
        line: Some(it.source.line),
        column: None,
        message,
    };
    for v in verdicts
        .iter()
        .filter(|v| !before.iter().any(|b| same(b, v)))
    {
        checked.notices.push(notice(format!(
            "{}: the finding of {} exists only on the object as mutated by {by}, not as written",
            it.object, v.policy
        )));
    }
    for v in before
        .iter()
        .filter(|b| !verdicts.iter().any(|v| same(b, v)))
    {
        checked.notices.push(notice(format!(
            "{}: {} would find on the object as written \"{}\", but not once mutated by {by}",
            it.object, v.policy, v.message
        )));
    }
}

#[cfg(test)]
#[path = "mutations_tests.rs"]
mod tests;
