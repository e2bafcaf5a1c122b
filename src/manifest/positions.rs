//! Where fields are: a compact index from JSON paths to source lines.
//!
//! Every node whose line differs from its parent's is stored as one
//! `(hash of its path, line)` pair in a sorted vector; a lookup that finds no
//! entry falls back to the nearest ancestor, which by construction is on the
//! same line. A mapping entry's line is the line of its key, a sequence
//! item's line is where the item starts. Nodes copied by an alias and keys
//! brought in by a merge (`<<`) take the line of the alias or the mapping.

/// One step of a path into a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathSegment<'a> {
    /// A key of an object.
    Key(&'a str),
    /// An index into an array.
    Index(usize),
}

impl<'a> From<&'a str> for PathSegment<'a> {
    fn from(key: &'a str) -> Self {
        PathSegment::Key(key)
    }
}

impl From<usize> for PathSegment<'_> {
    fn from(index: usize) -> Self {
        PathSegment::Index(index)
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash of the empty path (the document itself).
pub(crate) const ROOT: u64 = FNV_OFFSET;

#[inline]
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The hash of `parent` followed by the key `key`.
#[inline]
pub(crate) fn child_key(parent: u64, key: &str) -> u64 {
    // 0xfe and 0xff never occur in UTF-8, so keys and indexes cannot be
    // confused and a key cannot run into the next one.
    let h = fnv(parent, &[0xfe]);
    let h = fnv(h, key.as_bytes());
    fnv(h, &[0xff])
}

/// The hash of `parent` followed by the index `index`.
#[inline]
pub(crate) fn child_index(parent: u64, index: usize) -> u64 {
    let h = fnv(parent, &[0xff]);
    fnv(h, &(index as u64).to_le_bytes())
}

pub(crate) fn child(parent: u64, seg: PathSegment<'_>) -> u64 {
    match seg {
        PathSegment::Key(k) => child_key(parent, k),
        PathSegment::Index(i) => child_index(parent, i),
    }
}

/// Lines of the nodes of one parsed document (shared by the items of a
/// `kind: List`).
#[derive(Debug, Default, Clone)]
pub(crate) struct PositionIndex {
    /// Sorted by hash.
    entries: Vec<(u64, u32)>,
}

impl PositionIndex {
    pub(crate) fn from_entries(mut entries: Vec<(u64, u32)>) -> Self {
        entries.sort_unstable_by_key(|e| e.0);
        entries.shrink_to_fit();
        PositionIndex { entries }
    }

    pub(crate) fn get(&self, hash: u64) -> Option<u32> {
        self.entries
            .binary_search_by_key(&hash, |e| e.0)
            .ok()
            .map(|i| self.entries[i].1)
    }

    pub(crate) fn entries(&self) -> &[(u64, u32)] {
        &self.entries
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Records entries while a document is being built.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub(crate) entries: Vec<(u64, u32)>,
}

impl Recorder {
    /// Records `line` for `hash` unless it equals the parent's line.
    #[inline]
    pub(crate) fn record(&mut self, hash: u64, line: u32, parent_line: u32) {
        if line != parent_line {
            self.entries.push((hash, line));
        }
    }

    /// The first line recorded for `hash` while building, or `fallback`.
    pub(crate) fn line_of(&self, hash: u64, fallback: u32) -> u32 {
        self.entries
            .iter()
            .find(|e| e.0 == hash)
            .map_or(fallback, |e| e.1)
    }
}

#[cfg(test)]
#[path = "positions_tests.rs"]
mod tests;
