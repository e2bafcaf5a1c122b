//! The cap of connections per source address.
//!
//! kube-apiserver holds a few long-lived connections per replica; a client
//! flooding the webhook with idle connections holds many. Counting them per
//! peer address keeps one source from taking every `--max-connections`
//! slot, so the apiserver's next connection still finds one. Addresses are
//! counted whole (an IPv4-mapped IPv6 address as its IPv4 one): in a
//! cluster each pod and each node has its own.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Open connections per peer address, at most `limit` each.
#[derive(Debug)]
pub(crate) struct SourceCap {
    limit: usize,
    /// Only addresses with at least one open connection: the map never
    /// holds more entries than there are connections.
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection counted against its source; released when dropped.
#[derive(Debug)]
pub(crate) struct SourceSlot {
    cap: Arc<SourceCap>,
    source: IpAddr,
}

impl SourceCap {
    /// A cap of `limit` connections per address (at least one).
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(SourceCap {
            limit: limit.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// The per-address limit.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// A slot for one more connection from `source`, or `None` when it
    /// already has `limit` open.
    pub(crate) fn try_enter(self: &Arc<Self>, source: IpAddr) -> Option<SourceSlot> {
        let source = source.to_canonical();
        let mut open = self.lock();
        let n = open.entry(source).or_insert(0);
        if *n >= self.limit {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            cap: self.clone(),
            source,
        })
    }

    /// Connections open from `source`.
    #[cfg(test)]
    fn open_from(&self, source: IpAddr) -> usize {
        self.lock()
            .get(&source.to_canonical())
            .copied()
            .unwrap_or(0)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        // A panic while holding the lock cannot leave a count half-updated.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut open = self.cap.lock();
        if let Some(n) = open.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
#[path = "sources_tests.rs"]
mod tests;
