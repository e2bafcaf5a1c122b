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
    let mut sync = ObjectSync::new(&[kind()]);
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

fn tenant_object(namespace: &str, name: &str) -> DynamicObject {
    let mut o: DynamicObject = serde_json::from_value(json!({
        "apiVersion": API_VERSION, "kind": tenant::KIND,
        "metadata": {"name": name, "namespace": namespace, "uid": "t", "generation": 1},
        "spec": {},
    }))
    .unwrap();
    o.types = None;
    o
}

#[test]
fn both_kinds_are_listed_before_a_snapshot_and_a_relist_of_one_keeps_the_other() {
    let mut sync = ObjectSync::new(&[kind(), namespaced_kind()]);
    let mut cluster = KindSync::new(&kind());
    let mut tenants = KindSync::new(&namespaced_kind());
    cluster.on_event(&mut sync, Event::Init);
    cluster.on_event(&mut sync, Event::InitApply(object("a", 1, Json::Null)));
    cluster.on_event(&mut sync, Event::InitDone);
    assert!(
        sync.snapshot().is_none(),
        "the tenants' kind is not listed yet"
    );
    tenants.on_event(&mut sync, Event::Init);
    tenants.on_event(&mut sync, Event::InitApply(tenant_object("team-a", "a")));
    tenants.on_event(&mut sync, Event::InitDone);
    let names: Vec<String> = sync.snapshot().expect("listed").keys().cloned().collect();
    assert_eq!(names, ["a", "team-a/a"], "same names, different objects");

    // A re-list of the tenants' kind that shows nothing drops only theirs.
    tenants.on_event(&mut sync, Event::Init);
    tenants.on_event(&mut sync, Event::InitDone);
    let names: Vec<String> = sync.snapshot().unwrap().keys().cloned().collect();
    assert_eq!(names, ["a"]);
    tenants.on_event(&mut sync, Event::Apply(tenant_object("team-b", "x")));
    tenants.on_event(&mut sync, Event::Delete(tenant_object("team-b", "x")));
    assert_eq!(sync.snapshot().unwrap().len(), 1);
}

#[tokio::test]
async fn a_status_goes_to_the_objects_own_namespace() {
    let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
        .expect("a client");
    let mut doc = serde_json::to_value(tenant_object("team-a", "a")).unwrap();
    doc["kind"] = json!(tenant::KIND);
    let (api, name) = status_api(&client, &doc).expect("an api");
    assert_eq!(name, "a");
    assert_eq!(
        api.resource_url(),
        "/apis/interlock.dev/v1alpha1/namespaces/team-a/interlocknamespacepolicies"
    );
}
