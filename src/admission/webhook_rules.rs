//! `serve --sync-webhook-rules NAME`: the rules of the webhook
//! configurations named NAME follow the policies loaded (files, bundled,
//! and InterlockPolicy objects): what `interlock webhook-config` computes
//! offline, applied by the running server after every policy change.
//!
//! Only `rules` of the webhooks the policies decide (`validate`, `advise`
//! and `mutate.interlock.dev`) are written; everything else of the stored
//! configurations (clientConfig and caBundle, namespaceSelector,
//! matchConditions, failurePolicy, other webhooks) is kept as whoever owns
//! it wrote it, so the blast-radius exclusions of docs/webhook-down.md
//! (those selectors and conditions, and the kinds `webhook_config` never
//! puts in a rule) are never removed. Opt-in, because the configurations
//! may be owned by helm or GitOps, which would fight the server's writes.

use crate::cluster::Cluster;
use crate::policy::PolicySet;
use crate::webhook_config::{generate, Endpoint, Options};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The webhooks whose rules the policies decide.
const POLICY_WEBHOOKS: &[&str] = &[
    "validate.interlock.dev",
    "advise.interlock.dev",
    "mutate.interlock.dev",
];

const KINDS: &[&str] = &[
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
];

/// The rules each policy-decided webhook should have, by kind and webhook
/// name (an absent webhook: no rule).
pub fn desired_rules(policies: &PolicySet) -> BTreeMap<(&'static str, String), Json> {
    // Only the rules are read: the endpoint is never written.
    let options = Options::new(Endpoint::Url("https://rules.invalid".into()));
    let (validating, mutating) = generate(policies, &options);
    let mut out = BTreeMap::new();
    for (kind, config) in KINDS.iter().zip([validating, mutating]) {
        for w in config["webhooks"].as_array().into_iter().flatten() {
            let name = w["name"].as_str().unwrap_or_default().to_string();
            out.insert((*kind, name), w["rules"].clone());
        }
    }
    out
}

/// `stored` with the rules of its policy-decided webhooks as `desired`
/// says; None when nothing changes.
pub fn with_rules(
    kind: &'static str,
    stored: &Json,
    desired: &BTreeMap<(&'static str, String), Json>,
) -> Option<Json> {
    let mut out = stored.clone();
    let mut changed = false;
    for w in out["webhooks"].as_array_mut().into_iter().flatten() {
        let name = w["name"].as_str().unwrap_or_default().to_string();
        if !POLICY_WEBHOOKS.contains(&name.as_str()) {
            continue;
        }
        let want = desired
            .get(&(kind, name))
            .cloned()
            .unwrap_or_else(|| Json::Array(Vec::new()));
        if w["rules"] != want {
            w["rules"] = want;
            changed = true;
        }
    }
    changed.then_some(out)
}

/// Keeps the configurations named `name` in step with the policies in
/// force until aborted: looks at each new policy generation, and again
/// every half minute (an edit by someone else, a write that failed).
pub async fn run(client: kube::Client, cluster: Arc<Cluster>, name: String) {
    let apis: Vec<(&'static str, Api<DynamicObject>)> = KINDS
        .iter()
        .map(|k| {
            let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", k);
            (
                *k,
                Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk)),
            )
        })
        .collect();
    let mut seen = None;
    let mut since = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let published = cluster.published();
        let stale = since.elapsed() > Duration::from_secs(30);
        if seen == Some(published.generation) && !stale {
            continue;
        }
        since = tokio::time::Instant::now();
        let desired = desired_rules(&published.policies);
        let mut all_written = true;
        for (kind, api) in &apis {
            all_written &= sync(api, kind, &name, &desired).await;
        }
        if all_written {
            seen = Some(published.generation);
        }
    }
}

/// One configuration; false when it could not be read or written.
async fn sync(
    api: &Api<DynamicObject>,
    kind: &'static str,
    name: &str,
    desired: &BTreeMap<(&'static str, String), Json>,
) -> bool {
    let stored = match api.get_opt(name).await {
        Ok(Some(o)) => o,
        // Nothing to keep in step: the site has not registered one.
        Ok(None) => return true,
        Err(e) => {
            tracing::warn!(kind, name, error = %e, "webhook configuration not readable");
            return false;
        }
    };
    let Ok(json) = serde_json::to_value(&stored) else {
        return false;
    };
    let Some(updated) = with_rules(kind, &json, desired) else {
        return true;
    };
    let Ok(updated) = serde_json::from_value::<DynamicObject>(updated) else {
        return false;
    };
    // A replace with the resourceVersion read: a concurrent edit wins and
    // the next look computes again.
    match api.replace(name, &PostParams::default(), &updated).await {
        Ok(_) => {
            tracing::info!(kind, name, "webhook rules follow the policies");
            true
        }
        Err(e) => {
            tracing::warn!(kind, name, error = %e, "webhook rules not written");
            false
        }
    }
}

#[cfg(test)]
#[path = "webhook_rules_tests.rs"]
mod tests;
