//! The bundled OpenAPI schemas (`src/k8s/openapi/schemas.json`) against a
//! real kube-apiserver v1.36.3: every served resource of every group
//! version (discovery), its kind's root definition (the definition whose
//! `x-kubernetes-group-version-kind` names it in `/openapi/v3/<gv>`), and
//! the definitions reachable from those, trimmed as `cel::schema::Schema`
//! keeps them. The test fails when the bundle differs; regenerate it with
//!
//! ```sh
//! INTERLOCK_REGENERATE_SCHEMAS=1 cargo test --test integration celwarn_schemas::
//! ```
//!
//! It runs on a cluster of its own: the shared one holds the CRDs of other
//! tests.

use crate::support;
use interlock::cel::schema::Schema;
use interlock::k8s::openapi::{Resource, Schemas};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use support::cluster::TestCluster;

fn get_raw(cluster: &TestCluster, path: &str) -> Json {
    let out = cluster.kubectl(&["get", "--raw", path]);
    assert!(
        out.status.success(),
        "kubectl get --raw {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `api/v1` → ("", "v1"), `apis/apps/v1` → ("apps", "v1").
fn group_version(path: &str) -> Option<(String, String)> {
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => Some((String::new(), v.to_string())),
        ["apis", g, v] => Some((g.to_string(), v.to_string())),
        _ => None,
    }
}

fn names_gvk(schema: &Json, group: &str, version: &str, kind: &str) -> bool {
    schema["x-kubernetes-group-version-kind"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|g| g["group"] == group && g["version"] == version && g["kind"] == kind)
}

fn live_schemas(cluster: &TestCluster) -> Schemas {
    let paths = get_raw(cluster, "/openapi/v3");
    let mut out = Schemas::default();
    let mut all = BTreeMap::new();
    let keys: BTreeSet<&String> = paths["paths"].as_object().expect("paths").keys().collect();
    for key in keys {
        let Some((group, version)) = group_version(key) else {
            continue;
        };
        let doc = get_raw(cluster, &format!("/openapi/v3/{key}"));
        let components = doc["components"]["schemas"].as_object().expect("schemas");
        let discovery = get_raw(cluster, &format!("/{key}"));
        for r in discovery["resources"].as_array().into_iter().flatten() {
            let (name, kind) = (r["name"].as_str().unwrap(), r["kind"].as_str().unwrap());
            if name.contains('/') {
                continue;
            }
            let Some((def, _)) = components
                .iter()
                .find(|(_, s)| names_gvk(s, &group, &version, kind))
            else {
                continue;
            };
            out.resources.push(Resource(
                group.clone(),
                version.clone(),
                name.into(),
                kind.into(),
                def.clone(),
            ));
        }
        for (name, s) in components {
            let mut schema: Schema = serde_json::from_value(s.clone())
                .unwrap_or_else(|e| panic!("{key}: definition {name}: {e}"));
            schema.normalize();
            all.entry(name.clone()).or_insert(schema);
        }
    }
    out.resources
        .sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    out.definitions = reachable(&out.resources, &all);
    out
}

/// The definitions the resources' roots reach through `$ref`s.
fn reachable(resources: &[Resource], all: &BTreeMap<String, Schema>) -> BTreeMap<String, Schema> {
    let mut out = BTreeMap::new();
    let mut todo: Vec<String> = resources.iter().map(|r| r.4.clone()).collect();
    while let Some(name) = todo.pop() {
        if out.contains_key(&name) {
            continue;
        }
        let s = all
            .get(&name)
            .unwrap_or_else(|| panic!("no definition {name}"));
        refs(s, &mut todo);
        out.insert(name, s.clone());
    }
    out
}

fn refs(s: &Schema, out: &mut Vec<String>) {
    out.extend(s.reference.clone());
    s.properties.values().for_each(|p| refs(p, out));
    for p in [&s.items, &s.additional_properties].into_iter().flatten() {
        refs(p, out);
    }
}

/// One resource and one definition a line, so a change is a small diff.
fn render(s: &Schemas) -> String {
    let resources: Vec<String> = s
        .resources
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    let definitions: Vec<String> = s
        .definitions
        .iter()
        .map(|(n, d)| {
            format!(
                "{}:{}",
                serde_json::to_string(n).unwrap(),
                serde_json::to_string(d).unwrap()
            )
        })
        .collect();
    format!(
        "{{\"resources\":[\n{}\n],\n\"definitions\":{{\n{}\n}}}}\n",
        resources.join(",\n"),
        definitions.join(",\n")
    )
}

fn bundle_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/k8s/openapi/schemas.json")
}

#[test]
fn bundled_schemas_match_the_live_apiserver() {
    let cluster = TestCluster::start();
    let _logs = cluster.logs_on_panic();
    let live = render(&live_schemas(&cluster));
    if std::env::var_os("INTERLOCK_REGENERATE_SCHEMAS").is_some() {
        std::fs::write(bundle_path(), &live).expect("write the bundle");
        return;
    }
    let bundled = std::fs::read_to_string(bundle_path()).expect("read the bundle");
    if let Some((n, (b, l))) = bundled
        .lines()
        .zip(live.lines())
        .enumerate()
        .find(|(_, (b, l))| b != l)
    {
        panic!(
            "src/k8s/openapi/schemas.json differs from the live apiserver at line {}:\n  bundled: {}\n  live:    {}\nregenerate it (INTERLOCK_REGENERATE_SCHEMAS=1)",
            n + 1,
            b.chars().take(300).collect::<String>(),
            l.chars().take(300).collect::<String>()
        );
    }
    assert_eq!(
        bundled.lines().count(),
        live.lines().count(),
        "the bundle and the live apiserver list a different number of resources and definitions; regenerate it"
    );
    // The bundle parses as the library reads it, and types a Deployment.
    let parsed: Schemas = serde_json::from_str(&bundled).expect("the bundle parses");
    assert_eq!(&parsed, interlock::k8s::openapi::builtin());
}
