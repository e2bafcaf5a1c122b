use super::*;
use crate::manifest::{load_str, Format, LoadOptions, Source};
use serde_json::json;

fn round_trip(v: &Value) -> Value {
    let text = to_yaml(v);
    let loaded = load_str(Source::Stdin, &text, Format::Yaml, &LoadOptions::default());
    assert!(loaded.errors.is_empty(), "{text}\n{:?}", loaded.errors);
    loaded.documents[0].value.clone()
}

#[test]
fn tricky_strings_read_back_as_strings() {
    let v = json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
        "data": {
            "yes": "yes", "on": "Off", "n": "n", "null": "null", "num": "1.0",
            "octal": "0755", "colon": "a: b", "hash": "a #b", "quote": "\"x\"",
            "lead": " x", "trail": "x ", "empty": "", "multi": "a\nb",
            "dash": "- x", "star": "*x", "url": "https://x:8080/p", "time": "2024-01-01",
            "jsonpath": ".status.conditions[?(@.type==\"Ready\")].status",
            "unicode": "é\u{1F600}", "tab": "a\tb"
        }
    });
    assert_eq!(round_trip(&v), v);
}

#[test]
fn nested_collections_read_back() {
    let v = json!({
        "apiVersion": "v1", "kind": "Thing", "metadata": {"name": "l"},
        "spec": {
            "n": [1, -2, 3.5, true, null],
            "empty": {"m": {}, "l": []},
            "lol": [[1, 2], [], [{"a": 1}]],
            "objs": [{"a": {"b": [{"c": "d", "e": [1]}]}, "f": 2}, {}],
            "x-kubernetes-list-map-keys": ["type"]
        }
    });
    assert_eq!(round_trip(&v), v);
}

#[test]
fn plain_strings_stay_unquoted() {
    let text = to_yaml(&json!({"kind": "Deployment", "path": ".spec.name"}));
    assert_eq!(text, "kind: Deployment\npath: \".spec.name\"\n");
}
