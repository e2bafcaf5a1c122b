use super::*;

#[test]
fn commands_are_read_with_their_directory_and_arguments() {
    let script = r#"#!/bin/sh
# kustomize edit set image commented-out=x
cd "${SRCROOT}/manifests/base" && $KUSTOMIZE edit set image "${SOURCE}=${TARGET}:${TAG}"
deploy: manifests
	cd config/manager && $(KUSTOMIZE) edit set image controller=${IMG}
	cd config/default && \
	  kustomize edit set image example.com/op:v1 other=x; kubectl apply -k .
kustomize edit set image kubeflow/training-operator=${CI_IMAGE}
"#;
    let got = set_image_commands(script);
    let want = [
        (
            Some("${SRCROOT}/manifests/base"),
            vec!["${SOURCE}=${TARGET}:${TAG}"],
        ),
        (Some("config/manager"), vec!["controller=${IMG}"]),
        (Some("config/default"), vec!["example.com/op:v1", "other=x"]),
        (None, vec!["kubeflow/training-operator=${CI_IMAGE}"]),
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, (dir, args)) in got.iter().zip(want) {
        assert_eq!(g.dir.as_deref(), dir);
        assert_eq!(g.args, args);
    }
}

#[test]
fn a_variable_name_takes_the_images_of_the_kustomization_it_runs_in() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("hack")).unwrap();
    std::fs::create_dir_all(root.join("manifests/base")).unwrap();
    std::fs::create_dir_all(root.join("config/manager")).unwrap();
    std::fs::write(
        root.join("manifests/base/kustomization.yaml"),
        "images:\n- name: quay.io/org/app\n  newName: quay.io/org/app\n  newTag: latest\n- name: other\n  newName: example.com/other\n",
    )
    .unwrap();
    std::fs::write(
        root.join("config/manager/kustomization.yaml"),
        "images:\n- name: controller\n  newName: example.com/controller\n- name: untouched\n",
    )
    .unwrap();
    std::fs::write(
        root.join("hack/release.sh"),
        "cd \"${SRCROOT}/manifests/base\" && kustomize edit set image \"${SRC}=${DST}:${TAG}\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("Makefile"),
        "deploy:\n\tcd config/manager && $(KUSTOMIZE) edit set image controller=${IMG}\n",
    )
    .unwrap();
    // A script that is no release script names nothing.
    std::fs::write(root.join("hack/lint.sh"), "golangci-lint run\n").unwrap();
    let got = images(&[root.join("manifests")]);
    let want = [
        "controller",
        "example.com/controller",
        "example.com/other",
        "other",
        "quay.io/org/app",
    ];
    assert_eq!(got.into_iter().collect::<Vec<_>>(), want);
}

#[test]
fn a_script_that_rewrites_new_tag_retags_the_kustomization_it_names() {
    let makefile = "release:\n\tcat manifests/base/kustomization.yaml | sed 's/newTag: .*/newTag: $(VERSION)/' > /tmp/k.yaml\n\tsed -i 's/x/y/' manifests/other/kustomization.yaml\n";
    assert_eq!(retagged_kustomizations(makefile), ["manifests/base"]);
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("manifests/base")).unwrap();
    std::fs::write(
        root.join("manifests/base/kustomization.yaml"),
        "images:\n- name: quay.io/org/events\n  newTag: latest\n",
    )
    .unwrap();
    std::fs::write(root.join("Makefile"), makefile).unwrap();
    let got = images(&[root.join("manifests")]);
    assert_eq!(got.into_iter().collect::<Vec<_>>(), ["quay.io/org/events"]);
}

/// A repository with a `.git` and the files given (path, text).
pub(in crate::check::built_images) fn repo_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join(".git")).unwrap();
    for (path, text) in files {
        let p = repo.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    repo
}

