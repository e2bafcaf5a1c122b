//! Finding and reading input files: files, directories (recursively) and
//! standard input.

use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::error::{LoadError, LoadErrorKind, Source};

/// One input to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    Stdin,
    File(PathBuf),
}

/// True for the extensions a directory walk picks up.
pub(crate) fn has_manifest_extension(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        e.eq_ignore_ascii_case("yaml")
            || e.eq_ignore_ascii_case("yml")
            || e.eq_ignore_ascii_case("json")
    })
}

fn io_error(path: &Path, e: &std::io::Error) -> LoadError {
    LoadError::new(Source::file(path), None, io_error_kind(e))
}

pub(crate) fn io_error_kind(e: &std::io::Error) -> LoadErrorKind {
    LoadErrorKind::Io(describe_io(e))
}

fn describe_io(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::NotFound => "no such file or directory".to_string(),
        ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}

/// Expands the command-line inputs into the files to read, in a stable
/// order: inputs as given, directory entries sorted by name, depth first.
/// Hidden entries (names starting with `.`) are skipped inside directories;
/// a directory reached twice (through a symlink loop) is read once.
/// Paths matching one of `exclude` (see [`excluded`]) are left out, files
/// and whole directories, whether named or found; directories named one of
/// `skip_found_dirs` are left out when found, not when named; files in
/// `claimed` (canonical paths) are left out, named or found.
///
/// Not `walkdir` (used where a plain walk will do: the policy reload's
/// fingerprint, `interlock test`'s discovery): walkdir detects a symlink
/// loop as an error, while a tree that reaches one folder by two links
/// (common in kustomize layouts that share a base) must read it once and
/// quietly, and every unreadable entry must become a [`LoadError`] naming
/// its path beside the files that could be read.
pub(crate) fn discover<P: AsRef<Path>>(
    inputs: &[P],
    exclude: &[String],
    skip_found_dirs: &[String],
    claimed: &HashSet<PathBuf>,
) -> (Vec<Input>, Vec<LoadError>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    let mut seen_files: HashSet<PathBuf> = HashSet::new();
    let mut seen_dirs: HashSet<PathBuf> = HashSet::new();
    let mut add_file = |path: PathBuf, files: &mut Vec<Input>| {
        if excluded(&path, exclude) {
            return;
        }
        let key = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if claimed.contains(&key) {
            return;
        }
        if seen_files.insert(key) {
            files.push(Input::File(path));
        }
    };
    for input in inputs {
        let input = input.as_ref();
        if input.as_os_str() == "-" {
            files.push(Input::Stdin);
            continue;
        }
        let meta = match fs::metadata(input) {
            Ok(m) => m,
            Err(e) => {
                errors.push(io_error(input, &e));
                continue;
            }
        };
        if !meta.is_dir() {
            add_file(input.to_path_buf(), &mut files);
            continue;
        }
        // Depth-first walk in name order (as `find | sort` would list it),
        // with an explicit stack.
        let mut stack = vec![(input.to_path_buf(), true)];
        while let Some((path, is_dir)) = stack.pop() {
            if !is_dir {
                add_file(path, &mut files);
                continue;
            }
            if excluded(&path, exclude) {
                continue;
            }
            let canon = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if !seen_dirs.insert(canon) {
                continue;
            }
            let entries = match fs::read_dir(&path) {
                Ok(rd) => rd,
                Err(e) => {
                    errors.push(io_error(&path, &e));
                    continue;
                }
            };
            let mut names: Vec<PathBuf> = Vec::new();
            for entry in entries {
                match entry {
                    Ok(entry) => {
                        if entry.file_name().to_string_lossy().starts_with('.') {
                            continue;
                        }
                        names.push(entry.path());
                    }
                    Err(e) => errors.push(io_error(&path, &e)),
                }
            }
            names.sort();
            let mut next = Vec::new();
            for p in names {
                match fs::metadata(&p) {
                    Ok(m) if m.is_dir() => {
                        let name = p.file_name().map(|n| n.to_string_lossy());
                        if !name.is_some_and(|n| skip_found_dirs.iter().any(|s| *s == n)) {
                            next.push((p, true));
                        }
                    }
                    Ok(_) => {
                        if has_manifest_extension(&p) {
                            next.push((p, false));
                        }
                    }
                    Err(e) => {
                        // A dangling symlink: only worth a word if it looks like a manifest.
                        if has_manifest_extension(&p) {
                            errors.push(io_error(&p, &e));
                        }
                    }
                }
            }
            stack.extend(next.into_iter().rev());
        }
    }
    (files, errors)
}

