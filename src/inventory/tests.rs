use super::*;
use serde_json::json;

fn ingress(ns: &str, name: &str, hosts: &[&str]) -> Arc<Json> {
    let rules: Vec<Json> = hosts.iter().map(|h| json!({"host": h})).collect();
    Arc::new(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": ns, "name": name}, "spec": {"rules": rules}}),
    )
}

#[test]
fn indexes_follow_upserts_and_removals() {
    let mut inv = Inventory::new();
    inv.upsert(&ingress("a", "one", &["x.example.com"]), None)
        .unwrap();
    let id = inv
        .declare_index(
            "networking.k8s.io/v1",
            "Ingress",
            "object.spec.rules.map(r, r.host)",
        )
        .unwrap();
    assert_eq!(inv.lookup_index(id, "x.example.com").len(), 1);
    inv.upsert(
        &ingress("b", "two", &["x.example.com", "y.example.com"]),
        None,
    )
    .unwrap();
    assert_eq!(inv.lookup_index(id, "x.example.com").len(), 2);
    // Replacing an object drops its old keys.
    inv.upsert(&ingress("b", "two", &["y.example.com"]), None)
        .unwrap();
    assert_eq!(inv.lookup_index(id, "x.example.com").len(), 1);
    let key = ObjectKey::of(&ingress("a", "one", &[])).unwrap();
    inv.remove(&key);
    assert!(inv.lookup_index(id, "x.example.com").is_empty());
    assert_eq!(inv.list("networking.k8s.io", "Ingress", None).len(), 1);
    assert_eq!(inv.list("networking.k8s.io", "Ingress", Some("b")).len(), 1);
    assert!(inv
        .list("networking.k8s.io", "Ingress", Some("a"))
        .is_empty());
}

/// A borrowed key finds exactly what the owned key of the same names
/// finds, and nothing for names split differently between the fields.
#[test]
fn borrowed_keys_find_what_owned_keys_find() {
    let mut inv = Inventory::new();
    let names = [("a", "bc"), ("ab", "c"), ("", "abc"), ("abc", "")];
    for (ns, name) in names {
        let o = json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"namespace": ns, "name": name}});
        if !name.is_empty() {
            inv.upsert(&o, None).unwrap();
        }
    }
    for (ns, name) in names {
        let key = ObjectKeyRef {
            group: "",
            kind: "ConfigMap",
            namespace: ns,
            name,
        };
        let found = inv.find(key).map(|e| e.key.clone());
        let owned = ObjectKey::new(GroupKind::new("", "ConfigMap"), ns, name);
        assert_eq!(
            found.as_ref(),
            inv.get(&owned).map(|e| &e.key),
            "{ns}/{name}"
        );
        assert_eq!(found.is_some(), !name.is_empty(), "{ns}/{name}");
    }
    let other_kind = ObjectKeyRef {
        group: "",
        kind: "Secret",
        namespace: "a",
        name: "bc",
    };
    assert!(inv.find(other_kind).is_none());
}

/// Changes are counted by kind: what a reader of one kind saw still
/// holds after changes to others.
#[test]
fn changes_are_counted_by_kind() {
    let mut inv = Inventory::new();
    let seen = inv.version();
    let kinds = |k: &'static str| Some([GroupKind::new("networking.k8s.io", k)]);
    assert!(!inv.changed_since(seen, kinds("Ingress")));
    inv.upsert(&ingress("a", "one", &["x.example"]), None)
        .unwrap();
    assert!(inv.changed_since(seen, kinds("Ingress")));
    assert!(!inv.changed_since(seen, kinds("IngressClass")));
    assert!(inv.changed_since(seen, None::<[GroupKind; 0]>));
    let seen = inv.version();
    inv.remove(&ObjectKey::of(&ingress("a", "gone", &[])).unwrap());
    assert_eq!(inv.version(), seen, "removing nothing changes nothing");
    inv.remove(&ObjectKey::of(&ingress("a", "one", &[])).unwrap());
    assert!(inv.changed_since(seen, kinds("Ingress")));
    let names = |v: Option<Vec<GroupKind>>| {
        v.map(|v| v.iter().map(|gk| gk.kind.to_string()).collect::<Vec<_>>())
    };
    assert_eq!(
        names(inv.kinds_changed_since(seen)),
        Some(vec!["Ingress".into()])
    );
    assert_eq!(names(inv.kinds_changed_since(inv.version())), Some(vec![]));
    let seen = inv.version();
    inv.declare_index("v1", "Service", "[object.metadata.name]")
        .unwrap();
    assert!(
        inv.changed_since(seen, kinds("IngressClass")),
        "an index concerns every kind"
    );
    assert_eq!(inv.kinds_changed_since(seen), None, "every kind");
}

#[test]
fn identical_index_declarations_are_shared() {
    let mut inv = Inventory::new();
    let a = inv
        .declare_index("v1", "Service", "[object.metadata.name]")
        .unwrap();
    let b = inv
        .declare_index("v1", "Service", "[object.metadata.name]")
        .unwrap();
    assert_eq!(a, b);
}
