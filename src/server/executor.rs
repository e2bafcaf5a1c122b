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

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Jobs waiting for a thread. The queue is bounded by the server's
/// request slots (a job is only queued while its request holds a slot).
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    jobs: VecDeque<Job>,
    closed: bool,
}

impl Queue {
    fn push(&self, job: Job) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.jobs.push_back(job);
        drop(st);
        self.ready.notify_one();
    }

    /// The next job; `None` once the queue is closed and drained.
    fn next(&self) -> Option<Job> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(job) = st.jobs.pop_front() {
                return Some(job);
            }
            if st.closed {
                return None;
            }
            st = self.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
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
        let queue = Arc::new(Queue::default());
        let owner = Arc::new(Owner(queue.clone()));
        for i in 0..threads {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("interlock-eval-{i}"))
                .spawn(move || {
                    while let Some(job) = queue.next() {
                        job();
                    }
                })?;
        }
        Ok(Executor { owner })
    }

    /// Run `f` on a pool thread; `None` if it panicked.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.owner.0.push(Box::new(move || {
            // The receiver is gone when the request timed out: drop the answer.
            let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
        }));
        rx.await.ok().and_then(Result::ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn runs_jobs_and_survives_a_panicking_one() {
        let pool = Executor::new(Some(2)).unwrap();
        assert_eq!(pool.run(|| 40 + 2).await, Some(42));
        assert_eq!(pool.run(|| -> u8 { panic!("boom") }).await, None);
        assert_eq!(pool.run(|| "still here").await, Some("still here"));
    }

    #[tokio::test]
    async fn a_blocked_thread_does_not_stop_the_others() {
        let pool = Executor::new(Some(2)).unwrap();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let holder = pool.clone();
        let blocked = tokio::spawn(async move {
            holder
                .run(move || held.recv_timeout(Duration::from_secs(30)).is_ok())
                .await
        });
        // With one of two threads held, jobs still run on the other.
        for i in 0..10 {
            assert_eq!(pool.run(move || i * 2).await, Some(i * 2));
        }
        release.send(()).unwrap();
        assert_eq!(blocked.await.unwrap(), Some(true));
    }

    #[test]
    fn dropping_the_last_handle_stops_the_threads_after_the_queue() {
        let done = Arc::new(AtomicUsize::new(0));
        let pool = Executor::new(Some(1)).unwrap();
        let queue = pool.owner.0.clone();
        for _ in 0..3 {
            let done = done.clone();
            queue.push(Box::new(move || {
                done.fetch_add(1, Ordering::SeqCst);
            }));
        }
        drop(pool);
        // Closed, the thread still runs what was queued, then exits.
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        while done.load(Ordering::SeqCst) < 3 {
            assert!(std::time::Instant::now() < give_up, "queued jobs never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(queue.state.lock().unwrap().closed);
        assert!(queue.next().is_none());
    }
}
