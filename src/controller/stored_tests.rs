use super::*;
use crate::group::crd::{API_VERSION, KIND};
use serde_json::json;

fn group() -> ResourceGroup {
    serde_json::from_value(json!({
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": "g", "namespace": "a",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {
                LAST_APPLIED: "{\"spec\":{}}",
                "applyset.kubernetes.io/tooling": "interlock/v1"}},
        "spec": {"serviceAccountName": "deployer",
                 "resources": [
                     {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "m", "labels": {"a": "1"}},
                      "data": {"k": "v", "n": "2"}},
                     {"apiVersion": "v1", "kind": "Service",
                      "metadata": {"name": "s"},
                      "spec": {"ports": [{"port": 80, "name": "p"}], "x": 1.5, "y": null}},
                     "not an object: the API server refuses it, a pass must see it as is",
                     "{\"looks\": \"like JSON\"}"]},
        "status": {"observedGeneration": 3}
    }))
    .unwrap()
}

#[test]
fn a_stored_group_unpacks_to_the_group_less_what_nothing_reads() {
    let original = group();
    let mut stored = original.clone();
    packed(&mut stored);
    assert!(stored.spec.resources.iter().all(Value::is_string));
    let rg = unpacked(&stored);
    assert_eq!(rg.spec, original.spec, "every manifest exactly as it was");
    assert_eq!(rg.status, original.status);
    assert!(rg.metadata.managed_fields.is_none());
    let annotations = rg.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        annotations.keys().collect::<Vec<_>>(),
        ["applyset.kubernetes.io/tooling"]
    );
    assert_eq!(rg.metadata.name, original.metadata.name);
}
