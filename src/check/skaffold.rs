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
//! ([`artifact_images`]) and marks each such reference as built
//! ([`pin_built_images`]) before the policies see the object.

use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The tag [`pin_built_images`] gives a bare reference to an image
/// Skaffold builds: it stands for the tag Skaffold will write there.
pub const BUILT_TAG: &str = "skaffold-built";

const FILE_NAMES: &[&str] = &["skaffold.yaml", "skaffold.yml"];

/// The artifact images of every Skaffold config that governs `inputs`:
/// the skaffold.yaml / skaffold.yml files inside each input directory, at
/// any depth (hidden directories such as `.git` are not entered, nor are
/// symbolic links to directories), and those in the directory of each
/// input and its ancestors, up to and including the first one that
/// contains `.git` (the repository's root) or the filesystem root.
///
/// Each file may hold several YAML documents; the `apiVersion:
/// skaffold/*`, `kind: Config` ones are read (`build.artifacts[].image`
/// and `profiles[].build.artifacts[].image`). Files that cannot be read or
/// parsed give nothing. Images are returned without a tag or digest.
pub fn artifact_images(inputs: &[PathBuf]) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for input in inputs {
        let input = input.canonicalize().unwrap_or_else(|_| input.clone());
        if input.is_dir() {
            find_inside(&input, &mut files);
        }
        let start = if input.is_dir() {
            Some(input.as_path())
        } else {
            input.parent()
        };
        for dir in start.into_iter().flat_map(Path::ancestors) {
            for name in FILE_NAMES {
                let f = dir.join(name);
                if f.is_file() {
                    files.insert(f);
                }
            }
            if dir.join(".git").exists() {
                break;
            }
        }
    }
    let mut images = BTreeSet::new();
    for f in files {
        if let Ok(text) = std::fs::read_to_string(&f) {
            images.extend(images_of(&text));
        }
    }
    images
}

fn find_inside(dir: &Path, files: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let name = e.file_name();
        let name = name.to_string_lossy();
        if t.is_dir() {
            if !name.starts_with('.') {
                find_inside(&e.path(), files);
            }
        } else if FILE_NAMES.contains(&name.as_ref()) {
            files.insert(e.path());
        }
    }
}

/// The documents of a YAML stream as JSON, every scalar a string (only
/// strings are read here). A skaffold.yaml has no `metadata.name` to
/// require, so the manifest loader, which reads Kubernetes objects, is not
/// used. Aliases read as null; a syntax error ends the stream (what was
/// read before it is kept).
fn yaml_documents(text: &str) -> Vec<Json> {
    use saphyr_parser::{Event, Parser};
    enum Open {
        Seq(Vec<Json>),
        Map(serde_json::Map<String, Json>, Option<String>),
    }
    fn put(stack: &mut [Open], docs: &mut Vec<Json>, v: Json) {
        match stack.last_mut() {
            None => docs.push(v),
            Some(Open::Seq(items)) => items.push(v),
            Some(Open::Map(map, key)) => match key.take() {
                None => *key = Some(v.as_str().map_or_else(|| v.to_string(), str::to_string)),
                Some(k) => {
                    map.insert(k, v);
                }
            },
        }
    }
    let mut docs = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut parser = Parser::new_from_str(text);
    while let Some(Ok((ev, _))) = parser.next_event() {
        match ev {
            Event::Scalar(text, ..) => put(&mut stack, &mut docs, Json::String(text.into_owned())),
            Event::Alias(_) => put(&mut stack, &mut docs, Json::Null),
            Event::SequenceStart(..) => stack.push(Open::Seq(Vec::new())),
            Event::MappingStart(..) => stack.push(Open::Map(serde_json::Map::new(), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let v = match stack.pop() {
                    Some(Open::Seq(items)) => Json::Array(items),
                    Some(Open::Map(map, _)) => Json::Object(map),
                    None => break,
                };
                put(&mut stack, &mut docs, v);
            }
            _ => {}
        }
    }
    docs
}

/// The artifact images of the Skaffold configs in one (multi-document)
/// YAML text.
fn images_of(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for v in yaml_documents(text) {
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
                    let repo = repository(image);
                    if !repo.is_empty() {
                        out.push(repo.to_string());
                    }
                }
            }
        }
    }
    out
}

