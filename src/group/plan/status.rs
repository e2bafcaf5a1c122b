//! The status a plan writes: member states and the Valid, Applied, Ready
//! and Drifted conditions.

use super::*;

/// What blocks the group, by reason, in the order found.
#[derive(Default)]
pub(super) struct Problems {
    pub(super) by_reason: Vec<(&'static str, Vec<String>)>,
}

impl Problems {
    pub(super) fn add(&mut self, reason: &'static str, message: String) {
        match self.by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, list)) => list.push(message),
            None => self.by_reason.push((reason, vec![message])),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_reason.is_empty()
    }

    /// The first of `reasons` present, and every message of all of them.
    pub(super) fn summary(&self, reasons: &[&'static str]) -> Option<(&'static str, String)> {
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
pub(super) const INVALID_REASONS: [&str; 7] = [
    reason::INVALID_MEMBER,
    reason::DUPLICATE_MEMBER,
    reason::INVALID_READY_WHEN,
    reason::INVALID_READY_TIMEOUT,
    reason::MEMBER_OUT_OF_SCOPE,
    reason::AUTHORIZER_UNAVAILABLE,
    reason::POLICY_VIOLATION,
];

/// At most this many items in a condition message.
pub(super) const MESSAGE_ITEMS: usize = 10;

pub(super) fn join_limited(items: &[&str]) -> String {
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
pub(super) struct Summary<'s, 'a> {
    pub(super) entries: &'s [Entry<'a>],
    pub(super) apply: usize,
    pub(super) prune: usize,
    pub(super) unlisted: usize,
    pub(super) problems: &'s Problems,
    pub(super) rules: &'s ReadyRules,
    pub(super) wait: Option<&'s Wait>,
}

/// Builds conditions with the group's generation, keeping the previous
/// `lastTransitionTime` of a condition whose status is unchanged.
pub(in crate::group) struct Stamp<'a> {
    pub(in crate::group) generation: i64,
    pub(in crate::group) previous: Option<&'a ResourceGroupStatus>,
    pub(in crate::group) now: DateTime<Utc>,
}

impl Stamp<'_> {
    pub(in crate::group) fn condition(
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

pub(super) fn rfc3339(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(in crate::group) fn set_condition(conditions: &mut Vec<Condition>, c: Condition) {
    match conditions.iter_mut().find(|x| x.type_ == c.type_) {
        Some(x) => *x = c,
        None => conditions.push(c),
    }
}

pub(super) fn build_status(
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
pub(super) fn drifted_condition(members: &[MemberStatus], stamp: &Stamp<'_>) -> Condition {
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

pub(super) fn member_status(
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

pub(super) fn unlisted_status(live: &Value, prune: bool, writing: bool) -> MemberStatus {
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

pub(super) fn conditions(
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
pub(super) fn wait_condition(
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

pub(super) fn valid_condition(
    input: &PlanInput<'_>,
    s: &Summary<'_, '_>,
    stamp: &Stamp<'_>,
) -> Condition {
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

pub(super) fn applied_condition(
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

pub(super) fn ready_condition(
    applied: &Condition,
    members: &[MemberStatus],
    stamp: &Stamp<'_>,
) -> Condition {
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
