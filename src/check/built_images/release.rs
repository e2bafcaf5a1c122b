//! Images whose tag a release script writes with `kustomize edit set
//! image`.
//!
//! kustomize's `edit set image NAME=NEWNAME:TAG` (or `NAME:TAG`) rewrites
//! the `images:` entry of the kustomization in the working directory.
//! Projects that ship an install YAML run it from a release script or a
//! Makefile target (`cd config/manager && kustomize edit set image
//! controller=${IMG}`, kubebuilder's scaffold) and keep `latest` or no
//! tag in the committed files between releases. An image such a command
//! names is tagged at release, so its `latest` in the repository is a
//! placeholder, not what a release installs.
//!
//! The scripts are the repository's `Makefile`s, `*.mk` and `*.sh` files
//! (hidden directories, `vendor` and `node_modules` are not entered). The
//! image a command names is read from its argument when that is written
//! out (`controller=${IMG}` names `controller`); when the name is a
//! variable, every image of the kustomization in the directory the
//! command runs in (`cd DIR && ... edit set image`) is taken.

use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Scripts larger than this are not read (none a release needs).
const MAX_SCRIPT_BYTES: u64 = 1 << 20;
/// At most this many scripts are read in one repository.
const MAX_SCRIPTS: usize = 5_000;
const SKIPPED_DIRS: &[&str] = &["vendor", "node_modules", "third_party"];

/// The images the release scripts of the repositories of `inputs` tag.
pub(super) fn images(inputs: &[PathBuf]) -> BTreeSet<String> {
    let roots: BTreeSet<PathBuf> = inputs
        .iter()
        .filter_map(|i| super::repository_root(i))
        .collect();
    let mut images = Vec::new();
    for root in roots {
        let mut scripts = Vec::new();
        find_scripts(&root, &mut scripts);
        for script in scripts {
            let Ok(text) = std::fs::read_to_string(&script) else {
                continue;
            };
            let dir = script.parent().unwrap_or(&root);
            for command in set_image_commands(&text) {
                images.extend(command.images(&root, dir));
            }
            for kustomization in retagged_kustomizations(&text) {
                let at = resolve(&kustomization, &root, dir);
                for (name, new_name) in at
                    .and_then(|d| kustomization_images(&d))
                    .unwrap_or_default()
                {
                    images.push(name);
                    images.extend(new_name);
                }
            }
        }
    }
    images.into_iter().collect()
}

fn find_scripts(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if out.len() >= MAX_SCRIPTS {
            return;
        }
        let Ok(t) = e.file_type() else { continue };
        let name = e.file_name();
        let name = name.to_string_lossy();
        if t.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                find_scripts(&e.path(), out);
            }
        } else if t.is_file()
            && (name == "Makefile"
                || name == "GNUmakefile"
                || name.ends_with(".mk")
                || name.ends_with(".sh"))
            && e.metadata().is_ok_and(|m| m.len() <= MAX_SCRIPT_BYTES)
        {
            out.push(e.path());
        }
    }
}

/// One `edit set image` command: the directory it runs in, when a `cd`
/// before it on the same line says, and its arguments.
#[derive(Debug, PartialEq)]
struct SetImage {
    dir: Option<String>,
    args: Vec<String>,
}

/// Every `edit set image` command of a script, its continued lines
/// (`\` at the end) joined first.
fn set_image_commands(text: &str) -> Vec<SetImage> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let line = line.trim_start();
        if line.starts_with('#') {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("edit set image") {
            let before = &rest[..at];
            let after = &rest[at + "edit set image".len()..];
            let end = after
                .find([';', '&', '|', ')', '\n'])
                .unwrap_or(after.len());
            let args = after[..end]
                .split_whitespace()
                .map(|a| a.trim_matches(|c| c == '"' || c == '\'').to_string())
                .filter(|a| !a.is_empty() && !a.starts_with('-'))
                .collect();
            out.push(SetImage {
                dir: last_cd(before),
                args,
            });
            rest = &after[end..];
        }
    }
    out
}

/// The folders of the kustomizations a script rewrites the `newTag` of
/// with a text tool (`sed 's/newTag: .*/newTag: $(VERSION)/'
/// manifests/base/kustomization.yaml`): every line that names `newTag`
/// and a kustomization file.
fn retagged_kustomizations(text: &str) -> Vec<String> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        if line.trim_start().starts_with('#') || !line.contains("newTag") {
            continue;
        }
        for word in line.split(|c: char| {
            c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '<' | '>')
        }) {
            let word = word.trim_matches(|c| c == '"' || c == '\'');
            let Some(dir) = ["kustomization.yaml", "kustomization.yml"]
                .iter()
                .find_map(|f| word.strip_suffix(f))
            else {
                continue;
            };
            let dir = dir.trim_end_matches('/');
            out.push(if dir.is_empty() {
                ".".to_string()
            } else {
                dir.to_string()
            });
        }
    }
    out
}

/// The directory of the last `cd DIR` in `text`.
fn last_cd(text: &str) -> Option<String> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '(' | '|'))
        .filter(|w| !w.is_empty())
        .collect();
    let i = words.iter().rposition(|w| *w == "cd")?;
    let dir = words.get(i + 1)?;
    Some(dir.trim_matches(|c| c == '"' || c == '\'').to_string())
}

