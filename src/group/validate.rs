//! Validation of a whole group before anything is written: every loaded
//! policy evaluates every desired member as a write by the group's
//! ServiceAccount, against an [`Overlay`] of the inventory in which the
//! group's current members are replaced by the desired ones. Nothing is
//! copied; the caller holds the cluster state's read lock for the call.
//!
//! `authorizer...check()` asks the given [`Authorizer`] about the
//! ServiceAccount's user, the one kube-apiserver sees for the impersonated
//! writes ([`Writer::user`]). A review that gives no answer to apply the
//! group on (the call failed or was cut by the deadline, or
//! kube-apiserver's authorizer answered with an evaluation error) is
//! recorded and becomes a Deny finding of [`AUTHORIZER`] on its member,
//! whatever the expression made of it: the group waits for an answer
//! rather than being applied on a non-answer (the controller retries with
//! backoff). Without an authorizer, `check` is the offline evaluation error.

use super::crd::{FindingAction, FindingObject, GroupFinding, ResourceGroupSpec};
use super::member::{parse_member, ScopeOracle};
use crate::cel::interrupt::Interrupt;
use crate::cel::k8s_authz::{Attributes, Authorizer, Decision, UserInfo};
use crate::inventory::{Inventory, ObjectKey, Overlay};
use crate::policy::{OldObject, PolicySet, Request, RequestAuthorizer, Verdict};
use serde_json::Value as Json;
use std::sync::{Arc, Mutex, PoisonError};

/// The policy name of findings about reviews that gave no answer.
pub const AUTHORIZER: &str = "authorizer";

/// Who writes the members, and where.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    pub namespace: &'a str,
    pub service_account: &'a str,
}

impl Writer<'_> {
    /// The username kube-apiserver gives the ServiceAccount's token, which
    /// is what impersonation presents.
    pub fn username(&self) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace, self.service_account
        )
    }

    pub fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".into(),
        ]
    }

    /// The user of the controller's writes as kube-apiserver's
    /// impersonation filter makes it from `Impersonate-User` alone (legacy
    /// and constrained, `endpoints/filters/impersonation`): the
    /// ServiceAccount's username, its two fixed groups plus
    /// `system:authenticated`, no uid, no extra.
    pub fn user(&self) -> UserInfo {
        UserInfo {
            username: self.username(),
            groups: self.groups(),
            ..UserInfo::default()
        }
    }
}

/// A review that gave no answer to apply the group on.
#[derive(Debug, Clone, PartialEq)]
pub struct Unanswered {
    /// [`Attributes::describe`] of the question.
    pub question: String,
    pub error: String,
}

/// The authorizer of one validation, recording what got no answer.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn Authorizer>,
    unanswered: Mutex<Vec<Unanswered>>,
}

impl Recording {
    fn record(&self, attributes: &Attributes, error: &str) {
        self.unanswered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Unanswered {
                question: attributes.describe(),
                error: error.to_string(),
            });
    }

    fn take(&self) -> Vec<Unanswered> {
        std::mem::take(
            &mut self
                .unanswered
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }
}

impl Authorizer for Recording {
    fn authorize(
        &self,
        user: &UserInfo,
        attributes: &Attributes,
        interrupt: Option<&Interrupt>,
    ) -> Option<Decision> {
        let d = self.inner.authorize(user, attributes, interrupt);
        match &d {
            None => self.record(attributes, "the validation's deadline passed first"),
            Some(Decision { error: Some(e), .. }) => self.record(attributes, e),
            Some(_) => {}
        }
        d
    }
}

/// One policy's verdict on one member.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberVerdict {
    /// The member's index in the desired list.
    pub member: usize,
    pub verdict: Verdict,
}

/// What a validation found: every policy's verdicts, and the reviews that
/// gave no answer, by member.
#[derive(Debug, Default)]
pub struct Validation {
    pub verdicts: Vec<MemberVerdict>,
    /// (member index, review).
    pub unanswered: Vec<(usize, Unanswered)>,
}

