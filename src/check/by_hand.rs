//! Objects a repository tells its reader to create by hand.
//!
//! A README or a script often says `kubectl create configmap app-env
//! --from-literal ...` or `kubectl create serviceaccount app-ksa -n
//! team` before `kubectl apply -f deploy/`: the object holds a value of
//! the reader's own (an endpoint, a token, a cloud identity), so it is
//! not committed. The manifests then name an object the files do not
//! give, and that is how the repository means it.
//!
//! kubectl's reference: `kubectl create configmap NAME` (alias `cm`),
//! `kubectl create secret generic|tls|docker-registry NAME` and `kubectl
//! create serviceaccount NAME` (alias `sa`) create the object NAME in the
//! namespace `-n`/`--namespace` gives, else in the context's namespace.
//! So an object named there with a namespace is taken in that
//! namespace; without one, in whichever namespace a pod of the inputs
//! looks for it, since the reader runs the command where the README's
//! manifests go. Names held in a variable or a placeholder (`$NAME`,
//! `<name>`) are not taken.

use crate::check::built_images::{release, repository_files, repository_root};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// One object a command of the repository creates.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByHand {
    pub kind: &'static str,
    pub name: String,
    /// `None`: the context's namespace, whichever the reader uses.
    pub namespace: Option<String>,
    /// Where the command is written: `FILE:LINE`.
    pub at: String,
}

/// Every object that the Markdown files and scripts of the repositories
/// of `inputs` create with `kubectl create`.
pub fn created(inputs: &[PathBuf]) -> Vec<ByHand> {
    let roots: BTreeSet<PathBuf> = inputs.iter().filter_map(|i| repository_root(i)).collect();
    let mut out = BTreeSet::new();
    for root in roots {
        let mut files = Vec::new();
        let accept = |name: &str| name.ends_with(".md") || release::is_script(name);
        repository_files(&root, &accept, &mut files);
        for f in files {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            let shown = f.strip_prefix(&root).unwrap_or(&f).display().to_string();
            out.extend(commands(&text, &shown));
        }
    }
    out.into_iter().collect()
}

/// The objects the `kubectl create` commands of one file create.
pub(crate) fn commands(text: &str, file: &str) -> Vec<ByHand> {
    let mut out = Vec::new();
    for (n, line) in logical_lines(text) {
        for command in line.split(['&', ';', '|']) {
            let words: Vec<&str> = command.split_whitespace().collect();
            let Some((create, args)) = create_command(&words) else {
                continue;
            };
            if let Some((kind, name)) = object(args) {
                out.push(ByHand {
                    kind,
                    name: name.to_string(),
                    // kubectl takes `-n` before the verb as well as after.
                    namespace: namespace(args).or_else(|| namespace(create)),
                    at: format!("{file}:{n}"),
                });
            }
        }
    }
    out
}

/// kubectl's global flags that take their value as the next word.
const VALUED_GLOBALS: &[&str] = &[
    "-n",
    "--namespace",
    "--context",
    "--kubeconfig",
    "--cluster",
    "--user",
    "-s",
    "--server",
    "--as",
];

/// A `kubectl [global flags] create ...` command: the words from
/// `kubectl` up to `create`, and the words after it.
fn create_command<'w, 'a>(words: &'w [&'a str]) -> Option<(&'w [&'a str], &'w [&'a str])> {
    let start = words.iter().position(|w| *w == "kubectl")?;
    let mut i = start + 1;
    while let Some(w) = words.get(i) {
        if !w.starts_with('-') {
            break;
        }
        i += if VALUED_GLOBALS.contains(w) { 2 } else { 1 };
    }
    (words.get(i) == Some(&"create")).then(|| (&words[start..i], &words[i + 1..]))
}

/// The lines of `text` with continued lines (`\\` at the end) joined,
/// each with the number of its first line.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let (body, continued) = match line.trim_end().strip_suffix('\\') {
            Some(body) => (body, true),
            None => (line, false),
        };
        match out.last_mut() {
            Some((_, joined)) if open => {
                joined.push(' ');
                joined.push_str(body);
            }
            _ => out.push((i + 1, body.to_string())),
        }
        open = continued;
    }
    out
}

/// The kind and name a `kubectl create` creates, from the words after
/// `create`.
fn object<'a>(words: &[&'a str]) -> Option<(&'static str, &'a str)> {
    let (kind, rest) = match *words.first()? {
        "configmap" | "cm" => ("ConfigMap", &words[1..]),
        "serviceaccount" | "sa" => ("ServiceAccount", &words[1..]),
        "secret" => match words.get(1).copied()? {
            "generic" | "tls" | "docker-registry" => ("Secret", &words[2..]),
            _ => return None,
        },
        _ => return None,
    };
    let name = rest.iter().find(|w| !w.starts_with('-'))?;
    let name = name.trim_matches(|c| c == '"' || c == '\'');
    dns_name(name).then_some((kind, name))
}

/// The namespace `-n NS`, `-nNS`, `--namespace NS` or `--namespace=NS`
/// gives, when written out.
fn namespace(words: &[&str]) -> Option<String> {
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let value = match *w {
            "-n" | "--namespace" => it.next().copied(),
            w => w
                .strip_prefix("--namespace=")
                .or_else(|| w.strip_prefix("-n").filter(|v| !v.is_empty())),
        };
        if let Some(v) = value.map(|v| v.trim_matches(|c| c == '"' || c == '\'')) {
            return dns_name(v).then(|| v.to_string());
        }
    }
    None
}

/// Whether `name` is a literal object name (RFC 1123 subdomain), not a
/// variable or a placeholder.
fn dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

#[cfg(test)]
#[path = "by_hand_tests.rs"]
mod tests;
