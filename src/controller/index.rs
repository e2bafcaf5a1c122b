//! The store behind one member kind's cache: the objects the watch holds,
//! indexed by the group each one names (its ApplySet part-of label, the
//! UIDs of its ownerReferences), so a group's pass reads its own objects
//! and never walks the namespace. Kept in step with the watch's events; a
//! re-list swaps the whole store at its end, as kube-runtime's reflector
//! does, so a reader never sees half a list.

use crate::group::crd::PART_OF_LABEL;
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Where a cached object is (one store holds one kind). The namespace is
/// empty for a cluster-scoped object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name {
    pub namespace: String,
    pub name: String,
}

impl Name {
    pub fn new(namespace: &str, name: &str) -> Name {
        Name {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    fn of(o: &DynamicObject) -> Option<Name> {
        Some(Name::new(
            o.metadata.namespace.as_deref().unwrap_or(""),
            o.metadata.name.as_deref()?,
        ))
    }
}

/// What ties an object to a group, as the plan reads it: the group's
/// ApplySet id in the part-of label, or the group's UID in an
/// ownerReference. Either alone puts the object in the group's view (the
/// plan decides what each one means: owned, released, in conflict).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GroupKey {
    ApplySet(String),
    Owner(String),
}

fn keys_of(o: &DynamicObject) -> Vec<GroupKey> {
    let label = o
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(PART_OF_LABEL))
        .map(|id| GroupKey::ApplySet(id.clone()));
    let owners = o
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| GroupKey::Owner(r.uid.clone()));
    label.into_iter().chain(owners).collect()
}

type Objects = HashMap<Name, Arc<DynamicObject>>;

#[derive(Default)]
pub struct Indexed {
    objects: Objects,
    by_group: HashMap<GroupKey, HashSet<Name>>,
    /// The list under way, between `Init` and `InitDone`.
    listing: Option<Objects>,
}

impl Indexed {
    /// Takes one watch event; returns the objects whose groups should be
    /// woken: the one applied or deleted, and after a re-list those that
    /// are new, changed or gone since the previous contents.
    pub fn handle(&mut self, event: Event<DynamicObject>) -> Vec<Arc<DynamicObject>> {
        match event {
            Event::Apply(o) => self.apply(o).into_iter().collect(),
            Event::Delete(o) => self.delete(&o).into_iter().collect(),
            Event::Init => {
                self.listing = Some(Objects::new());
                vec![]
            }
            Event::InitApply(o) => {
                if let (Some(listing), Some(name)) = (self.listing.as_mut(), Name::of(&o)) {
                    listing.insert(name, Arc::new(trimmed(o)));
                }
                vec![]
            }
            Event::InitDone => self.swap_listed(),
        }
    }

    pub fn get(&self, name: &Name) -> Option<Arc<DynamicObject>> {
        self.objects.get(name).cloned()
    }

    /// Every object that names one of `keys`, each once.
    pub fn of_group(&self, keys: &[GroupKey]) -> Vec<(Name, Arc<DynamicObject>)> {
        let mut names: Vec<&Name> = keys
            .iter()
            .filter_map(|k| self.by_group.get(k))
            .flatten()
            .collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter_map(|n| Some((n.clone(), self.objects.get(n)?.clone())))
            .collect()
    }

    fn apply(&mut self, o: DynamicObject) -> Option<Arc<DynamicObject>> {
        let name = Name::of(&o)?;
        let o = Arc::new(trimmed(o));
        if let Some(old) = self.objects.insert(name.clone(), o.clone()) {
            self.unindex(&name, &old);
        }
        self.index(&name, &o);
        Some(o)
    }

    fn delete(&mut self, o: &DynamicObject) -> Option<Arc<DynamicObject>> {
        let name = Name::of(o)?;
        let old = self.objects.remove(&name)?;
        self.unindex(&name, &old);
        Some(old)
    }

    fn swap_listed(&mut self) -> Vec<Arc<DynamicObject>> {
        let Some(listed) = self.listing.take() else {
            return vec![];
        };
        let old = std::mem::replace(&mut self.objects, listed);
        let gone = old
            .iter()
            .filter(|(n, _)| !self.objects.contains_key(*n))
            .map(|(_, o)| o.clone());
        let changed = self.objects.iter().filter_map(|(n, o)| {
            let same = old
                .get(n)
                .is_some_and(|p| p.metadata.resource_version == o.metadata.resource_version);
            (!same).then(|| o.clone())
        });
        let touched = gone.chain(changed).collect();
        self.by_group.clear();
        for (n, o) in &self.objects {
            index_into(&mut self.by_group, n, o);
        }
        touched
    }

    fn index(&mut self, name: &Name, o: &DynamicObject) {
        index_into(&mut self.by_group, name, o);
    }

    fn unindex(&mut self, name: &Name, o: &DynamicObject) {
        for k in keys_of(o) {
            if let Some(set) = self.by_group.get_mut(&k) {
                set.remove(name);
                if set.is_empty() {
                    self.by_group.remove(&k);
                }
            }
        }
    }
}

fn index_into(by_group: &mut HashMap<GroupKey, HashSet<Name>>, name: &Name, o: &DynamicObject) {
    for k in keys_of(o) {
        by_group.entry(k).or_default().insert(name.clone());
    }
}

/// managedFields are read by nothing the controller decides (the drift
/// check compares values, not owners) and are often the largest part of a
/// small object's metadata.
pub(super) fn trimmed(mut o: DynamicObject) -> DynamicObject {
    o.metadata.managed_fields = None;
    o
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
