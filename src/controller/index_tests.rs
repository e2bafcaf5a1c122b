use super::*;
use serde_json::json;

fn cm(name: &str, id: Option<&str>, owner: Option<&str>, rv: &str) -> DynamicObject {
    let mut labels = serde_json::Map::new();
    if let Some(id) = id {
        labels.insert(PART_OF_LABEL.into(), id.into());
    }
    let refs: Vec<_> = owner
        .map(|uid| {
            json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
                   "name": "g", "uid": uid, "controller": true})
        })
        .into_iter()
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "labels": labels,
                     "ownerReferences": refs, "resourceVersion": rv,
                     "managedFields": [{"manager": "interlock"}]}
    }))
    .unwrap()
}

fn names(ix: &Indexed, keys: &[GroupKey]) -> Vec<String> {
    ix.of_group(keys).into_iter().map(|(n, _)| n.name).collect()
}

fn group(id: &str, uid: &str) -> [GroupKey; 2] {
    [GroupKey::ApplySet(id.into()), GroupKey::Owner(uid.into())]
}

#[test]
fn a_group_sees_only_objects_that_name_it() {
    let mut ix = Indexed::default();
    ix.handle(Event::Apply(cm("a1", Some("id-a"), Some("uid-a"), "1")));
    ix.handle(Event::Apply(cm("a2", Some("id-a"), None, "1")));
    ix.handle(Event::Apply(cm("b1", Some("id-b"), Some("uid-b"), "1")));
    // Labelled by one group, owned by another: in both views.
    ix.handle(Event::Apply(cm("x", Some("id-b"), Some("uid-a"), "1")));
    assert_eq!(names(&ix, &group("id-a", "uid-a")), ["a1", "a2", "x"]);
    assert_eq!(names(&ix, &group("id-b", "uid-b")), ["b1", "x"]);
    assert!(names(&ix, &group("id-c", "uid-c")).is_empty());
    let kept = ix.get(&Name::new("ns", "a1")).unwrap();
    assert!(kept.metadata.managed_fields.is_none(), "trimmed");
}

#[test]
fn an_update_moves_the_object_and_a_delete_drops_it() {
    let mut ix = Indexed::default();
    ix.handle(Event::Apply(cm("m", Some("id-a"), Some("uid-a"), "1")));
    ix.handle(Event::Apply(cm("m", Some("id-b"), Some("uid-b"), "2")));
    assert!(names(&ix, &group("id-a", "uid-a")).is_empty());
    assert_eq!(names(&ix, &group("id-b", "uid-b")), ["m"]);
    let woken = ix.handle(Event::Delete(cm("m", Some("id-b"), None, "3")));
    assert_eq!(woken.len(), 1);
    assert!(names(&ix, &group("id-b", "uid-b")).is_empty());
    assert!(ix.objects.is_empty());
    assert!(ix.by_group.is_empty(), "no empty index entries are kept");
}

#[test]
fn a_relist_swaps_at_its_end_and_reports_what_changed() {
    let mut ix = Indexed::default();
    for o in [
        cm("same", Some("id-a"), None, "1"),
        cm("edited", Some("id-a"), None, "1"),
        cm("gone", Some("id-a"), None, "1"),
    ] {
        ix.handle(Event::Apply(o));
    }
    ix.handle(Event::Init);
    ix.handle(Event::InitApply(cm("same", Some("id-a"), None, "1")));
    ix.handle(Event::InitApply(cm("edited", Some("id-b"), None, "2")));
    ix.handle(Event::InitApply(cm("new", Some("id-a"), None, "1")));
    // Until the list is complete, readers see the previous contents.
    assert_eq!(names(&ix, &group("id-a", "")), ["edited", "gone", "same"]);
    let mut woken: Vec<String> = ix
        .handle(Event::InitDone)
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    woken.sort();
    assert_eq!(woken, ["edited", "gone", "new"]);
    assert_eq!(names(&ix, &group("id-a", "")), ["new", "same"]);
    assert_eq!(names(&ix, &group("id-b", "")), ["edited"]);
}
