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
        problems.add(reason::INVALID_READY_TIMEOUT, e.clone());
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

/// (API group, kind, namespace, name): one object whatever its version.
type Key = (String, String, String, String);

fn key_of(v: &Value) -> Option<Key> {
    let s = |p: &str| v.pointer(p).and_then(Value::as_str);
    Some((
        group_of(s("/apiVersion")?).to_string(),
        s("/kind")?.to_string(),
        s("/metadata/namespace").unwrap_or("").to_string(),
        s("/metadata/name")?.to_string(),
    ))
}

fn member_key(m: &Member) -> Key {
    (
        m.api_group().to_string(),
        m.kind.clone(),
        m.namespace.clone(),
        m.name.clone(),
    )
}

/// Observed objects by key, in a stable order.
fn index(observed: &[Value]) -> BTreeMap<Key, &Value> {
    observed
        .iter()
        .filter_map(|v| Some((key_of(v)?, v)))
        .collect()
}

/// One entry of `spec.resources`, decided.
enum Entry<'a> {
    /// Cannot be applied: invalid, out of scope, listed twice, or in
    /// conflict with someone else's object.
    Refused {
        status: MemberStatus,
        key: Option<Key>,
        reason: &'static str,
        message: String,
    },
    Usable {
        member: Member,
        desired: Value,
        live: Option<&'a Value>,
        /// The stored object does not hold the desired one, and is to be
        /// written (under `drift: Report`, only when its manifest changed).
        stale: bool,
        /// `drift: Report`: the fields the stored object differs in, left
        /// as they are.
        drift: Vec<String>,
        /// `drift: Report`: an object that is not the group's differs from
        /// the manifest; not taken over.
        not_taken_over: bool,
    },
}

impl Entry<'_> {
    fn key(&self) -> Option<Key> {
        match self {
            Entry::Refused { key, .. } => key.clone(),
            Entry::Usable { member, .. } => Some(member_key(member)),
        }
    }

    /// Stale and not waiting for an older object to finish deleting.
    fn needs_write(&self) -> bool {
        matches!(self, Entry::Usable { stale: true, live, .. } if !live.is_some_and(terminating))
    }

    /// Stored as the spec says and ready, for `waitForReady`.
    fn settled(&self, rules: &ReadyRules) -> bool {
        let Entry::Usable {
            member,
            live: Some(l),
            stale: false,
            not_taken_over: false,
            ..
        } = self
        else {
            return false;
        };
        let ready = rules.readiness(l).is_ready();
        wait::settles(&member.api_version, &member.kind, !terminating(l), ready)
    }

    fn sort_key(&self) -> (u8, &str, &str) {
        match self {
            Entry::Usable { member, .. } => {
                order::sort_key(member.api_group(), &member.kind, &member.name)
            }
            Entry::Refused { .. } => (u8::MAX, "", ""),
        }
    }

    fn desired(&self) -> Option<DesiredObject> {
        let Entry::Usable {
            member,
            desired,
            live,
            ..
        } = self
        else {
            return None;
        };
        Some(DesiredObject {
            target: ObjectRef {
                api_version: member.api_version.clone(),
                kind: member.kind.clone(),
                namespace: member.namespace.clone(),
                name: member.name.clone(),
                uid: live
                    .and_then(|l| l.pointer("/metadata/uid"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
            },
            object: desired.clone(),
        })
    }
}

fn read_members<'a>(
    input: &PlanInput<'_>,
    live: &BTreeMap<Key, &'a Value>,
    id: &str,
) -> Vec<Entry<'a>> {
    let mut first: HashMap<Key, usize> = HashMap::new();
    let resources = input.spec.resources.iter().enumerate();
    resources
        .map(|(i, raw)| read_member(input, live, id, &mut first, i, raw))
        .collect()
}

