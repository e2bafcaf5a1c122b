//! `interlock test --against-cluster`: a case of ValidatingAdmissionPolicies
//! is also sent to the kube-apiserver of the kubeconfig, so an author sees
//! Interlock's answer and the API server's side by side.
//!
//! Per case, and undone after it:
//! - a scratch namespace `interlock-test-ID`; the case's namespaced
//!   objects (to check, old versions, inventory) go there;
//! - the policies and bindings, renamed `NAME-ID` (names are cluster-wide),
//!   each binding narrowed by an objectSelector to objects labelled
//!   `interlock.dev/test-run: ID`, so a policy under test never touches
//!   anyone else's writes, even of cluster-scoped kinds;
//! - the case's inventory objects and old versions created for real before
//!   the policies, then the objects sent as dry runs (CREATE: POST, UPDATE:
//!   PUT over the old version, DELETE: DELETE of an object created for it).
//!
//! The policies are live once a sentinel policy, created last, answers a
//! probe: kube-apiserver's policy and binding informers see objects in the
//! order they were written, so no fixed sleep.

use super::spec::TestSpec;
use super::Case;
use crate::policy::finding::Finding;
use crate::policy::{Action, Operation};
use kube::api::{DeleteParams, GroupVersionKind, PostParams};
use kube::core::{ApiResource, Request};
use kube::discovery::Scope;
use kube::Client;
use serde_json::{json, Value as Json};
use std::time::{Duration, Instant};

/// The label that confines the policies under test to the case's objects.
const RUN_LABEL: &str = "interlock.dev/test-run";
const PROBE_LABEL: &str = "interlock.dev/test-probe";
const SENTINEL_MESSAGE: &str = "interlock test sentinel";
const VAP_API: &str = "/apis/admissionregistration.k8s.io/v1";

/// How one side answered one object.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// The denial's message.
    pub denied: Option<String>,
    pub warnings: Vec<String>,
    /// Refused for another reason than a policy (kube-apiserver's own
    /// validation, a missing old version).
    pub error: Option<String>,
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(m) = &self.denied {
            parts.push(format!("Deny: {m}"));
        }
        parts.extend(self.warnings.iter().map(|w| format!("Warn: {w}")));
        if let Some(e) = &self.error {
            parts.push(format!("error: {e}"));
        }
        if parts.is_empty() {
            parts.push("admitted".into());
        }
        f.write_str(&parts.join("; "))
    }
}

/// One object of a case, answered by both.
#[derive(Debug, Clone)]
pub struct Row {
    pub object: String,
    pub interlock: Answer,
    pub kube: Answer,
}

impl Row {
    /// Both refuse or both admit, with the same messages (kube-apiserver
    /// stops at the first denial, so its one must be among ours).
    pub fn agrees(&self) -> bool {
        let (ours, theirs) = (&self.interlock, &self.kube);
        let mut a = ours.warnings.clone();
        let mut b = theirs.warnings.clone();
        a.sort();
        b.sort();
        theirs.error.is_none() && ours.denied == theirs.denied && a == b
    }
}

/// A case's comparison, or why it was not sent, or what went wrong.
#[derive(Debug, Clone)]
pub enum Comparison {
    Rows(Vec<Row>),
    /// Not for the cluster (an InterlockPolicy): not a failure.
    NotSent(String),
    /// The cluster could not answer: the case fails.
    Failed(String),
}

/// Why a case was not compared with the cluster.
#[derive(Debug, thiserror::Error)]
pub enum AgainstError {
    #[error("{0}")]
    Runtime(std::io::Error),
    #[error("--against-cluster: no cluster ({0})")]
    NoCluster(kube::Error),
    #[error("{0}")]
    Call(kube::Error),
    #[error("{0}")]
    Request(kube::core::request::Error),
    #[error("cannot create {kind} {name}: {message}")]
    Create {
        kind: String,
        name: String,
        message: String,
    },
    #[error("PolicyTest spec: {0}")]
    Spec(serde_json::Error),
    #[error(transparent)]
    Shape(#[from] super::spec::ShapeError),
    #[error("{api_version} {kind}: {error}")]
    Discovery {
        api_version: String,
        kind: String,
        error: kube::Error,
    },
    #[error("kube-apiserver did not load the policies within {0:?}")]
    NotLive(Duration),
}

/// The kube-apiserver of the kubeconfig, for every case of one run.
pub struct Against {
    rt: tokio::runtime::Runtime,
    client: Client,
}

impl Against {
    pub fn connect() -> Result<Against, AgainstError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(AgainstError::Runtime)?;
        let client = rt
            .block_on(Client::try_default())
            .map_err(AgainstError::NoCluster)?;
        Ok(Against { rt, client })
    }

