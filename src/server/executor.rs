//! Where admission requests are parsed and evaluated: a fixed set of
//! threads of their own, never the tokio workers (see the module doc of
//! [`super`]: an evaluation may block on the engine's lock or run until its
//! deadline, and the workers must keep answering `/healthz`).
//!
//! Not rayon's pool, which served here until the A/B in docs/PERFORMANCE.md
//! ("The evaluation pool's hand-off"): an idle rayon worker spins and
//! yields for a while before it sleeps, and at a steady, moderate rate (a
//! request every few hundred microseconds, the webhook's ordinary day) each
//! request paid for a worker's spinning on top of its own work. Admission
//! requests are few and coarse; a thread parked on a condition variable
//! wakes in one futex call and then runs the whole evaluation, which is all
//! the hand-off this needs. No work stealing, no nesting: one queue.
//!
//! **A lane for heavy requests.** Requests whose estimated cost
//! ([`super::cost`]: the body's bytes, plus its containers and, where a
//! policy that reads the inventory matches the kind, its references) is
//! over [`HEAVY_COST`] may occupy at most all threads but one. Such a
//! request can run until its cost budget or its deadline; with every thread
//! on one, ordinary requests queued behind it (the soak of issue 17: p99
//! 33x the quiet run; issue 36: a Lease review waited 3.7 s behind eight
//! client loops of a 125 KB Pod of 1,300 references, a body the size-only
//! lane of 128 KiB let through as light). One thread always left to the
//! light requests bounds their wait by one light evaluation, whatever the
//! heavy ones do and however long they run. Heavy requests queue among
//! themselves instead, and their deadline answers them if the queue is
//! long. With one thread there is nothing to reserve.
//!
//! **Fair among tenants.** Each job carries its requester (the review's
//! `userInfo.username`). A free thread takes, of the jobs it may run, the
//! one whose requester has the fewest evaluations running, the oldest
//! among those: one tenant's backlog of expensive reviews (eight client
//! loops of a costly Pod) no longer queues another tenant's cheap review
//! behind all of it, only behind what already runs. Work-conserving: a
//! tenant alone still gets every thread.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A request whose estimated cost ([`super::cost::estimate`], in bytes of
/// plain body) is over this is evaluated in the heavy lane. Ordinary
/// admission bodies are a few KiB; 128 KiB leaves room for large but
/// ordinary objects (a CRD, a big ConfigMap), which only lose the
/// reserved thread. Every body over 128 KiB is heavy: the estimate is at
/// least its size.
pub(crate) const HEAVY_COST: u64 = 128 * 1024;

/// Jobs waiting for a thread. The queue is bounded by the server's
/// request slots (a job is only queued while its request holds a slot).
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

/// Where a job runs and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lane {
    /// An estimated cost over [`HEAVY_COST`].
    pub heavy: bool,
    /// The requester, for fairness among tenants.
    pub tenant: String,
}

struct QueueState {
    jobs: VecDeque<(Lane, Job)>,
    /// Heavy jobs running now, and how many may.
    heavy_running: usize,
    heavy_limit: usize,
    /// Jobs running now, per tenant (absent: none).
    running: HashMap<String, usize>,
    /// When each tenant was last given a thread (a count of takes), so
    /// that tenants with as many running take turns; kept only while a
    /// backlog lasts.
    served: HashMap<String, u64>,
    takes: u64,
    closed: bool,
}

impl QueueState {
    /// The job a free thread takes: of the light ones and (while the heavy
    /// lane has room) the heavy ones, the oldest of the tenant with the
    /// fewest running, and of those the one served longest ago.
    fn take(&mut self) -> Option<(Lane, Job)> {
        let lane_open = self.heavy_running < self.heavy_limit;
        let running = |t: &str| self.running.get(t).copied().unwrap_or(0);
        let served = |t: &str| self.served.get(t).copied().unwrap_or(0);
        let at = self
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, (lane, _))| !lane.heavy || lane_open)
            .min_by_key(|(i, (lane, _))| (running(&lane.tenant), served(&lane.tenant), *i))?
            .0;
        let (lane, job) = self.jobs.remove(at)?;
        self.heavy_running += usize::from(lane.heavy);
        *self.running.entry(lane.tenant.clone()).or_default() += 1;
        self.takes += 1;
        self.served.insert(lane.tenant.clone(), self.takes);
        if self.jobs.is_empty() {
            let running = &self.running;
            self.served.retain(|t, _| running.contains_key(t));
        }
        Some((lane, job))
    }

    fn done(&mut self, lane: &Lane) {
        self.heavy_running -= usize::from(lane.heavy);
        if let Some(n) = self.running.get_mut(&lane.tenant) {
            *n -= 1;
            if *n == 0 {
                self.running.remove(&lane.tenant);
            }
        }
    }
}

impl Queue {
    fn new(threads: usize) -> Self {
        Queue {
            state: Mutex::new(QueueState {
                jobs: VecDeque::new(),
                heavy_running: 0,
                heavy_limit: threads.saturating_sub(1).max(1),
                running: HashMap::new(),
                served: HashMap::new(),
                takes: 0,
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn push(&self, lane: Lane, job: Job) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.jobs.push_back((lane, job));
        drop(st);
        self.ready.notify_one();
    }

    /// The next job a free thread may run; `None` once the queue is closed
    /// and drained.
    fn next(&self) -> Option<(Lane, Job)> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(job) = st.take() {
                return Some(job);
            }
            if st.closed && st.jobs.is_empty() {
                return None;
            }
            st = self.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A job ended: its lane and its tenant have room for a queued one.
    fn done(&self, lane: &Lane) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.done(lane);
        drop(st);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        self.ready.notify_all();
    }
}

/// Closes the queue when the last [`Executor`] clone goes, so a stopped
/// server's threads finish what is queued and exit.
struct Owner(Arc<Queue>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A fixed number of evaluation threads behind one queue.
#[derive(Clone)]
pub(crate) struct Executor {
    owner: Arc<Owner>,
}

impl Executor {
    /// `threads` evaluation threads (at least one); `None`: one per CPU.
    pub(crate) fn new(threads: Option<usize>) -> std::io::Result<Self> {
        let threads = threads
            .unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(2)
            })
            .max(1);
        let queue = Arc::new(Queue::new(threads));
        let owner = Arc::new(Owner(queue.clone()));
        for i in 0..threads {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("interlock-eval-{i}"))
                .spawn(move || {
                    while let Some((lane, job)) = queue.next() {
                        job();
                        queue.done(&lane);
                    }
                })?;
        }
        Ok(Executor { owner })
    }

    /// Run `f` on a pool thread, in `lane`; `None` if it panicked.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        lane: Lane,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.owner.0.push(
            lane,
            Box::new(move || {
                // The receiver is gone when the request timed out: drop the answer.
                let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
            }),
        );
        rx.await.ok().and_then(Result::ok)
    }
}

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;
