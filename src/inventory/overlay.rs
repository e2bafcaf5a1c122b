//! An inventory seen with some objects replaced, added or removed, without
//! copying it: the controller validates a group's desired members against
//! "the live inventory in which this group's current members are replaced
//! by the desired ones". The base is borrowed (read lock held by the
//! caller); only the few changed objects are stored, projected and indexed
//! exactly as the base would store them.

use super::view::Lookup;
use super::{Entry, IndexId, Inventory, NoIdentity, ObjectKey, ObjectKeyRef};
use serde_json::Value as Json;
use std::collections::HashSet;

pub struct Overlay<'b> {
    base: &'b Inventory,
    /// The objects put in place: same projection and indexes as `base`.
    added: Inventory,
    /// Keys of `base` that are hidden (removed or replaced).
    hidden: HashSet<ObjectKey>,
}

impl<'b> Overlay<'b> {
    pub fn new(base: &'b Inventory) -> Self {
        Overlay {
            base,
            added: base.shell(),
            hidden: HashSet::new(),
        }
    }

    /// Hides an object of the base (a member the group no longer declares).
    pub fn remove(&mut self, key: &ObjectKey) {
        self.hidden.insert(key.clone());
        self.added.remove(key);
    }

    /// Puts `object` in place of the base's object of the same key, if any.
    pub fn put(&mut self, object: &Json) -> Result<(), NoIdentity> {
        let prepared = self.added.prepare(object)?;
        self.hidden.insert(prepared.key().clone());
        let errors = self.added.insert(prepared, None);
        for e in errors {
            tracing::debug!(error = %e, "index key expression failed on an overlay object");
        }
        Ok(())
    }

    fn visible(&self, e: &Entry) -> bool {
        !self.hidden.contains(&e.key)
    }

    fn merge<'s>(&'s self, base: Vec<&'s Entry>, added: Vec<&'s Entry>) -> Vec<&'s Entry> {
        if added.is_empty() && self.hidden.is_empty() {
            return base;
        }
        let mut out: Vec<&Entry> = base.into_iter().filter(|e| self.visible(e)).collect();
        out.extend(added);
        out.sort_by(|a, b| (&a.key.namespace, &a.key.name).cmp(&(&b.key.namespace, &b.key.name)));
        out
    }
}

impl Lookup for Overlay<'_> {
    fn find(&self, key: ObjectKeyRef) -> Option<&Entry> {
        if let Some(e) = self.added.find(key) {
            return Some(e);
        }
        self.base.find(key).filter(|e| self.visible(e))
    }

    fn list(&self, group: &str, kind: &str, namespace: Option<&str>) -> Vec<&Entry> {
        self.merge(
            self.base.list(group, kind, namespace),
            self.added.list(group, kind, namespace),
        )
    }

    fn lookup_index(&self, id: IndexId, key: &str) -> Vec<&Entry> {
        self.merge(
            self.base.lookup_index(id, key),
            self.added.lookup_index(id, key),
        )
    }
}

#[cfg(test)]
#[path = "overlay_tests.rs"]
mod tests;