    /// Sends `case` with `policy_docs` to the cluster and pairs each answer
    /// with Interlock's `findings`.
    pub fn compare(&self, policy_docs: &[Json], case: &Case, findings: &[Finding]) -> Comparison {
        if let Some(kind) = policy_docs
            .iter()
            .filter_map(|d| d["kind"].as_str())
            .find(|k| !k.starts_with("ValidatingAdmissionPolicy"))
        {
            return Comparison::NotSent(format!(
                "not sent to the cluster: kube-apiserver does not know the kind {kind}"
            ));
        }
        let run = Run {
            client: &self.client,
            id: run_id(),
        };
        let result = self.rt.block_on(async {
            let rows = run.case(policy_docs, case, findings).await;
            run.clean_up(policy_docs).await;
            rows
        });
        match result {
            Ok(rows) => Comparison::Rows(rows),
            Err(e) => Comparison::Failed(format!("not compared with the cluster: {e}")),
        }
    }
}

fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{:x}",
        (nanos ^ std::process::id().rotate_left(16)) & 0xff_ffff
    )
}

/// What one case writes to the cluster.
struct Run<'a> {
    client: &'a Client,
    id: String,
}

/// A kube-apiserver response: status, body, warnings.
struct Response {
    ok: bool,
    body: Json,
    warnings: Vec<String>,
}

