use super::*;

#[test]
fn one_line_names_each_missing_piece_and_how_to_install_it() {
    let line = describe(&[
        Missing::Namespace("interlock-system".into()),
        Missing::Access(
            Access::new("update", "coordination.k8s.io", "leases")
                .in_namespace("interlock-system")
                .named("interlock-controller"),
        ),
        Missing::Kind {
            kind: GroupVersionKind::from_api_version("interlock.dev/v1alpha1", "ResourceGroup"),
            crd: Some("crd-resourcegroup.yaml"),
        },
    ]);
    assert!(!line.contains('\n'), "{line}");
    for part in [
        "namespace interlock-system does not exist (kubectl create namespace interlock-system",
        "not allowed to update leases.coordination.k8s.io/interlock-controller in namespace interlock-system",
        "ResourceGroup (interlock.dev/v1alpha1) is not served (kubectl apply -f manifests/base/crd-resourcegroup.yaml",
        "kubectl apply -k manifests/overlays/interlock-certs",
    ] {
        assert!(line.contains(part), "{part:?} not in {line}");
    }
}

#[test]
fn a_core_permission_names_the_bare_resource_and_all_namespaces() {
    assert_eq!(
        Access::new("watch", "", "configmaps").to_string(),
        "watch configmaps in all namespaces"
    );
}
