//! Images whose tag a release script writes.
//!
//! Projects that ship an install YAML keep `latest` or no tag for their
//! own images in the committed files between releases, and their release
//! tooling writes the real tag. Whatever the tool, the tooling is a
//! command in a script or a Makefile that rewrites a tag field; three
//! shapes are read from the repository's `Makefile`s, `*.mk` and `*.sh`
//! files (hidden directories, `vendor`, `node_modules` and `third_party`
//! are not entered):
//!
//! - `kustomize edit set image NAME=NEWNAME:TAG` (or `NAME:TAG`), which
//!   rewrites the `images:` entry of the kustomization in the working
//!   directory (kubebuilder's `cd config/manager && kustomize edit set
//!   image controller=${IMG}`). The image is read from the argument when
//!   written out; when the name is a variable, every image of the
//!   kustomization in the directory the command runs in (`cd DIR && ...`)
//!   is taken.
//! - a line naming `newTag` and a kustomization file (`sed 's/newTag:
//!   .*/newTag: $(VERSION)/' manifests/base/kustomization.yaml`): every
//!   image of that kustomization.
//! - a substitution ([`substitutions`]): a line that runs `sed`, `perl` or
//!   `yq`, or calls a shell function of its script that does, whose `s`
//!   pattern (sed(1): `s/REGEXP/REPLACEMENT/`, any delimiter) names
//!   `newTag` or `latest`. What it reaches is what sed reads: the files
//!   and folders the line names (`find DIR -exec sed -i ...`, `sed -i ...
//!   FILE`), with the script's own variables expanded, and the output of
//!   `kustomize build DIR` piped into it, which is every file that DIR's
//!   kustomization reads down its tree (`resources`, `bases`,
//!   `components`, `patches`). A `newTag` pattern retags every `images:`
//!   entry of the kustomizations reached; a `latest` pattern retags the
//!   entries whose `newTag` is `latest` and the `image:`s written
//!   `:latest` in the files reached.
//!
//! Choices, and why: only the pattern counts (`s/:v.*/:latest/` writes
//! `latest`, a development reset, not a release); the repository's root
//! as a target, and the output of a `>`, are not taken, since a rewrite
//! of everything cannot show which images a release owns; and Docker
//! Hub's official images (`busybox`, `docker.io/library/redis`) are never
//! taken, even where a blanket `s/:latest/:$TAG/g` reaches them: a
//! project's release writes its own version, and `busybox:v0.14.0` is no
//! image anyone publishes, so a `busybox:latest` stays a finding. Images
//! the rewrite cannot be shown to reach (a file outside the folder or
//! the tree, a target held in a variable the script does not assign)
//! stay findings too. A ytt overlay that sets an image from a data value
//! at release is not read.

use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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
            images.extend(script_images(&text, &root, dir));
        }
        images.extend(super::ci_workflow::images(&root));
    }
    images.into_iter().collect()
}

/// The images one script tags (the three shapes above, and a chart
/// rendered with `--set …tag=`), its commands run in `dir`.
pub(super) fn script_images(text: &str, root: &Path, dir: &Path) -> Vec<String> {
    let mut images = Vec::new();
    for command in set_image_commands(text) {
        images.extend(command.images(root, dir));
    }
    for (rewrite, target) in substitutions(text, root, dir) {
        images.extend(rewritten_images(rewrite, &target, root));
    }
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    images.extend(super::helm_release::images(
        &joined,
        &assignments(&joined),
        root,
        dir,
    ));
    for kustomization in retagged_kustomizations(text) {
        let at = resolve(&kustomization, root, dir);
        for (name, new_name) in at
            .and_then(|d| kustomization_images(&d))
            .unwrap_or_default()
        {
            images.push(name);
            images.extend(new_name);
        }
    }
    images
}

/// The repository's `Makefile`s, `*.mk` and `*.sh` files under `dir`.
pub(super) fn find_scripts(dir: &Path, out: &mut Vec<PathBuf>) {
    super::repository_files(dir, &is_script, out);
}

