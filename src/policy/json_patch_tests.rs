use super::*;
use serde_json::json;

#[test]
fn operations_apply_in_order() {
    let doc = json!({"metadata": {"labels": {"a": "1"}}, "l": [1, 2]});
    let ops = [
        json!({"op": "add", "path": "/metadata/labels/b", "value": "2"}),
        json!({"op": "replace", "path": "/metadata/labels/a", "value": "x"}),
        json!({"op": "add", "path": "/l/-", "value": 3}),
        json!({"op": "remove", "path": "/l/0"}),
        json!({"op": "add", "path": "/metadata/labels/c~1d", "value": "e"}),
    ];
    assert_eq!(
        apply(&doc, &ops).unwrap(),
        json!({"metadata": {"labels": {"a": "x", "b": "2", "c/d": "e"}}, "l": [2, 3]})
    );
}

#[test]
fn a_failed_test_drops_the_whole_patch() {
    let doc = json!({"a": 1});
    let ops = [
        json!({"op": "add", "path": "/b", "value": 2}),
        json!({"op": "test", "path": "/a", "value": 2}),
    ];
    assert_eq!(apply(&doc, &ops).unwrap(), doc);
}

#[test]
fn failures_say_what_kube_apiserver_says() {
    let doc = json!({"metadata": {}});
    let add = [json!({"op": "add", "path": "/metadata/labels/a", "value": "1"})];
    assert_eq!(
        apply(&doc, &add).unwrap_err().to_string(),
        "JSON Patch: add operation does not apply: doc is missing path: \"/metadata/labels/a\": missing value"
    );
    let remove = [json!({"op": "remove", "path": "/metadata/x"})];
    assert_eq!(
        apply(&doc, &remove).unwrap_err().to_string(),
        "JSON Patch: error in remove for path: '/metadata/x': Unable to remove nonexistent key: x: missing value"
    );
}

#[test]
fn replace_sets_a_missing_member_of_an_object() {
    let doc = json!({"data": {}});
    let replace = [json!({"op": "replace", "path": "/data/x", "value": "1"})];
    assert_eq!(apply(&doc, &replace).unwrap(), json!({"data": {"x": "1"}}));
}
