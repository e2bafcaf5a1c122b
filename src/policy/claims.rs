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

/// Compiles `spec.claims` against the policy's declared indexes.
pub(super) fn compile(
    decls: &[ClaimDecl],
    indexes: &HashMap<String, IndexId>,
) -> Result<Vec<Claim>, String> {
    decls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let id = *indexes.get(&c.index).ok_or_else(|| {
                format!(
                    "spec.claims[{i}].index: {:?} is not one of the policy's spec.indexes",
                    c.index
                )
            })?;
            let holder = match c.holder.as_str() {
                "Namespace" => Holder::Namespace,
                "Object" => Holder::Object,
                other => {
                    return Err(format!(
                        "spec.claims[{i}].holder: {other:?} is not Namespace or Object"
                    ))
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
mod tests {
    use super::*;
    use crate::fixtures::ingress;

    fn bundled() -> (PolicySet, Inventory) {
        let mut inv = Inventory::new();
        let (set, errors) =
            PolicySet::compile_documents(crate::bundled::documents().documents, &mut inv);
        assert!(errors.is_empty(), "{errors:?}");
        (set, inv)
    }

    #[test]
    fn an_ingress_claims_its_hosts_for_its_namespace() {
        let (set, mut inv) = bundled();
        assert!(set.has_claims());
        let web = ingress("team-a", "web", "shop.example.com", "cert");
        let r = Request::create(&web, "alice").expect("request");
        let wanted = set.claims_of(&r, &inv, &web);
        assert_eq!(
            wanted,
            [Wanted {
                policy: "unique-ingress-host".into(),
                index: "ingress-hosts".into(),
                key: "shop.example.com".into(),
                holder: "team-a".into(),
                fail_closed: true,
            }]
        );
        let held = |inv: &Inventory, holder| {
            set.claim_held(
                inv,
                "unique-ingress-host",
                "ingress-hosts",
                "shop.example.com",
                holder,
            )
        };
        assert_eq!(held(&inv, "team-a"), Some(false), "nothing stored yet");
        inv.upsert(&web, None).expect("stored");
        assert_eq!(held(&inv, "team-a"), Some(true));
        assert_eq!(held(&inv, "team-b"), Some(false));
        assert_eq!(
            set.claim_held(
                &inv,
                "retired-policy",
                "ingress-hosts",
                "shop.example.com",
                "team-a"
            ),
            None
        );
        // An UPDATE claims only what its old version did not hold.
        let mut moved = web.clone();
        moved["spec"]["rules"] =
            serde_json::json!([{"host": "shop.example.com"}, {"host": "new.example.com"}]);
        let mut r = Request::create(&moved, "alice").expect("request");
        r.operation = super::super::Operation::Update;
        r.old_object = super::super::OldObject::Json(&web);
        let keys: Vec<String> = set
            .claims_of(&r, &inv, &moved)
            .into_iter()
            .map(|w| w.key)
            .collect();
        assert_eq!(keys, ["new.example.com"]);
        // A ConfigMap claims nothing.
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "team-a"}});
        let r = Request::create(&cm, "alice").expect("request");
        assert!(set.claims_of(&r, &inv, &cm).is_empty());
    }

    #[test]
    fn claims_name_a_declared_index_and_a_known_holder() {
        let policy = |claims: serde_json::Value| {
            serde_json::json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
                "metadata": {"name": "p"},
                "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"], "operations": ["CREATE"]}]},
                    "indexes": [{"name": "names", "apiVersion": "v1", "kind": "ConfigMap", "keys": "[object.metadata.name]"}],
                    "claims": claims,
                    "validations": [{"expression": "true"}]}})
        };
        let errors = |claims| {
            let source = crate::inventory::Source {
                file: "p.yaml".into(),
                line: 1,
            };
            let (_, errors) =
                PolicySet::compile(&[(policy(claims), source)], &mut Inventory::new());
            errors.into_iter().map(|e| e.message).collect::<Vec<_>>()
        };
        assert!(errors(serde_json::json!([{"index": "names", "holder": "Object"}])).is_empty());
        let e = errors(serde_json::json!([{"index": "other", "holder": "Object"}]));
        assert!(e[0].contains("spec.claims[0].index"), "{e:?}");
        let e = errors(serde_json::json!([{"index": "names", "holder": "Cluster"}]));
        assert!(e[0].contains("not Namespace or Object"), "{e:?}");
    }
}