pub(crate) fn is_script(name: &str) -> bool {
    name == "Makefile" || name == "GNUmakefile" || name.ends_with(".mk") || name.ends_with(".sh")
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

/// What a substitution's pattern matches: `newTag` (the tag field of a
/// kustomization's `images:` entries) or `latest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rewrite {
    NewTag,
    Latest,
}

/// What a substitution is applied to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// A file, or every file under a folder.
    Files(PathBuf),
    /// The output of `kustomize build DIR` (`kubectl kustomize DIR`).
    Build(PathBuf),
}

/// The programs that substitute text in files or a stream.
const SUBSTITUTERS: &[&str] = &["sed", "gsed", "perl", "yq"];

/// Every substitution of a script whose pattern names `newTag` or
/// `latest`, with what it is applied to. A line substitutes when it runs
/// a [`SUBSTITUTERS`] program, or calls a shell function of the same
/// script whose body runs one (its arguments then carry the pattern and
/// the files, as in `retag "$DIR" "newTag: .*" "newTag: $TAG"`).
/// Its targets are the directory of a `kustomize build` on the line and
/// every other word that, with the script's own `VAR=value` assignments
/// expanded, names a file or folder of the repository (the repository's
/// root itself is too broad to show which image a release owns, and is
/// left out); what follows a `>` is the output, not a target.
fn substitutions(text: &str, root: &Path, script_dir: &Path) -> Vec<(Rewrite, Target)> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let vars = assignments(&joined);
    let functions = substituting_functions(&joined);
    let mut out = Vec::new();
    for line in joined.lines() {
        let line = line.trim_start();
        if line.starts_with('#') {
            continue;
        }
        let words = shell_words(line);
        let tool = words.iter().any(|w| SUBSTITUTERS.contains(&base_name(w)));
        let call = words.first().is_some_and(|w| functions.contains(*w));
        let rewrite = if tool {
            substitution_patterns(line)
                .iter()
                .find_map(|p| pattern_rewrite(p))
                .or_else(|| {
                    (words.iter().any(|w| base_name(w) == "yq") && line.contains("newTag"))
                        .then_some(Rewrite::NewTag)
                })
        } else if call {
            pattern_rewrite(line)
        } else {
            None
        };
        let Some(rewrite) = rewrite else { continue };
        let input = line.split('>').next().unwrap_or(line);
        let words = shell_words(input);
        let mut built = BTreeSet::new();
        for pair in words.windows(3) {
            let build = (base_name(pair[0]) == "kustomize" && pair[1] == "build")
                || (base_name(pair[0]) == "kubectl" && pair[1] == "kustomize");
            if build {
                built.insert(pair[2]);
                if let Some(dir) = path_of(pair[2], &vars, root, script_dir) {
                    out.push((rewrite, Target::Build(dir)));
                }
            }
        }
        for word in words.iter().skip(1) {
            if built.contains(word) {
                continue;
            }
            if let Some(path) = path_of(word, &vars, root, script_dir) {
                out.push((rewrite, Target::Files(path)));
            }
        }
    }
    out
}

/// The last path segment of a command (`/usr/bin/sed` is `sed`, `$(YQ)`
/// or `${KUSTOMIZE}` are `yq` and `kustomize`).
pub(super) fn base_name(word: &str) -> &str {
    let w = word.trim_start_matches("$(").trim_start_matches("${");
    let w = w.trim_end_matches([')', '}']);
    let w = w.rsplit('/').next().unwrap_or(w);
    match w {
        "YQ" => "yq",
        "SED" => "sed",
        "KUSTOMIZE" => "kustomize",
        "KUBECTL" => "kubectl",
        _ => w,
    }
}

