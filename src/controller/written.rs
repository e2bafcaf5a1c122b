//! The statuses this replica wrote whose watch events its store of groups
//! may not hold yet. A member's watch event can wake a group's next pass
//! before the event of the status the last pass wrote: that pass would
//! find the old status in the store and write the same status again. The
//! versions of the group a write is known to follow (the pass's own, and
//! the one its metadata patch returned) tell a store that is behind from
//! one that moved on; a store that moved on is compared as usual.

use crate::group::crd::ResourceGroupStatus;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// By group UID: the versions known to precede the status written, and
/// that status's digest (not a copy: one entry per group in flight).
#[derive(Default)]
pub struct Written(Mutex<HashMap<String, Wrote>>);

struct Wrote {
    before: Vec<String>,
    digest: u64,
}

impl Written {
    /// Whether the store's group at `version` is only behind this
    /// replica's last status write for it, and that write was `status`.
    /// Forgets the write once the store has moved past those versions.
    pub fn pending(&self, uid: &str, version: &str, status: &ResourceGroupStatus) -> bool {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some(w) = map.get(uid) else {
            return false;
        };
        if !w.before.iter().any(|v| v == version) {
            map.remove(uid);
            return false;
        }
        w.digest == digest(status)
    }

    /// `status` was written on top of the group at the `before` versions.
    pub fn wrote(&self, uid: &str, before: Vec<String>, status: &ResourceGroupStatus) {
        let w = Wrote {
            before,
            digest: digest(status),
        };
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(uid.to_string(), w);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

fn digest(status: &ResourceGroupStatus) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(status)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

#[cfg(test)]
#[path = "written_tests.rs"]
mod tests;
