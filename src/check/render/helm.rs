//! Helm charts, rendered by the real helm when it is on PATH: `helm
//! template` with the chart's default values (and every `--values FILE`),
//! each object reported at its template (helm's `# Source:` comment) with
//! the chart that rendered it. A chart inside another chart's folder (a
//! vendored subchart) is rendered by its parent. Without helm, charts are
//! skipped with a notice, as before.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use rayon::prelude::*;

use crate::manifest::{self, Document, Format, LoadOptions, Source};
use crate::report::InputError;

use super::{canonical, display_path, find_on_path, run_bounded, sorted_entries, Rendered};

/// The charts found in the inputs.
#[derive(Debug, Default)]
pub struct Charts {
    /// Chart folders (with a `Chart.yaml`), outermost only, as found.
    pub roots: Vec<PathBuf>,
    /// Canonical paths of every manifest-like file inside them.
    pub claimed: HashSet<PathBuf>,
}

/// Finds the charts under `inputs` (hidden entries and `exclude` matches
/// left out).
pub fn charts(inputs: &[PathBuf], exclude: &[String]) -> Charts {
    let mut out = Charts::default();
    for input in inputs.iter().filter(|i| i.is_dir()) {
        walk(input, None, exclude, &mut out);
    }
    out
}

fn walk(dir: &Path, chart: Option<&Path>, exclude: &[String], out: &mut Charts) {
    if manifest::excluded(dir, exclude) {
        return;
    }
    let chart = match chart {
        Some(c) => Some(c.to_path_buf()),
        None if dir.join("Chart.yaml").is_file() => {
            out.roots.push(dir.to_path_buf());
            Some(dir.to_path_buf())
        }
        None => None,
    };
    for p in sorted_entries(dir) {
        // Symlinked folders are not followed: a chart's files are its own.
        if p.is_dir() && !p.is_symlink() {
            walk(&p, chart.as_deref(), exclude, out);
        } else if chart.is_some() && manifest::has_manifest_extension(&p) {
            out.claimed.insert(canonical(&p));
        }
    }
}

/// `helm` on PATH.
pub fn helm_on_path() -> Option<PathBuf> {
    find_on_path("helm")
}

/// Renders every chart, in parallel.
pub fn render_all(
    helm: &Path,
    roots: &[PathBuf],
    values: &[PathBuf],
    namespace: Option<&str>,
    opts: &LoadOptions,
) -> Vec<Rendered> {
    roots
        .par_iter()
        .map(|root| render(helm, root, values, namespace, opts))
        .collect()
}

fn render(
    helm: &Path,
    root: &Path,
    values: &[PathBuf],
    namespace: Option<&str>,
    opts: &LoadOptions,
) -> Rendered {
    let chart_file = root.join("Chart.yaml");
    let notice = |message: String| InputError {
        file: chart_file.display().to_string(),
        line: None,
        column: None,
        message,
    };
    let release = release_name(root);
    let mut cmd = Command::new(helm);
    cmd.args(["template", &release]).arg(root);
    for v in values {
        cmd.arg("--values").arg(v);
    }
    if let Some(ns) = namespace.filter(|n| !n.is_empty()) {
        cmd.args(["--namespace", ns]);
    }
    let output = match run_bounded(&mut cmd, opts.stream_above) {
        Ok(o) => o,
        Err(e) => return Rendered::Failed(notice(format!("helm template: {e}"))),
    };
    if !output.success {
        // A chart that needs values, or dependencies that `helm dependency
        // build` would fetch, is well-formed: say what it needs.
        let reason = helm_reason(&output.stderr);
        return Rendered::NotHere(notice(format!(
            "not rendered: helm template failed: {reason}; give the values it needs with --values FILE (or vendor its dependencies with `helm dependency build`), or check `helm template` output with `interlock check -`"
        )));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let by: Arc<str> = Arc::from(root.display().to_string());
    let load = LoadOptions {
        reject_duplicate_objects: false,
        ..opts.clone()
    };
    let mut lines = TemplateLines::default();
    let mut docs = Vec::new();
    for chunk in split_documents(&text) {
        let template = source_of(chunk).map(|s| template_path(root, s));
        let file = template.clone().unwrap_or_else(|| chart_file.clone());
        let loaded = manifest::load_str(Source::file(&file), chunk, Format::Yaml, &load);
        if let Some(e) = loaded.errors.first() {
            return Rendered::Failed(notice(format!(
                "helm template rendered something that is not an object ({}): {}",
                file.display(),
                e.message()
            )));
        }
        for d in loaded.documents {
            let kind = d.kind().to_string();
            let line = template.as_ref().map_or(1, |t| lines.next(t, &kind));
            let mut doc =
                Document::new(Source::file(display_path(&canonical(&file))), line, d.value);
            doc.rendered_by = Some(Arc::clone(&by));
            docs.push(doc);
        }
    }
    Rendered::Objects(docs)
}

/// A release name helm accepts, from the chart's folder.
fn release_name(root: &Path) -> String {
    let name: String = root
        .canonicalize()
        .ok()
        .and_then(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().to_ascii_lowercase())
        })
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let name = name.trim_matches('-');
    if name.is_empty() {
        "release".to_string()
    } else {
        name.chars().take(53).collect()
    }
}

/// helm's documents: separated by `---` lines.
fn split_documents(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "---" {
            out.push(&text[start..at]);
            start = at + line.len();
        }
        at += line.len();
    }
    out.push(&text[start..]);
    out.into_iter().filter(|c| !c.trim().is_empty()).collect()
}

/// The `# Source: chart/templates/x.yaml` comment of a document.
fn source_of(chunk: &str) -> Option<&str> {
    chunk
        .lines()
        .find_map(|l| l.strip_prefix("# Source: "))
        .map(str::trim)
}

/// helm names a template `CHART-NAME/templates/x.yaml` (the chart's own
/// name, not its folder's): the same path under the chart's folder.
fn template_path(root: &Path, source: &str) -> PathBuf {
    let rest = source.split_once('/').map_or(source, |(_, r)| r);
    root.join(rest)
}

/// The line of each object in its template: the n-th `kind: K` line for
/// the n-th object of kind K rendered from it.
#[derive(Default)]
struct TemplateLines {
    files: HashMap<PathBuf, Vec<(usize, String)>>,
    used: HashMap<(PathBuf, String), usize>,
}

impl TemplateLines {
    fn next(&mut self, template: &Path, kind: &str) -> usize {
        let kinds = self
            .files
            .entry(template.to_path_buf())
            .or_insert_with(|| kind_lines(template));
        let n = self
            .used
            .entry((template.to_path_buf(), kind.to_string()))
            .or_insert(0);
        let line = kinds
            .iter()
            .filter(|(_, k)| k == kind)
            .nth(*n)
            .or_else(|| kinds.iter().find(|(_, k)| k == kind))
            .map_or(1, |(l, _)| *l);
        *n += 1;
        line
    }
}

fn kind_lines(template: &Path) -> Vec<(usize, String)> {
    let Ok(text) = fs::read_to_string(template) else {
        return vec![];
    };
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let k = l.strip_prefix("kind:")?.trim().trim_matches(['"', '\'']);
            Some((i + 1, k.to_string()))
        })
        .collect()
}

/// helm's reason: its `Error: ...` line.
fn helm_reason(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .rev()
        .find(|l| l.starts_with("Error:"))
        .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
        .map(|l| l.trim_start_matches("Error:").trim().to_string())
        .unwrap_or_else(|| "no message".to_string())
}

#[cfg(test)]
#[path = "helm_tests.rs"]
mod tests;
