//! Images that Tilt builds, known from the repository's Tiltfile.
//!
//! Tilt's API reference: `docker_build(ref, context, ...)`,
//! `custom_build(ref, command, deps, ...)` and the `restart_process`
//! extension's `docker_build_with_restart(ref, context, ...)` build the
//! image `ref` names, and "if this image will be used in a k8s
//! resource(s), this ref must match the spec.container.image param for
//! that resource(s)": Tilt replaces that reference with the image it
//! built before it applies the manifest. So `image: argocd-ui` in a
//! repository whose Tiltfile builds `argocd-ui` never runs as written.

use std::collections::BTreeSet;
use std::path::PathBuf;

const FILE_NAMES: &[&str] = &["Tiltfile"];

/// The functions whose first argument (or `ref=`) names a built image.
const BUILDS: &[&str] = &["docker_build_with_restart", "docker_build", "custom_build"];

/// The images every Tiltfile that governs `inputs` builds, without a tag
/// or digest.
pub(super) fn images(inputs: &[PathBuf]) -> BTreeSet<String> {
    super::read_governing(inputs, FILE_NAMES, images_of)
}

/// The refs of the build calls in one Tiltfile (Starlark). Only string
/// literals are read: a ref computed at run time cannot be known here.
fn images_of(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .map(|l| strip_comment(l).to_string() + "\n")
        .collect();
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some((at, name)) = next_call(rest) {
        let args = &rest[at + name.len() + 1..];
        if let Some(image) = first_string_argument(args) {
            let repo = super::repository(&image);
            if !repo.is_empty() {
                out.push(repo.to_string());
            }
        }
        rest = args;
    }
    out
}

/// The next `NAME(` of a build function, not part of a longer name.
fn next_call(code: &str) -> Option<(usize, &'static str)> {
    let mut best: Option<(usize, &'static str)> = None;
    for name in BUILDS {
        let mut from = 0;
        while let Some(i) = code[from..].find(&format!("{name}(")).map(|i| i + from) {
            let before = code[..i].chars().next_back();
            if before.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
                if best.is_none_or(|(b, _)| i < b) {
                    best = Some((i, name));
                }
                break;
            }
            from = i + 1;
        }
    }
    best
}

/// The call's first positional argument, or its `ref=` argument, when it
/// is a string literal.
fn first_string_argument(args: &str) -> Option<String> {
    let args = args.trim_start();
    let literal = |s: &str| -> Option<String> {
        let quote = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        let end = s[1..].find(quote)?;
        Some(s[1..1 + end].to_string())
    };
    if let Some(v) = literal(args) {
        return Some(v);
    }
    // `ref = '...'` among keyword arguments, before the call closes.
    let call = &args[..args.find(')').unwrap_or(args.len())];
    let at = call.find("ref")?;
    let after = call[at + 3..].trim_start().strip_prefix('=')?;
    literal(after.trim_start())
}

/// A line without its `#` comment (a `#` inside a string literal is kept).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

#[cfg(test)]
#[path = "tilt_tests.rs"]
mod tests;
