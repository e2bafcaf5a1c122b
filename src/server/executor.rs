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
//! **A lane for heavy requests.** Bodies over [`HEAVY_BODY_BYTES`] (a
//! Pod near the 3 MiB limit, a Secret of thousands of keys) may occupy at
//! most all threads but one. Such a request can run until its cost budget
//! or its deadline; with every thread on one, ordinary requests queued
//! behind it (the soak of issue 17: p99 33x the quiet run). One thread
//! always left to the light requests bounds their wait by one light
//! evaluation, whatever the heavy ones do. Heavy requests queue among
//! themselves instead, and their deadline answers them if the queue is
//! long. With one thread there is nothing to reserve.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A body larger than this is evaluated in the heavy lane. Ordinary
/// admission bodies are a few KiB; 128 KiB leaves room for large but
/// ordinary objects (a CRD, a big ConfigMap), which only lose the
/// reserved thread.
pub(crate) const HEAVY_BODY_BYTES: usize = 128 * 1024;

/// Jobs waiting for a thread. The queue is bounded by the server's
/// request slots (a job is only queued while its request holds a slot).
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

struct QueueState {
    /// Each job with whether it is heavy.
    jobs: VecDeque<(bool, Job)>,
    /// Heavy jobs running now, and how many may.
    heavy_running: usize,
    heavy_limit: usize,
    closed: bool,
}

impl QueueState {
    /// The first job a free thread may take: any light one, a heavy one
    /// only while the heavy lane has room.
    fn take(&mut self) -> Option<(bool, Job)> {
        let lane_open = self.heavy_running < self.heavy_limit;
        let at = self
            .jobs
            .iter()
            .position(|(heavy, _)| !heavy || lane_open)?;
        let (heavy, job) = self.jobs.remove(at)?;
        self.heavy_running += usize::from(heavy);
        Some((heavy, job))
    }
}

impl Queue {
    fn new(threads: usize) -> Self {
        Queue {
            state: Mutex::new(QueueState {
                jobs: VecDeque::new(),
                heavy_running: 0,
                heavy_limit: threads.saturating_sub(1).max(1),
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn push(&self, heavy: bool, job: Job) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.jobs.push_back((heavy, job));
        drop(st);
        self.ready.notify_one();
    }

    /// The next job a free thread may run; `None` once the queue is closed
    /// and drained.
    fn next(&self) -> Option<(bool, Job)> {
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

    /// A heavy job ended: the lane has room for a queued one.
    fn heavy_done(&self) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.heavy_running -= 1;
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
                    while let Some((heavy, job)) = queue.next() {
                        job();
                        if heavy {
                            queue.heavy_done();
                        }
                    }
                })?;
        }
        Ok(Executor { owner })
    }

    /// Run `f` on a pool thread (in the heavy lane if `heavy`); `None` if
    /// it panicked.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        heavy: bool,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.owner.0.push(
            heavy,
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
