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
    let notice = |message: String| InputError {
        file: root.join("Chart.yaml").display().to_string(),
        line: None,
        column: None,
        message,
    };
    let output = match template(helm, root, root, values, namespace, opts) {
        Ok(o) => o,
        Err(e) => return Rendered::Failed(notice(format!("helm template: {e}"))),
    };
    if output.success {
        return match documents(root, &output.stdout, opts) {
            Ok(docs) => Rendered::Objects(docs),
            Err(e) => Rendered::Failed(notice(e.to_string())),
        };
    }
    // A chart that needs values, or dependencies that `helm dependency
    // build` would fetch, is well-formed: say what it needs.
    let reason = helm_reason(&output.stderr);
    let Some(missing) = missing_dependencies(&reason) else {
        return Rendered::NotHere(notice(format!(
            "not rendered: helm template failed: {reason}; give the values it needs with --values FILE, or check `helm template` output with `interlock check -`"
        )));
    };
    let build = format!("`helm dependency build {}`", root.display());
    match without_dependencies(helm, root, &missing, values, namespace, opts) {
        Some(docs) => Rendered::Without {
            notice: notice(format!(
                "rendered without its dependencies {}, which Chart.yaml names and charts/ lacks ({build} vendors them): the chart's own objects are checked, not the dependencies', and a reference they may satisfy is not reported",
                missing.join(", ")
            )),
            docs,
            missing,
        },
        None => Rendered::NotHere(notice(format!(
            "not rendered: its dependencies {} are not vendored (Chart.yaml names them, charts/ lacks them), and it does not render without them: run {build}, then check it again",
            missing.join(", ")
        ))),
    }
}

/// `helm template` of the chart in `dir`, named for the chart at `root`.
fn template(
    helm: &Path,
    dir: &Path,
    root: &Path,
    values: &[PathBuf],
    namespace: Option<&str>,
    opts: &LoadOptions,
) -> Result<super::Output, super::RunError> {
    let mut cmd = Command::new(helm);
    cmd.args(["template", &release_name(root)]).arg(dir);
    for v in values {
        cmd.arg("--values").arg(v);
    }
    if let Some(ns) = namespace.filter(|n| !n.is_empty()) {
        cmd.args(["--namespace", ns]);
    }
    run_bounded(&mut cmd, opts.stream_above)
}

/// What stops a rendered chart from being checked: a document of its
/// output that does not load as an object.
#[derive(Debug, thiserror::Error)]
#[error("helm template rendered something that is not an object ({}): {message}", file.display())]
struct NotAnObject {
    file: PathBuf,
    message: String,
}

/// The objects helm rendered for the chart at `root`, each at its template.
fn documents(root: &Path, stdout: &[u8], opts: &LoadOptions) -> Result<Vec<Document>, NotAnObject> {
    let chart_file = root.join("Chart.yaml");
    let text = String::from_utf8_lossy(stdout);
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
            return Err(NotAnObject {
                file,
                message: e.message(),
            });
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
    Ok(docs)
}

/// The dependencies helm refuses to render without: `found in Chart.yaml,
/// but missing in charts/ directory: a, b`.
fn missing_dependencies(reason: &str) -> Option<Vec<String>> {
    let (_, names) = reason.split_once("missing in charts/ directory:")?;
    let names: Vec<String> = names
        .split(',')
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    (!names.is_empty()).then_some(names)
}

/// The chart at `root` rendered from a scratch copy whose `Chart.yaml`
/// (or v1 `requirements.yaml`) no longer names the `missing` dependencies;
/// `None` when that copy does not render either (its templates use them).
fn without_dependencies(
    helm: &Path,
    root: &Path,
    missing: &[String],
    values: &[PathBuf],
    namespace: Option<&str>,
    opts: &LoadOptions,
) -> Option<Vec<Document>> {
    let scratch = super::ScratchDir::new("helm").ok()?;
    let copy = scratch.join(root.file_name()?);
    copy_tree(root, &copy).ok()?;
    for name in ["Chart.yaml", "requirements.yaml"] {
        prune_dependencies(&copy.join(name), missing).ok()?;
    }
    for lock in ["Chart.lock", "requirements.lock"] {
        let _ = fs::remove_file(copy.join(lock));
    }
    let output = template(helm, &copy, root, values, namespace, opts).ok()?;
    if !output.success {
        return None;
    }
    documents(root, &output.stdout, opts).ok()
}

/// Drops the `missing` entries of the `dependencies` list in `file` (kept
/// as it is when it has none); JSON is YAML, so it is written as JSON.
fn prune_dependencies(file: &Path, missing: &[String]) -> std::io::Result<()> {
    let Ok(text) = fs::read_to_string(file) else {
        return Ok(());
    };
    let Some((_, mut chart)) = manifest::yaml_values(&text)
        .ok()
        .and_then(|d| d.into_iter().next())
    else {
        return Ok(());
    };
    let Some(deps) = chart
        .get_mut("dependencies")
        .and_then(serde_json::Value::as_array_mut)
    else {
        return Ok(());
    };
    deps.retain(|d| {
        let name = d.get("name").and_then(serde_json::Value::as_str);
        !name.is_some_and(|n| missing.iter().any(|m| m == n))
    });
    fs::write(file, serde_json::to_vec(&chart).unwrap_or_default())
}

/// Copies the files under `from` to `to` (symbolic links as the files or
/// folders they point to, as helm reads them).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let path = entry?.path();
        let target = to.join(path.file_name().unwrap_or_default());
        if path.is_dir() {
            copy_tree(&path, &target)?;
        } else if path.is_file() {
            fs::copy(&path, &target)?;
        }
    }
    Ok(())
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
