use super::*;

#[test]
fn templates_are_found_by_shape() {
    let rollout = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}});
    let found = embedded(&rollout);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].pointer, "/spec/template");
    let t = &found[0].pod_template;
    assert_eq!(t["kind"], "PodTemplate");
    assert_eq!(t["metadata"]["namespace"], "shop");
    assert_eq!(t["template"]["spec"]["containers"][0]["image"], "nginx");
    assert_eq!(
        t["metadata"]["annotations"][TEMPLATE_OF],
        "Rollout shop/web (spec.template)"
    );

    let cron = json!({"kind": "Schedule", "metadata": {"name": "s"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}}});
    assert_eq!(
        embedded(&cron)[0].pointer,
        "/spec/jobTemplate/spec/template"
    );

    // A `template` that is not a pod's is left alone.
    let sealed = json!({"kind": "SealedSecret", "metadata": {"name": "x"},
        "spec": {"template": {"metadata": {"name": "x"}, "type": "Opaque"}}});
    assert!(embedded(&sealed).is_empty());
}
