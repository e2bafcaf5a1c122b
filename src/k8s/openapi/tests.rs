use super::*;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

#[test]
fn resolves_resources_to_kinds_as_the_rest_mapper() {
    let s = builtin();
    assert_eq!(
        s.kinds_for("apps", "v1", "deployments"),
        vec![gvk("apps", "v1", "Deployment")]
    );
    assert_eq!(s.kinds_for("", "v1", "Pods"), vec![gvk("", "v1", "Pod")]);
    assert!(s.kinds_for("apps", "v1beta1", "deployments").is_empty());
    // The empty group matches every group.
    assert_eq!(
        s.kinds_for("", "v1", "events"),
        vec![gvk("", "v1", "Event"), gvk("events.k8s.io", "v1", "Event")]
    );
    assert_eq!(gvk("", "v1", "Pod").to_string(), "/v1, Kind=Pod");
}

#[test]
fn types_built_in_kinds_from_the_bundle() {
    let s = builtin();
    let t = s
        .resource_type(&gvk("apps", "v1", "Deployment"), "Deployment")
        .expect("a Deployment type");
    let Ty::Struct(root) = &t else { panic!("{t}") };
    let Some(Ty::Struct(spec)) = root.field("spec") else {
        panic!("spec")
    };
    assert_eq!(spec.name.as_ref(), "Deployment.spec");
    assert_eq!(spec.field("replicas"), Some(&Ty::Int));
    let secret = s
        .resource_type(&gvk("", "v1", "Secret"), "Secret")
        .expect("a Secret type");
    let Ty::Struct(secret) = &secret else {
        panic!()
    };
    assert_eq!(secret.field("data"), Some(&Ty::map(Ty::String, Ty::Bytes)));
}

#[test]
fn a_crd_manifest_adds_its_served_versions() {
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"},
          "scope": "Namespaced",
          "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": {
              "size": {"type": "integer"},
              "port": {"x-kubernetes-int-or-string": true},
              "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                           "x-kubernetes-preserve-unknown-fields": true}}}}}}},
            {"name": "v0", "served": false, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    let mut s = builtin().clone();
    s.add_crd(&crd).expect("a CRD");
    assert!(s.kinds_for("example.com", "v0", "widgets").is_empty());
    let kinds = s.kinds_for("example.com", "v1", "widgets");
    assert_eq!(kinds, vec![gvk("example.com", "v1", "Widget")]);
    let Some(Ty::Struct(root)) = s.resource_type(&kinds[0], "Widget") else {
        panic!("a Widget type")
    };
    let Some(Ty::Struct(spec)) = root.field("spec") else {
        panic!("spec")
    };
    assert_eq!(spec.field("size"), Some(&Ty::Int));
    assert_eq!(spec.field("port"), Some(&Ty::Dyn));
    // Published as kube-apiserver publishes it: full ObjectMeta.
    let Some(Ty::Struct(meta)) = root.field("metadata") else {
        panic!("metadata")
    };
    assert!(meta.field("labels").is_some());
    let Some(Ty::Struct(template)) = spec.field("template") else {
        panic!("template")
    };
    assert!(template.field("metadata").is_some() && template.field("kind").is_some());
}

#[test]
fn a_crd_that_cannot_be_read_names_the_field() {
    let mut s = Schemas::default();
    let no_group =
        serde_json::json!({"spec": {"names": {"plural": "a", "kind": "A"}, "versions": []}});
    assert_eq!(
        s.add_crd(&no_group).map_err(|e| e.to_string()),
        Err("spec.group is missing".into())
    );
    let bad_schema = serde_json::json!({"spec": {"group": "g", "names": {"plural": "a", "kind": "A"},
        "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": 5}}}]}});
    let e = s
        .add_crd(&bad_schema)
        .expect_err("a bad schema")
        .to_string();
    assert!(
        e.starts_with("spec.versions[0].schema.openAPIV3Schema: invalid type"),
        "{e}"
    );
    assert!(s.resources.is_empty());
}
