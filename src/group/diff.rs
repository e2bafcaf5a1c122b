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
/// the server stores quantities in canonical form. A desired zero value
/// (`null`, `false`, `0`, `""`, `{}`, `[]`) is matched by an absent field,
/// and a Secret's `stringData` is compared as the `data` it is stored as.
pub fn needs_apply(desired: &Value, live: &Value) -> bool {
    let mut walk = Walk::first();
    compare(desired, live, &mut walk);
    !walk.found.is_empty()
}

/// The fields of `desired` that `live` lacks or contradicts, by the rules
/// of [`needs_apply`] (empty exactly when it is false), as paths in the
/// manifest: `data.mode`, `metadata.labels["app.kubernetes.io/name"]`,
/// `spec.template.spec.containers[0].image` (list positions are the
/// manifest's). A list that differs in length, or a named element that is
/// missing, is named as a whole.
pub fn differing_fields(desired: &Value, live: &Value) -> Vec<String> {
    let mut walk = Walk {
        path: Vec::new(),
        found: Vec::new(),
        all: true,
    };
    compare(desired, live, &mut walk);
    walk.found
}

fn compare<'a>(desired: &'a Value, live: &'a Value, walk: &mut Walk<'a>) {
    match secret_string_data(desired) {
        Some(stored_form) => {
            // The stored form is owned here: compare it without paths into it.
            let mut inner = Walk {
                path: Vec::new(),
                found: Vec::new(),
                all: walk.all,
            };
            holds(live, &stored_form, Context::Root, &mut inner);
            walk.found.extend(inner.found);
        }
        None => holds(live, desired, Context::Root, walk),
    }
}

/// A Secret's `stringData` as the server stores it: merged into `data`,
/// base64-encoded (the stored object never has `stringData`, so comparing
/// it as written would make the Secret look changed on every pass).
fn secret_string_data(desired: &Value) -> Option<Value> {
    use base64::Engine as _;
    let string_data = desired.get("stringData")?.as_object()?;
    if desired.get("kind").and_then(Value::as_str) != Some("Secret")
        || desired.get("apiVersion").and_then(Value::as_str) != Some("v1")
    {
        return None;
    }
    let mut stored = desired.clone();
    let object = stored.as_object_mut()?;
    object.remove("stringData");
    let data = object
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    let data = data.as_object_mut()?;
    for (key, value) in string_data {
        let text = value.as_str().unwrap_or_default();
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        data.insert(key.clone(), Value::String(encoded));
    }
    Some(stored)
}

/// One step of a path into an object.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// A comparison under way: where it is, and the paths that differ so far.
/// Without `all` it stops at the first difference (the cost of
/// [`needs_apply`], which every pass pays for every member, stays that of
/// a plain comparison: paths are rendered only for differences).
struct Walk<'a> {
    path: Vec<Step<'a>>,
    found: Vec<String>,
    all: bool,
}

impl<'a> Walk<'a> {
    fn first() -> Walk<'a> {
        Walk {
            path: Vec::new(),
            found: Vec::new(),
            all: false,
        }
    }

    fn done(&self) -> bool {
        !self.all && !self.found.is_empty()
    }

    fn differs(&mut self) {
        let mut text = String::new();
        for step in &self.path {
            match step {
                Step::Key(k) => {
                    let plain = !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    match (text.is_empty(), plain) {
                        (true, true) => text.push_str(k),
                        (false, true) => {
                            text.push('.');
                            text.push_str(k);
                        }
                        (_, false) => {
                            text.push_str(&format!("[{}]", Value::String(k.to_string())));
                        }
                    }
                }
                Step::Index(i) => text.push_str(&format!("[{i}]")),
            }
        }
        self.found.push(text);
    }

    fn at(&mut self, step: Step<'a>, f: impl FnOnce(&mut Walk<'a>)) {
        self.path.push(step);
        f(self);
        self.path.pop();
    }
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

fn holds<'a>(live: &'a Value, desired: &'a Value, ctx: Context, walk: &mut Walk<'a>) {
    let same = match (desired, live) {
        (Value::Object(d), Value::Object(l)) => return map_holds(l, d, ctx, walk),
        (Value::Array(d), Value::Array(l)) => return list_holds(l, d, walk),
        (Value::Number(d), Value::Number(l)) => numbers_equal(d, l),
        (d, l) if ctx == Context::Quantities => d == l || quantities_equal(d, l),
        (d, l) => d == l,
    };
    if !same {
        walk.differs();
    }
}

fn map_holds<'a>(
    live: &'a Map<String, Value>,
    desired: &'a Map<String, Value>,
    ctx: Context,
    walk: &mut Walk<'a>,
) {
    for (key, d) in desired {
        if walk.done() {
            return;
        }
        let child = child_context(ctx, key);
        walk.at(Step::Key(key), |walk| match live.get(key) {
            Some(l) if ctx == Context::Metadata && key == "ownerReferences" => {
                keyed_list_holds(l, d, "uid", walk)
            }
            Some(l) => holds(l, d, child, walk),
            None if is_empty(d) => {}
            None => walk.differs(),
        });
    }
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

fn list_holds<'a>(live: &'a [Value], desired: &'a [Value], walk: &mut Walk<'a>) {
    if let Some(key) = merge_key(desired) {
        return elements_hold(live, desired, key, walk);
    }
    if live.len() != desired.len() {
        return walk.differs();
    }
    for (i, (d, l)) in desired.iter().zip(live).enumerate() {
        if walk.done() {
            return;
        }
        walk.at(Step::Index(i), |walk| holds(l, d, Context::Field, walk));
    }
}

/// Each desired element against the live element with the same `key`.
fn elements_hold<'a>(live: &'a [Value], desired: &'a [Value], key: &str, walk: &mut Walk<'a>) {
    for (i, d) in desired.iter().enumerate() {
        if walk.done() {
            return;
        }
        let id = d.get(key);
        let found = live
            .iter()
            .find(|l| l.get(key).is_some() && l.get(key) == id);
        walk.at(Step::Index(i), |walk| match found {
            Some(l) => holds(l, d, Context::Field, walk),
            None => walk.differs(),
        });
    }
}

fn keyed_list_holds<'a>(live: &'a Value, desired: &'a Value, key: &str, walk: &mut Walk<'a>) {
    match (desired.as_array(), live.as_array()) {
        (Some(d), Some(l)) => elements_hold(l, d, key, walk),
        _ => holds(live, desired, Context::Field, walk),
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

/// Values an absent field matches: the API server drops zero values of
/// `omitempty` fields (`hostNetwork: false`, `workingDir: ""`), and a
/// field it does not drop is defaulted, so a hand edit that removes a
/// field shows as a different value, not as an absence.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
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

    /// A small deterministic generator (xorshift), for the property test.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
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
            let path = &paths[rng.below(paths.len() as u64) as usize];
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
}
