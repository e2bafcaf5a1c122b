//! Validation of a whole group before anything is written: every loaded
//! policy evaluates every desired member as a write by the group's
//! ServiceAccount, against an [`Overlay`] of the inventory in which the
//! group's current members are replaced by the desired ones. Nothing is
//! copied; the caller holds the cluster state's read lock for the call.

use super::crd::{GroupFinding, ResourceGroupSpec};
use super::member::{parse_member, ScopeOracle};
use crate::inventory::{Inventory, ObjectKey, Overlay};
use crate::policy::{OldObject, PolicySet, Request, Verdict};
use serde_json::Value as Json;

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
}

/// One policy's verdict on one member.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberVerdict {
    /// The member's index in the desired list.
    pub member: usize,
    pub verdict: Verdict,
}

/// Evaluates every policy on every desired member. `current` are the keys
/// of the objects the group owns now (hidden from lookups unless desired
/// again); `desired` are whole member manifests whose namespace is set.
/// A member that cannot be keyed is skipped here: the plan refuses it.
pub fn validate(
    policies: &PolicySet,
    base: &Inventory,
    writer: &Writer,
    current: &[ObjectKey],
    desired: &[Json],
) -> Vec<MemberVerdict> {
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
    let username = writer.username();
    let groups = writer.groups();
    let mut out = Vec::new();
    for (i, d) in desired.iter().enumerate() {
        let Some(mut req) = Request::create(d, &username) else {
            continue;
        };
        req.groups = groups.clone();
        // An update of what the group owns now, as kube-apiserver would see
        // the apply: the stored object is the old one.
        let old = ObjectKey::of(d)
            .filter(|k| current.contains(k))
            .and_then(|k| base.get(&k))
            .map(|e| e.object.json().into_owned());
        if let Some(old) = &old {
            req.operation = "UPDATE".into();
            req.old_object = OldObject::Json(old);
        }
        let verdicts = policies.evaluate(&req, &overlay).verdicts;
        out.extend(
            verdicts
                .into_iter()
                .map(|verdict| MemberVerdict { member: i, verdict }),
        );
    }
    out
}

/// The group rules ([`super::rules`]) and every policy on every usable
/// member of a group's spec, as findings.
/// Members that cannot be parsed are left to the plan (which refuses them
/// by name). Admission and the controller both call this, so `kubectl
/// apply` of a group and its reconcile judge it alike.
#[allow(clippy::too_many_arguments)]
pub fn spec_findings(
    policies: &PolicySet,
    base: &Inventory,
    namespace: &str,
    spec: &ResourceGroupSpec,
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
    findings.extend(
        validate(policies, base, &writer, current, &desired)
            .into_iter()
            .map(|mut v| {
                v.verdict.message =
                    crate::policy::redact(&v.verdict.message, &v.verdict.related, namespace);
                GroupFinding::from_verdict(&v.verdict, &desired[v.member])
            }),
    );
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Action;

    use crate::fixtures::{compile, ingress};
    use crate::policy::redact;

    #[test]
    fn members_are_judged_against_the_inventory_with_the_group_in_place() {
        let mut inv = Inventory::new();
        let policies = compile(&[crate::fixtures::UNIQUE_HOST], &mut inv);
        // The group owns `web` (host a), another tenant has `other` (host b).
        inv.upsert(&ingress("t", "web", "a.example", "s"), None)
            .expect("store");
        inv.upsert(&ingress("u", "other", "b.example", "s"), None)
            .expect("store");
        let writer = Writer {
            namespace: "t",
            service_account: "deployer",
        };
        let current = vec![ObjectKey::of(&ingress("t", "web", "", "s")).expect("key")];

        // Renaming `web` to `site` with the same host: the old member is
        // replaced, so its host is free.
        let desired = vec![ingress("t", "site", "a.example", "s")];
        assert!(validate(&policies, &inv, &writer, &current, &desired).is_empty());

        // Two members claiming one host conflict with each other.
        let desired = vec![
            ingress("t", "x", "c.example", "s"),
            ingress("t", "y", "c.example", "s"),
        ];
        let v = validate(&policies, &inv, &writer, &current, &desired);
        assert_eq!(v.iter().map(|v| v.member).collect::<Vec<_>>(), vec![0, 1]);

        // Another tenant's host is taken, as a write by the ServiceAccount.
        let desired = vec![ingress("t", "web", "b.example", "s")];
        let v = validate(&policies, &inv, &writer, &current, &desired);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].verdict.action, Action::Deny);
        assert_eq!(v[0].verdict.message, "host taken by u/other");
        assert_eq!(writer.username(), "system:serviceaccount:t:deployer");
        assert_eq!(
            redact(&v[0].verdict.message, &v[0].verdict.related, "t"),
            "host taken by Ingress in another namespace"
        );
    }

    #[test]
    fn redaction_hides_a_name_whose_prefix_is_another_hidden_name() {
        let key = |ns: &str, name: &str| ObjectKey::of(&ingress(ns, name, "h", "s")).expect("key");
        let related = [key("u", "web"), key("u", "web-admin")];
        let out = redact("taken by u/web-admin and u/web", &related, "t");
        assert_eq!(
            out,
            "taken by Ingress in another namespace and Ingress in another namespace"
        );
        assert_eq!(
            redact("mine: t/web", &[key("t", "web")], "t"),
            "mine: t/web"
        );
    }
}
