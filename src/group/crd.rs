//! The `ResourceGroup` kind (`interlock.dev/v1alpha1`) as Rust types, and the
//! names the controller writes onto members (labels, finalizer, manager).
//!
//! The CRD is generated from these types (`interlock crd`), so the schema the
//! API server validates and the types the controller reads cannot disagree.

use base64::Engine as _;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the project's kinds.
pub const GROUP: &str = "interlock.dev";
/// `apiVersion` of a ResourceGroup.
pub const API_VERSION: &str = "interlock.dev/v1alpha1";
/// `kind` of a ResourceGroup.
pub const KIND: &str = "ResourceGroup";
/// Keeps a group in the API until its members are deleted or released.
pub const FINALIZER: &str = "interlock.dev/members";
/// KEP-3659 member label: the ApplySet id of the group that owns the object.
pub const PART_OF_LABEL: &str = "applyset.kubernetes.io/part-of";
/// KEP-3659 parent label, on the group itself.
pub const APPLYSET_ID_LABEL: &str = "applyset.kubernetes.io/id";
/// KEP-3659 parent annotation naming the tool that manages the set.
pub const APPLYSET_TOOLING_ANNOTATION: &str = "applyset.kubernetes.io/tooling";
/// KEP-3659 parent annotation listing the group-kinds of the members
/// (`Kind.group`, core kinds as `Kind`, sorted, comma-separated).
pub const APPLYSET_GROUP_KINDS_ANNOTATION: &str = "applyset.kubernetes.io/contains-group-kinds";
/// Server-side apply field manager of every member write.
pub const FIELD_MANAGER: &str = "interlock";
/// Most members one group may hold: the whole group is one object in etcd
/// (1.5 MiB at most) and one admission call, so it has to stay small.
pub const MAX_MEMBERS: usize = 100;

/// A group of objects validated and applied as one unit.
// Clippy reads the repeated `type_ = "string"` of the printer columns as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "interlock.dev",
    version = "v1alpha1",
    kind = "ResourceGroup",
    namespaced,
    shortname = "rg",
    status = "ResourceGroupStatus",
    derive = "PartialEq",
    doc = "A group of objects validated against every policy as one unit, then applied by server-side apply as the group's ServiceAccount",
    label("applyset.kubernetes.io/is-parent-type", "true"),
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Valid")].status"#
    ),
    printcolumn(
        name = "Applied",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Applied")].status"#
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        priority = 1,
        json_path = r#".status.conditions[?(@.type=="Ready")].reason"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroupSpec {
    /// The ServiceAccount of the group's namespace that members are written as
    /// (impersonation): a group can create only what this account may create.
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: String,
    /// Whole manifests of the members. Namespace defaults to the group's; a
    /// member in another namespace or of a cluster-scoped kind is refused.
    #[serde(default)]
    #[schemars(schema_with = "members_schema")]
    pub resources: Vec<serde_json::Value>,
    /// Delete members that are no longer listed (default true).
    #[serde(default = "default_true")]
    pub prune: bool,
    /// Observe and report only: write nothing (default false).
    #[serde(default)]
    pub suspend: bool,
    /// What happens to the members when the group is deleted.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// Readiness rules for members of a kind, CEL over `object` (the member
    /// as stored): for kinds with a built-in rule they must hold as well,
    /// for any other kind they replace the generic `Ready` condition rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_READY_RULES))]
    pub ready_when: Vec<ReadyWhen>,
    /// Apply a rank of the apply order only once every member of the
    /// earlier ranks is ready (default false: every rank in one pass).
    #[serde(default)]
    pub wait_for_ready: bool,
    /// With `waitForReady`: how long the group waits for one rank before
    /// `Ready` is False with reason `Timeout` (nothing is undone, the wait
    /// goes on). Go duration syntax: `90s`, `10m`, `1h30m`.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout: String,
    /// What a member edited outside the group gets: `Revert` (default, put
    /// back on the next pass) or `Report` (listed in status, not written
    /// unless its manifest in the group changes).
    #[serde(default)]
    pub drift: DriftPolicy,
}

/// `spec.readyTimeout` when the group does not say.
pub const DEFAULT_READY_TIMEOUT: &str = "10m";

fn default_ready_timeout() -> String {
    DEFAULT_READY_TIMEOUT.to_string()
}

/// What the controller does about a member that differs from the group's
/// manifest of it.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DriftPolicy {
    /// Apply it again: the stored object is put back as the group says.
    #[default]
    Revert,
    /// List the fields that differ in `status.members[].drift` and the
    /// `Drifted` condition; write the member only when its manifest in the
    /// group changes.
    Report,
}

/// Most readyWhen rules one group may hold.
pub const MAX_READY_RULES: usize = 32;

/// One readiness rule of `spec.readyWhen`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReadyWhen {
    /// Only members of this apiVersion (default: members of the kind in any
    /// API group and version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The members' kind.
    #[schemars(length(min = 1))]
    pub kind: String,
    /// CEL over `object`, the member as stored; the member is ready when it
    /// is true. Compiled at admission of the group, like a policy's.
    #[schemars(length(min = 1))]
    pub expression: String,
}

fn default_true() -> bool {
    true
}

/// `resources`: a bounded list of embedded objects. The API server keeps
/// their fields (preserve-unknown-fields) and checks that each has
/// apiVersion, kind and valid metadata (embedded-resource).
fn members_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Whole manifests of the members, applied as one unit.",
        "type": "array",
        "maxItems": MAX_MEMBERS,
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-embedded-resource": true
        }
    })
}

