//! Decisions that kube-apiserver's ValidatingAdmissionPolicy plugin makes
//! and the engine must make the same way. Each was found by the differential
//! test (tests/integration/vap_differential.rs) against a real kube-apiserver.

use super::*;
use serde_json::json;

fn compile(docs: Vec<Json>) -> (PolicySet, Inventory) {
    let mut inventory = Inventory::new();
    let pairs: Vec<(Json, Source)> = docs
        .into_iter()
        .map(|d| {
            (
                d,
                Source {
                    file: "test.yaml".into(),
                    line: 1,
                },
            )
        })
        .collect();
    let (set, errors) = PolicySet::compile(&pairs);
    inventory.set_indexes(&set.index_decls()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    (set, inventory)
}

/// A policy on ConfigMaps and Namespaces (CREATE) plus its binding.
fn policy(name: &str, spec: Json, actions: &[&str], param_ref: Option<Json>) -> Vec<Json> {
    let mut spec = spec;
    spec["matchConstraints"] = json!({"resourceRules": [{
        "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps", "namespaces"], "operations": ["CREATE"]
    }]});
    let mut binding = json!({"policyName": name, "validationActions": actions});
    if let Some(p) = param_ref {
        binding["paramRef"] = p;
    }
    vec![
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": name}, "spec": spec}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": binding}),
    ]
}

fn configmap(data: Json) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": data})
}

fn evaluate(
    set: &PolicySet,
    inventory: &Inventory,
    object: &Json,
) -> (Vec<Verdict>, AuditAnnotations) {
    let req = Request::create(object, "admin").expect("an object");
    let o = set.evaluate(&req, inventory);
    (o.verdicts, o.annotations)
}

fn messages(verdicts: &[Verdict]) -> Vec<(Action, &str)> {
    verdicts
        .iter()
        .map(|v| (v.action, v.message.as_str()))
        .collect()
}

#[test]
fn a_namespace_request_has_its_own_name_as_namespace_and_no_namespace_object() {
    let (set, inv) = compile(policy(
        "p",
        json!({"validations": [
            {"expression": "request.namespace == object.metadata.name && namespaceObject == null", "message": "wrong"}
        ]}),
        &["Deny"],
        None,
    ));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}});
    let req = Request::create(&ns, "admin").expect("a request");
    assert_eq!(req.namespace, "team-a");
    assert!(req.is_namespace_request() && !req.is_namespaced());
    assert!(evaluate(&set, &inv, &ns).0.is_empty());
}

#[test]
fn a_namespaced_scope_rule_does_not_match_namespaces() {
    let (mut set, inv) = compile(policy(
        "p",
        json!({"validations": [{"expression": "false"}]}),
        &["Deny"],
        None,
    ));
    std::sync::Arc::get_mut(&mut set.policies).expect("not shared")[0]
        .matcher
        .resource_rules[0]
        .scope = Some("Namespaced".into());
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}});
    assert!(evaluate(&set, &inv, &ns).0.is_empty());
    assert_eq!(evaluate(&set, &inv, &configmap(json!({}))).0.len(), 1);
}

#[test]
fn request_sub_resource_is_absent_for_the_main_resource() {
    let (set, inv) = compile(policy(
        "p",
        json!({"validations": [{"expression": "request.subResource == ''"}]}),
        &["Deny"],
        None,
    ));
    let (v, _) = evaluate(&set, &inv, &configmap(json!({})));
    assert_eq!(
        messages(&v),
        [(
            Action::Deny,
            "expression 'request.subResource == ''' resulted in error: no such key: subResource"
        )]
    );
}

