//! Differential fuzzer (issue 16): generated CEL expressions
//! (tests/support/celgen.rs), well-typed and ill-typed, sent to a real
//! kube-apiserver and to Interlock.
//!
//! 1. **Creation.** Each expression is a validation of a
//!    ValidatingAdmissionPolicy (with a ConfigMap `paramKind`, so `params`
//!    is declared) created with `dryRun=All`. Fifty expressions share one
//!    request: kube-apiserver lists every refused validation as a cause
//!    with its field (`spec.validations[i].expression`), so each refusal is
//!    attributed. Interlock compiles each expression in a policy of its own.
//!    Both accept, or both refuse with the same message (normalized as
//!    tests/integration/cel_creation_e2e.rs does).
//! 2. **Evaluation.** The expressions both accept go, forty at a time, into
//!    one real policy + binding (Deny, `failurePolicy: Fail`, params from a
//!    ConfigMap) scoped to the fuzzer's labelled namespace; validation `i`
//!    is `object.metadata.name != 'N_i' || (E_i)`, so a dry-run create of
//!    the ConfigMap `N_i` can only be denied by expression `i`: one request
//!    per expression, each answer attributable, requests in parallel. The
//!    same policy, binding, Namespace, params and ConfigMaps go through
//!    `interlock check` (`check_documents_with`); admitted, or denied with
//!    the same message.
//!
//! Every disagreement is appended to `tests/vap-corpus/creation/fuzz-found.tsv`
//! (`phase<TAB>seed<TAB>expression`), which every run replays first, so a
//! found case stays a regression case. The test fails on a disagreement not
//! listed in `fuzz-known.txt`, and on a listed one that agrees.
//!
//! The suite test tries `CEL_DIFF_FUZZ_ROUNDS` rounds (default 30) of 100
//! expressions, seeds `CEL_DIFF_FUZZ_SEED` (default 1) onwards (round `r` uses
//! seed + r), stopping early after `CEL_DIFF_FUZZ_SECS` (default 90). The ignored test
//! `cel_fuzz_long` runs 600 s from a clock seed unless told otherwise:
//! `CEL_DIFF_FUZZ_SECS=1800 cargo test --test integration cel_fuzz_long -- --ignored --nocapture`.
//! `CEL_DIFF_FUZZ_DUMP=FILE` writes every disagreement, known ones included,
//! with both messages.

use crate::support;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{stream, StreamExt as _};
use interlock::check::{check_documents_with, CheckOptions, Report};
use interlock::inventory::Source as InvSource;
use interlock::manifest::{Document, Source};
use interlock::policy::PolicySet;
use kube::client::Body;
use serde_json::{json, Value as Json};
use support::celgen::{Gen, OBJECT_DATA, OBJECT_LABELS, PARAMS_DATA};
use support::cluster::TestCluster;

use crate::cel_creation_e2e::normalize;

/// Expressions per dry-run policy creation.
const CREATE_BATCH: usize = 50;
/// Expressions per evaluation policy.
const EVAL_BATCH: usize = 40;
/// Requests in flight at once.
const IN_FLIGHT: usize = 4;
/// Expressions per seed.
const ROUND: usize = 100;
/// Depth bound of the generator.
const DEPTH: u32 = 4;
/// How long one request may take: an expression that runs kube-apiserver
/// out of its cost budget can take minutes on a busy machine.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// The answer of a request that got none.
const NO_ANSWER: &str = "no answer from kube-apiserver";
/// The creation answer for an expression kube-apiserver crashes on.
const CRASH: &str = "kube-apiserver crashed (its handler panicked)";
/// The kubectl user (client certificate CN) that `check` impersonates.
const USER: &str = "admin";

const VAP_PATH: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDING_PATH: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

fn corpus_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vap-corpus/creation")
        .join(name)
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
enum Phase {
    Creation,
    Evaluation,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Creation => "creation",
            Phase::Evaluation => "evaluation",
        }
    }

    fn parse(s: &str) -> Option<Phase> {
        match s {
            "creation" => Some(Phase::Creation),
            "evaluation" => Some(Phase::Evaluation),
            _ => None,
        }
    }
}

/// An expression to try and the seed that made it.
#[derive(Clone)]
struct Item {
    seed: u64,
    expression: String,
}

