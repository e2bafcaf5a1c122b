use super::*;
use crate::group::member::{parse_member, BuiltinScopes};
use serde_json::json;

fn members(raw: &[Value]) -> Vec<Member> {
    raw.iter()
        .enumerate()
        .map(|(i, r)| parse_member(i, r, "t", &BuiltinScopes, false).expect("member"))
        .collect()
}

fn deployment(app: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app},
           "spec": {"selector": {"matchLabels": {"app": app}},
                    "template": {"metadata": {"labels": {"app": app, "tier": "web"}}}}})
}

fn service(name: &str, selector: Value, port: i64) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
           "spec": {"selector": selector, "ports": [{"name": "http", "port": port}]}})
}

fn ingress(service: &str, port: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
           "spec": {"rules": [{"host": "a.example", "http": {"paths": [
               {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": service, "port": port}}}]}}]}})
}

#[test]
fn a_service_must_select_a_workload_of_its_group() {
    let ok = members(&[
        deployment("shop"),
        service("shop", json!({"app": "shop"}), 80),
    ]);
    assert!(check(&ok).is_empty());
    let typo = members(&[
        deployment("shop"),
        service("shop", json!({"app": "shpo"}), 80),
    ]);
    let f = check(&typo);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].policy, SERVICE_SELECTS_MEMBER);
    assert!(f[0].message.contains("app=shpo"), "{}", f[0].message);
    // A subset of the pod labels selects; no selector is not checked.
    let partial = members(&[deployment("shop"), service("s", json!({"tier": "web"}), 80)]);
    assert!(check(&partial).is_empty());
    let manual = members(&[service("external", json!({}), 80)]);
    assert!(check(&manual).is_empty());
}

#[test]
fn an_ingress_must_route_to_a_service_and_port_of_its_group() {
    let base = [
        deployment("shop"),
        service("shop", json!({"app": "shop"}), 80),
    ];
    let with = |ing: Value| {
        let mut v = base.to_vec();
        v.push(ing);
        check(&members(&v))
    };
    assert!(with(ingress("shop", json!({"number": 80}))).is_empty());
    assert!(with(ingress("shop", json!({"name": "http"}))).is_empty());
    let f = with(ingress("shop", json!({"number": 8080})));
    assert_eq!(f.len(), 1);
    assert!(f[0].message.contains("port 8080"), "{}", f[0].message);
    let f = with(ingress("billing", json!({"number": 80})));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].policy, INGRESS_BACKEND_MEMBER);
    assert!(f[0].message.contains("Service billing"), "{}", f[0].message);
}
