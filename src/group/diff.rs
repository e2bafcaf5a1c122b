//! Does a member need a write? Zero-write convergence rests on this answer:
//! a converged group must make no write on its next pass, nor after a
//! restart (which has no memory of earlier passes), so the question is
//! answered from the stored object alone.
//!
//! The stored object "holds" the desired one when every field the group
//! sets is there with the same value. Fields the server adds (defaults,
//! status, uid, managedFields, other owners' fields) are ignored; a field
//! the group sets that someone changed or removed by hand is not.

use serde_json::{Map, Value};

/// Whether `live` lacks or contradicts some field of `desired`, so that a
/// server-side apply of `desired` would change the stored object.
///
/// `desired` is the object as it will be applied (ownerReference and labels
/// included). Rules: maps match recursively (extra live keys are fine);
/// lists match element by element with the same length, except lists of
/// named objects (`containers`, `env`, `volumes`, ...), matched by `name`,
/// and `metadata.ownerReferences`, matched by `uid`, where live may hold
/// extra elements (server-side apply merges those lists by key and keeps
/// other managers' elements, so re-applying would not remove them anyway);
/// scalars are equal when equal as JSON, as numbers (`1 == 1.0`), or, under
/// `resources`-like maps, as Kubernetes quantities (`500m == 0.5`), since
/// the server stores quantities in canonical form. A desired `null`, `{}`
/// or `[]` is matched by an absent field.
pub fn needs_apply(desired: &Value, live: &Value) -> bool {
    !holds(live, desired, Context::Root)
}

/// Where in the object a comparison is, for the few places with rules of
/// their own.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Root,
    Metadata,
    Field,
    /// Values of a map such as `resources.limits`: quantities.
    Quantities,
}

fn holds(live: &Value, desired: &Value, ctx: Context) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => map_holds(l, d, ctx),
        (Value::Array(d), Value::Array(l)) => list_holds(l, d),
        (Value::Number(d), Value::Number(l)) => numbers_equal(d, l),
        (d, l) if ctx == Context::Quantities => d == l || quantities_equal(d, l),
        (d, l) => d == l,
    }
}

fn map_holds(live: &Map<String, Value>, desired: &Map<String, Value>, ctx: Context) -> bool {
    desired.iter().all(|(key, d)| {
        let child = child_context(ctx, key);
        match live.get(key) {
            Some(l) if ctx == Context::Metadata && key == "ownerReferences" => {
                keyed_list_holds(l, d, "uid")
            }
            Some(l) => holds(l, d, child),
            None => is_empty(d),
        }
    })
}

fn child_context(ctx: Context, key: &str) -> Context {
    match (ctx, key) {
        (Context::Quantities, _) => Context::Quantities,
        (Context::Root, "metadata") => Context::Metadata,
        // Quantity maps: container resources, ResourceQuota `hard`, PVC
        // `capacity` and LimitRange's per-type maps.
        (
            _,
            "limits"
            | "requests"
            | "hard"
            | "capacity"
            | "max"
            | "min"
            | "default"
            | "defaultRequest"
            | "maxLimitRequestRatio",
        ) => Context::Quantities,
        _ => Context::Field,
    }
}

fn list_holds(live: &[Value], desired: &[Value]) -> bool {
    if let Some(key) = merge_key(desired) {
        return desired.iter().all(|d| {
            let id = d.get(key);
            live.iter()
                .find(|l| l.get(key) == id)
                .is_some_and(|l| holds(l, d, Context::Field))
        });
    }
    live.len() == desired.len()
        && desired
            .iter()
            .zip(live)
            .all(|(d, l)| holds(l, d, Context::Field))
}

fn keyed_list_holds(live: &Value, desired: &Value, key: &str) -> bool {
    match (desired.as_array(), live.as_array()) {
        (Some(d), Some(l)) => d.iter().all(|d| {
            l.iter()
                .find(|l| l.get(key).is_some() && l.get(key) == d.get(key))
                .is_some_and(|l| holds(l, d, Context::Field))
        }),
        _ => holds(live, desired, Context::Field),
    }
}

/// `name` when every desired element is an object with a distinct string
/// `name` (containers, env, volumes, ports, ...): the lists server-side
/// apply merges by key.
fn merge_key(desired: &[Value]) -> Option<&'static str> {
    let mut names: Vec<&str> = Vec::with_capacity(desired.len());
    for d in desired {
        names.push(d.get("name")?.as_str()?);
    }
    names.sort_unstable();
    let distinct = names.windows(2).all(|w| w[0] != w[1]);
    (!desired.is_empty() && distinct).then_some("name")
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return x == y;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// `"500m"` and `0.5`, or `"1Gi"` and `"1024Mi"`: equal amounts.
fn quantities_equal(a: &Value, b: &Value) -> bool {
    use crate::cel::k8s::quantity::Quantity;
    let parse = |v: &Value| match v {
        Value::String(s) => Quantity::parse(s).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    };
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.compare(&y) == std::cmp::Ordering::Equal,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        live["spec"]["template"]["spec"]["containers"][0]["args"] =
            json!(["-g", "daemon off;", "x"]);
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
    fn desired_empty_values_match_absent_fields() {
        let d = json!({"metadata": {"annotations": {}}, "spec": {"args": [], "x": null}});
        assert!(!needs_apply(&d, &json!({"metadata": {}, "spec": {}})));
        assert!(needs_apply(&d, &json!({"metadata": {}, "spec": {"x": 1}})));
    }
}
