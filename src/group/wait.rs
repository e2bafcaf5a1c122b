//! `spec.waitForReady`: a rank of the apply order ([`super::order::rank`])
//! is written only once every member of the earlier ranks is ready. Pure:
//! the plan gives [`hold`] the listed members in apply order and writes
//! only the ranks up to the one it returns.
//!
//! Decisions, and why:
//! - **Level-triggered.** Whether a rank may be written is decided from
//!   the stored members alone on every pass; the only memory is
//!   `status.waitingFor.since`, kept (like a condition's
//!   `lastTransitionTime`) while the group waits at the same rank of the
//!   same generation, so that the timeout counts from the start of the
//!   wait, not from the last pass.
//! - **A timeout undoes nothing.** Past `spec.readyTimeout` the group says
//!   `Ready=False, reason: Timeout`; the wait goes on, and a member that
//!   becomes ready later lets the next rank through.
//! - **A PersistentVolumeClaim settles once it is applied**, bound or not:
//!   with a `WaitForFirstConsumer` storage class (the default of most
//!   clusters) a claim binds only when a Pod that uses it is scheduled, and
//!   that Pod belongs to a workload of a later rank; waiting for `Bound`
//!   would wait forever.
//! - **Prunes wait too**: objects no longer listed are deleted only once
//!   no member waits, so a replaced workload goes after its successor is up.

use super::crd::WaitingFor;
use super::order;
use crate::policy::resources::group_of;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// One listed member as the wait sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Its rank in apply order.
    pub rank: u8,
    /// Stored as the spec says, and ready (see [`settles`]).
    pub settled: bool,
}

/// Where a group waits: the member (an index into the steps) that the
/// later ranks wait for, and its rank, the last one that may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    pub index: usize,
    pub rank: u8,
}

/// The first member, in apply order (steps sorted by rank), that is not
/// settled while a later rank has members; `None` when every rank may be
/// written.
pub fn hold(steps: &[Step]) -> Option<Hold> {
    let (index, first) = steps.iter().enumerate().find(|(_, s)| !s.settled)?;
    steps.iter().any(|s| s.rank > first.rank).then_some(Hold {
        index,
        rank: first.rank,
    })
}

/// Whether a member lets the next rank through: it is stored as the spec
/// says (`applied`) and `ready`, or it is a PersistentVolumeClaim that is
/// applied (see the module documentation).
pub fn settles(api_version: &str, kind: &str, applied: bool, ready: bool) -> bool {
    applied && (ready || (group_of(api_version).is_empty() && kind == "PersistentVolumeClaim"))
}

/// `spec.readyTimeout`, in Go's duration syntax.
pub fn timeout(text: &str) -> Result<Duration, TimeoutError> {
    let d = crate::k8s::duration::parse(text)?;
    if d.is_zero() {
        return Err(TimeoutError::Zero(text.to_string()));
    }
    Ok(d)
}

/// Why `spec.readyTimeout` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeoutError {
    #[error("spec.readyTimeout: {0}")]
    Syntax(#[from] crate::k8s::duration::DurationError),
    #[error("spec.readyTimeout: {0:?} must be more than 0")]
    Zero(String),
}

/// When the wait at `rank` began: the previous status's `since` when it
/// waited at the same rank for the same generation of the spec, else now.
pub fn since(
    previous: Option<&WaitingFor>,
    previous_generation: Option<i64>,
    generation: i64,
    rank: u8,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    previous
        .filter(|_| previous_generation == Some(generation))
        .filter(|w| order::rank(group_of(&w.api_version), &w.kind) == rank)
        .and_then(|w| DateTime::parse_from_rfc3339(&w.since).ok())
        .map(|t| t.with_timezone(&Utc))
        .filter(|t| *t <= now)
        .unwrap_or(now)
}

/// When a wait that began at `since` times out.
pub fn deadline(since: DateTime<Utc>, timeout: Duration) -> DateTime<Utc> {
    let timeout = chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX);
    since
        .checked_add_signed(timeout)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

#[cfg(test)]
#[path = "wait_tests.rs"]
mod tests;