/// One side's answer: `None` is acceptance (creation) or admission
/// (evaluation); `Some` the refusal or denial message.
type Answer = Option<String>;

struct Disagreement {
    phase: Phase,
    item: Item,
    kube: Answer,
    ours: Answer,
}

impl Disagreement {
    fn class(&self) -> &'static str {
        match (self.phase, &self.kube, &self.ours) {
            (Phase::Creation, Some(_), None) => {
                "creation: kube-apiserver refuses, Interlock accepts"
            }
            (Phase::Creation, None, Some(_)) => {
                "creation: Interlock refuses, kube-apiserver accepts"
            }
            (Phase::Creation, _, _) => "creation: both refuse, messages differ",
            (Phase::Evaluation, Some(_), None) => {
                "evaluation: kube-apiserver denies, Interlock admits"
            }
            (Phase::Evaluation, None, Some(_)) => {
                "evaluation: Interlock denies, kube-apiserver admits"
            }
            (Phase::Evaluation, _, _) => "evaluation: both deny, messages differ",
        }
    }

    fn key(&self) -> (Phase, String) {
        (self.phase, self.item.expression.clone())
    }

    fn render(&self) -> String {
        let side = |a: &Answer, none: &str| a.clone().unwrap_or_else(|| none.to_string());
        let none = match self.phase {
            Phase::Creation => "accepted",
            Phase::Evaluation => "admitted",
        };
        format!(
            "{} (seed {}): {}\n    kube-apiserver: {}\n    Interlock:      {}",
            self.class(),
            self.item.seed,
            self.item.expression,
            side(&self.kube, none),
            side(&self.ours, none)
        )
    }
}

/// Counts of one run.
#[derive(Default)]
struct Tally {
    generated: usize,
    replayed: usize,
    created_both_accept: usize,
    created_both_refuse: usize,
    evaluated: usize,
    denied: usize,
    /// Evaluations kube-apiserver answers differently from one request to
    /// the next (not compared).
    unstable: BTreeSet<(Phase, String)>,
    /// Expressions whose creation crashes kube-apiserver's handler (not
    /// compared).
    crashes: Vec<String>,
    disagreements: Vec<Disagreement>,
}

// ---------------------------------------------------------------------------
// The cluster side
// ---------------------------------------------------------------------------

struct Cluster {
    client: kube::Client,
    /// The fuzzer's namespace; its label scopes every policy to it.
    ns: String,
    /// Prefix of policy and object names (one per test).
    prefix: String,
    /// Expressions of the known evaluation disagreements: one that agrees
    /// is asked again, since an answer that depends on Go's map order can
    /// agree by chance once.
    known_evaluations: HashSet<String>,
}

/// One request; a connection that fails is tried again (twice).
async fn send(client: &kube::Client, method: &str, path: &str, body: Option<&Json>) -> (u16, Json) {
    let mut answer = send_once(client, method, path, body).await;
    for _ in 0..2 {
        if answer.0 != 0
            || answer
                .1
                .as_str()
                .is_some_and(|m| m.contains("no answer in"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        answer = send_once(client, method, path, body).await;
    }
    answer
}

async fn send_once(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&Json>,
) -> (u16, Json) {
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(bytes))
        .expect("a valid request");
    let response = match tokio::time::timeout(REQUEST_TIMEOUT, client.send(request)).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => return (0, Json::from(format!("{method} {path}: {e}"))),
        Err(_) => {
            return (
                0,
                Json::from(format!("{method} {path}: no answer in {REQUEST_TIMEOUT:?}")),
            )
        }
    };
    let status = response.status().as_u16();
    let bytes = match response.into_body().collect_bytes().await {
        Ok(bytes) => bytes,
        Err(e) => {
            return (
                0,
                Json::from(format!("{method} {path}: reading the body: {e}")),
            )
        }
    };
    (status, serde_json::from_slice(&bytes).unwrap_or(Json::Null))
}

fn ns_label(prefix: &str) -> (String, String) {
    ("fuzz.interlock.dev/run".into(), prefix.to_string())
}

