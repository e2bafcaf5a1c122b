use super::*;
use serde_json::json;

fn parse(raw: Value) -> Result<Member, MemberError> {
    parse_member(3, &raw, "shop", &BuiltinScopes, false)
}

#[test]
fn a_plain_member_gets_the_group_namespace_and_loses_server_fields() {
    let m = parse(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "uid": "x", "resourceVersion": "1", "creationTimestamp": null},
        "data": {"a": "b"}, "status": {"x": 1}}))
    .unwrap();
    assert_eq!(
        (m.index, m.name.as_str(), m.namespace.as_str()),
        (3, "c", "shop")
    );
    assert_eq!(
        m.object,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "shop"}, "data": {"a": "b"}})
    );
}

#[test]
fn unusable_manifests_are_invalid() {
    let cases = [
        (json!("text"), "not an object"),
        (
            json!({"kind": "ConfigMap", "metadata": {"name": "c"}}),
            "no apiVersion",
        ),
        (
            json!({"apiVersion": "v1", "metadata": {"name": "c"}}),
            "no kind",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap"}),
            "no metadata",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "c-"}}),
            "no metadata.name",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": 5}}),
            "not a string",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c",
            "ownerReferences": [{"uid": "o", "controller": true}]}}),
            "controller",
        ),
    ];
    for (raw, why) in cases {
        match parse(raw.clone()) {
            Err(e @ MemberError::Invalid { .. }) => {
                assert!(e.to_string().contains(why), "{e} for {raw}");
                assert_eq!(e.index(), 3);
            }
            other => panic!("{raw}: {other:?}"),
        }
    }
}

#[test]
fn other_namespaces_cluster_kinds_and_unknown_kinds_are_out_of_scope() {
    let cases = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}),
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    ];
    for raw in cases {
        assert!(
            matches!(parse(raw.clone()), Err(MemberError::OutOfScope { .. })),
            "{raw}"
        );
    }
    // The same namespace, spelled out, is fine; offline, unknown kinds pass.
    let own = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "shop"}});
    assert!(parse(own).is_ok());
    let widget =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert!(parse_member(0, &widget, "shop", &BuiltinScopes, true).is_ok());
}

#[test]
fn closures_are_scope_oracles() {
    let only_widgets = |_: &str, kind: &str| (kind == "Widget").then_some(Scope::Namespaced);
    let widget =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert!(parse_member(0, &widget, "shop", &only_widgets, false).is_ok());
}
