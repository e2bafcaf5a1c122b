use super::*;
use crate::cluster::driver::KindSync;
use crate::k8s::kind::GroupVersionKind;
use kube::runtime::watcher::Event;
use serde_json::json;

/// The index behind the watch driver, as the member cache feeds it.
struct Fed {
    ix: Indexed,
    sync: KindSync,
}

impl Fed {
    fn new() -> Fed {
        Fed {
            ix: Indexed::default(),
            sync: KindSync::new(&GroupVersionKind::from_api_version("v1", "ConfigMap")),
        }
    }

    /// Takes one event; returns the names of the objects it woke.
    fn handle(&mut self, event: Event<DynamicObject>) -> Vec<String> {
        self.sync.on_event(&mut self.ix, event);
        let mut woken: Vec<String> = self
            .ix
            .touched()
            .iter()
            .filter_map(|o| o.json()["metadata"]["name"].as_str().map(String::from))
            .collect();
        woken.sort();
        woken
    }
}

/// As a list shows it: without apiVersion and kind.
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
    let mut fed = Fed::new();
    fed.handle(Event::Apply(cm("a1", Some("id-a"), Some("uid-a"), "1")));
    fed.handle(Event::Apply(cm("a2", Some("id-a"), None, "1")));
    fed.handle(Event::Apply(cm("b1", Some("id-b"), Some("uid-b"), "1")));
    // Labelled by one group, owned by another: in both views.
    fed.handle(Event::Apply(cm("x", Some("id-b"), Some("uid-a"), "1")));
    let ix = &fed.ix;
    assert_eq!(names(ix, &group("id-a", "uid-a")), ["a1", "a2", "x"]);
    assert_eq!(names(ix, &group("id-b", "uid-b")), ["b1", "x"]);
    assert!(names(ix, &group("id-c", "uid-c")).is_empty());
    let kept = ix.get(&Name::new("ns", "a1")).unwrap().json();
    assert!(kept["metadata"].get("managedFields").is_none(), "trimmed");
    // A list item has no apiVersion or kind: the watch's kind is written in.
    assert_eq!(
        (&kept["apiVersion"], &kept["kind"]),
        (&json!("v1"), &json!("ConfigMap"))
    );
    assert_eq!(kept["metadata"]["labels"][PART_OF_LABEL], "id-a");
}

#[test]
fn a_change_wakes_the_group_that_controls_the_object_not_the_one_its_label_names() {
    let mut fed = Fed::new();
    fed.sync.on_event(
        &mut fed.ix,
        Event::Apply(cm("m", Some("id-a"), Some("uid-b"), "1")),
    );
    let woken: Vec<String> = fed
        .ix
        .touched()
        .iter()
        .filter_map(|m| m.owner())
        .map(|g| format!("{}/{}", g.namespace.unwrap_or_default(), g.name))
        .collect();
    assert_eq!(woken, ["ns/g"]);
    fed.sync
        .on_event(&mut fed.ix, Event::Apply(cm("x", Some("id-a"), None, "1")));
    assert!(
        fed.ix.touched().iter().all(|m| m.owner().is_none()),
        "a label alone wakes nobody"
    );
}

#[test]
fn an_update_moves_the_object_and_a_delete_drops_it() {
    let mut fed = Fed::new();
    fed.handle(Event::Apply(cm("m", Some("id-a"), Some("uid-a"), "1")));
    assert_eq!(
        fed.handle(Event::Apply(cm("m", Some("id-b"), Some("uid-b"), "2"))),
        ["m"]
    );
    assert!(names(&fed.ix, &group("id-a", "uid-a")).is_empty());
    assert_eq!(names(&fed.ix, &group("id-b", "uid-b")), ["m"]);
    let woken = fed.handle(Event::Delete(cm("m", Some("id-b"), None, "3")));
    assert_eq!(woken, ["m"]);
    assert!(names(&fed.ix, &group("id-b", "uid-b")).is_empty());
    assert!(fed.ix.objects.is_empty());
    assert!(
        fed.ix.by_group.is_empty(),
        "no empty index entries are kept"
    );
}

#[test]
fn a_relist_keeps_every_object_until_it_shows_it_gone_and_wakes_what_changed() {
    let mut fed = Fed::new();
    fed.handle(Event::Init);
    for o in [
        cm("same", Some("id-a"), None, "1"),
        cm("edited", Some("id-a"), None, "1"),
        cm("gone", Some("id-a"), None, "1"),
    ] {
        fed.handle(Event::InitApply(o));
    }
    fed.handle(Event::InitDone);
    // A re-list (410 Gone): an object it shows unchanged wakes nobody.
    fed.handle(Event::Init);
    assert!(fed
        .handle(Event::InitApply(cm("same", Some("id-a"), None, "1")))
        .is_empty());
    assert_eq!(
        fed.handle(Event::InitApply(cm("edited", Some("id-b"), None, "2"))),
        ["edited"]
    );
    assert_eq!(
        fed.handle(Event::InitApply(cm("new", Some("id-a"), None, "1"))),
        ["new"]
    );
    // Until the list is complete, what it has not shown yet is kept: a
    // reader never finds an object missing that the API server still has.
    assert_eq!(names(&fed.ix, &group("id-a", "")), ["gone", "new", "same"]);
    assert_eq!(fed.handle(Event::InitDone), ["gone"]);
    assert_eq!(names(&fed.ix, &group("id-a", "")), ["new", "same"]);
    assert_eq!(names(&fed.ix, &group("id-b", "")), ["edited"]);
    assert_eq!(fed.ix.objects.len(), 3, "one copy of each object");
}
