use super::*;
use serde_json::json;

#[test]
fn changes_name_each_field_and_ignore_what_the_server_rewrites() {
    let stored = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "resourceVersion": "1", "generation": 1,
            "labels": {"app.kubernetes.io/name": "a", "keep": "x"}},
        "data": {"mode": "live", "gone": "1"}, "status": {"x": 1}});
    let after = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "resourceVersion": "2", "generation": 2,
            "labels": {"app.kubernetes.io/name": "b", "keep": "x"}},
        "data": {"mode": "test", "new": "2"}, "status": {"x": 2}});
    let changes = changed_fields(&stored, &after);
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "data.gone",
            "data.mode",
            "data.new",
            r#"metadata.labels["app.kubernetes.io/name"]"#
        ]
    );
    assert_eq!(changes[0].after, None);
    assert_eq!(changes[1].before, Some(json!("live")));
    assert_eq!(changes[1].after, Some(json!("test")));
    assert_eq!(changes[2].before, None);
    assert!(changed_fields(&stored, &stored).is_empty());
}

#[test]
fn lists_compare_by_position_unless_their_length_changes() {
    let a = json!({"spec": {"containers": [{"image": "a:1"}, {"image": "b:1"}]}});
    let b = json!({"spec": {"containers": [{"image": "a:1"}, {"image": "b:2"}]}});
    let c = json!({"spec": {"containers": [{"image": "a:1"}]}});
    let paths =
        |x, y| -> Vec<String> { changed_fields(x, y).into_iter().map(|c| c.path).collect() };
    assert_eq!(paths(&a, &b), ["spec.containers[1].image"]);
    assert_eq!(paths(&a, &c), ["spec.containers"]);
}

fn member(state: MemberState) -> MemberStatus {
    MemberStatus {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "t".into(),
        name: "c".into(),
        uid: None,
        state,
        ready: None,
        message: None,
        drift: vec![],
    }
}

#[test]
fn the_action_follows_the_plans_state_and_existence() {
    use MemberState::*;
    let cases = [
        (Applied, true, Action::Unchanged),
        (Pending, false, Action::Create),
        (Pending, true, Action::Update),
        (Blocked, true, Action::Update),
        (Blocked, false, Action::Create),
        (Conflict, true, Action::Conflict),
        (Invalid, false, Action::Refused),
        (OutOfScope, false, Action::Refused),
        (Pruning, true, Action::Prune),
        (Unlisted, true, Action::Keep),
    ];
    for (state, exists, want) in cases {
        assert_eq!(action_of(&member(state), exists), want, "{state:?}");
    }
}

#[test]
fn after_apply_replaces_written_objects_and_drops_pruned_ones() {
    let cm = |name: &str, v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "t"}, "data": {"v": v}})
    };
    let observed = [cm("a", "1"), cm("b", "1"), cm("old", "1")];
    let written = [cm("a", "2"), cm("new", "2")];
    let removed = [id_of(&cm("old", "")).unwrap()];
    let out = after_apply(&observed, &written, &removed);
    let names: Vec<&str> = out
        .iter()
        .filter_map(|o| o.pointer("/metadata/name")?.as_str())
        .collect();
    assert_eq!(names, ["b", "a", "new"]);
    assert_eq!(out[1]["data"]["v"], "2");
}
