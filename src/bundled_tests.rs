#[test]
fn export_writes_the_library_once_and_never_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = super::export(dir.path()).expect("exported");
    assert_eq!(files.len(), super::BUNDLED.len());
    let (name, text) = super::BUNDLED[0];
    let written = std::fs::read_to_string(dir.path().join(name).join("policy.yaml")).unwrap();
    assert_eq!(written, text);
    let again = super::export(dir.path()).unwrap_err();
    assert!(
        again
            .to_string()
            .contains("exists; export writes into a new or empty folder"),
        "{again}"
    );
}
