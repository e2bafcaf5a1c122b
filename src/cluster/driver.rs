//! The one watch driver: a kube-runtime watcher's events for one kind,
//! applied to a [`Sink`] in the shape of `kubert::index` (`apply`,
//! `delete`, `reset(kind, seen)`). It feeds the live inventory
//! (`cluster::watch`), the audit's store (`audit::live::store`) and the
//! controller's member index (`controller::index`).
//!
//! A re-list (after 410 Gone or a restart of the watch) applies every
//! object it sees and only at its end resets the kind to what it saw, so a
//! sink's indexes are never empty in between, and an object the sink held
//! before the re-list is there until the list shows it gone: a reader
//! during a re-list sees each object at its old or its new version, as it
//! would behind a watch that lags, never a kind half emptied. Nothing is
//! held twice meanwhile (kube-runtime's reflector keeps the whole list
//! beside the store until its end).

use crate::inventory::ObjectKey;
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use serde_json::Value as Json;
use std::collections::HashSet;

/// What a watch feeds, one kind at a time, as objects of type `O`: JSON
/// with apiVersion and kind (the default), or the watch's own
/// [`DynamicObject`]s, unconverted.
pub trait Sink<O = Json> {
    /// Adds or replaces an object; returns its key.
    fn apply(&mut self, object: O) -> Option<ObjectKey>;
    fn delete(&mut self, key: &ObjectKey);
    /// A (re-)list of `kind` ended: `seen` holds every object it showed,
    /// and the sink's other objects of that kind are gone.
    fn reset(&mut self, kind: &GroupKind, seen: &HashSet<ObjectKey>);
}

/// How a watched object reaches a sink.
pub trait Object: Sized {
    fn from_watch(kind: &GroupVersionKind, o: DynamicObject) -> Option<Self>;
}

impl Object for Json {
    fn from_watch(kind: &GroupVersionKind, o: DynamicObject) -> Option<Json> {
        typed(kind, &o)
    }
}

/// With its apiVersion and kind, as [`typed`] gives them.
impl Object for DynamicObject {
    fn from_watch(kind: &GroupVersionKind, mut o: DynamicObject) -> Option<DynamicObject> {
        o.types.get_or_insert_with(|| kube::api::TypeMeta {
            api_version: kind.api_version().to_string(),
            kind: kind.kind().to_string(),
        });
        Some(o)
    }
}

/// One kind's watch state: the keys a (re-)list has shown so far.
pub struct KindSync {
    kind: GroupVersionKind,
    gk: GroupKind,
    seen: HashSet<ObjectKey>,
    synced: bool,
}

impl KindSync {
    pub fn new(kind: &GroupVersionKind) -> Self {
        KindSync {
            kind: kind.clone(),
            gk: kind.group_kind(),
            seen: HashSet::new(),
            synced: false,
        }
    }

    /// Applies one watch event to `sink`; returns true on the first
    /// completed list.
    pub fn on_event<O: Object, S: Sink<O> + ?Sized>(
        &mut self,
        sink: &mut S,
        event: Event<DynamicObject>,
    ) -> bool {
        match event {
            Event::Init => self.seen.clear(),
            Event::InitApply(o) => {
                if let Some(k) = O::from_watch(&self.kind, o).and_then(|o| sink.apply(o)) {
                    self.seen.insert(k);
                }
            }
            Event::InitDone => {
                sink.reset(&self.gk, &self.seen);
                self.seen.clear();
                let first = !self.synced;
                self.synced = true;
                return first;
            }
            Event::Apply(o) => {
                if let Some(o) = O::from_watch(&self.kind, o) {
                    sink.apply(o);
                }
            }
            Event::Delete(o) => {
                if let Some(k) = self.key(&o) {
                    sink.delete(&k);
                }
            }
        }
        false
    }

    /// A watched object's key: the watch's kind, the object's names.
    fn key(&self, o: &DynamicObject) -> Option<ObjectKey> {
        let name = o.metadata.name.as_deref()?;
        let namespace = o.metadata.namespace.as_deref().unwrap_or("");
        Some(ObjectKey::new(self.gk.clone(), namespace, name))
    }
}

/// The object as JSON with its apiVersion and kind: the items of a list
/// response carry neither (only the list does).
pub fn typed(kind: &GroupVersionKind, o: &DynamicObject) -> Option<Json> {
    let mut json = serde_json::to_value(o).ok()?;
    let m = json.as_object_mut()?;
    if !m.contains_key("apiVersion") {
        m.insert("apiVersion".into(), kind.api_version().into());
    }
    if !m.contains_key("kind") {
        m.insert("kind".into(), kind.kind().into());
    }
    Some(json)
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
