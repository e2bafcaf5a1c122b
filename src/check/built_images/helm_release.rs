//! Images whose tag a release script gives a chart of the repository.
//!
//! A project that commits the render of its own Helm chart (an install
//! YAML for those who do not run Helm) renders it again at release with
//! the release's tag:
//!
//! ```sh
//! helm template installer/helm/chart/volcano \
//!     --set basic.image_tag_version=${TAG} --set basic.image_registry=${REG}
//! ```
//!
//! Between releases the committed render keeps the chart's default tag,
//! `latest` as a rule. Which images such a `--set` reaches is read from
//! the chart's `values.yaml`: the key set (`basic.image_tag_version`) is
//! one entry of a mapping (`basic`), and the images are the other entries
//! of that mapping whose key names an image or a repository
//! (`controller_image_name: volcanosh/vc-controller-manager`,
//! `image: {repository: x, tag: latest}`). A registry given in the same
//! mapping (`image_registry: docker.io`) is put in front, as the chart's
//! templates do.
//!
//! Choices, and why: only a `--set` whose key's last segment names a tag
//! and whose value holds a variable counts (a fixed `--set tag=latest` is
//! a development render, not a release); images written in a template
//! rather than the values (a Grafana the chart ships pinned or not) are
//! not reached, so they stay findings; Docker Hub's official images are
//! never taken, as for the other release rules.

use super::release::{base_name, official_image, path_of, shell_words};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::Path;

/// The images the `helm template --set …tag=$VAR` lines of a script
/// retag: `text` is the script, its continuation lines joined.
pub(super) fn images(
    text: &str,
    vars: &BTreeMap<String, String>,
    root: &Path,
    script_dir: &Path,
) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.starts_with('#') {
            continue;
        }
        let words = shell_words(line);
        let Some(at) = words
            .windows(2)
            .position(|w| base_name(w[0]).eq_ignore_ascii_case("helm") && w[1] == "template")
        else {
            continue;
        };
        let words = &words[at + 2..];
        let tag_keys = release_tag_keys(words);
        if tag_keys.is_empty() {
            continue;
        }
        let Some(values) = words
            .iter()
            .filter_map(|w| path_of(w, vars, root, script_dir))
            .find_map(|chart| chart_values(&chart))
        else {
            continue;
        };
        for key in tag_keys {
            out.extend(images_beside(&values, &key));
        }
    }
    out.retain(|image| !official_image(image));
    out
}

/// The keys of the `--set KEY=VALUE` arguments (also `--set=`, comma
/// lists) whose last segment names a tag and whose value holds a variable.
fn release_tag_keys(words: &[&str]) -> Vec<Vec<String>> {
    let mut keys = Vec::new();
    let mut next_is_set = false;
    for word in words {
        let arg = if next_is_set {
            Some(*word)
        } else {
            word.strip_prefix("--set=")
                .or_else(|| word.strip_prefix("--set-string="))
        };
        next_is_set = matches!(*word, "--set" | "--set-string");
        for pair in arg.into_iter().flat_map(|a| a.split(',')) {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            let path: Vec<String> = key.split('.').map(str::to_string).collect();
            let last = path
                .last()
                .map(|s| s.to_ascii_lowercase())
                .unwrap_or_default();
            if last.contains("tag") && value.contains('$') {
                keys.push(path);
            }
        }
    }
    keys
}

/// The first document of the `values.yaml` of the chart at `dir`, when
/// `dir` holds a `Chart.yaml`.
fn chart_values(dir: &Path) -> Option<Json> {
    if !dir.join("Chart.yaml").is_file() {
        return None;
    }
    let text = std::fs::read_to_string(dir.join("values.yaml")).ok()?;
    super::yaml_documents(&text).into_iter().next()
}