/// Entry `i` of `spec.resources`; `first` maps the keys seen so far to
/// their entries (the first of two entries with one key is kept).
fn read_member<'a>(
    input: &PlanInput<'_>,
    live: &BTreeMap<Key, &'a Value>,
    id: &str,
    first: &mut HashMap<Key, usize>,
    i: usize,
    raw: &Value,
) -> Entry<'a> {
    let g = input.group;
    let member = match parse_member(i, raw, &g.namespace, input.scopes, false) {
        Ok(m) => m,
        Err(e) => return refused_member(raw, &g.namespace, &e),
    };
    let key = member_key(&member);
    let what = format!("member {i} ({})", member.display());
    if is_the_group(&key, g) {
        let message = format!("{what}: a group cannot hold itself");
        return refused(
            &member,
            None,
            reason::INVALID_MEMBER,
            message,
            MemberState::Invalid,
        );
    }
    if let Some(j) = first.get(&key) {
        let message = format!("{what}: listed twice (also member {j})");
        return refused(
            &member,
            None,
            reason::DUPLICATE_MEMBER,
            message,
            MemberState::Invalid,
        );
    }
    first.insert(key.clone(), i);
    let stored = live.get(&key).copied();
    if let Some(why) = stored.and_then(|l| conflict(l, g, id)) {
        let message = format!("{} exists and {why}; it is never adopted", member.display());
        return refused(
            &member,
            stored,
            reason::CONFLICT,
            message,
            MemberState::Conflict,
        );
    }
    let desired = with_ownership(&member.object, g, id);
    let desired = match input.spec.drift {
        DriftPolicy::Revert => desired,
        DriftPolicy::Report => drift::with_hash(desired, &member.object),
    };
    let owned = stored.is_some_and(|l| owned_by(l, &g.uid));
    let decision = drift::decide(input.spec.drift, &desired, &member.object, stored, owned);
    let (stale, drift, not_taken_over) = match decision {
        Decision::Converged => (false, vec![], false),
        Decision::Write => (true, vec![], false),
        Decision::Drifted(fields) => (false, fields, false),
        Decision::NotTakenOver(fields) => (false, fields, true),
    };
    Entry::Usable {
        member,
        desired,
        live: stored,
        stale,
        drift,
        not_taken_over,
    }
}

/// Applying the group onto itself would overwrite its own spec.
fn is_the_group(key: &Key, g: &GroupRef) -> bool {
    let (group, kind, namespace, name) = key;
    group == super::crd::GROUP && kind == KIND && *namespace == g.namespace && *name == g.name
}

fn refused_member<'a>(raw: &Value, namespace: &str, e: &MemberError) -> Entry<'a> {
    let s = |p: &str| {
        raw.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (state, reason) = match e {
        MemberError::Invalid { .. } => (MemberState::Invalid, reason::INVALID_MEMBER),
        MemberError::OutOfScope { .. } => (MemberState::OutOfScope, reason::MEMBER_OUT_OF_SCOPE),
    };
    let ns = raw
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or(namespace);
    Entry::Refused {
        status: MemberStatus {
            api_version: s("/apiVersion"),
            kind: s("/kind"),
            namespace: ns.to_string(),
            name: s("/metadata/name"),
            uid: None,
            state,
            ready: None,
            message: Some(e.to_string()),
            drift: vec![],
        },
        key: None,
        reason,
        message: e.to_string(),
    }
}

fn refused<'a>(
    m: &Member,
    live: Option<&Value>,
    reason: &'static str,
    message: String,
    state: MemberState,
) -> Entry<'a> {
    Entry::Refused {
        status: MemberStatus {
            api_version: m.api_version.clone(),
            kind: m.kind.clone(),
            namespace: m.namespace.clone(),
            name: m.name.clone(),
            uid: live.and_then(uid_of),
            state,
            ready: None,
            message: Some(message.clone()),
            drift: vec![],
        },
        key: Some(member_key(m)),
        reason,
        message,
    }
}

