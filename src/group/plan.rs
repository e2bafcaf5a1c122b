//! The reconcile decision as a pure function: (spec, observed members,
//! validation result) in, writes and status out. No I/O and no clock, so
//! every rule of the contract is a unit test, and two passes over the same
//! inputs decide the same thing (level-triggered: nothing here depends on
//! which event woke the reconcile, or on earlier passes except through the
//! previous status, which only keeps `lastTransitionTime`).

use super::crd::{
    applyset_id, Condition, ConditionStatus, DeletionPolicy, DriftPolicy, FindingAction,
    GroupFinding, MemberState, MemberStatus, ResourceGroup, ResourceGroupSpec, ResourceGroupStatus,
    WaitingFor, API_VERSION, APPLYSET_GROUP_KINDS_ANNOTATION, APPLYSET_ID_LABEL,
    APPLYSET_TOOLING_ANNOTATION, KIND, PART_OF_LABEL,
};
use super::drift::{self, Decision};
use super::member::{parse_member, Member, MemberError, ScopeOracle};
use super::order;
use super::ready::{Readiness, ReadyRules};
use super::wait;
use crate::policy::resources::group_of;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

mod deletion;
mod members;
mod status;

use deletion::*;
use members::*;
pub use members::{owned_by, owner_reference};
use status::*;
// The outcome of a pass that stopped part way (`super::outcome`) words
// its conditions as the plan does.
pub(super) use status::{set_condition, Stamp};
/// The group being reconciled: what of its metadata the plan needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

/// A ResourceGroup without the metadata every stored object has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the ResourceGroup has no metadata.{0}")]
pub struct GroupRefError(pub &'static str);

impl GroupRef {
    /// The metadata of a group read from the API server.
    pub fn of(group: &ResourceGroup) -> Result<GroupRef, GroupRefError> {
        let meta = &group.metadata;
        Ok(GroupRef {
            namespace: meta.namespace.clone().ok_or(GroupRefError("namespace"))?,
            name: meta.name.clone().ok_or(GroupRefError("name"))?,
            uid: meta.uid.clone().ok_or(GroupRefError("uid"))?,
            generation: meta.generation.unwrap_or(0),
            deleting: meta.deletion_timestamp.is_some(),
        })
    }
}

/// Everything one reconcile decides from.
pub struct PlanInput<'a> {
    pub group: &'a GroupRef,
    pub spec: &'a ResourceGroupSpec,
    /// The status stored now (its conditions keep their
    /// `lastTransitionTime` while their status does not change).
    pub previous: Option<&'a ResourceGroupStatus>,
    /// From the caches: for each member the stored object if any, plus
    /// every object carrying this group's part-of label or an
    /// ownerReference to its UID. Extra objects are ignored. Whole objects
    /// (managedFields may be dropped): a projection missing a field the
    /// group sets would make the member look changed on every pass.
    pub observed: &'a [Value],
    /// Every policy on every member (computed by the policy engine).
    pub findings: &'a [GroupFinding],
    /// Which kinds exist and are namespaced (API discovery).
    pub scopes: &'a dyn ScopeOracle,
    pub now: DateTime<Utc>,
}

/// One object on the API server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The stored object's UID, when it exists: deletes should carry it as
    /// a precondition so that a re-created object of the same name is safe.
    pub uid: Option<String>,
}

impl ObjectRef {
    fn of(live: &Value) -> ObjectRef {
        let s = |p: &str| {
            live.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        ObjectRef {
            api_version: s("/apiVersion"),
            kind: s("/kind"),
            namespace: s("/metadata/namespace"),
            name: s("/metadata/name"),
            uid: live
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }

    fn api_group(&self) -> &str {
        group_of(&self.api_version)
    }
}

/// A member to write by server-side apply (field manager `interlock`,
/// force, as the group's ServiceAccount).
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredObject {
    pub target: ObjectRef,
    /// The whole manifest, with the group's namespace, the part-of label and
    /// the group's controller ownerReference.
    pub object: Value,
}

/// Ownership removed from an object, as an RFC 6902 JSON patch whose
/// `test` operations make it fail (422) rather than remove the wrong entry
/// if the object changed since it was observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    pub target: ObjectRef,
    pub patch: Value,
}

/// What to do for a group being deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum Finalize {
    /// Delete these now (the last rank of the apply order still present;
    /// earlier ranks wait until they are gone). Foreground propagation keeps
    /// a workload until its Pods are gone, so the order holds below it too.
    Delete(Vec<ObjectRef>),
    /// Members of the current rank are terminating: nothing to write.
    Wait(Vec<ObjectRef>),
    /// `deletionPolicy: Orphan`: patch these free of the group.
    Release(Vec<Release>),
    /// No member is left: remove the finalizer.
    RemoveFinalizer,
}

