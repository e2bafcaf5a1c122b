//! Conflicts between versions of one object, written from what a cluster
//! can hold (one object per kind, namespace and name), not from a corpus
//! case.

use super::*;
use std::fs;
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

fn ingress(name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: {name}, namespace: shop}}
spec:
  rules:
  - host: {host}
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {{service: {{name: {name}, port: {{number: 80}}}}}}
"
    )
}

/// Writes each (file, Ingress name, host) under `dir`.
fn ingresses(dir: &Path, all: &[(&str, &str, &str)]) {
    for (file, name, host) in all {
        write(dir, file, &ingress(name, host));
    }
}

fn hosts(dir: &Path) -> Vec<(String, crate::report::Action, String)> {
    let r = run(&CheckOptions {
        inputs: vec![dir.to_path_buf()],
        user: DEFAULT_USER.into(),
        ..CheckOptions::default()
    });
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let mut out: Vec<_> = r
        .results
        .iter()
        .filter(|f| f.policy == "unique-ingress-host")
        .map(|f| (f.object.name.clone(), f.action, f.message.clone()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn a_conflict_with_an_object_defined_twice_is_a_warn() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Two versions of one Ingress, as a book's chapter keeps them.
    ingresses(
        dir.path(),
        &[
            ("ch12/kiada.v1.yaml", "kiada", "kiada.example.com"),
            ("ch12/kiada.v2.yaml", "kiada", "kiada.example.com"),
            ("ch13/api.yaml", "api", "kiada.example.com"),
        ],
    );
    let found = hosts(dir.path());
    assert!(!found.is_empty());
    for (name, action, message) in &found {
        assert_eq!(*action, crate::report::Action::Warn, "{name}: {message}");
        assert!(
            message.contains("(a Warn, not a Deny: Ingress shop/kiada is defined in 2 files"),
            "{message}"
        );
    }
}

#[test]
fn a_conflict_inside_a_folder_of_versions_is_a_warn_elsewhere_a_deny() {
    let dir = tempfile::tempdir().expect("tempdir");
    ingresses(
        dir.path(),
        &[
            ("ch12/kiada.v1.yaml", "kiada", "kiada.example.com"),
            ("ch12/kiada.v2.yaml", "kiada", "kiada.example.com"),
            // Defined once each, beside the versions: alternatives too.
            ("ch12/web-a.yaml", "web-a", "web.example.com"),
            ("ch12/web-b.yaml", "web-b", "web.example.com"),
            // The same pair in a folder whose files are one install: certain.
            ("prod/shop-a.yaml", "shop-a", "shop.example.com"),
            ("prod/shop-b.yaml", "shop-b", "shop.example.com"),
        ],
    );
    let found = hosts(dir.path());
    let action = |n: &str| {
        found
            .iter()
            .find(|f| f.0 == n)
            .map(|f| (f.1, f.2.clone()))
            .unwrap_or_else(|| panic!("no finding on {n}: {found:?}"))
    };
    for n in ["web-a", "web-b"] {
        let (a, m) = action(n);
        assert_eq!(a, crate::report::Action::Warn, "{m}");
        assert!(m.contains("both come from"), "{m}");
        assert!(
            m.contains("whose files define Ingress shop/kiada more than once"),
            "{m}"
        );
    }
    for n in ["shop-a", "shop-b"] {
        let (a, m) = action(n);
        assert_eq!(a, crate::report::Action::Deny, "{m}");
        assert!(!m.contains("a Warn, not a Deny"), "{m}");
    }
}

#[test]
fn a_file_repeating_an_object_is_not_a_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One file giving one object twice is one file: no versions.
    let twice = format!(
        "{}---\n{}",
        ingress("a", "a.example.com"),
        ingress("a", "a.example.com")
    );
    write(dir.path(), "app/a.yaml", &twice);
    ingresses(dir.path(), &[("app/b.yaml", "b", "a.example.com")]);
    let found = hosts(dir.path());
    assert!(!found.is_empty());
    assert!(
        found.iter().all(|f| f.1 == crate::report::Action::Deny),
        "{found:?}"
    );
}
