use super::*;
use kube::runtime::watcher::Event;
use serde_json::json;

fn object(name: &str, generation: i64, status: Json) -> DynamicObject {
    let mut o: DynamicObject = serde_json::from_value(json!({
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": name, "uid": "u", "generation": generation},
        "spec": {}, "status": status,
    }))
    .unwrap();
    o.types = None;
    o
}

#[test]
fn only_a_listed_set_is_loaded_and_a_status_alone_changes_no_spec() {
    let mut sync = ObjectSync::default();
    let mut driver = KindSync::new(&kind());
    driver.on_event(&mut sync, Event::Init);
    driver.on_event(&mut sync, Event::InitApply(object("a", 1, Json::Null)));
    assert!(sync.snapshot().is_none(), "not listed yet");
    driver.on_event(&mut sync, Event::InitDone);
    let first = sync.snapshot().expect("listed");
    assert_eq!(first["a"].doc["kind"], KIND, "the kind is put back");
    assert!(first["a"].doc.get("status").is_none());

    driver.on_event(
        &mut sync,
        Event::Apply(object("a", 1, json!({"observedGeneration": 1}))),
    );
    let second = sync.snapshot().unwrap();
    assert_eq!(specs_of(&first), specs_of(&second));
    assert_eq!(second["a"].status["observedGeneration"], 1);

    driver.on_event(&mut sync, Event::Apply(object("a", 2, Json::Null)));
    assert_ne!(specs_of(&first), specs_of(&sync.snapshot().unwrap()));
    driver.on_event(&mut sync, Event::Delete(object("a", 2, Json::Null)));
    assert!(sync.snapshot().unwrap().is_empty());

    // A re-list that no longer shows an object drops it at its end.
    driver.on_event(&mut sync, Event::Apply(object("b", 1, Json::Null)));
    driver.on_event(&mut sync, Event::Init);
    driver.on_event(&mut sync, Event::InitApply(object("c", 1, Json::Null)));
    driver.on_event(&mut sync, Event::InitDone);
    let names: Vec<String> = sync.snapshot().unwrap().keys().cloned().collect();
    assert_eq!(names, ["c"], "b was not in the re-list");
}