/// The decision of one reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Members to apply, in apply order.
    pub apply: Vec<DesiredObject>,
    /// Owned objects no longer listed, in reverse apply order, to delete
    /// only after every apply succeeded.
    pub prune: Vec<ObjectRef>,
    /// The status to store (through the status subresource, and only when
    /// it differs from the stored one).
    pub status: ResourceGroupStatus,
    /// Set when the group is being deleted.
    pub finalize: Option<Finalize>,
    /// With `waitForReady`: when the wait times out, if it has not yet (a
    /// pass is due then even if no member changes).
    pub recheck_at: Option<DateTime<Utc>>,
}

impl Plan {
    /// Records that the API server refused a write of `target` (after the
    /// plan was made): the member is `Failed`, and `Applied` and `Ready`
    /// are False with `reason` (for example `ApplyFailed` or `Forbidden`).
    pub fn record_failure(
        &mut self,
        previous: Option<&ResourceGroupStatus>,
        target: &ObjectRef,
        reason: &str,
        message: &str,
        now: DateTime<Utc>,
    ) {
        let text = format!("{} {}: {message}", target.kind, target.name);
        if let Some(m) = self.status.members.iter_mut().find(|m| {
            m.kind == target.kind
                && m.name == target.name
                && group_of(&m.api_version) == target.api_group()
        }) {
            m.state = MemberState::Failed;
            m.message = Some(message.to_string());
        }
        let generation = self.status.observed_generation.unwrap_or(0);
        let stamp = Stamp {
            generation,
            previous,
            now,
        };
        for type_ in [APPLIED, READY] {
            let c = stamp.condition(type_, ConditionStatus::False, reason, &text);
            set_condition(&mut self.status.conditions, c);
        }
    }

    /// The status of a plan that has nothing left to write, for a pass
    /// planned again after its writes ([`after_writes`]). `None` when the
    /// writes unblocked more (a `waitForReady` rank now ready at once): its
    /// status would call members "applied on this pass" that the pass did
    /// not write, so the pass keeps its first plan's status and the next
    /// pass writes them.
    pub fn settled_status(self) -> Option<ResourceGroupStatus> {
        (self.apply.is_empty() && self.prune.is_empty()).then_some(self.status)
    }

