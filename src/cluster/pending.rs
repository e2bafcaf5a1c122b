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
mod tests {
    use super::*;
    use serde_json::json;

    fn ingress(name: &str, host: &str) -> Json {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"namespace": "a", "name": name}, "spec": {"rules": [{"host": host}]}})
    }

    #[test]
    fn records_expire_in_order_and_restore_what_they_replaced() {
        let mut inv = Inventory::new();
        inv.upsert(&ingress("one", "old.example"), None)
            .expect("upsert");
        let mut p = Pending::default();
        let key = ObjectKey::of(&ingress("one", "x")).expect("key");
        p.record(
            &mut inv,
            &ingress("one", "new.example"),
            Duration::from_millis(30),
        );
        p.record(
            &mut inv,
            &ingress("two", "b.example"),
            Duration::from_secs(60),
        );
        // Recorded again: the first queue item is stale, the new expiry counts.
        p.record(
            &mut inv,
            &ingress("one", "newer.example"),
            Duration::from_millis(80),
        );
        assert_eq!(p.len(), 2);
        std::thread::sleep(Duration::from_millis(40));
        p.expire(&mut inv);
        assert_eq!(p.len(), 2, "a stale queue item expired a newer record");
        std::thread::sleep(Duration::from_millis(60));
        p.expire(&mut inv);
        assert_eq!(p.len(), 1);
        let restored = inv.get(&key).expect("the original is back");
        assert_eq!(
            restored.object.json()["spec"]["rules"][0]["host"],
            "old.example"
        );
        // "two" replaced nothing: it stays until its own expiry.
        assert_eq!(inv.len(), 2);
        p.observed(&ObjectKey::of(&ingress("two", "x")).expect("key"));
        p.expire(&mut inv);
        assert_eq!(p.len(), 0);
        assert!(p.queue.is_empty());
    }
}