/// The words of a shell line, split at blanks and the shell's operators,
/// quotes removed.
pub(super) fn shell_words(line: &str) -> Vec<&str> {
    line.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '<' | '>'))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The patterns of the `s` commands of a line (`s/PATTERN/REPL/g`,
/// `s@PATTERN@REPL@`, as sed and perl write them; any of `/@|#,!%` as the
/// delimiter).
fn substitution_patterns(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    for i in 0..chars.len().saturating_sub(2) {
        let starts = i == 0 || matches!(chars[i - 1], ' ' | '\'' | '"' | '\t' | ';' | '{');
        let d = chars[i + 1];
        if chars[i] != 's' || !starts || !"/@|#,!%".contains(d) {
            continue;
        }
        let mut pattern = String::new();
        let mut j = i + 2;
        while j < chars.len() && chars[j] != d {
            if chars[j] == '\\' && j + 1 < chars.len() {
                j += 1;
            }
            pattern.push(chars[j]);
            j += 1;
        }
        if j < chars.len() {
            out.push(pattern);
        }
    }
    out
}

/// What a substitution pattern rewrites: `newTag` before `latest`.
fn pattern_rewrite(pattern: &str) -> Option<Rewrite> {
    if pattern.contains("newTag") {
        Some(Rewrite::NewTag)
    } else if pattern.contains("latest") {
        Some(Rewrite::Latest)
    } else {
        None
    }
}

/// The script's `NAME=value` (shell) and `NAME ?= value`, `NAME := value`,
/// `NAME = value` (make) assignments, quotes removed; the last one wins.
pub(super) fn assignments(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut vars = std::collections::BTreeMap::new();
    for line in text.lines() {
        let line = line.trim_start();
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some(eq) = line.find('=') else { continue };
        let name = line[..eq].trim_end_matches([' ', '?', ':', '+']);
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let value = line[eq + 1..].trim();
        let value = value.split_whitespace().next().unwrap_or("");
        vars.insert(
            name.to_string(),
            value.trim_matches(|c| c == '"' || c == '\'').to_string(),
        );
    }
    vars
}

/// The names of the shell functions of a script (`name() {` or `function
/// name {`, up to a line that is `}`) whose body runs a [`SUBSTITUTERS`]
/// program.
fn substituting_functions(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = &current {
            if t == "}" {
                current = None;
            } else if shell_words(t)
                .iter()
                .any(|w| SUBSTITUTERS.contains(&base_name(w)))
            {
                out.insert(name.clone());
            }
            continue;
        }
        let head = t.strip_prefix("function ").unwrap_or(t);
        if let Some(name) = head.strip_suffix('{').map(str::trim_end) {
            let name = name.trim_end_matches("()").trim_end();
            if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                current = Some(name.to_string());
            }
        }
    }
    out
}

/// A word of a script as a file or folder of the repository below its
/// root: `$VAR`/`${VAR}`/`$(VAR)` expanded from the script's own
/// assignments, then a leading variable that is left stands for the
/// repository's or the script's directory ([`resolve`]).
pub(super) fn path_of(
    word: &str,
    vars: &std::collections::BTreeMap<String, String>,
    root: &Path,
    script_dir: &Path,
) -> Option<PathBuf> {
    let mut w = word.to_string();
    for (name, value) in vars {
        if value.contains('$') && !value.starts_with('$') {
            continue;
        }
        for form in [
            format!("${{{name}}}"),
            format!("$({name})"),
            format!("${name}"),
        ] {
            if w.starts_with(&form) && !value.contains(&form) {
                w = format!("{value}{}", &w[form.len()..]);
            }
        }
    }
    let mut rel = w.as_str();
    if rel.starts_with('$') {
        rel = rel.split_once('/').map_or("", |(_, r)| r);
    }
    let rel = rel.trim_start_matches("./");
    let pathlike = rel.contains('/') || rel.ends_with(".yaml") || rel.ends_with(".yml");
    if !pathlike || rel.contains(['$', '*', '?']) {
        return None;
    }
    let found = [script_dir, root]
        .iter()
        .map(|b| b.join(rel))
        .find(|p| p.exists())?;
    let found = found.canonicalize().ok()?;
    let root = root.canonicalize().ok()?;
    (found.starts_with(&root) && found != root).then_some(found)
}

