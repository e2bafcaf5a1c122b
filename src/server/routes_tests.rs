use super::*;
use kube::core::admission::AdmissionReview;
use kube::core::DynamicObject;
use serde_json::{json, Value};

/// A body whose oldObject (kept as text) is nested deeper than a JSON
/// tree may be is refused, exactly where parsing it as a tree fails.
#[test]
fn old_object_nesting_is_limited_like_the_tree_parser() {
    let mut outcomes = std::collections::BTreeSet::new();
    for depth in 100..140 {
        // Brackets inside strings (after an escaped quote) do not count.
        let nested = format!(
            "{}1{}",
            r#"{"a":["x\"[{","#.repeat(depth / 2),
            "]}".repeat(depth / 2)
        );
        let nested = if depth % 2 == 1 {
            format!(r#"{{"b":{nested}}}"#)
        } else {
            nested
        };
        let body = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"ConfigMap"}},"resource":{{"group":"","version":"v1","resource":"configmaps"}},"operation":"UPDATE","userInfo":{{}},"oldObject":{nested}}}}}"#
        );
        let tree = serde_json::from_str::<Value>(&body);
        let ours = parse_review(body.as_bytes());
        assert_eq!(
            ours.is_ok(),
            tree.is_ok(),
            "depth {depth}: {:?}",
            ours.err()
        );
        outcomes.insert(tree.is_ok());
    }
    assert_eq!(outcomes.len(), 2, "the depths cross the limit");
}

/// `check_object` refuses exactly the objects kube's `DynamicObject`
/// parser refuses, without running it.
#[test]
fn object_check_matches_kube() {
    let objects = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
        json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"k": 1}}),
        json!({"apiVersion": 5, "kind": ["x"], "metadata": {"name": "a"}}),
        json!({"apiVersion": "v1"}),
        json!({}),
        json!({"metadata": null}),
        json!({"metadata": "x"}),
        json!({"metadata": {"name": 5}}),
        json!({"metadata": {"labels": {"x": 1}}}),
        json!({"metadata": {"labels": ["x"]}}),
        json!({"metadata": {"creationTimestamp": "yesterday"}}),
        json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}}),
        json!({"metadata": {"generation": "1"}}),
        json!({"metadata": {"ownerReferences": [{"name": "x"}]}}),
        json!({"metadata": {"finalizers": ["a", 1]}}),
        json!({"metadata": {"unknownField": {"deep": [1, 2]}}}),
        json!({"metadata": {"managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {}}}]}}),
    ];
    for object in objects {
        let kube = serde_json::from_value::<DynamicObject>(object.clone()).is_ok();
        let ours = check_object(&object);
        assert_eq!(
            ours.is_ok(),
            kube,
            "{object}: ours {ours:?}, kube accepts: {kube}"
        );
    }
}

/// Answers with a foreign uid and, on validate, a patch it should not send.
struct Sloppy;
impl Reviewer for Sloppy {
    fn validate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "remove", "path": "/data"}
        ]))
        .expect("patch");
        let mut r = AdmissionResponse::from(req)
            .with_patch(patch)
            .expect("patch");
        r.uid = "someone-else".to_owned();
        r.warnings = Some(vec!["careful".to_owned()]);
        r
    }
    fn mutate(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        AdmissionResponse::invalid(format!("cannot mutate {}", req.uid))
    }
    fn ready(&self) -> bool {
        true
    }
}

fn body(uid: &str) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
                "operation": "DELETE",
                "name": "web",
                "namespace": "team-a",
                "userInfo": {"username": "bob"},
                "object": null,
                "oldObject": {"apiVersion": "apps/v1", "kind": "Deployment",
                              "metadata": {"name": "web", "namespace": "team-a"}},
                "dryRun": true
            }
        }))
        .expect("json"),
    )
}

fn response(a: &Answer) -> Value {
    let v: Value = serde_json::from_slice(&a.body).expect("json answer");
    v["response"].clone()
}

#[test]
fn answers_carry_the_request_uid_and_validate_never_patches() {
    let a = review(&Sloppy, Endpoint::Validate, body("u-1"));
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.decision, Decision::Allowed);
    let r = response(&a);
    assert_eq!(r["uid"], "u-1");
    assert!(
        r.get("patch").is_none() && r.get("patchType").is_none(),
        "{r}"
    );
    assert_eq!(r["warnings"][0], "careful");

    let a = review(&Sloppy, Endpoint::Mutate, body("u-2"));
    assert_eq!(a.decision, Decision::Denied);
    assert_eq!(response(&a)["uid"], "u-2");
}

