//! Differential test: MutatingAdmissionPolicies as kube-apiserver applies
//! them against `interlock check`, over every case of `tests/map-corpus`
//! (issue 33).
//!
//! kube-apiserver is the oracle. For each case:
//!
//! 1. `kubectl apply -f setup.yaml` (Namespaces, params, policies,
//!    bindings) on one real kube-apiserver, shared by all cases: each case
//!    lives in its own `map-NNN` Namespace and its policies select only it.
//! 2. A sentinel MutatingAdmissionPolicy and ValidatingAdmissionPolicy are
//!    created after every setup; once a dry-run probe shows both at work,
//!    kube-apiserver's informers hold everything created before them.
//! 3. Each document of `objects.yaml` is created with `kubectl create
//!    --dry-run=server -o json`: kube-apiserver answers with the object as
//!    it would store it (defaulted, mutated) or refuses it.
//! 4. The same document goes through `interlock check` (`check_documents_with`,
//!    the code behind the CLI, with `--show-mutations`): setup's policy
//!    documents as policies, its other documents in the inventory. The
//!    object as written and defaulted, with the reported patch applied, is
//!    what Interlock would store; a Deny finding is its refusal.
//! 5. Both must agree: refused by both with the same message, or stored by
//!    both and equal field by field once the fields the server sets
//!    (`uid`, `resourceVersion`, `creationTimestamp`, `managedFields`,
//!    `generation`, `status`) are taken out.
//!
//! The figure `MAP agreement: A/N cases (a/n objects)` is printed; a case
//! listed in `tests/map-corpus/known-differences.txt` must disagree (and is
//! counted apart), any other must agree. `MAP_DIFF_CASES=001,002` runs only
//! those cases.

use crate::support;

use interlock::check::{check_documents_with, Action, CheckOptions, ObjectRef, Report};
use interlock::manifest::{load_str, Document, Format, LoadOptions, Source};
use interlock::policy;
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::cluster::{Options, TestCluster};

/// The kubectl user of the test cluster.
const USER: &str = "admin";

struct Case {
    id: String,
    dir: PathBuf,
    policy_docs: Vec<Document>,
    context_docs: Vec<Document>,
    /// The policies that are MutatingAdmissionPolicies (their refusals
    /// are worded `policy 'P' with binding 'B' denied request: M`).
    mutating: BTreeSet<String>,
    objects: Vec<(String, Document)>,
    errors: Vec<String>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/map-corpus")
}

fn split_documents(text: &str) -> Vec<String> {
    text.split("\n---\n")
        .map(str::to_string)
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.starts_with('#'))
        })
        .collect()
}

fn load(path: &Path, errors: &mut Vec<String>) -> (String, Vec<Document>) {
    let text = fs::read_to_string(path).unwrap_or_else(|e| {
        errors.push(format!("cannot read {}: {e}", path.display()));
        String::new()
    });
    let opts = LoadOptions {
        reject_duplicate_objects: false,
        ..LoadOptions::default()
    };
    let loaded = load_str(Source::file(path), &text, Format::Yaml, &opts);
    errors.extend(loaded.errors.iter().map(|e| e.to_string()));
    (text, loaded.documents)
}

fn load_case(dir: &Path) -> Case {
    let mut errors = Vec::new();
    let (_, setup) = load(&dir.join("setup.yaml"), &mut errors);
    let (policy_docs, context_docs): (Vec<Document>, Vec<Document>) = setup
        .into_iter()
        .partition(|d| policy::is_policy_document(&d.value));
    let mutating = policy_docs
        .iter()
        .filter(|d| d.kind() == "MutatingAdmissionPolicy")
        .filter_map(|d| {
            d.value
                .pointer("/metadata/name")?
                .as_str()
                .map(str::to_string)
        })
        .collect();
    let (text, docs) = load(&dir.join("objects.yaml"), &mut errors);
    let texts = split_documents(&text);
    if texts.len() != docs.len() {
        errors.push(format!(
            "objects.yaml: {} documents split, {} loaded",
            texts.len(),
            docs.len()
        ));
    }
    Case {
        id: dir.file_name().unwrap().to_string_lossy().into_owned(),
        dir: dir.to_path_buf(),
        policy_docs,
        context_docs,
        mutating,
        objects: texts.into_iter().zip(docs).collect(),
        errors,
    }
}

