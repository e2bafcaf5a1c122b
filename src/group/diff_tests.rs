use super::*;
use crate::test_rng::Rng;
use serde_json::json;

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "shop",
            "labels": {"app": "web", "applyset.kubernetes.io/part-of": "applyset-x-v1"},
            "ownerReferences": [{"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
                "name": "shop", "uid": "u1", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "web", "image": "nginx:1.27", "args": ["-g", "daemon off;"],
                    "ports": [{"containerPort": 80}],
                    "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}
                }]}
            }
        }
    })
}

/// What the API server stores for `deployment()`: defaults, status,
/// server metadata, canonical quantities.
fn stored() -> Value {
    let mut v = deployment();
    let meta = v["metadata"].as_object_mut().unwrap();
    meta.insert("uid".into(), json!("d-1"));
    meta.insert("resourceVersion".into(), json!("42"));
    meta.insert("generation".into(), json!(1));
    meta.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
    meta.insert("managedFields".into(), json!([{"manager": "interlock"}]));
    meta.insert(
        "annotations".into(),
        json!({"deployment.kubernetes.io/revision": "1"}),
    );
    let spec = v["spec"].as_object_mut().unwrap();
    spec.insert("revisionHistoryLimit".into(), json!(10));
    spec.insert("strategy".into(), json!({"type": "RollingUpdate"}));
    let c = &mut v["spec"]["template"]["spec"]["containers"][0];
    c["imagePullPolicy"] = json!("IfNotPresent");
    c["ports"][0]["protocol"] = json!("TCP");
    c["resources"]["limits"]["cpu"] = json!("0.5");
    v["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    v["status"] = json!({"replicas": 2, "availableReplicas": 2});
    v
}

#[test]
fn differing_fields_name_each_field_that_needs_apply_sees() {
    assert!(differing_fields(&deployment(), &stored()).is_empty());
    let mut live = stored();
    live["spec"]["replicas"] = json!(5);
    live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:latest");
    live["metadata"]["labels"]["app"] = json!("other");
    live["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["-g"]);
    assert_eq!(
        differing_fields(&deployment(), &live),
        [
            "metadata.labels.app",
            "spec.replicas",
            "spec.template.spec.containers[0].image",
            "spec.template.spec.containers[0].args",
        ]
    );
    // Keys that are not plain words are quoted; a missing named
    // element is named as a whole.
    live = stored();
    live["metadata"]["labels"]["applyset.kubernetes.io/part-of"] = json!("other");
    live["spec"]["template"]["spec"]["containers"] = json!([]);
    assert_eq!(
        differing_fields(&deployment(), &live),
        [
            r#"metadata.labels["applyset.kubernetes.io/part-of"]"#,
            "spec.template.spec.containers[0]",
        ]
    );
    // A Secret's stringData is compared as the data it is stored as.
    let d = json!({"apiVersion": "v1", "kind": "Secret", "stringData": {"b": "hello"}});
    let l = json!({"apiVersion": "v1", "kind": "Secret", "data": {"b": "aGVsbG8h"}});
    assert_eq!(differing_fields(&d, &l), ["data.b"]);
}

#[test]
fn server_added_fields_are_ignored() {
    assert!(!needs_apply(&deployment(), &stored()));
}

#[test]
fn a_missing_object_needs_a_write() {
    assert!(needs_apply(&deployment(), &Value::Null));
    assert!(needs_apply(&deployment(), &json!({})));
}

#[test]
fn hand_edits_are_detected() {
    let edits: [(&str, Value); 9] = [
        ("/spec/replicas", json!(5)),
        (
            "/spec/template/spec/containers/0/image",
            json!("nginx:latest"),
        ),
        (
            "/spec/template/spec/containers/0/args/1",
            json!("daemon on;"),
        ),
        (
            "/spec/template/spec/containers/0/resources/limits/cpu",
            json!("1"),
        ),
        ("/metadata/labels/app", json!("other")),
        (
            "/metadata/labels/applyset.kubernetes.io~1part-of",
            json!("applyset-y-v1"),
        ),
        ("/metadata/ownerReferences/0/uid", json!("u2")),
        ("/spec/selector/matchLabels", json!({})),
        (
            "/spec/template/spec/containers/0/ports/0/containerPort",
            json!("80"),
        ),
    ];
    for (path, value) in edits {
        let mut live = stored();
        *live.pointer_mut(path).unwrap() = value;
        assert!(needs_apply(&deployment(), &live), "edit of {path} not seen");
    }
}

#[test]
fn removed_fields_and_list_elements_are_detected() {
    for path in [
        "/spec/replicas",
        "/metadata/labels",
        "/metadata/ownerReferences",
    ] {
        let mut live = stored();
        let (parent, key) = path.rsplit_once('/').unwrap();
        live.pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove(key);
        assert!(
            needs_apply(&deployment(), &live),
            "removal of {path} not seen"
        );
    }
    let mut live = stored();
    live["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["-g"]);
    assert!(needs_apply(&deployment(), &live), "shorter atomic list");
    live = stored();
    live["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["-g", "daemon off;", "x"]);
    assert!(needs_apply(&deployment(), &live), "longer atomic list");
    live = stored();
    live["spec"]["template"]["spec"]["containers"] = json!([]);
    assert!(needs_apply(&deployment(), &live), "container removed");
}

#[test]
fn named_lists_match_by_name_and_tolerate_extra_elements() {
    let mut live = stored();
    let sidecar = json!({"name": "proxy", "image": "envoy"});
    let containers = live["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap();
    containers.insert(0, sidecar);
    assert!(
        !needs_apply(&deployment(), &live),
        "another manager's container"
    );
    live["spec"]["template"]["spec"]["containers"][1]["image"] = json!("nginx:1");
    assert!(needs_apply(&deployment(), &live), "our container edited");
}

#[test]
fn other_owner_references_are_tolerated() {
    let mut live = stored();
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "o"});
    live["metadata"]["ownerReferences"]
        .as_array_mut()
        .unwrap()
        .insert(0, other);
    assert!(!needs_apply(&deployment(), &live));
}

#[test]
fn numbers_compare_by_value() {
    let d = json!({"spec": {"replicas": 1, "ratio": 0.5}});
    assert!(!needs_apply(
        &d,
        &json!({"spec": {"replicas": 1.0, "ratio": 0.5}})
    ));
    assert!(needs_apply(
        &d,
        &json!({"spec": {"replicas": 1.5, "ratio": 0.5}})
    ));
    assert!(needs_apply(
        &d,
        &json!({"spec": {"replicas": "1", "ratio": 0.5}})
    ));
    let big = json!({"n": u64::MAX});
    assert!(!needs_apply(&big, &json!({"n": u64::MAX})));
    assert!(needs_apply(&big, &json!({"n": -1})));
}

#[test]
fn quantities_compare_by_amount_only_in_quantity_maps() {
    let d = json!({"resources": {"requests": {"memory": "1Gi", "cpu": 1}}});
    let same = json!({"resources": {"requests": {"memory": "1024Mi", "cpu": "1000m"}}});
    assert!(!needs_apply(&d, &same));
    let more = json!({"resources": {"requests": {"memory": "1025Mi", "cpu": "1"}}});
    assert!(needs_apply(&d, &more));
    // ConfigMap data is not normalised by the server: strings compare as strings.
    let cm = json!({"data": {"size": "1Gi"}});
    assert!(needs_apply(&cm, &json!({"data": {"size": "1024Mi"}})));
}

#[test]
fn secret_string_data_compares_as_stored_data() {
    let d = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"a": "eA=="}, "stringData": {"b": "hello"}});
    let live = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "type": "Opaque", "data": {"a": "eA==", "b": "aGVsbG8="}});
    assert!(!needs_apply(&d, &live));
    let mut edited = live.clone();
    edited["data"]["b"] = json!("aGVsbG8h");
    assert!(needs_apply(&d, &edited));
    // Only Secrets: elsewhere stringData is an ordinary field.
    let widget = json!({"apiVersion": "x/v1", "kind": "Widget", "stringData": {"b": "hello"}});
    assert!(needs_apply(
        &widget,
        &json!({"apiVersion": "x/v1", "kind": "Widget"})
    ));
}

