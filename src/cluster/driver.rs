//! The one watch driver: a kube-runtime watcher's events for one kind,
//! applied to a [`Sink`] in the shape of `kubert::index` (`apply`,
//! `delete`, `reset(kind, seen)`). It feeds the live inventory
//! (`cluster::watch`) and the audit's store (`audit::live::store`).
//!
//! A re-list (after 410 Gone or a restart of the watch) applies every
//! object it sees and only at its end resets the kind to what it saw, so a
//! sink's indexes are never empty in between.
//!
//! The controller's member index (`controller::index`) keeps its own event
//! handling: it swaps the whole store at the end of a list, as
//! kube-runtime's reflector does, so that a group's pass never reads half a
//! list, and it reports which objects a list touched to wake their groups.

use crate::inventory::ObjectKey;
use crate::k8s::kind::{GroupKind, GroupVersionKind};
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use serde_json::Value as Json;
use std::collections::HashSet;

/// What a watch feeds, one kind at a time.
pub trait Sink {
    /// Adds or replaces an object (with its apiVersion and kind); returns
    /// its key.
    fn apply(&mut self, object: Json) -> Option<ObjectKey>;
    fn delete(&mut self, key: &ObjectKey);
    /// A (re-)list of `kind` ended: `seen` holds every object it showed,
    /// and the sink's other objects of that kind are gone.
    fn reset(&mut self, kind: &GroupKind, seen: &HashSet<ObjectKey>);
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
    pub fn on_event<S: Sink + ?Sized>(
        &mut self,
        sink: &mut S,
        event: Event<DynamicObject>,
    ) -> bool {
        match event {
            Event::Init => self.seen.clear(),
            Event::InitApply(o) => {
                if let Some(k) = typed(&self.kind, &o).and_then(|j| sink.apply(j)) {
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
                if let Some(j) = typed(&self.kind, &o) {
                    sink.apply(j);
                }
            }
            Event::Delete(o) => {
                if let Some(k) = typed(&self.kind, &o).as_ref().and_then(ObjectKey::of) {
                    sink.delete(&k);
                }
            }
        }
        false
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