impl Run<'_> {
    fn namespace(&self) -> String {
        format!("interlock-test-{}", self.id)
    }

    fn renamed(&self, name: &str) -> String {
        format!("{name}-{}", self.id)
    }

    async fn send(&self, req: http::Request<Vec<u8>>) -> Result<Response, AgainstError> {
        let res = self
            .client
            .send(req.map(kube::client::Body::from))
            .await
            .map_err(AgainstError::Call)?;
        let ok = res.status().is_success();
        let warnings = res
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(warning_text)
            .collect();
        let bytes = res
            .into_body()
            .collect_bytes()
            .await
            .map_err(AgainstError::Call)?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Json::Null);
        Ok(Response { ok, body, warnings })
    }

    /// Creates `obj` for real; an error names it.
    async fn create(&self, path: &str, obj: &Json) -> Result<(), AgainstError> {
        let req = Request::new(path)
            .create(&PostParams::default(), obj.to_string().into_bytes())
            .map_err(AgainstError::Request)?;
        let res = self.send(req).await?;
        if res.ok {
            Ok(())
        } else {
            Err(AgainstError::Create {
                kind: obj["kind"].as_str().unwrap_or("?").to_string(),
                name: obj["metadata"]["name"].as_str().unwrap_or("?").to_string(),
                message: res.body["message"]
                    .as_str()
                    .unwrap_or("refused")
                    .to_string(),
            })
        }
    }

    async fn case(
        &self,
        policy_docs: &[Json],
        case: &Case,
        findings: &[Finding],
    ) -> Result<Vec<Row>, AgainstError> {
        let spec: TestSpec = case
            .header
            .value
            .get("spec")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(AgainstError::Spec)?
            .unwrap_or_default();
        let operation = spec
            .request
            .shape(!spec.old_objects.is_empty(), "")?
            .operation;
        let ns = self.namespace();
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {RUN_LABEL: self.id}}});
        self.create("/api/v1/namespaces", &namespace).await?;
        for obj in &spec.inventory {
            if let Some((path, obj)) = self.placed(obj, false).await? {
                self.create(&path, &obj).await?;
            }
        }
        let stored: Vec<&Json> = match operation {
            Operation::Update => spec.old_objects.iter().collect(),
            Operation::Delete => case.objects.iter().map(|d| &d.value).collect(),
            _ => Vec::new(),
        };
        for obj in stored {
            if let Some((path, obj)) = self.placed(obj, true).await? {
                self.create(&path, &obj).await?;
            }
        }
        for doc in policy_docs {
            let (path, obj) = self.policy_object(doc);
            self.create(&path, &obj).await?;
        }
        self.wait_until_live().await?;
        let mut rows = Vec::new();
        for d in &case.objects {
            let object = d.display_name();
            let kube = match self.placed(&d.value, true).await? {
                Some((path, obj)) => self.dry_run(operation, &path, &obj).await?,
                None => Answer {
                    error: Some("cluster-scoped: not sent".into()),
                    ..Answer::default()
                },
            };
            rows.push(Row {
                interlock: ours(findings, &d.value),
                kube,
                object,
            });
        }
        Ok(rows)
    }

    /// `obj` moved to the scratch namespace (with the run label when
    /// `labelled`) and the collection it is created in; `None` for a
    /// cluster-scoped object, which is never written.
    async fn placed(
        &self,
        obj: &Json,
        labelled: bool,
    ) -> Result<Option<(String, Json)>, AgainstError> {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = obj["kind"].as_str().unwrap_or_default();
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = kube::discovery::pinned_kind(self.client, &gvk)
            .await
            .map_err(|error| AgainstError::Discovery {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                error,
            })?;
        if caps.scope == Scope::Cluster {
            return Ok(None);
        }
        let mut obj = obj.clone();
        obj["metadata"]["namespace"] = self.namespace().into();
        for field in ["resourceVersion", "uid", "creationTimestamp"] {
            if let Some(m) = obj["metadata"].as_object_mut() {
                m.remove(field);
            }
        }
        if labelled {
            obj["metadata"]["labels"][RUN_LABEL] = self.id.clone().into();
        }
        Ok(Some((collection(&ar, Some(&self.namespace())), obj)))
    }

    /// A policy or binding as the run writes it: renamed, a binding
    /// confined to the run's objects and its params in the scratch namespace.
    fn policy_object(&self, doc: &Json) -> (String, Json) {
        let mut obj = json!({
            "apiVersion": doc["apiVersion"].clone(), "kind": doc["kind"].clone(),
            "metadata": {"name": self.renamed(doc["metadata"]["name"].as_str().unwrap_or("policy"))},
            "spec": doc["spec"].clone(),
        });
        let spec = &mut obj["spec"];
        if doc["kind"] == "ValidatingAdmissionPolicyBinding" {
            let policy = spec["policyName"].as_str().unwrap_or_default().to_string();
            spec["policyName"] = self.renamed(&policy).into();
            spec["matchResources"]["objectSelector"]["matchLabels"][RUN_LABEL] =
                self.id.clone().into();
            if spec
                .pointer("/paramRef/namespace")
                .is_some_and(Json::is_string)
            {
                spec["paramRef"]["namespace"] = self.namespace().into();
            }
            (format!("{VAP_API}/validatingadmissionpolicybindings"), obj)
        } else {
            (format!("{VAP_API}/validatingadmissionpolicies"), obj)
        }
    }

    /// Creates the sentinel policy and probes until it answers.
    async fn wait_until_live(&self) -> Result<(), AgainstError> {
        let name = self.renamed("interlock-test-sentinel");
        let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
            "spec": {"failurePolicy": "Ignore",
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"], "operations": ["CREATE"]}]},
                "validations": [{"expression": "false", "message": SENTINEL_MESSAGE}]}});
        let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Warn"],
                "matchResources": {"objectSelector": {"matchLabels": {PROBE_LABEL: self.id}}}}});
        self.create(&format!("{VAP_API}/validatingadmissionpolicies"), &policy)
            .await?;
        self.create(
            &format!("{VAP_API}/validatingadmissionpolicybindings"),
            &binding,
        )
        .await?;
        let probe = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "probe", "namespace": self.namespace(), "labels": {PROBE_LABEL: self.id}}});
        let path = format!("/api/v1/namespaces/{}/configmaps", self.namespace());
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let answer = self.dry_run(Operation::Create, &path, &probe).await?;
            if answer.warnings.iter().any(|w| w == SENTINEL_MESSAGE) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(AgainstError::NotLive(Duration::from_secs(60)))
    }

    /// Sends `obj` as a dry run of `operation`.
    async fn dry_run(
        &self,
        operation: Operation,
        path: &str,
        obj: &Json,
    ) -> Result<Answer, AgainstError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let params = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let body = obj.to_string().into_bytes();
        let req = match operation {
            Operation::Update => Request::new(path).replace(name, &params, body),
            Operation::Delete => Request::new(path).delete(
                name,
                &DeleteParams {
                    dry_run: true,
                    ..DeleteParams::default()
                },
            ),
            _ => Request::new(path).create(&params, body),
        }
        .map_err(AgainstError::Request)?;
        let res = self.send(req).await?;
        let mut answer = Answer {
            warnings: res.warnings,
            ..Answer::default()
        };
        if !res.ok {
            let message = res.body["message"]
                .as_str()
                .unwrap_or("refused")
                .to_string();
            // `pods "x" is forbidden: ValidatingAdmissionPolicy 'p' with
            // binding 'b' denied request: MESSAGE`
            match message.split_once("denied request: ") {
                Some((by, m)) if by.contains("ValidatingAdmissionPolicy '") => {
                    answer.denied = Some(m.to_string())
                }
                _ => answer.error = Some(message),
            }
        }
        Ok(answer)
    }

    /// Deletes what the run created; the namespace takes its objects along.
    async fn clean_up(&self, policy_docs: &[Json]) {
        let mut paths = vec![format!("/api/v1/namespaces/{}", self.namespace())];
        let sentinel = self.renamed("interlock-test-sentinel");
        for (kind, name) in policy_docs
            .iter()
            .map(|d| {
                (
                    d["kind"].as_str().unwrap_or_default(),
                    self.renamed(d["metadata"]["name"].as_str().unwrap_or("policy")),
                )
            })
            .chain([
                ("ValidatingAdmissionPolicy", sentinel.clone()),
                ("ValidatingAdmissionPolicyBinding", sentinel.clone()),
            ])
        {
            let plural = match kind {
                "ValidatingAdmissionPolicyBinding" => "validatingadmissionpolicybindings",
                _ => "validatingadmissionpolicies",
            };
            paths.push(format!("{VAP_API}/{plural}/{name}"));
        }
        for path in paths {
            let (base, name) = path.rsplit_once('/').unwrap_or((&path, ""));
            if let Ok(req) = Request::new(base).delete(name, &DeleteParams::default()) {
                if let Err(e) = self.send(req).await {
                    tracing::warn!(path = %path, error = %e, "cannot clean up");
                }
            }
        }
    }
}

