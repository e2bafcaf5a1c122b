//! Interlock's type-check warnings (`CompiledPolicy::type_check_warnings`)
//! against the ones kube-controller-manager's
//! validatingadmissionpolicy-status-controller writes into each
//! ValidatingAdmissionPolicy's `status.typeChecking`, for every policy of
//! `tests/vap-corpus/typecheck/policies.yaml` (built-in kinds, a CRD kind,
//! ConfigMap and CRD paramKinds, wildcards, the ten-kind limit), on a real
//! kube-apiserver v1.36.3. Field refs and texts must be equal, once the
//! number kube appends to its type names (`Deployment123456789.spec`, a
//! clock reading) is taken out.

use crate::support;
use crate::vap_differential::StatusController;
use interlock::check::run::compile_policies;
use interlock::check::Report;
use interlock::inventory::Inventory;
use interlock::k8s::openapi;
use interlock::manifest::{load_str, Document, Format, LoadOptions, Source};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::cluster::{Options, TestCluster};

type Warnings = Vec<(String, String)>;

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vap-corpus/typecheck")
        .join(name)
}

fn documents(name: &str) -> Vec<Document> {
    let path = corpus(name);
    let text = std::fs::read_to_string(&path).expect("read the corpus");
    let loaded = load_str(
        Source::file(&path),
        &text,
        Format::Yaml,
        &LoadOptions::default(),
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    loaded.documents
}

fn kubectl_ok(cluster: &TestCluster, args: &[&str]) -> String {
    let out = cluster.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The CRDs are served and published in `/openapi/v3` before any policy
/// exists, so the status controller's first check already resolves them.
fn create_crds(cluster: &TestCluster) {
    let path = corpus("crds.yaml").display().to_string();
    kubectl_ok(cluster, &["apply", "-f", &path]);
    kubectl_ok(
        cluster,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            &path,
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = cluster.kubectl(&["get", "--raw", "/openapi/v3/apis/typecheck.example.com/v1"]);
        let doc = String::from_utf8_lossy(&out.stdout);
        if out.status.success() && doc.contains("\"Widget\"") && doc.contains("\"Limit\"") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the CRDs' schemas were not published"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// kube's warnings per policy, once the controller checked every one.
fn kube_warnings(cluster: &TestCluster, count: usize) -> BTreeMap<String, Warnings> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let list: Json = serde_json::from_str(&kubectl_ok(
            cluster,
            &["get", "validatingadmissionpolicies", "-o", "json"],
        ))
        .expect("a list");
        let mut out = BTreeMap::new();
        for p in list["items"].as_array().into_iter().flatten() {
            let checked = p["status"]["observedGeneration"] == p["metadata"]["generation"]
                && p["status"].get("typeChecking").is_some();
            if !checked {
                continue;
            }
            let warnings = p["status"]["typeChecking"]["expressionWarnings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|w| {
                    let text = w["warning"].as_str().unwrap_or_default();
                    (
                        w["fieldRef"].as_str().unwrap_or_default().to_string(),
                        without_type_numbers(text),
                    )
                })
                .collect();
            out.insert(
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                warnings,
            );
        }
        if out.len() == count {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {count} policies were type-checked",
            out.len()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// kube names a kind's types `KIND` + the nanoseconds of the clock
/// (`Deployment123456789.spec`); Interlock names them `KIND`.
pub(crate) fn without_type_numbers(text: &str) -> String {
    let kinds: Vec<&str> = text
        .split("Kind=")
        .skip(1)
        .filter_map(|rest| rest.split(':').next())
        .collect();
    let mut out = text.to_string();
    for kind in kinds {
        let mut result = String::new();
        let mut rest = out.as_str();
        while let Some(i) = rest.find(kind) {
            let after = &rest[i + kind.len()..];
            let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            result.push_str(&rest[..i + kind.len()]);
            rest = &after[digits..];
        }
        result.push_str(rest);
        out = result;
    }
    out
}

/// Interlock's type-check warnings per policy, with the CRDs `crds` known.
pub fn interlock_warnings<'a>(
    policies: &[Document],
    crds: impl IntoIterator<Item = &'a Json>,
) -> BTreeMap<String, Warnings> {
    let mut report = Report::default();
    let set = compile_policies(policies, &mut Inventory::new(), &mut report);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let mut schemas = openapi::builtin().clone();
    for crd in crds {
        schemas.add_crd(crd).expect("a CRD");
    }
    set.policies
        .iter()
        .map(|p| {
            let w = p
                .type_check_warnings(&schemas)
                .into_iter()
                .map(|w| (w.field_ref, w.warning))
                .collect();
            (p.name.clone(), w)
        })
        .collect()
}

#[test]
fn type_check_warnings_agree_with_kube_apiserver() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cluster = TestCluster::start_with(Options::default());
    let _logs = cluster.logs_on_panic();
    let _controller = StatusController::start(&cluster, dir.path());
    create_crds(&cluster);
    let policies = documents("policies.yaml");
    kubectl_ok(
        &cluster,
        &[
            "apply",
            "-f",
            &corpus("policies.yaml").display().to_string(),
        ],
    );
    let kube = kube_warnings(&cluster, policies.len());
    let crds = documents("crds.yaml");
    let ours = interlock_warnings(&policies, crds.iter().map(|d| &d.value));

    let mut report = String::new();
    let mut agree = 0;
    let (mut kube_total, mut warned) = (0, 0);
    for (name, theirs) in &kube {
        kube_total += theirs.len();
        warned += usize::from(!theirs.is_empty());
        let mine = ours.get(name).cloned().unwrap_or_default();
        if &mine == theirs {
            agree += 1;
            continue;
        }
        let _ = writeln!(report, "\n{name}:\n  kube-apiserver:");
        for (f, w) in theirs {
            let _ = writeln!(report, "    {f}: {}", w.replace('\n', "\n      "));
        }
        let _ = writeln!(report, "  interlock:");
        for (f, w) in &mine {
            let _ = writeln!(report, "    {f}: {}", w.replace('\n', "\n      "));
        }
    }
    let figure = format!(
        "type-check warnings: {agree}/{} policies agree ({warned} with warnings from kube-apiserver, {kube_total} warnings)",
        kube.len()
    );
    eprintln!("{report}");
    println!("{figure}");
    assert_eq!(agree, kube.len(), "{figure}");
}
