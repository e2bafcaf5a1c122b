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
