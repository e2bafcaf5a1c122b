//! `check` runs the chain kube-apiserver runs: MutatingAdmissionPolicies,
//! then validating policies on the object they leave.

use super::*;
use std::fs;
use std::path::Path;

use crate::fixtures::ADD_OWNER_MAP as ADD_OWNER;

const REQUIRE_OWNER: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: require-owner}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: \"has(object.metadata.labels) && 'owner' in object.metadata.labels\"
    message: an owner label is required
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: require-owner}
spec: {policyName: require-owner, validationActions: [Deny]}
";

const FORBID_PLATFORM: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: forbid-platform}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: \"!has(object.metadata.labels) || object.metadata.labels.?owner.orValue('') != 'platform'\"
    message: platform owns nothing here
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: forbid-platform}
spec: {policyName: forbid-platform, validationActions: [Deny]}
";

const CONFIG_MAP: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: apps}
data: {k: v}
";

/// `check` of a repository with `policies` (file name, text) and one
/// ConfigMap.
fn check_with(policies: &[(&str, &str)], show_mutations: bool) -> Report {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |p: &Path, text: &str| {
        fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    };
    for (name, text) in policies {
        write(&dir.path().join("policies").join(name), text);
    }
    write(&dir.path().join("manifests/cm.yaml"), CONFIG_MAP);
    let mut r = run(&CheckOptions {
        policies: vec![dir.path().join("policies")],
        inputs: vec![dir.path().join("manifests")],
        user: DEFAULT_USER.into(),
        show_mutations,
        ..CheckOptions::default()
    });
    r.sort();
    r
}

#[test]
fn a_label_a_mutating_policy_adds_satisfies_the_policy_that_requires_it() {
    let with = check_with(
        &[("map.yaml", ADD_OWNER), ("vap.yaml", REQUIRE_OWNER)],
        false,
    );
    assert!(with.errors.is_empty(), "{:?}", with.errors);
    assert!(with.results.is_empty(), "{:?}", with.results);
    assert!(
        with.notices.iter().any(|n| n.message
            == "ConfigMap apps/settings: require-owner would find on the object as written \"an owner label is required\", but not once mutated by add-owner"),
        "{:?}",
        with.notices
    );
    let without = check_with(&[("vap.yaml", REQUIRE_OWNER)], false);
    let messages: Vec<&str> = without.results.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(messages, ["an owner label is required"]);
}

#[test]
fn a_finding_that_only_the_mutation_causes_is_said_so_at_the_source_line() {
    let r = check_with(
        &[("map.yaml", ADD_OWNER), ("vap.yaml", FORBID_PLATFORM)],
        true,
    );
    assert_eq!(r.results.len(), 1, "{:?}", r.results);
    assert_eq!(r.results[0].message, "platform owns nothing here");
    assert_eq!(r.results[0].source.line, 1);
    assert!(r.notices.iter().any(|n| n.message
        == "ConfigMap apps/settings: the finding of forbid-platform exists only on the object as mutated by add-owner, not as written"));
    assert_eq!(r.mutations.len(), 1);
    assert_eq!(r.mutations[0].policies, ["add-owner"]);
    assert_eq!(
        r.mutations[0].patch,
        serde_json::json!([{"op": "add", "path": "/metadata/labels", "value": {"owner": "platform"}}])
    );
}

#[test]
fn without_a_mutating_policy_nothing_is_patched() {
    let r = check_with(&[("vap.yaml", FORBID_PLATFORM)], true);
    assert!(r.results.is_empty() && r.mutations.is_empty(), "{r:?}");
}

const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  properties:
                    name: {type: string}
                    size: {type: integer}
";

const ADD_PART: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: add-part}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: \"Object{spec: Object.spec{parts: [Object.spec.parts{name: 'b', size: 2}]}}\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: add-part}
spec: {policyName: add-part}
";

#[test]
fn an_apply_configuration_merges_a_custom_resource_by_its_crd_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(dir.path().join("manifests")).expect("mkdir");
    fs::write(dir.path().join("map.yaml"), ADD_PART).expect("write");
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: apps}\nspec:\n  parts: [{name: a, size: 1}]\n";
    fs::write(dir.path().join("manifests/widget.yaml"), widget).expect("write");
    let parts = |with_crd: bool| {
        let crd = dir.path().join("manifests/crd.yaml");
        if with_crd {
            fs::write(&crd, WIDGET_CRD).expect("write");
        } else {
            let _ = fs::remove_file(&crd);
        }
        let r = run(&CheckOptions {
            policies: vec![dir.path().join("map.yaml")],
            inputs: vec![dir.path().join("manifests")],
            user: DEFAULT_USER.into(),
            show_mutations: true,
            ..CheckOptions::default()
        });
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        r.mutations[0].patch.clone()
    };
    // The CRD says `parts` is a map list: the new part joins the old one.
    assert_eq!(
        parts(true),
        serde_json::json!([{"op": "add", "path": "/spec/parts/1", "value": {"name": "b", "size": 2}}])
    );
    // Without its schema a list is replaced.
    assert_eq!(
        parts(false),
        serde_json::json!([{"op": "replace", "path": "/spec/parts/0/name", "value": "b"}, {"op": "replace", "path": "/spec/parts/0/size", "value": 2}])
    );
}

/// An InterlockPolicy that adds the owner label, as `serve`'s `/mutate`
/// would before the validating webhook judges the object.
const ADD_OWNER_INTERLOCK: &str = "apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: add-owner-label}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: 'add', path: '/metadata/labels', value: {'owner': 'apps'}}]
";

#[test]
fn an_interlock_policy_mutation_runs_in_the_chain_before_validation() {
    let with = check_with(
        &[
            ("mutate.yaml", ADD_OWNER_INTERLOCK),
            ("vap.yaml", REQUIRE_OWNER),
        ],
        true,
    );
    assert!(with.errors.is_empty(), "{:?}", with.errors);
    assert!(with.results.is_empty(), "{:?}", with.results);
    assert_eq!(with.mutations.len(), 1, "{:?}", with.mutations);
    assert_eq!(with.mutations[0].policies, ["add-owner-label"]);
    // After the MutatingAdmissionPolicies, over the object they leave.
    let both = check_with(
        &[
            ("map.yaml", ADD_OWNER),
            ("mutate.yaml", ADD_OWNER_INTERLOCK),
            ("vap.yaml", FORBID_PLATFORM),
        ],
        true,
    );
    assert!(both.errors.is_empty(), "{:?}", both.errors);
    assert_eq!(both.mutations[0].policies, ["add-owner", "add-owner-label"]);
    assert!(both.results.is_empty(), "{:?}", both.results);
}
