//! The container image, built as shipped (scripts/image.sh with whichever of
//! buildah, podman or docker the machine has), unpacked, and run from its
//! root filesystem alone: `interlock --version` names this commit and
//! `interlock check` finds a duplicate Ingress host. With none of the three
//! tools (and none installable), the test prints `SKIPPED: no
//! podman/buildah/docker` and returns: it is then not evidence of anything.
//!
//! The image's static binary is a release build: set
//! `INTERLOCK_IMAGE_TARGET_DIR` to keep its target dir across runs (the
//! script's default is under the user's cache).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value as Json;

const REPO: &str = env!("CARGO_MANIFEST_DIR");
/// scripts/image.sh's exit status when no image tool is present.
const NO_IMAGE_TOOL: i32 = 3;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// The commit as build.rs stamps it (12 hex digits).
fn head_commit() -> String {
    let out = run(Command::new("git").args(["-C", REPO, "rev-parse", "--short=12", "HEAD"]));
    text(&out.stdout).trim().to_string()
}

/// A blob of an OCI layout by its digest ("sha256:...").
fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (algorithm, hex) = digest
        .split_once(':')
        .unwrap_or_else(|| panic!("not a digest: {digest}"));
    layout.join("blobs").join(algorithm).join(hex)
}

fn read_json(path: &Path) -> Json {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The image manifest of a one-image OCI layout (docker's archive may wrap
/// it in one more index).
fn image_manifest(layout: &Path) -> Json {
    let mut doc = read_json(&layout.join("index.json"));
    loop {
        let manifests = doc["manifests"]
            .as_array()
            .expect("an index lists manifests");
        assert_eq!(manifests.len(), 1, "one image in the layout: {doc}");
        let digest = manifests[0]["digest"].as_str().expect("a digest");
        doc = read_json(&blob(layout, digest));
        if doc.get("layers").is_some() {
            return doc;
        }
    }
}

/// Every path in `root`, relative, sorted.
fn tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("dir entry").path();
            out.push(path.strip_prefix(root).unwrap().display().to_string());
            if path.is_dir() && !path.is_symlink() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn is_root() -> bool {
    run(Command::new("id").arg("-u")).stdout.trim_ascii() == b"0"
}

/// `/interlock ARGS` from the unpacked root with an empty environment:
/// chrooted there as root (nothing outside the tree is visible), otherwise
/// the binary from the tree with the tree as its working directory.
fn in_image(rootfs: &Path, args: &[&str]) -> Output {
    let mut cmd = if is_root() {
        runtime_devices(rootfs);
        let mut c = Command::new("/usr/sbin/chroot");
        c.arg(rootfs).arg("/interlock");
        c
    } else {
        eprintln!("not root: running the image's binary without chroot");
        Command::new(rootfs.join("interlock"))
    };
    cmd.args(args)
        .env_clear()
        .current_dir(rootfs)
        .stdin(Stdio::null())
        .output()
        .expect("run the image's interlock")
}

/// The device nodes every OCI runtime creates in a container's /dev (the
/// runtime spec's default devices), which a bare chroot lacks: without
/// /dev/urandom, where the getrandom syscall is unavailable, the binary's
/// random seeds cannot be read. Only what a runtime always provides, so
/// the image still brings everything else itself.
fn runtime_devices(rootfs: &Path) {
    let dev = rootfs.join("dev");
    std::fs::create_dir_all(&dev).unwrap();
    for (name, minor) in [
        ("null", "3"),
        ("zero", "5"),
        ("random", "8"),
        ("urandom", "9"),
    ] {
        let node = dev.join(name);
        if !node.exists() {
            run(Command::new("mknod")
                .arg(&node)
                .args(["-m", "0666", "c", "1", minor]));
        }
    }
}

const DUPLICATE_HOST: &str = "\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: team-a}
spec:
  rules: [{host: shop.example.com}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: team-b}
spec:
  rules: [{host: shop.example.com}]
";

#[test]
fn image_runs_version_and_check_from_its_root_filesystem_alone() {
    let work = tempfile::tempdir().expect("tempdir");
    let archive = work.path().join("image.tar");
    let built = Command::new(Path::new(REPO).join("scripts/image.sh"))
        .arg("--oci-archive")
        .arg(&archive)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/image.sh");
    if built.status.code() == Some(NO_IMAGE_TOOL) {
        println!("SKIPPED: no podman/buildah/docker");
        eprintln!("SKIPPED: no podman/buildah/docker");
        return;
    }
    assert!(
        built.status.success(),
        "scripts/image.sh failed ({})",
        built.status
    );
    let version = env!("CARGO_PKG_VERSION");
    let reference = text(&built.stdout);
    assert_eq!(
        reference.lines().last().map(str::trim),
        Some(format!("interlock:{version}").as_str()),
        "the image is tagged with the manifests' version"
    );

    // Unpack: the archive is an OCI layout; its layers, in order, make the
    // root filesystem.
    let layout = work.path().join("layout");
    let rootfs = work.path().join("rootfs");
    std::fs::create_dir_all(&layout).unwrap();
    std::fs::create_dir_all(&rootfs).unwrap();
    run(Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&layout));
    let manifest = image_manifest(&layout);
    for layer in manifest["layers"].as_array().expect("layers") {
        let digest = layer["digest"].as_str().expect("a layer digest");
        run(Command::new("tar")
            .arg("-xf")
            .arg(blob(&layout, digest))
            .arg("-C")
            .arg(&rootfs));
    }
    // No shell, no package manager, nothing but the binary.
    assert_eq!(
        tree(&rootfs),
        ["interlock"],
        "the image holds only /interlock"
    );

    let commit = head_commit();
    let config = read_json(&blob(
        &layout,
        manifest["config"]["digest"]
            .as_str()
            .expect("a config digest"),
    ));
    let image = &config["config"];
    assert_eq!(image["User"], "65532:65532", "a numeric non-root user");
    assert_eq!(image["Entrypoint"], serde_json::json!(["/interlock"]));
    let label = |name: &str| image["Labels"][name].as_str().unwrap_or("").to_string();
    assert_eq!(label("org.opencontainers.image.version"), version);
    assert_eq!(label("org.opencontainers.image.revision"), commit);
    assert_eq!(label("org.opencontainers.image.licenses"), "Apache-2.0");

    let out = in_image(&rootfs, &["--version"]);
    assert!(out.status.success(), "--version: {}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        format!("interlock {version} ({commit})"),
        "the image's binary names this commit"
    );

    std::fs::write(rootfs.join("ingresses.yaml"), DUPLICATE_HOST).unwrap();
    let out = in_image(&rootfs, &["check", "/ingresses.yaml"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "check exits 1 on a Deny finding:\n{stdout}{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("DENY unique-ingress-host: Ingress team-a/shop: host already in use"),
        "check finds the duplicate host with the bundled library:\n{stdout}"
    );
}
