//! Which case files belong to which policy, and why a path gives none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The cases found under some paths.
#[derive(Debug, Default)]
pub struct Discovered {
    /// `NAME/policy.yaml` -> its case files, in name order.
    pub policies: BTreeMap<PathBuf, Vec<PathBuf>>,
    /// Paths that gave no case, and why.
    pub errors: Vec<String>,
}

const LAYOUT: &str =
    "`interlock test` runs NAME/tests/*.yaml next to NAME/policy.yaml (policies/README.md)";

/// Every (policy.yaml, case file) pair under `roots`, in order; paths that
/// give none are left out (see [`find`] for why).
pub fn discover(roots: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    find(roots)
        .policies
        .into_iter()
        .flat_map(|(p, cases)| cases.into_iter().map(move |c| (p.clone(), c)))
        .collect()
}

/// Finds the case files of every policy folder under `roots`; a root may
/// also be one case file or one policy.yaml.
pub fn find(roots: &[PathBuf]) -> Discovered {
    let mut out = Discovered::default();
    for root in roots {
        let before: usize = out.policies.values().map(Vec::len).sum();
        if !root.exists() {
            out.errors
                .push(format!("{}: no such file or folder", root.display()));
            continue;
        }
        let mut untested = Vec::new();
        if root.is_file() {
            add_file(root, &mut out);
        } else {
            walk(root, &mut out, &mut untested);
        }
        let after: usize = out.policies.values().map(Vec::len).sum();
        if after > before || root.is_file() {
            continue;
        }
        out.errors.push(match untested.first() {
            Some(p) => format!(
                "{}: {} has no case files (tests/*.yaml){}; {LAYOUT}",
                root.display(),
                p.display(),
                match untested.len() {
                    1 => String::new(),
                    n => format!(", nor do {} other policies", n - 1),
                }
            ),
            None => format!(
                "{}: no policy.yaml in this folder or below it; {LAYOUT}",
                root.display()
            ),
        });
    }
    for cases in out.policies.values_mut() {
        cases.sort();
        cases.dedup();
    }
    out
}

fn is_yaml(p: &Path) -> bool {
    p.extension().is_some_and(|x| x == "yaml" || x == "yml")
}

/// A file given by itself: a policy.yaml, or a case in NAME/tests/.
fn add_file(file: &Path, out: &mut Discovered) {
    if file.file_name().is_some_and(|n| n == "policy.yaml") {
        let cases = cases_of(file.parent().unwrap_or(Path::new(".")));
        if cases.is_empty() {
            out.errors.push(format!(
                "{}: the policy has no case files (tests/*.yaml); {LAYOUT}",
                file.display()
            ));
        }
        out.policies
            .entry(file.to_path_buf())
            .or_default()
            .extend(cases);
        return;
    }
    let policy = file
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "tests"))
        .and_then(Path::parent)
        .map(|d| d.join("policy.yaml"))
        .filter(|p| p.is_file());
    match policy {
        Some(p) if is_yaml(file) => out.policies.entry(p).or_default().push(file.to_path_buf()),
        _ => out.errors.push(format!(
            "{}: not a case file of a policy: {LAYOUT}",
            file.display()
        )),
    }
}

fn cases_of(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir.join("tests")) else {
        return vec![];
    };
    let mut cases: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && is_yaml(p))
        .collect();
    cases.sort();
    cases
}

/// Every folder under `dir` (itself first, then each subfolder in name
/// order, depth first, `tests/` folders left out) that holds a
/// `policy.yaml`. Symlinked folders are followed; a cycle is walked once.
fn walk(dir: &Path, out: &mut Discovered, untested: &mut Vec<PathBuf>) {
    let folders = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || e.file_name() != "tests")
        .flatten()
        .filter(|e| e.file_type().is_dir());
    for folder in folders {
        let policy = folder.path().join("policy.yaml");
        if !policy.is_file() {
            continue;
        }
        let cases = cases_of(folder.path());
        if cases.is_empty() {
            untested.push(policy);
        } else {
            out.policies.entry(policy).or_default().extend(cases);
        }
    }
}
