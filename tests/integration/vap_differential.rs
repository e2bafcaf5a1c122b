//! Differential test: kube-apiserver's ValidatingAdmissionPolicy decisions
//! against Interlock's, over every case of `tests/vap-corpus` (issue 4).
//!
//! kube-apiserver is the oracle. For each case:
//!
//! 1. `kubectl apply -f setup.yaml` (Namespaces, params, policies, bindings)
//!    on one real kube-apiserver + etcd, shared by all cases (each case lives
//!    in its own `vap-NNN-*` Namespaces and its policies select only them).
//! 2. After every setup, a sentinel pair of policies (params from a ConfigMap
//!    and from a Secret) is created last; once a dry-run probe gets both
//!    sentinel warnings, kube-apiserver's policy, binding and param informers
//!    have caught up with everything created before them, so every case's
//!    policies are live. No fixed sleep.
//! 3. Each document of `objects.yaml`, in order, is applied with a real
//!    `kubectl apply -f -` (not a dry run: an object given again is then an
//!    UPDATE with the stored version as `oldObject`, as cases 032-034 need).
//!    We record: denied or admitted, the reason and the denial message, the
//!    `Warning:` lines, and from kube-apiserver's audit log (the cluster runs
//!    with `--audit-log-path`) the `validation_failure` entries of `Audit`
//!    bindings and the policies' `auditAnnotations`.
//! 4. Offline, the same documents go to Interlock: the policy documents of
//!    setup.yaml as policies, its other documents (Namespaces, param objects)
//!    plus the objects kube-apiserver admitted so far as resources. A first
//!    application is a CREATE and goes through `interlock check`
//!    ([`check_documents`], the code behind the CLI) as the kubectl user
//!    `admin`; a repeated one is an UPDATE with the previous version as
//!    `oldObject`, which `check` does not model, so it goes to the policy
//!    engine (`PolicySet::evaluate`) directly, as `serve` would. Audit
//!    annotations come from the engine for both.
//! 5. Per application, the answers must be equal: admitted vs denied; for a
//!    denial the reason, policy, binding and message (kube-apiserver reports
//!    only the first denying validation, so it must be the first Deny of
//!    that policy and binding on our side); the set of policy warnings; the
//!    set of audit entries (`Audit` failures and audit annotations).
//!
//! 6. Each policy's type-check warnings (`status.typeChecking`, written by
//!    kube-controller-manager's status controller) must equal Interlock's
//!    (`CompiledPolicy::type_check_warnings`), once the number kube puts
//!    in its type names is taken out.
//!
//! The test prints every disagreement with both answers and the figure
//! `VAP agreement: A/N cases (a/n objects) agree; type-check warnings of
//! p/q policies agree`. It fails on any disagreement, including a case
//! whose policies Interlock cannot compile.
//!
//! Choices:
//! - **Audit is compared, not assumed.** `Audit` results never reach
//!   kubectl, so the cluster writes an audit log (level Metadata for the admin
//!   user's writes) and each application's `ResponseComplete` event is matched
//!   by resource, namespace, name and order. Audit entries must be equal on
//!   both sides like warnings.
//! - **One cluster of its own** ([`TestCluster::start_with`] rather than
//!   `TestCluster::shared()`): it needs the audit flags, and a
//!   kube-controller-manager running only the
//!   `validatingadmissionpolicy-status-controller`, which type-checks the
//!   policies into their status. Cases share it, isolated by namespace.
//! - **The user.** kubectl runs as `admin` (groups `system:masters`,
//!   `system:authenticated`); Interlock checks as `admin` with the group
//!   `system:authenticated`. No case reads `request.userInfo` or
//!   `authorizer`; one that does must not depend on the groups.
//! - Warnings that do not come from a policy (kube-apiserver's deprecation
//!   warning for `spec.externalIPs`) are not compared.
//!
//! `VAP_DIFF_CASES=018,019` runs only the cases whose directory starts with
//! one of the given prefixes (for working on the engine; the figure says so).

use crate::support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::celwarn_differential::{interlock_warnings, without_type_numbers};
use interlock::check::run::compile_policies;
use interlock::check::{self, check_documents, CheckOptions, ObjectRef, Report};
use interlock::inventory::{Inventory, ObjectKey};
use interlock::manifest::{load_str, Document, Format, LoadOptions, Source};
use interlock::policy::{self, resources, Action, Request};
use serde_json::Value as Json;
use support::cluster::{Options, TestCluster};

/// The kubectl user of the test cluster (client certificate CN).
const USER: &str = "admin";

