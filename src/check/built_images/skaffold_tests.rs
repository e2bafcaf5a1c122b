use super::*;

// skaffold.yaml reference: build.artifacts[].image is "the image name
// to be built"; profiles[].build overrides build per profile; a file
// may hold several configs separated by `---` (multi-config projects).
const CONFIG: &str = "apiVersion: skaffold/v4beta11
kind: Config
metadata: {name: app}
build:
  artifacts:
    - image: frontend
    - image: gcr.io/team/backend:ignored-tag
      docker: {dockerfile: Dockerfile}
profiles:
  - name: ci
    build:
      artifacts:
        - image: localhost:5000/worker
---
apiVersion: skaffold/v2beta29
kind: Config
build:
  artifacts:
    - image: second-config
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-skaffold}
build:
  artifacts:
    - image: not-an-artifact
";

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn artifacts_are_read_from_every_skaffold_config_document() {
    let got: BTreeSet<String> = images_of(CONFIG).into_iter().collect();
    assert_eq!(
        got,
        set(&[
            "frontend",
            "gcr.io/team/backend",
            "localhost:5000/worker",
            "second-config"
        ])
    );
    assert!(images_of("not: [valid").is_empty());
}

#[test]
fn skaffold_files_inside_and_above_the_inputs_up_to_the_repository_root() {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside");
    let repo = outside.join("repo");
    let deploy = repo.join("deploy/base");
    std::fs::create_dir_all(&deploy).unwrap();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("services/api/.hidden")).unwrap();
    let cfg = |image: &str| {
        format!("apiVersion: skaffold/v4beta11\nkind: Config\nbuild:\n  artifacts:\n    - image: {image}\n")
    };
    // Above the repository's root (.git): not read.
    std::fs::write(outside.join("skaffold.yaml"), cfg("beyond-root")).unwrap();
    std::fs::write(repo.join("skaffold.yaml"), cfg("at-root")).unwrap();
    std::fs::write(repo.join("services/api/skaffold.yml"), cfg("nested")).unwrap();
    std::fs::write(
        repo.join("services/api/.hidden/skaffold.yaml"),
        cfg("hidden"),
    )
    .unwrap();
    std::fs::write(deploy.join("app.yaml"), "kind: Pod\n").unwrap();
    // A file input: its directory and ancestors.
    assert_eq!(
        artifact_images(&[deploy.join("app.yaml")]),
        set(&["at-root"])
    );
    // A directory input: inside it, at any depth, and above it.
    assert_eq!(
        artifact_images(std::slice::from_ref(&repo)),
        set(&["at-root", "nested"])
    );
    assert_eq!(
        artifact_images(&[repo.join("services")]),
        set(&["at-root", "nested"])
    );
    // No skaffold.yaml anywhere: nothing is built.
    let bare = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(bare.path().join(".git")).unwrap();
    assert!(artifact_images(&[bare.path().to_path_buf()]).is_empty());
}
