//! Images a CI workflow tags.
//!
//! A GitHub Actions workflow (`.github/workflows/*.yml` or `*.yaml` at the
//! repository's root) is release tooling as much as a Makefile: after it
//! builds and pushes an image, a step writes the new tag into the
//! manifests before they are applied or copied to the repository a
//! cluster syncs from, while the committed file keeps `latest`. Two
//! shapes of step are read:
//!
//! - `run:` (a shell script; `jobs.<id>.steps[*].run`), run in the
//!   step's `working-directory`, else the job's or the workflow's
//!   `defaults.run.working-directory`, else the workspace root (the
//!   repository's checkout). It is read as [`release`](super::release)
//!   reads a script: `kustomize edit set image`, a `newTag`/`latest`
//!   substitution, a chart rendered with `--set …tag=`. A `cmd:` input
//!   (the yq action's) is read the same way.
//! - an action that sets one field of a YAML file: `with:` names the
//!   file (`valueFile`, `file` or `infile`) and the field as a dotted
//!   path (`propertyPath` or `path`; a list item by its index, `list.0`
//!   or `list[0]`), as fjogeleit/yaml-update-action and
//!   endaft/action-yamler document their inputs; yaml-update-action's
//!   `changes` gives several at once, `{FILE: {PATH: VALUE}}`. Where the
//!   field's last key is `image`, the image the file holds there is the
//!   release's.
//!
//! Workflows elsewhere (a folder's own `.github`, another CI) are not read.

use serde_json::Value as Json;
use std::path::Path;

/// The image repositories the workflows of the repository at `root` tag.
pub(super) fn images(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root.join(".github/workflows")) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !(name.ends_with(".yml") || name.ends_with(".yaml")) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        for workflow in super::yaml_documents(&text) {
            out.extend(workflow_images(&workflow, root));
        }
    }
    out
}

/// The images the steps of one workflow tag.
fn workflow_images(workflow: &Json, root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let top_dir = default_dir(workflow);
    let jobs = workflow.get("jobs").and_then(Json::as_object);
    for job in jobs.into_iter().flat_map(|j| j.values()) {
        let job_dir = default_dir(job).or(top_dir);
        let steps = job.get("steps").and_then(Json::as_array);
        for step in steps.into_iter().flatten() {
            let wd = step
                .get("working-directory")
                .and_then(Json::as_str)
                .or(job_dir);
            let dir = wd.map_or_else(|| root.to_path_buf(), |d| root.join(d));
            let with = step.get("with");
            let scripts = [step.get("run"), with.and_then(|w| w.get("cmd"))];
            for script in scripts.into_iter().flatten().filter_map(Json::as_str) {
                let script = in_directory(&expressions_as_variables(script), wd);
                out.extend(super::release::script_images(&script, root, &dir));
            }
            if let Some(with) = with {
                out.extend(set_fields(with).into_iter().filter_map(|(file, path)| {
                    image_at(&root.join(file), &path).map(|i| super::repository(&i).to_string())
                }));
            }
        }
    }
    out
}

/// `script` with each `${{ … }}` expression (which Actions substitutes
/// before the shell runs) written as one shell variable, so that the
/// words around it stay words.
fn expressions_as_variables(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    let mut rest = script;
    while let Some(start) = rest.find("${{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str("${ACTIONS_EXPRESSION}");
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

/// `script` with each line that does not change directory itself
/// written as run in `wd` (`cd WD && …`), as the release rules read the
/// directory of a command from a `cd` on its line.
fn in_directory(script: &str, wd: Option<&str>) -> String {
    let Some(wd) = wd else {
        return script.to_string();
    };
    script
        .lines()
        .map(|l| {
            if l.contains("cd ") || l.trim().is_empty() {
                l.to_string()
            } else {
                format!("cd {wd} && {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `defaults.run.working-directory` of a workflow or a job.
fn default_dir(holder: &Json) -> Option<&str> {
    holder
        .pointer("/defaults/run/working-directory")
        .and_then(Json::as_str)
}

/// The image fields a YAML-update step sets: (file, dotted path) pairs
/// whose path ends in `image`.
fn set_fields(with: &Json) -> Vec<(String, String)> {
    let s = |keys: &[&str]| keys.iter().find_map(|k| with.get(*k)?.as_str());
    let mut fields = Vec::new();
    if let (Some(file), Some(path)) = (
        s(&["valueFile", "file", "infile"]),
        s(&["propertyPath", "path"]),
    ) {
        fields.push((file.to_string(), path.to_string()));
    }
    // `changes` is a YAML (or JSON) string: {FILE: {PATH: VALUE}}.
    let changes = s(&["changes"]).map(super::yaml_documents);
    for doc in changes.into_iter().flatten() {
        for (file, paths) in doc.as_object().into_iter().flatten() {
            for path in paths.as_object().into_iter().flat_map(|p| p.keys()) {
                fields.push((file.clone(), path.clone()));
            }
        }
    }
    fields.retain(|(_, path)| path.rsplit('.').next() == Some("image"));
    fields
}

/// The string at the dotted `path` of the first document of `file` that
/// has one.
fn image_at(file: &Path, path: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let pointer: String = path
        .replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|k| !k.is_empty())
        .map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1")))
        .collect();
    super::yaml_documents(&text)
        .iter()
        .find_map(|d| d.pointer(&pointer)?.as_str().map(str::to_string))
}

#[cfg(test)]
#[path = "ci_workflow_tests.rs"]
mod tests;
