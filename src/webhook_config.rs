//! `interlock webhook-config`: the Validating/MutatingWebhookConfiguration
//! for the loaded policies, so the webhook is called for exactly the writes
//! some policy can act on and the rules never drift from the policies.
//!
//! The blast radius when the webhook is down is decided here (see
//! docs/webhook-down.md):
//! - `validate.interlock.dev`, failurePolicy Fail: the rules of policies
//!   that can deny at admission. These writes must not slip through.
//! - `advise.interlock.dev`, failurePolicy Ignore: the rules of policies that
//!   only warn or audit at admission (or are failurePolicy Ignore), and the
//!   writes of kinds the policies look up (recorded as pending writes so a
//!   check right after sees them before the watch does). Losing these costs
//!   a warning or a few seconds of staleness, never a blocked write.
//! - `mutate.interlock.dev`, failurePolicy Fail: the rules of policies with
//!   mutations (none in the bundled library: then no webhook at all).
//!
//! Every webhook skips, by `matchConditions`, the cluster's own components
//! (kube-system ServiceAccounts, the controller manager, scheduler and
//! apiserver, nodes): the objects they write (a ReplicaSet's Pods, a Job's
//! Pods, a namespace's `kube-root-ca.crt`) come from templates a policy
//! already checked, and they must heal the cluster while Interlock is down.
//! Namespaces, Leases and Events are never sent, whatever a policy's
//! wildcards say, and neither is anything in kube-system or the webhook's
//! own namespace (namespaceSelector).

use crate::k8s::kinds::resource_of;
use crate::policy::load::{LoadedPolicies, PolicyLoadError};
use crate::policy::model::ResourceRule;
use crate::policy::{FailurePolicy, PolicySet};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// The configurations' name (both kinds).
pub const NAME: &str = "interlock";

/// Seconds kube-apiserver waits for a webhook whose failure refuses the
/// write. Short: a tenant retries, a hung webhook must not hold every write
/// for the default 10s. The server's own deadline (`--request-timeout` in
/// the Deployment) is below it, so the server answers before the apiserver
/// gives up.
pub const FAIL_TIMEOUT_SECONDS: u32 = 3;

/// Seconds for the webhook whose failure is ignored: only its latency is
/// at stake.
pub const IGNORE_TIMEOUT_SECONDS: u32 = 2;

/// Users the webhooks never see: the control plane's own identities.
const CONTROL_PLANE_USERS: &[&str] = &[
    "system:kube-controller-manager",
    "system:kube-scheduler",
    "system:apiserver",
];

/// Resources that must never depend on the webhook: Namespaces (a tenant's
/// onboarding and namespace cleanup), Leases (leader election, node
/// heartbeats, Interlock's own controller) and Events (everyone's
/// reporting).
const NEVER_SENT: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "events"),
    ("events.k8s.io", "events"),
    ("coordination.k8s.io", "leases"),
];

#[derive(Debug, thiserror::Error)]
pub enum WebhookConfigError {
    #[error(transparent)]
    Load(#[from] PolicyLoadError),
    #[error("--service must be NAMESPACE/NAME, got {0:?}")]
    Service(String),
    #[error("--url must be an https:// URL, got {0:?}")]
    Url(String),
    #[error("--ca-bundle {path}: {source}")]
    CaBundle {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where kube-apiserver reaches the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Service in the cluster (port 443).
    Service { namespace: String, name: String },
    /// A URL (`https://host:port`); the paths are appended.
    Url(String),
}

impl Endpoint {
    /// `NAMESPACE/NAME`.
    pub fn service(s: &str) -> Result<Endpoint, WebhookConfigError> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(Endpoint::Service {
                    namespace: ns.into(),
                    name: name.into(),
                })
            }
            _ => Err(WebhookConfigError::Service(s.into())),
        }
    }

    pub fn url(s: &str) -> Result<Endpoint, WebhookConfigError> {
        if s.starts_with("https://") && s.len() > "https://".len() {
            Ok(Endpoint::Url(s.trim_end_matches('/').into()))
        } else {
            Err(WebhookConfigError::Url(s.into()))
        }
    }

    fn client_config(&self, path: &str, ca_bundle: Option<&str>) -> Json {
        let mut c = match self {
            Endpoint::Service { namespace, name } => json!({"service": {
                "name": name, "namespace": namespace, "path": path, "port": 443}}),
            Endpoint::Url(u) => json!({"url": format!("{u}{path}")}),
        };
        if let Some(ca) = ca_bundle {
            c["caBundle"] = json!(ca);
        }
        c
    }
}

