//! Admitted writes the watch has not shown yet. They go into the inventory
//! at once, so a second request for the same unique host moments later sees
//! the first; the watch's version replaces them, or they expire.

use crate::inventory::{Entry, Inventory, ObjectKey};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Default)]
pub struct Pending {
    /// Key → (expiry, the entry it replaced, to restore on expiry).
    entries: HashMap<ObjectKey, (Instant, Option<Entry>)>,
}

impl Pending {
    pub fn len(&self) -> usize {
        self.entries.len()
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
        if inventory
            .upsert(&super::live::project(object.clone()), None)
            .is_ok()
        {
            self.entries.insert(key, (Instant::now() + ttl, replaced));
        }
    }

    pub fn contains(&self, key: &ObjectKey) -> bool {
        self.entries.contains_key(key)
    }

    /// The watch showed this object: it is no longer pending.
    pub fn observed(&mut self, key: &ObjectKey) {
        self.entries.remove(key);
    }

    pub fn expire(&mut self, inventory: &mut Inventory) {
        let now = Instant::now();
        let expired: Vec<ObjectKey> = self
            .entries
            .iter()
            .filter(|(_, (t, _))| *t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            if let Some((_, original)) = self.entries.remove(&k) {
                inventory.remove(&k);
                if let Some(e) = original {
                    inventory.restore(e);
                }
            }
        }
    }
}