fn load_corpus() -> Vec<Case> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(corpus_dir())
        .expect("read tests/map-corpus")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("setup.yaml").is_file())
        .collect();
    dirs.sort();
    if let Ok(f) = std::env::var("MAP_DIFF_CASES") {
        let prefixes: Vec<String> = f.split(',').map(|p| p.trim().to_string()).collect();
        dirs.retain(|d| {
            let name = d.file_name().unwrap().to_string_lossy();
            prefixes.iter().any(|p| name.starts_with(p.as_str()))
        });
    }
    dirs.iter().map(|d| load_case(d)).collect()
}

/// What one side does with an object.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Stored(Json),
    Refused(String),
    /// Not an admission answer (a setup or load error).
    Error(String),
}

/// The fields the server sets, taken out of a stored object.
fn without_server_fields(mut v: Json) -> Json {
    if let Some(meta) = v.get_mut("metadata").and_then(Json::as_object_mut) {
        for f in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            meta.remove(f);
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    v
}

/// The admission message of kubectl's error output.
fn refusal(stderr: &str) -> Option<String> {
    let at = ["ValidatingAdmissionPolicy '", "policy '"]
        .iter()
        .filter_map(|m| stderr.find(m))
        .min()?;
    Some(stderr[at..].trim_end().to_string())
}

fn kube_outcome(cluster: &TestCluster, text: &str) -> Outcome {
    let out = cluster.kubectl_stdin(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        text,
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return match refusal(&stderr) {
            Some(m) => Outcome::Refused(m),
            None => Outcome::Error(stderr),
        };
    }
    match serde_json::from_slice(&out.stdout) {
        Ok(v) => Outcome::Stored(without_server_fields(v)),
        Err(e) => Outcome::Error(format!("kubectl's output is not JSON: {e}")),
    }
}

fn interlock_outcome(case: &Case, doc: &Document) -> Outcome {
    let opts = CheckOptions {
        user: USER.to_string(),
        show_mutations: true,
        whole_cluster: true,
        ..Default::default()
    };
    let mut report = Report::default();
    check_documents_with(
        &case.policy_docs,
        &case.context_docs,
        std::slice::from_ref(doc),
        &opts,
        &mut report,
    );
    if !report.errors.is_empty() {
        let errors: Vec<String> = report.errors.iter().map(|e| e.to_string()).collect();
        return Outcome::Error(errors.join("\n"));
    }
    let me = ObjectRef::from_document(doc);
    if let Some(f) = report
        .results
        .iter()
        .find(|f| f.object == me && f.action == Action::Deny)
    {
        return Outcome::Refused(if case.mutating.contains(&f.policy) {
            f.message.clone()
        } else {
            format!(
                "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                f.policy,
                f.binding.as_deref().unwrap_or(""),
                f.message
            )
        });
    }
    let mut object = doc.value.clone();
    opts.as_admitted(&mut object);
    if let Some(m) = report.mutations.iter().find(|m| m.object == me) {
        let patch: json_patch::Patch = match serde_json::from_value(m.patch.clone()) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(format!("the reported patch does not parse: {e}")),
        };
        if let Err(e) = json_patch::patch(&mut object, &patch) {
            return Outcome::Error(format!("the reported patch does not apply: {e}"));
        }
    }
    Outcome::Stored(without_server_fields(object))
}

/// The first differences between two JSON values, as pointers.
fn differences(a: &Json, b: &Json, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Json::Null;
                let here = format!("{at}/{k}");
                differences(
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    &here,
                    out,
                );
            }
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(p, q, &format!("{at}/{i}"), out);
            }
        }
        _ if a != b => out.push(format!("{at}: kube-apiserver {a}, Interlock {b}")),
        _ => {}
    }
}

fn disagreement(kube: &Outcome, ours: &Outcome) -> Option<String> {
    match (kube, ours) {
        (Outcome::Stored(k), Outcome::Stored(o)) => {
            let mut diffs = Vec::new();
            differences(k, o, "", &mut diffs);
            (!diffs.is_empty())
                .then(|| format!("stored objects differ:\n    {}", diffs.join("\n    ")))
        }
        (Outcome::Refused(k), Outcome::Refused(o)) if k == o => None,
        _ => Some(format!(
            "kube-apiserver: {kube:?}\n    Interlock:      {ours:?}"
        )),
    }
}

