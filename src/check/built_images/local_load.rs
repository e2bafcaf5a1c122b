//! Images a script builds on the machine and loads into a local cluster.
//!
//! A local cluster's nodes do not pull what was built beside them: the
//! tools copy the image into the nodes' container runtime, and a pod
//! then runs that copy whatever its tag says.
//!
//! - kind: `kind load docker-image IMAGE [IMAGE...] [--name CLUSTER]`
//!   "loads docker images from host into nodes";
//! - k3d: `k3d image import IMAGE | ARCHIVE [IMAGE | ARCHIVE...] [-c
//!   CLUSTER]` imports images from the host's docker into the cluster;
//! - minikube: `minikube image load IMAGE [-p PROFILE]` loads an image
//!   into minikube.
//!
//! So `image: orders:latest` in a repository whose Makefile runs `docker
//! build -t orders:latest . && k3d image import orders:latest` names the
//! local build, not a registry's `latest`.
//!
//! Choices, and why: an image is taken only when the same scripts build
//! it (`docker`, `podman`, `nerdctl` or `buildah` with `-t`/`--tag`) and
//! load it, and only when its name is one word, without registry or
//! namespace. Such a name would be pulled from Docker Hub's official
//! library, where no project publishes its own images, so the local build
//! is all it can name. A project's published image (`org/agent:latest`)
//! that its CI also loads into kind stays a finding: the install YAML a
//! user applies pulls it. An official image a script only loads
//! (`kind load docker-image busybox:latest`, to spare a pull) is not
//! built there and stays a finding too. Only images written out are
//! taken; one held in a variable (`kind load docker-image ${IMG}`) cannot
//! be known here, and an archive (`*.tar`) names no image.

use std::collections::BTreeSet;
use std::path::PathBuf;

/// The words that start a load command, and then the flags of each tool
/// that take a value (the value is not an image).
const COMMANDS: &[(&[&str], &[&str])] = &[
    (
        &["kind", "load", "docker-image"],
        &["--name", "-n", "--nodes"],
    ),
    (
        &["k3d", "image", "import"],
        &["-c", "--cluster", "-m", "--mode"],
    ),
    (
        &["k3d", "images", "import"],
        &["-c", "--cluster", "-m", "--mode"],
    ),
    (&["minikube", "image", "load"], &["-p", "--profile"]),
];

/// The one-word images the scripts of the repositories of `inputs` both
/// build and load into a local cluster, without tag or digest.
pub(super) fn images(inputs: &[PathBuf]) -> BTreeSet<String> {
    let roots: BTreeSet<PathBuf> = inputs
        .iter()
        .filter_map(|i| super::repository_root(i))
        .collect();
    let (mut built, mut loaded_here) = (BTreeSet::new(), BTreeSet::new());
    for root in roots {
        let mut scripts = Vec::new();
        super::release::find_scripts(&root, &mut scripts);
        for script in scripts {
            if let Ok(text) = std::fs::read_to_string(&script) {
                built.extend(built_tags(&text));
                loaded_here.extend(loaded(&text));
            }
        }
    }
    built
        .intersection(&loaded_here)
        .filter(|image| !image.contains('/'))
        .cloned()
        .collect()
}

/// The tools whose `build` (or `bud`) tags an image with `-t`/`--tag`.
const BUILDERS: &[&str] = &["docker", "podman", "nerdctl", "buildah"];

/// The images the build commands of one script tag, without tag or
/// digest.
pub(super) fn built_tags(text: &str) -> Vec<String> {
    let joined = joined_lines(text);
    let mut out = Vec::new();
    for words in commands(&joined) {
        let Some(at) = words.iter().position(|w| BUILDERS.contains(w)) else {
            continue;
        };
        let rest = &words[at + 1..];
        if !rest.iter().any(|w| *w == "build" || *w == "bud") {
            continue;
        }
        for (i, word) in rest.iter().enumerate() {
            let value = match word.split_once('=') {
                Some(("--tag" | "-t", v)) => Some(v),
                _ if *word == "-t" || *word == "--tag" => rest.get(i + 1).copied(),
                _ => None,
            };
            let Some(value) = value.map(|v| v.trim_matches(|c| c == '"' || c == '\'')) else {
                continue;
            };
            if !value.contains('$') && !value.is_empty() {
                out.push(super::repository(value).to_string());
            }
        }
    }
    out
}

/// A script with its continued lines (`\` at the end) joined.
fn joined_lines(text: &str) -> String {
    text.replace("\\\r\n", " ").replace("\\\n", " ")
}

/// The commands of a script as words, commands chained on one line
/// (`&&`, `;`, `|`) apart.
fn commands(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .flat_map(|line| line.split(['&', ';', '|']))
        .map(|command| command.split_whitespace().collect())
        .collect()
}

/// The images the load commands of one script name.
pub(super) fn loaded(text: &str) -> Vec<String> {
    let joined = joined_lines(text);
    let mut out = Vec::new();
    for words in commands(&joined) {
        for (start, valued) in COMMANDS {
            if let Some(at) = words.windows(start.len()).position(|w| w == *start) {
                out.extend(arguments(&words[at + start.len()..], valued));
            }
        }
    }
    out
}

/// The image arguments among `words`: not a flag, not a flag's value,
/// not a variable, not an archive, and ending at a comment.
fn arguments(words: &[&str], valued: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for word in words {
        let word = word.trim_matches(|c| c == '"' || c == '\'');
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if word.starts_with('#') {
            break;
        }
        if word.starts_with('-') {
            skip_value = !word.contains('=') && valued.contains(&word);
            continue;
        }
        if word.contains('$') || word.ends_with(".tar") || word.ends_with(".tar.gz") {
            continue;
        }
        let repo = super::repository(word);
        if !repo.is_empty() {
            out.push(repo.to_string());
        }
    }
    out
}

#[cfg(test)]
#[path = "local_load_tests.rs"]
mod tests;
