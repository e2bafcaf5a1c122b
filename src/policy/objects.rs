//! InterlockPolicy objects of the cluster beside the policy files: which
//! generation of each object is in force, and what its status says. Pure:
//! the cluster layer feeds it the objects a watch saw and writes the
//! statuses it computes.
//!
//! Each object is compiled on its own when a generation is first seen, so
//! a broken edit is known by name and never reaches the set in force: the
//! last generation that compiled stays (a new object that does not compile
//! has none). Name clashes (docs/policy-kind.md): an object replaces a
//! bundled policy of its name; an object whose name a `-p` file policy
//! already has is refused, and the file's stays.

use super::PolicySet;
use crate::inventory::Source;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

/// The kind of the cluster-scoped policy object.
pub const KIND: &str = "InterlockPolicy";

/// One InterlockPolicy as last seen by the watch.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectDoc {
    pub uid: String,
    pub generation: i64,
    /// The whole object, with apiVersion and kind.
    pub doc: Json,
    /// Its `status` as stored (Null when none).
    pub status: Json,
}

/// The documents' source for messages and findings: where to find it
/// (only a tenant's policy has a slash in its snapshot name).
pub fn source_of(name: &str) -> Source {
    let kind = match name.contains('/') {
        true => super::tenant::KIND,
        false => KIND,
    };
    Source {
        file: format!("{kind}/{name}"),
        line: 0,
    }
}

/// What compiling one generation of an object found.
#[derive(Debug, Clone, PartialEq)]
struct Checked {
    uid: String,
    generation: i64,
    /// The compile errors (field and position in each).
    errors: Vec<String>,
    /// kube-apiserver's type-check warnings, as `status.typeChecking`
    /// (Null when none).
    type_checking: Json,
}

/// The per-object memory of compiles: the generation last checked and the
/// last that compiled, by name.
#[derive(Debug, Default)]
pub struct Ledger {
    checked: BTreeMap<String, Checked>,
    good: BTreeMap<String, ObjectDoc>,
}

/// The documents to load from the objects, and each object's status.
#[derive(Debug, Default)]
pub struct Resolved {
    /// The generation in force of each object that has one, with its source.
    pub docs: Vec<(Json, Source)>,
    /// Names of bundled policies the objects replace.
    pub replaces: BTreeSet<String>,
    /// The status each object should have, by name.
    pub statuses: BTreeMap<String, Json>,
}

impl Ledger {
    /// Compiles the generations not seen before, forgets deleted objects,
    /// and resolves clashes with `file_names` (policies of `-p` files,
    /// which win) and `bundled_names` (which the objects replace).
    pub fn resolve(
        &mut self,
        objects: &BTreeMap<String, ObjectDoc>,
        file_names: &BTreeSet<String>,
        bundled_names: &BTreeSet<String>,
    ) -> Resolved {
        self.checked.retain(|n, _| objects.contains_key(n));
        // A deleted and re-created object starts with nothing in force.
        self.good
            .retain(|n, g| objects.get(n).is_some_and(|o| o.uid == g.uid));
        let mut out = Resolved::default();
        for (name, o) in objects {
            let checked = self.check(name, o);
            if file_names.contains(name) {
                let conflict = Condition::conflict(name);
                out.statuses
                    .insert(name.clone(), status(o, &conflict, &checked.type_checking));
                continue;
            }
            let kept = self.good.get(name);
            let condition = match (checked.errors.is_empty(), kept) {
                (true, _) => Condition::ready(),
                (false, kept) => Condition::broken(&checked.errors, kept.map(|k| k.generation)),
            };
            out.statuses
                .insert(name.clone(), status(o, &condition, &checked.type_checking));
            if let Some(k) = kept {
                if bundled_names.contains(name) {
                    out.replaces.insert(name.clone());
                }
                out.docs.push((k.doc.clone(), source_of(name)));
            }
        }
        out
    }

    /// What the object's generation compiles to, checked once per
    /// generation; a generation that compiles becomes the one in force.
    fn check(&mut self, name: &str, o: &ObjectDoc) -> Checked {
        let seen = self
            .checked
            .get(name)
            .filter(|c| c.uid == o.uid && c.generation == o.generation);
        if let Some(c) = seen {
            return c.clone();
        }
        let checked = compile_one(o, name);
        if checked.errors.is_empty() {
            self.good.insert(name.to_string(), o.clone());
        }
        self.checked.insert(name.to_string(), checked.clone());
        checked
    }
}

/// One object's compile errors, each naming its field and the position in
/// the expression (the object has no file, so no line of one), and the
/// type-check warnings of what compiled, against the built-in kinds'
/// schemas.
fn compile_one(o: &ObjectDoc, name: &str) -> Checked {
    let (set, errors) = PolicySet::compile(&[(o.doc.clone(), source_of(name))]);
    let warnings: Vec<Json> = set
        .policies
        .iter()
        .flat_map(|p| p.schema_warnings(crate::k8s::openapi::builtin()))
        .map(|w| json!({"fieldRef": w.field_ref, "warning": w.warning}))
        .collect();
    Checked {
        uid: o.uid.clone(),
        generation: o.generation,
        errors: errors.into_iter().map(|e| e.message).collect(),
        type_checking: match warnings.is_empty() {
            true => Json::Null,
            false => json!({ "expressionWarnings": warnings }),
        },
    }
}

/// The `Ready` condition an object's status gets.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Condition {
    fn ready() -> Self {
        Condition {
            status: "True",
            reason: "Compiled",
            message: "compiled and in force".into(),
        }
    }

    fn conflict(name: &str) -> Self {
        Condition {
            status: "False",
            reason: "NameConflict",
            message: format!(
                "a policy file given with -p already has the name {name:?}; the file's policy is in force, this object is not"
            ),
        }
    }

    fn broken(errors: &[String], kept: Option<i64>) -> Self {
        let in_force = match kept {
            Some(g) => format!("generation {g} stays in force"),
            None => "no generation of this policy is in force".into(),
        };
        Condition {
            status: "False",
            reason: "CompileError",
            message: format!("{}; {in_force}", errors.join("; ")),
        }
    }
}

/// The status an object should have for `condition`: the generation it
/// speaks of, and a `Ready` condition whose transition time moves only
/// when its status does (kept from `o`'s stored status otherwise).
fn status(o: &ObjectDoc, condition: &Condition, type_checking: &Json) -> Json {
    let stored = o
        .status
        .pointer("/conditions")
        .and_then(Json::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    let since = stored
        .filter(|c| c["status"] == condition.status)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| Json::String(now()));
    let mut status = json!({
        "observedGeneration": o.generation,
        "conditions": [{
            "type": "Ready",
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
            "observedGeneration": o.generation,
            "lastTransitionTime": since,
        }],
    });
    if !type_checking.is_null() {
        status["typeChecking"] = type_checking.clone();
    }
    status
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Whether `desired` differs from what `o` stores (a write is needed).
pub fn status_differs(o: &ObjectDoc, desired: &Json) -> bool {
    &o.status != desired
}

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
