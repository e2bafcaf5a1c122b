//! The live inventory as evaluation reads it without holding the state's
//! lock: each lookup takes the read lock for itself alone and keeps the
//! entries it returns alive (they are shared, `Arc<Entry>`) until the
//! evaluation ends.
//!
//! Why: a Pod near the body limit can carry 30,000 references, and so
//! 30,000 lookups, for a few hundred milliseconds. Held across the whole
//! evaluation, the read lock makes every writer (an admitted Ingress being
//! recorded, a watch event) wait that long, and std's `RwLock` queues every
//! later reader behind the waiting writer: one request stalls them all.
//! Per lookup, a writer waits for one lookup at most.
//!
//! What it costs: a decision may read some kinds at different moments.
//! That is harmless for a verdict alone (an object could as well have
//! changed just after the decision), and a decision that records a write
//! is checked under the write lock, against the inventory version read
//! before its first lookup ([`super::State::still_holds`]), so uniqueness
//! stays one atomic step.

use super::Cluster;
use crate::inventory::{Entry, IndexId, Lookup, ObjectKeyRef};
use std::sync::Arc;
use typed_arena::Arena;

pub struct Live<'c> {
    cluster: &'c Cluster,
    /// Every entry returned so far, kept for the evaluation's lifetime:
    /// lookups hand out references into it.
    held: Arena<Arc<Entry>>,
}

impl<'c> Live<'c> {
    /// A view of `cluster`'s inventory. Never use it while this thread
    /// holds the state's lock: its lookups take the lock themselves.
    pub fn new(cluster: &'c Cluster) -> Self {
        Live {
            cluster,
            held: Arena::new(),
        }
    }

    fn keep(&self, entries: Vec<Arc<Entry>>) -> Vec<&Entry> {
        self.held
            .alloc_extend(entries)
            .iter()
            .map(|e| &**e)
            .collect()
    }
}

impl Lookup for Live<'_> {
    fn find(&self, key: ObjectKeyRef) -> Option<&Entry> {
        let found = self
            .cluster
            .read(|st| st.inventory.find_shared(key).cloned())?;
        Some(&**self.held.alloc(found))
    }

    fn list(&self, group: &str, kind: &str, namespace: Option<&str>) -> Vec<&Entry> {
        let listed = self
            .cluster
            .read(|st| st.inventory.list_shared(group, kind, namespace));
        self.keep(listed)
    }

    fn lookup_index(&self, id: IndexId, key: &str) -> Vec<&Entry> {
        let found = self
            .cluster
            .read(|st| st.inventory.lookup_index_shared(id, key));
        self.keep(found)
    }
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
