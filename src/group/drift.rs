//! `spec.drift`: what the controller does about a member whose stored
//! object differs from the group's manifest of it. Pure: the plan calls
//! [`decide`] for every listed member with the stored object.
//!
//! - `Revert` (default): the member is written whenever the stored object
//!   lacks or contradicts a field of the manifest ([`super::diff::needs_apply`]),
//!   exactly as before `spec.drift` existed; nothing below applies.
//! - `Report`: the member is written only when its manifest in the group
//!   changed since the controller last applied it. What was applied is
//!   remembered on the member itself, as the hash of the manifest in the
//!   annotation [`APPLIED_HASH_ANNOTATION`] (written with the member, in the
//!   same server-side apply): the decision stays a function of the spec and
//!   the stored object, survives a restart or a lost status, and costs no
//!   extra write. Otherwise the fields that differ are listed
//!   ([`super::diff::differing_fields`]) and nothing is written.
//!
//! Cases under `Report`, and why:
//! - no stored object: created (there is nothing to report against);
//! - owned by the group, its hash that of the manifest: not written, the
//!   differing fields reported;
//! - owned, another hash or none (the manifest changed, or the member was
//!   last written under `Revert` or by an older controller): written, which
//!   puts back the manifest's fields and records the hash (a change of the
//!   manifest is an instruction to apply it);
//! - an object of that name that the group does not own yet (a live
//!   application moved under a group): taken over only if it already holds
//!   the manifest (the apply then only adds the ownerReference, label and
//!   hash); otherwise its differences are reported and it is left alone,
//!   so that the team sees what taking it over would change first (set
//!   `drift: Revert`, or make the manifest match, to take it over).

use super::crd::DriftPolicy;
use super::diff::{differing_fields, needs_apply};
use serde_json::{Map, Value};

/// Annotation on a member written under `drift: Report`: the hash of the
/// manifest the controller last applied ([`manifest_hash`]).
pub const APPLIED_HASH_ANNOTATION: &str = "interlock.dev/applied-hash";

/// At most this many fields are listed per drifted member in its status
/// (its message counts them all).
pub const MAX_FIELDS: usize = 20;

/// What to do with one listed member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to write: the stored object holds the manifest.
    Converged,
    /// Apply the member.
    Write,
    /// `Report`: the member's manifest is applied; the stored object
    /// differs in these fields and is left so.
    Drifted(Vec<String>),
    /// `Report`: an object the group does not own differs from the
    /// manifest in these fields; not taken over.
    NotTakenOver(Vec<String>),
}

/// The decision for a member. `desired` is the member as it would be
/// applied (ownership, and under `Report` the hash annotation, included);
/// `manifest` the member without what the group adds; `owned`: `live`
/// carries the group's ownerReference.
pub fn decide(
    policy: DriftPolicy,
    desired: &Value,
    manifest: &Value,
    live: Option<&Value>,
    owned: bool,
) -> Decision {
    let Some(live) = live else {
        return Decision::Write;
    };
    let stale = needs_apply(desired, live);
    if policy == DriftPolicy::Revert || !stale {
        return if stale {
            Decision::Write
        } else {
            Decision::Converged
        };
    }
    if !owned {
        let fields = differing_fields(manifest, live);
        return if fields.is_empty() {
            Decision::Write
        } else {
            Decision::NotTakenOver(fields)
        };
    }
    if applied_hash(live) != applied_hash(desired) {
        return Decision::Write;
    }
    Decision::Drifted(differing_fields(desired, live))
}

/// The hash annotation of an object, if it has one.
pub fn applied_hash(v: &Value) -> Option<&str> {
    v.pointer("/metadata/annotations")?
        .get(APPLIED_HASH_ANNOTATION)?
        .as_str()
}

/// `desired` with the hash of `manifest` in its annotations.
pub fn with_hash(mut desired: Value, manifest: &Value) -> Value {
    let hash = manifest_hash(manifest);
    if let Some(meta) = desired.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(APPLIED_HASH_ANNOTATION.into(), Value::String(hash));
        }
    }
    desired
}

/// `sha256:` and the hex SHA-256 of the manifest's canonical JSON (keys
/// sorted at every level, so neither the order of keys in the stored
/// group nor serde's settings change it). The hash annotation itself is
/// left out, should a manifest carry one.
pub fn manifest_hash(manifest: &Value) -> String {
    let mut text = String::new();
    canonical(manifest, &mut text, true);
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn canonical(v: &Value, out: &mut String, root: bool) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            let mut first = true;
            for k in keys {
                let child = &m[k];
                if root && k == "metadata" {
                    let mut meta = child.clone();
                    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                        a.remove(APPLIED_HASH_ANNOTATION);
                    }
                    push_key(out, k, &mut first);
                    canonical(&meta, out, false);
                    continue;
                }
                push_key(out, k, &mut first);
                canonical(child, out, false);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out, false);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn push_key(out: &mut String, k: &str, first: &mut bool) {
    if !*first {
        out.push(',');
    }
    *first = false;
    out.push_str(&Value::String(k.to_string()).to_string());
    out.push(':');
}

#[cfg(test)]
#[path = "drift_tests.rs"]
mod tests;
