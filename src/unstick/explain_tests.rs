use super::*;

fn meta_with_manager(manager: &str, finalizer: &str) -> Json {
    json!({"managedFields": [
        {"manager": "other", "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}}},
        {"manager": manager, "fieldsV1": {"f:metadata": {"f:finalizers": {
            ".": {}, format!("v:\"{finalizer}\""): {}}}}}
    ]})
}

#[test]
fn well_known_finalizers_name_their_controller() {
    let r = remover("kubernetes.io/pvc-protection", &json!({}));
    assert_eq!(r.source, "well-known");
    assert!(r.controller.contains("pvc-protection"), "{r:?}");
    let r = remover(INTERLOCK_FINALIZER, &json!({}));
    assert_eq!(r.controller, "interlock controller");
    assert_eq!(r.lease, Some(("interlock-system", "interlock-controller")));
    assert!(remover("foregroundDeletion", &json!({}))
        .controller
        .contains("garbage collector"));
}

#[test]
fn another_finalizer_is_owned_by_the_manager_that_wrote_it() {
    let meta = meta_with_manager("acme-operator", "acme.example/cleanup");
    let r = remover("acme.example/cleanup", &meta);
    assert_eq!(r.controller, "acme-operator");
    assert_eq!(r.source, "managedFields");
    // A finalizer no entry owns is unknown, not blamed on another manager.
    let r = remover("acme.example/other", &meta);
    assert_eq!(r.controller, "unknown");
}

#[test]
fn age_is_counted_from_the_deletion_timestamp() {
    let now = DateTime::parse_from_rfc3339("2026-01-01T01:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let meta = json!({"deletionTimestamp": "2026-01-01T00:30:00Z"});
    assert_eq!(deleting_for(&meta, now), Some(1800));
    assert_eq!(deleting_for(&json!({}), now), None);
    assert_eq!(
        deleting_for(&json!({"deletionTimestamp": "soon"}), now),
        None
    );
    assert_eq!(human_age(1800), "30m");
    assert_eq!(human_age(90), "90s");
    assert_eq!(human_age(93_600), "1d2h");
}

#[test]
fn the_clear_patch_tests_the_version_and_the_finalizer_before_removing() {
    let p = clear_patch("a.example/x", 1, "42");
    let mut doc = json!({"metadata": {"resourceVersion": "42",
        "finalizers": ["b.example/y", "a.example/x"]}});
    let patch: json_patch::Patch = serde_json::from_value(p.clone()).unwrap();
    json_patch::patch(&mut doc, &patch).unwrap();
    assert_eq!(doc["metadata"]["finalizers"], json!(["b.example/y"]));
    // A changed resourceVersion makes the whole patch fail.
    let mut stale = json!({"metadata": {"resourceVersion": "43",
        "finalizers": ["b.example/y", "a.example/x"]}});
    assert!(json_patch::patch(&mut stale, &patch).is_err());
}
