//! Reading Kubernetes manifests, with the line of every object and field.
//!
//! Inputs are files, directories (recursively: `.yaml`, `.yml`, `.json`, in
//! name order, hidden entries skipped, symlink loops followed once) and `-`
//! for standard input. YAML streams may hold many documents; `kind: List`
//! (and `FooList` kinds with `items`) are unpacked into their items. Loading
//! never stops at a bad file or document: [`load_paths`] returns every good
//! object and every error, each error with file, line and (where known)
//! column. A YAML syntax error costs only the document it is in.
//!
//! Choices, made to match what `kubectl apply` sends to the API server:
//! - YAML scalars resolve as `sigs.k8s.io/yaml` (go-yaml v2) reads them; the
//!   rules are listed in `src/manifest/scalar.rs`: YAML 1.1 booleans
//!   (`yes`/`no`/`on`/`off`/`y`/`n` included), Go integer syntax (`0x`,
//!   `0o`, leading-zero octal), integral floats as integers, timestamps as
//!   strings, quoted scalars always strings, `.inf`/`.nan` an error (JSON
//!   cannot hold them). Non-string keys become strings (`1: x` is `"1"`,
//!   `on: x` is `"true"`).
//! - Duplicate mapping keys are an error naming both lines, as in `kubectl`'s
//!   strict decoding; keys that are equal once made strings count as
//!   duplicates. Merge keys (`<<`) follow the YAML merge spec: explicit keys
//!   win, earlier merged mappings win over later ones.
//! - A document must be a mapping with non-empty string `apiVersion` and
//!   `kind`, and `metadata.name` or `metadata.generateName`; the same object
//!   (API group, kind, namespace, name) given twice is an error and only the
//!   first copy is kept.
//! - `.json` files are read with `serde_json` (nesting limit 128) and get the
//!   same checks (duplicate keys, number normalisation) and lines.
//! - Limits ([`LoadOptions`]): document size (64 MiB; larger YAML files are
//!   read in windows, `src/manifest/stream.rs`), nesting depth (200), nodes
//!   copied by anchors and aliases per document (100 000).
//!
//! Most manifests go through a fast path for the usual subset of YAML
//! (`src/manifest/fast.rs`); anything else goes through `saphyr-parser`.
//! Both produce the same events, and the fuzz target checks they agree.
//!
//! ```
//! use interlock::manifest::{load_str, Format, LoadOptions, PathSegment, Source};
//! let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  on: yes\n";
//! let loaded = load_str(Source::Stdin, text, Format::Yaml, &LoadOptions::default());
//! assert!(loaded.errors.is_empty());
//! let doc = &loaded.documents[0];
//! assert_eq!(doc.value["data"]["true"], serde_json::json!(true));
//! assert_eq!(doc.line_of(&[PathSegment::Key("metadata"), PathSegment::Key("name")]), Some(4));
//! ```

#[cfg(test)]
mod differential_tests;
mod error;
mod fast;
mod inputs;
mod json;
mod locate;
mod object;
mod positions;
mod scalar;
mod skip;
mod stream;
mod yaml;

pub use locate::position_in_scalar;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::Value;

pub use error::{LoadError, LoadErrorKind, Source};
pub(crate) use inputs::{excluded, has_manifest_extension};
pub use positions::PathSegment;
pub use skip::{SkipReason, Skipped};

use inputs::Input;
use positions::PositionIndex;