fn uid_of(v: &Value) -> Option<String> {
    v.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn terminating(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

fn owner_refs(v: &Value) -> &[Value] {
    v.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether `v` names the object of `uid` among its ownerReferences.
pub fn owned_by(v: &Value, uid: &str) -> bool {
    owner_refs(v)
        .iter()
        .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
}

fn part_of(v: &Value) -> Option<&str> {
    v.pointer("/metadata/labels")?.get(PART_OF_LABEL)?.as_str()
}

/// Why a stored object at a member's key belongs to someone else, if it
/// does: another controller, another group (even as a plain owner), or
/// another ApplySet. An object nobody claims is taken over by the apply.
fn conflict(live: &Value, g: &GroupRef, id: &str) -> Option<String> {
    for r in owner_refs(live) {
        let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
        if uid == g.uid {
            continue;
        }
        let kind = r.get("kind").and_then(Value::as_str).unwrap_or("?");
        let name = r.get("name").and_then(Value::as_str).unwrap_or("?");
        let api = r.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if group_of(api) == super::crd::GROUP && kind == KIND {
            return Some(format!("belongs to ResourceGroup {name} (uid {uid})"));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            return Some(format!("is controlled by {kind} {name}"));
        }
    }
    match part_of(live) {
        Some(other) if other != id => Some(format!("is part of another ApplySet ({other})")),
        _ => None,
    }
}

/// The manifest as applied: the part-of label and the group's controller
/// ownerReference added (by UID, so a new group of the same name never
/// inherits the members of a deleted one).
fn with_ownership(object: &Value, g: &GroupRef, id: &str) -> Value {
    let mut o = object.clone();
    let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) else {
        return o;
    };
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(PART_OF_LABEL.into(), id.into());
    }
    let mut refs: Vec<Value> = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|r| r.get("uid").and_then(Value::as_str) != Some(&g.uid))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    refs.push(owner_reference(g));
    meta.insert("ownerReferences".into(), Value::Array(refs));
    o
}

/// The ownerReference every member carries.
pub fn owner_reference(g: &GroupRef) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": g.name,
        "uid": g.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Objects the group owns (ownerReference by UID) that are not listed.
/// The label alone is not ownership: anyone may write a label, and only
/// what the group owns may be deleted in its name.
fn owned_unlisted<'a>(
    live: &BTreeMap<Key, &'a Value>,
    listed: &[Key],
    uid: &str,
) -> Vec<&'a Value> {
    live.iter()
        .filter(|(k, v)| owned_by(v, uid) && !listed.contains(k))
        .map(|(_, v)| *v)
        .collect()
}

/// What blocks the group, by reason, in the order found.
#[derive(Default)]
struct Problems {
    by_reason: Vec<(&'static str, Vec<String>)>,
}

impl Problems {
    fn add(&mut self, reason: &'static str, message: String) {
        match self.by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, list)) => list.push(message),
            None => self.by_reason.push((reason, vec![message])),
        }
    }

    fn is_empty(&self) -> bool {
        self.by_reason.is_empty()
    }

    /// The first of `reasons` present, and every message of all of them.
    fn summary(&self, reasons: &[&'static str]) -> Option<(&'static str, String)> {
        let first = reasons
            .iter()
            .find(|r| self.by_reason.iter().any(|(x, _)| x == *r))?;
        let messages: Vec<&str> = reasons
            .iter()
            .filter_map(|r| self.by_reason.iter().find(|(x, _)| x == r))
            .flat_map(|(_, list)| list.iter().map(String::as_str))
            .collect();
        Some((first, join_limited(&messages)))
    }
}

/// Reasons that make the group invalid, most basic first.
const INVALID_REASONS: [&str; 7] = [
    reason::INVALID_MEMBER,
    reason::DUPLICATE_MEMBER,
    reason::INVALID_READY_WHEN,
    reason::INVALID_READY_TIMEOUT,
    reason::MEMBER_OUT_OF_SCOPE,
    reason::AUTHORIZER_UNAVAILABLE,
    reason::POLICY_VIOLATION,
];

/// At most this many items in a condition message.
const MESSAGE_ITEMS: usize = 10;

fn join_limited(items: &[&str]) -> String {
    let mut text = items
        .iter()
        .take(MESSAGE_ITEMS)
        .copied()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > MESSAGE_ITEMS {
        text.push_str(&format!("; and {} more", items.len() - MESSAGE_ITEMS));
    }
    text
}

/// Counts the conditions are made of.
struct Summary<'s, 'a> {
    entries: &'s [Entry<'a>],
    apply: usize,
    prune: usize,
    unlisted: usize,
    problems: &'s Problems,
    rules: &'s ReadyRules,
    wait: Option<&'s Wait>,
}

/// Builds conditions with the group's generation, keeping the previous
/// `lastTransitionTime` of a condition whose status is unchanged.
pub(super) struct Stamp<'a> {
    pub(super) generation: i64,
    pub(super) previous: Option<&'a ResourceGroupStatus>,
    pub(super) now: DateTime<Utc>,
}

