//! The store behind one member kind's cache: the objects the watch holds,
//! indexed by the group each one names (its ApplySet part-of label, the
//! UIDs of its ownerReferences), so a group's pass reads its own objects
//! and never walks the namespace. Fed by the one watch driver
//! ([`crate::cluster::driver`]) as a [`Sink`] of the watch's own objects: a
//! re-list updates the store in place and removes at its end what it did
//! not show, so an object stays until the API server says it is gone and
//! the store is never held twice.
//!
//! An object is kept as its JSON text (without managedFields), with what
//! the index and the wake-ups need read out beforehand: about a quarter
//! of the heap of the parsed `DynamicObject` (whose label and annotation
//! maps and `serde_json` maps cost more than the text), and a pass parses
//! only its own group's few objects (docs/PERFORMANCE.md, issue 30).

use crate::cluster::driver::Sink;
use crate::group::crd::PART_OF_LABEL;
use crate::group::crd::{ResourceGroup, API_VERSION, KIND};
use crate::inventory::ObjectKey;
use crate::k8s::kind::GroupKind;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;
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

/// What the cache keeps of one object.
#[derive(Debug)]
pub struct Member {
    /// The object as JSON text, with apiVersion and kind.
    text: Box<str>,
    version: Option<Box<str>>,
    keys: Vec<GroupKey>,
    /// The name of the group that controls it (its controller
    /// ownerReference to a ResourceGroup), in the object's namespace.
    owner: Option<Box<str>>,
    namespace: Box<str>,
}

impl Member {
    fn new(o: DynamicObject) -> Member {
        let o = trimmed(o);
        Member {
            text: serde_json::to_string(&o).unwrap_or_default().into(),
            version: o.metadata.resource_version.as_deref().map(Into::into),
            keys: keys_of(&o),
            owner: owner_name(&o).map(Into::into),
            namespace: o.metadata.namespace.as_deref().unwrap_or("").into(),
        }
    }

    /// The object as the plan reads it.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// The group to wake when it changes (the label alone proves nothing:
    /// anyone can write it).
    pub fn owner(&self) -> Option<ObjectRef<ResourceGroup>> {
        let name = self.owner.as_deref()?;
        (!self.namespace.is_empty()).then(|| ObjectRef::new(name).within(&self.namespace))
    }
}

fn owner_name(o: &DynamicObject) -> Option<&str> {
    o.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true) && r.kind == KIND && r.api_version == API_VERSION)
        .map(|r| r.name.as_str())
}

type Objects = HashMap<Name, Arc<Member>>;

/// One kind's objects, indexed by group. As a [`Sink`] it also collects
/// the objects whose groups should be woken (see [`Indexed::touched`]).
#[derive(Default)]
pub struct Indexed {
    objects: Objects,
    by_group: HashMap<GroupKey, HashSet<Name>>,
    /// Applied (new or at another resourceVersion) or removed since the
    /// last [`Indexed::touched`].
    touched: Vec<Arc<Member>>,
}

impl Sink<DynamicObject> for Indexed {
    fn apply(&mut self, o: DynamicObject) -> Option<ObjectKey> {
        let name = Name::of(&o)?;
        let key = ObjectKey::new(kind_of(&o), name.namespace.as_str(), name.name.as_str());
        let o = Arc::new(Member::new(o));
        let old = self.objects.insert(name.clone(), o.clone());
        // A re-list shows every object again: only a change wakes.
        let same = old
            .as_ref()
            .is_some_and(|p| p.version.is_some() && p.version == o.version);
        if let Some(old) = old {
            self.unindex(&name, &old);
        }
        self.index(&name, &o);
        if !same {
            self.touched.push(o);
        }
        Some(key)
    }

    fn delete(&mut self, key: &ObjectKey) {
        let name = Name::new(&key.namespace, &key.name);
        if let Some(old) = self.objects.remove(&name) {
            self.unindex(&name, &old);
            self.touched.push(old);
        }
    }

    fn reset(&mut self, kind: &GroupKind, seen: &HashSet<ObjectKey>) {
        let gone: Vec<Name> = self
            .objects
            .keys()
            .filter(|n| {
                let key = ObjectKey::new(kind.clone(), n.namespace.as_str(), n.name.as_str());
                !seen.contains(&key)
            })
            .cloned()
            .collect();
        for name in gone {
            if let Some(old) = self.objects.remove(&name) {
                self.unindex(&name, &old);
                self.touched.push(old);
            }
        }
    }
}

/// The group and kind an object says it is (the sink's key; the watch
/// driver keys deletes by its own kind, which is the same).
fn kind_of(o: &DynamicObject) -> GroupKind {
    let types = o.types.as_ref();
    let api_version = types.map_or("", |t| t.api_version.as_str());
    let kind = types.map_or("", |t| t.kind.as_str());
    GroupKind::new(crate::k8s::kinds::group_of(api_version), kind)
}

impl Indexed {
    /// The objects whose groups should be woken, since the last call: the
    /// ones applied new or changed, deleted, or gone at a re-list's end.
    pub fn touched(&mut self) -> Vec<Arc<Member>> {
        std::mem::take(&mut self.touched)
    }

    pub fn get(&self, name: &Name) -> Option<Arc<Member>> {
        self.objects.get(name).cloned()
    }

    /// Every object that names one of `keys`, each once.
    pub fn of_group(&self, keys: &[GroupKey]) -> Vec<(Name, Arc<Member>)> {
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

    fn index(&mut self, name: &Name, o: &Member) {
        for k in &o.keys {
            self.by_group
                .entry(k.clone())
                .or_default()
                .insert(name.clone());
        }
    }

    fn unindex(&mut self, name: &Name, o: &Member) {
        for k in &o.keys {
            if let Some(set) = self.by_group.get_mut(k) {
                set.remove(name);
                if set.is_empty() {
                    self.by_group.remove(k);
                }
            }
        }
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
