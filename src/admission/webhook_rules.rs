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
mod tests {
    use super::*;
    use serde_json::json;

    fn policies(resources: &[&str]) -> PolicySet {
        let docs: Vec<(Json, crate::inventory::Source)> = resources
            .iter()
            .map(|r| {
                let doc = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
                    "metadata": {"name": format!("p-{r}")},
                    "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""],
                        "apiVersions": ["*"], "resources": [r], "operations": ["*"]}]},
                        "validationActions": ["Deny"],
                        "validations": [{"expression": "true"}]}});
                (doc, crate::policy::objects::source_of(r))
            })
            .collect();
        let (set, errors) = PolicySet::compile(&docs, &mut crate::inventory::Inventory::new());
        assert!(errors.is_empty(), "{errors:?}");
        set
    }

    fn stored() -> Json {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "interlock", "resourceVersion": "7"},
            "webhooks": [
                {"name": "validate.interlock.dev", "clientConfig": {"url": "https://x/validate"},
                 "namespaceSelector": {"matchLabels": {"team": "a"}},
                 "rules": [{"apiGroups": [""], "apiVersions": ["*"], "resources": ["configmaps"],
                            "operations": ["CREATE"]}]},
                {"name": "someone-elses.example", "rules": []}]})
    }

    #[test]
    fn only_the_rules_of_the_policy_webhooks_change() {
        let desired = desired_rules(&policies(&["services"]));
        let kind = "ValidatingWebhookConfiguration";
        let updated = with_rules(kind, &stored(), &desired).expect("the rules change");
        let hook = &updated["webhooks"][0];
        let resources: Vec<&str> = hook["rules"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["resources"].as_array().unwrap())
            .filter_map(Json::as_str)
            .collect();
        assert!(resources.contains(&"services"), "{resources:?}");
        assert!(!resources.contains(&"configmaps"), "{resources:?}");
        assert_eq!(
            hook["namespaceSelector"],
            stored()["webhooks"][0]["namespaceSelector"]
        );
        assert_eq!(
            hook["clientConfig"],
            stored()["webhooks"][0]["clientConfig"]
        );
        assert_eq!(updated["webhooks"][1], stored()["webhooks"][1]);
        assert_eq!(updated["metadata"]["resourceVersion"], "7");
        assert!(with_rules(kind, &updated, &desired).is_none(), "converged");
    }

    /// A policy that names Namespaces never puts them into a rule, and the
    /// stored exclusions (matchConditions) stay as they were.
    #[test]
    fn the_exclusions_are_never_removed() {
        let desired = desired_rules(&policies(&["namespaces", "services"]));
        let key = (
            "ValidatingWebhookConfiguration",
            "validate.interlock.dev".to_string(),
        );
        let rules = desired[&key].to_string();
        assert!(rules.contains("\"services\""), "{rules}");
        assert!(!rules.contains("\"namespaces\""), "{rules}");
        let mut with_conditions = stored();
        let conditions = json!([{"name": "not-node", "expression": "true"}]);
        with_conditions["webhooks"][0]["matchConditions"] = conditions.clone();
        let updated = with_rules(key.0, &with_conditions, &desired).unwrap();
        assert_eq!(updated["webhooks"][0]["matchConditions"], conditions);
        let none = desired_rules(&policies(&[]));
        let updated = with_rules("ValidatingWebhookConfiguration", &stored(), &none).unwrap();
        assert_eq!(
            updated["webhooks"][0]["rules"],
            json!([]),
            "no policy: no rule"
        );
    }
}