/// What to generate for.
#[derive(Debug, Clone)]
pub struct Options {
    pub endpoint: Endpoint,
    /// The CA certificate (PEM), base64-encoded into `caBundle`; `None`
    /// leaves it to an overlay or cert-manager's CA injector.
    pub ca_bundle_pem: Option<String>,
    /// The webhook's own namespace, never sent (so it can always be
    /// repaired): the Service's namespace, else `interlock-system`.
    pub own_namespace: String,
}

impl Options {
    pub fn new(endpoint: Endpoint) -> Options {
        let own_namespace = match &endpoint {
            Endpoint::Service { namespace, .. } => namespace.clone(),
            Endpoint::Url(_) => "interlock-system".into(),
        };
        Options {
            endpoint,
            ca_bundle_pem: None,
            own_namespace,
        }
    }
}

/// `interlock webhook-config`: loads the policies of `paths` (the bundled
/// library when empty) and returns both configurations as YAML.
pub fn run(
    paths: &[PathBuf],
    endpoint: Endpoint,
    ca_bundle: Option<&std::path::Path>,
) -> Result<String, WebhookConfigError> {
    let loaded = LoadedPolicies::from_paths(paths)?;
    let mut options = Options::new(endpoint);
    if let Some(path) = ca_bundle {
        let pem = std::fs::read_to_string(path).map_err(|source| WebhookConfigError::CaBundle {
            path: path.to_path_buf(),
            source,
        })?;
        options.ca_bundle_pem = Some(pem);
    }
    Ok(to_yaml(&loaded.policies, &options))
}

/// Both configurations as one YAML stream.
pub fn to_yaml(policies: &PolicySet, options: &Options) -> String {
    let (validating, mutating) = generate(policies, options);
    let mut out = String::from(
        "# Generated by `interlock webhook-config` from the loaded policies; do not edit.\n\
         # Which writes go to the webhook, and what happens when it is down:\n\
         # docs/webhook-down.md.\n",
    );
    for doc in [validating, mutating] {
        out.push_str("---\n");
        out.push_str(&crate::group::yaml::to_yaml(&doc));
    }
    out
}

/// One (group, resource-with-subresource, scope) of a rule, with its
/// versions and operations.
type Atoms = BTreeMap<(String, String, String), (BTreeSet<String>, BTreeSet<String>)>;

