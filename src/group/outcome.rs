//! What a pass that stopped part way leaves in status. The plan describes
//! the writes it intends ("does not exist; applied on this pass"); when a
//! quota or the API server stops the pass, the status must say only what
//! happened: which members this pass wrote, which it did not, and why.

use super::crd::{ConditionStatus, MemberState, MemberStatus};
use super::plan::{set_condition, ObjectRef, Plan, Stamp, APPLIED, READY};
use super::quota::Shortfall;
use crate::policy::resources::group_of;
use chrono::{DateTime, Utc};

/// Why a pass wrote less than it planned.
pub enum Stop<'a> {
    /// The namespace's quotas (from the cache) cannot hold the group's new
    /// objects: nothing was written.
    Quota(&'a Shortfall),
    /// The API server refused a write of `target`; with `dry_run`, the
    /// refusal came from the dry runs and nothing was written.
    Refused {
        target: &'a ObjectRef,
        reason: &'a str,
        message: &'a str,
        dry_run: bool,
    },
}

/// The condition reason of [`Stop::Quota`].
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";

impl Plan {
    /// Records that the pass stopped: `written` are the members it wrote
    /// before it did (in apply order). Each planned member not written says
    /// so, and `Applied` and `Ready` are False with a message naming what
    /// was written and what was not.
    pub fn record_stop(
        &mut self,
        previous: Option<&super::crd::ResourceGroupStatus>,
        stop: &Stop<'_>,
        written: &[ObjectRef],
        now: DateTime<Utc>,
    ) {
        let (reason, cause, failed) = match stop {
            Stop::Quota(s) => (QUOTA_EXCEEDED, s.to_string(), None),
            Stop::Refused {
                target,
                reason,
                message,
                ..
            } => {
                // The member itself: Failed, with the API server's words.
                self.record_failure(previous, target, reason, message, now);
                let cause = format!("{} {}: {message}", target.kind, target.name);
                (*reason, cause, Some(*target))
            }
        };
        let why_not = match (stop, failed) {
            (Stop::Refused { dry_run: false, .. }, Some(t)) => {
                format!(
                    "not written: the write of {} {} was refused",
                    t.kind, t.name
                )
            }
            (Stop::Refused { .. }, Some(t)) => format!(
                "not written: the dry run of {} {} was refused, so nothing was written",
                t.kind, t.name
            ),
            _ => "not written: a ResourceQuota cannot hold the group's new objects".to_string(),
        };
        let planned: Vec<ObjectRef> = self.apply.iter().map(|d| d.target.clone()).collect();
        let mut unwritten = Vec::new();
        for m in &mut self.status.members {
            let is = |t: &ObjectRef| same(m, t);
            if !planned.iter().any(is) || written.iter().any(is) {
                continue;
            }
            unwritten.push(label(&m.kind, &m.name));
            if failed.is_some_and(is) {
                continue;
            }
            m.state = MemberState::Pending;
            let change = if m.uid.is_some() {
                "differs from the spec"
            } else {
                "does not exist"
            };
            m.message = Some(format!("{change}; {why_not}"));
        }
        let written: Vec<String> = written.iter().map(|t| label(&t.kind, &t.name)).collect();
        let text = format!(
            "{cause}. Written on this pass: {}; not written: {}",
            list(&written),
            list(&unwritten)
        );
        let stamp = Stamp {
            generation: self.status.observed_generation.unwrap_or(0),
            previous,
            now,
        };
        for type_ in [APPLIED, READY] {
            let c = stamp.condition(type_, ConditionStatus::False, reason, &text);
            set_condition(&mut self.status.conditions, c);
        }
    }
}

fn same(m: &MemberStatus, t: &ObjectRef) -> bool {
    m.kind == t.kind && m.name == t.name && group_of(&m.api_version) == group_of(&t.api_version)
}