/// The image without its digest and tag (the tag is what follows the last
/// `:` of the last path segment, so a registry port is kept).
fn repository(image: &str) -> &str {
    let image = image.split_once('@').map_or(image, |(r, _)| r);
    let last = image.rfind('/').map_or(0, |i| i + 1);
    match image[last..].rfind(':') {
        Some(i) => &image[..last + i],
        None => image,
    }
}

/// Where pod specs are kept: a Pod's `spec`, a PodTemplate's
/// `template.spec`, and the templates of workloads, CronJobs and CRDs
/// that embed one (`k8s::pod_template`).
fn pod_spec_pointers(object: &Json) -> Vec<String> {
    let kind = object.get("kind").and_then(Json::as_str).unwrap_or("");
    let mut out: Vec<String> = crate::k8s::pod_template::TEMPLATE_PATHS
        .iter()
        .map(|p| format!("{p}/spec"))
        .collect();
    match kind {
        "Pod" => out.push("/spec".into()),
        "PodTemplate" => out.push("/template/spec".into()),
        _ => {}
    }
    out
}

/// Rewrites each container, init container and ephemeral container image
/// of `object`'s pod spec (or pod template) that names one of `images`
/// without a tag or digest to `IMAGE:skaffold-built` ([`BUILT_TAG`]):
/// Skaffold will put the built tag there. A reference that has a tag or a
/// digest, or names an image Skaffold does not build, is left as written.
pub fn pin_built_images(object: &mut Json, images: &BTreeSet<String>) {
    if images.is_empty() {
        return;
    }
    for pointer in pod_spec_pointers(object) {
        let Some(spec) = object.pointer_mut(&pointer) else {
            continue;
        };
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            let Some(containers) = spec.get_mut(list).and_then(Json::as_array_mut) else {
                continue;
            };
            for c in containers {
                let Some(image) = c.get("image").and_then(Json::as_str) else {
                    continue;
                };
                if repository(image) == image && images.contains(image) {
                    let pinned = format!("{image}:{BUILT_TAG}");
                    c["image"] = Json::String(pinned);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // skaffold.yaml reference: build.artifacts[].image is "the image name
    // to be built"; profiles[].build overrides build per profile; a file
    // may hold several configs separated by `---` (multi-config projects).
    const CONFIG: &str = "apiVersion: skaffold/v4beta11
kind: Config
metadata: {name: app}
build:
  artifacts:
    - image: frontend
    - image: gcr.io/team/backend:ignored-tag
      docker: {dockerfile: Dockerfile}
profiles:
  - name: ci
    build:
      artifacts:
        - image: localhost:5000/worker
---
apiVersion: skaffold/v2beta29
kind: Config
build:
  artifacts:
    - image: second-config
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-skaffold}
build:
  artifacts:
    - image: not-an-artifact
";

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn artifacts_are_read_from_every_skaffold_config_document() {
        let got: BTreeSet<String> = images_of(CONFIG).into_iter().collect();
        assert_eq!(
            got,
            set(&[
                "frontend",
                "gcr.io/team/backend",
                "localhost:5000/worker",
                "second-config"
            ])
        );
        assert!(images_of("not: [valid").is_empty());
    }

    #[test]
    fn skaffold_files_inside_and_above_the_inputs_up_to_the_repository_root() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        let repo = outside.join("repo");
        let deploy = repo.join("deploy/base");
        std::fs::create_dir_all(&deploy).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("services/api/.hidden")).unwrap();
        let cfg = |image: &str| {
            format!("apiVersion: skaffold/v4beta11\nkind: Config\nbuild:\n  artifacts:\n    - image: {image}\n")
        };
        // Above the repository's root (.git): not read.
        std::fs::write(outside.join("skaffold.yaml"), cfg("beyond-root")).unwrap();
        std::fs::write(repo.join("skaffold.yaml"), cfg("at-root")).unwrap();
        std::fs::write(repo.join("services/api/skaffold.yml"), cfg("nested")).unwrap();
        std::fs::write(
            repo.join("services/api/.hidden/skaffold.yaml"),
            cfg("hidden"),
        )
        .unwrap();
        std::fs::write(deploy.join("app.yaml"), "kind: Pod\n").unwrap();
        // A file input: its directory and ancestors.
        assert_eq!(
            artifact_images(&[deploy.join("app.yaml")]),
            set(&["at-root"])
        );
        // A directory input: inside it, at any depth, and above it.
        assert_eq!(
            artifact_images(std::slice::from_ref(&repo)),
            set(&["at-root", "nested"])
        );
        assert_eq!(
            artifact_images(&[repo.join("services")]),
            set(&["at-root", "nested"])
        );
        // No skaffold.yaml anywhere: nothing is built.
        let bare = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(bare.path().join(".git")).unwrap();
        assert!(artifact_images(&[bare.path().to_path_buf()]).is_empty());
    }

    #[test]
    fn bare_references_to_built_images_are_pinned_in_every_pod_spec() {
        let images = set(&["frontend", "localhost:5000/worker"]);
        let containers = json!([
            {"name": "a", "image": "frontend"},
            {"name": "b", "image": "frontend:latest"},
            {"name": "c", "image": "frontend@sha256:abc"},
            {"name": "d", "image": "redis"},
            {"name": "e", "image": "localhost:5000/worker"},
            {"name": "f"}
        ]);
        let want = json!([
            {"name": "a", "image": "frontend:skaffold-built"},
            {"name": "b", "image": "frontend:latest"},
            {"name": "c", "image": "frontend@sha256:abc"},
            {"name": "d", "image": "redis"},
            {"name": "e", "image": "localhost:5000/worker:skaffold-built"},
            {"name": "f"}
        ]);
        let spec = json!({"containers": containers, "initContainers": containers,
                          "ephemeralContainers": containers});
        let want_spec = json!({"containers": want, "initContainers": want,
                               "ephemeralContainers": want});
        let cases = [
            (json!({"kind": "Pod", "spec": spec}), "/spec"),
            (
                json!({"kind": "Deployment", "spec": {"template": {"spec": spec}}}),
                "/spec/template/spec",
            ),
            (
                json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}}),
                "/spec/jobTemplate/spec/template/spec",
            ),
            (
                json!({"kind": "PodTemplate", "template": {"spec": spec}}),
                "/template/spec",
            ),
        ];
        for (mut object, at) in cases {
            pin_built_images(&mut object, &images);
            assert_eq!(object.pointer(at).unwrap(), &want_spec, "{at}");
        }
        // A Deployment's spec is not a pod spec; nothing built: unchanged.
        let mut d = json!({"kind": "Deployment", "spec": {"containers": [{"image": "frontend"}]}});
        let before = d.clone();
        pin_built_images(&mut d, &images);
        assert_eq!(d, before);
        let mut p = json!({"kind": "Pod", "spec": {"containers": [{"image": "frontend"}]}});
        pin_built_images(&mut p, &BTreeSet::new());
        assert_eq!(p["spec"]["containers"][0]["image"], "frontend");
    }

    #[test]
    fn repository_drops_tag_and_digest_but_not_a_port() {
        assert_eq!(repository("frontend"), "frontend");
        assert_eq!(repository("frontend:1.2"), "frontend");
        assert_eq!(repository("localhost:5000/app"), "localhost:5000/app");
        assert_eq!(
            repository("localhost:5000/app:v1@sha256:x"),
            "localhost:5000/app"
        );
    }
}