fn string_map(pairs: &[(&str, &str)]) -> Json {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Json::from(*v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn namespace_doc(ns: &str, prefix: &str) -> Json {
    let (k, v) = ns_label(prefix);
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns,
        "labels": {k: v, "kubernetes.io/metadata.name": ns}}})
}

fn params_doc(ns: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fuzz-params", "namespace": ns}, "data": string_map(PARAMS_DATA)})
}

fn configmap(ns: &str, name: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": string_map(OBJECT_LABELS)},
        "data": string_map(OBJECT_DATA)})
}

fn policy(name: &str, prefix: &str, validations: Vec<Json>) -> Json {
    let (k, v) = ns_label(prefix);
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {k: v}},
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"], "operations": ["CREATE"]}]},
            "validations": validations,
        }
    })
}

fn binding(name: &str, ns: &str) -> Json {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "paramRef": {"name": "fuzz-params", "namespace": ns,
                "parameterNotFoundAction": "Deny"},
        }
    })
}

/// `Invalid value: "<expr>": <message>` → `<message>`.
fn strip_invalid_value(message: &str) -> &str {
    let Some(rest) = message.strip_prefix("Invalid value: \"") else {
        return message;
    };
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return rest[i + 1..].trim_start_matches(": "),
            _ => escaped = false,
        }
    }
    message
}

/// `spec.validations[12].expression` → 12.
fn validation_index(field: &str) -> Option<usize> {
    field
        .strip_prefix("spec.validations[")?
        .split(']')
        .next()?
        .parse()
        .ok()
}

impl Cluster {
    async fn setup(cluster: &TestCluster, prefix: &str) -> Cluster {
        let client = cluster.client();
        let ns = format!("{prefix}-ns");
        for (path, doc) in [
            ("/api/v1/namespaces".to_string(), namespace_doc(&ns, prefix)),
            (
                format!("/api/v1/namespaces/{ns}/configmaps"),
                params_doc(&ns),
            ),
        ] {
            let (status, body) = send(&client, "POST", &path, Some(&doc)).await;
            assert!(matches!(status, 201 | 409), "POST {path}: {status} {body}");
        }
        Cluster {
            client,
            ns,
            prefix: prefix.to_string(),
            known_evaluations: HashSet::new(),
        }
    }

    /// kube-apiserver's answer to each expression as a validation, from
    /// one dry-run creation.
    async fn creation(&self, batch: usize, exprs: &[&str]) -> Vec<Answer> {
        if let Some(answers) = self.try_creation(batch, exprs).await {
            return answers;
        }
        // No answer: kube-apiserver's handler panicked on one of them (cel-go
        // crashes on some expressions). Ask about each alone to find it.
        let mut answers = Vec::new();
        for e in exprs {
            let answer = self.try_creation(batch, &[e]).await;
            answers.push(answer.map_or_else(|| Some(CRASH.to_string()), |mut a| a.remove(0)));
        }
        answers
    }

    /// `None` when kube-apiserver gave no answer.
    async fn try_creation(&self, batch: usize, exprs: &[&str]) -> Option<Vec<Answer>> {
        let validations = exprs.iter().map(|e| json!({"expression": e})).collect();
        let doc = policy(
            &format!("{}-c{batch}", self.prefix),
            &self.prefix,
            validations,
        );
        let path = format!("{VAP_PATH}?dryRun=All");
        let (status, body) = send(&self.client, "POST", &path, Some(&doc)).await;
        let mut answers = vec![None; exprs.len()];
        match status {
            0 => return None,
            201 => {}
            422 => {
                let causes = body["details"]["causes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for cause in causes {
                    let field = cause["field"].as_str().unwrap_or_default();
                    let Some(i) = validation_index(field) else {
                        panic!("a refusal not attributed to a validation: {cause}");
                    };
                    let message = cause["message"].as_str().unwrap_or_default();
                    answers[i].get_or_insert_with(|| normalize(strip_invalid_value(message)));
                }
            }
            _ => panic!("dry-run policy creation: {status} {body}"),
        }
        Some(answers)
    }

