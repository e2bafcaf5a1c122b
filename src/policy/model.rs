//! Policy documents as written: ValidatingAdmissionPolicy,
//! MutatingAdmissionPolicy, their bindings, and Interlock's own
//! `InterlockPolicy`.

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    #[serde(default)]
    pub failure_policy: Option<String>,
    #[serde(default)]
    pub param_kind: Option<ParamKind>,
    #[serde(default)]
    pub match_constraints: Option<MatchResources>,
    #[serde(default)]
    pub validations: Vec<Validation>,
    #[serde(default)]
    pub audit_annotations: Vec<AuditAnnotation>,
    #[serde(default)]
    pub match_conditions: Vec<NamedExpression>,
    #[serde(default)]
    pub variables: Vec<NamedExpression>,
    // InterlockPolicy only: the policy binds itself.
    #[serde(default)]
    pub validation_actions: Vec<String>,
    /// InterlockPolicy only: the actions at admission (`interlock serve`),
    /// when they differ from `validationActions` (which `check`, audits and
    /// groups use). For rules about objects that may be created later.
    #[serde(default)]
    pub admission_actions: Vec<String>,
    /// InterlockPolicy only: the actions for objects read from files
    /// (`interlock check`, `interlock test`), when they differ from
    /// `validationActions` (which audits and groups keep). For rules whose
    /// files may not hold the whole cluster.
    #[serde(default)]
    pub check_actions: Vec<String>,
    #[serde(default)]
    pub param_ref: Option<ParamRef>,
    #[serde(default)]
    pub indexes: Vec<IndexDecl>,
    #[serde(default)]
    pub mutations: Vec<Mutation>,
    #[serde(default)]
    pub reinvocation_policy: Option<String>,
    /// InterlockPolicy only: keys of its indexes that one holder at a time
    /// may hold, arbitrated by the API server (see `policy::claims`).
    #[serde(default)]
    pub claims: Vec<ClaimDecl>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimDecl {
    /// The name of one of the policy's `indexes`.
    pub index: String,
    /// `Namespace` or `Object`.
    pub holder: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BindingSpec {
    pub policy_name: String,
    #[serde(default)]
    pub param_ref: Option<ParamRef>,
    #[serde(default)]
    pub match_resources: Option<MatchResources>,
    #[serde(default)]
    pub validation_actions: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamKind {
    pub api_version: String,
    pub kind: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamRef {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub parameter_not_found_action: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchResources {
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default)]
    pub object_selector: Option<LabelSelector>,
    #[serde(default)]
    pub resource_rules: Vec<ResourceRule>,
    #[serde(default)]
    pub exclude_resource_rules: Vec<ResourceRule>,
    #[serde(default)]
    pub match_policy: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRule {
    #[serde(default)]
    pub resource_names: Vec<String>,
    #[serde(default)]
    pub operations: Vec<String>,
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub api_versions: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub scope: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    pub expression: String,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub message_expression: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditAnnotation {
    pub key: String,
    pub value_expression: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedExpression {
    pub name: String,
    pub expression: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IndexDecl {
    pub name: String,
    pub api_version: String,
    pub kind: String,
    pub keys: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mutation {
    #[serde(default)]
    pub patch_type: String,
    #[serde(default)]
    pub json_patch: Option<JsonPatchMutation>,
    /// MutatingAdmissionPolicy only: an `Object{...}` merged over the
    /// object as server-side apply merges.
    #[serde(default)]
    pub apply_configuration: Option<JsonPatchMutation>,
}

/// The expression of a `jsonPatch` or an `applyConfiguration`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JsonPatchMutation {
    pub expression: String,
}