#[test]
fn sed_patterns_are_read_with_any_delimiter() {
    // sed(1): "s/regexp/replacement/flags ... The / characters may be
    // uniformly replaced by any other single character."
    assert_eq!(
        substitution_patterns(r#"sed -i -e "s@newTag: .*@newTag: ${TAG}@" f"#),
        ["newTag: .*"]
    );
    assert_eq!(substitution_patterns("sed s/:latest/:$TAG/g"), [":latest"]);
    assert_eq!(substitution_patterns(r"sed 's|a\|b|c|'"), ["a|b"]);
    assert_eq!(
        substitution_patterns("perl -pi -e 's#latest#v1#' f"),
        ["latest"]
    );
    // Only the pattern counts: a substitution that writes `latest`
    // (a development reset) is no release.
    let dev = "sed -i 's/:v[0-9.]*/:latest/' config/manager/manager.yaml";
    assert_eq!(substitution_patterns(dev), [":v[0-9.]*"]);
    let repo = repo_with(&[("config/manager/manager.yaml", "image: org/app:latest\n")]);
    assert!(substitutions(dev, repo.path(), repo.path()).is_empty());
}

#[test]
fn sed_on_the_output_of_kustomize_build_retags_the_latest_images_of_its_tree() {
    // `kustomize build DIR` renders DIR's kustomization with its
    // resources, components and patches, down the tree; the sed sees
    // all of it and only it.
    let repo = repo_with(&[
        (
            "config/overlays/all/kustomization.yaml",
            "resources:\n- ../../default\ncomponents:\n- ../../components/extra\npatches:\n- path: image_patch.yaml\n",
        ),
        (
            "config/overlays/all/image_patch.yaml",
            "spec:\n  template:\n    spec:\n      containers:\n      - name: m\n        image: \"example.com/org/manager:latest\"\n",
        ),
        ("config/default/kustomization.yaml", "resources:\n- deploy.yaml\nimages:\n- name: agent\n  newName: example.com/org/agent\n  newTag: latest\n- name: pinned\n  newTag: v1\n"),
        (
            "config/default/deploy.yaml",
            "spec:\n  containers:\n  - image: example.com/org/server:latest\n  - image: busybox:latest\n  - image: example.com/org/bare\n",
        ),
        ("config/components/extra/kustomization.yaml", "kind: Component\nresources:\n- job.yaml\n"),
        ("config/components/extra/job.yaml", "image: ghcr.io/org/job:latest # the job\n"),
        ("config/unused/deploy.yaml", "image: example.com/org/unused:latest\n"),
        (
            "hack/release.sh",
            "REPO_ROOT=$(dirname \"$0\")/..\nkustomize build ${REPO_ROOT}/config/overlays/all | yq 'select(.kind != \"Namespace\")' | sed s/:latest/:$TAG/g > $INSTALL_PATH\n",
        ),
    ]);
    let got = images(&[repo.path().join("config")]);
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        [
            "agent",
            "example.com/org/agent",
            "example.com/org/manager",
            "example.com/org/server",
            "ghcr.io/org/job",
        ]
    );
}

#[test]
fn a_function_that_runs_sed_on_a_folder_retags_every_kustomization_under_it() {
    // `find DIR -exec sed -i s@newTag: .*@newTag: $TAG@ {} \;` edits
    // every file under DIR, so every `images:` entry of the
    // kustomizations there gets the release's tag.
    let script = r#"#!/usr/bin/env bash
update_yaml_files() {
  find "$1" -regex ".*\.yaml" -exec sed -i -e "s@$2@$3@" {} \;
}
INSTALLS_PATH="manifests/installs/"
update_yaml_files "${INSTALLS_PATH}" "newName: ${OLD}" "newName: ${NEW}"
update_yaml_files "${INSTALLS_PATH}" "newTag: .*" "newTag: ${TAG}"
echo "newTag latest manifests/other"
"#;
    let repo = repo_with(&[
        (
            "manifests/installs/standalone/kustomization.yaml",
            "images:\n- name: ghcr.io/org/controller\n  newName: ghcr.io/org/controller\n  newTag: latest\n- name: docker.io/library/mysql\n  newTag: \"8\"\n",
        ),
        ("manifests/installs/standalone/deploy.yaml", "image: ghcr.io/org/ui:latest\n"),
        ("manifests/other/kustomization.yaml", "images:\n- name: ghcr.io/org/other\n  newTag: latest\n"),
        ("scripts/update-images.sh", script),
    ]);
    let got = images(&[repo.path().join("manifests")]);
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        ["ghcr.io/org/controller"]
    );
}

#[test]
fn the_output_of_a_substitution_and_the_repository_root_are_no_targets() {
    let repo = repo_with(&[
        ("install.yaml", "image: example.com/org/app:latest\n"),
        ("deploy/app.yaml", "image: example.com/org/app2:latest\n"),
        ("Makefile", "release:\n\tsed 's/:latest/:$(V)/' deploy/app.yaml > install.yaml\n\tsed -i 's/:latest/:$(V)/' $(shell find . -name '*.yaml')\n"),
    ]);
    let got = images(&[repo.path().to_path_buf()]);
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        ["example.com/org/app2"]
    );
}

#[test]
fn nothing_is_tagged_without_a_set_image_command() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join(".git")).unwrap();
    std::fs::write(
        repo.path().join("build.sh"),
        "docker build -t app:latest .\n",
    )
    .unwrap();
    assert!(images(&[repo.path().to_path_buf()]).is_empty());
}
