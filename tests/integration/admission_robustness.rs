//! Hostile AdmissionReview bodies get a well-formed answer, never a panic:
//! seeded mutations of a few valid reviews (byte flips, truncations, field
//! deletions, type changes of `request.object`, `oldObject`, `operation`,
//! `kind`, `dryRun`..., huge and deeply nested values), through the function
//! the server answers with, over the real engine and the bundled policies,
//! on `/validate` and `/mutate`.
//!
//! Every answer must be 200 with an AdmissionReview carrying the request's
//! uid, or 4xx/5xx with a JSON AdmissionReview whose status code is the
//! HTTP status. `ADMISSION_FUZZ_ROUNDS` scales the number of mutations
//! (default 300 per seed); `fuzz/fuzz_targets/admission.rs` is the
//! coverage-guided version.

use crate::support::admission_engine;
use crate::support::rng;

use admission_engine::engine;
use interlock::admission::Engine;
use rng::Rng;
use serde_json::{json, Value};

#[allow(clippy::too_many_arguments)]
fn review(
    uid: &str,
    (group, version, kind, resource): (&str, &str, &str, &str),
    op: &str,
    object: Value,
    old: Value,
    dry_run: bool,
) -> Value {
    let name = object["metadata"]["name"]
        .as_str()
        .or(old["metadata"]["name"].as_str())
        .unwrap_or("x")
        .to_owned();
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "name": name, "namespace": "a", "operation": op,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object, "oldObject": old, "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

fn seeds() -> Vec<Value> {
    let ingress = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "copy", "namespace": "a"},
        "spec": {"rules": [{"host": "shop.example", "http": {"paths": [{"path": "/"}]}}]}});
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "a", "labels": {"app": "api"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": {"labels": {"app": "api"}},
                "spec": {"serviceAccountName": "sa",
                    "containers": [{"name": "c", "image": "nginx:latest",
                        "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}],
                        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                    "volumes": [{"name": "v", "configMap": {"name": "missing"}}]}}}});
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "p", "namespace": "a"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}});
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "h", "namespace": "a"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "maxReplicas": 3}});
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "s", "namespace": "a"}, "spec": {"selector": {"app": "web"}}});
    vec![
        review(
            "u-ingress",
            ("networking.k8s.io", "v1", "Ingress", "ingresses"),
            "CREATE",
            ingress,
            Value::Null,
            false,
        ),
        review(
            "u-deploy",
            ("apps", "v1", "Deployment", "deployments"),
            "UPDATE",
            deployment.clone(),
            deployment,
            false,
        ),
        review(
            "u-pdb",
            (
                "policy",
                "v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
            ),
            "CREATE",
            pdb,
            Value::Null,
            true,
        ),
        review(
            "u-hpa",
            (
                "autoscaling",
                "v2",
                "HorizontalPodAutoscaler",
                "horizontalpodautoscalers",
            ),
            "CREATE",
            hpa,
            Value::Null,
            false,
        ),
        review(
            "u-svc",
            ("", "v1", "Service", "services"),
            "DELETE",
            Value::Null,
            service,
            false,
        ),
    ]
}

