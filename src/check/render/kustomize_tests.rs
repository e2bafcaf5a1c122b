use super::*;

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

#[test]
fn relative_paths_climb_to_the_common_folder() {
    assert_eq!(
        relative(Path::new("/tmp/a/b"), Path::new("/srv/repo/base")),
        PathBuf::from("../../../srv/repo/base")
    );
    assert_eq!(
        relative(Path::new("/a"), Path::new("/a")),
        PathBuf::from(".")
    );
    assert_eq!(
        normalize(Path::new("/t/x/../../r/./b.yaml")),
        PathBuf::from("/r/b.yaml")
    );
}

#[test]
fn top_level_kustomizations_are_those_no_other_includes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "base/kustomization.yaml", "resources: [deploy.yaml]\n");
    write(
        d,
        "base/deploy.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    );
    write(
        d,
        "base/unused-patch.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    );
    write(
        d,
        "overlays/prod/kustomization.yaml",
        "resources: [../../base, https://example.com/x.yaml]\ncomponents: [../../comp]\npatches: [{path: patches/replicas.yaml}]\n",
    );
    write(
        d,
        "overlays/prod/patches/replicas.yaml",
        "kind: ConfigMap\n",
    );
    write(
        d,
        "comp/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
    );
    write(
        d,
        "plain/svc.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    );
    let l = layout(&[d.to_path_buf()], &[]);
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    assert_eq!(l.roots, vec![d.join("overlays/prod")]);
    let claimed = |p: &str| l.claimed.contains(&canonical(&d.join(p)));
    assert!(claimed("base/deploy.yaml"));
    assert!(claimed("overlays/prod/patches/replicas.yaml"));
    assert!(claimed("base/unused-patch.yaml"));
    assert!(!claimed("plain/svc.yaml"));
    assert_eq!(l.unreferenced, vec![d.join("base/unused-patch.yaml")]);
}

#[test]
fn a_kustomization_that_is_not_yaml_is_an_error_at_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "kustomization.yaml",
        "resources:\n  - a\n - b: [\n",
    );
    let l = layout(&[tmp.path().to_path_buf()], &[]);
    assert_eq!(l.errors.len(), 1, "{:?}", l.errors);
    assert!(l.errors[0].file.ends_with("kustomization.yaml"));
    assert!(l.errors[0].line.is_some());
}

#[test]
fn kustomize_reasons_lose_kubectls_log_prefix() {
    let stderr = b"E1202 10:17:23.985 10393 run.go:72] \"command failed\" err=\"accumulating resources: 'x' must resolve to a file\"\n";
    assert_eq!(
        kustomize_reason(stderr),
        "accumulating resources: 'x' must resolve to a file"
    );
    assert_eq!(kustomize_reason(b"Error: missing file\n"), "missing file");
    let block = b"E1202 10:40:19 15574 run.go:72] \"command failed\" err=<\n\taccumulating resources: 'https://x/y.yaml': dial tcp: no such host\n\t: exit status 128\n >\n";
    assert_eq!(
        kustomize_reason(block),
        "accumulating resources: 'https://x/y.yaml': dial tcp: no such host : exit status 128"
    );
}

#[test]
fn names_match_the_longest_part_of_the_rendered_name() {
    let entries = [
        (3, "Deployment".to_string(), "web".to_string()),
        (9, "Deployment".to_string(), "web-api".to_string()),
    ];
    assert_eq!(best_match(entries.iter(), "prod-web-api-v2"), Some(9));
    assert_eq!(best_match(entries.iter(), "prod-web"), Some(3));
    assert_eq!(best_match(entries.iter(), "other"), None);
}

