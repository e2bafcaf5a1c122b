//! A policy set loaded and compiled from files or the bundled library,
//! with what an inventory must keep and index for it, built without
//! touching any live inventory. Every front-end loads through here: check
//! and audit, `eval`, `webhook-config`, the controller and the webhook's
//! reloads alike.

use super::objects::{Ledger, ObjectDoc};
use super::overrides::Overrides;
use super::PolicySet;
use crate::inventory::projection::Projection;
use crate::inventory::{IndexDecl, Inventory};
use crate::k8s::kind::GroupVersionKind;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Why policies or inventory files did not load; the whole set is refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyLoadError {
    #[error("policies do not load:\n{}", join(.0))]
    Policies(Vec<String>),
    #[error("an index declared by the policies does not compile: {0}")]
    Index(#[from] crate::cel::CompileError),
    #[error("--inventory: {0}")]
    Inventory(String),
    #[error(
        "no policy in {0}: refusing to enforce nothing (give --allow-empty to serve an empty set)"
    )]
    Empty(String),
}

fn join(v: &[String]) -> String {
    v.join("\n")
}

/// A compiled policy set with what the inventory must keep and index for
/// it, built without touching any live inventory.
pub struct LoadedPolicies {
    pub policies: PolicySet,
    pub projection: Projection,
    pub indexes: Vec<IndexDecl>,
}

impl LoadedPolicies {
    /// The policies of `-p` paths, or the bundled library when none.
    pub fn from_paths(paths: &[PathBuf]) -> Result<LoadedPolicies, PolicyLoadError> {
        LoadedPolicies::from_paths_with(paths, &Overrides::default())
    }

    /// [`LoadedPolicies::from_paths`], with policies turned off or their actions
    /// changed by `overrides`.
    pub fn from_paths_with(
        paths: &[PathBuf],
        overrides: &Overrides,
    ) -> Result<LoadedPolicies, PolicyLoadError> {
        let docs = crate::policy::files::load_documents(paths);
        LoadedPolicies::compile(docs, overrides, &[])
    }

    /// [`LoadedPolicies::from_paths_with`] with the cluster's InterlockPolicy
    /// objects beside the files (see `policy::objects` for which wins a name);
    /// also returns the status each object should have.
    pub fn with_objects(
        paths: &[PathBuf],
        overrides: &Overrides,
        objects: &BTreeMap<String, ObjectDoc>,
        ledger: &mut Ledger,
    ) -> Result<(LoadedPolicies, BTreeMap<String, Json>), PolicyLoadError> {
        let mut docs = crate::policy::files::load_documents(paths);
        let names: BTreeSet<String> = docs
            .documents
            .iter()
            .filter_map(|d| d.value.pointer("/metadata/name")?.as_str())
            .map(str::to_string)
            .collect();
        let none = BTreeSet::new();
        let (files, bundled) = match paths.is_empty() {
            true => (&none, &names),
            false => (&names, &none),
        };
        let resolved = ledger.resolve(objects, files, bundled);
        docs.documents.retain(|d| {
            let name = d.value.pointer("/metadata/name").and_then(Json::as_str);
            !name.is_some_and(|n| resolved.replaces.contains(n))
        });
        let loaded = LoadedPolicies::compile(docs, overrides, &resolved.docs)?;
        Ok((loaded, resolved.statuses))
    }

    /// Compiles file documents and object documents as one set.
    fn compile(
        mut docs: crate::manifest::Loaded,
        overrides: &Overrides,
        objects: &[(Json, crate::inventory::Source)],
    ) -> Result<LoadedPolicies, PolicyLoadError> {
        if !docs.errors.is_empty() {
            return Err(PolicyLoadError::Policies(
                docs.errors.iter().map(|e| e.to_string()).collect(),
            ));
        }
        overrides
            .apply(&mut docs.documents)
            .map_err(PolicyLoadError::Policies)?;
        let (policies, errors) = PolicySet::compile_documents_with(docs.documents, objects);
        if !errors.is_empty() {
            return Err(PolicyLoadError::Policies(
                errors.iter().map(|e| e.to_string()).collect(),
            ));
        }
        // Index ids are positions in the set's declarations; `install`
        // makes the live inventory's declarations the same list.
        Ok(LoadedPolicies {
            projection: policies.projection(),
            indexes: policies.index_decls(),
            policies,
        })
    }

    /// An empty inventory that stores and indexes objects as these
    /// policies need.
    pub fn inventory(&self) -> Result<Inventory, PolicyLoadError> {
        let mut inv = Inventory::new();
        inv.set_indexes(&self.indexes)?;
        inv.set_projection(self.projection.clone());
        Ok(inv)
    }

    /// The kinds watchers must keep in the inventory.
    pub fn kinds(&self) -> Vec<GroupVersionKind> {
        self.policies.kinds_read()
    }
}
