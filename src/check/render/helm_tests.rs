use super::*;

#[test]
fn documents_split_at_helm_separators() {
    let text = "---\n# Source: web/templates/a.yaml\napiVersion: v1\n---\n# Source: web/templates/b.yaml\nkind: X\n";
    let docs = split_documents(text);
    assert_eq!(docs.len(), 2);
    assert_eq!(source_of(docs[1]), Some("web/templates/b.yaml"));
    assert_eq!(
        template_path(Path::new("charts/my-web"), "web/templates/b.yaml"),
        PathBuf::from("charts/my-web/templates/b.yaml")
    );
}

#[test]
fn release_names_are_dns_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("My_Chart");
    fs::create_dir(&dir).unwrap();
    assert_eq!(release_name(&dir), "my-chart");
}

#[test]
fn helm_reasons_are_its_error_line() {
    assert_eq!(
        helm_reason(b"walk.go:74: found symbolic link\nError: execution error at (x/templates/a.yaml:3:4): host is required\n"),
        "execution error at (x/templates/a.yaml:3:4): host is required"
    );
}
