//! Sources that are not objects until a tool renders them: kustomize
//! layouts and Helm charts. `interlock check` runs the real tools (found on
//! PATH), never a re-implementation, and checks what they render, each
//! object reported at the source file it came from.

pub mod helm;
pub mod kustomize;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::manifest::Document;
use crate::report::InputError;

/// How long one render may take (a remote base that hangs).
const BUILD_TIMEOUT: Duration = Duration::from_secs(120);

/// What rendering one kustomization or chart gave.
pub enum Rendered {
    Objects(Vec<Document>),
    /// Input that the tool refused: a real error.
    Failed(InputError),
    /// Could not be rendered here (a remote base, values it needs): a notice.
    NotHere(InputError),
    /// A part its project leaves off, which no one builds alone (a
    /// kubebuilder scaffold's commented-out webhook): a notice, and
    /// nothing is rendered in its place.
    LeftOff(InputError),
    /// A Helm chart rendered without the dependencies it names that its
    /// `charts/` folder lacks: its own objects, and a notice.
    Without {
        docs: Vec<Document>,
        notice: InputError,
        missing: Vec<String>,
    },
}

impl Rendered {
    /// Objects to `docs`, a refusal to `errors`, what cannot be rendered
    /// here to `notices`.
    pub fn sort_into(
        self,
        docs: &mut Vec<Document>,
        errors: &mut Vec<InputError>,
        notices: &mut Vec<InputError>,
    ) {
        match self {
            Rendered::Objects(d) => docs.extend(d),
            Rendered::Failed(e) => errors.push(e),
            Rendered::NotHere(e) | Rendered::LeftOff(e) => notices.push(e),
            Rendered::Without {
                docs: d, notice, ..
            } => {
                docs.extend(d);
                notices.push(notice);
            }
        }
    }
}

/// A folder of its own under the temporary folder, removed on drop.
pub(crate) struct ScratchDir(PathBuf);

impl ScratchDir {
    pub(crate) fn new(tag: &str) -> std::io::Result<ScratchDir> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "interlock-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir)?;
        Ok(ScratchDir(dir))
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A folder's entries, hidden ones left out, in name order (as `find |
/// sort` lists them); none when it cannot be read.
pub(crate) fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return vec![];
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    paths.sort();
    paths
}

/// An executable named `name` in a folder of PATH.
pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

pub(crate) fn canonical(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// A source file as the user would name it: relative to the working
/// folder when it is inside it.
pub(crate) fn display_path(p: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .map(|cwd| canonical(&cwd))
        .and_then(|cwd| p.strip_prefix(&cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| p.to_path_buf())
}

pub(crate) struct Output {
    pub success: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a renderer's run gave no output to read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("cannot run it: {0}")]
    Spawn(std::io::Error),
    #[error("no standard {0}")]
    NoOutput(&'static str),
    #[error("did not finish within {0} s (a remote base that does not answer?)")]
    Timeout(u64),
    #[error("{0}")]
    Io(std::io::Error),
    #[error("the output reader panicked")]
    ReaderPanicked,
    #[error("rendered more than the limit of {0} bytes")]
    TooLarge(u64),
}

/// Runs a command with no input, a time limit, and at most `limit` bytes
/// of output kept.
pub(crate) fn run_bounded(cmd: &mut Command, limit: u64) -> Result<Output, RunError> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(RunError::Spawn)?;
    let mut out = child.stdout.take().ok_or(RunError::NoOutput("output"))?;
    let mut err = child.stderr.take().ok_or(RunError::NoOutput("error"))?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let read = out
            .by_ref()
            .take(limit.saturating_add(1))
            .read_to_end(&mut buf);
        // Drain the rest so the child never blocks on a full pipe.
        let _ = std::io::copy(&mut out, &mut std::io::sink());
        read.map(|_| buf)
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.by_ref().take(64 * 1024).read_to_end(&mut buf);
        let _ = std::io::copy(&mut err, &mut std::io::sink());
        buf
    });
    let deadline = Instant::now() + BUILD_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Timeout(BUILD_TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(RunError::Io(e)),
        }
    };
    let stdout = reader
        .join()
        .map_err(|_| RunError::ReaderPanicked)?
        .map_err(RunError::Io)?;
    let stderr = err_reader.join().unwrap_or_default();
    if stdout.len() as u64 > limit {
        return Err(RunError::TooLarge(limit));
    }
    Ok(Output {
        success: status.success(),
        stdout,
        stderr,
    })
}
