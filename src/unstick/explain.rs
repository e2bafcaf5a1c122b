//! The pure half of `interlock unstick`: who removes a finalizer, how old a
//! deletion is, and the patch that clears one finalizer. No I/O here, so
//! every rule the runbook (docs/finalizers.md) states is unit-tested.

use chrono::{DateTime, Utc};
use serde_json::{json, Value as Json};

/// Interlock's own finalizer on ResourceGroups (`crate::group::crd::FINALIZER`;
/// repeated so this front-end depends only on k8s/ and kube).
pub const INTERLOCK_FINALIZER: &str = "interlock.dev/members";
/// The finalizer of `Namespace.spec.finalizers`.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// Which controller is expected to remove a finalizer, and what it waits for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Remover {
    /// Who: a controller name, or the field manager that added the finalizer.
    pub controller: String,
    /// Where the answer came from: `well-known` or `managedFields`.
    pub source: &'static str,
    /// What the controller waits for before it removes the finalizer.
    pub waits_for: String,
    /// The Lease (namespace, name) whose renewals show the controller alive.
    #[serde(skip)]
    pub lease: Option<(&'static str, &'static str)>,
}

/// The well-known finalizers, then the manager that wrote it to
/// metadata.finalizers (from `managedFields`), else unknown.
pub fn remover(finalizer: &str, metadata: &Json) -> Remover {
    let kcm = Some(("kube-system", "kube-controller-manager"));
    let known = |controller: &str, waits_for: &str, lease| Remover {
        controller: controller.into(),
        source: "well-known",
        waits_for: waits_for.into(),
        lease,
    };
    match finalizer {
        "kubernetes.io/pvc-protection" => known(
            "kube-controller-manager (pvc-protection)",
            "no Pod uses the PersistentVolumeClaim any more",
            kcm,
        ),
        "kubernetes.io/pv-protection" => known(
            "kube-controller-manager (pv-protection)",
            "the PersistentVolume is no longer bound to a claim",
            kcm,
        ),
        "foregroundDeletion" => known(
            "kube-controller-manager (garbage collector)",
            "every dependent with blockOwnerDeletion is deleted",
            kcm,
        ),
        "orphan" => known(
            "kube-controller-manager (garbage collector)",
            "the ownerReferences of the dependents are removed",
            kcm,
        ),
        NAMESPACE_FINALIZER => known(
            "kube-controller-manager (namespace controller)",
            "every object in the namespace is deleted",
            kcm,
        ),
        INTERLOCK_FINALIZER => known(
            "interlock controller",
            "the group's members are deleted or released (spec.deletionPolicy)",
            // The default of `interlock controller --lease-namespace/--lease-name`.
            Some(("interlock-system", "interlock-controller")),
        ),
        other => match added_by(other, metadata) {
            Some(manager) => Remover {
                controller: manager,
                source: "managedFields",
                waits_for: "unknown: ask the owner of that controller".into(),
                lease: None,
            },
            None => Remover {
                controller: "unknown".into(),
                source: "none",
                waits_for: "unknown: no managedFields entry owns this finalizer".into(),
                lease: None,
            },
        },
    }
}

/// The field manager whose managedFields entry owns `finalizer` in
/// metadata.finalizers (`f:metadata.f:finalizers.v:"NAME"`). A finalizer
/// written at creation belongs to the creating manager, which is the best
/// evidence the API keeps of who expects to remove it.
pub fn added_by(finalizer: &str, metadata: &Json) -> Option<String> {
    let key = format!("v:{}", Json::String(finalizer.into()));
    metadata
        .get("managedFields")?
        .as_array()?
        .iter()
        .find(|m| {
            m.pointer("/fieldsV1/f:metadata/f:finalizers")
                .and_then(|f| f.get(&key))
                .is_some()
        })
        .and_then(|m| m.get("manager")?.as_str().map(str::to_string))
}

/// Seconds since `metadata.deletionTimestamp` at `now`; None when the
/// object is not being deleted (or the timestamp does not parse).
pub fn deleting_for(metadata: &Json, now: DateTime<Utc>) -> Option<i64> {
    let ts = metadata.get("deletionTimestamp")?.as_str()?;
    let at = DateTime::parse_from_rfc3339(ts).ok()?;
    Some((now - at.with_timezone(&Utc)).num_seconds().max(0))
}

/// `45s`, `12m`, `3h20m`, `2d4h`: ages as kubectl prints them.
pub fn human_age(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

/// The JSON patch that removes exactly `finalizer`, at index `index` of
/// metadata.finalizers, from the object as it was at `resource_version`.
/// The `test` ops make the API server refuse it (422) if anything changed
/// since: a concurrent write then fails instead of being clobbered, and an
/// index that shifted never removes another controller's finalizer.
pub fn clear_patch(finalizer: &str, index: usize, resource_version: &str) -> Json {
    let path = format!("/metadata/finalizers/{index}");
    json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ])
}

/// What removing `finalizer` skips, said before it is done.
pub fn clearing_means(finalizer: &str, remover: &Remover) -> String {
    match finalizer {
        "kubernetes.io/pvc-protection" | "kubernetes.io/pv-protection" => {
            "the volume can be deleted while a Pod still uses it; data in use may be lost".into()
        }
        "foregroundDeletion" => {
            "the owner goes before its dependents; the garbage collector still deletes them".into()
        }
        "orphan" => "dependents keep an ownerReference to an owner that no longer exists; \
             the garbage collector may delete them later"
            .into(),
        INTERLOCK_FINALIZER => "the group goes without its members being deleted or released: \
             they stay, and the garbage collector deletes those whose ownerReference names the group"
            .into(),
        _ => format!(
            "{} will not run its cleanup: whatever it holds outside this object (cloud resources, \
             DNS records, volumes) is not released and must be cleaned up by hand",
            remover.controller
        ),
    }
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
