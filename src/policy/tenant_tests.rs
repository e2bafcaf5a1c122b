use super::*;
use crate::inventory::{Inventory, Source};
use crate::policy::{Action, PolicySet, Request};
use serde_json::json;

/// A tenant policy of namespace `team-a` on ConfigMaps whose validation
/// is `expression`.
fn tenant_policy(expression: &str) -> Json {
    json!({
        "apiVersion": "interlock.dev/v1alpha1", "kind": KIND,
        "metadata": {"name": "no-x", "namespace": "team-a"},
        "spec": {
            "validationActions": ["Deny"],
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "operations": ["CREATE"]}]},
            "validations": [{"expression": expression, "message": "refused by the tenant"}]
        }
    })
}

fn configmap(namespace: &str, name: &str, data: Json) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace}, "data": data})
}

fn compile(doc: Json) -> (PolicySet, Vec<String>) {
    let mut inventory = Inventory::new();
    let source = Source {
        file: "t.yaml".into(),
        line: 1,
    };
    let (set, errors) = PolicySet::compile(&[(doc, source)]);
    inventory.set_indexes(&set.index_decls()).unwrap();
    (set, errors.into_iter().map(|e| e.message).collect())
}

fn verdicts(set: &PolicySet, inventory: &Inventory, object: &Json) -> Vec<(Action, String)> {
    let req = Request::create(object, "admin").expect("a request");
    set.evaluate(&req, inventory)
        .verdicts
        .into_iter()
        .map(|v| (v.action, v.message))
        .collect()
}

#[test]
fn a_tenant_policy_judges_only_its_own_namespace_under_its_qualified_name() {
    let (set, errors) = compile(tenant_policy("!has(object.data.x)"));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(set.policies[0].name, "team-a/no-x");
    let inventory = Inventory::new();
    let own = verdicts(
        &set,
        &inventory,
        &configmap("team-a", "c", json!({"x": "1"})),
    );
    assert_eq!(own, [(Action::Deny, "refused by the tenant".to_string())]);
    let other = verdicts(
        &set,
        &inventory,
        &configmap("team-b", "c", json!({"x": "1"})),
    );
    assert!(
        other.is_empty(),
        "another namespace is not judged: {other:?}"
    );
}

#[test]
fn a_lookup_naming_another_namespace_is_refused_with_its_field() {
    let reads = "inventory.list('v1', 'ConfigMap', 'team-b').size() == 0";
    let doc = tenant_policy(reads);
    let refused = refusal(&doc).expect("refused");
    assert!(
        refused.starts_with(
            "spec.validations[0].expression: inventory.list reads namespace \"team-b\""
        ),
        "{refused}"
    );
    let (set, errors) = compile(doc);
    assert!(set.is_empty(), "never loaded");
    assert!(errors[0].contains("reads only its own"), "{errors:?}");

    let everywhere = tenant_policy("inventory.list('v1', 'ConfigMap', '').size() == 0");
    assert!(refusal(&everywhere).is_some_and(|r| r.contains("every namespace")));
    let own = tenant_policy("inventory.list('v1', 'ConfigMap', 'team-a').size() < 10");
    assert_eq!(refusal(&own), None);
    // What does not compile is the status's to report, not a refusal.
    assert_eq!(refusal(&tenant_policy("object.(")), None);
    // Another kind is not judged.
    let mut cluster = own.clone();
    cluster["kind"] = json!("InterlockPolicy");
    assert_eq!(refusal(&cluster), None);
}

#[test]
fn claims_indexes_and_params_are_refused() {
    let mut doc = tenant_policy("true");
    doc["spec"]["indexes"] = json!([{"name": "by-host", "apiVersion": "v1", "kind": "ConfigMap", "keys": "[object.metadata.name]"}]);
    doc["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    let refused = refusal(&doc).expect("refused");
    assert!(refused.contains("spec.indexes:"), "{refused}");
    assert!(refused.contains("spec.paramKind:"), "{refused}");
}

#[test]
fn a_computed_namespace_is_confined_when_the_lookup_runs() {
    let reads = "inventory.list('v1', 'ConfigMap', object.data.ns).size() == 0";
    let (set, errors) = compile(tenant_policy(reads));
    assert!(errors.is_empty(), "{errors:?}");
    let mut inventory = Inventory::new();
    for ns in ["team-a", "team-b"] {
        inventory
            .upsert(&configmap(ns, "stored", json!({})), None)
            .expect("stored");
    }
    let own = verdicts(
        &set,
        &inventory,
        &configmap("team-a", "c", json!({"ns": "team-a"})),
    );
    assert_eq!(own.len(), 1, "its own namespace is read: {own:?}");
    assert_eq!(own[0].1, "refused by the tenant");
    let beyond = verdicts(
        &set,
        &inventory,
        &configmap("team-a", "c", json!({"ns": "team-b"})),
    );
    assert_eq!(beyond.len(), 1, "{beyond:?}");
    assert!(
        beyond[0]
            .1
            .contains("reads only its own namespace, not \"team-b\""),
        "{}",
        beyond[0].1
    );
}

#[test]
fn a_tenant_policy_without_a_namespace_does_not_load() {
    let mut doc = tenant_policy("true");
    doc["metadata"].as_object_mut().unwrap().remove("namespace");
    let (set, errors) = compile(doc);
    assert!(set.is_empty());
    assert!(
        errors[0].contains("metadata.namespace is required"),
        "{errors:?}"
    );
}
