use super::*;
use serde_json::json;

/// A Pod of `containers` containers with `refs` configMapKeyRefs each.
fn pod(containers: usize, refs: usize) -> Vec<u8> {
    let containers: Vec<_> = (0..containers)
        .map(|c| {
            let env: Vec<_> = (0..refs)
                .map(|r| {
                    json!({"name": format!("E{r}"), "valueFrom":
                    {"configMapKeyRef": {"name": format!("cm-{c}-{r}"), "key": "k"}}})
                })
                .collect();
            json!({"name": format!("c{c}"), "image": "nginx:1.27", "env": env})
        })
        .collect();
    serde_json::to_vec(
        &json!({"request": {"object": {"apiVersion": "v1", "kind": "Pod",
        "spec": {"containers": containers,
            "volumes": [{"name": "v", "secret": {"secretName": "s"}},
                        {"name": "w", "configMap": {"name": "m"}}]}}}}),
    )
    .unwrap()
}

#[test]
fn counts_keys_not_their_text_in_strings() {
    assert_eq!(
        counts(&pod(3, 4)),
        Counts {
            references: 3 * 4 + 2,
            containers: 3
        }
    );
    // The same words as values, or escaped inside a string, are not keys.
    let text = br#"{"data": {"a": "configMapKeyRef", "b": "{\"secretKeyRef\": 1, \"image\": 2}"}}"#;
    assert_eq!(
        counts(text),
        Counts {
            references: 0,
            containers: 0
        }
    );
    // A prefix of a longer key is not that key.
    assert_eq!(
        counts(br#"{"configMapx": 1, "secretName": "s"}"#).references,
        0
    );
}

#[test]
fn references_weigh_only_when_the_inventory_is_read() {
    let body = pod(10, 10);
    let len = body.len() as u64;
    assert_eq!(estimate(&body, false), len + 10 * CONTAINER);
    assert_eq!(
        estimate(&body, true),
        len + 10 * CONTAINER + (100 + 2) * REFERENCE
    );
}

#[test]
fn the_costly_small_pod_estimates_over_the_threshold_an_ordinary_one_under() {
    let threshold = super::super::executor::HEAVY_COST;
    // Issue 36: 130 containers x 10 references, under 128 KiB.
    let costly = pod(130, 10);
    assert!(costly.len() < 128 * 1024, "{} bytes", costly.len());
    assert!(estimate(&costly, true) > threshold);
    // Without a policy that looks references up, far less.
    assert!(estimate(&costly, false) < estimate(&costly, true) / 4);
    // An ordinary Pod: a few containers, a few references each.
    assert!(estimate(&pod(4, 5), true) < threshold / 4);
}

/// A reviewer whose policies look objects up for the kinds named.
struct Reads(&'static [&'static str]);
impl Reviewer for Reads {
    fn validate(
        &self,
        req: &kube::core::admission::AdmissionRequest<kube::core::DynamicObject>,
    ) -> kube::core::admission::AdmissionResponse {
        kube::core::admission::AdmissionResponse::from(req)
    }
    fn mutate(
        &self,
        req: &kube::core::admission::AdmissionRequest<kube::core::DynamicObject>,
    ) -> kube::core::admission::AdmissionResponse {
        kube::core::admission::AdmissionResponse::from(req)
    }
    fn ready(&self) -> bool {
        true
    }
    fn reads_inventory(&self, api_version: &str, kind: &str, namespaced: bool) -> bool {
        assert_eq!(api_version, "v1");
        assert!(namespaced);
        self.0.contains(&kind)
    }
}

/// A review of `object` (a Pod's spec from [`pod`]) as kind `kind`.
fn review(kind: &str, user: &str, object: &[u8]) -> Vec<u8> {
    let object: serde_json::Value = serde_json::from_slice(object).unwrap();
    serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": kind},
            "namespace": "a", "userInfo": {"username": user},
            "object": object["request"]["object"]}}),
    )
    .unwrap()
}

#[test]
fn the_lane_follows_the_cost_not_the_size() {
    let costly = pod(130, 10);
    let pods = Reads(&["Pod"]);
    // Under 128 KiB, yet heavy: a policy looks its references up.
    let body = review("Pod", "alice", &costly);
    assert!(body.len() < 128 * 1024);
    assert_eq!(
        lane(&body, &pods),
        Lane {
            heavy: true,
            tenant: "alice".into()
        }
    );
    // Half of it is heavy as a Pod, light as a kind no such policy
    // matches.
    let half = pod(65, 10);
    assert!(lane(&review("Pod", "alice", &half), &pods).heavy);
    assert!(!lane(&review("PodTemplate", "alice", &half), &pods).heavy);
    assert!(!lane(&review("Pod", "alice", &half), &Reads(&[])).heavy);
    // An ordinary Pod stays light.
    assert!(!lane(&review("Pod", "bob", &pod(4, 5)), &pods).heavy);
    // Over 128 KiB of plain body: heavy whatever it holds.
    let big = json!({"request": {"object": {"data": {"k": "x".repeat(130 * 1024)}}}});
    let big = review("ConfigMap", "bob", &serde_json::to_vec(&big).unwrap());
    assert!(lane(&big, &Reads(&[])).heavy);
    // Not a review: light, nobody's.
    assert_eq!(
        lane(b"garbage", &pods),
        Lane {
            heavy: false,
            tenant: String::new()
        }
    );
}