    /// The KEP-3659 parent metadata of the group, for a metadata patch of
    /// the group itself (the executor writes it only when it differs): the
    /// id label, the tooling annotation, and the group-kinds of every
    /// member listed or still owned, which `kubectl` needs to see the
    /// group as an ApplySet parent.
    pub fn applyset_parent_metadata(&self, group: &GroupRef) -> Value {
        let mut kinds: Vec<String> = self
            .status
            .members
            .iter()
            .filter(|m| !m.kind.is_empty())
            .map(|m| match group_of(&m.api_version) {
                "" => m.kind.clone(),
                g => format!("{}.{g}", m.kind),
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        json!({
            "metadata": {
                "labels": {APPLYSET_ID_LABEL: applyset_id(&group.namespace, &group.name)},
                "annotations": {
                    APPLYSET_TOOLING_ANNOTATION: concat!("interlock/v", env!("CARGO_PKG_VERSION")),
                    APPLYSET_GROUP_KINDS_ANNOTATION: kinds.join(","),
                },
            }
        })
    }
}

/// Condition types.
pub const VALID: &str = "Valid";
pub const APPLIED: &str = "Applied";
pub const READY: &str = "Ready";
/// With `drift: Report`: whether some member differs from the spec.
pub const DRIFTED: &str = "Drifted";

/// Condition reasons.
pub mod reason {
    pub const VALID: &str = "Valid";
    pub const POLICY_VIOLATION: &str = "PolicyViolation";
    /// A policy's `authorizer...check()` got no answer (transient: the
    /// controller validates again with backoff).
    pub const AUTHORIZER_UNAVAILABLE: &str = "AuthorizerUnavailable";
    pub const MEMBER_OUT_OF_SCOPE: &str = "MemberOutOfScope";
    pub const INVALID_MEMBER: &str = "InvalidMember";
    pub const DUPLICATE_MEMBER: &str = "DuplicateMember";
    /// A `spec.readyWhen` expression does not compile.
    pub const INVALID_READY_WHEN: &str = "InvalidReadyWhen";
    pub const CONFLICT: &str = "Conflict";
    pub const SUSPENDED: &str = "Suspended";
    pub const PROGRESSING: &str = "Progressing";
    pub const APPLIED: &str = "Applied";
    pub const READY: &str = "Ready";
    pub const DELETING: &str = "Deleting";
    /// `spec.readyTimeout` is not a duration.
    pub const INVALID_READY_TIMEOUT: &str = "InvalidReadyTimeout";
    /// `waitForReady`: later ranks wait for a member to be ready.
    pub const WAITING: &str = "Waiting";
    /// `waitForReady`: the wait lasted longer than `spec.readyTimeout`.
    pub const TIMEOUT: &str = "Timeout";
    /// `drift: Report`: some member differs from the spec.
    pub const DRIFTED: &str = "Drifted";
    /// `drift: Report`: every member holds its manifest.
    pub const NO_DRIFT: &str = "NoDrift";
    /// `drift: Report`: an object that is not the group's differs from its
    /// member's manifest and is not taken over.
    pub const NOT_TAKEN_OVER: &str = "NotTakenOver";
}

/// The reconcile decision. See the module documentation of
/// `crate::controller` for the rules.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let g = input.group;
    let id = applyset_id(&g.namespace, &g.name);
    let live = index(input.observed);
    if g.deleting {
        return plan_deletion(input, &live, &id);
    }
    let entries = read_members(input, &live, &id);
    let rules = ReadyRules::compile(&input.spec.ready_when);
    let mut problems = problems_of(&entries, input.findings);
    for (i, e) in rules.errors() {
        let message = format!("spec.readyWhen[{i}].expression: {e}");
        problems.add(reason::INVALID_READY_WHEN, message);
    }
    let timeout = wait::timeout(&input.spec.ready_timeout);
    if let Err(e) = &timeout {
        problems.add(reason::INVALID_READY_TIMEOUT, e.to_string());
    }
    let listed: Vec<Key> = entries.iter().filter_map(Entry::key).collect();
    let unlisted = owned_unlisted(&live, &listed, &g.uid);
    let blocked = !problems.is_empty();
    let writing = !blocked && !input.spec.suspend;

    let wait = match (&timeout, writing && input.spec.wait_for_ready) {
        (Ok(t), true) => wait_of(input, &entries, &rules, *t),
        _ => None,
    };
    let mut apply: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.needs_write())
        .filter(|e| wait.as_ref().is_none_or(|w| e.sort_key().0 <= w.rank))
        .collect();
    apply.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    // An object already terminating is waited for, not deleted again: a
    // second delete is a request for nothing. Nothing is pruned while a
    // member waits.
    let prune = if input.spec.prune && wait.is_none() {
        let deletable: Vec<&Value> = unlisted
            .iter()
            .copied()
            .filter(|v| !terminating(v))
            .collect();
        reverse_order(&deletable)
    } else {
        vec![]
    };
    let summary = Summary {
        entries: &entries,
        apply: apply.len(),
        prune: if input.spec.prune { unlisted.len() } else { 0 },
        unlisted: unlisted.len(),
        problems: &problems,
        rules: &rules,
        wait: wait.as_ref(),
    };
    let status = build_status(input, &summary, &unlisted, writing);
    let recheck_at = wait.as_ref().filter(|w| !w.timed_out).map(|w| w.deadline);
    if !writing {
        return Plan {
            apply: vec![],
            prune: vec![],
            status,
            finalize: None,
            recheck_at: None,
        };
    }
    Plan {
        apply: apply.into_iter().filter_map(Entry::desired).collect(),
        prune,
        status,
        finalize: None,
        recheck_at,
    }
}

