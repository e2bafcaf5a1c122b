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
    let (set, errors) = PolicySet::compile(&docs);
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
