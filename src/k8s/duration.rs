//! Durations on the command line, one parser for every flag: Go's
//! `time.ParseDuration`, as kubectl and kube's components read theirs.
//! Hand-written rather than `humantime`: that crate reads a syntax of its
//! own (`1min 30s`, no fractions such as `1.5h`), and a flag that takes
//! what kubectl takes must read Go's.

use std::time::Duration;

/// A duration flag's value that is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {why} (Go syntax: 500ms, 4s, 1m30s, 2h; 1d for a day; or a number of seconds)")]
pub struct DurationError {
    pub text: String,
    pub why: &'static str,
}

/// Parses every duration flag: Go's `time.ParseDuration` syntax, as
/// kubectl and kube's components take them (`1m30s`, `250ms`, `1.5h`,
/// `0`), or a bare number of seconds (`1.5`), which older releases took
/// and scripts still pass, and whole days (`2d`, `1d12h`), which
/// `unstick --older-than` took. Negative durations mean nothing for a flag.
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let text = s.trim();
    let bad = |why| DurationError {
        text: text.to_string(),
        why,
    };
    if text.is_empty() {
        return Err(bad("empty"));
    }
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = text.parse().map_err(|_| bad("not a number"))?;
        return Duration::try_from_secs_f64(secs).map_err(|_| bad("out of range"));
    }
    let (days, rest) = match text.split_once('d') {
        Some((d, rest)) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => {
            let d: u64 = d.parse().map_err(|_| bad("out of range"))?;
            (d, rest)
        }
        _ => (0, text),
    };
    let days = Duration::from_secs(
        days.checked_mul(86_400)
            .ok_or_else(|| bad("out of range"))?,
    );
    if rest.is_empty() {
        return Ok(days);
    }
    // The CEL dialect's `duration()` is Go's parser, to the nanosecond.
    let nanos = crate::cel::functions::time::parse_duration(rest)
        .map_err(|_| bad("not a duration"))?
        .0;
    let within = u64::try_from(nanos).map_err(|_| bad("negative"))?;
    days.checked_add(Duration::from_nanos(within))
        .ok_or_else(|| bad("out of range"))
}

#[cfg(test)]
#[path = "duration_tests.rs"]
mod tests;