/// The images a substitution retags: with a `newTag` pattern, the
/// `images:` entries (name and newName) of every kustomization it
/// reaches; with a `latest` pattern, the entries whose `newTag` is
/// `latest` and every `image:` written `:latest` in the files it reaches.
/// A Docker Hub official image ([`official_image`]) is left out: a
/// project's release tags its own images, and `busybox:v0.14.0` is no
/// image anyone publishes.
fn rewritten_images(rewrite: Rewrite, target: &Target, root: &Path) -> Vec<String> {
    let mut files = BTreeSet::new();
    match target {
        Target::Files(p) if p.is_file() => {
            files.insert(p.clone());
        }
        Target::Files(p) => files_under(p, &mut files),
        Target::Build(d) => kustomization_tree(d, root, &mut BTreeSet::new(), &mut files),
    }
    let mut out = Vec::new();
    for file in files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if ["kustomization.yaml", "kustomization.yml", "Kustomization"].contains(&name.as_str()) {
            let Some(doc) = super::yaml_documents(&text).into_iter().next() else {
                continue;
            };
            for e in doc
                .get("images")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
            {
                let tag = e.get("newTag").and_then(Json::as_str);
                if rewrite == Rewrite::Latest && tag != Some("latest") {
                    continue;
                }
                let name = e.get("name").and_then(Json::as_str);
                let new_name = e.get("newName").and_then(Json::as_str);
                // The image that runs is newName's, or name's without one.
                if new_name.or(name).is_some_and(|i| !official_image(i)) {
                    out.extend(name.into_iter().chain(new_name).map(str::to_string));
                }
            }
        } else if rewrite == Rewrite::Latest {
            for line in text.lines() {
                let t = line.trim_start().trim_start_matches("- ").trim_start();
                let Some(v) = t.strip_prefix("image:") else {
                    continue;
                };
                let v = v
                    .split(" #")
                    .next()
                    .unwrap_or(v)
                    .trim()
                    .trim_matches(|c| c == '"' || c == '\'');
                if v.ends_with(":latest") && !official_image(super::repository(v)) {
                    out.push(super::repository(v).to_string());
                }
            }
        }
    }
    out
}

/// Whether an image repository is a Docker Hub official image (`busybox`,
/// `library/busybox`, `docker.io/library/busybox`).
pub(super) fn official_image(repo: &str) -> bool {
    let r = repo
        .strip_prefix("docker.io/")
        .or_else(|| repo.strip_prefix("index.docker.io/"))
        .unwrap_or(repo);
    let r = r.strip_prefix("library/").unwrap_or(r);
    !r.contains('/')
}

/// Every YAML file under `dir` (hidden folders not entered).
fn files_under(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let name = e.file_name().to_string_lossy().to_string();
        if t.is_dir() {
            if !name.starts_with('.') {
                files_under(&e.path(), out);
            }
        } else if t.is_file()
            && (name.ends_with(".yaml") || name.ends_with(".yml") || name == "Kustomization")
        {
            out.insert(e.path());
        }
    }
}

/// The files `kustomize build DIR` reads: the kustomization of DIR, the
/// files it names (`resources`, `bases`, `components`, `patches[].path`,
/// `patchesStrategicMerge`), and the same for every folder it names, down
/// the tree; remote references and paths outside the repository are not
/// followed. A DIR without a kustomization gives its files.
fn kustomization_tree(
    dir: &Path,
    root: &Path,
    seen: &mut BTreeSet<PathBuf>,
    out: &mut BTreeSet<PathBuf>,
) {
    let Ok(dir) = dir.canonicalize() else { return };
    if !seen.insert(dir.clone()) {
        return;
    }
    let Some(file) = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .iter()
        .map(|n| dir.join(n))
        .find(|f| f.is_file())
    else {
        files_under(&dir, out);
        return;
    };
    out.insert(file.clone());
    let Ok(text) = std::fs::read_to_string(&file) else {
        return;
    };
    let Some(doc) = super::yaml_documents(&text).into_iter().next() else {
        return;
    };
    let mut refs = Vec::new();
    for key in ["resources", "bases", "components", "patchesStrategicMerge"] {
        refs.extend(
            doc.get(key)
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .filter_map(Json::as_str),
        );
    }
    refs.extend(
        doc.get("patches")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("path")?.as_str()),
    );
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    for r in refs {
        if r.contains("://") || r.starts_with("github.com/") {
            continue;
        }
        let Ok(p) = dir.join(r).canonicalize() else {
            continue;
        };
        if !p.starts_with(&root) {
            continue;
        }
        if p.is_dir() {
            kustomization_tree(&p, &root, seen, out);
        } else {
            out.insert(p);
        }
    }
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
#[path = "release_tests.rs"]
pub(super) mod tests;
