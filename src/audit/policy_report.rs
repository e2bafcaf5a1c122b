//! Audit results as PolicyReport / ClusterPolicyReport objects
//! (`wgpolicyk8s.io/v1alpha2`, the format Kyverno and Policy Reporter
//! read) or as their successors, OpenReports' Report / ClusterReport
//! (`openreports.io/v1alpha1`, the same fields), as `interlock audit
//! --write-reports` and the continuous audit store them (see
//! docs/audit.md).
//!
//! Decisions:
//! - `--report-format auto` (the default) writes what the cluster serves,
//!   OpenReports when it serves both: the tools that read reports are
//!   moving there, and a cluster that installed it did so on purpose.
//! - One PolicyReport named [`REPORT_NAME`] per namespace, every audited
//!   namespace included (an empty report is how a fixed object's result
//!   clears), and one ClusterPolicyReport for cluster-scoped objects.
//! - No timestamps and a fixed order: the same results give the same
//!   object, so a server-side apply of an unchanged report is not a write
//!   worth making, and comparing is enough to skip it.
//! - A namespace's report names objects of other namespaces only by kind,
//!   as admission does with redaction on: a tenant who may read its own
//!   report learns nothing of another tenant's names.

use crate::report::{Action, Finding, Report};
use kube::api::ApiResource;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

/// `metadata.name` of every report Interlock writes.
pub const REPORT_NAME: &str = "interlock";

/// The kinds the results are stored as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// `wgpolicyk8s.io/v1alpha2` PolicyReport and ClusterPolicyReport.
    PolicyReport,
    /// `openreports.io/v1alpha1` Report and ClusterReport.
    OpenReports,
}

/// `--report-format`: a format, or whichever the cluster serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FormatChoice {
    /// OpenReports when the cluster serves it, else PolicyReport.
    #[default]
    Auto,
    PolicyReport,
    OpenReports,
}

impl ReportFormat {
    pub fn api_version(self) -> &'static str {
        match self {
            ReportFormat::PolicyReport => "wgpolicyk8s.io/v1alpha2",
            ReportFormat::OpenReports => "openreports.io/v1alpha1",
        }
    }

    /// The kind of a namespace's report, or of the cluster-scoped one.
    pub fn kind(self, cluster_scoped: bool) -> &'static str {
        match (self, cluster_scoped) {
            (ReportFormat::PolicyReport, false) => "PolicyReport",
            (ReportFormat::PolicyReport, true) => "ClusterPolicyReport",
            (ReportFormat::OpenReports, false) => "Report",
            (ReportFormat::OpenReports, true) => "ClusterReport",
        }
    }

    /// The bundled definitions, for the message when the cluster lacks them.
    pub fn crd_file(self) -> &'static str {
        match self {
            ReportFormat::PolicyReport => "manifests/policyreport/crds.yaml",
            ReportFormat::OpenReports => "manifests/openreports/crds.yaml",
        }
    }

    pub fn resource(self, cluster_scoped: bool) -> ApiResource {
        let api_version = self.api_version();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = self.kind(cluster_scoped);
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_ascii_lowercase()),
        }
    }
}

impl FormatChoice {
    /// The format to write: the one chosen, or with `auto` OpenReports when
    /// the cluster serves `openreports.io/v1alpha1`, else PolicyReport
    /// (whose absence the write then names).
    pub async fn resolve(self, client: &kube::Client) -> Result<ReportFormat, kube::Error> {
        match self {
            FormatChoice::PolicyReport => Ok(ReportFormat::PolicyReport),
            FormatChoice::OpenReports => Ok(ReportFormat::OpenReports),
            FormatChoice::Auto => {
                let open = ReportFormat::OpenReports.api_version();
                match client.list_api_group_resources(open).await {
                    Ok(_) => Ok(ReportFormat::OpenReports),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(ReportFormat::PolicyReport),
                    Err(e) => Err(e),
                }
            }
        }
    }
}

/// The reports for `report`'s results: one per namespace of `namespaces`
/// (and per namespace with results), and the cluster-scoped one (for
/// cluster-scoped objects) last. Each sorted, without timestamps.
pub fn policy_reports(
    report: &Report,
    namespaces: &BTreeSet<String>,
    format: ReportFormat,
) -> Vec<Json> {
    let mut by_ns: BTreeMap<&str, Vec<&Finding>> =
        namespaces.iter().map(|n| (n.as_str(), vec![])).collect();
    let mut cluster: Vec<&Finding> = vec![];
    for f in &report.results {
        match f.object.namespace.as_deref() {
            Some(ns) => by_ns.entry(ns).or_default().push(f),
            None => cluster.push(f),
        }
    }
    let mut out: Vec<Json> = by_ns
        .into_iter()
        .map(|(ns, findings)| one(format, Some(ns), &findings))
        .collect();
    out.push(one(format, None, &cluster));
    out
}

/// One report: of `namespace`, or the cluster-scoped one.
pub(crate) fn one(format: ReportFormat, namespace: Option<&str>, findings: &[&Finding]) -> Json {
    let mut results: Vec<Json> = findings.iter().map(|f| result(f, namespace)).collect();
    results.sort_by_key(|r| r.to_string());
    let count = |r: &str| results.iter().filter(|x| x["result"] == r).count();
    let summary = json!({
        "pass": 0, "fail": count("fail"), "warn": count("warn"), "error": 0, "skip": 0,
    });
    let mut metadata = json!({
        "name": REPORT_NAME,
        "labels": {"app.kubernetes.io/managed-by": "interlock"},
    });
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": format.api_version(),
        "kind": format.kind(namespace.is_none()),
        "metadata": metadata,
        "summary": summary,
        "results": results,
    })
}

/// One result, its related objects redacted outside `namespace`.
fn result(f: &Finding, namespace: Option<&str>) -> Json {
    let mut message = f.message.clone();
    let mut related = Vec::new();
    for r in &f.related {
        let o = &r.object;
        let visible = o.namespace.is_none() || o.namespace.as_deref() == namespace;
        if visible {
            related.push(o.to_string());
        } else {
            let hidden = format!("{} in another namespace", o.kind);
            if let Some(ns) = &o.namespace {
                message = message.replace(&format!("{ns}/{}", o.name), &hidden);
            }
            related.push(hidden);
        }
    }
    related.sort();
    related.dedup();
    let mut properties = json!({"action": f.action.as_str()});
    if !related.is_empty() {
        properties["related"] = json!(related.join(", "));
    }
    if let Some(reason) = &f.reason {
        properties["reason"] = json!(reason);
    }
    let mut resource = json!({
        "apiVersion": f.object.api_version,
        "kind": f.object.kind,
        "name": f.object.name,
    });
    if let Some(ns) = &f.object.namespace {
        resource["namespace"] = json!(ns);
    }
    json!({
        "source": "interlock",
        "policy": f.policy,
        "rule": f.binding.as_deref().unwrap_or(&f.policy),
        // Deny is a failure; Warn and Audit pass at admission.
        "result": if f.action == Action::Deny { "fail" } else { "warn" },
        "scored": true,
        "message": message,
        "resources": [resource],
        "properties": properties,
    })
}

#[cfg(test)]
#[path = "policy_report_tests.rs"]
mod tests;
