//! PolicyException documents: a policy does not hold for some objects (a
//! namespace, names, a label selector), until an expiry, for a reason.
//! They load with the policies (same files, same reloads), so `check`,
//! `audit`, `serve` and the controller honour them alike: an excepted
//! failure is kept as an Audit finding whose message says which exception
//! excepted it, and never denies or warns.

use super::model::LabelSelector;
use super::{selector, Action, Request, SpecError, Verdict};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value as Json;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    policies: Vec<String>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    names: Vec<String>,
    #[serde(default)]
    object_selector: Option<LabelSelector>,
    /// RFC 3339; after it the exception no longer applies.
    #[serde(default)]
    expires: Option<String>,
    reason: String,
}

/// One compiled PolicyException.
#[derive(Debug)]
pub struct Exception {
    pub name: String,
    policies: Vec<String>,
    namespaces: Vec<String>,
    names: Vec<String>,
    selector: Option<LabelSelector>,
    expires: Option<DateTime<Utc>>,
    reason: String,
}

impl Exception {
    /// Reads a PolicyException document; the error names the field.
    pub fn parse(name: &str, doc: &Json) -> Result<Exception, SpecError> {
        let spec: Spec = serde_json::from_value(doc.get("spec").cloned().ok_or("has no spec")?)
            .map_err(|e| format!("spec: {e}"))?;
        if spec.policies.is_empty() {
            return Err("spec.policies must name at least one policy".into());
        }
        if spec.reason.trim().is_empty() {
            return Err("spec.reason must say why the exception is granted".into());
        }
        let expires = spec
            .expires
            .as_deref()
            .map(|e| {
                DateTime::parse_from_rfc3339(e)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|err| format!("spec.expires: {e:?} is not an RFC 3339 time ({err}), as 2026-12-31T00:00:00Z"))
            })
            .transpose()?;
        let operators = ["In", "NotIn", "Exists", "DoesNotExist"];
        for r in spec
            .object_selector
            .iter()
            .flat_map(|s| &s.match_expressions)
        {
            if !operators.contains(&r.operator.as_str()) {
                return Err(format!(
                    "spec.objectSelector: unknown operator {:?}; use In, NotIn, Exists or DoesNotExist",
                    r.operator
                )
                .into());
            }
        }
        Ok(Exception {
            name: name.to_string(),
            policies: spec.policies,
            namespaces: spec.namespaces,
            names: spec.names,
            selector: spec.object_selector,
            expires,
            reason: spec.reason,
        })
    }

    /// The policies it names.
    pub fn policies(&self) -> &[String] {
        &self.policies
    }

    /// Does it except `policy`'s verdicts on `req` at `now`?
    pub fn applies(&self, policy: &str, req: &Request, now: DateTime<Utc>) -> bool {
        let listed = |list: &[String], v: &str| list.is_empty() || list.iter().any(|x| x == v);
        self.policies.iter().any(|p| p == policy)
            && self.expires.is_none_or(|t| now < t)
            && listed(&self.namespaces, &req.namespace)
            && listed(&self.names, &req.name)
            && self.selector.as_ref().is_none_or(|s| {
                let labels = req.reviewed().and_then(selector::labels);
                s.matches(labels).unwrap_or(false)
            })
    }
}

