use super::*;
use serde_json::json;

fn cm(ns: &str, name: &str, host: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"namespace": ns, "name": name}, "data": {"host": host}})
}

fn names(entries: Vec<&Entry>) -> Vec<String> {
    entries.iter().map(|e| e.key.to_string()).collect()
}

#[test]
fn an_overlay_replaces_adds_and_hides_without_touching_its_base() {
    let mut base = Inventory::new();
    let id = base
        .declare_index("v1", "ConfigMap", "[object.data.host]")
        .expect("index");
    for (n, h) in [("a", "x"), ("b", "y"), ("c", "z")] {
        base.upsert(&cm("t", n, h), None).expect("upsert");
    }
    let mut o = Overlay::new(&base);
    o.put(&cm("t", "b", "x")).expect("replace b");
    o.put(&cm("t", "d", "w")).expect("add d");
    o.remove(&ObjectKey::of(&cm("t", "c", "")).expect("key"));

    let listed = names(o.list("", "ConfigMap", Some("t")));
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(listed[0].ends_with("/a") && listed[1].ends_with("/b") && listed[2].ends_with("/d"));
    assert_eq!(o.lookup_index(id, "x").len(), 2, "a, and b as replaced");
    assert!(o.lookup_index(id, "y").is_empty(), "b's old key is hidden");
    assert!(o.lookup_index(id, "z").is_empty(), "c is removed");
    let key = ObjectKeyRef {
        group: "",
        kind: "ConfigMap",
        namespace: "t",
        name: "b",
    };
    assert_eq!(o.find(key).expect("b").object.json()["data"]["host"], "x");
    // The base is as it was.
    assert_eq!(base.lookup_index(id, "y").len(), 1);
    assert_eq!(base.list("", "ConfigMap", None).len(), 3);
}