/// `request` as kube-apiserver sends it, field for field; `name`,
/// `namespace` and `subResource` only when set.
#[test]
fn the_request_variable_is_shaped_like_an_admission_request() {
    let cm = configmap(json!({}));
    let mut req = Request::create(&cm, "alice").expect("a request");
    req.uid = "u-1".into();
    req.groups = vec!["dev".into(), "system:authenticated".into()];
    let whole = req.to_value().to_json();
    let gv = json!({"group": "", "version": "v1"});
    let with = |k: &str, v: &str| {
        let mut m = gv.clone();
        m[k] = v.into();
        m
    };
    assert_eq!(
        whole,
        json!({"uid": "u-1", "kind": with("kind", "ConfigMap"), "resource": with("resource", "configmaps"),
               "requestKind": with("kind", "ConfigMap"), "requestResource": with("resource", "configmaps"),
               "name": "cm", "namespace": "ns", "operation": "CREATE",
               "userInfo": {"username": "alice", "groups": ["dev", "system:authenticated"]},
               "dryRun": false})
    );
    let keys: Vec<_> = whole.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "uid",
            "kind",
            "resource",
            "requestKind",
            "requestResource",
            "name",
            "namespace",
            "operation",
            "userInfo",
            "dryRun"
        ]
    );
    req.subresource = "status".into();
    req.name.clear();
    req.namespace.clear();
    let m = req.to_value().to_json();
    assert_eq!(m["subResource"], "status");
    assert!(m.get("name").is_none() && m.get("namespace").is_none());
}

#[test]
fn a_false_match_condition_wins_over_a_failing_one() {
    let (set, inv) = compile(policy(
        "p",
        json!({
            "matchConditions": [
                {"name": "boom", "expression": "object.data.missing == 'x'"},
                {"name": "off", "expression": "object.data.on == 'yes'"}
            ],
            "validations": [{"expression": "false", "message": "denied"}]
        }),
        &["Deny"],
        None,
    ));
    // `off` is false: the policy is skipped although `boom` fails.
    assert!(evaluate(&set, &inv, &configmap(json!({"on": "no"})))
        .0
        .is_empty());
    // Otherwise the error denies, in kube-apiserver's words.
    let (v, _) = evaluate(&set, &inv, &configmap(json!({"on": "yes"})));
    assert_eq!(
        messages(&v),
        [(
            Action::Deny,
            "expression 'object.data.missing == 'x'' resulted in error: no such key: missing"
        )]
    );
}

#[test]
fn several_failing_match_conditions_are_aggregated() {
    let (set, inv) = compile(policy(
        "p",
        json!({
            "matchConditions": [
                {"name": "a", "expression": "object.data.a == 'x'"},
                {"name": "b", "expression": "object.data.b == 'x'"}
            ],
            "validations": [{"expression": "false"}]
        }),
        &["Deny"],
        None,
    ));
    let (v, _) = evaluate(&set, &inv, &configmap(json!({})));
    assert_eq!(
        v[0].message,
        "[expression 'object.data.a == 'x'' resulted in error: no such key: a, expression 'object.data.b == 'x'' resulted in error: no such key: b]"
    );
}