/// Turns every verdict that an exception covers into an Audit verdict that
/// says so.
pub fn apply(exceptions: &[Exception], req: &Request, verdicts: &mut [Verdict]) {
    if exceptions.is_empty() {
        return;
    }
    let now = Utc::now();
    for v in verdicts.iter_mut() {
        if let Some(e) = exceptions.iter().find(|e| e.applies(&v.policy, req, now)) {
            v.action = Action::Audit;
            v.message = format!(
                "excepted by PolicyException {} ({}): {}",
                e.name, e.reason, v.message
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn exception(spec: Json) -> Result<Exception, SpecError> {
        Exception::parse("legacy", &json!({"spec": spec}))
    }

    #[test]
    fn matches_policy_namespace_name_labels_and_expiry() {
        let e = exception(json!({
            "policies": ["unique-ingress-host"], "namespaces": ["legacy"], "names": ["old"],
            "objectSelector": {"matchLabels": {"tier": "legacy"}},
            "expires": "2030-01-01T00:00:00Z", "reason": "migrating"
        }))
        .expect("parses");
        let obj = |ns: &str, name: &str, tier: &str| {
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                   "metadata": {"name": name, "namespace": ns, "labels": {"tier": tier}}})
        };
        let before: DateTime<Utc> = "2029-12-31T00:00:00Z".parse().unwrap();
        let after: DateTime<Utc> = "2030-01-02T00:00:00Z".parse().unwrap();
        let ok = obj("legacy", "old", "legacy");
        let req = Request::create(&ok, "u").unwrap();
        assert!(e.applies("unique-ingress-host", &req, before));
        assert!(!e.applies("unique-ingress-host", &req, after), "expired");
        assert!(!e.applies("other-policy", &req, before));
        for other in [
            obj("team", "old", "legacy"),
            obj("legacy", "new", "legacy"),
            obj("legacy", "old", "web"),
        ] {
            let r = Request::create(&other, "u").unwrap();
            assert!(!e.applies("unique-ingress-host", &r, before), "{other}");
        }
    }

    #[test]
    fn bad_exceptions_name_the_field() {
        let e = exception(json!({"policies": [], "reason": "x"})).unwrap_err();
        assert!(e.0.contains("spec.policies"), "{e}");
        let e = exception(json!({"policies": ["p"], "reason": "x", "expires": "tomorrow"}))
            .unwrap_err();
        assert!(
            e.0.contains("spec.expires: \"tomorrow\" is not an RFC 3339 time"),
            "{e}"
        );
        let e = exception(json!({"policies": ["p"], "reason": " "})).unwrap_err();
        assert!(e.0.contains("spec.reason"), "{e}");
    }

    /// Through the policy set: a covered failure becomes an Audit verdict
    /// naming the exception; an exception for a policy not loaded is an error.
    #[test]
    fn a_policy_set_turns_excepted_failures_into_audit_verdicts() {
        let policy = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
            "metadata": {"name": "no-cm"},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "resources": ["configmaps"], "operations": ["CREATE"]}]},
                     "validations": [{"expression": "false", "message": "no ConfigMaps"}]}});
        let exception = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "PolicyException",
            "metadata": {"name": "legacy"},
            "spec": {"policies": ["no-cm"], "names": ["old"], "reason": "migrating"}});
        let source = crate::inventory::Source {
            file: "p.yaml".into(),
            line: 1,
        };
        let docs = vec![(policy, source.clone()), (exception, source.clone())];
        let mut inv = crate::inventory::Inventory::new();
        let (set, errors) = super::super::PolicySet::compile(&docs, &mut inv);
        assert!(errors.is_empty(), "{errors:?}");
        let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "a"}});
        let (old, new) = (cm("old"), cm("new"));
        let verdicts = set
            .evaluate(&Request::create(&old, "u").unwrap(), &inv)
            .verdicts;
        assert_eq!(verdicts[0].action, Action::Audit);
        assert_eq!(
            verdicts[0].message,
            "excepted by PolicyException legacy (migrating): no ConfigMaps"
        );
        let verdicts = set
            .evaluate(&Request::create(&new, "u").unwrap(), &inv)
            .verdicts;
        assert_eq!(verdicts[0].action, Action::Deny);

        let stray = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "PolicyException",
            "metadata": {"name": "typo"}, "spec": {"policies": ["no-cms"], "reason": "x"}});
        let (_, errors) = super::super::PolicySet::compile(&[(stray, source)], &mut inv);
        assert_eq!(
            errors[0].message,
            "spec.policies: \"no-cms\" is not a loaded policy"
        );
    }
}
