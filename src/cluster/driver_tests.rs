use super::*;
use serde_json::json;

/// A sink that records what the driver asked of it, in order.
#[derive(Default)]
struct Recorder(Vec<String>);

impl Sink for Recorder {
    fn apply(&mut self, object: Json) -> Option<ObjectKey> {
        let key = ObjectKey::of(&object)?;
        self.0.push(format!("apply {key} {}", object["apiVersion"]));
        Some(key)
    }

    fn delete(&mut self, key: &ObjectKey) {
        self.0.push(format!("delete {key}"));
    }

    fn reset(&mut self, kind: &GroupKind, seen: &HashSet<ObjectKey>) {
        let mut seen: Vec<String> = seen.iter().map(ToString::to_string).collect();
        seen.sort();
        self.0
            .push(format!("reset {} [{}]", kind.kind(), seen.join(", ")));
    }
}

/// A list item: no apiVersion or kind of its own.
fn item(name: &str) -> DynamicObject {
    serde_json::from_value(json!({"metadata": {"namespace": "a", "name": name}})).unwrap()
}

#[test]
fn a_relist_applies_what_it_sees_then_resets_the_kind_to_it() {
    let kind = GroupVersionKind::from_api_version("v1", "ConfigMap");
    let mut sync = KindSync::new(&kind);
    let mut sink = Recorder::default();
    assert!(!sync.on_event(&mut sink, Event::Init));
    sync.on_event(&mut sink, Event::InitApply(item("one")));
    sync.on_event(&mut sink, Event::InitApply(item("two")));
    assert!(sync.on_event(&mut sink, Event::InitDone), "first list");
    sync.on_event(&mut sink, Event::Delete(item("one")));
    // A re-list (410 Gone): only what it shows survives, and it is not the
    // first sync again.
    sync.on_event(&mut sink, Event::Init);
    sync.on_event(&mut sink, Event::InitApply(item("three")));
    assert!(!sync.on_event(&mut sink, Event::InitDone));
    let one = "ConfigMap a/one";
    let (two, three) = ("ConfigMap a/two", "ConfigMap a/three");
    assert_eq!(
        sink.0,
        [
            format!("apply {one} \"v1\""),
            format!("apply {two} \"v1\""),
            format!("reset ConfigMap [{one}, {two}]"),
            format!("delete {one}"),
            format!("apply {three} \"v1\""),
            format!("reset ConfigMap [{three}]"),
        ]
    );
}
