use super::*;
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
    sync.on_event(Event::Init);
    sync.on_event(Event::InitApply(object("a", 1, Json::Null)));
    assert!(sync.snapshot().is_none(), "not listed yet");
    assert!(sync.on_event(Event::InitDone));
    let first = sync.snapshot().expect("listed");
    assert_eq!(first["a"].doc["kind"], KIND, "the kind is put back");
    assert!(first["a"].doc.get("status").is_none());

    sync.on_event(Event::Apply(object(
        "a",
        1,
        json!({"observedGeneration": 1}),
    )));
    let second = sync.snapshot().unwrap();
    assert_eq!(specs_of(&first), specs_of(&second));
    assert_eq!(second["a"].status["observedGeneration"], 1);

    sync.on_event(Event::Apply(object("a", 2, Json::Null)));
    assert_ne!(specs_of(&first), specs_of(&sync.snapshot().unwrap()));
    assert!(sync.on_event(Event::Delete(object("a", 2, Json::Null))));
    assert!(sync.snapshot().unwrap().is_empty());
}
