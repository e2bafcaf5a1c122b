//! The import rules docs/architecture.md states, checked on the source:
//! arrows point down, front-ends never import each other, and the pure
//! layers use no kube, tokio or axum. A `use` that breaks one fails here
//! with the file and line, before review has to find it.

use std::fs;
use std::path::{Path, PathBuf};

const FRONT_ENDS: &[&str] = &["admission", "controller", "check", "audit", "plan", "eval"];

/// Every `.rs` file under `src/NAME` (a folder or `src/NAME.rs`).
fn sources(name: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let file = root.join(format!("{name}.rs"));
    let mut out = Vec::new();
    if file.is_file() {
        out.push(file);
    }
    let mut dirs = vec![root.join(name)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    assert!(!out.is_empty(), "no sources for module {name}");
    out.sort();
    out
}

/// `file:line: text` of each code line (comments left out) in module
/// `name` that contains one of `needles`.
fn naming(name: &str, needles: &[String]) -> Vec<String> {
    let mut hits = Vec::new();
    for file in sources(name) {
        let text = fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if needles.iter().any(|n| mentions(code, n)) {
                hits.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    hits
}

/// `needle` in `code` as a whole path segment (`crate::check` is not
/// `crate::checks`).
fn mentions(code: &str, needle: &str) -> bool {
    code.match_indices(needle).any(|(at, _)| {
        let next = code[at + needle.len()..].chars().next();
        let prev = code[..at].chars().next_back();
        !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !prev.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Fails with `what` and every offending line when there are any.
fn no_hits(hits: Vec<String>, what: &str) {
    assert!(hits.is_empty(), "{what}:\n{}", hits.join("\n"));
}

fn crate_paths(modules: &[&str]) -> Vec<String> {
    modules.iter().map(|m| format!("crate::{m}")).collect()
}

#[test]
fn front_ends_never_import_each_other() {
    for m in FRONT_ENDS {
        let others: Vec<&str> = FRONT_ENDS.iter().copied().filter(|o| o != m).collect();
        let hits = naming(m, &crate_paths(&others));
        no_hits(hits, &format!("front-end {m} imports another"));
    }
}

#[test]
fn the_engine_and_live_state_never_name_a_front_end() {
    let above = crate_paths(&[
        "admission",
        "controller",
        "check",
        "server",
        "audit",
        "plan",
    ]);
    for m in ["cluster", "policy", "inventory", "group"] {
        let hits = naming(m, &above);
        no_hits(hits, &format!("{m} names a module above it"));
    }
}

#[test]
fn webhook_config_is_computed_from_the_policies_alone() {
    // Offline: it loads them as every front-end does (policy::load),
    // never through the live state.
    let hits = naming(
        "webhook_config",
        &crate_paths(&["cluster", "server", "admission"]),
    );
    no_hits(hits, "webhook_config names the live state");
}

#[test]
fn the_pure_layers_use_no_kube_tokio_or_axum() {
    let runtime: Vec<String> = [
        "kube::",
        "tokio::",
        "axum::",
        "use kube",
        "use tokio",
        "use axum",
    ]
    .map(String::from)
    .to_vec();
    for m in ["policy", "inventory", "cel", "manifest"] {
        let hits = naming(m, &runtime);
        no_hits(hits, &format!("{m} uses the runtime"));
    }
}

#[test]
fn the_server_and_unstick_stand_alone() {
    let every: Vec<String> = sources("")
        .iter()
        .filter_map(|p| {
            let rel = p
                .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
                .ok()?;
            let first = rel.components().next()?.as_os_str().to_str()?;
            Some(first.trim_end_matches(".rs").to_string())
        })
        .filter(|m| !["lib", "main"].contains(&m.as_str()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // The server's only way into the crate is its own traits; it runs each
    // request under CEL's interrupt, a leaf with no state of the crate (its
    // flags are parsed in cli/).
    let allowed_in_server = ["server", "cel"];
    let server: Vec<&str> = every
        .iter()
        .map(String::as_str)
        .filter(|m| !allowed_in_server.contains(m))
        .collect();
    let hits = naming("server", &crate_paths(&server));
    no_hits(hits, "server imports the crate");
    let cel = naming("server", &["crate::cel".to_string()]);
    assert!(
        cel.iter()
            .all(|l| l.contains("crate::cel::interrupt") || l.contains("crate::cel::Interrupt")),
        "server uses more of cel than its interrupt:\n{}",
        cel.join("\n")
    );
    let unstick: Vec<&str> = every
        .iter()
        .map(String::as_str)
        .filter(|m| !["unstick", "k8s"].contains(m))
        .collect();
    let hits = naming("unstick", &crate_paths(&unstick));
    no_hits(hits, "unstick imports the crate");
}
