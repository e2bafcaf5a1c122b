use super::*;

#[test]
fn backoff_doubles_to_a_cap_with_jitter() {
    let secs = |n| backoff(n).as_secs_f64();
    assert!((0.8..=1.2).contains(&secs(1)), "{}", secs(1));
    assert!((3.2..=4.8).contains(&secs(3)), "{}", secs(3));
    for n in [10, 11, 40, u32::MAX] {
        assert!(
            (240.0..=360.0).contains(&secs(n)),
            "attempt {n}: {}",
            secs(n)
        );
    }
    // Jitter: a hundred groups failing together do not come back together.
    let spread: std::collections::BTreeSet<u64> =
        (0..100).map(|_| backoff(5).as_millis() as u64).collect();
    assert!(spread.len() > 50, "only {} distinct waits", spread.len());
}

#[test]
fn the_groups_store_drops_managed_fields_and_kubectl_s_copy_of_the_group_only() {
    let mut rg: ResourceGroup = serde_json::from_value(serde_json::json!({
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": "g", "namespace": "a",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"spec\":{}}",
                "applyset.kubernetes.io/tooling": "interlock/v1"}},
        "spec": {"serviceAccountName": "deployer",
                 "resources": [{"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "m"}}]}
    }))
    .unwrap();
    trim_group(&mut rg);
    assert!(rg.metadata.managed_fields.is_none());
    let annotations = rg.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        annotations.keys().collect::<Vec<_>>(),
        ["applyset.kubernetes.io/tooling"]
    );
    assert_eq!(rg.spec.resources.len(), 1, "the spec is kept");
}