/// kubectl processes running at once (the machine has 2 cores).
const WORKERS: usize = 2;

/// The key of the audit annotation that lists failed `Audit` validations.
const VALIDATION_FAILURE: &str = "validation.policy.admission.k8s.io/validation_failure";

// ---------------------------------------------------------------------------
// The corpus
// ---------------------------------------------------------------------------

struct Case {
    /// Directory name, e.g. `001-static-message`.
    id: String,
    dir: PathBuf,
    policy_docs: Vec<Document>,
    resource_docs: Vec<Document>,
    objects: Vec<CorpusObject>,
    /// Problems reading the case with Interlock's loader.
    load_errors: Vec<String>,
}

struct CorpusObject {
    /// The document's text, as kubectl reads it.
    text: String,
    doc: Document,
    key: ObjectKey,
    resource: String,
    namespaced: bool,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vap-corpus")
}

/// The documents of a YAML stream as text, split on `---` lines; documents
/// holding only comments and blank lines are left out.
fn split_documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else if let Some(last) = docs.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    docs.into_iter()
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .collect()
}

fn load_case(dir: &Path) -> Case {
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut load_errors = Vec::new();
    let read = |name: &str, errors: &mut Vec<String>| -> (PathBuf, String) {
        let path = dir.join(name);
        let text = fs::read_to_string(&path).unwrap_or_else(|e| {
            errors.push(format!("cannot read {}: {e}", path.display()));
            String::new()
        });
        (path, text)
    };
    let (setup_path, setup_text) = read("setup.yaml", &mut load_errors);
    let (objects_path, objects_text) = read("objects.yaml", &mut load_errors);

    let setup = load_str(
        Source::file(&setup_path),
        &setup_text,
        Format::Yaml,
        &LoadOptions::default(),
    );
    load_errors.extend(setup.errors.iter().map(|e| e.to_string()));
    let (policy_docs, resource_docs): (Vec<Document>, Vec<Document>) = setup
        .documents
        .into_iter()
        .partition(|d| policy::is_policy_document(&d.value));

    // objects.yaml gives some objects several times (UPDATEs).
    let loaded = load_str(
        Source::file(&objects_path),
        &objects_text,
        Format::Yaml,
        &LoadOptions {
            reject_duplicate_objects: false,
            ..LoadOptions::default()
        },
    );
    load_errors.extend(loaded.errors.iter().map(|e| e.to_string()));
    let texts = split_documents(&objects_text);
    if texts.len() != loaded.documents.len() {
        load_errors.push(format!(
            "{}: {} documents split on `---` lines but {} loaded",
            objects_path.display(),
            texts.len(),
            loaded.documents.len()
        ));
    }
    let mut objects = Vec::new();
    for (text, doc) in texts.into_iter().zip(loaded.documents) {
        let Some(key) = ObjectKey::of(&doc.value) else {
            load_errors.push(format!("{}: an object without a name", doc.display_name()));
            continue;
        };
        let resource = resources::resource_of(&key.gk.group, &key.gk.kind);
        let namespaced = resources::is_namespaced(&key.gk.group, &key.gk.kind).unwrap_or(true);
        objects.push(CorpusObject {
            text,
            doc,
            key,
            resource,
            namespaced,
        });
    }
    Case {
        id,
        dir: dir.to_path_buf(),
        policy_docs,
        resource_docs,
        objects,
        load_errors,
    }
}

fn load_corpus() -> (Vec<Case>, Option<String>) {
    let mut dirs: Vec<PathBuf> = fs::read_dir(corpus_dir())
        .expect("read tests/vap-corpus")
        .filter_map(Result::ok)
        .map(|e| e.path())
        // Object cases have a setup.yaml; `creation/` is the policy
        // creation corpus of tests/integration/cel_creation_e2e.rs.
        .filter(|p| p.join("setup.yaml").is_file())
        .collect();
    dirs.sort();
    let filter = std::env::var("VAP_DIFF_CASES")
        .ok()
        .filter(|f| !f.trim().is_empty());
    if let Some(f) = &filter {
        let prefixes: Vec<&str> = f.split(',').map(str::trim).collect();
        dirs.retain(|d| {
            let name = d.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| prefixes.iter().any(|p| n.starts_with(p)))
        });
    }
    (dirs.iter().map(|d| load_case(d)).collect(), filter)
}

// ---------------------------------------------------------------------------
// Answers
// ---------------------------------------------------------------------------

