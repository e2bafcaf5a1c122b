//! Writes the audit's PolicyReports by server-side apply, only those whose
//! results differ from what is stored: an unchanged cluster costs one read
//! per report and no write.

use super::policy_report::{ReportFormat, REPORT_NAME};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::Client;
use serde_json::Value as Json;

/// The field manager of every report write.
pub const FIELD_MANAGER: &str = "interlock-audit";

/// How many reports were written and left alone.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub written: usize,
    pub unchanged: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("the cluster has no {kind} kind ({api_version}); install it with `kubectl apply --server-side -f {file}`, or choose the other with --report-format")]
    NoCrd {
        kind: &'static str,
        api_version: &'static str,
        file: &'static str,
    },
    #[error("cannot write {kind} {name}: {source}")]
    Kube {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The fields the audit owns, to compare a stored report with a desired one.
pub(crate) fn owned(o: &Json) -> (&Json, &Json) {
    (&o["summary"], &o["results"])
}

/// Applies each of `reports` (all of `format`) whose summary or results
/// differ from the stored one.
pub async fn write_reports(
    client: &Client,
    format: ReportFormat,
    reports: &[Json],
) -> Result<Written, WriteError> {
    let mut done = Written::default();
    for desired in reports {
        let namespace = desired["metadata"]["namespace"].as_str();
        let kind = format.kind(namespace.is_none());
        let ar = format.resource(namespace.is_none());
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        // A 404 for a single name is `None` from `get_opt`; one that is
        // still an error is a kind the cluster does not serve.
        let err = |source: kube::Error| match source {
            kube::Error::Api(s) if s.code == 404 => WriteError::NoCrd {
                kind,
                api_version: format.api_version(),
                file: format.crd_file(),
            },
            source => WriteError::Kube {
                kind: kind.into(),
                name: format!("{}/{REPORT_NAME}", namespace.unwrap_or("")),
                source,
            },
        };
        let stored = api.get_opt(REPORT_NAME).await.map_err(err)?;
        if let Some(stored) = stored {
            let stored = serde_json::to_value(stored).unwrap_or_default();
            if owned(&stored) == owned(desired) {
                done.unchanged += 1;
                continue;
            }
        }
        api.patch(
            REPORT_NAME,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(desired),
        )
        .await
        .map_err(err)?;
        tracing::info!(
            kind,
            namespace = desired["metadata"]["namespace"].as_str(),
            "report written"
        );
        done.written += 1;
    }
    Ok(done)
}