#[test]
fn origin_annotations_are_taken_off_the_object() {
    let mut v = serde_json::json!({"metadata": {"name": "a", "annotations": {ORIGIN: "path: ../r/base/a.yaml\n"}}});
    let o = take_origin(&mut v).expect("origin");
    assert_eq!(o.path.as_deref(), Some("../r/base/a.yaml"));
    assert!(v["metadata"].get("annotations").is_none());
    let mut kept = serde_json::json!({"metadata": {"name": "a", "annotations": {ORIGIN: "configuredIn: k.yaml\n", "x": "y"}}});
    let o = take_origin(&mut kept).expect("origin");
    assert_eq!(o.configured_in.as_deref(), Some("k.yaml"));
    assert_eq!(
        kept["metadata"]["annotations"],
        serde_json::json!({"x": "y"})
    );
}

#[test]
fn a_remote_reference_anywhere_below_a_kustomization_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "overlay/kustomization.yaml", "resources: [../base]\n");
    write(
        root,
        "base/kustomization.yaml",
        "resources:\n- deploy.yaml\n- https://github.com/org/repo/releases/download/v1/crds.yaml\n",
    );
    write(root, "base/deploy.yaml", "kind: Deployment\n");
    write(
        root,
        "local/kustomization.yaml",
        "resources: [deploy.yaml, ../base2]\n",
    );
    write(root, "local/deploy.yaml", "kind: Deployment\n");
    write(root, "base2/kustomization.yaml", "resources: [../local]\n");
    assert!(loads_remote(&root.join("overlay")));
    assert!(loads_remote(&root.join("base")));
    // A cycle of local kustomizations ends, and finds nothing remote.
    assert!(!loads_remote(&root.join("local")));
}

#[test]
fn fleet_helm_bundles_name_their_kustomize_folders() {
    // Fleet's bundle reference: `helm:` renders a chart, and
    // `kustomize.dir` (per target too) is applied to its output.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "app/fleet.yaml",
        "namespace: demo\nhelm:\n  chart: ./chart\ntargetCustomizations:\n- name: dev\n  kustomize:\n    dir: overlays/dev\n",
    );
    write(
        d,
        "app/overlays/dev/kustomization.yaml",
        "patches: [{path: p.yaml}]\n",
    );
    write(
        d,
        "app/overlays/test/kustomization.yaml",
        "patches: [{path: p.yaml}]\n",
    );
    write(d, "plain/fleet.yaml", "kustomize:\n  dir: overlays/dev\n");
    write(
        d,
        "plain/overlays/dev/kustomization.yaml",
        "resources: [a.yaml]\n",
    );
    assert_eq!(
        fleet_helm_bundle(&d.join("app/overlays/dev")),
        Some(canonical(&d.join("app")).join("fleet.yaml"))
    );
    assert_eq!(fleet_helm_bundle(&d.join("app/overlays/test")), None);
    // No chart: the kustomization must build on its own.
    assert_eq!(fleet_helm_bundle(&d.join("plain/overlays/dev")), None);
}

#[test]
fn a_part_the_scaffold_names_only_in_a_comment_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "config/default/kustomization.yaml",
        "resources:\n- ../manager\n# [WEBHOOK] To enable webhook, uncomment the line below\n#- ../webhook\n# - \"../certmanager\"\n",
    );
    write(
        d,
        "config/webhook/kustomization.yaml",
        "resources: [manifests.yaml]\n",
    );
    write(
        d,
        "config/certmanager/kustomization.yaml",
        "resources: [certificate.yaml]\n",
    );
    write(
        d,
        "config/prometheus/kustomization.yaml",
        "resources: [monitor.yaml]\n",
    );
    let (file, line) = commented_out_in(&d.join("config/webhook")).expect("webhook");
    assert!(
        file.ends_with("config/default/kustomization.yaml"),
        "{file:?}"
    );
    assert_eq!(line, 4);
    assert_eq!(
        commented_out_in(&d.join("config/certmanager")).map(|f| f.1),
        Some(5)
    );
    // Named nowhere, not even in a comment: not a scaffold's part.
    assert_eq!(commented_out_in(&d.join("config/prometheus")), None);
    // A comment sentence is not an entry.
    assert_eq!(commented_entry("# - uncomment this to enable"), None);
    assert_eq!(commented_entry("  #  - ../webhook  "), Some("../webhook"));
}