/// Limits and switches for loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Largest document of a YAML stream, and largest input read whole
    /// (a JSON file, a UTF-16 file), in bytes: a larger one is an error
    /// naming its file and line. Default 64 MiB.
    pub max_document_size: u64,
    /// YAML files (and standard input) larger than this are read in
    /// windows of at most this size (and 4 MiB), cut at document markers,
    /// so that a file of any size is read in bounded memory; smaller ones
    /// are read whole. The objects and errors are the same either way.
    /// Default 64 MiB.
    pub stream_above: u64,
    /// Deepest nesting of mappings and sequences. Default 200.
    pub max_depth: usize,
    /// Most nodes that anchors and aliases may copy in one document.
    /// Default 100 000.
    pub max_alias_nodes: usize,
    /// Report an object given twice (same group, kind, namespace and name)
    /// as an error and keep only the first. Default true.
    pub reject_duplicate_objects: bool,
    /// Leave out files and directories that match one of these globs (see
    /// `--exclude` in docs/usage.md). Default none.
    pub exclude: Vec<String>,
    /// Skip files that are known not to hold Kubernetes objects (kustomize,
    /// Helm and Skaffold files, plain data) instead of reporting each of
    /// their documents as an error; they are listed in
    /// [`LoadedFiles::skipped`]. Default false.
    pub skip_non_objects: bool,
    /// Leave out directories with one of these names that a directory walk
    /// finds (never an input given by name): a policy folder's `tests/`
    /// holds test cases, not policies. Default none.
    pub skip_found_dirs: Vec<String>,
    /// Files another reader has taken (canonical paths): a directory walk
    /// leaves them out. `interlock check` claims what kustomize renders, so
    /// a base or a patch is not also read raw. Default none.
    pub claimed: Arc<HashSet<PathBuf>>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_document_size: 64 * 1024 * 1024,
            stream_above: 64 * 1024 * 1024,
            max_depth: 200,
            max_alias_nodes: 100_000,
            reject_duplicate_objects: true,
            exclude: Vec::new(),
            skip_non_objects: false,
            skip_found_dirs: Vec::new(),
            claimed: Arc::default(),
        }
    }
}

pub(crate) use LoadOptions as Limits;

/// The syntax of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// YAML (also accepts JSON).
    Yaml,
    /// JSON: one value, several values one after another, or a `kind: List`.
    Json,
}

impl Format {
    /// JSON for `.json` files, YAML for everything else.
    pub fn for_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("json") => Format::Json,
            _ => Format::Yaml,
        }
    }
}

/// Where the fields of a document are.
#[derive(Debug, Clone)]
pub(crate) struct Positions {
    pub(crate) index: Arc<PositionIndex>,
    /// Path hash of this object inside the parsed document (not the root
    /// for the items of a list).
    pub(crate) base: u64,
}

/// One Kubernetes object read from an input.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file it came from.
    pub source: Source,
    /// 1-based line where the object's content starts.
    pub line: usize,
    /// The object. It has string `apiVersion` and `kind`, and a `metadata`
    /// mapping with a string `name` or `generateName`.
    pub value: Value,
    pub(crate) positions: Positions,
    /// The kustomization (or chart) whose rendering produced this object,
    /// when it was rendered rather than read as written.
    pub rendered_by: Option<Arc<str>>,
}

impl Document {
    /// A document made in code, with no field positions (every field is
    /// reported at `line`).
    pub fn new(source: Source, line: usize, value: Value) -> Document {
        Document {
            source,
            line,
            value,
            positions: Positions {
                index: Arc::new(PositionIndex::default()),
                base: positions::ROOT,
            },
            rendered_by: None,
        }
    }

