//! The live cluster state that `serve`, the controller and audit share:
//! policies, the inventory, the writes made but not yet seen by a watch,
//! and readiness, behind one lock. Watchers feed it ([`watch`]), policy
//! files reload into it ([`reload`]); front-ends read it and record their
//! writes in it. It imports no front-end.
//!
//! Decisions:
//! - One `RwLock` over policies, inventory and pending writes, so that a
//!   uniqueness check and the record of the write it admitted are one step.
//! - The serving policies are also published lock-free ([`Published`]):
//!   policies that never read the inventory are evaluated on that snapshot
//!   without the lock, so a long evaluation of one (an expensive
//!   expression on a large body) never holds up a writer, and through the
//!   writer every other reader. Policies that read the inventory take the
//!   read lock once per lookup ([`live::Live`]): a writer waits for one
//!   lookup, not for a whole evaluation; a decision that records a write is
//!   checked again under the write lock against the inventory version it
//!   started from.
//! - A policy reload is compiled outside the lock against an empty
//!   [`Inventory::shell`] and swapped in inside it; the indexes are then
//!   reconciled to exactly the new declarations ([`Inventory::set_indexes`]).
//! - Readiness is level-triggered: ready when every kind that is watched
//!   has completed its first list and no requested re-list is running. A
//!   kind whose discovery fails keeps the process unready and is retried
//!   with backoff; it never wedges readiness for good. A front-end that
//!   finds the cluster lacking what it needs ([`prereq`]) holds readiness
//!   down apart, until it is there.

pub mod api_error;
pub mod authz;
pub mod backoff;
pub mod driver;
pub mod exceptions;
pub mod impersonate;
pub mod lease;
pub mod live;
pub mod pending;
pub mod policy_objects;
pub mod prereq;
pub mod reload;
pub mod watch;

use crate::inventory::Inventory;
use crate::k8s::kind::GroupVersionKind;
use crate::policy::{Outcome, PolicySet};
use arc_swap::ArcSwap;
use pending::Pending;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock, RwLockWriteGuard};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// How long one watch request lasts before it is re-established (from
    /// the last resourceVersion, or by a re-list after 410 Gone).
    pub watch_timeout: Duration,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            watch_timeout: Duration::from_secs(290),
        }
    }
}

/// Policies, inventory and the record of writes made, not yet observed.
pub struct State {
    pub policies: PolicySet,
    pub inventory: Inventory,
    pub pending: Pending,
    /// Counts [`Cluster::update`]s (policy reloads): an evaluation made
    /// under the read lock still holds when this has not moved and the
    /// inventory has not changed in a kind it reads.
    generation: u64,
}

/// What an evaluation made under the read lock saw.
#[derive(Clone, Copy)]
pub struct Seen {
    generation: u64,
    inventory: u64,
}

impl State {
    /// Counts policy reloads: a reader that saw another value must
    /// evaluate everything again (the continuous audit).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn seen(&self) -> Seen {
        Seen {
            generation: self.generation,
            inventory: self.inventory.version(),
        }
    }

    /// Whether evaluating the request now would give `outcome`, which it
    /// gave when the state was `seen`: same policies, and no change since to
    /// a kind they read.
    pub fn still_holds(&self, seen: Seen, outcome: &Outcome) -> bool {
        self.generation == seen.generation
            && (self.inventory.version() == seen.inventory
                || !self
                    .inventory
                    .changed_since(seen.inventory, outcome.kinds_read()))
    }
}

/// A task that runs beside a front-end over the front-end's cluster state
/// (the continuous audit): `serve` and `controller` start it without
/// knowing what it is, and serve its metrics on their /metrics.
pub trait Companion: Send + Sync {
    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry);
    /// Starts the task; it runs until the handle is aborted.
    fn start(
        &self,
        cluster: std::sync::Arc<Cluster>,
        client: kube::Client,
    ) -> tokio::task::JoinHandle<()>;
}

/// The serving policies and their generation, as [`Cluster::update`] last
/// left them.
pub struct Published {
    pub policies: PolicySet,
    pub generation: u64,
}

pub struct Cluster {
    state: RwLock<State>,
    published: ArcSwap<Published>,
    ready: AtomicBool,
    /// What the process needs of the cluster is there ([`prereq`]); true
    /// unless a front-end checks and finds something missing.
    prerequisites: AtomicBool,
    pub options: ClusterOptions,
    /// Bumped when stored objects must be listed again (the policies now
    /// read fields the inventory did not keep).
    relist: tokio::sync::watch::Sender<u64>,
    /// Running kind watchers, and how many have yet to finish a requested
    /// re-list.
    watchers: AtomicUsize,
    relisting: AtomicUsize,
    /// Kinds watched whose first list has not completed.
    syncing: Mutex<HashSet<GroupVersionKind>>,
    /// The policies serving and the reloads refused, for /metrics.
    pub reloads: reload::ReloadMetrics,
}

