use super::*;
use serde_json::json;

fn sel(v: Json) -> LabelSelector {
    serde_json::from_value(v).unwrap()
}

#[test]
fn selectors_follow_kubernetes_rules() {
    let l = json!({"app": "web", "tier": "front"});
    let l = l.as_object();
    assert!(sel(json!({})).matches(l).unwrap());
    assert!(sel(json!({"matchLabels": {"app": "web"}}))
        .matches(l)
        .unwrap());
    assert!(!sel(json!({"matchLabels": {"app": "db"}}))
        .matches(l)
        .unwrap());
    assert!(sel(
        json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]})
    )
    .matches(l)
    .unwrap());
    assert!(
        sel(json!({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["a"]}]}))
            .matches(l)
            .unwrap()
    );
    assert!(
        !sel(json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}))
            .matches(l)
            .unwrap()
    );
    assert!(
        sel(json!({"matchExpressions": [{"key": "app", "operator": "Bad"}]}))
            .matches(l)
            .is_err()
    );
    assert!(!sel(json!({"matchLabels": {"app": "web"}}))
        .matches(None)
        .unwrap());
}
