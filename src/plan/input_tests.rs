use super::*;

fn read_text(text: &str) -> Result<Vec<InputGroup>, Vec<InputError>> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("g.yaml");
    std::fs::write(&file, text).expect("write");
    read(&[file])
}

#[test]
fn groups_are_read_and_other_documents_ignored() {
    let groups = read_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: interlock.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: shop}\nspec:\n  serviceAccountName: deployer\n  resources: []\n",
    )
    .expect("read");
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].name, "shop");
    assert_eq!(groups[0].namespace, None);
    assert!(
        groups[0].source.ends_with("g.yaml:5"),
        "{}",
        groups[0].source
    );
}

#[test]
fn a_bad_field_is_named_with_its_line() {
    let errors = read_text(
        "apiVersion: interlock.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: shop}\nspec:\n  serviceAccountName: deployer\n  prune: maybe\n",
    )
    .expect_err("refused");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].line, 6);
    assert!(
        errors[0]
            .message
            .starts_with("ResourceGroup shop: spec.prune: "),
        "{}",
        errors[0].message
    );
    let none =
        read_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n").expect_err("no group");
    assert!(none[0].message.contains("no ResourceGroup"), "{none:?}");
}
