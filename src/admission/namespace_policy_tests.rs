use super::*;
use serde_json::{json, Value as Json};

fn tenant_policy(namespace: &str) -> Json {
    json!({
        "apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockNamespacePolicy",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "operations": ["CREATE"]}]},
            "validations": [{"expression":
                format!("inventory.get('v1', 'ConfigMap', '{namespace}', 'x') == null")}]
        }
    })
}

#[test]
fn a_tenant_policy_reading_another_namespace_is_refused_at_its_creation() {
    let doc = tenant_policy("team-b");
    let r = Request::create(&doc, "tenant").expect("a request");
    let v = verdicts(&r);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].action, Action::Deny);
    assert!(
        v[0].message.contains("namespace \"team-b\""),
        "{}",
        v[0].message
    );

    let own = tenant_policy("team-a");
    let r = Request::create(&own, "tenant").expect("a request");
    assert!(verdicts(&r).is_empty());
}
