//! Exceptions: a policy does not hold for some objects (a namespace, names,
//! a label selector), until an expiry, for a reason. Two forms, one spec:
//! - `PolicyException` documents in policy files, loaded with the policies
//!   (same files, same reloads);
//! - `InterlockException` objects in the cluster (the CRD in manifests/),
//!   watched by `serve` and the controller and listed by `audit`. The kind
//!   is not called PolicyException there: Kyverno's CRD has that name, and
//!   `kubectl get` must resolve ours without a group.
//!
//! `check`, `audit`, `serve` and the controller honour them alike: an
//! excepted failure is kept as an Audit finding whose message says which
//! exception excepted it, and never denies or warns.
//!
//! Who may except what ([`confine`]): an exception in a namespace excepts
//! only objects of that namespace, so whoever may create exceptions in a
//! tenant's namespace cannot except another tenant's objects (or
//! cluster-scoped ones). Only exceptions in the configured namespace
//! (`--exception-namespace`, default interlock-system) and file exceptions
//! without a namespace may name other namespaces or none (all).

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

/// Kind of the exceptions written in policy files.
pub const FILE_KIND: &str = "PolicyException";
/// Kind of the exceptions stored in the cluster (manifests/base/crd-interlockexception.yaml).
pub const CLUSTER_KIND: &str = "InterlockException";
/// Namespace whose exceptions may except objects of any namespace, unless
/// `--exception-namespace` says another.
pub const DEFAULT_NAMESPACE: &str = "interlock-system";

/// One compiled exception.
#[derive(Debug)]
pub struct Exception {
    pub name: String,
    /// How findings name it: `PolicyException legacy`, `InterlockException team-a/promo`.
    label: String,
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
        let kind = doc.get("kind").and_then(Json::as_str).unwrap_or(FILE_KIND);
        let label = match doc.pointer("/metadata/namespace").and_then(Json::as_str) {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        Ok(Exception {
            name: name.to_string(),
            label,
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

    /// The namespaces it excepts objects of (none: all).
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// When it stops applying, if ever.
    pub fn expires(&self) -> Option<DateTime<Utc>> {
        self.expires
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

/// Is this an exception document, in either form?
pub fn is_exception_kind(kind: &str) -> bool {
    kind == FILE_KIND || kind == CLUSTER_KIND
}

/// Confines an exception to what its namespace may except: one outside
/// `cluster_wide` (the namespace of cluster-wide exceptions) excepts only
/// objects of its own namespace, so `spec.namespaces` becomes exactly that
/// namespace; naming another is an error, never silently narrowed.
pub fn confine(doc: &mut Json, cluster_wide: &str) -> Result<(), SpecError> {
    let Some(ns) = doc
        .pointer("/metadata/namespace")
        .and_then(Json::as_str)
        .filter(|ns| !ns.is_empty() && *ns != cluster_wide)
        .map(str::to_string)
    else {
        return Ok(());
    };
    let Some(spec) = doc.get_mut("spec").and_then(Json::as_object_mut) else {
        return Ok(()); // parse says what is missing
    };
    let listed: Vec<&str> = spec
        .get("namespaces")
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    if let Some(other) = listed.iter().find(|n| **n != ns) {
        return Err(format!(
            "spec.namespaces: {other:?}: an exception in namespace {ns} excepts only objects of {ns}; \
             an exception for other namespaces belongs in namespace {cluster_wide}"
        )
        .into());
    }
    spec.insert("namespaces".into(), Json::from(vec![ns]));
    Ok(())
}

/// Turns every verdict that an exception of `lists` covers into an Audit
/// verdict that says so.
pub fn apply(lists: &[&[Exception]], req: &Request, verdicts: &mut [Verdict]) {
    if lists.iter().all(|l| l.is_empty()) {
        return;
    }
    let now = Utc::now();
    for v in verdicts.iter_mut() {
        let mut covering = lists.iter().flat_map(|l| l.iter());
        if let Some(e) = covering.find(|e| e.applies(&v.policy, req, now)) {
            v.action = Action::Audit;
            v.message = format!("excepted by {} ({}): {}", e.label, e.reason, v.message);
        }
    }
}

#[cfg(test)]
#[path = "exceptions_tests.rs"]
mod tests;
