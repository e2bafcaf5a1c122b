//! String literals of compiled expressions, kept for the life of the process
//! so that an evaluation copies a reference instead of counting one.
//!
//! Every use of a literal clones its value. Were it an `Arc<str>`, each use
//! would be an atomic increment, and each drop a decrement, of a count that
//! every thread evaluating the same policy writes, so its cache line moves
//! between cores on each use: with two threads evaluating at once that
//! increment was the hottest instruction of `Value::clone` (`perf`, over
//! `benches/webhook_load.rs`'s "on 2 threads at once" run). A `&'static str`
//! is a plain copy.
//!
//! Memory: each distinct literal is stored once, whatever the number of
//! policies and reloads that use it. Past [`BUDGET`] bytes in all, and for
//! literals longer than [`MAX_LEN`], literals are reference-counted again, so
//! a process that compiles expressions without end (reloading generated
//! policies) cannot grow without bound.

use super::value::Str;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Literals longer than this are reference-counted.
const MAX_LEN: usize = 1024;
/// The most bytes of literals kept for the life of the process.
const BUDGET: usize = 4 << 20;

#[derive(Default)]
struct Interned {
    strings: HashSet<&'static str>,
    bytes: usize,
}

static INTERNED: Mutex<Option<Interned>> = Mutex::new(None);

/// The value of a string literal: a `'static` reference when the budget
/// allows, else the shared string.
pub(crate) fn literal(s: &Arc<str>) -> Str<'static> {
    if s.len() > MAX_LEN {
        return Str::Shared(s.clone());
    }
    let mut guard = INTERNED.lock().unwrap_or_else(|p| p.into_inner());
    let interned = guard.get_or_insert_with(Interned::default);
    if let Some(&kept) = interned.strings.get(&**s) {
        return Str::Borrowed(kept);
    }
    if interned.bytes + s.len() > BUDGET {
        return Str::Shared(s.clone());
    }
    let kept: &'static str = Box::leak(Box::from(&**s));
    interned.bytes += kept.len();
    interned.strings.insert(kept);
    Str::Borrowed(kept)
}

#[cfg(test)]
#[path = "intern_tests.rs"]
mod tests;