/// Reads at most `limit` + 1 bytes from a reader: the bytes, and whether
/// there were more than `limit` (the reader then goes on after them).
pub(crate) fn read_prefix(r: impl Read, limit: u64) -> Result<(Vec<u8>, bool), LoadErrorKind> {
    let mut buf = Vec::new();
    r.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| LoadErrorKind::Io(describe_io(&e)))?;
    let more = buf.len() as u64 > limit;
    Ok((buf, more))
}

/// Reads at most `limit` bytes (more is an error) into `buf` (cleared
/// first), so that a thread reading
/// file after file reuses one buffer: a fresh one per file cost the
/// kernel's zeroing of its pages, about 3% of `check`'s CPU.
fn read_limited_into(mut r: impl Read, limit: u64, buf: &mut Vec<u8>) -> Result<(), LoadErrorKind> {
    buf.clear();
    r.by_ref()
        .take(limit.saturating_add(1))
        .read_to_end(buf)
        .map_err(|e| LoadErrorKind::Io(describe_io(&e)))?;
    if buf.len() as u64 > limit {
        return Err(LoadErrorKind::TooLarge { limit });
    }
    Ok(())
}

/// Reads a file with the size limit.
pub(crate) fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, LoadErrorKind> {
    let mut buf = Vec::new();
    read_file_into(path, limit, &mut buf)?;
    Ok(buf)
}

/// Buffers larger than this are not kept for the next file.
const KEPT_BUFFER: usize = 8 * 1024 * 1024;

thread_local! {
    static BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Reads a file with the size limit into this thread's reusable buffer and
/// hands it to `f`.
pub(crate) fn with_file<T>(
    path: &Path,
    limit: u64,
    f: impl FnOnce(&[u8]) -> T,
) -> Result<T, LoadErrorKind> {
    // Taken out, not borrowed: `f` may run other files' reads on this
    // thread (rayon), which then start from an empty buffer of their own.
    let mut buf = BUFFER.with(std::cell::Cell::take);
    let out = read_file_into(path, limit, &mut buf).map(|()| f(&buf));
    if buf.capacity() <= KEPT_BUFFER {
        BUFFER.with(|b| b.set(buf));
    }
    out
}

fn read_file_into(path: &Path, limit: u64, buf: &mut Vec<u8>) -> Result<(), LoadErrorKind> {
    let file = fs::File::open(path).map_err(|e| LoadErrorKind::Io(describe_io(&e)))?;
    if let Ok(m) = file.metadata() {
        if m.is_file() && m.len() > limit {
            return Err(LoadErrorKind::TooLarge { limit });
        }
        if m.is_dir() {
            return Err(LoadErrorKind::Io("is a directory".to_string()));
        }
        if m.is_file() {
            // One allocation, not a doubling series of copies (+1: the
            // read that finds the end).
            buf.reserve(usize::try_from(m.len()).unwrap_or(0).saturating_add(1));
        }
    }
    read_limited_into(file, limit, buf)
}

/// Does `path` match one of the `--exclude` globs? `*` matches within one
/// path segment, `**` across segments, `?` one character. A pattern without
/// `/` is matched against every segment (`kustomization.yaml`, `*.json`,
/// `charts`); one with `/` against the path as found and against each of
/// its leading directories (`overlays/*/patches`). A leading `./` is
/// ignored on both sides.
pub(crate) fn excluded(path: &Path, patterns: &[String]) -> bool {
    if patterns.is_empty() {
        return false;
    }
    let text = path.to_string_lossy().replace('\\', "/");
    let mut text = text.as_str();
    while let Some(rest) = text.strip_prefix("./") {
        text = rest;
    }
    patterns.iter().any(|p| {
        let mut p = p.as_str();
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
        }
        let p = p.trim_end_matches('/');
        if p.is_empty() {
            return false;
        }
        if !p.contains('/') {
            return text
                .split('/')
                .any(|seg| glob(p.as_bytes(), seg.as_bytes()));
        }
        // The whole path, or a leading part of it that ends at a `/`.
        glob(p.as_bytes(), text.as_bytes())
            || text
                .match_indices('/')
                .any(|(i, _)| glob(p.as_bytes(), &text.as_bytes()[..i]))
    })
}

