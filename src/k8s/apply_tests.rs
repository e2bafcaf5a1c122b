use super::*;
use crate::k8s::openapi;
use serde_json::json;

fn deployment() -> &'static Schema {
    openapi::builtin()
        .root("apps", "v1", "Deployment")
        .expect("Deployment's schema")
}

fn apply_deployment(live: Json, patch: Json) -> Result<Json, ApplyError> {
    apply(openapi::builtin(), Some(deployment()), &live, &patch)
}

fn with_containers(containers: Json) -> Json {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"template": {"spec": {"containers": containers}}}})
}

#[test]
fn maps_merge_and_scalars_are_replaced() {
    let live =
        json!({"metadata": {"name": "d", "labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 1}});
    let patch = json!({"metadata": {"labels": {"b": "3", "c": "4"}}, "spec": {"replicas": 3}});
    assert_eq!(
        apply_deployment(live, patch).unwrap(),
        json!({"metadata": {"name": "d", "labels": {"a": "1", "b": "3", "c": "4"}}, "spec": {"replicas": 3}})
    );
}

#[test]
fn map_lists_merge_items_by_key_in_the_patch_order() {
    let live = with_containers(json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]));
    let patch = with_containers(json!([{"name": "c", "image": "z"}, {"name": "a", "image": "x2"}]));
    let out = apply_deployment(live, patch).unwrap();
    assert_eq!(
        out.pointer("/spec/template/spec/containers").unwrap(),
        &json!([{"name": "c", "image": "z"}, {"name": "a", "image": "x2"}, {"name": "b", "image": "y"}])
    );
}

#[test]
fn atomic_lists_in_the_patch_are_refused_with_their_path() {
    let live = with_containers(json!([{"name": "a", "args": ["x"]}]));
    let patch = with_containers(json!([{"name": "a", "args": ["y"]}]));
    assert_eq!(
        apply_deployment(live, patch).unwrap_err().to_string(),
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.template.spec.containers[0].args"
    );
}

#[test]
fn undeclared_fields_are_refused() {
    let patch = json!({"spec": {"replicaz": 1}});
    assert_eq!(
        apply_deployment(with_containers(json!([])), patch).unwrap_err().to_string(),
        "failed to convert patch object to typed object: .spec.replicaz: field not declared in schema"
    );
}

#[test]
fn a_null_scalar_is_kept_as_null_and_a_null_map_keeps_the_live_map() {
    let live = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 2}});
    let patch = json!({"metadata": {"labels": null}, "spec": {"replicas": null}});
    assert_eq!(
        apply_deployment(live, patch).unwrap(),
        json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": null}})
    );
}

#[test]
fn without_a_schema_objects_merge_and_lists_are_replaced() {
    let live = json!({"spec": {"a": 1, "l": [1, 2]}});
    let patch = json!({"spec": {"b": 2, "l": [3]}});
    assert_eq!(
        apply(openapi::builtin(), None, &live, &patch).unwrap(),
        json!({"spec": {"a": 1, "b": 2, "l": [3]}})
    );
}

#[test]
fn set_lists_take_the_patch_order_and_keep_the_rest_after_the_shared_items() {
    let live = json!({"metadata": {"finalizers": ["a", "c"]}});
    let patch = json!({"metadata": {"finalizers": ["b", "a"]}});
    assert_eq!(
        apply_deployment(live, patch).unwrap(),
        json!({"metadata": {"finalizers": ["b", "a", "c"]}})
    );
}

#[test]
fn undeclared_fields_of_an_object_that_preserves_unknown_fields_merge_as_deduced() {
    let schema: Schema = serde_json::from_value(json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"size": {"type": "integer"}}
        }}
    }))
    .expect("a schema");
    let live = json!({"spec": {"size": 1, "extra": {"a": 1, "list": [1, 2]}}});
    let patch = json!({"spec": {"extra": {"b": 2, "list": [3]}, "more": "x"}});
    assert_eq!(
        apply(openapi::builtin(), Some(&schema), &live, &patch).unwrap(),
        json!({"spec": {"size": 1, "extra": {"a": 1, "b": 2, "list": [3]}, "more": "x"}})
    );
    // Without the extension the same patch is refused.
    let mut strict = schema.clone();
    strict
        .properties
        .get_mut("spec")
        .unwrap()
        .preserve_unknown_fields = false;
    assert!(matches!(
        apply(openapi::builtin(), Some(&strict), &live, &patch),
        Err(ApplyError::Undeclared(_))
    ));
}
