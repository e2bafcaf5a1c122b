use super::*;

// Shapes from Tilt's API reference and its restart_process extension.
const TILTFILE: &str = r#"load('ext://restart_process', 'docker_build_with_restart')
# docker_build('commented-out', '.')
docker_build('frontend', '.', dockerfile='Dockerfile.ui')
docker_build(
    "gcr.io/team/backend:dev",
    context='.',
)
docker_build_with_restart(
  'quay.io/org/server',
  '.',
  entrypoint=['/server'],
)
custom_build(ref='worker', command='make image', deps=['./worker'])
my_docker_build('not-a-tilt-call', '.')
docker_build(image_name, '.')
"#;

#[test]
fn build_refs_are_read_from_string_literals() {
    let got: BTreeSet<String> = images_of(TILTFILE).into_iter().collect();
    let want: BTreeSet<String> = [
        "frontend",
        "gcr.io/team/backend",
        "quay.io/org/server",
        "worker",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
    assert!(images_of("k8s_yaml('app.yaml')\n").is_empty());
}

#[test]
fn a_tiltfile_above_the_input_up_to_the_repository_root_is_read() {
    let root = tempfile::tempdir().unwrap();
    let repo = root.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("manifests/dev")).unwrap();
    std::fs::write(
        root.path().join("Tiltfile"),
        "docker_build('beyond-root', '.')\n",
    )
    .unwrap();
    std::fs::write(repo.join("Tiltfile"), "docker_build('ui', '.')\n").unwrap();
    let got = images(&[repo.join("manifests")]);
    assert_eq!(got.into_iter().collect::<Vec<_>>(), ["ui"]);
}