impl Stamp<'_> {
    pub(super) fn condition(
        &self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
    ) -> Condition {
        let kept = self
            .previous
            .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
            .filter(|c| c.status == status)
            .map(|c| c.last_transition_time.clone());
        Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message: message.to_string(),
            observed_generation: Some(self.generation),
            last_transition_time: kept.unwrap_or_else(|| rfc3339(self.now)),
        }
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(super) fn set_condition(conditions: &mut Vec<Condition>, c: Condition) {
    match conditions.iter_mut().find(|x| x.type_ == c.type_) {
        Some(x) => *x = c,
        None => conditions.push(c),
    }
}

fn build_status(
    input: &PlanInput<'_>,
    s: &Summary<'_, '_>,
    unlisted: &[&Value],
    writing: bool,
) -> ResourceGroupStatus {
    let stamp = Stamp {
        generation: input.group.generation,
        previous: input.previous,
        now: input.now,
    };
    let blocked_by = s
        .problems
        .summary(&INVALID_REASONS)
        .or_else(|| s.problems.summary(&[reason::CONFLICT]));
    let blocked_by = blocked_by.as_ref().map(|b| b.0);
    let waits_for = s.wait.and_then(|w| match &s.entries[w.blocker] {
        Entry::Usable { member, .. } => Some(member),
        Entry::Refused { .. } => None,
    });
    let mut members: Vec<MemberStatus> = s
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let held = s.wait.is_some_and(|w| w.held.contains(&i));
            let waits = waits_for.filter(|_| held);
            member_status(e, input.spec.suspend, blocked_by, s.rules, waits)
        })
        .collect();
    members.extend(
        unlisted
            .iter()
            .map(|l| unlisted_status(l, input.spec.prune, writing)),
    );
    let (valid, applied, ready) = conditions(input, s, &members, &stamp);
    let mut conditions = vec![valid, applied, ready];
    if input.spec.drift == DriftPolicy::Report {
        conditions.push(drifted_condition(&members, &stamp));
    }
    let waiting_for = s.wait.zip(waits_for).map(|(w, m)| WaitingFor {
        api_version: m.api_version.clone(),
        kind: m.kind.clone(),
        name: m.name.clone(),
        since: rfc3339(w.since),
    });
    ResourceGroupStatus {
        observed_generation: Some(input.group.generation),
        conditions,
        members,
        findings: input.findings.to_vec(),
        waiting_for,
    }
}

/// `drift: Report`: True when some member differs from the spec.
fn drifted_condition(members: &[MemberStatus], stamp: &Stamp<'_>) -> Condition {
    let drifted: Vec<String> = members
        .iter()
        .filter(|m| !m.drift.is_empty())
        .map(|m| format!("{} {}: {}", m.kind, m.name, m.drift.join(", ")))
        .collect();
    if drifted.is_empty() {
        let m = "every member holds the spec";
        return stamp.condition(DRIFTED, ConditionStatus::False, reason::NO_DRIFT, m);
    }
    let refs: Vec<&str> = drifted.iter().map(String::as_str).collect();
    let m = format!(
        "{} members differ from the spec (reported, not reverted): {}",
        drifted.len(),
        join_limited(&refs)
    );
    stamp.condition(DRIFTED, ConditionStatus::True, reason::DRIFTED, &m)
}

