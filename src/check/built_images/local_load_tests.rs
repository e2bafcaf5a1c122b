use super::*;

// Command shapes from the usage of kind (`kind load docker-image`), k3d
// (`k3d image import`) and minikube (`minikube image load`).
const MAKEFILE: &str = "\
load-kind:
\tdocker build -t orders:latest . && kind load docker-image orders:latest --name demo
\tkind load docker-image --name demo quay.io/team/api:dev \\
\t  ghcr.io/team/worker
load-k3d:
\tk3d image import products:latest -c $(CLUSTER_NAME)
\tk3d image import -c demo reviews images.tar
load-minikube:
\tminikube image load -p dev dashboard:latest # the UI
\tkind load docker-image ${IMG}
\tkind load image-archive app.tar
\techo kind load docker-image-is-not-this
";

#[test]
fn images_written_out_in_load_commands_are_read() {
    let got: BTreeSet<String> = loaded(MAKEFILE).into_iter().collect();
    let want: BTreeSet<String> = [
        "orders",
        "quay.io/team/api",
        "ghcr.io/team/worker",
        "products",
        "reviews",
        "dashboard",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
    assert!(loaded("docker build -t orders:latest .\ndocker push orders:latest\n").is_empty());
}

#[test]
fn images_tagged_by_build_commands_are_read() {
    let script = "\
docker build -t orders:latest .
podman build --tag=quay.io/team/api:dev -f Dockerfile .
docker buildx build --platform linux/amd64 \\
  -t reviews .
buildah bud -t 'dashboard' .
docker build -t ${IMG} .
docker tag orders:latest other
docker run -t busybox
";
    let got: BTreeSet<String> = built_tags(script).into_iter().collect();
    let want: BTreeSet<String> = ["orders", "quay.io/team/api", "reviews", "dashboard"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(got, want);
}

#[test]
fn the_repository_scripts_are_read_and_the_images_pinned() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("hack")).unwrap();
    std::fs::create_dir_all(root.join("deploy")).unwrap();
    // Built and loaded: `orders`. Loaded only (an official image spared
    // a pull): `redis`. Built and loaded but published under a namespace,
    // which a user's cluster pulls: `team/agent`.
    std::fs::write(
        root.join("hack/dev.sh"),
        "#!/bin/sh\ndocker build -t orders:latest . && k3d image import orders:latest\n\
         kind load docker-image redis:latest\n\
         docker build -t team/agent:latest . && kind load docker-image team/agent:latest\n",
    )
    .unwrap();
    assert_eq!(
        images(&[root.join("deploy")])
            .into_iter()
            .collect::<Vec<_>>(),
        ["orders"]
    );
    let found = super::super::BuiltImages::find(&[root.join("deploy")]);
    let mut pod = serde_json::json!({"kind": "Pod", "spec": {"containers": [
        {"image": "orders:latest"}, {"image": "redis:latest"}, {"image": "team/agent:latest"}
    ]}});
    found.pin(&mut pod);
    let got = super::super::tests::container_images(&pod);
    assert_eq!(
        got,
        ["orders:loaded-locally", "redis:latest", "team/agent:latest"]
    );
}
