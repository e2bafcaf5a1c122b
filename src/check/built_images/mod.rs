//! Images that a tool of the repository builds or tags, known from the
//! repository's own files.
//!
//! A manifest in a source repository often names an image the way its
//! build or release tooling expects to find it, not as it will run:
//!
//! - Skaffold builds every `build.artifacts[].image` and replaces a
//!   manifest's reference to it with the built, tagged image
//!   ([`skaffold`]);
//! - Tilt builds every image its Tiltfile names in `docker_build` or
//!   `custom_build` and injects the built reference into the manifests
//!   it deploys ([`tilt`]);
//! - a release script or Makefile that runs `kustomize edit set image`,
//!   or substitutes `newTag` or `latest` with sed, perl or yq in a folder
//!   or in a `kustomize build`'s output, writes the release's tag before
//!   the install YAML is built; a development branch keeps `latest` there
//!   on purpose ([`release`]); so does a GitHub Actions workflow whose
//!   steps run such a command or set a manifest's `image` field with a
//!   YAML-update action ([`ci_workflow`]);
//! - a release script that renders a chart of the repository with
//!   `helm template CHART --set …tag=${TAG}` tags the images the chart's
//!   values name beside that key, whose committed render keeps the
//!   chart's default ([`helm_release`]);
//! - an image with a one-word name (`orders`) that a script builds and
//!   loads into a local cluster (`kind load docker-image`, `k3d image
//!   import`, `minikube image load`) runs as the copy it built, whatever
//!   its tag says ([`local_load`]);
//! - an image on a loopback registry (`localhost:5000/app`) is pushed
//!   there by a build on the same machine, for a local cluster;
//! - `image: auto` in a pod template that asks Istio's injector for a
//!   template (`inject.istio.io/templates`, as Istio's gateway install
//!   does) is replaced by the proxy image the injector writes.
//!
//! None of these references reaches a cluster as written, so `interlock
//! check` marks each one ([`BuiltImages::pin`]) before the policies see
//! the object. The same bare image in a rendered install with no such
//! tooling around it is still `latest`.

mod ci_workflow;
mod helm_release;
mod local_load;
pub(crate) mod release;
mod skaffold;
mod tilt;

use crate::check::json_at::JsonAt;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The tool that writes an image's tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builder {
    Skaffold,
    Tilt,
    ReleaseScript,
    /// An image on a loopback registry (`localhost:5000/app`): only a
    /// build on the same machine can push it there, so it names what a
    /// local build (`make local-image`, a kind cluster's registry) makes.
    LocalRegistry,
    /// An image a script builds and loads into a local cluster's nodes
    /// ([`local_load`]).
    LocalLoad,
    /// `image: auto`, which Istio's sidecar injector replaces.
    Injector,
}

impl Builder {
    /// The tag a pinned reference gets: it stands for the tag the tool
    /// will write there.
    pub fn tag(self) -> &'static str {
        match self {
            Builder::Skaffold => "skaffold-built",
            Builder::Tilt => "tilt-built",
            Builder::ReleaseScript => "release-set",
            Builder::LocalRegistry => "local-build",
            Builder::LocalLoad => "loaded-locally",
            Builder::Injector => "injected",
        }
    }

    /// Whether a reference written with `:latest` is replaced too. Tilt
    /// matches references by name whatever their tag, and a release
    /// script's `edit set image` replaces the tag a kustomization gives;
    /// Skaffold is held to bare references, as it always was here.
    fn replaces_latest(self) -> bool {
        !matches!(self, Builder::Skaffold)
    }
}

/// Image repositories (no tag, no digest) and the tool that tags each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuiltImages(BTreeMap<String, Builder>);

impl BuiltImages {
    /// Every image the tooling around `inputs` builds or tags: Skaffold
    /// and Tilt files inside the inputs and in their ancestors up to the
    /// repository's root, and `kustomize edit set image` in the
    /// repository's scripts and Makefiles.
    pub fn find(inputs: &[PathBuf]) -> Self {
        let mut images = BuiltImages::default();
        // The first builder found wins; a later one adds only new images.
        for (builder, found) in [
            (Builder::Skaffold, skaffold::artifact_images(inputs)),
            (Builder::Tilt, tilt::images(inputs)),
            (Builder::ReleaseScript, release::images(inputs)),
            (Builder::LocalLoad, local_load::images(inputs)),
        ] {
            for image in found {
                images.0.entry(image).or_insert(builder);
            }
        }
        images
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    #[cfg(test)]
    fn of(builder: Builder, names: &[&str]) -> Self {
        BuiltImages(names.iter().map(|n| (n.to_string(), builder)).collect())
    }

    /// Rewrites each container, init container and ephemeral container
    /// image of `object`'s pod spec (or pod template) that names a built
    /// image without a tag (or, where its builder replaces it, with
    /// `:latest`) to `IMAGE:TAG`, TAG being [`Builder::tag`]. A reference
    /// with another tag or a digest, or to an image no tool here builds,
    /// is left as written.
    ///
    /// A bare or `:latest` reference to a loopback registry
    /// ([`on_loopback_registry`]) is pinned too, whatever the repository
    /// holds: no cluster but the builder's own pulls from it.
    pub fn pin(&self, object: &mut Json) {
        for pointer in pod_spec_pointers(object) {
            let injected = istio_injected(object, &pointer);
            let Some(spec) = object.at_mut(&pointer) else {
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
                    let repo = repository(image);
                    let builder = if let Some(&b) = self.0.get(repo) {
                        b
                    } else if on_loopback_registry(repo) {
                        Builder::LocalRegistry
                    } else if injected && image == ISTIO_AUTO {
                        Builder::Injector
                    } else {
                        continue;
                    };
                    let latest =
                        image.len() == repo.len() + ":latest".len() && image.ends_with(":latest");
                    if repo == image || (latest && builder.replaces_latest()) {
                        c["image"] = Json::String(format!("{repo}:{}", builder.tag()));
                    }
                }
            }
        }
    }
}

