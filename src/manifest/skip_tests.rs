use super::*;
use crate::manifest::yaml::parse_stream;
use crate::manifest::LoadOptions;

fn content(text: &str) -> Option<SkipReason> {
    by_content(&parse_stream(text, &LoadOptions::default()).docs)
}

#[test]
fn tool_files_by_name() {
    assert_eq!(
        by_path(Path::new("a/kustomization.yaml")),
        Some(SkipReason::Kustomize)
    );
    assert_eq!(
        by_path(Path::new("a/Kustomization")),
        Some(SkipReason::Kustomize)
    );
    assert_eq!(
        by_path(Path::new("chart/Chart.yaml")),
        Some(SkipReason::Helm)
    );
    assert_eq!(
        by_path(Path::new("chart/values-prod.yaml")),
        Some(SkipReason::Helm)
    );
    assert_eq!(
        by_path(Path::new("skaffold.yaml")),
        Some(SkipReason::Skaffold)
    );
    assert_eq!(by_path(Path::new("a/deployment.yaml")), None);
    assert_eq!(by_path(Path::new("a/my-values.yaml")), None);
}

#[test]
fn kustomize_generators_make_config_maps_and_secrets() {
    let text = "namespace: shop\nconfigMapGenerator:\n- name: web-config\n  files: [app.properties]\nsecretGenerator:\n- name: db\n  namespace: data\n  literals: [password=x]\n";
    let made = kustomize_generated(&parse_stream(text, &LoadOptions::default()).docs);
    let names: Vec<String> = made
        .iter()
        .map(|m| {
            format!(
                "{} {}/{}",
                m["kind"].as_str().unwrap_or(""),
                m["metadata"]["namespace"].as_str().unwrap_or(""),
                m["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(names, ["ConfigMap shop/web-config", "Secret data/db"]);
}

#[test]
fn kustomize_patches_by_their_kustomization() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "resources: [deploy.yaml]\npatches:\n- path: ./replicas.yaml\npatchesStrategicMerge: [limits.yaml]\n",
    )
    .expect("write");
    let at = |n: &str| by_path(&dir.path().join(n));
    assert_eq!(at("replicas.yaml"), Some(SkipReason::Kustomize));
    assert_eq!(at("limits.yaml"), Some(SkipReason::Kustomize));
    assert_eq!(at("deploy.yaml"), None);
}

#[test]
fn data_and_tool_configurations_by_content() {
    assert_eq!(content("a: 1\nb: [2]\n"), Some(SkipReason::NotObjects));
    assert_eq!(content("[1, 2]"), Some(SkipReason::NotObjects));
    // An outline of an object's keys, every value left empty.
    assert_eq!(
        content("apiVersion: \nkind: \nmetadata:\n\nspec:\n"),
        Some(SkipReason::NotObjects)
    );
    assert_eq!(content("apiVersion: v1\nkind:\n"), None);
    assert_eq!(
        content("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n"),
        Some(SkipReason::Kustomize)
    );
    assert_eq!(
        content("apiVersion: skaffold/v4beta6\nkind: Config\n"),
        Some(SkipReason::Skaffold)
    );
    assert_eq!(
        content("apiVersion: v2\nname: web\nversion: 1.2.3\n"),
        Some(SkipReason::Helm)
    );
}

#[test]
fn anything_shaped_like_an_object_is_read() {
    // Malformed objects stay errors: they are not skipped.
    assert_eq!(content("kind: Deployment\nmetadata: {name: a}\n"), None);
    assert_eq!(content("apiVersion: v1\nmetadata: {name: a}\n"), None);
    assert_eq!(content("metadata: {name: a}\nspec: {}\n"), None);
    // One object among data: the file is read (and the data reported).
    assert_eq!(
        content("a: 1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
        None
    );
    assert_eq!(content(""), None);
}

#[test]
fn template_names_are_a_part_of_the_name() {
    let t = |n: &str| template_name(&crate::manifest::Source::file(n));
    assert!(t("charts/templates/role.tmpl.yaml"));
    assert!(t("deploy.yaml.j2"));
    assert!(t("cm.ftl.yaml"));
    assert!(!t("templates/role.yaml"));
    assert!(!t("tmpl/role.yaml"));
    assert!(!t("template.yaml"));
}