fn member_status(
    e: &Entry<'_>,
    suspended: bool,
    blocked_by: Option<&str>,
    rules: &ReadyRules,
    waits_for: Option<&Member>,
) -> MemberStatus {
    let (member, live, stale, drift, not_taken_over) = match e {
        Entry::Refused { status, .. } => return status.clone(),
        Entry::Usable {
            member,
            live,
            stale,
            drift,
            not_taken_over,
            ..
        } => (member, *live, *stale, drift, *not_taken_over),
    };
    let mut status = MemberStatus {
        api_version: member.api_version.clone(),
        kind: member.kind.clone(),
        namespace: member.namespace.clone(),
        name: member.name.clone(),
        uid: live.and_then(uid_of),
        state: MemberState::Applied,
        ready: None,
        message: None,
        drift: drift.iter().take(drift::MAX_FIELDS).cloned().collect(),
    };
    let differs = match drift.len() {
        1 => "1 field differs from the spec".to_string(),
        n => format!("{n} fields differ from the spec"),
    };
    if not_taken_over {
        status.state = MemberState::Blocked;
        status.message = Some(format!(
            "exists, is not the group's, and {differs}; not taken over while spec.drift is Report"
        ));
        return status;
    }
    if let Some(w) = waits_for {
        let change = if live.is_some() {
            "differs from the spec"
        } else {
            "does not exist"
        };
        status.state = MemberState::Waiting;
        status.message = Some(format!(
            "{change}; applied once {} (an earlier rank) is ready",
            w.display()
        ));
        return status;
    }
    let why_not = blocked_by.map(|r| format!("not written: the group is blocked ({r})"));
    let why_not =
        why_not.or_else(|| suspended.then(|| "not written: the group is suspended".to_string()));
    match (live, stale) {
        (Some(l), false) => {
            let r = rules.readiness(l);
            status.ready = Some(r.is_ready());
            if let Readiness::NotReady(m) = r {
                status.message = Some(m);
            } else if !drift.is_empty() {
                status.message = Some(format!(
                    "{differs}; reported, not reverted (spec.drift: Report)"
                ));
            }
        }
        (Some(l), true) if terminating(l) => {
            status.state = MemberState::Pending;
            status.message = Some("waiting for the stored object to finish deleting".into());
        }
        (_, _) => {
            status.state = if why_not.is_some() {
                MemberState::Blocked
            } else {
                MemberState::Pending
            };
            let change = if live.is_some() {
                "differs from the spec"
            } else {
                "does not exist"
            };
            status.message = Some(match why_not {
                Some(w) => format!("{change}; {w}"),
                None => format!("{change}; applied on this pass"),
            });
        }
    }
    status
}

fn unlisted_status(live: &Value, prune: bool, writing: bool) -> MemberStatus {
    let o = ObjectRef::of(live);
    let (state, message) = match (prune, writing) {
        (true, true) => (
            MemberState::Pruning,
            "no longer listed; deleted once every listed member is applied",
        ),
        (true, false) => (
            MemberState::Pruning,
            "no longer listed; not deleted while the group is blocked or suspended",
        ),
        (false, _) => (
            MemberState::Unlisted,
            "no longer listed; kept because prune is false",
        ),
    };
    MemberStatus {
        api_version: o.api_version,
        kind: o.kind,
        namespace: o.namespace,
        name: o.name,
        uid: o.uid,
        state,
        ready: None,
        message: Some(message.into()),
        drift: vec![],
    }
}

fn conditions(
    input: &PlanInput<'_>,
    s: &Summary<'_, '_>,
    members: &[MemberStatus],
    stamp: &Stamp<'_>,
) -> (Condition, Condition, Condition) {
    let valid = valid_condition(input, s, stamp);
    let applied = applied_condition(input, s, &valid, members, stamp);
    let ready = match s.wait {
        Some(w) => wait_condition(input, w, members, stamp),
        None => ready_condition(&applied, members, stamp),
    };
    (valid, applied, ready)
}

/// `Ready` of a group whose later ranks wait: `Waiting`, or `Timeout` once
/// the wait lasted longer than `spec.readyTimeout` (nothing is undone; the
/// wait goes on).
fn wait_condition(
    input: &PlanInput<'_>,
    w: &Wait,
    members: &[MemberStatus],
    stamp: &Stamp<'_>,
) -> Condition {
    let blocker = &members[w.blocker];
    let why = blocker.message.as_deref().unwrap_or("not ready");
    let since = rfc3339(w.since);
    let held = w.held.len();
    let (r, m) = if w.timed_out {
        let m = format!(
            "{} {} not ready within {} (waiting since {since}): {why}; {held} members of later ranks not applied",
            blocker.kind, blocker.name, input.spec.ready_timeout
        );
        (reason::TIMEOUT, m)
    } else {
        let m = format!(
            "waiting since {since} for {} {} to be ready before {held} members of later ranks: {why}",
            blocker.kind, blocker.name
        );
        (reason::WAITING, m)
    };
    stamp.condition(READY, ConditionStatus::False, r, &m)
}