/// Glob matching on bytes: `*` (not `/`), `**` (anything), `?` (one byte,
/// not `/`). Hand-written rather than `globset`: the contract above
/// (segment patterns, leading folders, `[`, `{` and `\` as plain bytes)
/// is what users' scripts pass, and globset gives those characters other
/// meanings. Each (pattern, text) position is tried once, so a pattern of
/// many stars costs at most pattern x text steps, never an exponential
/// backtrack.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let mut failed = vec![false; (p.len() + 1) * (s.len() + 1)];
    glob_from(p, s, 0, 0, &mut failed)
}

fn glob_from(p: &[u8], s: &[u8], pi: usize, si: usize, failed: &mut [bool]) -> bool {
    let state = pi * (s.len() + 1) + si;
    if failed[state] {
        return false;
    }
    let (pat, text) = (&p[pi..], &s[si..]);
    let matched = match pat {
        [] => text.is_empty(),
        [b'*', b'*', rest @ ..] => {
            let skip = if rest.starts_with(b"/") { 3 } else { 2 };
            (si..=s.len()).any(|i| glob_from(p, s, pi + skip, i, failed))
        }
        [b'*', ..] => {
            let stop = text.iter().position(|&c| c == b'/').unwrap_or(text.len());
            (si..=si + stop).any(|i| glob_from(p, s, pi + 1, i, failed))
        }
        [b'?', ..] => {
            matches!(text, [c, ..] if *c != b'/') && glob_from(p, s, pi + 1, si + 1, failed)
        }
        [c, ..] => text.first() == Some(c) && glob_from(p, s, pi + 1, si + 1, failed),
    };
    if !matched {
        failed[state] = true;
    }
    matched
}

#[cfg(test)]
mod glob_tests {
    use super::excluded;
    use std::path::Path;

    fn ex(path: &str, pattern: &str) -> bool {
        excluded(Path::new(path), &[pattern.to_string()])
    }

    /// A star per byte against a text it almost matches: exponential by
    /// backtracking (2^40 tries), a few thousand steps with each position
    /// tried once. A hang would stop the test run, not fail an assertion.
    #[test]
    fn many_stars_do_not_backtrack_exponentially() {
        let text = format!("{}.yaml", "a".repeat(40));
        let pattern = format!("{}b", "*a".repeat(40));
        assert!(!ex(&text, &pattern));
        assert!(ex(&text, &format!("{}.yaml", "*a".repeat(40))));
    }

    #[test]
    fn segment_patterns_match_any_segment() {
        assert!(ex("repo/base/kustomization.yaml", "kustomization.yaml"));
        assert!(ex("repo/charts/web/templates/a.yaml", "charts"));
        assert!(ex("repo/a.json", "*.json"));
        assert!(!ex("repo/a.json.yaml", "*.json"));
        assert!(ex("repo/values-prod.yaml", "values-*.yaml"));
        assert!(!ex("repo/base/deploy.yaml", "kustomization.yaml"));
    }

    #[test]
    fn path_patterns_match_the_path_or_a_leading_directory() {
        assert!(ex("./overlays/prod/patch.yaml", "overlays/*/patch.yaml"));
        assert!(ex("overlays/prod/patches/p.yaml", "overlays/*/patches"));
        assert!(!ex("overlays/prod/deploy.yaml", "overlays/*/patches"));
        assert!(ex("a/b/c/d.yaml", "a/**/d.yaml"));
        assert!(ex("a/d.yaml", "a/**/d.yaml"));
        assert!(!ex("b/a/d.yaml", "a/*.yaml"));
        assert!(ex("x/y.yaml", "x/?.yaml"));
    }
}