/// `n` variants of `seed`, each with one to four random byte-level edits
/// (a changed, inserted or deleted byte, a truncation, a JSON token).
fn mutations(seed: &[u8], n: usize) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n).map(move |_| {
        let mut v = seed.to_vec();
        for _ in 0..=(rnd() % 4) {
            let len = v.len().max(1) as u64;
            match rnd() % 4 {
                0 if !v.is_empty() => {
                    let i = (rnd() % len) as usize;
                    v[i] = rnd() as u8;
                }
                1 => v.truncate((rnd() % (len + 1)) as usize),
                2 => {
                    let i = (rnd() % (v.len() as u64 + 1)) as usize;
                    let tok: &[u8] = [&b"{"[..], b"}", b"[", b"\"", b",", b"null", b"9e999"]
                        [(rnd() % 7) as usize];
                    v.splice(i..i, tok.iter().copied());
                }
                3 if !v.is_empty() => {
                    let i = (rnd() % len) as usize;
                    v.remove(i);
                }
                _ => v.push(rnd() as u8),
            }
        }
        v
    })
}

#[test]
fn fuzzed_bodies_answer_200_or_400_without_panicking() {
    let seed = body("fuzz").to_vec();
    let mut invalid = 0;
    for v in mutations(&seed, 5000) {
        let a = review(&Sloppy, Endpoint::Validate, Bytes::from(v));
        assert!(
            matches!(a.status, StatusCode::OK | StatusCode::BAD_REQUEST),
            "{}",
            a.status
        );
        let r = response(&a);
        assert!(r["allowed"].is_boolean());
        if a.status == StatusCode::BAD_REQUEST {
            invalid += 1;
            assert_eq!(a.decision, Decision::Invalid);
            assert_eq!(r["status"]["code"], 400);
        }
    }
    assert!(invalid > 1000, "mutations too gentle: {invalid}");
}

/// kube's parse of a body, with the checks `parse_review` adds: the
/// review's kind and apiVersion.
fn kube_parse(body: &[u8]) -> Option<AdmissionRequest<DynamicObject>> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).ok()?;
    let req: AdmissionRequest<DynamicObject> = review.try_into().ok()?;
    (req.types.kind == META_KIND && req.types.api_version.starts_with("admission.k8s.io/"))
        .then_some(req)
}

/// The server reads the request's fields itself, in one pass; it must
/// accept exactly the bodies kube's `AdmissionReview` parser accepts,
/// and read the same request from them.
#[test]
fn request_parse_matches_kube() {
    let seed = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-7",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "subResource": "status",
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "requestSubResource": "status",
            "name": "a",
            "namespace": "team-a",
            "operation": "UPDATE",
            "userInfo": {"username": "bob", "groups": ["dev"], "extra": {"k": ["v"]}},
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"k": "1"}},
            "oldObject": {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "a"}, "data": {"k": "0"}},
            "dryRun": false,
            "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
            "unknown": [1, {"two": 2}]
        }
    }))
    .expect("json");
    let (mut accepted, mut refused) = (0, 0);
    for v in std::iter::once(seed.clone()).chain(mutations(&seed, 20_000)) {
        let ours = parse_review(&v);
        let Some(kube) = kube_parse(&v) else {
            assert!(
                ours.is_err(),
                "accepted what kube refuses: {}",
                String::from_utf8_lossy(&v)
            );
            refused += 1;
            continue;
        };
        let ours = ours.unwrap_or_else(|e| {
            panic!(
                "refused what kube accepts ({e}): {}",
                String::from_utf8_lossy(&v)
            )
        });
        accepted += 1;
        // kube's view of an object is lossy (a `kind` without an
        // `apiVersion` is dropped): compare what kube reads from ours.
        let kube_view = |o: Option<Value>| {
            o.map(|o| serde_json::from_value::<DynamicObject>(o).expect("kube reads it"))
                .map(|o| serde_json::to_value(o).expect("json"))
        };
        let as_json = |o: Option<&DynamicObject>| o.map(|o| serde_json::to_value(o).expect("json"));
        assert_eq!(kube_view(ours.object), as_json(kube.object.as_ref()));
        let old = ours
            .old_object
            .map(|o| serde_json::from_str(o.get()).expect("json"));
        assert_eq!(kube_view(old), as_json(kube.old_object.as_ref()));
        let fields = |r: &AdmissionRequest<DynamicObject>| {
            let mut r = r.clone();
            (r.object, r.old_object) = (None, None);
            (serde_json::to_value(&r).expect("json"), r.types)
        };
        assert_eq!(fields(&ours.request), fields(&kube));
    }
    assert!(
        accepted > 1000 && refused > 1000,
        "{accepted} accepted, {refused} refused"
    );
}