fn valid_condition(input: &PlanInput<'_>, s: &Summary<'_, '_>, stamp: &Stamp<'_>) -> Condition {
    if let Some((r, m)) = s.problems.summary(&INVALID_REASONS) {
        return stamp.condition(VALID, ConditionStatus::False, r, &m);
    }
    let m = format!(
        "{} members pass every policy ({} warnings or audit findings)",
        s.entries.len(),
        input.findings.len()
    );
    stamp.condition(VALID, ConditionStatus::True, reason::VALID, &m)
}

fn applied_condition(
    input: &PlanInput<'_>,
    s: &Summary<'_, '_>,
    valid: &Condition,
    members: &[MemberStatus],
    stamp: &Stamp<'_>,
) -> Condition {
    use ConditionStatus::{False, True};
    let waiting = members
        .iter()
        .filter(|m| m.state == MemberState::Pending)
        .count();
    let pending = s.apply + s.prune + waiting;
    let held = s.wait.map_or(0, |w| w.held.len());
    let not_taken_over: Vec<String> = s
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Usable {
                member,
                not_taken_over: true,
                ..
            } => Some(member.display()),
            _ => None,
        })
        .collect();
    let (status, why, message) = if valid.status == False {
        let m = "nothing written or pruned: the group is not valid".to_string();
        (False, valid.reason.as_str(), m)
    } else if let Some((r, m)) = s.problems.summary(&[reason::CONFLICT]) {
        (False, r, format!("nothing written or pruned: {m}"))
    } else if input.spec.suspend && pending == 0 {
        let m = "suspended; every member matches the spec".to_string();
        (True, reason::SUSPENDED, m)
    } else if input.spec.suspend {
        let m = format!(
            "suspended; {} members differ from the spec, {} would be pruned",
            s.apply, s.prune
        );
        (False, reason::SUSPENDED, m)
    } else if pending > 0 {
        let mut m = format!(
            "applying {} of {} members, pruning {}",
            s.apply,
            s.entries.len(),
            if held > 0 { 0 } else { s.prune }
        );
        if held > 0 {
            m.push_str(&format!("; {held} members of later ranks wait"));
        }
        (False, reason::PROGRESSING, m)
    } else if held > 0 {
        let m = format!(
            "{} of {} members applied; {held} members of later ranks wait for an earlier rank to be ready (waitForReady)",
            s.entries.len() - held,
            s.entries.len()
        );
        (False, reason::WAITING, m)
    } else if !not_taken_over.is_empty() {
        let refs: Vec<&str> = not_taken_over.iter().map(String::as_str).collect();
        let m = format!(
            "not taken over while spec.drift is Report (the objects exist, are not the group's, and differ from the spec): {}",
            join_limited(&refs)
        );
        (False, reason::NOT_TAKEN_OVER, m)
    } else {
        let kept = match s.unlisted {
            0 => String::new(),
            n => format!("; {n} unlisted members kept"),
        };
        let m = format!("all {} members applied{kept}", s.entries.len());
        (True, reason::APPLIED, m)
    };
    stamp.condition(APPLIED, status, why, &message)
}

fn ready_condition(applied: &Condition, members: &[MemberStatus], stamp: &Stamp<'_>) -> Condition {
    use ConditionStatus::{False, True};
    if applied.status != True {
        return stamp.condition(READY, False, &applied.reason, "members are not all applied");
    }
    let not_ready: Vec<String> = members
        .iter()
        .filter(|m| m.ready == Some(false))
        .map(|m| {
            format!(
                "{} {}: {}",
                m.kind,
                m.name,
                m.message.as_deref().unwrap_or("not ready")
            )
        })
        .collect();
    if not_ready.is_empty() {
        let n = members.iter().filter(|m| m.ready == Some(true)).count();
        return stamp.condition(
            READY,
            True,
            reason::READY,
            &format!("all {n} members ready"),
        );
    }
    let refs: Vec<&str> = not_ready.iter().map(String::as_str).collect();
    stamp.condition(READY, False, reason::PROGRESSING, &join_limited(&refs))
}