#[test]
fn zero_values_match_absent_fields() {
    let d = json!({"spec": {"hostNetwork": false, "workingDir": "", "priority": 0}});
    assert!(!needs_apply(&d, &json!({"spec": {}})));
    assert!(needs_apply(&d, &json!({"spec": {"hostNetwork": true}})));
    // A removed field that the server defaults comes back as another value.
    let replicas = json!({"spec": {"replicas": 0}});
    assert!(needs_apply(&replicas, &json!({"spec": {"replicas": 1}})));
}

#[test]
fn desired_empty_values_match_absent_fields() {
    let d = json!({"metadata": {"annotations": {}}, "spec": {"args": [], "x": null}});
    assert!(!needs_apply(&d, &json!({"metadata": {}, "spec": {}})));
    assert!(needs_apply(&d, &json!({"metadata": {}, "spec": {"x": 1}})));
}

/// Objects without zero values, named lists or quantity maps: every
/// leaf is significant.
fn random_value(rng: &mut Rng, depth: u32) -> Value {
    match (depth, rng.below(6)) {
        (0, _) | (_, 0) => json!(format!("s{}", rng.below(1000))),
        (_, 1) => json!(rng.below(1000) + 1),
        (_, 2) => json!(true),
        (_, 3) => Value::Array(
            (0..1 + rng.below(3))
                .map(|_| random_value(rng, depth - 1))
                .collect(),
        ),
        _ => {
            let mut m = Map::new();
            for k in ["a", "b", "c", "d"] {
                if rng.below(2) == 0 {
                    m.insert(k.into(), random_value(rng, depth - 1));
                }
            }
            m.insert("z".into(), random_value(rng, depth - 1));
            Value::Object(m)
        }
    }
}