#[test]
fn missing_params_with_deny_are_a_configuration_error() {
    let param_ref =
        json!({"name": "absent", "namespace": "params", "parameterNotFoundAction": "Deny"});
    let spec = |fp: &str| {
        json!({"failurePolicy": fp, "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
               "validations": [{"expression": "true"}]})
    };
    // failurePolicy Ignore: admitted.
    let (set, inv) = compile(policy(
        "p",
        spec("Ignore"),
        &["Deny"],
        Some(param_ref.clone()),
    ));
    assert!(evaluate(&set, &inv, &configmap(json!({}))).0.is_empty());
    // failurePolicy Fail: denied even through a Warn binding.
    let (set, inv) = compile(policy("p", spec("Fail"), &["Warn"], Some(param_ref)));
    let (v, _) = evaluate(&set, &inv, &configmap(json!({})));
    assert_eq!(
        messages(&v),
        [(
            Action::Deny,
            "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        )]
    );
}

#[test]
fn audit_annotations_are_trimmed_and_empty_values_left_out() {
    let (set, inv) = compile(policy(
        "p",
        json!({"validations": [{"expression": "true"}], "auditAnnotations": [
            {"key": "owner", "valueExpression": "'  ann  '"},
            {"key": "empty", "valueExpression": "'   '"},
            {"key": "none", "valueExpression": "null"}
        ]}),
        &["Deny"],
        None,
    ));
    let (v, annotations) = evaluate(&set, &inv, &configmap(json!({})));
    assert!(v.is_empty());
    assert_eq!(annotations, [("p/owner".to_string(), "ann".to_string())]);
}

#[test]
fn a_failing_audit_annotation_denies_whatever_the_binding_actions() {
    let spec = |fp: &str| {
        json!({"failurePolicy": fp, "validations": [{"expression": "true"}], "auditAnnotations": [
            {"key": "ratio", "valueExpression": "string(1 / int(object.data.zero))"}
        ]})
    };
    let cm = configmap(json!({"zero": "0"}));
    let (set, inv) = compile(policy("p", spec("Fail"), &["Audit"], None));
    let (v, _) = evaluate(&set, &inv, &cm);
    assert_eq!(
        messages(&v),
        [(
            Action::Deny,
            "expression 'string(1 / int(object.data.zero))' resulted in error: division by zero"
        )]
    );
    // Ignore drops the evaluation error.
    let (set, inv) = compile(policy("p", spec("Ignore"), &["Audit"], None));
    let (v, _) = evaluate(&set, &inv, &cm);
    assert!(v.is_empty());
}

/// kube-apiserver refuses at creation an expression whose static type is
/// not the one its field needs, so such results never reach evaluation.
#[test]
fn expressions_of_the_wrong_static_type_are_refused_at_load() {
    for (spec, message) in [
        (
            json!({"validations": [{"expression": "true"}], "auditAnnotations": [{"key": "k", "valueExpression": "1"}]}),
            "spec.auditAnnotations[0].valueExpression: must evaluate to one of [string null_type] but got int",
        ),
        (
            json!({"validations": [{"expression": "object.data.name"}]}),
            "spec.validations[0].expression: must evaluate to bool but got dyn",
        ),
        (
            json!({"validations": [{"expression": "true", "messageExpression": "1"}]}),
            "spec.validations[0].messageExpression: must evaluate to string but got int",
        ),
        (
            json!({"validations": [{"expression": "params.x == 1"}]}),
            "undeclared reference to 'params' (in container '')",
        ),
        (
            json!({"validations": [{"expression": "1 == 1.0"}]}),
            "spec.validations[0].expression: ERROR: <input>:1:3: found no matching overload for '_==_' applied to '(int, double)'",
        ),
    ] {
        let source = Source {
            file: "test.yaml".into(),
            line: 1,
        };
        let docs: Vec<(Json, Source)> = policy("p", spec, &["Deny"], None)
            .into_iter()
            .map(|d| (d, source.clone()))
            .collect();
        let (set, errors) = PolicySet::compile(&docs);
        assert!(set.is_empty());
        assert!(errors[0].message.contains(message), "{:?}", errors[0]);
        assert_eq!(errors[0].policy, "p");
    }
}

#[test]
fn audit_annotation_values_of_several_bindings_are_joined() {
    let docs = policy(
        "p",
        json!({"validations": [{"expression": "true"}], "auditAnnotations": [
            {"key": "limit", "valueExpression": "string(params.data.limit)"}
        ], "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}),
        &["Deny"],
        Some(json!({"selector": {}, "namespace": "params", "parameterNotFoundAction": "Deny"})),
    );
    let (set, mut inv) = compile(docs);
    for (name, limit) in [("a", "1"), ("b", "2"), ("c", "1")] {
        let p = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "params"}, "data": {"limit": limit}});
        inv.upsert(&p, None).expect("upsert");
    }
    let (_, annotations) = evaluate(&set, &inv, &configmap(json!({})));
    assert_eq!(annotations, [("p/limit".to_string(), "1, 2".to_string())]);
}

#[test]
fn a_validation_that_is_not_true_fails_with_its_message() {
    let (set, inv) = compile(policy(
        "p",
        json!({"failurePolicy": "Ignore", "validations": [
            {"expression": "object.data.name == 'y'", "message": "  not true  "},
            {"expression": "  1 == 2  "}
        ]}),
        &["Deny"],
        None,
    ));
    let (v, _) = evaluate(&set, &inv, &configmap(json!({"name": "x"})));
    assert_eq!(
        messages(&v),
        [
            (Action::Deny, "not true"),
            (Action::Deny, "failed expression: 1 == 2")
        ]
    );
}

#[test]
fn a_failing_variable_is_named_in_the_error() {
    let (set, inv) = compile(policy(
        "p",
        json!({"variables": [
            {"name": "n", "expression": "int(object.data.n)"},
            {"name": "twice", "expression": "variables.n * 2"}
        ], "validations": [{"expression": "variables.twice < 10"}]}),
        &["Deny"],
        None,
    ));
    let (v, _) = evaluate(&set, &inv, &configmap(json!({"n": "two"})));
    assert_eq!(
        messages(&v),
        [(
            Action::Deny,
            "expression 'variables.twice < 10' resulted in error: composited variable \"twice\" fails to evaluate: composited variable \"n\" fails to evaluate: type conversion error from 'string' to 'int'"
        )]
    );
}

/// An InterlockPolicy's `admissionActions` apply to admission requests
/// (those with a uid) only; offline requests keep `validationActions`.
#[test]
fn admission_actions_apply_at_admission_only() {
    let (set, inv) = compile(vec![json!({
        "apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
        "metadata": {"name": "later"},
        "spec": {
            "validationActions": ["Deny"], "admissionActions": ["Warn"],
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "operations": ["CREATE"]}]},
            "validations": [{"expression": "false", "message": "may exist later"}]
        }
    })]);
    let cm = configmap(json!({}));
    let mut req = Request::create(&cm, "admin").expect("a request");
    let actions = |req: &Request| -> Vec<Action> {
        set.evaluate(req, &inv)
            .verdicts
            .iter()
            .map(|v| v.action)
            .collect()
    };
    assert!(!req.is_admission());
    assert_eq!(actions(&req), [Action::Deny]);
    req.uid = "7c1e".into();
    assert_eq!(actions(&req), [Action::Warn]);
}

