//! Kustomize layouts as the cluster gets them.
//!
//! Most repositories are kustomize trees, and their raw files are not what
//! a cluster receives: a patch is a partial object, a base's objects get
//! the overlay's namespace, prefixes and images. `interlock check` renders
//! each top-level kustomization (one that no other kustomization found in
//! the inputs includes) with the real kustomize (`kustomize build`, or
//! `kubectl kustomize`, whichever is on PATH: never a re-implementation),
//! and checks what it renders. kustomize's origin annotations
//! (`buildMetadata: [originAnnotations]`, set by a wrapper kustomization in
//! a scratch folder, so the user's files are never touched) say which
//! source file each object came from; the object is reported at that
//! file's document and with the kustomization that rendered it.
//!
//! Files a kustomization reads, and every manifest below a folder that
//! holds a kustomization, belong to kustomize: they are not also read raw.
//! Those that no kustomization references (scaffold patches left commented
//! out) are named in a notice.
//!
//! A kustomization that cannot be rendered here is a notice, not an error,
//! when the cause is outside the files: a remote base this machine cannot
//! fetch, or a Fleet bundle's Helm chart whose output it patches
//! ([`fleet_helm_bundle`]), or an optional part of a scaffold that the
//! project's kustomization names only in a commented-out entry
//! ([`commented_out_in`]), or a kubebuilder kustomization that lists the
//! project's generated manifests, which are not committed
//! ([`kubebuilder_project`]).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::Value as Json;

use crate::manifest::{self, Document, Format, LoadOptions, Source};
use crate::report::InputError;

use super::{
    canonical, display_path, find_on_path, run_bounded, sorted_entries, Rendered, ScratchDir,
};
use crate::check::stand_in::StandIns;

/// The names kustomize reads as a kustomization, in its order.
const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The annotation kustomize writes with `buildMetadata: [originAnnotations]`.
const ORIGIN: &str = "config.kubernetes.io/origin";

/// Whether `check` renders kustomizations (`--kustomize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KustomizeMode {
    /// Render every top-level kustomization; an error when kustomize is
    /// not on PATH.
    #[default]
    Auto,
    /// Read the raw files, as written (patches are skipped as today).
    Never,
}

/// The kustomizations found in the inputs.
#[derive(Debug, Default)]
pub struct Layout {
    /// Top-level kustomization folders, in walk order, as found.
    pub roots: Vec<PathBuf>,
    /// Canonical paths of the files kustomize owns: not read raw.
    pub claimed: HashSet<PathBuf>,
    /// Manifests inside kustomize trees that no kustomization references.
    pub unreferenced: Vec<PathBuf>,
    /// Kustomization files that could not be read.
    pub errors: Vec<InputError>,
}

/// What one kustomization refers to on disk.
#[derive(Debug, Default)]
struct Refs {
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
    component: bool,
    /// It lists a base, resource or component kustomize would fetch.
    remote: bool,
}

fn kustomization_in(dir: &Path) -> Option<PathBuf> {
    KUSTOMIZATION_FILES
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// A reference kustomize would fetch over the network.
fn is_remote(s: &str) -> bool {
    s.contains("://")
        || s.starts_with("github.com/")
        || s.starts_with("gitlab.com/")
        || s.starts_with("git@")
        || s.contains("?ref=")
        || s.contains("?version=")
}

/// Finds the kustomizations under `inputs` (folders, walked recursively;
/// hidden entries and `exclude` matches left out).
pub fn layout(inputs: &[PathBuf], exclude: &[String]) -> Layout {
    let mut found: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut tree_files: Vec<PathBuf> = Vec::new();
    let mut seen = HashSet::new();
    for input in inputs {
        if input.as_os_str() == "-" {
            continue;
        }
        if input.is_dir() {
            walk(
                input,
                false,
                exclude,
                &mut seen,
                &mut found,
                &mut tree_files,
            );
        } else if input
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| KUSTOMIZATION_FILES.contains(&n))
        {
            let dir = input.parent().unwrap_or(Path::new(".")).to_path_buf();
            found.push((dir, input.clone()));
        }
    }
    let mut out = Layout::default();
    let mut included: HashSet<PathBuf> = HashSet::new();
    let mut referenced: HashSet<PathBuf> = HashSet::new();
    let mut components: HashSet<PathBuf> = HashSet::new();
    for (dir, file) in &found {
        out.claimed.insert(canonical(file));
        match refs(dir, file) {
            Ok(r) => {
                if r.component {
                    components.insert(canonical(dir));
                }
                included.extend(r.dirs.iter().map(|d| canonical(d)));
                for f in r.files {
                    let c = canonical(&f);
                    out.claimed.insert(c.clone());
                    referenced.insert(c);
                }
            }
            Err(e) => out.errors.push(e),
        }
    }
    for (dir, _) in &found {
        let c = canonical(dir);
        if !included.contains(&c) && !components.contains(&c) {
            out.roots.push(dir.clone());
        }
    }
    for f in tree_files {
        let c = canonical(&f);
        if !referenced.contains(&c) && !out.claimed.contains(&c) {
            out.unreferenced.push(f);
        }
        out.claimed.insert(c);
    }
    out
}