/// `observed` with the objects the API server answered to a pass's
/// writes (the objects as stored) in place of what the caches held, or
/// added for new members: what the caches will hold once the writes' watch
/// events arrive. Planned again on it, a pass records a member that is
/// ready at once as Ready, so the pass those events wake has no status to
/// write.
pub fn after_writes(observed: &[Value], stored: &[Value]) -> Vec<Value> {
    let written: std::collections::BTreeSet<Key> = stored.iter().filter_map(key_of).collect();
    observed
        .iter()
        .filter(|o| key_of(o).is_none_or(|k| !written.contains(&k)))
        .chain(stored)
        .cloned()
        .collect()
}

/// A `waitForReady` group waiting: the member the later ranks wait for.
struct Wait {
    /// The last rank that may be written.
    rank: u8,
    /// The member waited for (by index into the entries).
    blocker: usize,
    since: DateTime<Utc>,
    deadline: DateTime<Utc>,
    timed_out: bool,
    /// Members of later ranks that are not written (by index).
    held: Vec<usize>,
}

/// Where a `waitForReady` group waits, if some member of a later rank has
/// something to write while an earlier rank is not ready.
fn wait_of(
    input: &PlanInput<'_>,
    entries: &[Entry<'_>],
    rules: &ReadyRules,
    timeout: std::time::Duration,
) -> Option<Wait> {
    let mut usable: Vec<usize> = (0..entries.len())
        .filter(|i| matches!(entries[*i], Entry::Usable { .. }))
        .collect();
    usable.sort_by(|a, b| entries[*a].sort_key().cmp(&entries[*b].sort_key()));
    let steps: Vec<wait::Step> = usable
        .iter()
        .map(|i| wait::Step {
            rank: entries[*i].sort_key().0,
            settled: entries[*i].settled(rules),
        })
        .collect();
    let hold = wait::hold(&steps)?;
    let held: Vec<usize> = usable
        .iter()
        .copied()
        .filter(|i| entries[*i].sort_key().0 > hold.rank && entries[*i].needs_write())
        .collect();
    if held.is_empty() {
        return None;
    }
    let previous = input.previous;
    let since = wait::since(
        previous.and_then(|p| p.waiting_for.as_ref()),
        previous.and_then(|p| p.observed_generation),
        input.group.generation,
        hold.rank,
        input.now,
    );
    let deadline = wait::deadline(since, timeout);
    Some(Wait {
        rank: hold.rank,
        blocker: usable[hold.index],
        since,
        deadline,
        timed_out: input.now >= deadline,
        held,
    })
}

/// Everything that blocks the group: refused members and Deny findings.
fn problems_of(entries: &[Entry<'_>], findings: &[GroupFinding]) -> Problems {
    let mut problems = Problems::default();
    for e in entries {
        if let Entry::Refused {
            reason, message, ..
        } = e
        {
            problems.add(reason, message.clone());
        }
    }
    for f in findings.iter().filter(|f| f.action == FindingAction::Deny) {
        let o = &f.object;
        let why = if f.policy == super::validate::AUTHORIZER {
            reason::AUTHORIZER_UNAVAILABLE
        } else {
            reason::POLICY_VIOLATION
        };
        problems.add(
            why,
            format!("{} {}: {}: {}", o.kind, o.name, f.policy, f.message),
        );
    }
    problems
}

/// Stored objects in reverse apply order (for pruning).
fn reverse_order(objects: &[&Value]) -> Vec<ObjectRef> {
    let mut refs: Vec<ObjectRef> = objects.iter().map(|v| ObjectRef::of(v)).collect();
    refs.sort_by(|a, b| {
        let rank = |o: &ObjectRef| order::rank(o.api_group(), &o.kind);
        (rank(b), &b.name, &b.kind).cmp(&(rank(a), &a.name, &a.kind))
    });
    refs
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
