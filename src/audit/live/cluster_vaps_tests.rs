use super::*;
use crate::policy::Request;
use serde_json::json;

/// A VAP on ConfigMaps that needs a `team` label, with a ConfigMap param
/// naming the label's required value, and its binding.
fn vap(name: &str) -> Vec<Json> {
    vec![
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "operations": ["CREATE", "UPDATE"]}]},
            "validations": [{"expression":
                "has(object.metadata.labels) && object.metadata.labels.team == params.data.team",
                "message": "wrong team"}]
        }}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": format!("{name}-binding")},
            "spec": {"policyName": name, "validationActions": ["Deny"],
                "paramRef": {"name": "team", "namespace": "params", "parameterNotFoundAction": "Deny"}}}),
    ]
}

fn configmap(ns: &str, name: &str, team: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"team": team}},
        "data": {"team": team}})
}

#[test]
fn a_cluster_vap_is_judged_with_its_params_read_from_their_own_inventory() {
    let (policies, projection) = compile(vap("team-label"), &PolicySet::default());
    assert_eq!(policies.len(), 1);
    let mut vaps = ClusterVaps {
        policies,
        ..ClusterVaps::default()
    };
    vaps.params.set_projection(projection);
    vaps.params
        .upsert(&configmap("params", "team", "blue"), None)
        .expect("kept");
    vaps.param_kinds.insert(GroupKind::new("", "ConfigMap"));
    // The cluster's inventory holds a ConfigMap of the same key that says
    // otherwise: params are read from their own inventory only.
    let mut base = Inventory::new();
    base.upsert(&configmap("params", "team", "red"), None)
        .expect("kept");
    let lookup = WithParams {
        vaps: &vaps,
        base: &base,
    };
    let judge = |object: &Json| {
        let req = Request::create(object, "audit").expect("a request");
        vaps.policies.evaluate(&req, &lookup).verdicts
    };
    assert!(judge(&configmap("app", "ok", "blue")).is_empty());
    let bad = judge(&configmap("app", "bad", "red"));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].message, "wrong team");
}

#[test]
fn a_cluster_vap_named_like_an_own_policy_is_left_out_with_its_binding() {
    let mut inventory = Inventory::new();
    let own_docs: Vec<(Json, crate::inventory::Source)> = vap("team-label")
        .into_iter()
        .map(|d| {
            (
                d,
                crate::inventory::Source {
                    file: "own.yaml".into(),
                    line: 1,
                },
            )
        })
        .collect();
    let (own, errors) = PolicySet::compile(&own_docs);
    inventory.set_indexes(&own.index_decls()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let mut docs = vap("team-label");
    docs.extend(vap("other"));
    let (policies, _) = compile(docs, &own);
    let names: Vec<&str> = policies.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["other"]);
}
