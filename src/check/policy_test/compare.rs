//! Expected against found: findings, and the patches of mutations.

use super::spec::{Expectation, MutationExpectation};
use crate::check::run::CheckOptions;
use crate::inventory::Inventory;
use crate::manifest::Document;
use crate::policy::PolicySet;
use crate::report::Finding;
use regex::Regex;
use serde_json::Value as Json;

fn matches(e: &Expectation, re: Option<&Regex>, f: &Finding) -> bool {
    e.object.is(
        &f.object.kind,
        f.object.namespace.as_deref(),
        &f.object.name,
    ) && f.action.as_str() == e.action
        && e.message_contains
            .as_deref()
            .is_none_or(|m| f.message.contains(m))
        && re.is_none_or(|r| r.is_match(&f.message))
}

/// Each expectation takes `count` (default 1) findings that match it;
/// a finding no expectation takes is unexpected.
pub(super) fn findings(expect: &[Expectation], found: &[Finding], failures: &mut Vec<String>) {
    let mut used = vec![false; found.len()];
    for (i, e) in expect.iter().enumerate() {
        let re = match e.message_matches.as_deref().map(Regex::new).transpose() {
            Ok(re) => re,
            Err(err) => {
                failures.push(format!("spec.expect[{i}].messageMatches: {err}"));
                continue;
            }
        };
        let want = e.count.unwrap_or(1);
        let mut got = 0;
        for (j, f) in found.iter().enumerate() {
            if got < want && !used[j] && matches(e, re.as_ref(), f) {
                used[j] = true;
                got += 1;
            }
        }
        if got < want {
            failures.push(format!(
                "expected {} {} on {}{}{}, found {got}",
                want,
                e.action,
                e.object,
                e.message_contains
                    .as_deref()
                    .map(|m| format!(" with a message containing {m:?}"))
                    .unwrap_or_default(),
                e.message_matches
                    .as_deref()
                    .map(|m| format!(" with a message matching /{m}/"))
                    .unwrap_or_default(),
            ));
        }
    }
    for (f, _) in found.iter().zip(used).filter(|(_, u)| !u) {
        failures.push(format!(
            "unexpected {} on {}: {}",
            f.action, f.object, f.message
        ));
    }
}

/// What the policies' mutations did to one checked object.
pub(super) struct Patched {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub outcome: Result<(Vec<Json>, Json), MutateError>,
}

/// Why the mutations of a checked object give no patched object.
#[derive(Debug, thiserror::Error)]
pub(super) enum MutateError {
    #[error(transparent)]
    Policy(#[from] crate::policy::MutationError),
    #[error("the mutations are not a valid JSON patch: {0}")]
    Invalid(serde_json::Error),
    #[error("the mutations' patch does not apply: {0}")]
    DoesNotApply(json_patch::PatchError),
}

impl std::fmt::Display for Patched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// Each checked object through the policies' mutations, sent as the case
/// sends it, against the inventory its checks saw.
pub(super) fn mutations(
    objects: &[Document],
    policies: &PolicySet,
    inventory: &Inventory,
    check: &CheckOptions,
) -> Vec<Patched> {
    let mut out = Vec::new();
    for d in objects {
        let mut value = d.value.clone();
        check.as_admitted(&mut value);
        let Some(req) = check.request(&value, &check.user) else {
            continue;
        };
        // MutatingAdmissionPolicies first (kube-apiserver's in-process
        // plugin runs before webhooks), then InterlockPolicy mutations.
        let outcome = policies
            .mutate(&req, inventory)
            .map_err(MutateError::from)
            .and_then(|ops| {
                let patch: json_patch::Patch = serde_json::from_value(Json::Array(ops.clone()))
                    .map_err(MutateError::Invalid)?;
                let mut patched = value.clone();
                json_patch::patch(&mut patched, &patch).map_err(MutateError::DoesNotApply)?;
                Ok((ops, patched))
            });
        out.push(Patched {
            kind: d.kind().to_string(),
            namespace: value
                .pointer("/metadata/namespace")
                .and_then(Json::as_str)
                .map(str::to_string),
            name: d.name().unwrap_or_default().to_string(),
            outcome,
        });
    }
    out
}

/// The first place where `a` and `b` differ, as a JSON pointer.
fn first_difference(a: &Json, b: &Json, at: String) -> Option<String> {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            let keys = x.keys().chain(y.keys().filter(|k| !x.contains_key(*k)));
            keys.into_iter().find_map(|k| {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, here),
                    _ => Some(here),
                }
            })
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, format!("{at}/{i}"))),
        _ if a == b => None,
        _ => Some(at),
    }
}

pub(super) fn patches(
    expect: &[MutationExpectation],
    found: &[Patched],
    failures: &mut Vec<String>,
) {
    let mut seen = vec![false; found.len()];
    for e in expect {
        let Some(i) = found
            .iter()
            .position(|p| e.object.is(&p.kind, p.namespace.as_deref(), &p.name))
        else {
            failures.push(format!(
                "spec.expectMutations: {} is not among the checked objects",
                e.object
            ));
            continue;
        };
        seen[i] = true;
        let (ops, patched) = match &found[i].outcome {
            Ok(o) => o,
            Err(message) => {
                failures.push(format!("mutating {}: {message}", e.object));
                continue;
            }
        };
        if let Some(want) = &e.patch {
            if want != ops {
                failures.push(format!(
                    "mutating {}: expected the patch {}, got {}",
                    e.object,
                    Json::Array(want.clone()),
                    Json::Array(ops.clone())
                ));
            }
        }
        if let Some(want) = &e.patched {
            if let Some(at) = first_difference(want, patched, String::new()) {
                failures.push(format!(
                    "mutating {}: the patched object differs at {}: expected {}, got {}",
                    e.object,
                    if at.is_empty() { "its root" } else { &at },
                    want.pointer(&at).map_or("nothing".into(), Json::to_string),
                    patched
                        .pointer(&at)
                        .map_or("nothing".into(), Json::to_string),
                ));
            }
        }
    }
    for (p, _) in found.iter().zip(seen).filter(|(_, s)| !s) {
        match &p.outcome {
            Ok((ops, _)) if ops.is_empty() => {}
            Ok((ops, _)) => failures.push(format!(
                "unexpected mutation of {p}: {}",
                Json::Array(ops.clone())
            )),
            Err(message) => failures.push(format!("mutating {p}: {message}")),
        }
    }
}
