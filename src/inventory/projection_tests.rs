use super::*;
use serde_json::json;

fn path(p: &str) -> Vec<Arc<str>> {
    p.split('.').map(Arc::from).collect()
}

fn deployment() -> Json {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "a", "labels": {"app": "web"},
                        "annotations": {"big": "x".repeat(100)}},
           "spec": {"replicas": 3,
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "c", "image": "i", "env": []},
                                                         {"name": "d", "image": "j"}]}}}})
}

#[test]
fn keeps_identity_and_named_fields_only() {
    let mut set = FieldSet::identity();
    set.add(&path("spec.replicas"), true);
    set.add(&path("spec.template.spec.containers.image"), false);
    set.close();
    assert_eq!(
        set.apply(&deployment()),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "a", "labels": {"app": "web"}},
               "spec": {"replicas": 3,
                        "template": {"spec": {"containers": [{"image": "i"}, {"image": "j"}]}}}})
    );
}

#[test]
fn whole_except_drops_named_fields_unless_read() {
    let secret = json!({"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg=="}, "type": "Opaque"});
    let set = FieldSet::whole_except(&["data", "stringData"]);
    assert_eq!(
        set.apply(&secret),
        json!({"kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque"})
    );
    let mut reads_data = FieldSet::default();
    reads_data.add(&path("data"), true);
    let mut merged = set.clone();
    merged.merge(&reads_data);
    assert_eq!(merged.apply(&secret), secret);
}

#[test]
fn a_ranged_field_keeps_a_map_whole_and_a_list_by_element() {
    let mut set = FieldSet::default();
    set.add_ranged(&path("spec.x"));
    set.add(&path("spec.x.name"), true);
    set.close();
    let list = json!({"spec": {"x": [{"name": "a", "other": 1}]}});
    assert_eq!(set.apply(&list), json!({"spec": {"x": [{"name": "a"}]}}));
    let map = json!({"spec": {"x": {"k1": {"name": "a"}, "k2": 2}}});
    assert_eq!(set.apply(&map), map);
}

#[test]
fn merging_is_monotone() {
    let mut a = FieldSet::identity();
    a.add(&path("spec.replicas"), true);
    let b = FieldSet::identity();
    let p_after = Projection::new(
        HashMap::from([(GroupKind::new("apps", "Deployment"), a)]),
        b.clone(),
    );
    let p_before = Projection::new(HashMap::new(), b);
    assert!(p_after.keeps_all_of(&p_before, "apps", "Deployment"));
    assert!(!p_before.keeps_all_of(&p_after, "apps", "Deployment"));
    assert!(Projection::default().keeps_all_of(&p_after, "apps", "Deployment"));
}
