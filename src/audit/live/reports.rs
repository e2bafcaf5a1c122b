//! The continuous audit's PolicyReports: the reports of the namespaces whose
//! results changed, applied only when they differ from what was last
//! written.
//!
//! Decisions:
//! - A namespace has a report once it has had a result; a report whose
//!   results cleared is emptied, not deleted (a reader watching it sees the
//!   fix), and a report goes away with its namespace (the namespace
//!   controller deletes it). The one-shot audit also writes empty reports
//!   for every namespace; a long-running process over thousands of
//!   namespaces writes only where there is something to say.
//! - The reports stored by an earlier run are listed at start: they are
//!   what "last written" is, so a restart over an unchanged cluster writes
//!   nothing, and a stale one (its objects fixed while no audit ran) is
//!   emptied by the first pass.
//! - A report that cannot be written stays pending and is tried again
//!   after the next pass; the results themselves are never lost.

use super::super::policy_report::{one, FormatChoice, ReportFormat, REPORT_NAME};
use super::super::write::{owned, FIELD_MANAGER};
use crate::report::Finding;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::Client;
use serde_json::Value as Json;
use std::collections::{BTreeSet, HashMap};

pub struct Reporter {
    client: Client,
    choice: FormatChoice,
    /// Decided when the stored reports are first listed.
    format: ReportFormat,
    /// What each report holds (summary, results), as last written or read.
    written: HashMap<String, Json>,
    /// Namespaces whose report must be compared (and maybe written) after
    /// the next pass.
    pending: BTreeSet<String>,
    seeded: bool,
    /// When to try listing the stored reports again after a failure.
    retry_seed: Option<std::time::Instant>,
}

/// Between attempts to list the stored reports (the CRDs not installed yet).
const SEED_RETRY: std::time::Duration = std::time::Duration::from_secs(60);

impl Reporter {
    pub fn new(client: Client, choice: FormatChoice) -> Self {
        Reporter {
            client,
            choice,
            format: ReportFormat::PolicyReport,
            written: HashMap::new(),
            pending: BTreeSet::new(),
            seeded: false,
            retry_seed: None,
        }
    }

    /// Reads the reports an earlier run stored (once; again after a
    /// failure, e.g. before the CRDs are installed).
    pub async fn seed(&mut self) {
        if self.seeded
            || self
                .retry_seed
                .is_some_and(|t| t > std::time::Instant::now())
        {
            return;
        }
        match self.choice.resolve(&self.client).await {
            Ok(f) => self.format = f,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?SEED_RETRY,
                    "audit: cannot tell which report kinds the cluster serves; reports are not written until this succeeds");
                self.retry_seed = Some(std::time::Instant::now() + SEED_RETRY);
                return;
            }
        }
        let params = ListParams::default()
            .labels("app.kubernetes.io/managed-by=interlock")
            .fields(&format!("metadata.name={REPORT_NAME}"));
        for cluster_scoped in [false, true] {
            let kind = self.format.kind(cluster_scoped);
            let resource = self.format.resource(cluster_scoped);
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
            match api.list(&params).await {
                Ok(list) => {
                    for o in list.items {
                        let ns = o.metadata.namespace.clone().unwrap_or_default();
                        let json = serde_json::to_value(o).unwrap_or_default();
                        self.written.insert(ns.clone(), owned_value(&json));
                        self.pending.insert(ns);
                    }
                }
                Err(e) => {
                    tracing::warn!(kind, error = %e, retry_in = ?SEED_RETRY, hint = hint(&e),
                        "audit: cannot list stored reports; reports are not written until this succeeds");
                    self.retry_seed = Some(std::time::Instant::now() + SEED_RETRY);
                    return;
                }
            }
        }
        self.seeded = true;
    }

    pub fn is_seeded(&self) -> bool {
        self.seeded
    }

    /// The report of a namespace ("" for the cluster-scoped one) as the
    /// desired object.
    pub fn desired(&self, namespace: &str, findings: &[&Finding]) -> Json {
        one(
            self.format,
            (!namespace.is_empty()).then_some(namespace),
            findings,
        )
    }

    /// Namespaces to look at now: the ones whose results changed, the ones
    /// left pending; each taken out (put back by [`Reporter::failed`]).
    pub fn take(&mut self, changed: &BTreeSet<String>) -> BTreeSet<String> {
        let mut out = std::mem::take(&mut self.pending);
        out.extend(changed.iter().cloned());
        out
    }

    /// Keeps `changed` for the first write (before the stored reports
    /// could be listed).
    pub fn defer(&mut self, changed: &BTreeSet<String>) {
        self.pending.extend(changed.iter().cloned());
    }

    /// Whether a namespace's report is one to write: it has results or
    /// was written before.
    pub fn wanted(&self, namespace: &str, findings: &[&Finding]) -> bool {
        !findings.is_empty() || self.written.contains_key(namespace)
    }

    /// The namespace is gone: its report went with it.
    pub fn forget(&mut self, namespace: &str) {
        self.written.remove(namespace);
    }

    /// Applies `report` when it differs from what was last written; returns
    /// whether it wrote.
    pub async fn write(&mut self, namespace: &str, report: &Json) -> Result<bool, kube::Error> {
        let now = owned_value(report);
        if self.written.get(namespace) == Some(&now) {
            return Ok(false);
        }
        let kind = report["kind"].as_str().unwrap_or_default();
        let ar = self.format.resource(namespace.is_empty());
        let api: Api<DynamicObject> = if namespace.is_empty() {
            Api::all_with(self.client.clone(), &ar)
        } else {
            Api::namespaced_with(self.client.clone(), namespace, &ar)
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch(REPORT_NAME, &params, &Patch::Apply(report)).await {
            Ok(_) => {
                tracing::info!(
                    kind,
                    namespace,
                    results = report["results"].as_array().map_or(0, Vec::len),
                    "audit: report written"
                );
                self.written.insert(namespace.to_string(), now);
                Ok(true)
            }
            Err(e) => {
                self.pending.insert(namespace.to_string());
                Err(e)
            }
        }
    }
}

/// What to do about a failed list or write of reports.
pub fn hint(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) if s.code == 403 => "grant list, create and patch on the report kinds (manifests/base/audit-rbac.yaml)",
        kube::Error::Api(s) if s.code == 404 => "install the report CRDs (manifests/openreports/crds.yaml or manifests/policyreport/crds.yaml)",
        _ => "retried",
    }
}

fn owned_value(o: &Json) -> Json {
    let (summary, results) = owned(o);
    serde_json::json!([summary, results])
}