/// A denial: the HTTP reason and what follows `ValidatingAdmissionPolicy '`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Denial {
    reason: String,
    policy: String,
    binding: String,
    message: String,
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "denied ({}): ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
            self.reason, self.policy, self.binding, self.message
        )
    }
}

/// One side's answer to one application.
#[derive(Debug, Clone, Default)]
struct Answer {
    /// Denials, in order. kube-apiserver reports one; Interlock all of them.
    denials: Vec<Denial>,
    /// A failure that is not a policy decision (kubectl or loading errors).
    error: Option<String>,
    /// `Validation failed for ValidatingAdmissionPolicy ...` warnings.
    warnings: BTreeSet<String>,
    /// `validation_failure P/B: M` and `annotation P/key=value` entries.
    audit: BTreeSet<String>,
}

impl Answer {
    fn render(&self) -> String {
        let mut s = String::new();
        if let Some(e) = &self.error {
            let _ = writeln!(s, "      error: {e}");
        }
        if self.denials.is_empty() && self.error.is_none() {
            let _ = writeln!(s, "      admitted");
        }
        for d in &self.denials {
            let _ = writeln!(s, "      {d}");
        }
        for w in &self.warnings {
            let _ = writeln!(s, "      warning: {w}");
        }
        for a in &self.audit {
            let _ = writeln!(s, "      audit: {a}");
        }
        s
    }
}

fn warning_text(policy: &str, binding: &str, message: &str) -> String {
    format!("Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{binding}': {message}")
}

fn audit_failure_text(policy: &str, binding: &str, message: &str) -> String {
    format!("validation_failure {policy}/{binding}: {message}")
}

/// Why two answers differ, or `None` when they agree.
fn disagreement(kube: &Answer, ours: &Answer) -> Option<String> {
    if let Some(e) = &kube.error {
        return Some(format!(
            "kube-apiserver did not give a policy decision: {e}"
        ));
    }
    if let Some(e) = &ours.error {
        return Some(format!("Interlock did not give a decision: {e}"));
    }
    let mut why = Vec::new();
    match (kube.denials.first(), ours.denials.is_empty()) {
        (None, false) => why.push("Interlock denies, kube-apiserver admits".to_string()),
        (Some(_), true) => why.push("kube-apiserver denies, Interlock admits".to_string()),
        (Some(k), false) => {
            // kube-apiserver reports the first denial of the first denying
            // policy it evaluated (its order is not specified).
            let same_binding = ours
                .denials
                .iter()
                .find(|d| d.policy == k.policy && d.binding == k.binding);
            match same_binding {
                None => why.push(format!(
                    "kube-apiserver denies through {}/{}, Interlock does not",
                    k.policy, k.binding
                )),
                Some(d) if d != k => why.push("the denials differ".to_string()),
                Some(_) => {}
            }
        }
        (None, true) => {}
    }
    if kube.warnings != ours.warnings {
        why.push("the warnings differ".to_string());
    }
    if kube.audit != ours.audit {
        why.push("the audit entries differ".to_string());
    }
    if why.is_empty() {
        None
    } else {
        Some(why.join("; "))
    }
}

// ---------------------------------------------------------------------------
// kube-apiserver
// ---------------------------------------------------------------------------

const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: [\"admin\"]
    verbs: [\"create\", \"update\", \"patch\"]
  - level: None
";

/// Created after every setup: when a probe gets both warnings, the policy,
/// binding and param (ConfigMap, Secret) informers of kube-apiserver have
/// seen everything created before.
const SENTINEL: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: vap-diff-sentinel
  labels: {kubernetes.io/metadata.name: vap-diff-sentinel, vap.interlock.dev/case: sentinel}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: vap-diff-sentinel-param, namespace: vap-diff-sentinel}
data: {token: configmap}
---
apiVersion: v1
kind: Secret
metadata: {name: vap-diff-sentinel-param, namespace: vap-diff-sentinel}
type: Opaque
data: {token: c2VjcmV0}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: vap-diff-sentinel-configmap}
spec:
  failurePolicy: Ignore
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    namespaceSelector: {matchLabels: {vap.interlock.dev/case: sentinel}}
    resourceRules:
      - {apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}
  validations:
    - {expression: 'false', messageExpression: \"'sentinel ' + params.data.token\"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: vap-diff-sentinel-configmap}
spec:
  policyName: vap-diff-sentinel-configmap
  validationActions: [Warn]
  paramRef: {name: vap-diff-sentinel-param, namespace: vap-diff-sentinel, parameterNotFoundAction: Allow}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: vap-diff-sentinel-secret}