    /// Creates the evaluation policy of `batch` and waits until
    /// kube-apiserver enforces it. `None` when kube-apiserver refuses it.
    async fn install(&self, name: &str, doc: &Json, probe: &str) -> Result<(), String> {
        let (status, body) = send(&self.client, "POST", VAP_PATH, Some(doc)).await;
        if status != 201 {
            return Err(format!("{status} {}", body["message"]));
        }
        let (status, body) = send(
            &self.client,
            "POST",
            BINDING_PATH,
            Some(&binding(name, &self.ns)),
        )
        .await;
        if status != 201 {
            return Err(format!("binding: {status} {}", body["message"]));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        // The probe's last answer says what stood in the way (another
        // policy's denial, the params not found, no answer at all).
        let mut last = None;
        while Instant::now() < deadline {
            let answer = self.dry_run(probe).await;
            if answer.as_deref().is_some_and(|m| m.contains(probe)) {
                return Ok(());
            }
            last = answer;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!(
            "the policy was not enforced within 60 s (the probe's last answer: {})",
            last.as_deref().unwrap_or("admitted")
        ))
    }

    async fn uninstall(&self, name: &str) {
        send(
            &self.client,
            "DELETE",
            &format!("{BINDING_PATH}/{name}"),
            None,
        )
        .await;
        send(&self.client, "DELETE", &format!("{VAP_PATH}/{name}"), None).await;
    }

    /// Asks again about the ConfigMap `name`: whether kube-apiserver
    /// answers `first` every time (a few tries).
    async fn answers_alike(&self, name: &str, first: &Answer, times: usize) -> bool {
        for _ in 0..times {
            if self.dry_run(name).await != *first {
                return false;
            }
        }
        true
    }

    /// A dry-run create of the fuzzer's ConfigMap `name`: `None` when
    /// admitted, else what follows `denied request: ` (or the whole
    /// message when it is not a policy's denial).
    async fn dry_run(&self, name: &str) -> Answer {
        let path = format!("/api/v1/namespaces/{}/configmaps?dryRun=All", self.ns);
        let (status, body) = send(
            &self.client,
            "POST",
            &path,
            Some(&configmap(&self.ns, name)),
        )
        .await;
        match status {
            201 => return None,
            0 => return Some(NO_ANSWER.to_string()),
            _ => {}
        }
        let message = body["message"].as_str().unwrap_or_default();
        Some(match message.split_once("' denied request: ") {
            Some((_, m)) => m.trim_end().to_string(),
            None => format!("not a policy denial: {status} {message}"),
        })
    }
}

// ---------------------------------------------------------------------------
// Interlock
// ---------------------------------------------------------------------------

fn doc(value: Json) -> Document {
    Document::new(Source::file("fuzz.json"), 1, value)
}

/// Interlock's answer to one expression as a validation.
fn interlock_creation(prefix: &str, expression: &str) -> Answer {
    let doc = policy(
        &format!("{prefix}-one"),
        prefix,
        vec![json!({"expression": expression})],
    );
    let source = InvSource {
        file: "fuzz.yaml".into(),
        line: 1,
    };
    let (_, errors) = PolicySet::compile(&[(doc, source)]);
    errors.first().map(|e| normalize(&e.message))
}

/// Interlock's answer for each object of `names`, as `interlock check`
/// gives it.
fn interlock_evaluation(
    cluster: &Cluster,
    policy: &Json,
    name: &str,
    names: &[String],
) -> Vec<Answer> {
    let policies = [doc(policy.clone()), doc(binding(name, &cluster.ns))];
    let context = [
        doc(namespace_doc(&cluster.ns, &cluster.prefix)),
        doc(params_doc(&cluster.ns)),
    ];
    let objects: Vec<Document> = names
        .iter()
        .map(|n| doc(configmap(&cluster.ns, n)))
        .collect();
    let opts = CheckOptions {
        user: USER.to_string(),
        ..Default::default()
    };
    let mut report = Report::default();
    check_documents_with(&policies, &context, &objects, &opts, &mut report);
    if let Some(e) = report.errors.first() {
        return vec![Some(format!("Interlock error: {e}")); names.len()];
    }
    names
        .iter()
        .map(|n| {
            report
                .results
                .iter()
                .find(|f| &f.object.name == n)
                .map(|f| f.message.trim_end().to_string())
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

/// Compares creation for `items`; returns those both sides accept.
async fn run_creation(
    cluster: &Cluster,
    items: &[Item],
    first_batch: usize,
    tally: &mut Tally,
) -> Vec<Item> {
    let chunks: Vec<&[Item]> = items.chunks(CREATE_BATCH).collect();
    let answers: Vec<Vec<Answer>> = stream::iter(chunks.iter().enumerate().map(|(b, chunk)| {
        let exprs: Vec<&str> = chunk.iter().map(|i| i.expression.as_str()).collect();
        async move { cluster.creation(first_batch + b, &exprs).await }
    }))
    .buffered(IN_FLIGHT)
    .collect()
    .await;
    let mut accepted = Vec::new();
    for (item, kube) in items.iter().zip(answers.into_iter().flatten()) {
        if kube.as_deref() == Some(CRASH) {
            eprintln!("cel fuzz: kube-apiserver crashes on {}", item.expression);
            tally.crashes.push(item.expression.clone());
            continue;
        }
        let ours = interlock_creation(&cluster.prefix, &item.expression);
        match (&kube, &ours) {
            (None, None) => {
                tally.created_both_accept += 1;
                accepted.push(item.clone());
            }
            (Some(k), Some(o)) if k == o => tally.created_both_refuse += 1,
            _ => tally.disagreements.push(Disagreement {
                phase: Phase::Creation,
                item: item.clone(),
                kube,
                ours,
            }),
        }
    }
    accepted
}

/// Compares evaluation for one batch of accepted expressions.
async fn run_evaluation_batch(cluster: &Cluster, batch: usize, items: &[Item]) -> Vec<Evaluated> {
    let name = format!("{}-e{batch}", cluster.prefix);
    let names: Vec<String> = (0..items.len()).map(|i| format!("{name}-{i}")).collect();
    let probe = format!("{name}-probe");
    let mut validations = vec![json!({
        "expression": format!("object.metadata.name != '{probe}'"),
        "message": probe,
    })];
    validations.extend(items.iter().zip(&names).map(|(item, n)| {
        json!({"expression": format!("object.metadata.name != '{n}' || ({})", item.expression)})
    }));
    let doc = policy(&name, &cluster.prefix, validations);
    if let Err(e) = cluster.install(&name, &doc, &probe).await {
        cluster.uninstall(&name).await;
        eprintln!("evaluation batch {name} skipped: kube-apiserver refused its policy: {e}");
        return Vec::new();
    }
    let ours = interlock_evaluation(cluster, &doc, &name, &names);
    let kube: Vec<Answer> = stream::iter(names.iter().map(|n| cluster.dry_run(n)))
        .buffered(IN_FLIGHT)
        .collect()
        .await;
    let mut results = Vec::new();
    for (((item, n), k), o) in items.iter().zip(&names).zip(kube).zip(ours) {
        let answered = k.as_deref() != Some(NO_ANSWER);
        let stable = answered
            && (k == o || !map_order_matters(&item.expression, &k, &o))
            && if k != o {
                cluster.answers_alike(n, &k, 4).await
            } else if cluster.known_evaluations.contains(&item.expression) {
                // Twelve more alike: a coin-flip order agrees every time
                // once in 2^12 runs.
                cluster.answers_alike(n, &k, 12).await
            } else {
                true
            };
        results.push(Evaluated {
            item: item.clone(),
            kube: k,
            ours: o,
            stable,
        });
    }
    cluster.uninstall(&name).await;
    results
}

/// Two different errors from a comprehension over the ConfigMap's data or
/// labels: which one comes first depends on Go's random map order, which a
/// few repeated requests do not reliably show.
fn map_order_matters(expression: &str, kube: &Answer, ours: &Answer) -> bool {
    let errors = [kube, ours].iter().all(|a| {
        a.as_deref()
            .is_some_and(|m| m.contains("' resulted in error: "))
    });
    let over_map = ["object.data.", "object.metadata.labels."].iter().any(|m| {
        ["all(", "exists(", "exists_one(", "map(", "filter("]
            .iter()
            .any(|f| expression.contains(&format!("{m}{f}")))
    });
    errors && over_map
}

/// One expression's evaluation on both sides.
struct Evaluated {
    item: Item,
    kube: Answer,
    ours: Answer,
    /// kube-apiserver answered, the same every time it was asked.
    stable: bool,
}

async fn run_evaluation(cluster: &Cluster, items: &[Item], first_batch: usize, tally: &mut Tally) {
    let chunks: Vec<&[Item]> = items.chunks(EVAL_BATCH).collect();
    let results: Vec<Vec<Evaluated>> = stream::iter(
        chunks
            .iter()
            .enumerate()
            .map(|(b, chunk)| run_evaluation_batch(cluster, first_batch + b, chunk)),
    )
    .buffered(2)
    .collect()
    .await;
    for e in results.into_iter().flatten() {
        tally.evaluated += 1;
        if e.kube.is_some() {
            tally.denied += 1;
        }
        if !e.stable {
            // Go's map order: an error inside a comprehension over a map
            // names whichever key failed first. Or no answer in time.
            tally
                .unstable
                .insert((Phase::Evaluation, e.item.expression.clone()));
            eprintln!(
                "cel fuzz: kube-apiserver answers vary for {}",
                e.item.expression
            );
        } else if e.kube != e.ours {
            tally.disagreements.push(Disagreement {
                phase: Phase::Evaluation,
                item: e.item,
                kube: e.kube,
                ours: e.ours,
            });
        }
    }
}

/// Both phases over `items`.
async fn run_items(cluster: &Cluster, items: &[Item], batch: &mut usize, tally: &mut Tally) {
    let accepted = run_creation(cluster, items, *batch, tally).await;
    *batch += items.len().div_ceil(CREATE_BATCH);
    run_evaluation(cluster, &accepted, *batch, tally).await;
    *batch += accepted.len().div_ceil(EVAL_BATCH);
}

/// Found cases, `phase<TAB>seed<TAB>expression`.
fn read_found() -> Vec<(Phase, Item)> {
    let text = std::fs::read_to_string(corpus_file("fuzz-found.tsv")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.splitn(3, '\t');
            let phase = cols.next().and_then(Phase::parse);
            let seed = cols.next().and_then(|s| s.parse().ok());
            let expression = cols.next();
            match (phase, seed, expression) {
                (Some(p), Some(seed), Some(e)) => (
                    p,
                    Item {
                        seed,
                        expression: e.to_string(),
                    },
                ),
                _ => panic!("fuzz-found.tsv: not `phase<TAB>seed<TAB>expression`: {l}"),
            }
        })
        .collect()
}

/// Known disagreements, `phase<TAB>expression`.
fn read_known() -> BTreeSet<(Phase, String)> {
    let text = std::fs::read_to_string(corpus_file("fuzz-known.txt")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (p, e) = l
                .split_once('\t')
                .expect("fuzz-known.txt: phase<TAB>expression");
            (
                Phase::parse(p).expect("fuzz-known.txt: a phase"),
                e.to_string(),
            )
        })
        .collect()
}

/// Appends the disagreements not yet in fuzz-found.tsv.
fn save_found(found: &[(Phase, Item)], disagreements: &[Disagreement]) -> usize {
    let have: HashSet<(Phase, &str)> = found
        .iter()
        .map(|(p, i)| (*p, i.expression.as_str()))
        .collect();
    let mut new = String::new();
    let mut added = HashSet::new();
    for d in disagreements {
        let key = (d.phase, d.item.expression.as_str());
        if !have.contains(&key) && added.insert(key) {
            new.push_str(&format!(
                "{}\t{}\t{}\n",
                d.phase.name(),
                d.item.seed,
                d.item.expression
            ));
        }
    }
    if !new.is_empty() {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(corpus_file("fuzz-found.tsv"))
            .expect("open fuzz-found.tsv");
        file.write_all(new.as_bytes())
            .expect("append to fuzz-found.tsv");
    }
    added.len()
}

/// With `CEL_DIFF_FUZZ_DUMP=FILE`, every disagreement of the run, known or
/// not, is written there with both sides' messages: the worklist of whoever
/// fixes the known ones.
fn dump(disagreements: &[Disagreement]) {
    let Ok(path) = std::env::var("CEL_DIFF_FUZZ_DUMP") else {
        return;
    };
    let text: String = disagreements.iter().map(|d| d.render() + "\n").collect();
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {path}: {e}"));
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// Replays the found cases, then generates `rounds` rounds of [`ROUND`]
/// expressions, or fewer when `secs` have passed.
fn fuzz(prefix: &str, seed: u64, rounds: u64, secs: u64) {
    let found = read_found();
    let known = read_known();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let test_cluster = TestCluster::shared();
    let _logs = test_cluster.logs_on_panic();
    let mut tally = Tally::default();
    let started = Instant::now();
    runtime.block_on(async {
        let mut cluster = Cluster::setup(test_cluster, prefix).await;
        cluster.known_evaluations = known
            .iter()
            .filter(|(phase, _)| *phase == Phase::Evaluation)
            .map(|(_, e)| e.clone())
            .collect();
        let mut batch = 0;
        let mut seen: HashSet<String> = HashSet::new();
        let replay: Vec<Item> = found
            .iter()
            .filter(|(_, i)| seen.insert(i.expression.clone()))
            .map(|(_, i)| i.clone())
            .collect();
        tally.replayed = replay.len();
        run_items(&cluster, &replay, &mut batch, &mut tally).await;
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut round = 0;
        while round < rounds && Instant::now() < deadline {
            let round_seed = seed + round;
            let mut gen = Gen::new(round_seed);
            let items: Vec<Item> = (0..ROUND)
                .map(|_| gen.expression(DEPTH))
                .filter(|e| seen.insert(e.clone()))
                .map(|expression| Item {
                    seed: round_seed,
                    expression,
                })
                .collect();
            tally.generated += items.len();
            run_items(&cluster, &items, &mut batch, &mut tally).await;
            round += 1;
        }
        eprintln!("cel fuzz: seeds {seed}..{}", seed + round);
    });
    report(&tally, started.elapsed(), &found, &known);
}

fn report(
    tally: &Tally,
    elapsed: Duration,
    found: &[(Phase, Item)],
    known: &BTreeSet<(Phase, String)>,
) {
    let total = tally.generated + tally.replayed;
    let secs = elapsed.as_secs_f64();
    eprintln!(
        "cel fuzz: {} generated + {} replayed expressions in {secs:.1} s ({:.1} expressions/s); \
         creation: {} both accept, {} both refuse alike; evaluation: {} compared ({} denied by kube-apiserver, {} not repeatable there); {} crash kube-apiserver",
        tally.generated,
        tally.replayed,
        total as f64 / secs,
        tally.created_both_accept,
        tally.created_both_refuse,
        tally.evaluated,
        tally.denied,
        tally.unstable.len(),
        tally.crashes.len(),
    );
    let mut by_class: BTreeMap<&str, usize> = BTreeMap::new();
    let mut new = Vec::new();
    let mut seen_known = BTreeSet::new();
    for d in &tally.disagreements {
        *by_class.entry(d.class()).or_default() += 1;
        if known.contains(&d.key()) {
            seen_known.insert(d.key());
        } else {
            eprintln!("NEW {}", d.render());
            new.push(d.render());
        }
    }
    for (class, n) in &by_class {
        eprintln!("cel fuzz disagreements {class}: {n}");
    }
    dump(&tally.disagreements);
    let saved = save_found(found, &tally.disagreements);
    eprintln!(
        "cel fuzz: {saved} disagreements appended to tests/vap-corpus/creation/fuzz-found.tsv"
    );
    assert!(
        total > 0 && tally.evaluated > 0,
        "the fuzzer compared nothing"
    );
    let stale: Vec<_> = known
        .iter()
        .filter(|k| !seen_known.contains(k) && !tally.unstable.contains(k))
        .collect();
    assert!(
        new.is_empty(),
        "{} new disagreements:\n{}",
        new.len(),
        new.join("\n")
    );
    assert!(
        stale.is_empty(),
        "known disagreements that now agree (remove them from fuzz-known.txt): {stale:?}"
    );
}

#[test]
fn cel_fuzz_agrees_with_kube_apiserver() {
    let seed = env_u64("CEL_DIFF_FUZZ_SEED").unwrap_or(1);
    // A fixed number of rounds, so that a faster machine does not meet
    // seeds (and disagreements) this one never tried; the time bound
    // only cuts it short on a slower one.
    let rounds = env_u64("CEL_DIFF_FUZZ_ROUNDS").unwrap_or(30);
    let secs = env_u64("CEL_DIFF_FUZZ_SECS").unwrap_or(90);
    fuzz("fuzz-suite", seed, rounds, secs);
}

/// The long run: `CEL_DIFF_FUZZ_SECS` (default 600) from `CEL_DIFF_FUZZ_SEED`
/// (default: the clock).
#[test]
#[ignore = "long; run on demand"]
fn cel_fuzz_long() {
    let seed = env_u64("CEL_DIFF_FUZZ_SEED").unwrap_or_else(|| {
        std::time::UNIX_EPOCH
            .elapsed()
            .unwrap_or_default()
            .as_secs()
            % 1_000_000
            * 1000
    });
    let secs = env_u64("CEL_DIFF_FUZZ_SECS").unwrap_or(600);
    fuzz("fuzz-long", seed, u64::MAX, secs);
}

#[test]
fn generator_is_deterministic_and_varied() {
    let a: Vec<String> = (0..200)
        .map({
            let mut g = Gen::new(7);
            move |_| g.expression(DEPTH)
        })
        .collect();
    let b: Vec<String> = (0..200)
        .map({
            let mut g = Gen::new(7);
            move |_| g.expression(DEPTH)
        })
        .collect();
    assert_eq!(a, b, "the same seed gives the same expressions");
    let distinct: HashSet<&String> = a.iter().collect();
    assert!(
        distinct.len() > 150,
        "only {} distinct expressions of 200",
        distinct.len()
    );
    for needle in [
        ".all(",
        "quantity(",
        "ip(",
        "cidr(",
        "url(",
        "semver(",
        "optional.",
        "params.",
        "object.",
        ".format(",
    ] {
        let n = (0..20)
            .flat_map(|s| {
                let mut g = Gen::new(s);
                (0..100).map(move |_| g.expression(DEPTH))
            })
            .filter(|e| e.contains(needle))
            .count();
        assert!(n > 0, "no expression of 2000 uses {needle}");
    }
}

/// Hand probing: every expression of `CEL_PROBE_FILE` (one a line) through
/// both phases, printing both sides' answers whether or not they agree.
/// `CEL_PROBE_FILE=exprs.txt cargo test --test integration cel_probe -- --ignored --nocapture`
#[test]
#[ignore = "on demand"]
fn cel_probe() {
    let path = std::env::var("CEL_PROBE_FILE").expect("CEL_PROBE_FILE names a file");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let items: Vec<Item> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| Item {
            seed: 0,
            expression: l.to_string(),
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let test_cluster = TestCluster::shared();
    runtime.block_on(async {
        let cluster = Cluster::setup(test_cluster, "fuzz-probe").await;
        let exprs: Vec<&str> = items.iter().map(|i| i.expression.as_str()).collect();
        let mut accepted = Vec::new();
        for (b, chunk) in exprs.chunks(CREATE_BATCH).enumerate() {
            let answers = cluster.creation(b, chunk).await;
            for (e, kube) in chunk.iter().zip(answers) {
                let ours = interlock_creation(&cluster.prefix, e);
                let mark = if kube == ours { "same" } else { "DIFF" };
                eprintln!("creation {mark}: {e}\n    kube:      {kube:?}\n    Interlock: {ours:?}");
                if kube.is_none() && ours.is_none() {
                    accepted.push(Item {
                        seed: 0,
                        expression: e.to_string(),
                    });
                }
            }
        }
        let first = exprs.len().div_ceil(CREATE_BATCH);
        for (b, chunk) in accepted.chunks(EVAL_BATCH).enumerate() {
            for e in run_evaluation_batch(&cluster, first + b, chunk).await {
                let mark = if e.kube == e.ours { "same" } else { "DIFF" };
                let strip = |a: &Answer| {
                    a.as_deref()
                        .map(|m| m.rsplit_once("resulted in error: ").map_or(m, |(_, r)| r))
                        .map(str::to_string)
                };
                eprintln!(
                    "evaluation {mark}: {}\n    kube:      {:?}\n    Interlock: {:?}",
                    e.item.expression,
                    strip(&e.kube),
                    strip(&e.ours)
                );
            }
        }
    });
}
