//! Images that Skaffold builds, known from the repository's skaffold.yaml.
//!
//! Skaffold's documented image handling (skaffold.dev, "Image Handling"
//! and the `skaffold.yaml` reference): every `build.artifacts[].image`
//! (and every profile's `profiles[].build.artifacts[].image`) is built and
//! tagged by Skaffold, and a manifest's image reference that names the
//! artifact is replaced with the built, tagged image before the manifest
//! is deployed. So `image: frontend` in a repository whose skaffold.yaml
//! builds `frontend` never runs as `frontend:latest`; the same bare image
//! in a rendered install, with no skaffold.yaml around it, does.
//!
//! `interlock check` reads the skaffold.yaml files of its inputs
//! ([`artifact_images`]); `super::BuiltImages::pin` marks each such
//! reference as built before the policies see the object.

use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::path::PathBuf;

const FILE_NAMES: &[&str] = &["skaffold.yaml", "skaffold.yml"];

/// The artifact images of every Skaffold config that governs `inputs`
/// (`super::files_named`: inside the inputs and above them up to the
/// repository's root). Each file may hold several YAML documents; the
/// `apiVersion: skaffold/*`, `kind: Config` ones are read
/// (`build.artifacts[].image` and `profiles[].build.artifacts[].image`).
/// Files that cannot be read or parsed give nothing. Images are returned
/// without a tag or digest.
pub(super) fn artifact_images(inputs: &[PathBuf]) -> BTreeSet<String> {
    super::read_governing(inputs, FILE_NAMES, images_of)
}

/// The artifact images of the Skaffold configs in one (multi-document)
/// YAML text.
fn images_of(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for v in super::yaml_documents(text) {
        let api = v.get("apiVersion").and_then(Json::as_str).unwrap_or("");
        if !api.starts_with("skaffold/") || v.get("kind").and_then(Json::as_str) != Some("Config") {
            continue;
        }
        let builds = std::iter::once(v.get("build")).chain(
            v.get("profiles")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .map(|p| p.get("build")),
        );
        for build in builds.flatten() {
            let artifacts = build.get("artifacts").and_then(Json::as_array);
            for a in artifacts.into_iter().flatten() {
                if let Some(image) = a.get("image").and_then(Json::as_str) {
                    let repo = super::repository(image);
                    if !repo.is_empty() {
                        out.push(repo.to_string());
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "skaffold_tests.rs"]
mod tests;