fn walk(
    dir: &Path,
    in_tree: bool,
    exclude: &[String],
    seen: &mut HashSet<PathBuf>,
    found: &mut Vec<(PathBuf, PathBuf)>,
    tree_files: &mut Vec<PathBuf>,
) {
    if manifest::excluded(dir, exclude) || !seen.insert(canonical(dir)) {
        return;
    }
    let kustomization = kustomization_in(dir);
    let in_tree = in_tree || kustomization.is_some();
    if let Some(k) = &kustomization {
        found.push((dir.to_path_buf(), k.clone()));
    }
    for p in sorted_entries(dir) {
        if p.is_dir() {
            walk(&p, in_tree, exclude, seen, found, tree_files);
        } else if in_tree
            && Some(&p) != kustomization.as_ref()
            && manifest::has_manifest_extension(&p)
            && !manifest::excluded(&p, exclude)
        {
            tree_files.push(p);
        }
    }
}

/// The local folders and files a kustomization names.
fn refs(dir: &Path, file: &Path) -> Result<Refs, InputError> {
    let at = |line: Option<usize>, message: String| InputError {
        file: file.display().to_string(),
        line,
        column: None,
        message,
    };
    let text = fs::read_to_string(file).map_err(|e| at(None, format!("cannot read: {e}")))?;
    let docs = manifest::yaml_values(&text).map_err(|(line, m)| at(Some(line), m))?;
    let mut r = Refs::default();
    let Some((_, k)) = docs.first() else {
        return Ok(r);
    };
    r.component = k.get("kind").and_then(Json::as_str) == Some("Component");
    let strings = |field: &str| -> Vec<String> {
        k.get(field)
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Json::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let paths_of = |field: &str| -> Vec<String> {
        k.get(field)
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.get("path").and_then(Json::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut remote = false;
    let mut local = |s: &str| {
        // Inline patches (a string holding YAML) and remote bases are not files.
        if s.contains('\n') {
            return;
        }
        if is_remote(s) {
            remote = true;
            return;
        }
        let p = dir.join(s);
        if p.is_dir() {
            r.dirs.push(p);
        } else if p.is_file() {
            r.files.push(p);
        }
    };
    for field in ["resources", "bases", "components"] {
        strings(field).iter().for_each(|s| local(s));
    }
    for field in [
        "patchesStrategicMerge",
        "crds",
        "configurations",
        "generators",
        "transformers",
        "validators",
    ] {
        strings(field).iter().for_each(|s| local(s));
    }
    for field in ["patches", "patchesJson6902", "replacements"] {
        paths_of(field).iter().for_each(|s| local(s));
    }
    for field in ["configMapGenerator", "secretGenerator"] {
        for g in k.get(field).and_then(Json::as_array).into_iter().flatten() {
            let listed = ["files", "envs"]
                .iter()
                .filter_map(|f| g.get(*f).and_then(Json::as_array))
                .flatten()
                .filter_map(Json::as_str)
                .chain(g.get("env").and_then(Json::as_str));
            for entry in listed {
                // `files` entries may be `key=path`.
                local(entry.rsplit_once('=').map_or(entry, |(_, p)| p));
            }
        }
    }
    r.remote = remote;
    Ok(r)
}

/// Whether the kustomization in `dir`, or a local one it includes at any
/// depth, lists something kustomize would fetch over the network.
fn loads_remote(dir: &Path) -> bool {
    let mut seen = HashSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        if !seen.insert(canonical(&d)) {
            continue;
        }
        let Some(file) = kustomization_in(&d) else {
            continue;
        };
        let Ok(r) = refs(&d, &file) else { continue };
        if r.remote {
            return true;
        }
        todo.extend(r.dirs);
    }
    false
}

/// The Fleet bundle (`fleet.yaml`, in `dir` or a folder above it) that
/// names `dir` as its kustomize folder and renders a Helm chart. Fleet's
/// bundle reference: `kustomize.dir` (also per `targetCustomizations[]`)
/// is "a custom folder for kustomize resources", and with `helm:` set the
/// kustomization is applied to the chart's rendered output, so it may
/// patch objects that only the chart gives (Fleet's helm-kustomize
/// example). Read by lines: a top-level `helm:` key and any `dir:` value.
fn fleet_helm_bundle(dir: &Path) -> Option<PathBuf> {
    let dir = canonical(dir);
    for at in dir.ancestors() {
        for name in ["fleet.yaml", "fleet.yml"] {
            let file = at.join(name);
            let Ok(text) = fs::read_to_string(&file) else {
                continue;
            };
            let helm = text
                .lines()
                .any(|l| l.trim_end() == "helm:" || l.starts_with("helm: "));
            let names_dir = text
                .lines()
                .filter_map(|l| l.trim().strip_prefix("dir:"))
                .any(|v| {
                    let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
                    !v.is_empty() && canonical(&at.join(v)) == dir
                });
            if helm && names_dir {
                return Some(file);
            }
        }
        if at.join(".git").exists() {
            break;
        }
    }
    None
}

/// The kustomization, in the folder above `dir` or one beside it, that
/// names `dir` only in a commented-out entry (`# - ../webhook`), and the
/// entry's line. kubebuilder's scaffold writes its optional parts so
/// (`config/default` lists `../webhook`, `../certmanager`,
/// `../prometheus` commented out until the project wants them): nobody
/// builds such a part alone, and kustomize often refuses it alone (a var
/// only `config/default` defines, controller-gen output not committed).
fn commented_out_in(dir: &Path) -> Option<(PathBuf, usize)> {
    let dir = canonical(dir);
    let parent = dir.parent()?;
    let beside = sorted_entries(parent).into_iter().filter(|p| p.is_dir());
    for folder in std::iter::once(parent.to_path_buf()).chain(beside) {
        if canonical(&folder) == dir {
            continue;
        }
        let Some(file) = kustomization_in(&folder) else {
            continue;
        };
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        let names_dir = |entry: &str| canonical(&folder.join(entry)) == dir;
        if let Some(line) = text
            .lines()
            .position(|l| commented_entry(l).is_some_and(names_dir))
        {
            return Some((file, line + 1));
        }
    }
    None
}

/// The kubebuilder `PROJECT` file (a `layout:` key, or a `domain:` one as
/// kubebuilder 2 wrote it) in `dir` or a folder above it. Its projects commit the scaffold's kustomizations but
/// not all that they list: `make manifests` writes
/// `config/webhook/manifests.yaml`, `make bundle` the CSV base of
/// `config/manifests`.
fn kubebuilder_project(dir: &Path) -> Option<PathBuf> {
    canonical(dir).ancestors().find_map(|at| {
        let file = at.join("PROJECT");
        let text = fs::read_to_string(&file).ok()?;
        text.lines()
            .any(|l| l.starts_with("layout:") || l.starts_with("domain:"))
            .then_some(file)
    })
}

/// The list entry a comment line holds (`# - ../webhook`, `#- x.yaml`).
fn commented_entry(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let entry = rest.strip_prefix('-')?.trim();
    let entry = entry.trim_matches(['"', '\'']);
    (!entry.is_empty() && !entry.contains(char::is_whitespace)).then_some(entry)
}

/// The program that renders kustomizations.
#[derive(Debug, Clone)]
pub struct Renderer {
    program: PathBuf,
    subcommand: &'static str,
}

impl Renderer {
    /// `kustomize build`, or else `kubectl kustomize`, from PATH.
    pub fn from_path() -> Option<Renderer> {
        find_on_path("kustomize")
            .map(|program| Renderer {
                program,
                subcommand: "build",
            })
            .or_else(|| {
                find_on_path("kubectl").map(|program| Renderer {
                    program,
                    subcommand: "kustomize",
                })
            })
    }

    /// How it is called, for messages.
    pub fn describe(&self) -> String {
        let name = self
            .program
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        format!("{name} {}", self.subcommand)
    }
}

/// Renders every root, in parallel (each is a process of its own). A root
/// that cannot be rendered here (a remote base) leaves a notice, and the
/// local kustomizations it includes are rendered on their own instead, so
/// that what the files hold is still checked.
/// `stand_ins` gets each kustomization rendered in place of another.
pub fn render_all(
    renderer: &Renderer,
    roots: &[PathBuf],
    opts: &LoadOptions,
    stand_ins: &mut StandIns,
) -> Vec<Rendered> {
    let mut done: HashSet<PathBuf> = roots.iter().map(|r| canonical(r)).collect();
    let mut todo = roots.to_vec();
    let mut out = Vec::new();
    while !todo.is_empty() {
        let rendered: Vec<(PathBuf, Rendered)> = std::mem::take(&mut todo)
            .into_par_iter()
            .map(|root| {
                let r = render(renderer, &root, opts);
                (root, r)
            })
            .collect();
        for (root, r) in rendered {
            if matches!(r, Rendered::NotHere(_)) {
                for part in local_parts(&root) {
                    if done.insert(canonical(&part)) {
                        stand_ins.insert(&part, &root);
                        todo.push(part);
                    }
                }
            }
            out.push(r);
        }
    }
    out
}

/// The kustomizations (not Components: they do not build alone) that the
/// one in `dir` includes from local folders.
fn local_parts(dir: &Path) -> Vec<PathBuf> {
    let Some(file) = kustomization_in(dir) else {
        return vec![];
    };
    let Ok(r) = refs(dir, &file) else {
        return vec![];
    };
    r.dirs
        .into_iter()
        .filter(|d| {
            kustomization_in(d)
                .and_then(|k| refs(d, &k).ok())
                .is_some_and(|r| !r.component)
        })
        .collect()
}

fn render(renderer: &Renderer, root: &Path, opts: &LoadOptions) -> Rendered {
    let kustomization = kustomization_in(root).unwrap_or_else(|| root.join("kustomization.yaml"));
    let error = |message: String| InputError {
        file: kustomization.display().to_string(),
        line: None,
        column: None,
        message,
    };
    let scratch = match Scratch::new(root) {
        Ok(s) => s,
        Err(e) => {
            return Rendered::Failed(error(format!("cannot prepare the kustomize build: {e}")))
        }
    };
    let build = |extra: &[&str]| {
        run_bounded(
            Command::new(&renderer.program)
                .arg(renderer.subcommand)
                .args(extra)
                .arg(&*scratch.dir),
            opts.stream_above,
        )
    };
    let mut output = match build(&[]) {
        Ok(o) => o,
        Err(e) => return Rendered::Failed(error(format!("{}: {e}", renderer.describe()))),
    };
    // A kustomization that reads files outside its folder is built by its
    // repository with the load restrictor off (cluster-api's templates,
    // for one): so is it here.
    if !output.success && kustomize_reason(&output.stderr).contains("is not in or below") {
        match build(&["--load-restrictor", "LoadRestrictionsNone"]) {
            Ok(o) => output = o,
            Err(e) => return Rendered::Failed(error(format!("{}: {e}", renderer.describe()))),
        }
    }
    if !output.success {
        let reason = kustomize_reason(&output.stderr);
        let message = format!("{} failed: {reason}", renderer.describe());
        // kustomize's message for an unreachable base varies with how the
        // fetch failed (git may report only its exit status), so the
        // kustomization's own references decide as well.
        if let Some(bundle) = fleet_helm_bundle(root) {
            return Rendered::NotHere(error(format!(
                "not rendered: {} names it as the kustomize folder of a Helm bundle, and Fleet applies it to the chart's output, which kustomize alone does not have ({message}); the chart's files are checked where the inputs hold them",
                bundle.display()
            )));
        }
        if let Some((by, line)) = commented_out_in(root) {
            return Rendered::LeftOff(error(format!(
                "not rendered: {}:{line} lists it only in a commented-out entry, an optional part the project leaves off, and kustomize refuses it alone ({message}); uncomment the entry to check it with the rest",
                display_path(&by).display()
            )));
        }
        if reason.contains("no such file or directory") {
            if let Some(project) = kubebuilder_project(root) {
                return Rendered::NotHere(error(format!(
                    "not rendered: it names a file the repository does not hold ({message}), and {} marks a kubebuilder project, whose generated manifests (controller-gen's webhook configuration, operator-sdk's bundle bases) its Makefile writes at build time: the local kustomizations it includes are checked on their own; generate them (`make manifests`, `make bundle`) to check it whole",
                    display_path(&project).display()
                )));
            }
        }
        return if reason_is_remote(&reason) || loads_remote(root) {
            Rendered::NotHere(error(format!(
                "not rendered: it loads a remote base this machine cannot fetch ({message}); the local kustomizations it includes are checked on their own, but not what it adds (its own resources, patches, namespace, prefixes, images): check it where the base can be fetched (`kubectl kustomize DIR | interlock check -`); --remote-bases error makes this an error"
            )))
        } else {
            Rendered::Failed(error(message))
        };
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let load = LoadOptions {
        reject_duplicate_objects: false,
        ..opts.clone()
    };
    let loaded = manifest::load_str(Source::file(&kustomization), &text, Format::Yaml, &load);
    if let Some(e) = loaded.errors.first() {
        return Rendered::Failed(error(format!(
            "{} rendered something that is not a list of objects: {}",
            renderer.describe(),
            e.message()
        )));
    }
    let by: Arc<str> = Arc::from(root.display().to_string());
    let mut locator = Locator::new(&scratch.dir);
    let docs = loaded
        .documents
        .into_iter()
        .map(|d| {
            let mut value = d.value;
            let origin = take_origin(&mut value);
            let (file, line) = match origin {
                Some(o) => locator.locate(&o, &value),
                None => (kustomization.clone(), 1),
            };
            let mut doc = Document::new(Source::file(display_path(&file)), line, value);
            doc.rendered_by = Some(Arc::clone(&by));
            doc
        })
        .collect();
    Rendered::Objects(docs)
}

/// A wrapper kustomization in a scratch folder: the user's one as its only
/// resource, with origin annotations on. Removed on drop.
struct Scratch {
    dir: ScratchDir,
}

impl Scratch {
    fn new(root: &Path) -> std::io::Result<Scratch> {
        let dir = ScratchDir::new("kustomize")?;
        // kustomize refuses an absolute resource path: name it relative to
        // the scratch folder.
        let target = relative(&canonical(&dir), &canonical(root));
        let body = format!(
            "resources:\n- {}\nbuildMetadata: [originAnnotations]\n",
            serde_json::to_string(&target.display().to_string()).unwrap_or_default()
        );
        fs::write(dir.join("kustomization.yaml"), body)?;
        Ok(Scratch { dir })
    }
}

/// `to` as a path relative to the folder `from` (both absolute).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for c in &to[common..] {
        out.push(c.as_os_str());
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// `..` and `.` resolved without touching the disk.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// kustomize's origin annotation, parsed.
struct Origin {
    /// A resource's file, relative to the scratch folder.
    path: Option<String>,
    /// A generated object's kustomization, likewise.
    configured_in: Option<String>,
}

/// Removes the origin annotation (and an annotations map it leaves empty).
fn take_origin(value: &mut Json) -> Option<Origin> {
    let meta = value.get_mut("metadata")?.as_object_mut()?;
    let annotations = meta.get_mut("annotations")?.as_object_mut()?;
    let text = annotations.remove(ORIGIN)?;
    if annotations.is_empty() {
        meta.remove("annotations");
    }
    let parsed = manifest::yaml_values(text.as_str()?).ok()?;
    let (_, o) = parsed.into_iter().next()?;
    let field = |f: &str| o.get(f).and_then(Json::as_str).map(str::to_string);
    Some(Origin {
        path: field("path"),
        configured_in: field("configuredIn"),
    })
}

/// Finds the line of an object's source document, reading each source
/// file once.
struct Locator<'a> {
    scratch: &'a Path,
    /// Per file: (line, kind, name) of each document; for kustomizations,
    /// every `name:` line.
    files: HashMap<PathBuf, Vec<(usize, String, String)>>,
}

impl<'a> Locator<'a> {
    fn new(scratch: &'a Path) -> Locator<'a> {
        Locator {
            scratch,
            files: HashMap::new(),
        }
    }

    fn locate(&mut self, origin: &Origin, object: &Json) -> (PathBuf, usize) {
        let s = |p: &str| object.pointer(p).and_then(Json::as_str).unwrap_or("");
        let (kind, name) = (s("/kind"), s("/metadata/name"));
        let scratch = canonical(self.scratch);
        if let Some(path) = &origin.path {
            let file = normalize(&scratch.join(path));
            let docs = self
                .files
                .entry(file.clone())
                .or_insert_with(|| documents(&file));
            let line = best_match(docs.iter().filter(|(_, k, _)| k == kind), name)
                .or_else(|| docs.iter().find(|(_, k, _)| k == kind).map(|d| d.0))
                .unwrap_or(1);
            return (file, line);
        }
        if let Some(path) = &origin.configured_in {
            let file = normalize(&scratch.join(path));
            let names = self
                .files
                .entry(file.clone())
                .or_insert_with(|| name_lines(&file));
            let line = best_match(names.iter(), name).unwrap_or(1);
            return (file, line);
        }
        (scratch, 1)
    }
}

/// The entry whose name is the longest part of `rendered` (kustomize adds
/// prefixes, suffixes and generator hashes).
fn best_match<'e>(
    entries: impl Iterator<Item = &'e (usize, String, String)>,
    rendered: &str,
) -> Option<usize> {
    entries
        .filter(|(_, _, n)| !n.is_empty() && rendered.contains(n.as_str()))
        .max_by_key(|(line, _, n)| (n.len(), std::cmp::Reverse(*line)))
        .map(|(line, _, _)| *line)
}

fn documents(file: &Path) -> Vec<(usize, String, String)> {
    let Ok(text) = fs::read_to_string(file) else {
        return vec![];
    };
    manifest::yaml_values(&text)
        .unwrap_or_default()
        .into_iter()
        .map(|(line, v)| {
            let s = |p: &str| {
                v.pointer(p)
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (line, s("/kind"), s("/metadata/name"))
        })
        .collect()
}

/// Every `name: X` line of a kustomization (its generators' names).
fn name_lines(file: &Path) -> Vec<(usize, String, String)> {
    let Ok(text) = fs::read_to_string(file) else {
        return vec![];
    };
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let rest = l.trim_start().trim_start_matches("- ").trim_start();
            let value = rest.strip_prefix("name:")?.trim().trim_matches(['"', '\'']);
            Some((i + 1, String::new(), value.to_string()))
        })
        .collect()
}

/// kustomize's own reason from its standard error: the last line, without
/// kubectl's log prefix.
fn kustomize_reason(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    // kubectl logs a long error as a block: `err=<`, tab-indented lines, ` >`.
    let block = text.split_once("err=<\n").map(|(_, rest)| {
        rest.lines()
            .take_while(|l| l.trim() != ">")
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    });
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .trim();
    let line = block.as_deref().unwrap_or(last);
    let line = line
        .split_once("err=")
        .map_or(line, |(_, rest)| rest.trim_matches('"'));
    let mut line = line.strip_prefix("Error: ").unwrap_or(line);
    // The wrapper's own layer names the scratch folder: say what is wrong
    // inside the user's kustomization.
    while let Some((_, inner)) = line.split_once("recursed accumulation of path '") {
        match inner.split_once("': ") {
            Some((_, rest)) => line = rest,
            None => break,
        }
    }
    line.to_string()
}

fn reason_is_remote(reason: &str) -> bool {
    [
        "git clone",
        "git fetch",
        "no such host",
        "dial tcp",
        "https://",
        "http://",
        "github.com/",
    ]
    .iter()
    .any(|m| reason.contains(m))
}

#[cfg(test)]
#[path = "kustomize_tests.rs"]
mod tests;