/// What happens to the members when the group is deleted.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeletionPolicy {
    /// Members are deleted, in reverse apply order, before the group goes.
    #[default]
    Delete,
    /// Members stay, without the group's ownerReference and labels.
    Orphan,
}

/// What the controller observed, for `status.observedGeneration`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroupStatus {
    /// The generation the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Valid`, `Applied` and `Ready`.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// One per desired or still-owned member.
    #[serde(default)]
    pub members: Vec<MemberStatus>,
    /// What blocks or warns, in the shape of `interlock check`'s JSON results.
    #[serde(default)]
    pub findings: Vec<GroupFinding>,
    /// With `waitForReady`: the member a later rank waits for, and since
    /// when; absent when nothing waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<WaitingFor>,
}

/// The member that holds back the later ranks of a `waitForReady` group.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WaitingFor {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// When the group began to wait for this rank (RFC 3339); the timeout
    /// counts from here.
    #[schemars(extend("format" = "date-time"))]
    pub since: String,
}

/// A condition, as in `metav1.Condition`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Valid`, `Applied` or `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    /// One CamelCase word (`PolicyViolation`, `Conflict`, ...).
    pub reason: String,
    #[serde(default)]
    pub message: String,
    /// The generation this condition describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: String,
}

/// `True`, `False` or `Unknown`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    // Anything else a client wrote reads as Unknown rather than failing the
    // whole object's decoding.
    #[serde(other)]
    Unknown,
}

/// One member, as the last reconcile saw it.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// UID of the stored object, once it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    pub state: MemberState,
    /// Whether the stored object reports ready; absent until it is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Why the member is not applied or not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// With `drift: Report`: the fields of the member's manifest that the
    /// stored object lacks or contradicts (`data.mode`,
    /// `spec.template.spec.containers[0].image`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
}

/// Where one member stands.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// Being written on this pass (new, changed or edited by hand).
    Pending,
    /// Not written yet: with `waitForReady`, an earlier rank is not ready.
    Waiting,
    /// The stored object holds every field of the desired one.
    Applied,
    /// Not written: the member itself is fine, but the group as a whole is
    /// invalid, in conflict or suspended.
    Blocked,
    /// Not a usable manifest (no apiVersion, kind or name; not an object).
    Invalid,
    /// In another namespace, cluster-scoped, or of an unknown kind.
    OutOfScope,
    /// An object of that name exists and belongs to someone else.
    Conflict,
    /// The API server refused the write (the message says why).
    Failed,
    /// No longer listed: deleted once every listed member is applied.
    Pruning,
    /// No longer listed, and kept because `prune` is false.
    Unlisted,
    /// Being deleted with the group.
    Deleting,
    /// Left in place without the group's ownerReference and labels.
    Orphaned,
}

/// One violated rule, in the shape of `interlock check`'s JSON results.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GroupFinding {
    pub policy: String,
    #[serde(default)]
    pub binding: Option<String>,
    pub action: FindingAction,
    pub object: FindingObject,
    pub message: String,
}

/// What a violated rule does.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingAction {
    Deny,
    Warn,
    Audit,
}

/// The object a finding is about.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FindingObject {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub name: String,
}

/// The KEP-3659 ApplySet id of a group:
/// `applyset-<base64url(sha256("<name>.<namespace>.<Kind>.<group>"))>-v1`,
/// the value of the parent's `applyset.kubernetes.io/id` label and of every
/// member's `applyset.kubernetes.io/part-of` label.
pub fn applyset_id(namespace: &str, name: &str) -> String {
    let input = format!("{name}.{namespace}.{KIND}.{GROUP}");
    let digest = ring::digest::digest(&ring::digest::SHA256, input.as_bytes());
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
    format!("applyset-{encoded}-v1")
}

/// The CustomResourceDefinition of every kind of the project, as JSON.
pub fn crds() -> Vec<serde_json::Value> {
    use kube::CustomResourceExt as _;
    // A generated CRD always serialises (string keys, no floats out of range).
    vec![serde_json::to_value(ResourceGroup::crd()).unwrap_or_default()]
}

impl GroupFinding {
    /// A policy engine verdict about `member` (the object as evaluated), in
    /// the status's shape.
    pub fn from_verdict(verdict: &crate::policy::Verdict, member: &serde_json::Value) -> Self {
        GroupFinding {
            policy: verdict.policy.clone(),
            binding: verdict.binding.clone(),
            action: match verdict.action {
                crate::policy::Action::Deny => FindingAction::Deny,
                crate::policy::Action::Warn => FindingAction::Warn,
                crate::policy::Action::Audit => FindingAction::Audit,
            },
            object: FindingObject::of(member),
            message: verdict.message.clone(),
        }
    }
}

impl FindingObject {
    /// The member as a finding names it.
    pub fn of(member: &serde_json::Value) -> Self {
        let s = |p: &str| member.pointer(p).and_then(serde_json::Value::as_str);
        FindingObject {
            api_version: s("/apiVersion").unwrap_or_default().to_string(),
            kind: s("/kind").unwrap_or_default().to_string(),
            namespace: s("/metadata/namespace").map(str::to_string),
            name: s("/metadata/name").unwrap_or_default().to_string(),
        }
    }
}

#[cfg(test)]
#[path = "crd_tests.rs"]
mod tests;