/// The ValidatingWebhookConfiguration and the MutatingWebhookConfiguration.
pub fn generate(policies: &PolicySet, options: &Options) -> (Json, Json) {
    let bound = || policies.policies.iter().filter(|p| p.is_bound());
    let mut must = Atoms::new();
    let mut advise = Atoms::new();
    // A MutatingAdmissionPolicy only mutates (through `/mutate`).
    for p in bound().filter(|p| p.kind != crate::policy::PolicyKind::Map) {
        let strict = p.may_deny_at_admission() && p.failure_policy() == FailurePolicy::Fail;
        let into = if strict { &mut must } else { &mut advise };
        for r in &p.match_constraints().resource_rules {
            add_rule(into, r);
        }
    }
    // Kinds the policies look up: their writes are recorded as pending, so
    // a decision right after sees them before the watch delivers them.
    for kind in policies.kinds_read() {
        let group = kind.group();
        let resource = resource_of(group, kind.kind());
        add_atom(
            &mut advise,
            group,
            &resource,
            "*",
            kind.version(),
            ["CREATE", "UPDATE"],
        );
    }
    // A ResourceGroup is judged by its members' findings at admission, so
    // `kubectl apply` of an invalid group is refused at once: strict, as
    // the members' Deny verdicts are.
    if !policies.is_empty() {
        add_atom(
            &mut must,
            "interlock.dev",
            "resourcegroups",
            "Namespaced",
            "v1alpha1",
            ["CREATE", "UPDATE"],
        );
    }
    // A tenant's policy that reaches beyond its namespace is refused at
    // admission (admission/namespace_policy.rs). Advisory: while the
    // webhook is down one is admitted, and the compiler still keeps it out
    // of force (its status says why).
    if !policies.is_empty() {
        add_atom(
            &mut advise,
            "interlock.dev",
            "interlocknamespacepolicies",
            "Namespaced",
            "v1alpha1",
            ["CREATE", "UPDATE"],
        );
    }
    subtract(&mut advise, &must);
    let mut mutate = Atoms::new();
    for p in bound().filter(|p| !p.mutations.is_empty()) {
        for r in &p.match_constraints().resource_rules {
            add_rule(&mut mutate, r);
        }
    }

    let ca = options.ca_bundle_pem.as_deref().map(|pem| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(pem)
    });
    // Claims of unique keys write Leases, except on dry runs (docs/admission.md).
    let side_effects = if policies.has_claims() {
        "NoneOnDryRun"
    } else {
        "None"
    };
    let webhook = |name: &str, path: &str, atoms: &Atoms, fail: bool| -> Option<Json> {
        let rules = rules(atoms);
        if rules.is_empty() {
            return None;
        }
        Some(json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": side_effects,
            "failurePolicy": if fail { "Fail" } else { "Ignore" },
            "matchPolicy": "Equivalent",
            "timeoutSeconds": if fail { FAIL_TIMEOUT_SECONDS } else { IGNORE_TIMEOUT_SECONDS },
            "clientConfig": options.endpoint.client_config(path, ca.as_deref()),
            "namespaceSelector": {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": excluded_namespaces(&options.own_namespace),
            }]},
            "matchConditions": match_conditions(),
            "rules": rules,
        }))
    };
    let mut validating: Vec<Json> = [
        webhook("validate.interlock.dev", "/validate", &must, true),
        webhook("advise.interlock.dev", "/validate", &advise, false),
    ]
    .into_iter()
    .flatten()
    .collect();
    // The ownership boundary of ResourceGroup members (admission/boundary.rs):
    // only objects that carry an ApplySet part-of label are sent. It fails
    // open: while the webhook is down a member can be edited by hand, and
    // the controller reverts the edit; failing closed would also block the
    // controller's own applies.
    validating.push(json!({
        "name": "members.interlock.dev",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "matchPolicy": "Equivalent",
        "timeoutSeconds": IGNORE_TIMEOUT_SECONDS,
        "clientConfig": options.endpoint.client_config("/validate", ca.as_deref()),
        "namespaceSelector": {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": excluded_namespaces(&options.own_namespace),
        }]},
        "objectSelector": {"matchExpressions": [{
            "key": "applyset.kubernetes.io/part-of", "operator": "Exists"}]},
        "matchConditions": match_conditions(),
        "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                   "operations": ["CREATE", "UPDATE", "DELETE"], "scope": "Namespaced"}],
    }));
    let mut mutating: Vec<Json> = webhook("mutate.interlock.dev", "/mutate", &mutate, true)
        .into_iter()
        .collect();
    for m in &mut mutating {
        // A later mutation may change what an earlier one matched on.
        m["reinvocationPolicy"] = json!("IfNeeded");
    }
    let config = |kind: &str, webhooks: Vec<Json>| {
        let mut config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": NAME, "labels": {"app.kubernetes.io/name": "interlock"}},
        });
        // No `webhooks: []`: the API server stores an empty list as no
        // field, so `kubectl apply` would see a change and rewrite the
        // object on every apply of the same manifests. An absent field
        // still removes the webhooks of an older apply.
        if !webhooks.is_empty() {
            config["webhooks"] = Json::Array(webhooks);
        }
        config
    };
    (
        config("ValidatingWebhookConfiguration", validating),
        config("MutatingWebhookConfiguration", mutating),
    )
}

fn excluded_namespaces(own: &str) -> Vec<String> {
    let mut v = vec!["kube-system".to_string(), own.to_string()];
    v.sort();
    v.dedup();
    v
}

