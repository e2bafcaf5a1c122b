use super::*;
use std::hash::{BuildHasher, RandomState};

#[test]
fn names_print_as_kube_prints_them() {
    assert_eq!(
        GroupKind::new("apps", "Deployment").to_string(),
        "Deployment.apps"
    );
    assert_eq!(GroupKind::new("", "Pod").to_string(), "Pod");
    let gvk = GroupVersionKind::from_api_version("apps/v1", "Deployment");
    assert_eq!(gvk.to_string(), "Deployment.v1.apps");
    assert_eq!(
        GroupVersionKind::from_api_version("v1", "Pod").to_string(),
        "Pod.v1"
    );
    assert_eq!(
        GroupResource::new("apps", "deployments").to_string(),
        "deployments.apps"
    );
    assert_eq!(NamespacedName::new("", "a").to_string(), "a");
    assert_eq!(NamespacedName::new("ns", "a").to_string(), "ns/a");
}

#[test]
fn a_version_kind_splits_its_api_version_and_reads_back_unchanged() {
    let gvk = GroupVersionKind::from_api_version("apps/v1", "Deployment");
    assert_eq!(
        (gvk.group(), gvk.version(), gvk.kind()),
        ("apps", "v1", "Deployment")
    );
    assert_eq!(gvk.api_version(), "apps/v1");
    assert_eq!(gvk.group_kind(), GroupKind::new("apps", "Deployment"));
    let core = GroupVersionKind::from_api_version("v1", "Pod");
    assert_eq!((core.group(), core.version()), ("", "v1"));
    assert_eq!(GroupKind::new("", "Pod").with_version("v1"), core);
    assert_eq!(GroupKind::new("apps", "Deployment").with_version("v1"), gvk);
}

#[test]
fn typed_names_hash_and_order_as_the_pairs_they_replace() {
    let s = RandomState::new();
    let pair = ("apps".to_string(), "Deployment".to_string());
    assert_eq!(
        s.hash_one(&pair),
        s.hash_one(GroupKind::new("apps", "Deployment"))
    );
    let mut typed = [
        GroupKind::new("b", "A"),
        GroupKind::new("", "Z"),
        GroupKind::new("b", "0"),
    ];
    typed.sort();
    let kinds: Vec<String> = typed
        .iter()
        .map(|g| format!("{}/{}", g.group, g.kind))
        .collect();
    assert_eq!(kinds, ["/Z", "b/0", "b/A"]);
}
