//! Tenant policies: an InterlockNamespacePolicy is an InterlockPolicy
//! confined to the namespace it lives in. It judges only objects of that
//! namespace, looks up only objects of that namespace, and cannot weaken
//! any other policy: it has its own name (`namespace/name`, which no
//! cluster policy can have, so it never replaces nor overrides one) and
//! only adds findings.
//!
//! What it may not write is refused three times over: statically by the
//! CRD's validation rules (claims, indexes, params), at admission by the
//! webhook for lookups naming another namespace ([`refusal`]), and by the
//! compiler whatever reached the cluster (the status says so). A lookup
//! whose namespace is computed is confined when it runs (`host.rs`).

use super::compile::{policy_env, Expressions};
use super::model::PolicySpec;
use super::{host, PolicyKind};
use serde_json::Value as Json;

/// The namespaced policy kind.
pub const KIND: &str = "InterlockNamespacePolicy";

/// The name a tenant policy is known by in findings, reports and
/// statuses: no cluster policy's name has a slash.
pub fn qualified(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The namespace of a tenant policy document (None: another kind).
pub fn namespace_of(doc: &Json) -> Option<&str> {
    (doc.get("kind").and_then(Json::as_str) == Some(KIND))
        .then(|| doc.pointer("/metadata/namespace").and_then(Json::as_str))
        .flatten()
}

/// Every way `spec` reaches beyond `namespace`, each naming its field.
/// `expressions`: the policy's compiled expressions, when they compile.
pub(super) fn reach(
    namespace: &str,
    spec: &PolicySpec,
    expressions: Option<&Expressions>,
) -> Vec<String> {
    let mut out = Vec::new();
    let spans = "an InterlockNamespacePolicy is confined to its namespace";
    if !spec.claims.is_empty() {
        out.push(format!(
            "spec.claims: {spans}; claims hold keys across namespaces"
        ));
    }
    if !spec.indexes.is_empty() {
        out.push(format!(
            "spec.indexes: {spans}; an index spans every namespace"
        ));
    }
    if spec.param_kind.is_some() || spec.param_ref.is_some() {
        out.push(format!("spec.paramKind: {spans}; it takes no params"));
    }
    for (field, program) in expressions.map(Expressions::fields).unwrap_or_default() {
        for (id, args) in program.host_calls() {
            let call = match id {
                host::GET => "inventory.get",
                host::LIST => "inventory.list",
                _ => continue,
            };
            match args.get(2).cloned().flatten() {
                Some(ns) if ns != namespace => out.push(format!(
                    "{field}: {call} reads {}; an InterlockNamespacePolicy of namespace {namespace:?} reads only its own",
                    match ns.as_str() {
                        "" => "every namespace (or cluster-scoped objects)".to_string(),
                        other => format!("namespace {other:?}"),
                    }
                )),
                _ => {}
            }
        }
    }
    out
}

/// Why the webhook refuses this InterlockNamespacePolicy (None: admitted).
/// Only reach is judged here: an expression that does not compile is
/// admitted and reported in the object's status, as for InterlockPolicy.
pub fn refusal(doc: &Json) -> Option<String> {
    let namespace = namespace_of(doc)?;
    let spec: PolicySpec = serde_json::from_value(doc.get("spec")?.clone()).ok()?;
    let (mut env, _) = policy_env(PolicyKind::Interlock, &spec);
    let expressions = Expressions::compile(&mut env, PolicyKind::Interlock, &spec).ok();
    let errors = reach(namespace, &spec, expressions.as_ref());
    (!errors.is_empty()).then(|| errors.join("; "))
}

#[cfg(test)]
#[path = "tenant_tests.rs"]
mod tests;
