//! Admitted writes the watch has not shown yet. They go into the inventory
//! at once, so a second request for the same unique host moments later sees
//! the first; the watch's version replaces them, or they expire.

use crate::inventory::{Entry, Inventory, ObjectKey};
use serde_json::Value as Json;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
pub struct Pending {
    /// Key → (expiry, the entry it replaced, to restore on expiry).
    entries: HashMap<ObjectKey, (Instant, Option<Arc<Entry>>)>,
    /// (expiry, key), soonest first, so that `expire` (on every recording
    /// request) looks only at what is due instead of every entry. An item
    /// whose key was recorded again or observed since is stale and skipped.
    queue: BinaryHeap<Reverse<(Instant, ObjectKey)>>,
}

impl Pending {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn record(&mut self, inventory: &mut Inventory, object: &Json, ttl: Duration) {
        let Some(key) = ObjectKey::of(object) else {
            return;
        };
        let previous = inventory.get(&key).cloned();
        let replaced = match self.entries.remove(&key) {
            Some((_, original)) => original,
            None => previous,
        };
        if inventory.upsert(object, None).is_ok() {
            let expiry = Instant::now() + ttl;
            self.queue.push(Reverse((expiry, key.clone())));
            self.entries.insert(key, (expiry, replaced));
        }
    }

    pub fn contains(&self, key: &ObjectKey) -> bool {
        self.entries.contains_key(key)
    }

    /// The watch showed this object: it is no longer pending.
    pub fn observed(&mut self, key: &ObjectKey) {
        self.entries.remove(key);
    }

    /// Has some record reached its expiry?
    pub fn has_due(&self) -> bool {
        self.queue
            .peek()
            .is_some_and(|Reverse((due, _))| *due <= Instant::now())
    }

    /// Removes expired records, restoring what they replaced.
    pub fn expire(&mut self, inventory: &mut Inventory) {
        let now = Instant::now();
        while let Some(Reverse((due, _))) = self.queue.peek() {
            if *due > now {
                break;
            }
            let Some(Reverse((due, key))) = self.queue.pop() else {
                break;
            };
            // Stale: recorded again (a later expiry) or observed.
            if self.entries.get(&key).is_none_or(|(t, _)| *t != due) {
                continue;
            }
            if let Some((_, original)) = self.entries.remove(&key) {
                inventory.remove(&key);
                if let Some(e) = original {
                    inventory.restore(e);
                }
            }
        }
        if self.entries.is_empty() {
            self.queue.clear();
        }
    }
}

#[cfg(test)]
#[path = "pending_tests.rs"]
mod tests;