impl SetImage {
    /// The image repositories this command tags.
    fn images(&self, root: &Path, script_dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut unnamed = false;
        for arg in &self.args {
            let name = match arg.split_once('=') {
                Some((name, _)) => name,
                None => super::repository(arg),
            };
            if name.contains('$') || name.is_empty() {
                unnamed = true;
            } else {
                out.push(name.to_string());
            }
        }
        let kustomization = self
            .dir
            .as_deref()
            .and_then(|d| resolve(d, root, script_dir))
            .and_then(|d| kustomization_images(&d));
        if let Some(entries) = kustomization {
            for (name, new_name) in entries {
                // The entry this command rewrites: named by it, or every
                // entry when the command's name is a variable.
                if unnamed || out.contains(&name) {
                    out.push(name);
                    out.extend(new_name);
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// A `cd` target as a directory of the repository: a leading variable
/// (`${SRCROOT}/`, `$(CURDIR)/`, `$CWD/`) stands for the repository's or
/// the script's directory; any other variable cannot be resolved.
fn resolve(dir: &str, root: &Path, script_dir: &Path) -> Option<PathBuf> {
    let mut rel = dir;
    if rel.starts_with('$') {
        rel = rel.split_once('/').map_or("", |(_, r)| r);
    }
    if rel.contains('$') || rel.is_empty() {
        return None;
    }
    [script_dir, root]
        .iter()
        .map(|base| base.join(rel))
        .find(|d| d.is_dir())
}

/// The `images:` entries of the kustomization in `dir`: name and newName.
fn kustomization_images(dir: &Path) -> Option<Vec<(String, Option<String>)>> {
    let file = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .iter()
        .map(|n| dir.join(n))
        .find(|f| f.is_file())?;
    let text = std::fs::read_to_string(file).ok()?;
    let doc = super::yaml_documents(&text).into_iter().next()?;
    let entries = doc.get("images")?.as_array()?;
    Some(
        entries
            .iter()
            .filter_map(|e| {
                let name = e.get("name")?.as_str()?.to_string();
                let new_name = e.get("newName").and_then(Json::as_str).map(str::to_string);
                Some((name, new_name))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_with_their_directory_and_arguments() {
        let script = r#"#!/bin/sh
# kustomize edit set image commented-out=x
cd "${SRCROOT}/manifests/base" && $KUSTOMIZE edit set image "${SOURCE}=${TARGET}:${TAG}"
deploy: manifests
	cd config/manager && $(KUSTOMIZE) edit set image controller=${IMG}
	cd config/default && \
	  kustomize edit set image example.com/op:v1 other=x; kubectl apply -k .
kustomize edit set image kubeflow/training-operator=${CI_IMAGE}
"#;
        let got = set_image_commands(script);
        let want = [
            (
                Some("${SRCROOT}/manifests/base"),
                vec!["${SOURCE}=${TARGET}:${TAG}"],
            ),
            (Some("config/manager"), vec!["controller=${IMG}"]),
            (Some("config/default"), vec!["example.com/op:v1", "other=x"]),
            (None, vec!["kubeflow/training-operator=${CI_IMAGE}"]),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, (dir, args)) in got.iter().zip(want) {
            assert_eq!(g.dir.as_deref(), dir);
            assert_eq!(g.args, args);
        }
    }

    #[test]
    fn a_variable_name_takes_the_images_of_the_kustomization_it_runs_in() {
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("hack")).unwrap();
        std::fs::create_dir_all(root.join("manifests/base")).unwrap();
        std::fs::create_dir_all(root.join("config/manager")).unwrap();
        std::fs::write(
            root.join("manifests/base/kustomization.yaml"),
            "images:\n- name: quay.io/org/app\n  newName: quay.io/org/app\n  newTag: latest\n- name: other\n  newName: example.com/other\n",
        )
        .unwrap();
        std::fs::write(
            root.join("config/manager/kustomization.yaml"),
            "images:\n- name: controller\n  newName: example.com/controller\n- name: untouched\n",
        )
        .unwrap();
        std::fs::write(
            root.join("hack/release.sh"),
            "cd \"${SRCROOT}/manifests/base\" && kustomize edit set image \"${SRC}=${DST}:${TAG}\"\n",
        )
        .unwrap();
        std::fs::write(
            root.join("Makefile"),
            "deploy:\n\tcd config/manager && $(KUSTOMIZE) edit set image controller=${IMG}\n",
        )
        .unwrap();
        // A script that is no release script names nothing.
        std::fs::write(root.join("hack/lint.sh"), "golangci-lint run\n").unwrap();
        let got = images(&[root.join("manifests")]);
        let want = [
            "controller",
            "example.com/controller",
            "example.com/other",
            "other",
            "quay.io/org/app",
        ];
        assert_eq!(got.into_iter().collect::<Vec<_>>(), want);
    }

    #[test]
    fn a_script_that_rewrites_new_tag_retags_the_kustomization_it_names() {
        let makefile = "release:\n\tcat manifests/base/kustomization.yaml | sed 's/newTag: .*/newTag: $(VERSION)/' > /tmp/k.yaml\n\tsed -i 's/x/y/' manifests/other/kustomization.yaml\n";
        assert_eq!(retagged_kustomizations(makefile), ["manifests/base"]);
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("manifests/base")).unwrap();
        std::fs::write(
            root.join("manifests/base/kustomization.yaml"),
            "images:\n- name: quay.io/org/events\n  newTag: latest\n",
        )
        .unwrap();
        std::fs::write(root.join("Makefile"), makefile).unwrap();
        let got = images(&[root.join("manifests")]);
        assert_eq!(got.into_iter().collect::<Vec<_>>(), ["quay.io/org/events"]);
    }

    #[test]
    fn nothing_is_tagged_without_a_set_image_command() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        std::fs::write(
            repo.path().join("build.sh"),
            "docker build -t app:latest .\n",
        )
        .unwrap();
        assert!(images(&[repo.path().to_path_buf()]).is_empty());
    }
}
