//! Stopping evaluations from outside, and counting how they ended.
//!
//! An [`Interrupt`] is a flag plus counters. [`scope`] makes it the current
//! one on this thread for the length of a call: every [`Activation`] built
//! in that call with [`Activation::with_current_interrupt`] (the policy
//! engine's, however deep) picks it up, every charge of cost checks the
//! flag, and every top-level evaluation that fails is counted on it. The
//! inventory's index keys are computed without it: they are shared state,
//! not the request's. The server wraps each admission request's
//! evaluation in a scope and sets the flag when the request's deadline
//! passes, so the evaluation stops at its next charge and frees what it
//! built, instead of running on after its answer was given up.
//!
//! Why a thread-local rather than a parameter: the server reaches the
//! engine only through the `Reviewer` trait, and the activations are built
//! several layers below it (policy set, policy, binding); the evaluation of
//! one request runs on one thread from start to end.
//!
//! [`Activation`]: super::Activation
//! [`Activation::with_current_interrupt`]: super::Activation::with_current_interrupt

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A cancellation flag and what the evaluations under it ran into.
#[derive(Debug, Default)]
pub struct Interrupt {
    cancelled: AtomicBool,
    expression_errors: AtomicU64,
    cost_limit_exceeded: AtomicU64,
    interrupted: AtomicU64,
}

/// Counts of top-level evaluations under one [`Interrupt`] that ended in
/// an error, by cause (an evaluation stopped by its cost or memory budget
/// or by the flag also counts as an expression error).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Evaluations that ended in an error, whatever the cause.
    pub expression_errors: u64,
    /// Of those, stopped by the cost budget or the memory budget.
    pub cost_limit_exceeded: u64,
    /// Of those, stopped because the flag was set (the deadline passed).
    pub interrupted: u64,
}

/// Why an evaluation was stopped before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Halt {
    /// The cost budget or the memory budget was spent.
    Budget,
    /// The [`Interrupt`] was set.
    Interrupted,
    /// kube-apiserver's cost tracker would have panicked (it asserts that
    /// the argument of `sort`, `sortBy` or `distinct` is a list even when
    /// it is an error), which fails the whole evaluation with this Go
    /// runtime message.
    Internal(&'static str),
    /// cel-go hashed a key Go cannot hash (a map literal's, or one looked
    /// up with `in`): its Go type. The panic fails the whole evaluation.
    Unhashable(&'static str),
}

impl Interrupt {
    /// A new, unset flag.
    pub fn new() -> Arc<Interrupt> {
        Arc::new(Interrupt::default())
    }

    /// Stops every evaluation under this flag at its next charge of cost.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Whether [`Interrupt::cancel`] was called.
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        // Relaxed: the flag carries no data; a charge that misses it by a
        // few nanoseconds sees it at the next one.
        self.cancelled.load(Ordering::Relaxed)
    }

    /// What the evaluations under this flag ran into so far.
    pub fn stats(&self) -> Stats {
        Stats {
            expression_errors: self.expression_errors.load(Ordering::Relaxed),
            cost_limit_exceeded: self.cost_limit_exceeded.load(Ordering::Relaxed),
            interrupted: self.interrupted.load(Ordering::Relaxed),
        }
    }

    /// Counts one top-level evaluation that failed, `halt` saying whether
    /// a budget or the flag stopped it.
    pub(crate) fn count_error(&self, halt: Option<Halt>) {
        self.expression_errors.fetch_add(1, Ordering::Relaxed);
        match halt {
            Some(Halt::Budget) => self.cost_limit_exceeded.fetch_add(1, Ordering::Relaxed),
            Some(Halt::Interrupted) => self.interrupted.fetch_add(1, Ordering::Relaxed),
            Some(Halt::Internal(_) | Halt::Unhashable(_)) | None => 0,
        };
    }
}

/// Sets the flag when dropped: held by the future that waits for an
/// evaluation, so that the evaluation stops however that future ends
/// (answered, cut by the deadline, or dropped with its connection).
#[derive(Debug)]
pub struct CancelOnDrop(pub Arc<Interrupt>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Interrupt>>> = const { RefCell::new(None) };
}

/// Runs `f` with `interrupt` as this thread's current one (restored
/// afterwards, also when `f` panics).
pub fn scope<R>(interrupt: &Arc<Interrupt>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<Interrupt>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CURRENT.with(|c| c.borrow_mut().replace(interrupt.clone()));
    let _restore = Restore(previous);
    f()
}

/// This thread's current interrupt, if a [`scope`] is running.
pub(crate) fn current() -> Option<Arc<Interrupt>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether this thread's current interrupt (see [`scope`]) is set: for
/// work outside CEL that should stop with the evaluation it belongs to
/// (a reviewer that is not a CEL engine, or a write to record after a
/// decision nobody will read).
pub fn cancelled() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(|i| i.is_cancelled()))
}
