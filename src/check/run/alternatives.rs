//! Objects the raw files define more than once.
//!
//! Two definitions of one object (kind, namespace, name) cannot both be in
//! a cluster: files that give it twice are versions of one another (a
//! book's successive chapters, a tutorial's steps, an install's variants),
//! and which of them is applied is the reader's choice. So a conflict
//! between objects (an Ingress host claimed twice, a PDB overlapping
//! another) is not certain when it involves such an object, nor when both
//! objects come from one folder whose files redefine one another: the
//! folder holds alternatives, and the two may never be applied together.
//! Such a Deny is reported as a Warn saying why. A finding about one
//! object alone is not touched: its problem is real in whichever version
//! is applied.
//!
//! Renders are not counted: kustomize and helm refuse a key given twice
//! within one render, and two renders are alternatives already
//! ([`ApplyUnits`]).

use super::*;

/// The raw files' keys given more than once, and the folders where two
/// files give one key.
pub(super) struct Alternatives {
    /// Per key: how many raw copies.
    redefined: HashMap<ObjectKey, usize>,
    /// Per item index of a raw copy: its key.
    copy_of: HashMap<usize, ObjectKey>,
    /// Folder -> a key two of its files give.
    folders: HashMap<String, ObjectKey>,
}

/// The folder of a source file, as written.
fn folder(file: &str) -> &str {
    file.rsplit_once('/').map_or("", |(dir, _)| dir)
}

impl Alternatives {
    pub(super) fn of(items: &[Item], duplicated: &Duplicated<'_>, units: &ApplyUnits) -> Self {
        let mut out = Alternatives {
            redefined: HashMap::new(),
            copy_of: HashMap::new(),
            folders: HashMap::new(),
        };
        for (key, later) in duplicated.copies {
            let raw: Vec<usize> = std::iter::once(duplicated.sources[key])
                .chain(later.iter().copied())
                .filter(|&i| units.unit[i].is_none())
                .collect();
            let mut files: Vec<&str> = raw.iter().map(|&i| items[i].source.file.as_str()).collect();
            files.sort_unstable();
            files.dedup();
            if files.len() < 2 {
                continue;
            }
            out.redefined.insert(key.clone(), files.len());
            out.copy_of.extend(raw.iter().map(|&i| (i, key.clone())));
            let mut dirs: Vec<&str> = files.iter().map(|f| folder(f)).collect();
            dirs.sort_unstable();
            for pair in dirs.windows(2).filter(|p| p[0] == p[1]) {
                out.folders
                    .entry(pair[0].to_string())
                    .or_insert_with(|| key.clone());
            }
        }
        out
    }

    /// Why a conflict between item `i` and `related` is not certain, if
    /// it is not.
    pub(super) fn why(
        &self,
        i: usize,
        related: &[ObjectKey],
        items: &[Item],
        duplicated: &Duplicated<'_>,
    ) -> Option<String> {
        if related.is_empty() {
            return None;
        }
        let defined = |key: &ObjectKey| {
            self.redefined.get(key).map(|n| {
                format!("{key} is defined in {n} files, versions of one another that are not applied together")
            })
        };
        if let Some(why) = self.copy_of.get(&i).and_then(defined) {
            return Some(why);
        }
        if let Some(why) = related.iter().find_map(defined) {
            return Some(why);
        }
        if items[i].source.rendered_by.is_some() {
            return None;
        }
        let mine = folder(&items[i].source.file);
        let example = self.folders.get(mine)?;
        related
            .iter()
            .filter_map(|k| duplicated.sources.get(k))
            .any(|&r| items[r].source.rendered_by.is_none() && folder(&items[r].source.file) == mine)
            .then(|| {
                format!("both come from {mine}, whose files define {example} more than once: versions of one another, not applied together for certain")
            })
    }
}

#[cfg(test)]
#[path = "alternatives_tests.rs"]
mod tests;
