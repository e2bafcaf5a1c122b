//! Claims: an InterlockPolicy's `claims` say that a key of one of its
//! indexes is held by one namespace (or one object) at a time. The index
//! check sees only what the inventory holds; two webhook replicas that
//! admit two writes at once never see each other's. `serve` makes the API
//! server the arbiter: an admitted write first creates a claim object per
//! key (docs/admission.md, "Claims across replicas"). This module says
//! what a write would claim and whether a claim is still held, from the
//! policies and the inventory alone.

use super::model::ClaimDecl;
use super::{PolicySet, Request};
use crate::inventory::{IndexId, Inventory, ObjectKey};
use serde_json::Value as Json;
use std::collections::HashMap;

/// Who holds a claimed key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// The object's namespace: objects of one namespace share the key.
    Namespace,
    /// The object itself (`namespace/name`).
    Object,
}

impl Holder {
    fn of(self, namespace: &str, name: &str) -> String {
        match self {
            Holder::Namespace => namespace.to_string(),
            Holder::Object => format!("{namespace}/{name}"),
        }
    }
}

/// A compiled `spec.claims[]` entry.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The index's name in the policy.
    pub index: String,
    id: IndexId,
    pub holder: Holder,
}

/// A claim that names no index of its policy, or no known holder; `at` is
/// its position in `spec.claims`.
#[derive(Debug, thiserror::Error)]
pub(super) enum ClaimError {
    #[error("spec.claims[{at}].index: {index:?} is not one of the policy's spec.indexes")]
    UnknownIndex { at: usize, index: String },
    #[error("spec.claims[{at}].holder: {holder:?} is not Namespace or Object")]
    UnknownHolder { at: usize, holder: String },
}

/// Compiles `spec.claims` against the policy's declared indexes.
pub(super) fn compile(
    decls: &[ClaimDecl],
    indexes: &HashMap<String, IndexId>,
) -> Result<Vec<Claim>, ClaimError> {
    decls
        .iter()
        .enumerate()
        .map(|(at, c)| {
            let id = *indexes
                .get(&c.index)
                .ok_or_else(|| ClaimError::UnknownIndex {
                    at,
                    index: c.index.clone(),
                })?;
            let holder = match c.holder.as_str() {
                "Namespace" => Holder::Namespace,
                "Object" => Holder::Object,
                other => {
                    return Err(ClaimError::UnknownHolder {
                        at,
                        holder: other.to_string(),
                    })
                }
            };
            Ok(Claim {
                index: c.index.clone(),
                id,
                holder,
            })
        })
        .collect()
}

/// One key an admitted write must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub policy: String,
    pub index: String,
    pub key: String,
    pub holder: String,
    /// The policy's failurePolicy is Fail: a claim that cannot be made
    /// refuses the write.
    pub fail_closed: bool,
}

impl PolicySet {
    /// The keys that `r` (of `object`) claims under the policies that
    /// apply to it. An UPDATE claims only the keys its old version did not
    /// yield: those are stored, so every replica's index check sees them.
    pub fn claims_of(&self, r: &Request, inv: &Inventory, object: &Json) -> Vec<Wanted> {
        let Some(key) = ObjectKey::of(object) else {
            return vec![];
        };
        let mut out = Vec::new();
        // A policy that cannot refuse the write has nothing to arbitrate.
        let arbitrated =
            |p: &&super::CompiledPolicy| !p.claims.is_empty() && p.may_deny_at_admission();
        for p in self.applying_to(r, inv).filter(arbitrated) {
            for c in &p.claims {
                let holder = c.holder.of(&key.namespace, &key.name);
                let held = r
                    .old_object
                    .get()
                    .map(|old| inv.index_keys(c.id, old))
                    .unwrap_or_default();
                for k in inv
                    .index_keys(c.id, object)
                    .into_iter()
                    .filter(|k| !held.contains(k))
                {
                    out.push(Wanted {
                        policy: p.name.clone(),
                        index: c.index.clone(),
                        key: k,
                        holder: holder.clone(),
                        fail_closed: p.failure_policy == super::FailurePolicy::Fail,
                    });
                }
            }
        }
        out
    }

    /// Whether an object in `inv` holds `key` of `policy`'s claim on
    /// `index` for `holder`; `None` when no loaded policy declares that
    /// claim any more (nothing holds it).
    pub fn claim_held(
        &self,
        inv: &Inventory,
        policy: &str,
        index: &str,
        key: &str,
        holder: &str,
    ) -> Option<bool> {
        let p = self.policies.iter().find(|p| p.name == policy)?;
        let c = p.claims.iter().find(|c| c.index == index)?;
        Some(
            inv.lookup_index(c.id, key)
                .iter()
                .any(|e| c.holder.of(&e.key.namespace, &e.key.name) == holder),
        )
    }

    /// Whether some policy declares claims (serve then needs a claims
    /// namespace and the webhook has side effects).
    pub fn has_claims(&self) -> bool {
        self.policies.iter().any(|p| !p.claims.is_empty())
    }
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