spec:
  failurePolicy: Ignore
  paramKind: {apiVersion: v1, kind: Secret}
  matchConstraints:
    namespaceSelector: {matchLabels: {vap.interlock.dev/case: sentinel}}
    resourceRules:
      - {apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}
  validations:
    - {expression: 'false', messageExpression: \"'sentinel ' + params.data.token\"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: vap-diff-sentinel-secret}
spec:
  policyName: vap-diff-sentinel-secret
  validationActions: [Warn]
  paramRef: {name: vap-diff-sentinel-param, namespace: vap-diff-sentinel, parameterNotFoundAction: Allow}
";

const SENTINEL_PROBE: &str = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: probe, namespace: vap-diff-sentinel}
";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Waits until the sentinel policies answer with their params.
fn wait_for_policies(cluster: &TestCluster, timeout: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], SENTINEL);
    if !out.status.success() {
        return Err(format!(
            "cannot create the sentinel policies: {}",
            text(&out.stderr)
        ));
    }
    let mut last = String::new();
    while start.elapsed() < timeout {
        let out = cluster.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], SENTINEL_PROBE);
        last = text(&out.stderr);
        if last.contains("sentinel configmap") && last.contains("sentinel c2VjcmV0") {
            return Ok(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!(
        "the sentinel policies were not live after {timeout:?}; the last probe said: {last}"
    ))
}

/// A policy's type-check warnings: (fieldRef, warning).
type TypeWarnings = Vec<(String, String)>;

