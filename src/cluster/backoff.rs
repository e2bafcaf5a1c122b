//! The one backoff helper: capped exponential waits with jitter, for
//! discovery retries, watch restarts and the controller's per-key requeue.

use std::time::Duration;

/// `base` doubled `attempt` times (0-based), at most `cap`; no jitter.
pub fn exponential(attempt: u32, base: Duration, cap: Duration) -> Duration {
    base.saturating_mul(1u32 << attempt.min(16)).min(cap)
}

/// Capped exponential backoff with jitter over its upper half: never zero,
/// never in lockstep.
pub fn capped(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let nanos = exponential(attempt, base, cap).as_nanos() as u64;
    let jitter = jitter_fraction() * (nanos / 2) as f64;
    Duration::from_nanos(nanos / 2 + jitter as u64)
}

/// `d` spread over ±20%, so that many keys failing together come back apart.
pub fn spread(d: Duration) -> Duration {
    d.mul_f64(0.8 + 0.4 * jitter_fraction())
}

/// A fraction in [0, 1), different on every call.
pub fn jitter_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    (h.finish() % 10_000) as f64 / 10_000.0
}
