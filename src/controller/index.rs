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
fn trimmed(mut o: DynamicObject) -> DynamicObject {
    o.metadata.managed_fields = None;
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str, id: Option<&str>, owner: Option<&str>, rv: &str) -> DynamicObject {
        let mut labels = serde_json::Map::new();
        if let Some(id) = id {
            labels.insert(PART_OF_LABEL.into(), id.into());
        }
        let refs: Vec<_> = owner
            .map(|uid| {
                json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
                       "name": "g", "uid": uid, "controller": true})
            })
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "labels": labels,
                         "ownerReferences": refs, "resourceVersion": rv,
                         "managedFields": [{"manager": "interlock"}]}
        }))
        .unwrap()
    }

    fn names(ix: &Indexed, keys: &[GroupKey]) -> Vec<String> {
        ix.of_group(keys).into_iter().map(|(n, _)| n.name).collect()
    }

    fn group(id: &str, uid: &str) -> [GroupKey; 2] {
        [GroupKey::ApplySet(id.into()), GroupKey::Owner(uid.into())]
    }

    #[test]
    fn a_group_sees_only_objects_that_name_it() {
        let mut ix = Indexed::default();
        ix.handle(Event::Apply(cm("a1", Some("id-a"), Some("uid-a"), "1")));
        ix.handle(Event::Apply(cm("a2", Some("id-a"), None, "1")));
        ix.handle(Event::Apply(cm("b1", Some("id-b"), Some("uid-b"), "1")));
        // Labelled by one group, owned by another: in both views.
        ix.handle(Event::Apply(cm("x", Some("id-b"), Some("uid-a"), "1")));
        assert_eq!(names(&ix, &group("id-a", "uid-a")), ["a1", "a2", "x"]);
        assert_eq!(names(&ix, &group("id-b", "uid-b")), ["b1", "x"]);
        assert!(names(&ix, &group("id-c", "uid-c")).is_empty());
        let kept = ix.get(&Name::new("ns", "a1")).unwrap();
        assert!(kept.metadata.managed_fields.is_none(), "trimmed");
    }

    #[test]
    fn an_update_moves_the_object_and_a_delete_drops_it() {
        let mut ix = Indexed::default();
        ix.handle(Event::Apply(cm("m", Some("id-a"), Some("uid-a"), "1")));
        ix.handle(Event::Apply(cm("m", Some("id-b"), Some("uid-b"), "2")));
        assert!(names(&ix, &group("id-a", "uid-a")).is_empty());
        assert_eq!(names(&ix, &group("id-b", "uid-b")), ["m"]);
        let woken = ix.handle(Event::Delete(cm("m", Some("id-b"), None, "3")));
        assert_eq!(woken.len(), 1);
        assert!(names(&ix, &group("id-b", "uid-b")).is_empty());
        assert!(ix.objects.is_empty());
        assert!(ix.by_group.is_empty(), "no empty index entries are kept");
    }

    #[test]
    fn a_relist_swaps_at_its_end_and_reports_what_changed() {
        let mut ix = Indexed::default();
        for o in [
            cm("same", Some("id-a"), None, "1"),
            cm("edited", Some("id-a"), None, "1"),
            cm("gone", Some("id-a"), None, "1"),
        ] {
            ix.handle(Event::Apply(o));
        }
        ix.handle(Event::Init);
        ix.handle(Event::InitApply(cm("same", Some("id-a"), None, "1")));
        ix.handle(Event::InitApply(cm("edited", Some("id-b"), None, "2")));
        ix.handle(Event::InitApply(cm("new", Some("id-a"), None, "1")));
        // Until the list is complete, readers see the previous contents.
        assert_eq!(names(&ix, &group("id-a", "")), ["edited", "gone", "same"]);
        let mut woken: Vec<String> = ix
            .handle(Event::InitDone)
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        woken.sort();
        assert_eq!(woken, ["edited", "gone", "new"]);
        assert_eq!(names(&ix, &group("id-a", "")), ["new", "same"]);
        assert_eq!(names(&ix, &group("id-b", "")), ["edited"]);
    }
}
