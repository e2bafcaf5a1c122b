use super::*;

fn cm(name: &str, data: &str) -> Json {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "a", "name": name, "managedFields": [{"manager": "x"}]},
        "data": {"k": data}})
}

#[test]
fn only_a_changed_object_is_dirty_and_a_relist_drops_what_it_missed() {
    let mut s = Store::default();
    let one = s.upsert(cm("one", "1")).unwrap();
    let two = s.upsert(cm("two", "1")).unwrap();
    assert_eq!(s.dirty.len(), 2);
    s.dirty.clear();
    s.upsert(cm("one", "1"));
    assert!(s.dirty.is_empty(), "the same object again is no change");
    s.upsert(cm("one", "2"));
    assert_eq!(s.dirty.iter().collect::<Vec<_>>(), vec![&one]);
    let body = decode(&s.objects[&one].body).unwrap();
    assert!(body.pointer("/metadata/managedFields").is_none());
    assert_eq!(body["data"]["k"], "2", "kept whole");
    let seen: HashSet<ObjectKey> = [one.clone()].into();
    s.remove_unseen(&GroupKind::new("", "ConfigMap"), &seen);
    assert!(!s.objects.contains_key(&two));
    assert!(s.removed.contains(&two));
}