/// JSON pointers of every leaf of `v`.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| leaves(c, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| leaves(c, format!("{at}/{i}"), out)),
        _ => out.push(at),
    }
}

/// Adds fields the desired object does not have, as a server would.
fn add_server_fields(v: &mut Value, rng: &mut Rng) {
    match v {
        Value::Object(m) => {
            m.values_mut().for_each(|c| add_server_fields(c, rng));
            m.insert(format!("server{}", rng.below(5)), json!({"x": 1}));
        }
        Value::Array(a) => a.iter_mut().for_each(|c| add_server_fields(c, rng)),
        _ => {}
    }
}

#[test]
fn property_extra_fields_never_count_and_every_changed_leaf_does() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..500 {
        let desired = json!({"spec": random_value(&mut rng, 4)});
        let mut live = desired.clone();
        add_server_fields(&mut live, &mut rng);
        assert!(!needs_apply(&desired, &live), "{desired}\n{live}");
        let mut paths = Vec::new();
        leaves(&desired, String::new(), &mut paths);
        let path = &paths[rng.below(paths.len())];
        let mut changed = live.clone();
        let leaf = changed.pointer_mut(path).unwrap();
        *leaf = match leaf {
            Value::String(s) => json!(format!("{s}!")),
            Value::Number(n) => json!(n.as_u64().unwrap_or(0) + 1),
            _ => json!(false),
        };
        assert!(needs_apply(&desired, &changed), "change at {path} not seen");
        assert_eq!(differing_fields(&desired, &changed).len(), 1, "{path}");
        assert!(differing_fields(&desired, &live).is_empty());
        let (parent, key) = path.rsplit_once('/').unwrap();
        if let Some(Value::Object(m)) = live.pointer_mut(parent) {
            m.remove(key);
            assert!(needs_apply(&desired, &live), "removal of {path} not seen");
        }
    }
}