/// The exemptions, as CEL on the request. All must be true for the webhook
/// to be called. They name only identities a tenant cannot take: a
/// username under `system:serviceaccount:kube-system:` is a token of a
/// kube-system ServiceAccount, and `system:nodes` a kubelet's certificate;
/// whoever holds either already controls the control plane. A tenant's own
/// ServiceAccount of the same name (`system:serviceaccount:TENANT:
/// replicaset-controller`) is still checked.
fn match_conditions() -> Json {
    let users = CONTROL_PLANE_USERS
        .iter()
        .map(|u| format!("'{u}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let never = NEVER_SENT
        .iter()
        .map(|(g, r)| {
            format!("(request.resource.group == '{g}' && request.resource.resource == '{r}')")
        })
        .collect::<Vec<_>>()
        .join(" || ");
    json!([
        {"name": "not-kube-system-serviceaccount",
         "expression": "!request.userInfo.username.startsWith('system:serviceaccount:kube-system:')"},
        {"name": "not-control-plane",
         "expression": format!("!(request.userInfo.username in [{users}])")},
        {"name": "not-node",
         "expression": "!request.userInfo.username.startsWith('system:node:') && !(has(request.userInfo.groups) && 'system:nodes' in request.userInfo.groups)"},
        // Rules name these kinds only through a policy's wildcards.
        {"name": "not-infrastructure-kind",
         "expression": format!("!({never})")},
    ])
}

fn add_rule(into: &mut Atoms, r: &ResourceRule) {
    let scope = r.scope.as_deref().unwrap_or("*");
    for g in &r.api_groups {
        for res in &r.resources {
            for v in &r.api_versions {
                add_atom(
                    into,
                    g,
                    res,
                    scope,
                    v,
                    r.operations.iter().map(String::as_str),
                );
            }
        }
    }
}

fn add_atom<'a>(
    into: &mut Atoms,
    group: &str,
    resource: &str,
    scope: &str,
    version: &str,
    operations: impl IntoIterator<Item = &'a str>,
) {
    let base = resource.split('/').next().unwrap_or(resource);
    if NEVER_SENT.iter().any(|(g, r)| *g == group && *r == base) {
        return;
    }
    let e = into
        .entry((group.to_string(), resource.to_string(), scope.to_string()))
        .or_default();
    e.0.insert(version.to_string());
    e.1.extend(operations.into_iter().map(str::to_string));
}

/// Drops from `from` the (versions, operations) already sent by `by`, so no
/// write is sent to two webhooks (each call evaluates every policy).
fn subtract(from: &mut Atoms, by: &Atoms) {
    from.retain(|(g, res, _), (versions, ops)| {
        // Whatever scope `by` names for the resource, a "*" there covers it.
        let covering: Vec<_> = by
            .iter()
            .filter(|((bg, bres, bscope), _)| bg == g && bres == res && bscope == "*")
            .collect();
        versions.retain(|v| {
            let mut left = ops.clone();
            for (_, (bv, bops)) in &covering {
                if bv.contains(v) || bv.contains("*") {
                    left.retain(|o| !bops.contains(o) && !bops.contains("*"));
                }
            }
            !left.is_empty()
        });
        !versions.is_empty()
    });
}

/// Atoms regrouped into as few rules as keep them exact: resources that
/// share group, scope, versions and operations go in one rule.
fn rules(atoms: &Atoms) -> Vec<Json> {
    type Key = (String, String, Vec<String>, Vec<String>);
    let mut by: BTreeMap<Key, BTreeSet<String>> = BTreeMap::new();
    for ((g, res, scope), (versions, ops)) in atoms {
        let mut ops: Vec<String> = ops.iter().cloned().collect();
        // kube-apiserver's order, which reads better than the alphabet.
        ops.sort_by_key(|o| {
            ["CREATE", "UPDATE", "DELETE", "CONNECT", "*"]
                .iter()
                .position(|x| x == o)
        });
        let key = (
            g.clone(),
            scope.clone(),
            versions.iter().cloned().collect(),
            ops,
        );
        by.entry(key).or_default().insert(res.clone());
    }
    by.into_iter()
        .map(|((g, scope, versions, ops), resources)| {
            json!({
                "apiGroups": [g],
                "apiVersions": versions,
                "resources": resources,
                "operations": ops,
                "scope": scope,
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "webhook_config_tests.rs"]
mod tests;