/// Paths (as keys from the root) of every map entry and list element.
fn paths(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                prefix.push(k.clone());
                out.push(prefix.clone());
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                prefix.push(i.to_string());
                out.push(prefix.clone());
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn slot<'v>(v: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    let mut cur = v;
    for p in path {
        cur = match cur {
            Value::Object(m) => m.get_mut(p)?,
            Value::Array(a) => a.get_mut(p.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn nested(depth: usize, list: bool) -> Value {
    let mut v = json!("leaf");
    for _ in 0..depth {
        v = if list { json!([v]) } else { json!({ "k": v }) };
    }
    v
}

/// Replacement values: other types, huge and deeply nested ones.
fn odd_value(rng: &mut Rng) -> Value {
    match rng.below(14) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(-1),
        3 => json!(1.5e300),
        4 => json!(u64::MAX),
        5 => json!(""),
        6 => json!("CREATE"),
        7 => json!([]),
        8 => json!({}),
        9 => json!("x".repeat(100_000)),
        10 => Value::Array((0..5_000).map(|i| json!(i)).collect()),
        11 => nested(60 + rng.below(200), rng.below(2) == 0),
        12 => json!({"metadata": {"name": 5, "labels": [1]}, "spec": null}),
        _ => json!("\u{0}\u{ffff}\u{1F600}"),
    }
}

/// Fields whose type or presence the parser and engine depend on.
const KEY_FIELDS: &[&[&str]] = &[
    &["request", "object"],
    &["request", "oldObject"],
    &["request", "operation"],
    &["request", "kind"],
    &["request", "kind", "kind"],
    &["request", "resource"],
    &["request", "dryRun"],
    &["request", "uid"],
    &["request", "namespace"],
    &["request", "name"],
    &["request", "subResource"],
    &["request", "userInfo"],
    &["request", "object", "metadata"],
    &["request", "object", "metadata", "name"],
    &["request", "object", "apiVersion"],
    &["request", "object", "kind"],
    &["request", "object", "spec"],
    &["request", "oldObject", "metadata"],
    &["request"],
    &["apiVersion"],
    &["kind"],
];

fn mutate_tree(v: &mut Value, rng: &mut Rng) {
    let mut all = Vec::new();
    paths(v, &mut Vec::new(), &mut all);
    let path: Vec<String> = if rng.below(2) == 0 {
        KEY_FIELDS[rng.below(KEY_FIELDS.len())]
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else if all.is_empty() {
        return;
    } else {
        all[rng.below(all.len())].clone()
    };
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    if rng.below(3) == 0 {
        // Delete the field.
        if let Some(Value::Object(m)) = slot(v, parent) {
            m.shift_remove(last);
        } else if let Some(Value::Array(a)) = slot(v, parent) {
            if let Ok(i) = last.parse::<usize>() {
                if i < a.len() {
                    a.remove(i);
                }
            }
        }
    } else if let Some(x) = slot(v, &path) {
        *x = odd_value(rng);
    } else if let Some(Value::Object(m)) = slot(v, parent) {
        m.insert(last.clone(), odd_value(rng));
    }
}

fn mutate_bytes(b: &mut Vec<u8>, rng: &mut Rng) {
    for _ in 0..=rng.below(4) {
        let len = b.len();
        match rng.below(5) {
            0 if len > 0 => {
                let i = rng.below(len);
                b[i] = rng.next() as u8;
            }
            1 => b.truncate(rng.below(len + 1)),
            2 => {
                let i = rng.below(len + 1);
                let tok: &[u8] = [
                    &b"{"[..],
                    b"}",
                    b"[",
                    b"]",
                    b"\"",
                    b",",
                    b":",
                    b"null",
                    b"9e999",
                    b"\\u0000",
                    b"\xff",
                ][rng.below(11)];
                b.splice(i..i, tok.iter().copied());
            }
            3 if len > 0 => {
                let i = rng.below(len);
                b.remove(i);
            }
            _ => {
                // Duplicate a slice in place (duplicate keys, repeated structure).
                if len > 1 {
                    let i = rng.below(len);
                    let j = (i + 1 + rng.below(64)).min(len);
                    let chunk = b[i..j].to_vec();
                    b.splice(j..j, chunk);
                }
            }
        }
    }
}

/// The properties every answer must have; the answer's kind for the tally.
fn check(engine: &Engine, body: &[u8], mutate: bool) -> u16 {
    let (status, out) = interlock::server::answer_body(engine, mutate, body);
    let shown = || String::from_utf8_lossy(&body[..body.len().min(400)]).into_owned();
    let answer: Value = serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("answer is not JSON ({e}) for {}", shown()));
    assert_eq!(answer["kind"], "AdmissionReview", "{answer}");
    let resp = &answer["response"];
    assert!(resp["allowed"].is_boolean(), "{answer}");
    match status {
        200 => {
            let sent: Value = serde_json::from_slice(body).expect("a 200 answers valid JSON");
            assert_eq!(resp["uid"], sent["request"]["uid"], "{answer}");
            assert!(resp["uid"].is_string(), "{answer}");
            if !mutate {
                assert!(resp.get("patch").is_none(), "validate patched: {answer}");
            }
        }
        400..=599 => {
            assert_eq!(resp["allowed"], false, "{answer}");
            assert_eq!(resp["status"]["code"], status, "{answer}");
            assert!(resp["status"]["message"].is_string(), "{answer}");
        }
        other => panic!("status {other} for {}", shown()),
    }
    status
}

/// Issue 17, item 6: `kubectl debug --profile=sysadmin` adds a privileged
/// ephemeral container through the `pods/ephemeralcontainers` subresource
/// (an UPDATE whose object is the whole Pod). The bundled
/// pod-security-baseline matches that subresource and reads
/// `spec.ephemeralContainers`; a debug container without privileges passes.
#[test]
fn privileged_ephemeral_containers_are_denied() {
    let e = engine();
    let pod = |privileged: bool| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "a"},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}],
                "ephemeralContainers": [{"name": "debugger-x7k2p", "image": "busybox:1.36.1",
                    "securityContext": {"privileged": privileged}}]}})
    };
    let before = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "a"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}});
    let answer = |privileged: bool| {
        let mut r = review(
            "debug-1",
            ("", "v1", "Pod", "pods"),
            "UPDATE",
            pod(privileged),
            before.clone(),
            false,
        );
        r["request"]["subResource"] = json!("ephemeralcontainers");
        r["request"]["requestSubResource"] = json!("ephemeralcontainers");
        let body = serde_json::to_vec(&r).expect("json");
        assert_eq!(check(&e, &body, false), 200);
        let (_, out) = interlock::server::answer_body(&e, false, &body);
        serde_json::from_slice::<Value>(&out).expect("json")["response"].clone()
    };
    let denied = answer(true);
    assert_eq!(denied["allowed"], false, "{denied}");
    let msg = denied["status"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("pod-security-baseline")
            && msg.contains("privileged containers are not allowed: debugger-x7k2p"),
        "{msg}"
    );
    let allowed = answer(false);
    assert_eq!(allowed["allowed"], true, "{allowed}");
}