/// Evaluates every policy on every desired member. `current` are the keys
/// of the objects the group owns now (hidden from lookups unless desired
/// again); `desired` are whole member manifests whose namespace is set.
/// A member that cannot be keyed is skipped here: the plan refuses it.
/// `authorizer` answers `authorizer...check()` for the writer's user.
pub fn validate(
    policies: &PolicySet,
    base: &Inventory,
    writer: &Writer,
    authorizer: Option<&Arc<dyn Authorizer>>,
    current: &[ObjectKey],
    desired: &[Json],
) -> Validation {
    // Judged as kube-apiserver's admission will see them once applied:
    // defaulted (what is applied stays the manifest).
    let desired: Vec<Json> = desired
        .iter()
        .map(|d| {
            let mut d = d.clone();
            crate::k8s::defaults::apply(&mut d);
            d
        })
        .collect();
    let mut overlay = Overlay::new(base);
    for k in current {
        overlay.remove(k);
    }
    for d in &desired {
        // An object the inventory cannot key is refused by the plan.
        let _ = overlay.put(d);
    }
    let recording = authorizer.map(|a| {
        Arc::new(Recording {
            inner: a.clone(),
            unanswered: Mutex::default(),
        })
    });
    let asker: Option<Arc<dyn Authorizer>> = recording.clone().map(|r| r as Arc<dyn Authorizer>);
    let user = writer.user();
    let mut out = Validation::default();
    for (i, d) in desired.iter().enumerate() {
        let Some(mut req) = Request::create(d, &user.username) else {
            continue;
        };
        req.groups = user.groups.clone();
        // Checked against the cluster: validationActions, not checkActions.
        req.live = true;
        req.authorizer = asker.as_ref().map(|authorizer| RequestAuthorizer {
            authorizer,
            uid: &user.uid,
            extra: None,
        });
        // An update of what the group owns now, as kube-apiserver would see
        // the apply: the stored object is the old one.
        let old = ObjectKey::of(d)
            .filter(|k| current.contains(k))
            .and_then(|k| base.get(&k))
            .map(|e| e.object.json().into_owned());
        if let Some(old) = &old {
            req.operation = crate::policy::Operation::Update;
            req.old_object = OldObject::Json(old);
        }
        let verdicts = policies.evaluate(&req, &overlay).verdicts;
        out.verdicts.extend(
            verdicts
                .into_iter()
                .map(|verdict| MemberVerdict { member: i, verdict }),
        );
        if let Some(r) = &recording {
            out.unanswered.extend(r.take().into_iter().map(|u| (i, u)));
        }
    }
    out
}

/// The group rules ([`super::rules`]) and every policy on every usable
/// member of a group's spec, as findings, with a Deny finding of
/// [`AUTHORIZER`] for each review that gave no answer.
/// Members that cannot be parsed are left to the plan (which refuses them
/// by name). Admission and the controller both call this, so `kubectl
/// apply` of a group and its reconcile judge it alike.
#[allow(clippy::too_many_arguments)]
pub fn spec_findings(
    policies: &PolicySet,
    base: &Inventory,
    namespace: &str,
    spec: &ResourceGroupSpec,
    authorizer: Option<&Arc<dyn Authorizer>>,
    current: &[ObjectKey],
    scopes: &dyn ScopeOracle,
    unknown_is_namespaced: bool,
) -> Vec<GroupFinding> {
    let members: Vec<_> = spec
        .resources
        .iter()
        .enumerate()
        .filter_map(|(i, raw)| parse_member(i, raw, namespace, scopes, unknown_is_namespaced).ok())
        .collect();
    let mut findings = super::rules::check(&members);
    let desired: Vec<Json> = members.into_iter().map(|m| m.object).collect();
    let writer = Writer {
        namespace,
        service_account: &spec.service_account_name,
    };
    let v = validate(policies, base, &writer, authorizer, current, &desired);
    findings.extend(v.verdicts.into_iter().map(|mut v| {
        v.verdict.message =
            crate::policy::redact(&v.verdict.message, &v.verdict.related, namespace);
        GroupFinding::from_verdict(&v.verdict, &desired[v.member])
    }));
    // Each question once per member, however many policies asked it.
    let mut seen = std::collections::HashSet::new();
    findings.extend(
        v.unanswered
            .into_iter()
            .filter(|(i, u)| seen.insert((*i, u.question.clone())))
            .map(|(i, u)| unanswered_finding(&writer, &u, &desired[i])),
    );
    findings
}

fn unanswered_finding(writer: &Writer, u: &Unanswered, member: &Json) -> GroupFinding {
    GroupFinding {
        policy: AUTHORIZER.into(),
        binding: None,
        action: FindingAction::Deny,
        object: FindingObject::of(member),
        message: format!(
            "no answer from kube-apiserver's authorizer whether {} may {}: {}; nothing is applied until it answers",
            writer.username(),
            u.question,
            u.error
        ),
    }
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
