use super::*;
use serde_json::json;

fn manifest() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "shop"}, "data": {"mode": "a", "size": "1"}})
}

/// The manifest as applied under Report: ownership and the hash.
fn desired(manifest: &Value) -> Value {
    let mut d = manifest.clone();
    d["metadata"]["ownerReferences"] = json!([{"uid": "g-uid", "controller": true}]);
    with_hash(d, manifest)
}

/// What the API server stores for `desired`.
fn stored(desired: &Value) -> Value {
    let mut v = desired.clone();
    v["metadata"]["uid"] = json!("u1");
    v["metadata"]["resourceVersion"] = json!("9");
    v
}

#[test]
fn the_hash_ignores_key_order_and_its_own_annotation() {
    let a = json!({"kind": "ConfigMap", "data": {"x": "1", "y": "2"}});
    let b = json!({"data": {"y": "2", "x": "1"}, "kind": "ConfigMap"});
    assert_eq!(manifest_hash(&a), manifest_hash(&b));
    let c = json!({"data": {"y": "2", "x": "2"}, "kind": "ConfigMap"});
    assert_ne!(manifest_hash(&a), manifest_hash(&c));
    let annotated = with_hash(json!({"kind": "ConfigMap", "metadata": {}}), &a);
    let plain = json!({"kind": "ConfigMap", "metadata": {"annotations": {}}});
    assert_eq!(manifest_hash(&annotated), manifest_hash(&plain));
    assert!(manifest_hash(&a).starts_with("sha256:"));
    assert_eq!(manifest_hash(&a).len(), 7 + 64);
}

#[test]
fn revert_writes_whatever_differs() {
    let m = manifest();
    let d = desired(&m);
    let mut live = stored(&d);
    assert_eq!(
        decide(DriftPolicy::Revert, &d, &m, Some(&live), true),
        Decision::Converged
    );
    live["data"]["mode"] = json!("edited");
    assert_eq!(
        decide(DriftPolicy::Revert, &d, &m, Some(&live), true),
        Decision::Write
    );
    assert_eq!(
        decide(DriftPolicy::Revert, &d, &m, None, false),
        Decision::Write
    );
}

#[test]
fn report_lists_a_hand_edit_and_writes_nothing() {
    let m = manifest();
    let d = desired(&m);
    let mut live = stored(&d);
    assert_eq!(
        decide(DriftPolicy::Report, &d, &m, Some(&live), true),
        Decision::Converged
    );
    live["data"]["mode"] = json!("edited");
    live["data"]["extra"] = json!("fine");
    assert_eq!(
        decide(DriftPolicy::Report, &d, &m, Some(&live), true),
        Decision::Drifted(vec!["data.mode".into()])
    );
    // A removed field is drift too.
    live["data"].as_object_mut().unwrap().remove("size");
    assert_eq!(
        decide(DriftPolicy::Report, &d, &m, Some(&live), true),
        Decision::Drifted(vec!["data.mode".into(), "data.size".into()])
    );
}

#[test]
fn report_writes_when_the_manifest_changes() {
    let m = manifest();
    let mut live = stored(&desired(&m));
    live["data"]["mode"] = json!("edited");
    let mut changed = manifest();
    changed["data"]["size"] = json!("2");
    let d = desired(&changed);
    assert_eq!(
        decide(DriftPolicy::Report, &d, &changed, Some(&live), true),
        Decision::Write
    );
    // A member last written under Revert (no hash) is written once,
    // which records the hash; a created one is written.
    let mut unhashed = live.clone();
    unhashed["metadata"]["annotations"] = json!({});
    assert_eq!(
        decide(DriftPolicy::Report, &desired(&m), &m, Some(&unhashed), true),
        Decision::Write
    );
    assert_eq!(
        decide(DriftPolicy::Report, &d, &changed, None, false),
        Decision::Write
    );
}

#[test]
fn report_takes_over_an_unowned_object_only_when_it_matches() {
    let m = manifest();
    let d = desired(&m);
    let mut live = m.clone();
    live["metadata"]["uid"] = json!("u1");
    assert_eq!(
        decide(DriftPolicy::Report, &d, &m, Some(&live), false),
        Decision::Write
    );
    live["data"]["mode"] = json!("by hand");
    assert_eq!(
        decide(DriftPolicy::Report, &d, &m, Some(&live), false),
        Decision::NotTakenOver(vec!["data.mode".into()])
    );
}

#[test]
fn every_differing_field_is_named() {
    let mut m = manifest();
    for i in 0..30 {
        m["data"][format!("k{i:02}")] = json!("v");
    }
    let d = desired(&m);
    let mut live = stored(&d);
    live["data"] = json!({});
    match decide(DriftPolicy::Report, &d, &m, Some(&live), true) {
        Decision::Drifted(fields) => assert_eq!(fields.len(), 32),
        other => panic!("{other:?}"),
    }
}
