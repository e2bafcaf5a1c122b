//! Shards of the groups across replicas (`--shards K`): a group belongs to
//! the shard of its namespace ([`shard_of`], a stable hash), each shard is
//! owned by a coordination.k8s.io Lease of its own (`<lease-name>-shard-<i>`,
//! through the same [`super::lease::Elector`] as the leader's lease), and a
//! replica reconciles only the groups of the shards it holds.
//!
//! Why by namespace: a group's members and its ServiceAccount live in its
//! namespace, so one namespace's groups (which may conflict with each
//! other) are decided by one replica; and the hash needs no table that
//! replicas would have to agree on.
//!
//! Never two replicas at once: a shard's reconciles run under its term
//! ([`Shards::hold`]); when the term ends (the lease lost, or not renewed
//! in time) they are dropped where they wait, before any other replica may
//! take the lease (the renew deadline of [`super::lease`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;

/// The shard of a namespace among `count`: FNV-1a, the same in every
/// replica and every release (std's hasher is seeded per process).
pub fn shard_of(namespace: &str, count: u16) -> u16 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in namespace.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(count.max(1))) as u16
}

/// The name of shard `i`'s Lease.
pub fn lease_name(base: &str, i: u16) -> String {
    format!("{base}-shard-{i}")
}

/// Which shards this replica holds now: per shard, the number of the
/// term it is held in (`None`: not held).
pub struct Shards {
    held: Vec<watch::Sender<Option<u64>>>,
    terms: AtomicU64,
}

/// A shard held when a reconcile started: [`Held::lost`] resolves when
/// that term ends. By its number: a term lost and another won before the
/// reconcile looked is a loss too (another replica may have held the
/// shard in between).
pub struct Held {
    rx: watch::Receiver<Option<u64>>,
    term: u64,
}

impl Held {
    pub async fn lost(mut self) {
        let term = Some(self.term);
        // An error means the sender is gone: the term is over too.
        let _ = self.rx.wait_for(|now| *now != term).await;
    }
}

impl Shards {
    /// `count` shards, none held.
    pub fn new(count: u16) -> Shards {
        Shards {
            held: (0..count.max(1)).map(|_| watch::channel(None).0).collect(),
            terms: AtomicU64::new(0),
        }
    }

    /// One shard, held for good: a single replica, or one leader.
    pub fn all() -> Shards {
        let s = Shards::new(1);
        s.set(0, true);
        s
    }

    pub fn count(&self) -> u16 {
        self.held.len() as u16
    }

    /// A term of `shard` begins (`held`) or ends.
    pub fn set(&self, shard: u16, held: bool) {
        if let Some(s) = self.held.get(usize::from(shard)) {
            let term = held.then(|| self.terms.fetch_add(1, Ordering::Relaxed));
            s.send_replace(term);
        }
    }

    /// How many shards this replica holds.
    pub fn holding(&self) -> usize {
        self.held.iter().filter(|s| s.borrow().is_some()).count()
    }

    /// The shard of `namespace` if this replica holds it now.
    pub fn hold(&self, namespace: &str) -> Option<Held> {
        let s = self
            .held
            .get(usize::from(shard_of(namespace, self.count())))?;
        let rx = s.subscribe();
        let term = (*rx.borrow())?;
        Some(Held { rx, term })
    }

    /// How long to wait before trying to take a free shard: a replica that
    /// already holds some leaves free shards a while to the others, so
    /// replicas that start together share the shards instead of the first
    /// taking all. The Lease arbitrates; this only spreads.
    pub fn patience(&self, renew_every: Duration) -> Duration {
        renew_every.saturating_mul(self.holding() as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_has_one_shard_the_same_everywhere() {
        // Fixed values: a change of hash would move groups between
        // replicas of different versions during a rolling update.
        assert_eq!(shard_of("default", 4), shard_of("default", 4));
        assert_eq!(shard_of("team-a", 1), 0);
        assert_eq!(shard_of("", 7), (0xcbf2_9ce4_8422_2325u64 % 7) as u16);
        // Spread: 1,000 namespaces over 8 shards, none far from 125.
        let mut per = [0usize; 8];
        for i in 0..1000 {
            per[usize::from(shard_of(&format!("ns-{i}"), 8))] += 1;
        }
        assert!(per.iter().all(|n| (80..=170).contains(n)), "{per:?}");
    }

    #[tokio::test]
    async fn a_reconcile_holds_its_shard_until_the_term_ends() {
        let shards = Shards::new(2);
        let ns = "team-a";
        let mine = shard_of(ns, 2);
        assert!(shards.hold(ns).is_none(), "not held: skipped");
        shards.set(mine, true);
        assert_eq!(shards.holding(), 1);
        let held = shards.hold(ns).expect("held");
        let lost = tokio::spawn(held.lost());
        tokio::task::yield_now().await;
        assert!(!lost.is_finished(), "the term lasts");
        shards.set(1 - mine, false);
        tokio::task::yield_now().await;
        assert!(!lost.is_finished(), "another shard's end is not ours");
        shards.set(mine, false);
        lost.await.expect("resolves when the term ends");
        assert!(shards.hold(ns).is_none());

        // Lost and won again before the pass looked: still its term's end.
        shards.set(mine, true);
        let held = shards.hold(ns).expect("held");
        shards.set(mine, false);
        shards.set(mine, true);
        held.lost().await;
        assert!(shards.hold(ns).is_some(), "held in a new term");
    }

    #[test]
    fn one_shard_held_for_good_is_the_default() {
        let s = Shards::all();
        assert!(s.hold("any").is_some() && s.hold("other").is_some());
        assert_eq!(s.patience(Duration::from_secs(5)), Duration::from_secs(5));
    }
}
