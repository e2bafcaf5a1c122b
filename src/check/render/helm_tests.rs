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

#[test]
fn missing_dependencies_are_read_from_helms_refusal() {
    assert_eq!(
        missing_dependencies("found in Chart.yaml, but missing in charts/ directory: skywalking-helm, kube-state-metrics"),
        Some(vec!["skywalking-helm".to_string(), "kube-state-metrics".to_string()])
    );
    assert_eq!(
        missing_dependencies("execution error: host is required"),
        None
    );
}

#[test]
fn pruning_drops_only_the_missing_dependencies() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("Chart.yaml");
    fs::write(
        &file,
        "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n- name: redis\n  version: 1.0.0\n  repository: https://example.com\n- name: vendored\n  version: 2.0.0\n",
    )
    .unwrap();
    prune_dependencies(&file, &["redis".to_string()]).unwrap();
    let (_, chart) = manifest::yaml_values(&fs::read_to_string(&file).unwrap())
        .unwrap()
        .remove(0);
    assert_eq!(chart["name"], "shop");
    assert_eq!(chart["dependencies"].as_array().unwrap().len(), 1);
    assert_eq!(chart["dependencies"][0]["name"], "vendored");
}