#[test]
fn the_seeds_are_answered_as_the_policies_say() {
    let e = engine();
    let answers: Vec<Value> = seeds()
        .iter()
        .map(|s| {
            let body = serde_json::to_vec(s).expect("json");
            assert_eq!(check(&e, &body, false), 200);
            let (_, out) = interlock::server::answer_body(&e, false, &body);
            serde_json::from_slice::<Value>(&out).expect("json")["response"].clone()
        })
        .collect();
    // Ingress claiming shop.example, Deployment with a latest tag: denied;
    // its missing ConfigMap may be created later, so that is a warning.
    // The PDB selects web (2 replicas, 50%), the HPA targets web, the
    // Service is deleted: allowed.
    let allowed: Vec<bool> = answers.iter().map(|a| a["allowed"] == true).collect();
    assert_eq!(allowed, [false, false, true, true, true], "{answers:#?}");
    let msg = answers[1]["status"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("disallow-latest-tag"), "{msg}");
    assert!(!msg.contains("pod-references-exist"), "{msg}");
    let warnings = answers[1]["warnings"].to_string();
    assert!(warnings.contains("pod-references-exist"), "{warnings}");
}

#[test]
fn mutated_reviews_get_well_formed_answers() {
    let e = engine();
    let rounds: usize = std::env::var("ADMISSION_FUZZ_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tally = std::collections::BTreeMap::<u16, usize>::new();
    for seed in seeds() {
        for round in 0..rounds {
            let body = if round % 2 == 0 {
                let mut tree = seed.clone();
                for _ in 0..=rng.below(3) {
                    mutate_tree(&mut tree, &mut rng);
                }
                serde_json::to_vec(&tree).expect("json")
            } else {
                let mut b = serde_json::to_vec(&seed).expect("json");
                mutate_bytes(&mut b, &mut rng);
                b
            };
            let mutate = round % 3 == 0;
            *tally.entry(check(&e, &body, mutate)).or_default() += 1;
        }
    }
    // The mutations must reach both the parser's errors and the engine.
    let total = rounds * seeds().len();
    let ok = tally.get(&200).copied().unwrap_or(0);
    let bad = tally.get(&400).copied().unwrap_or(0);
    assert!(
        ok >= total / 20 && bad >= total / 20,
        "mutations too gentle or too rough: {tally:?}"
    );
}

#[test]
fn deep_and_huge_bodies_are_refused_or_answered_not_crashed() {
    let e = engine();
    let base = seeds()[0].clone();
    for depth in [100, 126, 127, 128, 129, 5_000, 100_000] {
        for list in [false, true] {
            // Written as text: a Value that deep would overflow the test's
            // own stack when printed or dropped.
            let (o, c) = if list { ("[", "]") } else { ("{\"k\":", "}") };
            let deep = format!("{}1{}", o.repeat(depth), c.repeat(depth));
            let mut b = base.clone();
            b["request"]["object"]["spec"]["x"] = json!("@DEEP@");
            let text = serde_json::to_string(&b).expect("json");
            let body = text.replace("\"@DEEP@\"", &deep);
            for mutate in [false, true] {
                let status = check(&e, body.as_bytes(), mutate);
                // The object starts 4 levels down; serde_json stops at 128.
                assert_eq!(status == 400, depth + 4 > 128, "depth {depth}: {status}");
            }
        }
    }
    // Nesting past serde_json's recursion limit is a 400, not a stack overflow.
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let body = format!(
        "{{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{deep}}}"
    );
    assert_eq!(check(&e, body.as_bytes(), false), 400);
    // A 4 MB label value is answered.
    let mut big = seeds()[1].clone();
    big["request"]["object"]["metadata"]["labels"]["big"] = json!("x".repeat(4 << 20));
    assert_eq!(
        check(&e, &serde_json::to_vec(&big).expect("json"), false),
        200
    );
}
