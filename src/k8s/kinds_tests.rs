use super::*;

#[test]
fn a_misspelt_or_misplaced_kind_is_named_with_the_kinds_that_exist() {
    let w = unknown_kind_warning("apps/v1", "Deploymnet").expect("a warning");
    assert!(w.contains("the kinds of apps/v1 are Deployment, "), "{w}");
    let w = unknown_kind_warning("v1", "deployment").expect("a warning");
    assert!(w.contains("(Deployment is in apps)"), "{w}");
    assert_eq!(unknown_kind_warning("apps/v1", "StatefulSet"), None);
    assert_eq!(unknown_kind_warning("example.com/v1", "Widget"), None);
}

#[test]
fn plurals() {
    assert_eq!(resource_of("networking.k8s.io", "Ingress"), "ingresses");
    assert_eq!(resource_of("example.com", "Policy"), "policies");
    assert_eq!(resource_of("example.com", "Widget"), "widgets");
    assert_eq!(group_of("apps/v1"), "apps");
    assert_eq!(group_of("v1"), "");
    assert_eq!(version_of("apps/v1"), "v1");
}
