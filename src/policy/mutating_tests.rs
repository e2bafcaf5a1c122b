use super::*;
use serde_json::json;

fn compile(yaml: &str) -> PolicySet {
    let docs: Vec<(Json, Source)> = serde_yaml::Deserializer::from_str(yaml)
        .map(|d| {
            let v: Json = serde::Deserialize::deserialize(d).unwrap();
            (
                v,
                Source {
                    file: "p.yaml".into(),
                    line: 1,
                },
            )
        })
        .collect();
    let (set, errors) = PolicySet::compile(&docs);
    assert!(errors.is_empty(), "{errors:?}");
    set
}

fn compile_error(yaml: &str) -> String {
    let v: Json = serde_yaml::from_str(yaml).unwrap();
    let (_, errors) = PolicySet::compile(&[(
        v,
        Source {
            file: "p.yaml".into(),
            line: 1,
        },
    )]);
    errors
        .first()
        .map(|e| e.message.clone())
        .unwrap_or_default()
}

const MAP_HEADER: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: NAME}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
";

fn map(name: &str, rest: &str) -> String {
    let rest = if rest.contains("reinvocationPolicy") {
        rest.to_string()
    } else {
        format!("  reinvocationPolicy: Never\n{rest}")
    };
    format!(
        "{}{rest}---\napiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {{name: {name}-b}}\nspec: {{policyName: {name}}}\n",
        MAP_HEADER.replace("NAME", name)
    )
}

fn config_map() -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": {"k": "v"}})
}

fn admit(set: &PolicySet, object: &Json) -> Admitted {
    let req = Request::create(object, "u").unwrap();
    set.admit(&req, &Inventory::new())
}

#[test]
fn a_json_patch_and_an_apply_configuration_mutate_in_name_order() {
    let set = compile(&format!(
        "{}---\n{}",
        map("b-apply", "  mutations:\n  - patchType: ApplyConfiguration\n    applyConfiguration:\n      expression: \"Object{metadata: Object.metadata{labels: {'from': object.metadata.labels['team']}}}\"\n"),
        map("a-json", "  mutations:\n  - patchType: JSONPatch\n    jsonPatch:\n      expression: \"[JSONPatch{op: 'add', path: '/metadata/labels', value: {'team': 'core'}}]\"\n"),
    ));
    let out = admit(&set, &config_map());
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert_eq!(
        out.object.unwrap()["metadata"]["labels"],
        json!({"team": "core", "from": "core"})
    );
    assert_eq!(out.mutated_by, ["a-json", "b-apply"]);
}

#[test]
fn if_needed_policies_run_again_after_a_later_change() {
    let copy = "  reinvocationPolicy: IfNeeded\n  mutations:\n  - patchType: ApplyConfiguration\n    applyConfiguration:\n      expression: \"Object{data: {'copy': object.data.?set.orValue('none')}}\"\n";
    let set_ = "  mutations:\n  - patchType: ApplyConfiguration\n    applyConfiguration:\n      expression: \"Object{data: {'set': 'yes'}}\"\n";
    let set = compile(&format!(
        "{}---\n{}",
        map("a-copy", copy),
        map("b-set", set_)
    ));
    assert_eq!(
        admit(&set, &config_map()).object.unwrap()["data"]["copy"],
        "yes"
    );
    let never = compile(&format!(
        "{}---\n{}",
        map("a-copy", &copy.replace("IfNeeded", "Never")),
        map("b-set", set_)
    ));
    assert_eq!(
        admit(&never, &config_map()).object.unwrap()["data"]["copy"],
        "none"
    );
}

#[test]
fn runtime_errors_refuse_under_fail_and_are_skipped_under_ignore() {
    let failing = "  failurePolicy: FP\n  mutations:\n  - patchType: JSONPatch\n    jsonPatch:\n      expression: \"[JSONPatch{op: 'add', path: '/data/x', value: object.data.missing}]\"\n";
    let fail = compile(&map("p", &failing.replace("FP", "Fail")));
    let out = admit(&fail, &config_map());
    assert_eq!(
        out.failures.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["policy 'p' with binding 'p-b' denied request: expression '[JSONPatch{op: 'add', path: '/data/x', value: object.data.missing}]' resulted in error: no such key: missing"]
    );
    let ignore = compile(&map("p", &failing.replace("FP", "Ignore")));
    let out = admit(&ignore, &config_map());
    assert!(out.failures.is_empty() && out.object.is_none());
}

#[test]
fn malformed_policies_are_refused_with_the_field() {
    let m = |rest: &str| compile_error(&format!("{}{rest}", MAP_HEADER.replace("NAME", "p")));
    assert_eq!(
        m("  reinvocationPolicy: Never\n  mutations:\n  - patchType: Merge\n"),
        "spec.mutations[0].patchType: Unsupported value: \"Merge\": supported values: \"ApplyConfiguration\", \"JSONPatch\""
    );
    assert_eq!(
        m("  reinvocationPolicy: Always\n  mutations:\n  - patchType: JSONPatch\n    jsonPatch: {expression: '[]'}\n"),
        "spec.reinvocationPolicy: Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\""
    );
    assert_eq!(
        m("  validations:\n  - expression: 'true'\n  mutations:\n  - patchType: JSONPatch\n    jsonPatch: {expression: '[]'}\n"),
        "spec.validations: not a MutatingAdmissionPolicy field"
    );
    assert!(
        m("  reinvocationPolicy: Never\n  mutations:\n  - patchType: JSONPatch\n    jsonPatch: {expression: 'object.'}\n")
            .starts_with("spec.mutations[0].jsonPatch.expression: ")
    );
}

#[test]
fn the_webhook_patch_holds_the_mutating_policies_changes_first() {
    let set = compile(&map(
        "p",
        "  mutations:\n  - patchType: ApplyConfiguration\n    applyConfiguration:\n      expression: \"Object{metadata: Object.metadata{labels: {'owner': 'platform'}}}\"\n",
    ));
    let object = config_map();
    let req = Request::create(&object, "u").unwrap();
    assert_eq!(
        set.mutate(&req, &Inventory::new()).unwrap(),
        vec![json!({"op": "add", "path": "/metadata/labels", "value": {"owner": "platform"}})]
    );
}

#[test]
fn v1beta1_documents_are_read_and_other_versions_refused() {
    let beta = map(
        "p",
        "  mutations:\n  - patchType: JSONPatch\n    jsonPatch: {expression: \"[JSONPatch{op: 'add', path: '/data/x', value: 'y'}]\"}\n",
    )
    .replace("admissionregistration.k8s.io/v1\n", "admissionregistration.k8s.io/v1beta1\n");
    let set = compile(&beta);
    assert_eq!(admit(&set, &config_map()).object.unwrap()["data"]["x"], "y");
    let wrong = MAP_HEADER.replace("NAME", "p").replace(
        "admissionregistration.k8s.io/v1\n",
        "admissionregistration.k8s.io/v2\n",
    );
    assert_eq!(
        compile_error(&wrong),
        "apiVersion \"admissionregistration.k8s.io/v2\": a MutatingAdmissionPolicy or its binding is admissionregistration.k8s.io/v1 (or v1beta1, v1alpha1)"
    );
}