/// An InterlockPolicy's `checkActions` (docs/policy-kind.md) apply to
/// objects read from files (`check`, `test`: no uid, not live); the
/// cluster's objects (an audit, a group's validation: `live`) keep
/// `validationActions`, and admission requests take `admissionActions`
/// (or `validationActions` without them, never `checkActions`).
#[test]
fn check_actions_apply_to_objects_from_files_only() {
    let spec = |admission: Option<&str>| {
        let mut spec = json!({
            "validationActions": ["Deny"], "checkActions": ["Warn"],
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "operations": ["CREATE"]}]},
            "validations": [{"expression": "false", "message": "not settled by the files"}]
        });
        if let Some(a) = admission {
            spec["admissionActions"] = json!([a]);
        }
        json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
               "metadata": {"name": "unsettled"}, "spec": spec})
    };
    let cm = configmap(json!({}));
    for (admission, at_admission) in [(None, Action::Deny), (Some("Audit"), Action::Audit)] {
        let (set, inv) = compile(vec![spec(admission)]);
        let actions = |req: &Request| -> Vec<Action> {
            set.evaluate(req, &inv)
                .verdicts
                .iter()
                .map(|v| v.action)
                .collect()
        };
        let mut req = Request::create(&cm, "admin").expect("a request");
        assert_eq!(actions(&req), [Action::Warn], "from files");
        req.live = true;
        assert_eq!(actions(&req), [Action::Deny], "the cluster's object");
        req.uid = "7c1e".into();
        assert_eq!(actions(&req), [at_admission], "at admission");
    }
    // Refused on a ValidatingAdmissionPolicy, as admissionActions are.
    let docs = policy(
        "p",
        json!({"checkActions": ["Warn"], "validations": [{"expression": "true"}]}),
        &["Deny"],
        None,
    );
    let pairs: Vec<(Json, Source)> = docs
        .into_iter()
        .map(|d| {
            (
                d,
                Source {
                    file: "p.yaml".into(),
                    line: 1,
                },
            )
        })
        .collect();
    let (_, errors) = PolicySet::compile(&pairs);
    assert!(
        errors.iter().any(|e| e
            .message
            .contains("checkActions is an InterlockPolicy field")),
        "{errors:?}"
    );
}