    /// `apiVersion` (empty if absent, which a loaded document never is).
    pub fn api_version(&self) -> &str {
        self.value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `kind` (empty if absent, which a loaded document never is).
    pub fn kind(&self) -> &str {
        self.value.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    /// `metadata.name`, or `None` when the object only has `generateName`.
    pub fn name(&self) -> Option<&str> {
        self.value
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// `metadata.namespace`, or `None` when absent or empty.
    pub fn namespace(&self) -> Option<&str> {
        self.value
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// `Kind namespace/name` (or `Kind name`), for messages.
    pub fn display_name(&self) -> String {
        let name = self.name().map_or_else(
            || {
                let g = self
                    .value
                    .get("metadata")
                    .and_then(|m| m.get("generateName"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("{g}*")
            },
            str::to_string,
        );
        match self.namespace() {
            Some(ns) => format!("{} {ns}/{name}", self.kind()),
            None => format!("{} {name}", self.kind()),
        }
    }

    /// The line of the field at `path` (for a mapping entry, the line of its
    /// key; for a list item, the line where it starts), or `None` if the
    /// object has no such field.
    pub fn line_of(&self, path: &[PathSegment<'_>]) -> Option<usize> {
        let mut v = &self.value;
        for seg in path {
            v = match (seg, v) {
                (PathSegment::Key(k), Value::Object(m)) => m.get(*k)?,
                (PathSegment::Index(i), Value::Array(a)) => a.get(*i)?,
                _ => return None,
            };
        }
        let mut hash = self.positions.base;
        let mut line = self.line;
        for seg in path {
            hash = positions::child(hash, *seg);
            if let Some(l) = self.positions.index.get(hash) {
                line = l as usize;
            }
        }
        Some(line)
    }

    /// [`Document::line_of`] with an RFC 6901 JSON pointer such as
    /// `/spec/template/spec/containers/0/image`. A segment of digits is an
    /// index when the value there is a list, a key otherwise.
    pub fn line_of_pointer(&self, pointer: &str) -> Option<usize> {
        if pointer.is_empty() {
            return Some(self.line);
        }
        let rest = pointer.strip_prefix('/')?;
        let raw: Vec<String> = rest
            .split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        let mut segs = Vec::with_capacity(raw.len());
        let mut v = Some(&self.value);
        for s in &raw {
            let seg = match v {
                Some(Value::Array(_)) => match s.parse::<usize>() {
                    Ok(i) => PathSegment::Index(i),
                    Err(_) => return None,
                },
                _ => PathSegment::Key(s),
            };
            v = match (seg, v) {
                (PathSegment::Key(k), Some(Value::Object(m))) => m.get(k),
                (PathSegment::Index(i), Some(Value::Array(a))) => a.get(i),
                _ => None,
            };
            segs.push(seg);
        }
        self.line_of(&segs)
    }
}

/// Everything read from the inputs: the good objects and all errors.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Objects in input order (files as given, directories in name order,
    /// documents in file order).
    pub documents: Vec<Document>,
    /// Every problem found, in the same order.
    pub errors: Vec<LoadError>,
    /// Set when this one file was skipped (see
    /// [`LoadOptions::skip_non_objects`]); of a whole load, the first
    /// skipped file.
    pub skipped: Option<Skipped>,
}

impl Loaded {
    fn append(&mut self, mut other: Loaded) {
        self.documents.append(&mut other.documents);
        self.errors.append(&mut other.errors);
        if self.skipped.is_none() {
            self.skipped = other.skipped;
        }
    }
}

/// Reads files, directories (recursively) and `-` (standard input).
///
/// Files and the documents of large files are parsed in parallel; the result
/// does not depend on the number of threads.
pub fn load_paths<P: AsRef<Path>>(inputs: &[P], opts: &LoadOptions) -> Loaded {
    let (files, mut discover_errors) =
        inputs::discover(inputs, &opts.exclude, &opts.skip_found_dirs, &opts.claimed);
    let per_file: Vec<Loaded> = files.par_iter().map(|i| load_input(i, opts)).collect();
    let mut all = Loaded::default();
    all.errors.append(&mut discover_errors);
    for l in per_file {
        all.append(l);
    }
    if opts.reject_duplicate_objects {
        reject_duplicates(&mut all);
    }
    all
}

/// Like [`load_paths`], but each document goes through `map` on the thread
/// that parsed its file, and only what `map` returns is kept: a caller that
/// needs a compact form of every object never holds all parsed trees at
/// once. Duplicate objects are dropped and reported as by `load_paths`.
pub fn load_paths_map<P, T, F>(inputs: &[P], opts: &LoadOptions, map: F) -> (Vec<T>, Vec<LoadError>)
where
    P: AsRef<Path>,
    T: Send,
    F: Fn(Document) -> T + Sync,
{
    let l = load_files_map(inputs, opts, map);
    (l.items, l.errors)
}

/// What [`load_files_map`] read.
#[derive(Debug)]
pub struct LoadedFiles<T> {
    /// What `map` made of each object, in input order.
    pub items: Vec<T>,
    pub errors: Vec<LoadError>,
    /// Files left out because they hold no Kubernetes objects (only with
    /// [`LoadOptions::skip_non_objects`]).
    pub skipped: Vec<Skipped>,
    /// Files read (skipped ones included).
    pub files: usize,
}

/// [`load_paths_map`], also telling which files were skipped and how many
/// were read.
pub fn load_files_map<P, T, F>(inputs: &[P], opts: &LoadOptions, map: F) -> LoadedFiles<T>
where
    P: AsRef<Path>,
    T: Send,
    F: Fn(Document) -> T + Sync,
{
    let (files, mut errors) =
        inputs::discover(inputs, &opts.exclude, &opts.skip_found_dirs, &opts.claimed);
    type PerFile<T> = (Vec<Identity>, Vec<T>, Vec<LoadError>, Option<Skipped>);
    let per_file: Vec<PerFile<T>> = files
        .par_iter()
        .map(|input| {
            let (mut ids, mut items, mut errors, mut skipped) =
                (Vec::new(), Vec::new(), Vec::new(), None);
            // Once for a file read whole, once a window for one read in
            // windows: no more than a window of parsed trees at once.
            load_input_each(input, opts, &mut |loaded| {
                // Identities are only for the duplicate check (a string per object).
                if opts.reject_duplicate_objects {
                    ids.extend(loaded.documents.iter().map(Identity::of));
                }
                if loaded.documents.len() > 64 {
                    items.par_extend(loaded.documents.into_par_iter().map(&map));
                } else {
                    items.extend(loaded.documents.into_iter().map(&map));
                }
                errors.extend(loaded.errors);
                skipped = skipped.take().or(loaded.skipped);
            });
            (ids, items, errors, skipped)
        })
        .collect();
    let total = per_file.iter().map(|(_, items, _, _)| items.len()).sum();
    let (mut ids, mut items) = (Vec::with_capacity(total), Vec::with_capacity(total));
    let mut skipped = Vec::new();
    for (mut file_ids, mut file_items, mut file_errors, file_skipped) in per_file {
        ids.append(&mut file_ids);
        items.append(&mut file_items);
        errors.append(&mut file_errors);
        skipped.extend(file_skipped);
    }
    let files = files.len();
    if !opts.reject_duplicate_objects {
        return LoadedFiles {
            items,
            errors,
            skipped,
            files,
        };
    }
    let mut first: HashMap<&str, &Identity> = HashMap::new();
    let mut duplicate = vec![false; items.len()];
    for (i, id) in ids.iter().enumerate() {
        let Some(key) = &id.key else { continue };
        match first.get(&**key) {
            None => {
                first.insert(key, id);
            }
            Some(f) => {
                duplicate[i] = true;
                errors.push(LoadError::new(
                    id.source.clone(),
                    Some(id.line),
                    LoadErrorKind::DuplicateObject {
                        object: id.display(),
                        first: format!("{}:{}", f.source, f.line),
                    },
                ));
            }
        }
    }
    let mut i = 0;
    items.retain(|_| {
        i += 1;
        !duplicate[i - 1]
    });
    LoadedFiles {
        items,
        errors,
        skipped,
        files,
    }
}

/// What the duplicate check needs of a document: its group, kind,
/// namespace and name in one string (one allocation per object).
struct Identity {
    key: Option<Box<str>>,
    source: Source,
    line: usize,
}

impl Identity {
    fn of(d: &Document) -> Identity {
        let group = d.api_version().rsplit_once('/').map_or("", |(g, _)| g);
        Identity {
            key: d.name().map(|name| {
                let ns = d.namespace().unwrap_or("");
                format!("{group}\0{}\0{ns}\0{name}", d.kind()).into()
            }),
            source: d.source.clone(),
            line: d.line,
        }
    }

    /// `Kind namespace/name`, as [`Document::display_name`].
    fn display(&self) -> String {
        let key = self.key.as_deref().unwrap_or_default();
        let parts: Vec<&str> = key.split('\0').collect();
        match parts.as_slice() {
            [_, kind, "", name] => format!("{kind} {name}"),
            [_, kind, ns, name] => format!("{kind} {ns}/{name}"),
            _ => key.to_string(),
        }
    }
}

fn load_input(input: &Input, opts: &LoadOptions) -> Loaded {
    let mut all = Loaded::default();
    load_input_each(input, opts, &mut |l| all.append(l));
    all
}

/// Reads one input, handing its objects to `each`: once for an input read
/// whole, once a window for a YAML input read in windows
/// ([`LoadOptions::stream_above`]).
fn load_input_each(input: &Input, opts: &LoadOptions, each: &mut dyn FnMut(Loaded)) {
    let path = match input {
        Input::Stdin => {
            let stdin = std::io::stdin();
            return read_or_stream(Source::Stdin, stdin.lock(), Format::Yaml, opts, each);
        }
        Input::File(path) => path,
    };
    let source = Source::file(path);
    if opts.skip_non_objects {
        if let Some(reason) = skip::by_path(path) {
            let mut l = skipped(source, reason);
            // A kustomization's generators make objects that the
            // repository's workloads refer to.
            if reason == SkipReason::Kustomize {
                if let (Some(s), Ok(bytes)) = (
                    &mut l.skipped,
                    inputs::read_file(path, opts.max_document_size),
                ) {
                    let text = String::from_utf8_lossy(&bytes);
                    s.makes = skip::kustomize_generated(&yaml::parse_stream(&text, opts).docs);
                }
            }
            return each(l);
        }
    }
    let format = Format::for_path(path);
    let size = std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    if format == Format::Yaml && size.is_none_or(|len| len > opts.stream_above) {
        // A large file, or a pipe (`<(helm template ...)`) of unknown size.
        return match std::fs::File::open(path) {
            Ok(file) if size.is_some() => stream::read(&source, Vec::new(), file, opts, each),
            Ok(file) => read_or_stream(source, file, format, opts, each),
            Err(e) => each(error_only(source, inputs::io_error_kind(&e))),
        };
    }
    let limit = match format {
        Format::Yaml => opts.stream_above,
        Format::Json => opts.max_document_size,
    };
    each(
        match inputs::with_file(path, limit, |bytes| {
            load_one(source.clone(), bytes, format, opts)
        }) {
            Ok(loaded) => loaded,
            Err(kind) => error_only(source, kind),
        },
    )
}

/// Reads an input of unknown size: whole if it is at most
/// [`LoadOptions::stream_above`], else (YAML) in windows.
fn read_or_stream(
    source: Source,
    mut reader: impl std::io::Read,
    format: Format,
    opts: &LoadOptions,
    each: &mut dyn FnMut(Loaded),
) {
    let limit = match format {
        Format::Yaml => opts.stream_above,
        Format::Json => opts.max_document_size,
    };
    match inputs::read_prefix(&mut reader, limit) {
        Ok((bytes, false)) => each(load_bytes(source, &bytes, format, opts)),
        Ok((bytes, true)) if format == Format::Yaml => {
            stream::read(&source, bytes, reader, opts, each)
        }
        Ok(_) => each(error_only(source, LoadErrorKind::TooLarge { limit })),
        Err(kind) => each(error_only(source, kind)),
    }
}

fn error_only(source: Source, kind: LoadErrorKind) -> Loaded {
    Loaded {
        documents: Vec::new(),
        errors: vec![LoadError::new(source, None, kind)],
        skipped: None,
    }
}

fn skipped(source: Source, reason: SkipReason) -> Loaded {
    Loaded {
        skipped: Some(Skipped {
            source,
            reason,
            makes: Vec::new(),
        }),
        ..Loaded::default()
    }
}

/// Reads one input held in memory (for example a request body or a test).
pub fn load_bytes(source: Source, bytes: &[u8], format: Format, opts: &LoadOptions) -> Loaded {
    let mut l = load_one(source, bytes, format, opts);
    if opts.reject_duplicate_objects {
        reject_duplicates(&mut l);
    }
    l
}

/// The documents of a YAML stream as plain values, for tool configuration
/// that is not an object (a kustomization), each with its first line; or
/// the first syntax error as (line, message).
pub fn yaml_values(text: &str) -> Result<Vec<(usize, Value)>, (usize, String)> {
    let parsed = yaml::parse_stream(text, &LoadOptions::default());
    if let Some(e) = parsed.errors.first() {
        return Err((e.line, e.kind.to_string()));
    }
    Ok(parsed
        .docs
        .into_iter()
        .filter(|d| !d.empty)
        .map(|d| (d.line, d.value))
        .collect())
}

/// Reads one input held in memory as text.
pub fn load_str(source: Source, text: &str, format: Format, opts: &LoadOptions) -> Loaded {
    load_bytes(source, text.as_bytes(), format, opts)
}

/// The text of a UTF-16 stream that starts with its byte order mark, which
/// YAML 1.2 (5.2, "Character Encodings") requires a processor to read as
/// it reads UTF-8 (and JSON text is YAML); `None` for anything else.
fn from_utf16_with_bom(bytes: &[u8]) -> Option<String> {
    let unit: fn([u8; 2]) -> u16 = match bytes {
        [0xFF, 0xFE, ..] => u16::from_le_bytes,
        [0xFE, 0xFF, ..] => u16::from_be_bytes,
        _ => return None,
    };
    let units: Vec<u16> = bytes[2..]
        .chunks(2)
        .map(|c| unit([c[0], *c.get(1).unwrap_or(&0)]))
        .collect();
    String::from_utf16(&units).ok()
}

/// Reads one input, without the duplicate-object check.
fn load_one(source: Source, bytes: &[u8], format: Format, opts: &LoadOptions) -> Loaded {
    // JSON and UTF-16 are read whole; YAML is limited per document.
    let whole = format == Format::Json
        || bytes.starts_with(&[0xFF, 0xFE])
        || bytes.starts_with(&[0xFE, 0xFF]);
    if whole && bytes.len() as u64 > opts.max_document_size {
        let limit = opts.max_document_size;
        return error_only(source, LoadErrorKind::TooLarge { limit });
    }
    let utf16 = from_utf16_with_bom(bytes);
    let text = match utf16
        .as_deref()
        .map_or_else(|| std::str::from_utf8(bytes), Ok)
    {
        Ok(t) => t,
        Err(e) => {
            let offset = e.valid_up_to();
            let line = 1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count();
            return Loaded {
                documents: Vec::new(),
                errors: vec![LoadError::new(
                    source,
                    Some(line),
                    LoadErrorKind::NotUtf8 { offset },
                )],
                skipped: None,
            };
        }
    };
    let parsed = match format {
        Format::Yaml => yaml::parse_stream(text, opts),
        Format::Json => json::parse_stream(text),
    };
    let mut parsed = parsed;
    let mut partly_skipped = None;
    // A file that does not parse and never names an apiVersion or a kind
    // is no manifest (a data file in another syntax, a template
    // fragment): skipped, not an error.
    if opts.skip_non_objects
        && !parsed.errors.is_empty()
        && !text.contains("apiVersion")
        && !text.contains("kind")
    {
        return skipped(source, SkipReason::NotObjects);
    }
    // Nor is a file that does not parse and whose name says it is a
    // template (`role.tmpl.yaml`, `app.yaml.j2`): a tool renders it first.
    if opts.skip_non_objects && !parsed.errors.is_empty() && skip::template_name(&source) {
        return skipped(source, SkipReason::Template);
    }
    if opts.skip_non_objects && parsed.errors.is_empty() {
        if let Some(reason) = skip::by_content(&parsed.docs) {
            return skipped(source, reason);
        }
        partly_skipped = drop_configuration(&source, &mut parsed);
        if partly_skipped.is_some() && parsed.docs.iter().all(|d| d.empty) {
            return skipped(source, SkipReason::Configuration);
        }
    }
    let mut out = objects_of(&source, parsed);
    out.skipped = partly_skipped;
    out
}

/// Leaves out the documents that are a tool's configuration (with
/// [`LoadOptions::skip_non_objects`]); if there were any, the file is
/// partly skipped.
fn drop_configuration(source: &Source, parsed: &mut yaml::Parsed) -> Option<Skipped> {
    let before = parsed.docs.len();
    parsed
        .docs
        .retain(|d| d.empty || !skip::is_configuration(&d.value));
    (parsed.docs.len() < before).then(|| Skipped {
        source: source.clone(),
        reason: SkipReason::Configuration,
        makes: Vec::new(),
    })
}

/// The objects of parsed documents (a whole input, or a window of one
/// read in windows), with the errors sorted by line.
fn objects_of(source: &Source, parsed: yaml::Parsed) -> Loaded {
    let mut out = Loaded::default();
    for e in parsed.errors {
        out.errors.push(LoadError {
            source: source.clone(),
            line: Some(e.line),
            column: e.column,
            kind: e.kind,
        });
    }
    if parsed.docs.len() > 64 {
        let parts: Vec<(Vec<Document>, Vec<LoadError>)> = parsed
            .docs
            .into_par_iter()
            .fold(
                || (Vec::new(), Vec::new()),
                |(mut docs, mut errs), raw| {
                    object::unpack(source, raw, &mut docs, &mut errs);
                    (docs, errs)
                },
            )
            .collect();
        for (mut docs, mut errs) in parts {
            out.documents.append(&mut docs);
            out.errors.append(&mut errs);
        }
    } else {
        for raw in parsed.docs {
            object::unpack(source, raw, &mut out.documents, &mut out.errors);
        }
    }
    out.errors.sort_by_key(|e| e.line);
    out
}

/// Drops later copies of an object and reports them.
fn reject_duplicates(all: &mut Loaded) {
    let dups = object::duplicates(&all.documents);
    if dups.is_empty() {
        return;
    }
    let mut drop = vec![false; all.documents.len()];
    for (i, err) in dups {
        drop[i] = true;
        all.errors.push(err);
    }
    let mut i = 0;
    all.documents.retain(|_| {
        let keep = !drop[i];
        i += 1;
        keep
    });
}

/// For the fuzz target: loads `bytes` as YAML and as JSON, and checks that
/// the YAML fast path agrees with the full parser. Panics on a difference.
#[doc(hidden)]
pub fn fuzz_one(bytes: &[u8]) {
    let opts = LoadOptions {
        max_alias_nodes: 10_000,
        ..LoadOptions::default()
    };
    let _ = load_bytes(Source::Stdin, bytes, Format::Yaml, &opts);
    let _ = load_bytes(Source::Stdin, bytes, Format::Json, &opts);
    if let Ok(text) = std::str::from_utf8(bytes) {
        if let Err(diff) = yaml::compare_paths(text, &opts) {
            panic!("{diff}");
        }
    }
}

#[cfg(test)]
mod tests;