const SENTINEL: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: map-diff-sentinel}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: map-diff-sentinel}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: map-diff-sentinel}}
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: \"Object{metadata: Object.metadata{labels: {'sentinel': 'mutated'}}}\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: map-diff-sentinel}
spec: {policyName: map-diff-sentinel}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: map-diff-sentinel}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: map-diff-sentinel}}
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
  validations:
  - {expression: 'false', message: sentinel secret}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: map-diff-sentinel}
spec: {policyName: map-diff-sentinel, validationActions: [Deny]}
";

const PROBE_CONFIGMAP: &str =
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"probe\",\"namespace\":\"map-diff-sentinel\"}}";
const PROBE_SECRET: &str =
    "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"probe\",\"namespace\":\"map-diff-sentinel\"}}";

fn wait_for_policies(cluster: &TestCluster, timeout: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], SENTINEL);
    if !out.status.success() {
        return Err(format!(
            "cannot create the sentinel: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut last = String::new();
    while start.elapsed() < timeout {
        let mutated = matches!(kube_outcome(cluster, PROBE_CONFIGMAP),
            Outcome::Stored(v) if v.pointer("/metadata/labels/sentinel") == Some(&Json::from("mutated")));
        let denied = matches!(kube_outcome(cluster, PROBE_SECRET), Outcome::Refused(m) if m.contains("sentinel secret"));
        if mutated && denied {
            return Ok(start.elapsed());
        }
        last = format!("mutated: {mutated}, denied: {denied}");
        std::thread::sleep(Duration::from_millis(300));
    }
    Err(format!(
        "the sentinel policies were not live after {timeout:?} ({last})"
    ))
}

fn known_differences() -> BTreeSet<String> {
    fs::read_to_string(corpus_dir().join("known-differences.txt"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn map_corpus_agrees_with_kube_apiserver() {
    let started = Instant::now();
    let cases = load_corpus();
    assert!(
        !cases.is_empty(),
        "no cases under {}",
        corpus_dir().display()
    );
    let cluster = TestCluster::start_with(Options {
        controller_manager: false,
        ..Options::default()
    });
    let mut setup_errors = Vec::new();
    for case in &cases {
        let setup = case.dir.join("setup.yaml").display().to_string();
        let out = cluster.kubectl(&["apply", "-f", &setup]);
        if !out.status.success() {
            setup_errors.push(format!(
                "{}: {}",
                case.id,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        setup_errors.is_empty(),
        "setups refused:\n{}",
        setup_errors.join("\n")
    );
    match wait_for_policies(&cluster, Duration::from_secs(60)) {
        Ok(took) => eprintln!("policies live {took:.1?} after the last setup"),
        Err(e) => panic!("{e}"),
    }
    let known = known_differences();
    let (mut agreed_cases, mut objects, mut agreed_objects) = (0, 0, 0);
    let mut failures = Vec::new();
    let mut known_seen = BTreeSet::new();
    for case in &cases {
        let mut case_ok = case.errors.is_empty();
        for e in &case.errors {
            failures.push(format!("{}: {e}", case.id));
        }
        for (text, doc) in &case.objects {
            objects += 1;
            let kube = kube_outcome(&cluster, text);
            let ours = interlock_outcome(case, doc);
            match disagreement(&kube, &ours) {
                None => agreed_objects += 1,
                Some(d) => {
                    case_ok = false;
                    let line = format!("{} {}: {d}", case.id, doc.display_name());
                    eprintln!("{line}");
                    if !known.contains(&case.id) {
                        failures.push(line);
                    }
                }
            }
        }
        if case_ok {
            agreed_cases += 1;
        }
        if known.contains(&case.id) {
            known_seen.insert((case.id.clone(), case_ok));
        }
    }
    eprintln!(
        "MAP agreement: {agreed_cases}/{} cases ({agreed_objects}/{objects} objects) agree; {} known differences; {:.1?}",
        cases.len(),
        known_seen.len(),
        started.elapsed()
    );
    for (id, ok) in &known_seen {
        if *ok {
            failures.push(format!(
                "{id} is listed in known-differences.txt but agrees: take it out"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
