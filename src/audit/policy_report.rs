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
mod tests {
    use super::*;
    use crate::report::{ObjectRef, RelatedObject, SourceLocation};

    fn obj(ns: Option<&str>, kind: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "networking.k8s.io/v1".into(),
            kind: kind.into(),
            namespace: ns.map(str::to_string),
            name: name.into(),
        }
    }

    fn finding(object: ObjectRef, related: Vec<ObjectRef>, message: &str) -> Finding {
        Finding {
            policy: "unique-ingress-host".into(),
            binding: None,
            action: Action::Deny,
            object,
            message: message.into(),
            source: SourceLocation::at("cluster", 0),
            related: related
                .into_iter()
                .map(|object| RelatedObject {
                    object,
                    source: None,
                })
                .collect(),
            reason: None,
        }
    }

    #[test]
    fn a_tenant_report_names_another_tenants_object_only_by_kind() {
        let report = Report {
            results: vec![
                finding(
                    obj(Some("team-b"), "Ingress", "copy"),
                    vec![obj(Some("team-a"), "Ingress", "shop")],
                    "host shop.example is taken by team-a/shop",
                ),
                finding(
                    obj(Some("team-a"), "Ingress", "shop"),
                    vec![obj(Some("team-b"), "Ingress", "copy")],
                    "host shop.example is taken by team-b/copy",
                ),
            ],
            ..Report::default()
        };
        let quiet: BTreeSet<String> = ["team-c".to_string()].into();
        let reports = policy_reports(&report, &quiet, ReportFormat::PolicyReport);
        let names: Vec<String> = reports
            .iter()
            .map(|r| format!("{} {}", r["kind"], r["metadata"]["namespace"]))
            .collect();
        assert_eq!(
            names,
            vec![
                r#""PolicyReport" "team-a""#,
                r#""PolicyReport" "team-b""#,
                r#""PolicyReport" "team-c""#,
                r#""ClusterPolicyReport" null"#,
            ]
        );
        let b = &reports[1];
        let text = b.to_string();
        assert!(!text.contains("team-a"), "{b:#}");
        assert!(!text.contains("shop\""), "{b:#}");
        assert_eq!(
            b["results"][0]["message"],
            "host shop.example is taken by Ingress in another namespace"
        );
        assert_eq!(
            b["results"][0]["properties"]["related"],
            "Ingress in another namespace"
        );
        assert_eq!(b["results"][0]["result"], "fail");
        assert_eq!(b["summary"]["fail"], 1);
        assert_eq!(
            reports[2]["results"],
            json!([]),
            "an audited namespace without results has an empty report"
        );
        // Stable: the same results in another order give the same objects.
        let mut reversed = report.clone();
        reversed.results.reverse();
        assert_eq!(
            policy_reports(&reversed, &quiet, ReportFormat::PolicyReport),
            reports
        );
        // OpenReports: the same results under its kinds.
        let open = policy_reports(&report, &quiet, ReportFormat::OpenReports);
        assert_eq!(open[1]["apiVersion"], "openreports.io/v1alpha1");
        assert_eq!(open[1]["kind"], "Report");
        assert_eq!(open[3]["kind"], "ClusterReport");
        assert_eq!(open[1]["results"], b["results"]);
    }
}