impl Cluster {
    pub fn new(policies: PolicySet, inventory: Inventory, options: ClusterOptions) -> Cluster {
        let reloads = reload::ReloadMetrics::default();
        reloads.loaded(policies.len());
        Cluster {
            published: ArcSwap::from_pointee(Published {
                policies: policies.clone(),
                generation: 0,
            }),
            state: RwLock::new(State {
                policies,
                inventory,
                pending: Pending::default(),
                generation: 0,
            }),
            ready: AtomicBool::new(false),
            prerequisites: AtomicBool::new(true),
            options,
            relist: tokio::sync::watch::channel(0).0,
            watchers: AtomicUsize::new(0),
            relisting: AtomicUsize::new(0),
            syncing: Mutex::new(HashSet::new()),
            reloads,
        }
    }

    /// Runs `f` with read access to the state.
    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
        f(&st)
    }

    /// Write access for a front-end that records a write it decided on
    /// under this same guard.
    pub fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` with write access to the state (policy reloads): every
    /// decision in flight is evaluated again before its write is recorded.
    pub fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = self.write();
        st.generation += 1;
        let out = f(&mut st);
        self.published.store(std::sync::Arc::new(Published {
            policies: st.policies.clone(),
            generation: st.generation,
        }));
        out
    }

    /// Where an evaluation that reads the inventory one lookup at a time
    /// ([`live::Live`]) starts: the serving policies and the state they go
    /// with, expired pending records gone (no decision sees one).
    pub fn start_reading(&self) -> (std::sync::Arc<Published>, Seen) {
        let (published, seen, due) =
            self.read(|st| (self.published(), st.seen(), st.pending.has_due()));
        if !due {
            return (published, seen);
        }
        let mut st = self.write();
        let st = &mut *st;
        st.pending.expire(&mut st.inventory);
        (self.published(), st.seen())
    }

    /// Removes the pending records that reached their expiry.
    pub fn expire_pending(&self) {
        if self.read(|st| st.pending.has_due()) {
            let mut st = self.write();
            let st = &mut *st;
            st.pending.expire(&mut st.inventory);
        }
    }

    /// The serving policies, without waiting for the lock.
    pub fn published(&self) -> std::sync::Arc<Published> {
        self.published.load_full()
    }

    /// Runs `f` on the inventory and the record of pending writes (watch
    /// events). Unlike [`Cluster::update`], it leaves alone evaluations in
    /// flight that read none of the kinds `f` changed: the inventory counts
    /// its changes by kind.
    pub fn update_inventory<R>(&self, f: impl FnOnce(&mut Inventory, &mut Pending) -> R) -> R {
        let mut st = self.write();
        let st = &mut *st;
        f(&mut st.inventory, &mut st.pending)
    }

    /// Whether a writer could take the state's lock now (no reader holds it).
    #[cfg(test)]
    pub(crate) fn lock_is_free(&self) -> bool {
        self.state.try_write().is_ok()
    }

    /// Synced, and nothing the process needs is missing from the cluster.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && self.prerequisites.load(Ordering::Acquire)
    }

    /// Holds readiness down while the cluster lacks what the process needs.
    pub fn set_prerequisites_met(&self, met: bool) {
        self.prerequisites.store(met, Ordering::Release);
    }

    /// Sets readiness by hand (a fixed file inventory is ready at once).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Asks every watcher to list its kind again; inventory-reading
    /// policies answer by their failurePolicy until all have. Call it in the
    /// same [`Cluster::update`] that installs the policies needing the re-list.
    pub fn relist_all(&self) {
        let n = self.watchers.load(Ordering::Acquire);
        if n == 0 {
            return;
        }
        self.relisting.store(n, Ordering::Release);
        self.set_ready(false);
        self.relist.send_modify(|n| *n += 1);
    }

    fn relist_requests(&self) -> tokio::sync::watch::Receiver<u64> {
        self.relist.subscribe()
    }

    fn syncing(&self) -> std::sync::MutexGuard<'_, HashSet<GroupVersionKind>> {
        self.syncing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A watcher for `kind` starts: not ready until it has listed.
    fn watch_started(&self, kind: &GroupVersionKind) {
        self.watchers.fetch_add(1, Ordering::AcqRel);
        self.syncing().insert(kind.clone());
        self.set_ready(false);
    }

    /// A watcher for `kind` stopped (its kind is no longer read).
    fn watch_stopped(&self, kind: &GroupVersionKind, relisting: bool) {
        self.watchers.fetch_sub(1, Ordering::AcqRel);
        if relisting {
            self.relisting.fetch_sub(1, Ordering::AcqRel);
        }
        let mut syncing = self.syncing();
        syncing.remove(kind);
        self.settle(&syncing);
    }

    /// Not ready until `kind` completes its first list (a watch outside
    /// [`watch::Watchers`]: the cluster's exceptions).
    fn hold(&self, kind: &GroupVersionKind) {
        self.syncing().insert(kind.clone());
        self.set_ready(false);
    }

    /// `kind` completed its first list.
    fn synced(&self, kind: &GroupVersionKind) {
        let mut syncing = self.syncing();
        if syncing.remove(kind) {
            self.settle(&syncing);
            if self.is_ready() {
                tracing::info!("inventory synced; ready");
            }
        }
    }

    fn relist_done(&self) {
        if self.relisting.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.settle(&self.syncing());
            tracing::info!("re-list complete");
        }
    }

    /// Ready when nothing is syncing or re-listing.
    fn settle(&self, syncing: &HashSet<GroupVersionKind>) {
        let ready = syncing.is_empty() && self.relisting.load(Ordering::Acquire) == 0;
        self.set_ready(ready);
    }
}
