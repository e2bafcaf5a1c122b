use super::*;
use serde_json::json;

/// The images of a Pod's containers, in order.
pub(super) fn container_images(pod: &Json) -> Vec<&str> {
    pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["image"].as_str().unwrap())
        .collect()
}

#[test]
fn references_to_built_images_are_pinned_in_every_pod_spec() {
    let images = BuiltImages::of(Builder::Skaffold, &["frontend", "localhost:5000/worker"]);
    let containers = json!([
        {"name": "a", "image": "frontend"},
        {"name": "b", "image": "frontend:latest"},
        {"name": "c", "image": "frontend@sha256:abc"},
        {"name": "d", "image": "redis"},
        {"name": "e", "image": "localhost:5000/worker"},
        {"name": "f"}
    ]);
    let want = json!([
        {"name": "a", "image": "frontend:skaffold-built"},
        {"name": "b", "image": "frontend:latest"},
        {"name": "c", "image": "frontend@sha256:abc"},
        {"name": "d", "image": "redis"},
        {"name": "e", "image": "localhost:5000/worker:skaffold-built"},
        {"name": "f"}
    ]);
    let spec = json!({"containers": containers, "initContainers": containers,
                      "ephemeralContainers": containers});
    let want_spec = json!({"containers": want, "initContainers": want,
                           "ephemeralContainers": want});
    let cases = [
        (json!({"kind": "Pod", "spec": spec}), "/spec"),
        (
            json!({"kind": "Deployment", "spec": {"template": {"spec": spec}}}),
            "/spec/template/spec",
        ),
        (
            json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}}),
            "/spec/jobTemplate/spec/template/spec",
        ),
        (
            json!({"kind": "PodTemplate", "template": {"spec": spec}}),
            "/template/spec",
        ),
    ];
    for (mut object, at) in cases {
        images.pin(&mut object);
        assert_eq!(object.pointer(at).unwrap(), &want_spec, "{at}");
    }
    // A Deployment's spec is not a pod spec; nothing built: unchanged.
    let mut d = json!({"kind": "Deployment", "spec": {"containers": [{"image": "frontend"}]}});
    let before = d.clone();
    images.pin(&mut d);
    assert_eq!(d, before);
    let mut p = json!({"kind": "Pod", "spec": {"containers": [{"image": "frontend"}]}});
    BuiltImages::default().pin(&mut p);
    assert_eq!(p["spec"]["containers"][0]["image"], "frontend");
}

#[test]
fn tilt_and_release_scripts_replace_latest_as_well() {
    for (builder, tag) in [
        (Builder::Tilt, "tilt-built"),
        (Builder::ReleaseScript, "release-set"),
        (Builder::LocalLoad, "loaded-locally"),
    ] {
        let images = BuiltImages::of(builder, &["quay.io/org/app"]);
        let mut pod = json!({"kind": "Pod", "spec": {"containers": [
            {"image": "quay.io/org/app:latest"},
            {"image": "quay.io/org/app"},
            {"image": "quay.io/org/app:v1.2"},
            {"image": "quay.io/org/app:latest-debug"},
            {"image": "quay.io/org/other:latest"}
        ]}});
        images.pin(&mut pod);
        let got = container_images(&pod);
        let pinned = format!("quay.io/org/app:{tag}");
        assert_eq!(
            got,
            [
                pinned.as_str(),
                pinned.as_str(),
                "quay.io/org/app:v1.2",
                "quay.io/org/app:latest-debug",
                "quay.io/org/other:latest"
            ]
        );
    }
}

#[test]
fn the_first_builder_found_keeps_an_image() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(
        root.join("skaffold.yaml"),
        "apiVersion: skaffold/v4beta11\nkind: Config\nbuild:\n  artifacts:\n    - image: app\n",
    )
    .unwrap();
    std::fs::write(
        root.join("Tiltfile"),
        "docker_build('app', '.')\ndocker_build('ui', '.')\n",
    )
    .unwrap();
    let found = BuiltImages::find(&[root.to_path_buf()]);
    assert_eq!(
        found,
        BuiltImages(
            [
                ("app".to_string(), Builder::Skaffold),
                ("ui".to_string(), Builder::Tilt)
            ]
            .into_iter()
            .collect()
        )
    );
}

#[test]
fn bare_and_latest_images_on_a_loopback_registry_are_local_builds() {
    for host in [
        "localhost",
        "localhost:5000",
        "127.0.0.1:5001",
        "[::1]:5000",
    ] {
        assert!(on_loopback_registry(&format!("{host}/org/app")), "{host}");
    }
    for repo in [
        "localhost",
        "app",
        "library/localhost",
        "registry.example.com:5000/app",
        "localhost.example.com/app",
        "128.0.0.1:5000/app",
        "org/localhost:5000",
    ] {
        assert!(!on_loopback_registry(repo), "{repo}");
    }
    let mut pod = json!({"kind": "Pod", "spec": {"containers": [
        {"image": "localhost:5000/sched/controller:latest"},
        {"image": "localhost:5000/sched/controller"},
        {"image": "localhost:5000/sched/controller:v1"},
        {"image": "busybox:latest"}
    ]}});
    BuiltImages::default().pin(&mut pod);
    let got = container_images(&pod);
    assert_eq!(
        got,
        [
            "localhost:5000/sched/controller:local-build",
            "localhost:5000/sched/controller:local-build",
            "localhost:5000/sched/controller:v1",
            "busybox:latest"
        ]
    );
}

#[test]
fn repository_drops_tag_and_digest_but_not_a_port() {
    assert_eq!(repository("frontend"), "frontend");
    assert_eq!(repository("frontend:1.2"), "frontend");
    assert_eq!(repository("localhost:5000/app"), "localhost:5000/app");
    assert_eq!(
        repository("localhost:5000/app:v1@sha256:x"),
        "localhost:5000/app"
    );
}

#[test]
fn istio_auto_images_are_the_injectors_to_write() {
    // Istio's gateway install: the injector replaces `image: auto` in a
    // pod template annotated with the template to inject.
    let gateway = |annotated: bool| {
        let annotations = if annotated {
            json!({"inject.istio.io/templates": "gateway"})
        } else {
            json!({})
        };
        json!({"kind": "Deployment", "spec": {"template": {
            "metadata": {"annotations": annotations, "labels": {"sidecar.istio.io/inject": "true"}},
            "spec": {"containers": [{"name": "istio-proxy", "image": "auto"}]}}}})
    };
    let mut d = gateway(true);
    BuiltImages::default().pin(&mut d);
    assert_eq!(
        d.pointer("/spec/template/spec/containers/0/image").unwrap(),
        "auto:injected"
    );
    let mut plain = gateway(false);
    BuiltImages::default().pin(&mut plain);
    assert_eq!(
        plain
            .pointer("/spec/template/spec/containers/0/image")
            .unwrap(),
        "auto"
    );
}