/// The images named beside the value at `key`: the entries of its mapping
/// whose key names an image or a repository, with each registry that
/// mapping names in front, and as Docker Hub spells them out.
fn images_beside(values: &Json, key: &[String]) -> Vec<String> {
    let Some((_, parent)) = key.split_last() else {
        return Vec::new();
    };
    let mut map = values;
    for segment in parent {
        match map.get(segment) {
            Some(m) => map = m,
            None => return Vec::new(),
        }
    }
    let Some(map) = map.as_object() else {
        return Vec::new();
    };
    let mut registries = Vec::new();
    let mut repos = Vec::new();
    for (k, v) in map {
        let k = k.to_ascii_lowercase();
        let Some(v) = v.as_str().filter(|v| image_like(v)) else {
            continue;
        };
        if k.contains("registry") {
            registries.push(v.trim_end_matches('/').to_string());
        } else if (k.contains("image") || k == "repository")
            && !["tag", "pull", "policy", "secret", "version"]
                .iter()
                .any(|w| k.contains(w))
        {
            repos.push(super::repository(v).to_string());
        }
    }
    let mut out = Vec::new();
    for repo in repos {
        for registry in &registries {
            out.push(format!("{registry}/{repo}"));
        }
        if !host_like(&repo) {
            out.push(format!("docker.io/{repo}"));
        }
        out.push(repo);
    }
    out
}

/// Whether an image repository starts with a registry host (the first
/// segment holds a `.` or a `:`, or is `localhost`).
fn host_like(repo: &str) -> bool {
    repo.split_once('/')
        .is_some_and(|(h, _)| h.contains(['.', ':']) || h == "localhost")
}

/// Whether a value could be an image reference or a registry: one word,
/// no template, no variable.
fn image_like(v: &str) -> bool {
    !v.is_empty() && !v.contains(|c: char| c.is_whitespace() || matches!(c, '{' | '$'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(root: &Path) {
        let dir = root.join("installer/helm/chart/app");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Chart.yaml"), "name: app\nversion: 0.1.0\n").unwrap();
        std::fs::write(
            dir.join("values.yaml"),
            "basic:\n  controller_image_name: \"org/app-controller\"\n  image_pull_policy: Always\n  \
             image_tag_version: latest\n  image_registry: docker.io\n\
             monitoring:\n  grafana_image: grafana/grafana\n\
             image:\n  repository: quay.io/org/agent\n  tag: latest\n",
        )
        .unwrap();
    }

    fn read(script: &str) -> Vec<String> {
        let tmp = tempfile::tempdir().unwrap();
        chart(tmp.path());
        let joined = script.replace("\\\n", " ");
        let vars = super::super::release::assignments(&joined);
        let mut got = images(&joined, &vars, tmp.path(), tmp.path());
        got.sort();
        got.dedup();
        got
    }

    #[test]
    fn a_set_tag_from_a_variable_reaches_the_images_beside_it() {
        let got = read(
            "ROOT=$( cd \"$( dirname \"$0\" )\" && pwd )/..\n\
             ${HELM} template ${ROOT}/installer/helm/chart/app --namespace x \\\n  \
             --set basic.image_tag_version=${TAG} >> out.yaml\n",
        );
        assert_eq!(
            got,
            ["docker.io/org/app-controller", "org/app-controller"],
            "the registry beside the key is put in front; grafana is in another mapping"
        );
    }

    #[test]
    fn a_nested_image_mapping_and_set_equals_form() {
        let got = read("helm template rel installer/helm/chart/app --set=image.tag=$VERSION\n");
        assert_eq!(got, ["quay.io/org/agent"]);
    }

    #[test]
    fn a_fixed_tag_or_no_chart_reaches_nothing() {
        assert!(read("helm template installer/helm/chart/app --set image.tag=latest\n").is_empty());
        assert!(read("helm template other/chart --set image.tag=$V\n").is_empty());
        assert!(read("# helm template installer/helm/chart/app --set image.tag=$V\n").is_empty());
        assert!(read("helm template installer/helm/chart/app --set replicas=$N\n").is_empty());
    }
}
