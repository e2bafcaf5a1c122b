//! Generated policies for the type-check warnings: random field paths
//! through the schemas of built-in kinds (with typos), compared with
//! literals of every type or passed to functions, each the validation of a
//! policy of its own. Interlock's warnings must equal the ones
//! kube-controller-manager's status controller writes into the policies'
//! status (as `celwarn_differential`, but with expressions nobody wrote).
//!
//! `CELWARN_FUZZ_COUNT` (default 300) and `CELWARN_FUZZ_SEED` (default 1)
//! set how many and which.

use crate::celwarn_differential::without_type_numbers;
use crate::support;
use crate::vap_differential::StatusController;
use interlock::cel::Ty;
use interlock::inventory::Source as ObjectSource;
use interlock::k8s::openapi::{self, Gvk};
use interlock::policy::PolicySet;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use support::cluster::{Options, TestCluster};
use support::rng::Rng;

/// (group, version, resource, kind) of the kinds the policies match.
const KINDS: &[(&str, &str, &str, &str)] = &[
    ("apps", "v1", "deployments", "Deployment"),
    ("", "v1", "pods", "Pod"),
    ("", "v1", "services", "Service"),
    ("", "v1", "secrets", "Secret"),
    ("", "v1", "configmaps", "ConfigMap"),
    ("batch", "v1", "cronjobs", "CronJob"),
    ("networking.k8s.io", "v1", "ingresses", "Ingress"),
    (
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
    ),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
    ),
];

const LITERALS: &[&str] = &[
    "1",
    "'a'",
    "true",
    "1.5",
    "2u",
    "b'x'",
    "null",
    "[]",
    "{}",
    "duration('1s')",
    "timestamp('2024-01-01T00:00:00Z')",
    "['a']",
    "{'a': 1}",
];

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A random path from `object` down `t`, and the type it ends at.
fn path(rng: &mut Rng, root: &Ty) -> (String, Ty) {
    let mut expr = String::from(if rng.below(5) == 0 {
        "oldObject"
    } else {
        "object"
    });
    let mut t = root.clone();
    for _ in 0..(2 + rng.below(6)) {
        t = match t {
            Ty::Struct(s) if !s.fields.is_empty() => {
                let (name, ft) = &s.fields[rng.below(s.fields.len())];
                if rng.below(10) == 0 {
                    let _ = write!(expr, ".{name}x");
                    return (expr, Ty::Dyn);
                }
                let _ = write!(expr, ".{name}");
                ft.clone()
            }
            Ty::List(e) if rng.below(3) > 0 => {
                expr.push_str("[0]");
                *e
            }
            Ty::Map(_, v) if rng.below(3) > 0 => {
                expr.push_str(if rng.below(2) == 0 { "['k']" } else { ".k" });
                *v
            }
            other => return (expr, other),
        };
    }
    (expr, t)
}

fn expression(rng: &mut Rng, root: &Ty) -> String {
    let (p, t) = path(rng, root);
    let lit = LITERALS[rng.below(LITERALS.len())];
    match rng.below(12) {
        0..=2 => format!("{p} == {lit}"),
        9 => {
            let (q, _) = path(rng, root);
            format!("[{p}, {q}].size() > 0")
        }
        10 => {
            let clause = ["%d", "%s", "%f", "%x", "%o", "%b", "%e"][rng.below(7)];
            format!("'{clause}'.format([{p}]) != ''")
        }
        11 => match &t {
            Ty::List(e) => match &**e {
                Ty::Struct(s) if !s.fields.is_empty() => {
                    let (f, _) = &s.fields[rng.below(s.fields.len())];
                    format!("{p}.all(x, x.{f} == {lit})")
                }
                _ => format!("{p}.all(x, x == {lit})"),
            },
            _ => format!("{p} != {lit}"),
        },
        3 => format!("{p} < {lit}"),
        4 => format!("{p}.size() > 0"),
        5 if matches!(t, Ty::List(_) | Ty::Map(..)) => {
            format!("{p}.exists(x, x == {lit})")
        }
        5 | 6 if p.contains('.') && !p.ends_with(']') => format!("has({p})"),
        7 => format!("{p}.startsWith('a')"),
        _ => format!("string({p}) == 'a' && int({p}) > 0"),
    }
}