fn label(kind: &str, name: &str) -> String {
    format!("{kind} {name}")
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::crd::ResourceGroupStatus;
    use crate::group::plan::DesiredObject;
    use crate::group::quota::Shortfall;
    use serde_json::json;

    fn cm(name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "team-a".into(),
            name: name.into(),
            uid: None,
        }
    }

    /// A plan that creates ConfigMaps `c1`..`c4`, each "applied on this pass".
    fn four() -> Plan {
        let targets: Vec<ObjectRef> = (1..=4).map(|i| cm(&format!("c{i}"))).collect();
        let members = targets
            .iter()
            .map(|t| MemberStatus {
                api_version: "v1".into(),
                kind: t.kind.clone(),
                namespace: t.namespace.clone(),
                name: t.name.clone(),
                uid: None,
                state: MemberState::Pending,
                ready: None,
                message: Some("does not exist; applied on this pass".into()),
                drift: vec![],
            })
            .collect();
        Plan {
            apply: targets
                .into_iter()
                .map(|target| DesiredObject {
                    target,
                    object: json!({}),
                })
                .collect(),
            prune: vec![],
            status: ResourceGroupStatus {
                observed_generation: Some(1),
                members,
                ..ResourceGroupStatus::default()
            },
            finalize: None,
            recheck_at: None,
        }
    }

    fn member<'a>(p: &'a Plan, name: &str) -> &'a MemberStatus {
        p.status.members.iter().find(|m| m.name == name).unwrap()
    }

    fn applied(p: &Plan) -> &super::super::crd::Condition {
        p.status
            .conditions
            .iter()
            .find(|c| c.type_ == APPLIED)
            .unwrap()
    }

    #[test]
    fn a_write_refused_part_way_names_what_is_stored_and_what_is_not() {
        let mut p = four();
        let written = [cm("c1"), cm("c2"), cm("c3")];
        let stop = Stop::Refused {
            target: &cm("c4"),
            reason: "Forbidden",
            message: "exceeded quota: objects",
            dry_run: false,
        };
        p.record_stop(None, &stop, &written, Utc::now());
        assert_eq!(
            member(&p, "c1").message.as_deref(),
            Some("does not exist; applied on this pass")
        );
        assert_eq!(member(&p, "c4").state, MemberState::Failed);
        let c = applied(&p);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, "Forbidden")
        );
        assert_eq!(
            c.message,
            "ConfigMap c4: exceeded quota: objects. Written on this pass: ConfigMap c1, \
             ConfigMap c2, ConfigMap c3; not written: ConfigMap c4"
        );
    }

    #[test]
    fn a_refused_dry_run_leaves_no_member_saying_it_was_applied() {
        let mut p = four();
        let stop = Stop::Refused {
            target: &cm("c2"),
            reason: "ApplyFailed",
            message: "denied by another webhook",
            dry_run: true,
        };
        p.record_stop(None, &stop, &[], Utc::now());
        for m in &p.status.members {
            let text = m.message.as_deref().unwrap_or("");
            assert!(!text.contains("applied on this pass"), "{}: {text}", m.name);
        }
        assert_eq!(
            member(&p, "c1").message.as_deref(),
            Some("does not exist; not written: the dry run of ConfigMap c2 was refused, so nothing was written")
        );
        assert!(applied(&p).message.ends_with("Written on this pass: none; not written: ConfigMap c1, ConfigMap c2, ConfigMap c3, ConfigMap c4"));
    }

    #[test]
    fn a_quota_shortfall_writes_nothing_and_names_the_quota() {
        let mut p = four();
        let s = Shortfall {
            quota: "objects".into(),
            namespace: "team-a".into(),
            resource: "count/configmaps".into(),
            hard: 10,
            used: 7,
            wanted: 4,
        };
        p.record_stop(None, &Stop::Quota(&s), &[], Utc::now());
        let c = applied(&p);
        assert_eq!(c.reason, QUOTA_EXCEEDED);
        assert!(
            c.message.starts_with(
                "ResourceQuota team-a/objects allows 3 more count/configmaps (7 of 10 used)"
            ),
            "{}",
            c.message
        );
        assert!(p
            .status
            .members
            .iter()
            .all(|m| m.state == MemberState::Pending
                && m.message
                    .as_deref()
                    .is_some_and(|t| t.contains("not written: a ResourceQuota"))));
    }
}
