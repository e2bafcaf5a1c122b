//! The form in which the Controller's store holds every ResourceGroup for
//! the whole term: without managedFields and kubectl's last-applied copy
//! (nothing reads them), and with each member manifest as its JSON text.
//! A manifest parsed into `serde_json::Value`s costs about 2 KB of heap
//! (a map and its entries for every object level); its text about 150
//! bytes. The groups' store was the largest part of the controller's heap
//! (12.5 of 41.5 MB at 1,000 groups of 5 members, heaptrack; see
//! docs/PERFORMANCE.md), so a pass parses its own group's manifests back
//! ([`unpacked`]: microseconds) instead of every group keeping them parsed.

use crate::group::crd::ResourceGroup;
use serde_json::Value;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The group as the store keeps it (every watch event goes through this
/// before the store, so every stored manifest is packed exactly once).
pub fn packed(rg: &mut ResourceGroup) {
    rg.metadata.managed_fields = None;
    if let Some(a) = rg.metadata.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
    for r in &mut rg.spec.resources {
        // Every element, strings too, so that unpacking is exact.
        *r = Value::String(r.to_string());
    }
}

/// The group as a pass reads it: its manifests parsed again.
pub fn unpacked(stored: &ResourceGroup) -> ResourceGroup {
    let mut rg = stored.clone();
    for r in &mut rg.spec.resources {
        if let Value::String(text) = r {
            // The text is serde_json's own output: it parses.
            *r = serde_json::from_str(text).unwrap_or(Value::Null);
        }
    }
    rg
}

#[cfg(test)]
#[path = "stored_tests.rs"]
mod tests;