fn policy(name: &str, kind: (&str, &str, &str, &str), expression: &str) -> Json {
    let (g, v, r, _) = kind;
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [g], "apiVersions": [v],
                  "resources": [r], "operations": ["CREATE"]}]},
                 "validations": [{"expression": expression}]}})
}

/// Whether Interlock loads the policy (kube-apiserver then creates it:
/// `cel_creation_e2e` compares creation).
fn loads(doc: &Json) -> Option<PolicySet> {
    let source = ObjectSource {
        file: "fuzz".into(),
        line: 1,
    };
    let (set, errors) = PolicySet::compile(&[(doc.clone(), source)]);
    errors.is_empty().then_some(set)
}

fn kube_warnings(
    cluster: &TestCluster,
    names: &[String],
) -> BTreeMap<String, Vec<(String, String)>> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let out = cluster.kubectl(&["get", "validatingadmissionpolicies", "-o", "json"]);
        let list: Json = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
        let mut found = BTreeMap::new();
        for p in list["items"].as_array().into_iter().flatten() {
            let checked = p["status"]["observedGeneration"] == p["metadata"]["generation"]
                && p["status"].get("typeChecking").is_some();
            if !checked {
                continue;
            }
            let w = p["status"]["typeChecking"]["expressionWarnings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|w| {
                    (
                        w["fieldRef"].as_str().unwrap_or_default().to_string(),
                        without_type_numbers(w["warning"].as_str().unwrap_or_default()),
                    )
                })
                .collect();
            found.insert(
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                w,
            );
        }
        if names.iter().all(|n| found.contains_key(n)) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "the status controller did not check every policy"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn generated_policies_warn_as_kube_apiserver() {
    let count = env_number("CELWARN_FUZZ_COUNT", 300) as usize;
    let mut rng = Rng(env_number("CELWARN_FUZZ_SEED", 1));
    let schemas = openapi::builtin();
    let mut docs = Vec::new();
    let mut ours = BTreeMap::new();
    while docs.len() < count {
        let kind = KINDS[rng.below(KINDS.len())];
        let gvk = Gvk {
            group: kind.0.into(),
            version: kind.1.into(),
            kind: kind.3.into(),
        };
        let root = schemas
            .resource_type(&gvk, kind.3)
            .expect("a built-in kind");
        let expr = expression(&mut rng, &root);
        let name = format!("vap-fuzz-{:04}", docs.len());
        let doc = policy(&name, kind, &expr);
        let Some(set) = loads(&doc) else { continue };
        let w: Vec<(String, String)> = set.policies[0]
            .type_check_warnings(schemas)
            .into_iter()
            .map(|w| (w.field_ref, w.warning))
            .collect();
        ours.insert(name, (expr, w));
        docs.push(doc);
    }

    let dir = tempfile::tempdir().expect("a temporary directory");
    let cluster = TestCluster::start_with(Options::default());
    let _logs = cluster.logs_on_panic();
    let _controller = StatusController::start(&cluster, dir.path());
    let stream: String = docs.iter().map(|d| format!("---\n{d}\n")).collect();
    let out = cluster.kubectl_stdin(&["create", "-f", "-"], &stream);
    let refused = String::from_utf8_lossy(&out.stderr).into_owned();
    let names: Vec<String> = ours
        .keys()
        .filter(|n| !refused.contains(&format!("\"{n}\"")))
        .cloned()
        .collect();
    let kube = kube_warnings(&cluster, &names);

    let mut report = String::new();
    let (mut agree, mut warned) = (0, 0);
    for name in &names {
        let (expr, mine) = &ours[name];
        let theirs = &kube[name];
        warned += usize::from(!theirs.is_empty());
        if mine == theirs {
            agree += 1;
            continue;
        }
        let _ = writeln!(
            report,
            "\n{name}: {expr}\n  kube-apiserver: {theirs:?}\n  interlock:      {mine:?}"
        );
    }
    let figure = format!(
        "generated type-check policies: {agree}/{} agree ({warned} with warnings; {} refused at creation by kube-apiserver)",
        names.len(),
        ours.len() - names.len()
    );
    eprintln!("{report}");
    if names.len() < ours.len() {
        eprintln!("kube-apiserver refused: {refused}");
    }
    println!("{figure}");
    assert!(
        agree == names.len() && names.len() == ours.len(),
        "{figure}"
    );
}