/// kube-apiserver's type-check warnings per policy (status.typeChecking,
/// the number in its type names taken out), once the type-checking
/// controller has looked at every policy (or the deadline passed: then the
/// second value lists the policies not checked).
fn type_check_warnings(
    cluster: &TestCluster,
    timeout: Duration,
) -> (BTreeMap<String, TypeWarnings>, Vec<String>) {
    let start = Instant::now();
    loop {
        let out = cluster.kubectl(&["get", "validatingadmissionpolicies", "-o", "json"]);
        let list: Json = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
        let mut warnings = BTreeMap::new();
        let mut pending = Vec::new();
        for p in list["items"].as_array().into_iter().flatten() {
            let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
            if !name.starts_with("vap-") || name.starts_with("vap-diff-") {
                continue;
            }
            let checked = p["status"]["observedGeneration"] == p["metadata"]["generation"]
                && p["status"].get("typeChecking").is_some();
            if !checked {
                pending.push(name);
                continue;
            }
            let list: TypeWarnings = p["status"]["typeChecking"]["expressionWarnings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|w| {
                    (
                        w["fieldRef"].as_str().unwrap_or("?").to_string(),
                        without_type_numbers(w["warning"].as_str().unwrap_or("?")),
                    )
                })
                .collect();
            warnings.insert(name, list);
        }
        if pending.is_empty() || start.elapsed() > timeout {
            return (warnings, pending);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Interlock's type-check warnings for a case's policies, with the CRDs of
/// its setup known.
fn interlock_type_warnings(case: &Case) -> BTreeMap<String, TypeWarnings> {
    let crds = case
        .resource_docs
        .iter()
        .filter(|d| d.value["kind"] == "CustomResourceDefinition")
        .map(|d| &d.value);
    interlock_warnings(&case.policy_docs, crds)
}

/// kube-controller-manager running only the controller that type-checks
/// ValidatingAdmissionPolicies and writes `status.typeChecking`; stopped on
/// drop, and with the test process.
pub(crate) struct StatusController {
    child: Child,
}

impl StatusController {
    pub(crate) fn start(cluster: &TestCluster, dir: &Path) -> StatusController {
        let log_path = dir.join("kube-controller-manager.log");
        let log = File::create(&log_path).expect("create the controller-manager log");
        let err = log.try_clone().expect("clone the log file");
        let mut cmd = Command::new(cluster.bin("kube-controller-manager"));
        cmd.arg(format!("--kubeconfig={}", cluster.kubeconfig().display()))
            .args([
                "--controllers=validatingadmissionpolicy-status-controller",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                "--secure-port=0",
            ])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill
        // the child when this (test) thread exits.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start kube-controller-manager: {e}"));
        StatusController { child }
    }
}

impl Drop for StatusController {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What kubectl said for one application.
struct Applied {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// kube-apiserver's answer from kubectl's output (audit entries are added
/// later from the audit log).
fn kube_answer(applied: &Applied) -> Answer {
    let mut answer = Answer::default();
    for line in applied.stderr.lines() {
        if let Some(w) = line.strip_prefix("Warning: ") {
            // Warnings that do not come from a policy (deprecations) are not
            // compared.
            if w.starts_with("Validation failed for ValidatingAdmissionPolicy '") {
                answer.warnings.insert(w.trim().to_string());
            }
        }
    }
    if applied.ok {
        return answer;
    }
    let errors: Vec<&str> = applied
        .stderr
        .lines()
        .filter(|l| !l.starts_with("Warning: "))
        .collect();
    let error = errors.join("\n");
    match parse_denial(&error) {
        Some(d) => answer.denials.push(d),
        None => answer.error = Some(error),
    }
    answer
}

/// `Error from server (Forbidden): ... ValidatingAdmissionPolicy 'P' with
/// binding 'B' denied request: M`.
fn parse_denial(error: &str) -> Option<Denial> {
    // kubectl prints an Invalid status as `The configmaps "x" is invalid: `,
    // the others as `Error from server (Reason): `.
    let reason = match error.split_once("Error from server (") {
        Some((_, rest)) => rest.split_once(')')?.0.to_string(),
        None if error.contains("\" is invalid: ") => "Invalid".to_string(),
        None => return None,
    };
    let rest = error.split_once("ValidatingAdmissionPolicy '")?.1;
    let (policy, rest) = rest.split_once("' with binding '")?;
    let (binding, message) = rest.split_once("' denied request: ")?;
    Some(Denial {
        reason,
        policy: policy.to_string(),
        binding: binding.to_string(),
        message: message.trim_end().to_string(),
    })
}

/// One audit event of a write by the admin user.
struct AuditEvent {
    entries: BTreeSet<String>,
}

/// The audit events of writes, by (resource, namespace, name), in log order.
fn read_audit_log(path: &Path) -> HashMap<(String, String, String), Vec<AuditEvent>> {
    let mut out: HashMap<_, Vec<AuditEvent>> = HashMap::new();
    let Ok(log) = fs::read_to_string(path) else {
        return out;
    };
    for line in log.lines() {
        let Ok(e) = serde_json::from_str::<Json>(line) else {
            continue;
        };
        if e["stage"] != "ResponseComplete" || e["user"]["username"] != USER {
            continue;
        }
        if !matches!(e["verb"].as_str(), Some("create" | "update" | "patch")) {
            continue;
        }
        if e["objectRef"]["subresource"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
        {
            continue;
        }
        let get = |k: &str| e["objectRef"][k].as_str().unwrap_or("").to_string();
        let resource = get("resource");
        let namespace = if resource == "namespaces" {
            String::new()
        } else {
            get("namespace")
        };
        let mut entries = BTreeSet::new();
        if let Some(annotations) = e["annotations"].as_object() {
            for (k, v) in annotations {
                let v = v.as_str().unwrap_or("");
                if k == VALIDATION_FAILURE {
                    let failures: Json = serde_json::from_str(v).unwrap_or(Json::Null);
                    for f in failures.as_array().into_iter().flatten() {
                        entries.insert(audit_failure_text(
                            f["policy"].as_str().unwrap_or("?"),
                            f["binding"].as_str().unwrap_or("?"),
                            f["message"].as_str().unwrap_or("?"),
                        ));
                    }
                } else if k.starts_with("vap-") {
                    entries.insert(format!("annotation {k}={v}"));
                }
            }
        }
        out.entry((resource, namespace, get("name")))
            .or_default()
            .push(AuditEvent { entries });
    }
    out
}

// ---------------------------------------------------------------------------
// Interlock
// ---------------------------------------------------------------------------

/// Interlock's answer to one application. `existing` are the objects of the
/// case that kube-apiserver holds before it (as written), `old` the stored
/// version of this object for an UPDATE.
fn interlock_answer(
    case: &Case,
    object: &CorpusObject,
    existing: &[Document],
    old: Option<&Json>,
) -> Answer {
    let mut answer = Answer::default();
    if !case_errors(case).is_empty() {
        answer.error = Some("Interlock cannot load this case (see its errors above)".into());
        return answer;
    }
    let mut resources: Vec<Document> = case.resource_docs.clone();
    resources.extend(existing.iter().cloned());

    // Verdicts: a CREATE through `interlock check`, an UPDATE through the engine.
    let (verdicts, annotations, errors) = match old {
        None => {
            let mut inputs = resources.clone();
            inputs.push(object.doc.clone());
            let opts = CheckOptions {
                policies: vec![],
                inputs: vec![],
                user: USER.to_string(),
                record_evaluated: false,
                whole_objects: false,
                ..Default::default()
            };
            let mut report = Report::default();
            check_documents(&case.policy_docs, &inputs, &opts, &mut report);
            let me = ObjectRef::from_document(&object.doc);
            let verdicts: Vec<(Action, String, String, String, String)> = report
                .results
                .iter()
                .filter(|f| f.object == me)
                .map(|f| {
                    let action = match f.action {
                        check::Action::Deny => Action::Deny,
                        check::Action::Warn => Action::Warn,
                        check::Action::Audit => Action::Audit,
                    };
                    (
                        action,
                        f.policy.clone(),
                        f.binding.clone().unwrap_or_default(),
                        f.message.clone(),
                        f.reason.clone().unwrap_or_default(),
                    )
                })
                .collect();
            let (_, annotations, _) = engine(case, &resources, &object.doc.value, None);
            let errors: Vec<String> = report.errors.iter().map(|e| e.to_string()).collect();
            (verdicts, annotations, errors)
        }
        Some(old) => engine(case, &resources, &object.doc.value, Some(old)),
    };
    if !errors.is_empty() {
        answer.error = Some(errors.join("\n"));
        return answer;
    }
    for (action, policy, binding, message, reason) in verdicts {
        match action {
            Action::Deny => answer.denials.push(Denial {
                reason,
                policy,
                binding,
                message,
            }),
            Action::Warn => {
                answer
                    .warnings
                    .insert(warning_text(&policy, &binding, &message));
            }
            Action::Audit => {
                answer
                    .audit
                    .insert(audit_failure_text(&policy, &binding, &message));
            }
        }
    }
    for (k, v) in annotations {
        answer.audit.insert(format!("annotation {k}={v}"));
    }
    answer
}

type Verdicts = Vec<(Action, String, String, String, String)>;

/// Why Interlock cannot load a case: unreadable files, policies that do not
/// compile, bindings without their policy.
fn case_errors(case: &Case) -> Vec<String> {
    let mut errors = case.load_errors.clone();
    let mut report = Report::default();
    compile_policies(&case.policy_docs, &mut Inventory::new(), &mut report);
    errors.extend(report.errors.iter().map(|e| e.to_string()));
    errors
}

/// The policy engine on one request: a CREATE, or an UPDATE from `old`.
fn engine(
    case: &Case,
    resources: &[Document],
    object: &Json,
    old: Option<&Json>,
) -> (Verdicts, Vec<(String, String)>, Vec<String>) {
    let mut inventory = Inventory::new();
    let mut report = Report::default();
    let set = compile_policies(&case.policy_docs, &mut inventory, &mut report);
    let mut errors: Vec<String> = report.errors.iter().map(|e| e.to_string()).collect();
    for d in resources {
        if let Err(e) = inventory.upsert(&d.value, None) {
            errors.push(format!("{}: {e}", d.display_name()));
        }
    }
    let Some(mut req) = Request::create(object, USER) else {
        errors.push("not a Kubernetes object".into());
        return (vec![], vec![], errors);
    };
    if let Some(old) = old {
        req.operation = policy::Operation::Update;
        req.old_object = policy::OldObject::Json(old);
    }
    let o = set.evaluate(&req, &inventory);
    let (verdicts, annotations) = (o.verdicts, o.annotations);
    let verdicts = verdicts
        .into_iter()
        .map(|v| {
            (
                v.action,
                v.policy,
                v.binding.unwrap_or_default(),
                v.message,
                v.reason.unwrap_or_default(),
            )
        })
        .collect();
    (verdicts, annotations, errors)
}

// ---------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------

/// What happened to one case in the cluster.
#[derive(Default)]
struct CaseRun {
    setup_error: Option<String>,
    /// Per object of objects.yaml.
    applied: Vec<Applied>,
}

#[test]
fn vap_corpus_agrees_with_kube_apiserver() {
    let started = Instant::now();
    let (cases, filter) = load_corpus();
    assert!(
        !cases.is_empty(),
        "no corpus cases under {}",
        corpus_dir().display()
    );

    let audit_dir = tempfile::tempdir().expect("temporary directory");
    let audit_policy = audit_dir.path().join("audit-policy.yaml");
    let audit_log = audit_dir.path().join("audit.log");
    fs::write(&audit_policy, AUDIT_POLICY).expect("write the audit policy");
    let cluster = TestCluster::start_with(Options {
        controller_manager: false,
        apiserver_args: vec![
            format!("--audit-policy-file={}", audit_policy.display()),
            format!("--audit-log-path={}", audit_log.display()),
            "--audit-log-mode=blocking".into(),
        ],
        ..Options::default()
    });
    let _status_controller = StatusController::start(&cluster, audit_dir.path());
    eprintln!("cluster up after {:.1?}", started.elapsed());

    // 1. Every setup.
    let mut runs: Vec<CaseRun> = Vec::new();
    for case in &cases {
        let setup = case.dir.join("setup.yaml");
        let out = cluster.kubectl(&["apply", "-f", &setup.display().to_string()]);
        runs.push(CaseRun {
            setup_error: (!out.status.success()).then(|| text(&out.stderr)),
            applied: Vec::new(),
        });
    }

    // 2. The policies are live.
    match wait_for_policies(&cluster, Duration::from_secs(60)) {
        Ok(took) => eprintln!("policies live {took:.1?} after the last setup"),
        Err(e) => panic!("{e}"),
    }

    // 3. Every object, cases spread over a few kubectl workers.
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Vec<Applied>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                let applied: Vec<Applied> = case
                    .objects
                    .iter()
                    .map(|o| {
                        let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &o.text);
                        Applied {
                            ok: out.status.success(),
                            stdout: text(&out.stdout),
                            stderr: text(&out.stderr),
                        }
                    })
                    .collect();
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, applied));
            });
        }
    });
    for (i, applied) in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        runs[i].applied = applied;
    }
    eprintln!("every object applied after {:.1?}", started.elapsed());

    // 4. The audit events of the applications (the log is written as the
    //    requests complete; wait until every expected event is in).
    let expected_events = |key: &(String, String, String)| -> usize {
        cases
            .iter()
            .zip(&runs)
            .flat_map(|(c, r)| c.objects.iter().zip(&r.applied))
            .filter(|(o, a)| {
                let k = (
                    o.resource.clone(),
                    if o.namespaced {
                        o.key.namespace.to_string()
                    } else {
                        String::new()
                    },
                    o.key.name.to_string(),
                );
                &k == key && sent_a_write(a)
            })
            .count()
    };
    let keys: BTreeSet<(String, String, String)> = cases
        .iter()
        .flat_map(|c| c.objects.iter())
        .map(|o| {
            (
                o.resource.clone(),
                if o.namespaced {
                    o.key.namespace.to_string()
                } else {
                    String::new()
                },
                o.key.name.to_string(),
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut events = read_audit_log(&audit_log);
    while keys
        .iter()
        .any(|k| events.get(k).map_or(0, Vec::len) < expected_events(k))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(200));
        events = read_audit_log(&audit_log);
    }

    // 5. kube-apiserver's type checking.
    let (type_warnings, unchecked) = type_check_warnings(&cluster, Duration::from_secs(20));

    // 6. Compare.
    let mut report = String::new();
    let mut cases_agreeing = 0;
    let mut objects_agreeing = 0;
    let mut objects_total = 0;
    let mut consumed: HashMap<(String, String, String), usize> = HashMap::new();
    let mut tally = Tally::default();
    for (case, run) in cases.iter().zip(&runs) {
        let mut case_ok = true;
        if let Some(e) = &run.setup_error {
            case_ok = false;
            let _ = writeln!(
                report,
                "\n{}: kube-apiserver rejected setup.yaml:\n{e}",
                case.id
            );
        }
        let errors = case_errors(case);
        if !errors.is_empty() {
            let _ = writeln!(report, "\n{}: Interlock cannot load the case:", case.id);
            for e in &errors {
                let _ = writeln!(report, "    {}", e.replace('\n', "\n    "));
            }
        }
        // Objects of this case that kube-apiserver holds, as written.
        let mut stored: Vec<(ObjectKey, Document)> = Vec::new();
        for (n, (object, applied)) in case.objects.iter().zip(&run.applied).enumerate() {
            objects_total += 1;
            let mut kube = kube_answer(applied);
            let key = (
                object.resource.clone(),
                if object.namespaced {
                    object.key.namespace.to_string()
                } else {
                    String::new()
                },
                object.key.name.to_string(),
            );
            if sent_a_write(applied) {
                let i = consumed.entry(key.clone()).or_insert(0);
                match events.get(&key).and_then(|list| list.get(*i)) {
                    Some(e) => kube.audit.clone_from(&e.entries),
                    None if kube.error.is_none() => {
                        kube.error = Some(format!(
                            "no audit event for {} {}/{} in {}",
                            key.0,
                            key.1,
                            key.2,
                            audit_log.display()
                        ))
                    }
                    None => {}
                }
                *i += 1;
            } else if applied.ok && kube.error.is_none() {
                kube.error = Some(format!(
                    "kubectl sent no write (it said {:?}); the corpus must change the object",
                    applied.stdout.trim()
                ));
            }
            let existing: Vec<Document> = stored
                .iter()
                .filter(|(k, _)| k != &object.key)
                .map(|(_, d)| d.clone())
                .collect();
            let old = stored
                .iter()
                .find(|(k, _)| k == &object.key)
                .map(|(_, d)| &d.value);
            tally.count(&kube);
            let ours = interlock_answer(case, object, &existing, old);
            match disagreement(&kube, &ours) {
                None => objects_agreeing += 1,
                Some(why) => {
                    case_ok = false;
                    let _ = writeln!(
                        report,
                        "\n{} object #{} {} ({}): {why}\n    kube-apiserver:\n{}    interlock:\n{}",
                        case.id,
                        n + 1,
                        object.doc.display_name(),
                        if old.is_some() { "UPDATE" } else { "CREATE" },
                        kube.render(),
                        ours.render()
                    );
                }
            }
            if applied.ok {
                stored.retain(|(k, _)| k != &object.key);
                stored.push((object.key.clone(), object.doc.clone()));
            }
        }
        if case_ok {
            cases_agreeing += 1;
        }
    }

    // Type-check warnings, policy by policy.
    let mut policies_checked = 0;
    let mut policies_agreeing = 0;
    let mut policies_warned = 0;
    for case in &cases {
        for (name, ours) in interlock_type_warnings(case) {
            let Some(kube) = type_warnings.get(&name) else {
                continue;
            };
            policies_checked += 1;
            policies_warned += usize::from(!kube.is_empty());
            if &ours == kube {
                policies_agreeing += 1;
                continue;
            }
            let _ = writeln!(
                report,
                "
{}: policy {name}: type-check warnings differ",
                case.id
            );
            for (side, list) in [("kube-apiserver", kube), ("interlock", &ours)] {
                let _ = writeln!(report, "    {side}:");
                for (f, w) in list {
                    let _ = writeln!(report, "      {f}: {}", w.replace('\n', "\n        "));
                }
            }
        }
    }
    if !unchecked.is_empty() {
        let _ = writeln!(
            report,
            "\nnot type-checked by kube-controller-manager within 20s (not compared): {}",
            unchecked.join(", ")
        );
    }
    let figure = format!(
        "VAP agreement: {cases_agreeing}/{} cases ({objects_agreeing}/{objects_total} objects) agree; type-check warnings of {policies_agreeing}/{policies_checked} policies agree ({policies_warned} with warnings){}",
        cases.len(),
        filter
            .as_ref()
            .map(|f| format!(" (only cases {f}, from VAP_DIFF_CASES)"))
            .unwrap_or_default()
    );
    eprintln!(
        "{report}\nkube-apiserver's answers: {} denied, {} admitted ({} with policy warnings), {} audit entries; {:.1?} in all",
        tally.denied,
        tally.admitted,
        tally.warned,
        tally.audit_entries,
        started.elapsed()
    );
    println!("{figure}");
    assert!(
        cases_agreeing == cases.len()
            && objects_agreeing == objects_total
            && policies_agreeing == policies_checked,
        "Interlock disagrees with kube-apiserver (details above)\n{figure}"
    );
}

/// What kube-apiserver answered overall (to show that the comparison is not
/// vacuous).
#[derive(Default)]
struct Tally {
    denied: usize,
    admitted: usize,
    warned: usize,
    audit_entries: usize,
}

impl Tally {
    fn count(&mut self, a: &Answer) {
        if a.denials.is_empty() && a.error.is_none() {
            self.admitted += 1;
        } else if !a.denials.is_empty() {
            self.denied += 1;
        }
        if !a.warnings.is_empty() {
            self.warned += 1;
        }
        self.audit_entries += a.audit.len();
    }
}

/// Did kubectl send a create, update or patch (which admission sees, and
/// the audit log records)? A denied write counts; an `unchanged` apply sends
/// nothing.
fn sent_a_write(applied: &Applied) -> bool {
    if applied.ok {
        !applied.stdout.contains(" unchanged")
    } else {
        // The server answered (a denial, or an object it rejects for another
        // reason); not a client-side failure.
        applied.stderr.contains("Error from server") || applied.stderr.contains("\" is invalid: ")
    }
}