/// The image Istio's injector replaces: "The `image: auto` ... will
/// automatically update each time the pod starts" (Istio, installing
/// gateways with injection).
const ISTIO_AUTO: &str = "auto";

/// Whether the pod template whose spec is at `spec_pointer` asks Istio's
/// injector for a template (annotation `inject.istio.io/templates`).
fn istio_injected(object: &Json, spec_pointer: &str) -> bool {
    let meta = match spec_pointer.strip_suffix("/spec") {
        Some("") => "/metadata".to_string(),
        Some(template) => format!("{template}/metadata"),
        None => return false,
    };
    object
        .at(&format!("{meta}/annotations"))
        .and_then(|a| a.get("inject.istio.io/templates"))
        .is_some()
}

/// What `parse` reads from each file named one of `names` that governs
/// `inputs` ([`files_named`]); a file that cannot be read gives nothing.
fn read_governing(
    inputs: &[PathBuf],
    names: &[&str],
    parse: fn(&str) -> Vec<String>,
) -> BTreeSet<String> {
    let mut images = BTreeSet::new();
    for f in files_named(inputs, names) {
        if let Ok(text) = std::fs::read_to_string(&f) {
            images.extend(parse(&text));
        }
    }
    images
}

/// The files named one of `names` that govern `inputs`: inside each
/// input directory, at any depth (hidden directories such as `.git` are
/// not entered, nor are symbolic links to directories), and in the
/// directory of each input and its ancestors, up to and including the
/// repository's root ([`repository_root`]).
fn files_named(inputs: &[PathBuf], names: &[&str]) -> BTreeSet<PathBuf> {
    let mut files = BTreeSet::new();
    for input in inputs {
        let input = input.canonicalize().unwrap_or_else(|_| input.clone());
        if input.is_dir() {
            find_inside(&input, names, &mut files);
        }
        let start = if input.is_dir() {
            Some(input.as_path())
        } else {
            input.parent()
        };
        let root = repository_root(&input);
        for dir in start.into_iter().flat_map(Path::ancestors) {
            for name in names {
                let f = dir.join(name);
                if f.is_file() {
                    files.insert(f);
                }
            }
            if dir.join(".git").exists() || Some(dir) == root.as_deref() {
                break;
            }
        }
    }
    files
}

/// The repository `input` belongs to: the first of its ancestors that
/// holds `.git`; failing that (an exported tree), the working directory
/// when `input` is inside it, as when `interlock check` runs at a
/// repository's root in CI.
pub(crate) fn repository_root(input: &Path) -> Option<PathBuf> {
    let input = input.canonicalize().unwrap_or_else(|_| input.to_path_buf());
    if let Some(git) = input.ancestors().find(|d| d.join(".git").exists()) {
        return Some(git.to_path_buf());
    }
    let cwd = std::env::current_dir().ok()?.canonicalize().ok()?;
    input.starts_with(&cwd).then_some(cwd)
}

/// Files larger than this are not read by [`repository_files`] (no
/// script or README needs more).
const MAX_FILE_BYTES: u64 = 1 << 20;
/// At most this many files are gathered from one repository.
const MAX_FILES: usize = 5_000;
const SKIPPED_DIRS: &[&str] = &["vendor", "node_modules", "third_party"];

/// The files under `dir` whose name `accept` takes, at any depth: hidden
/// directories, `vendor`, `node_modules` and `third_party` are not
/// entered, and files of 1 MiB or more are left out.
pub(crate) fn repository_files(dir: &Path, accept: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if out.len() >= MAX_FILES {
            return;
        }
        let Ok(t) = e.file_type() else { continue };
        let name = e.file_name();
        let name = name.to_string_lossy();
        if t.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                repository_files(&e.path(), accept, out);
            }
        } else if t.is_file()
            && accept(&name)
            && e.metadata().is_ok_and(|m| m.len() <= MAX_FILE_BYTES)
        {
            out.push(e.path());
        }
    }
}

fn find_inside(dir: &Path, names: &[&str], files: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let name = e.file_name();
        let name = name.to_string_lossy();
        if t.is_dir() {
            if !name.starts_with('.') {
                find_inside(&e.path(), names, files);
            }
        } else if names.contains(&name.as_ref()) {
            files.insert(e.path());
        }
    }
}

/// The documents of a YAML stream as JSON, every scalar a string (only
/// strings are read here). A skaffold.yaml or a kustomization has no `metadata.name` to
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

/// Whether an image repository is on a registry at a loopback address:
/// `localhost`, `127.0.0.1` (any of 127.0.0.0/8) or `[::1]`, with or
/// without a port. The registry host is the first path segment when that
/// holds a `.` or a `:` or is `localhost` (the reference grammar of the
/// distribution project, which Docker and containerd follow).
fn on_loopback_registry(repo: &str) -> bool {
    let Some((host, _)) = repo.split_once('/') else {
        return false;
    };
    let host = host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) && !h.is_empty() {
            h
        } else {
            host
        }
    });
    host == "localhost"
        || host == "[::1]"
        || host.strip_prefix("127.").is_some_and(|rest| {
            let parts: Vec<&str> = rest.split('.').collect();
            parts.len() == 3
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.parse::<u8>().is_ok())
        })
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

#[cfg(test)]
mod tests;
