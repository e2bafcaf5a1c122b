use super::*;
use crate::check::built_images::release::tests::repo_with;
use crate::check::built_images::{Builder, BuiltImages};
use serde_json::json;

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ui}\nspec:\n  template:\n    spec:\n      containers:\n      - name: ui\n        image: ghcr.io/org/ui:latest\n      - name: proxy\n        image: ghcr.io/org/proxy:latest\n";

#[test]
fn a_yaml_update_step_tags_the_image_at_its_property_path() {
    // fjogeleit/yaml-update-action: `valueFile` is the file, `propertyPath`
    // the field "using dot for nesting"; endaft/action-yamler: `file` and
    // `path`, a list item by index (`list.0.name`).
    let workflow = r#"
on: push
jobs:
  package:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: Update deployment yaml
        uses: fjogeleit/yaml-update-action@main
        with:
          valueFile: 'manifests/ui.yaml'
          propertyPath: 'spec.template.spec.containers.0.image'
          value: ghcr.io/org/ui:${{ github.sha }}
      - uses: endaft/action-yamler@v1
        with:
          file: manifests/ui.yaml
          path: spec.template.spec.containers[0].name
          set: renamed
"#;
    let repo = repo_with(&[
        (".github/workflows/package.yml", workflow),
        ("manifests/ui.yaml", DEPLOYMENT),
    ]);
    // The name field is no image; the proxy container is not reached.
    assert_eq!(images(repo.path()), ["ghcr.io/org/ui"]);
}

#[test]
fn yaml_update_changes_name_several_files() {
    let workflow = r#"
jobs:
  bump:
    steps:
      - uses: fjogeleit/yaml-update-action@v0.13
        with:
          changes: |
            {
              "manifests/ui.yaml": {"spec.template.spec.containers.1.image": "ghcr.io/org/proxy:v2"},
              "manifests/other.yaml": {"metadata.name": "x"}
            }
"#;
    let repo = repo_with(&[
        (".github/workflows/bump.yaml", workflow),
        ("manifests/ui.yaml", DEPLOYMENT),
        ("manifests/other.yaml", DEPLOYMENT),
    ]);
    assert_eq!(images(repo.path()), ["ghcr.io/org/proxy"]);
}

#[test]
fn a_run_step_is_read_as_a_script_in_its_working_directory() {
    // GitHub Actions: `run` executes in `working-directory`, else the
    // job's or workflow's `defaults.run.working-directory`.
    let workflow = r#"
defaults:
  run:
    working-directory: deploy
jobs:
  release:
    steps:
      - run: |
          cd overlays/prod
          kustomize edit set image ghcr.io/org/api=ghcr.io/org/api:${{ github.ref_name }}
      - working-directory: config/manager
        run: kustomize edit set image ${{ env.NAME }}=${IMG}
"#;
    let repo = repo_with(&[
        (".github/workflows/release.yml", workflow),
        (
            "config/manager/kustomization.yaml",
            "images:\n- name: controller\n  newName: ghcr.io/org/controller\n  newTag: latest\n",
        ),
    ]);
    let mut got = images(repo.path());
    got.sort();
    got.dedup();
    assert_eq!(
        got,
        ["controller", "ghcr.io/org/api", "ghcr.io/org/controller"]
    );
}

#[test]
fn a_workflow_tag_pins_the_latest_image_and_nothing_else() {
    let workflow = "jobs:\n  p:\n    steps:\n      - uses: fjogeleit/yaml-update-action@main\n        with:\n          valueFile: manifests/ui.yaml\n          propertyPath: spec.template.spec.containers.0.image\n";
    let repo = repo_with(&[
        (".github/workflows/p.yml", workflow),
        ("manifests/ui.yaml", DEPLOYMENT),
    ]);
    let found = BuiltImages::find(&[repo.path().join("manifests")]);
    assert_eq!(
        found,
        BuiltImages::of(Builder::ReleaseScript, &["ghcr.io/org/ui"])
    );
    let mut pod = json!({"kind": "Pod", "spec": {"containers": [
        {"name": "ui", "image": "ghcr.io/org/ui:latest"},
        {"name": "proxy", "image": "ghcr.io/org/proxy:latest"}]}});
    found.pin(&mut pod);
    assert_eq!(
        pod["spec"]["containers"][0]["image"],
        "ghcr.io/org/ui:release-set"
    );
    assert_eq!(
        pod["spec"]["containers"][1]["image"],
        "ghcr.io/org/proxy:latest"
    );
    // Without the workflow the same tree tags nothing.
    let bare = repo_with(&[("manifests/ui.yaml", DEPLOYMENT)]);
    assert!(BuiltImages::find(&[bare.path().join("manifests")]).is_empty());
}
