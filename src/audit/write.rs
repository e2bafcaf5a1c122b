//! Writes the audit's PolicyReports by server-side apply, only those whose
//! results differ from what is stored: an unchanged cluster costs one read
//! per report and no write.

use super::policy_report::{API_VERSION, REPORT_NAME};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
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
    #[error("the cluster has no {0} kind (wgpolicyk8s.io/v1alpha2); install it with `kubectl apply --server-side -f manifests/policyreport/crds.yaml`")]
    NoCrd(String),
    #[error("cannot write {kind} {name}: {source}")]
    Kube {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

pub(crate) fn resource(kind: &str) -> ApiResource {
    let (group, version) = API_VERSION.split_once('/').unwrap_or(("", API_VERSION));
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: API_VERSION.into(),
        kind: kind.into(),
        plural: format!("{}s", kind.to_ascii_lowercase()),
    }
}

/// The fields the audit owns, to compare a stored report with a desired one.
pub(crate) fn owned(o: &Json) -> (&Json, &Json) {
    (&o["summary"], &o["results"])
}

/// Applies each of `reports` whose summary or results differ from the
/// stored one.
pub async fn write_reports(client: &Client, reports: &[Json]) -> Result<Written, WriteError> {
    let mut done = Written::default();
    for desired in reports {
        let kind = desired["kind"].as_str().unwrap_or_default();
        let ar = resource(kind);
        let api: Api<DynamicObject> = match desired["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let err = |source: kube::Error| WriteError::Kube {
            kind: kind.into(),
            name: format!(
                "{}/{REPORT_NAME}",
                desired["metadata"]["namespace"].as_str().unwrap_or("")
            ),
            source,
        };
        // Not found is `None`, a missing kind included: the apply says which.
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
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 404 => WriteError::NoCrd(kind.into()),
            e => err(e),
        })?;
        tracing::info!(
            kind,
            namespace = desired["metadata"]["namespace"].as_str(),
            "report written"
        );
        done.written += 1;
    }
    Ok(done)
}