/// The collection URL of a kind, in `ns` when namespaced.
fn collection(ar: &ApiResource, ns: Option<&str>) -> String {
    let base = if ar.group.is_empty() {
        format!("/api/{}", ar.version)
    } else {
        format!("/apis/{}/{}", ar.group, ar.version)
    };
    match ns {
        Some(ns) => format!("{base}/namespaces/{ns}/{}", ar.plural),
        None => format!("{base}/{}", ar.plural),
    }
}

/// The text of a policy's warning: `299 - "Validation failed for
/// ValidatingAdmissionPolicy 'p' with binding 'b': MESSAGE"` → MESSAGE.
fn warning_text(header: &str) -> String {
    let text = header
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start_matches(" - ")
        .trim_matches('"');
    match text.split_once("': ") {
        Some((by, m)) if by.starts_with("Validation failed for ValidatingAdmissionPolicy") => {
            m.replace("\\\"", "\"")
        }
        _ => text.to_string(),
    }
}

/// Interlock's answer for `obj`, from the case's findings.
fn ours(findings: &[Finding], obj: &Json) -> Answer {
    let meta = &obj["metadata"];
    let mine = findings.iter().filter(|f| {
        f.object.kind == obj["kind"].as_str().unwrap_or_default()
            && f.object.name == meta["name"].as_str().unwrap_or_default()
            && f.object.namespace.as_deref().unwrap_or("default")
                == meta["namespace"].as_str().unwrap_or("default")
    });
    let mut answer = Answer::default();
    for f in mine {
        match f.action {
            Action::Deny if answer.denied.is_none() => answer.denied = Some(f.message.clone()),
            Action::Warn => answer.warnings.push(f.message.clone()),
            _ => {}
        }
    }
    answer
}

#[cfg(test)]
#[path = "against_tests.rs"]
mod tests;
