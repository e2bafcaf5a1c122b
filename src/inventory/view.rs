//! What evaluation reads of an inventory. The policy engine sees cluster
//! state only through [`Lookup`], so the same policies run over the live
//! inventory (admission, audit), a file inventory (`check`) and an
//! [`Overlay`](super::overlay::Overlay): the live inventory with a group's
//! desired members in place of its current ones (the controller).

use super::{Entry, IndexId, Inventory, ObjectKeyRef};

pub trait Lookup {
    /// One object by key.
    fn find(&self, key: ObjectKeyRef) -> Option<&Entry>;
    /// Objects of a kind in a namespace (`None`: every namespace), ordered by
    /// namespace then name.
    fn list(&self, group: &str, kind: &str, namespace: Option<&str>) -> Vec<&Entry>;
    /// Objects whose index `id` yields `key`.
    fn lookup_index(&self, id: IndexId, key: &str) -> Vec<&Entry>;
}

impl Lookup for Inventory {
    fn find(&self, key: ObjectKeyRef) -> Option<&Entry> {
        Inventory::find(self, key)
    }

    fn list(&self, group: &str, kind: &str, namespace: Option<&str>) -> Vec<&Entry> {
        Inventory::list(self, group, kind, namespace)
    }

    fn lookup_index(&self, id: IndexId, key: &str) -> Vec<&Entry> {
        Inventory::lookup_index(self, id, key)
    }
}

/// No objects: what a policy that never reads the inventory is evaluated
/// over, outside the cluster state's lock.
pub struct Nothing;

impl Lookup for Nothing {
    fn find(&self, _: ObjectKeyRef) -> Option<&Entry> {
        None
    }

    fn list(&self, _: &str, _: &str, _: Option<&str>) -> Vec<&Entry> {
        Vec::new()
    }

    fn lookup_index(&self, _: IndexId, _: &str) -> Vec<&Entry> {
        Vec::new()
    }
}