fn plan_deletion(input: &PlanInput<'_>, live: &BTreeMap<Key, &Value>, id: &str) -> Plan {
    let g = input.group;
    let orphan = input.spec.deletion_policy == DeletionPolicy::Orphan;
    // Orphan also takes our label off objects that only carry the label;
    // Delete deletes only what the group owns.
    let mine: Vec<&Value> = live
        .values()
        .filter(|v| owned_by(v, &g.uid) || (orphan && part_of(v) == Some(id)))
        .copied()
        .collect();
    let finalize = if mine.is_empty() {
        Finalize::RemoveFinalizer
    } else if orphan {
        Finalize::Release(mine.iter().map(|v| release(v, &g.uid, id)).collect())
    } else {
        deletion_step(&mine)
    };
    let members = mine.iter().map(|v| deletion_status(v, orphan)).collect();
    let message = match &finalize {
        Finalize::RemoveFinalizer => "every member is gone or released".to_string(),
        _ if orphan => format!("{} members left to release", mine.len()),
        _ => format!("{} members left to delete", mine.len()),
    };
    let conditions = deletion_conditions(input, &message);
    let status = ResourceGroupStatus {
        observed_generation: Some(g.generation),
        conditions,
        members,
        findings: vec![],
        waiting_for: None,
    };
    Plan {
        apply: vec![],
        prune: vec![],
        status,
        finalize: Some(finalize),
        recheck_at: None,
    }
}

/// `Valid` as last computed (a deleted group is not validated again);
/// `Applied` and `Ready` False with reason `Deleting`.
fn deletion_conditions(input: &PlanInput<'_>, message: &str) -> Vec<Condition> {
    let stamp = Stamp {
        generation: input.group.generation,
        previous: input.previous,
        now: input.now,
    };
    let mut conditions: Vec<Condition> = input
        .previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == VALID).cloned())
        .into_iter()
        .collect();
    for type_ in [APPLIED, READY] {
        let c = stamp.condition(type_, ConditionStatus::False, reason::DELETING, message);
        conditions.push(c);
    }
    conditions
}

/// The members of the last rank still present: delete those not yet
/// terminating; if all are terminating, wait for them.
fn deletion_step(mine: &[&Value]) -> Finalize {
    let rank = |v: &Value| {
        let o = ObjectRef::of(v);
        order::rank(o.api_group(), &o.kind)
    };
    let last = mine.iter().map(|v| rank(v)).max().unwrap_or(0);
    let (gone, now): (Vec<&Value>, Vec<&Value>) = mine
        .iter()
        .copied()
        .filter(|v| rank(v) == last)
        .partition(|v| terminating(v));
    if now.is_empty() {
        Finalize::Wait(gone.iter().map(|v| ObjectRef::of(v)).collect())
    } else {
        Finalize::Delete(now.iter().map(|v| ObjectRef::of(v)).collect())
    }
}

fn deletion_status(v: &Value, orphan: bool) -> MemberStatus {
    let o = ObjectRef::of(v);
    let finalizers = v
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .filter(|f| !f.is_empty());
    let message = match (orphan, terminating(v), finalizers) {
        (true, _, _) => "released: ownerReference and label removed, the object stays".to_string(),
        (false, true, Some(f)) => format!(
            "terminating; waiting for finalizers {}",
            Value::Array(f.clone())
        ),
        (false, true, None) => "terminating".to_string(),
        (false, false, _) => "deleted in reverse apply order".to_string(),
    };
    MemberStatus {
        api_version: o.api_version,
        kind: o.kind,
        namespace: o.namespace,
        name: o.name,
        uid: o.uid,
        state: if orphan {
            MemberState::Orphaned
        } else {
            MemberState::Deleting
        },
        ready: None,
        message: Some(message),
        drift: vec![],
    }
}

/// The JSON patch that takes the group's ownerReference and part-of label
/// off `v`.
fn release(v: &Value, uid: &str, id: &str) -> Release {
    let mut ops = Vec::new();
    if let Some(i) = owner_refs(v)
        .iter()
        .position(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
    {
        let path = format!("/metadata/ownerReferences/{i}");
        ops.push(json!({"op": "test", "path": format!("{path}/uid"), "value": uid}));
        ops.push(json!({"op": "remove", "path": path}));
    }
    if part_of(v) == Some(id) {
        let path = format!(
            "/metadata/labels/{}",
            PART_OF_LABEL.replace('~', "~0").replace('/', "~1")
        );
        ops.push(json!({"op": "test", "path": path, "value": id}));
        ops.push(json!({"op": "remove", "path": path}));
    }
    Release {
        target: ObjectRef::of(v),
        patch: Value::Array(ops),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
