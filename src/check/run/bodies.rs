//! The objects to check, held as compressed compact JSON from the moment
//! their file is read until they are evaluated (after every file is read,
//! so that lookups see every object). Past a budget they are written to
//! an unlinked temporary file instead: a large input then costs disk (the
//! page cache), not resident memory, and a small one never touches disk.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Compressed bytes held in memory before bodies go to disk: more than
/// the 100k-object clusters of benches/check.rs need (about 25 MiB).
const BUDGET: u64 = 64 * 1024 * 1024;

/// One object's compressed JSON.
pub(super) enum Body {
    Held(Box<[u8]>),
    Spilled { at: u64, len: usize },
}

pub(super) struct Bodies {
    /// Compressed bytes held in memory before bodies go to disk.
    budget: u64,
    held: AtomicU64,
    /// `None` when no temporary file could be made: bodies stay in memory.
    file: OnceLock<Option<File>>,
    end: AtomicU64,
}

impl Default for Bodies {
    fn default() -> Self {
        Bodies::with_budget(BUDGET)
    }
}

impl Bodies {
    pub(super) fn with_budget(budget: u64) -> Self {
        Bodies {
            budget,
            held: AtomicU64::new(0),
            file: OnceLock::new(),
            end: AtomicU64::new(0),
        }
    }

    /// Compresses `json` (JSON of Kubernetes objects compresses about 5x,
    /// at GB/s) and keeps it.
    pub(super) fn keep(&self, json: &[u8]) -> Body {
        let bytes = lz4_flex::block::compress_prepend_size(json);
        let len = bytes.len();
        if self.held.fetch_add(len as u64, Ordering::Relaxed) + len as u64 <= self.budget {
            return Body::Held(bytes.into_boxed_slice());
        }
        let Some(file) = self.file.get_or_init(spill_file) else {
            return Body::Held(bytes.into_boxed_slice());
        };
        let at = self.end.fetch_add(len as u64, Ordering::Relaxed);
        match file.write_all_at(&bytes, at) {
            Ok(()) => Body::Spilled { at, len },
            Err(e) => {
                tracing::debug!(error = %e, "check: cannot write a body to the spill file; kept in memory");
                Body::Held(bytes.into_boxed_slice())
            }
        }
    }

    /// The JSON kept (`None` if it cannot be read back, which the caller
    /// treats as an object no policy matches).
    pub(super) fn json(&self, body: &Body) -> Option<Vec<u8>> {
        let bytes = match body {
            Body::Held(b) => std::borrow::Cow::Borrowed(&b[..]),
            Body::Spilled { at, len } => {
                let file = self.file.get()?.as_ref()?;
                let mut buf = vec![0; *len];
                file.read_exact_at(&mut buf, *at).ok()?;
                std::borrow::Cow::Owned(buf)
            }
        };
        lz4_flex::block::decompress_size_prepended(&bytes).ok()
    }
}

/// A temporary file no other process can name: created, then unlinked
/// while it stays open (the kernel frees it when the process exits).
fn spill_file() -> Option<File> {
    let dir = std::env::temp_dir();
    for attempt in 0..16u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(
            "interlock-check-{}-{nanos}-{attempt}",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => {
                let _ = std::fs::remove_file(&path);
                return Some(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "check: no spill file; bodies stay in memory");
                return None;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_past_the_budget_go_to_disk_and_come_back_the_same() {
        let bodies = Bodies::with_budget(100);
        let texts: Vec<Vec<u8>> = (0..50)
            .map(|i| {
                format!(
                    "{{\"kind\":\"ConfigMap\",\"n\":{i},\"pad\":\"{}\"}}",
                    "x".repeat(i)
                )
                .into_bytes()
            })
            .collect();
        let kept: Vec<Body> = texts.iter().map(|t| bodies.keep(t)).collect();
        assert!(matches!(kept[0], Body::Held(_)));
        assert!(kept.iter().any(|b| matches!(b, Body::Spilled { .. })));
        for (t, b) in texts.iter().zip(&kept) {
            assert_eq!(bodies.json(b).as_ref(), Some(t));
        }
    }
}