/// A ValidatingAdmissionPolicy has no admissionActions (its bindings say).
#[test]
fn admission_actions_are_refused_on_a_validating_admission_policy() {
    let docs = policy(
        "p",
        json!({"admissionActions": ["Warn"], "validations": [{"expression": "true"}]}),
        &["Deny"],
        None,
    );
    let pairs: Vec<(Json, Source)> = docs
        .into_iter()
        .map(|d| {
            (
                d,
                Source {
                    file: "p.yaml".into(),
                    line: 1,
                },
            )
        })
        .collect();
    let (_, errors) = PolicySet::compile(&pairs);
    assert!(
        errors.iter().any(|e| e
            .message
            .contains("admissionActions is an InterlockPolicy field")),
        "{errors:?}"
    );
}

/// An InterlockPolicy's evaluation error tells the tenant it is the
/// policy's, which field was missing and how to fix the policy; a
/// ValidatingAdmissionPolicy's stays kube-apiserver's message.
#[test]
fn an_interlock_policy_evaluation_error_says_what_to_fix() {
    let spec = json!({"validations": [{"expression": "object.data.mode == 'x'"}]});
    let mut docs = policy("strict-mode", spec.clone(), &["Deny"], None);
    let mut interlock = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
        "metadata": {"name": "mode"}, "spec": spec});
    interlock["spec"]["matchConstraints"] = docs[0]["spec"]["matchConstraints"].clone();
    docs.push(interlock);
    let (set, inv) = compile(docs);
    let (verdicts, _) = evaluate(&set, &inv, &configmap(json!({"other": "1"})));
    let vap = verdicts
        .iter()
        .find(|v| v.policy == "strict-mode")
        .expect("VAP verdict");
    assert_eq!(
        vap.message,
        "expression 'object.data.mode == 'x'' resulted in error: no such key: mode"
    );
    let ours = verdicts
        .iter()
        .find(|v| v.policy == "mode")
        .expect("InterlockPolicy verdict");
    assert!(
        ours.message.starts_with("expression 'object.data.mode == 'x'' resulted in error: no such key: mode. This is an error in policy mode, not in your object: the object has no field 'mode' where the expression reads it"),
        "{}",
        ours.message
    );
    assert!(
        ours.message.contains("`.?mode.orValue(DEFAULT)`"),
        "{}",
        ours.message
    );
}

/// Lookups count against the memory budget: a policy that lists a kind
/// in a loop builds every listed object again each time, at one cost
/// unit per call. 300 lists of 200 stored 4 kB ConfigMaps build about
/// 240 MB, past the 128 MiB budget; once is fine.
#[test]
fn inventory_lookups_count_against_the_memory_budget() {
    let rule = |expression: &str| {
        json!({
            "apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
            "metadata": {"name": "lists"},
            "spec": {
                "validationActions": ["Deny"],
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"], "operations": ["CREATE"]}]},
                "validations": [{"expression": expression, "message": "empty value"}]
            }
        })
    };
    let each = "inventory.list('v1', 'ConfigMap', 'other').all(c, c.data.v.size() > 0)";
    let compiled = |expression: &str| {
        let (set, mut inv) = compile(vec![rule(expression)]);
        inv.set_projection(set.projection());
        let value = "x".repeat(4000);
        for i in 0..200 {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "other"}, "data": {"v": value}});
            inv.upsert(&cm, None).expect("stored");
        }
        (set, inv)
    };
    let (set, inv) = compiled(&format!("object.data.all(k, {each})"));
    let stored = inv.list("", "ConfigMap", Some("other"));
    assert!(
        stored[0].built_bytes() > 4000,
        "kept compact, with its data"
    );
    let keys: serde_json::Map<String, Json> =
        (0..300).map(|i| (format!("k{i}"), json!("v"))).collect();
    let (verdicts, _) = evaluate(&set, &inv, &configmap(Json::Object(keys)));
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert!(
        verdicts[0].message.contains("cost limit exceeded"),
        "{}",
        verdicts[0].message
    );
    // One list of the same objects is well within the budget.
    let (once, inv) = compiled(each);
    assert!(evaluate(&once, &inv, &configmap(json!({"k": "v"})))
        .0
        .is_empty());
}
