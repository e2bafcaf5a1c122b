//! The type checker's warnings, in the texts kube-apiserver v1.36 wrote
//! into `status.typeChecking` for the same policies (the differential test
//! `vap_differential` compares every corpus policy on a real cluster).

use super::super::*;
use crate::k8s::openapi;
use serde_json::json;

fn warnings_of(spec: Json) -> Vec<(String, String)> {
    warnings_with(spec, openapi::builtin())
}

fn warnings_with(spec: Json, schemas: &openapi::Schemas) -> Vec<(String, String)> {
    let doc = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"}, "spec": spec});
    let source = Source {
        file: "test.yaml".into(),
        line: 1,
    };
    let (set, errors) = PolicySet::compile(&[(doc, source)]);
    assert!(errors.is_empty(), "{errors:?}");
    set.policies[0]
        .type_check_warnings(schemas)
        .into_iter()
        .map(|w| (w.field_ref, w.warning))
        .collect()
}

fn rules(rules: Json, validations: Json) -> Json {
    json!({"matchConstraints": {"resourceRules": rules}, "validations": validations})
}

fn deployments(validations: Json) -> Json {
    rules(
        json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
                "operations": ["CREATE"]}]),
        validations,
    )
}

#[test]
fn an_undefined_field_is_a_warning_naming_the_kind() {
    let w = warnings_of(deployments(json!([
        {"expression": "object.spec.replicas > 1"},
        {"expression": "object.spec.foo == 1", "messageExpression": "'x' + object.metadata.name"},
    ])));
    assert_eq!(
        w,
        vec![(
            "spec.validations[1].expression".to_string(),
            "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'foo'\n | object.spec.foo == 1\n | ...........^\n".to_string()
        )]
    );
}

#[test]
fn wrong_types_every_error_and_every_kind() {
    let spec = rules(
        json!([{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "resources": ["statefulsets", "deployments"], "operations": ["CREATE"]}]),
        json!([{"expression": "object.spec.replicas == 'x' || object.spec.nope"}]),
    );
    let w = warnings_of(spec);
    let block = |kind: &str| {
        format!(
            "apps/v1, Kind={kind}: ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, string)'\n | object.spec.replicas == 'x' || object.spec.nope\n | .....................^\nERROR: <input>:1:43: undefined field 'nope'\n | object.spec.replicas == 'x' || object.spec.nope\n | ..........................................^\n"
        )
    };
    assert_eq!(w.len(), 1);
    assert_eq!(
        w[0].1,
        format!("{}\n{}", block("Deployment"), block("StatefulSet"))
    );
}

#[test]
fn secret_data_is_bytes_and_int_or_string_is_dyn() {
    let spec = rules(
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets", "services"],
                "operations": ["CREATE"]}]),
        json!([
            {"expression": "object.data.all(k, object.data[k].startsWith('x'))"},
            {"expression": "object.spec.ports.all(p, p.targetPort == 80 || p.targetPort == 'http')"},
        ]),
    );
    let w = warnings_of(spec);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].1.contains("/v1, Kind=Secret: ERROR: <input>:1:45: found no matching overload for 'startsWith' applied to 'bytes.(string)'"), "{}", w[0].1);
    // Services have no data, Secrets no spec.
    assert!(w[0]
        .1
        .contains("/v1, Kind=Service: ERROR: <input>:1:7: undefined field 'data'"));
    assert!(!w[1].1.contains("Kind=Service"), "{}", w[1].1);
    assert!(w[1]
        .1
        .contains("/v1, Kind=Secret: ERROR: <input>:1:7: undefined field 'spec'"));
}

#[test]
fn variables_are_retyped_and_object_types_become_dyn() {
    let mut spec = deployments(json!([
        {"expression": "variables.replicas == 'three'"},
        {"expression": "variables.spec.anything == 1"},
    ]));
    spec["variables"] = json!([
        {"name": "replicas", "expression": "object.spec.replicas"},
        {"name": "spec", "expression": "object.spec"},
    ]);
    let w = warnings_of(spec);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].0, "spec.validations[0].expression");
    assert!(w[0].1.contains("applied to '(int, string)'"));
}

#[test]
fn wildcards_unknown_kinds_and_the_limit_of_ten_a_rule() {
    let wildcard = rules(
        json!([{"apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["deployments"],
                "operations": ["CREATE"]}]),
        json!([{"expression": "object.nope == 1"}]),
    );
    assert!(warnings_of(wildcard).is_empty());
    let unknown = rules(
        json!([{"apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["widgets"],
                "operations": ["CREATE"]}]),
        json!([{"expression": "object.nope == 1"}]),
    );
    assert!(warnings_of(unknown).is_empty());
    let many: Vec<&str> = vec![
        "configmaps",
        "endpoints",
        "events",
        "limitranges",
        "namespaces",
        "nodes",
        "persistentvolumeclaims",
        "persistentvolumes",
        "pods",
        "podtemplates",
        "secrets",
        "services",
    ];
    let spec = rules(
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": many,
                "operations": ["CREATE"]}]),
        json!([{"expression": "object.nope == 1"}]),
    );
    let w = warnings_of(spec);
    assert_eq!(w[0].1.matches("ERROR:").count(), 10);
    assert!(!w[0].1.contains("Kind=Service:") && !w[0].1.contains("Kind=Secret:"));
}

#[test]
fn params_from_a_crd_param_kind() {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "spec": {"group": "example.com", "names": {"plural": "limits", "kind": "Limit"},
          "scope": "Namespaced", "versions": [{"name": "v1", "served": true, "storage": true,
          "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "max": {"type": "integer"}}}}}]}});
    let mut schemas = openapi::builtin().clone();
    schemas.add_crd(&crd).expect("a CRD");
    let mut spec = deployments(json!([
        {"expression": "object.spec.replicas <= params.max"},
        {"expression": "object.spec.replicas <= params.maximum"},
    ]));
    spec["paramKind"] = json!({"apiVersion": "example.com/v1", "kind": "Limit"});
    let w = warnings_with(spec, &schemas);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].1.contains("undefined field 'maximum'"));
}

#[test]
fn a_variable_of_an_object_type_is_dyn_at_creation_too() {
    let doc = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"},
        "spec": {"matchConstraints": {"resourceRules": []},
          "variables": [{"name": "r", "expression": "request"}],
          "validations": [{"expression": "variables.r.anything == 1"}]}});
    let source = Source {
        file: "test.yaml".into(),
        line: 1,
    };
    let (_, errors) = PolicySet::compile(&[(doc, source)]);
    assert!(errors.is_empty(), "{errors:?}");
}
