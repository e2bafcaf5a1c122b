//! The Helm chart (manifests/chart) and the kustomize overlays render the
//! same objects, and `helm lint` finds nothing in the chart. No cluster: the
//! real `kubectl kustomize` of the test control plane and the helm that
//! scripts/helm.sh builds from its Go module.
//!
//! The chart is kept by hand beside manifests/base; these tests are what
//! keeps the two equal (manifests/chart/Chart.yaml points here).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde::Deserialize;
use serde_json::Value as Json;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

fn kubectl() -> PathBuf {
    crate::support::cluster::control_plane_dir()
        .expect("the control plane's kubectl")
        .join("kubectl")
}

/// helm: `INTERLOCK_HELM_DIR` when it holds helm, or what scripts/helm.sh
/// prints (it returns at once when helm is cached, builds it otherwise).
fn helm() -> PathBuf {
    static HELM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    HELM.get_or_init(|| {
        if let Some(d) = std::env::var_os("INTERLOCK_HELM_DIR").map(PathBuf::from) {
            if d.join("helm").is_file() {
                return d.join("helm");
            }
        }
        let out = Command::new(Path::new(REPO).join("scripts/helm.sh"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/helm.sh");
        assert!(out.status.success(), "scripts/helm.sh failed");
        let text = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(text.lines().last().expect("the bin dir").trim()).join("helm")
    })
    .clone()
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
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A copy of manifests/ with the certificates `interlock certs` makes, as
/// the overlay's comment says, in the overlay's git-ignored certs/ folder.
/// A copy, so the checkout is never written and tests never share files.
pub(crate) struct Manifests {
    dir: tempfile::TempDir,
}

impl Manifests {
    pub(crate) fn with_certs() -> Manifests {
        let dir = tempfile::tempdir().expect("tempdir");
        run(Command::new("cp")
            .arg("-a")
            .arg(Path::new(REPO).join("manifests"))
            .arg(dir.path()));
        let m = Manifests { dir };
        let certs = m.certs();
        // A checkout may hold certificates of its own there: use ours.
        let _ = std::fs::remove_dir_all(&certs);
        run(Command::new(env!("CARGO_BIN_EXE_interlock"))
            .arg("certs")
            .arg("--out")
            .arg(&certs)
            .args(["--host", "interlock.interlock-system.svc"])
            .args(["--host", "interlock.interlock-system.svc.cluster.local"]));
        m
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("manifests")
    }

    pub(crate) fn certs(&self) -> PathBuf {
        self.root().join("overlays/interlock-certs/certs")
    }

    pub(crate) fn overlay(&self, name: &str) -> PathBuf {
        self.root().join("overlays").join(name)
    }

    pub(crate) fn kustomize(&self, overlay: &str) -> Vec<Json> {
        let out = run(Command::new(kubectl())
            .arg("kustomize")
            .arg(self.overlay(overlay)));
        documents(&out.stdout)
    }

    /// `helm template interlock manifests/chart` with the certificates of
    /// the interlock-certs overlay and `extra` arguments.
    fn helm_template(&self, extra: &[&str]) -> Vec<Json> {
        let out = run(Command::new(helm())
            .args(["template", "interlock"])
            .arg(self.root().join("chart"))
            .args(self.cert_args())
            .args(extra));
        documents(&out.stdout)
    }

    fn cert_args(&self) -> Vec<String> {
        [
            ("caCrt", "ca.crt"),
            ("tlsCrt", "tls.crt"),
            ("tlsKey", "tls.key"),
        ]
        .iter()
        .flat_map(|(value, file)| {
            [
                "--set-file".to_string(),
                format!("certificates.{value}={}", self.certs().join(file).display()),
            ]
        })
        .collect()
    }
}

fn documents(yaml: &[u8]) -> Vec<Json> {
    let text = std::str::from_utf8(yaml).expect("utf-8 output");
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Json::deserialize(doc).expect("a YAML document"))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// What identifies an object in a rendering.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ObjectKey {
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
}

impl ObjectKey {
    fn of(object: &Json) -> ObjectKey {
        let text = |v: &Json| v.as_str().unwrap_or("").to_string();
        ObjectKey {
            api_version: text(&object["apiVersion"]),
            kind: text(&object["kind"]),
            namespace: text(&object["metadata"]["namespace"]),
            name: text(&object["metadata"]["name"]),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)?;
        if !self.namespace.is_empty() {
            write!(f, " {}/", self.namespace)?;
        } else {
            write!(f, " ")?;
        }
        write!(f, "{}", self.name)
    }
}

/// The objects of a rendering by key; a key rendered twice fails.
fn by_key(objects: Vec<Json>, what: &str) -> BTreeMap<ObjectKey, Json> {
    let mut map = BTreeMap::new();
    for mut o in objects {
        normalise(&mut o);
        let key = ObjectKey::of(&o);
        if map.insert(key.clone(), o).is_some() {
            panic!("{what} renders {key} twice");
        }
    }
    map
}

/// Removes what legitimately differs between the two renderings, and only
/// that: kustomize's secretGenerator wraps base64 at 76 columns (and the
/// caBundle it copies from the Secret keeps the wrapping), helm's `b64enc`
/// does not. The bytes are the same certificates, so whitespace inside
/// base64 is dropped. Nothing else is normalised: the chart adds no helm
/// labels (`helm.sh/chart`, `app.kubernetes.io/managed-by`), so that the
/// objects of both installs are the same, labels included.
fn normalise(object: &mut Json) {
    let unwrap = |v: &mut Json| {
        if let Some(s) = v.as_str() {
            *v = Json::String(s.split_whitespace().collect());
        }
    };
    if object["kind"] == "Secret" {
        if let Some(data) = object.get_mut("data").and_then(Json::as_object_mut) {
            data.values_mut().for_each(unwrap);
        }
    }
    if let Some(hooks) = object.get_mut("webhooks").and_then(Json::as_array_mut) {
        for hook in hooks {
            if let Some(ca) = hook.pointer_mut("/clientConfig/caBundle") {
                unwrap(ca);
            }
        }
    }
}

/// Every field where `kustomize` and `helm` differ, as "path: kustomize X,
/// helm Y" (a missing field shows as "absent").
fn field_differences(
    path: &str,
    kustomize: Option<&Json>,
    helm: Option<&Json>,
    out: &mut Vec<String>,
) {
    match (kustomize, helm) {
        (Some(Json::Object(k)), Some(Json::Object(h))) => {
            let keys: std::collections::BTreeSet<&String> = k.keys().chain(h.keys()).collect();
            for key in keys {
                field_differences(&format!("{path}.{key}"), k.get(key), h.get(key), out);
            }
        }
        (Some(Json::Array(k)), Some(Json::Array(h))) if k.len() == h.len() => {
            for (i, (k, h)) in k.iter().zip(h).enumerate() {
                field_differences(&format!("{path}[{i}]"), Some(k), Some(h), out);
            }
        }
        (k, h) if k == h => {}
        (k, h) => {
            let show = |v: Option<&Json>| v.map_or("absent".to_string(), Json::to_string);
            out.push(format!("{path}: kustomize {}, helm {}", show(k), show(h)));
        }
    }
}

/// Every difference between the two renderings, one line each, naming the
/// object and the field.
fn differences(kustomize: Vec<Json>, helm: Vec<Json>) -> Vec<String> {
    let kustomize = by_key(kustomize, "kubectl kustomize");
    let mut helm = by_key(helm, "helm template");
    let mut out = Vec::new();
    for (key, k) in &kustomize {
        match helm.remove(key) {
            None => out.push(format!("{key}: only in the kustomize overlay")),
            Some(h) => {
                let mut fields = Vec::new();
                field_differences("", Some(k), Some(&h), &mut fields);
                out.extend(fields.into_iter().map(|f| format!("{key}: {f}")));
            }
        }
    }
    out.extend(
        helm.keys()
            .map(|key| format!("{key}: only in the helm chart")),
    );
    out
}

fn assert_same(overlay: &str, kustomize: Vec<Json>, helm: Vec<Json>) {
    assert!(
        kustomize.len() > 20,
        "the overlay {overlay} renders only {} objects",
        kustomize.len()
    );
    let diffs = differences(kustomize, helm);
    assert!(
        diffs.is_empty(),
        "the chart and manifests/overlays/{overlay} differ:\n{}",
        diffs.join("\n")
    );
}

/// The chart's defaults (certificates from `interlock certs`, passed with
/// --set-file as values.yaml says) give the objects of
/// manifests/overlays/interlock-certs, field by field.
#[test]
fn chart_defaults_render_the_interlock_certs_overlay() {
    let m = Manifests::with_certs();
    assert_same(
        "interlock-certs",
        m.kustomize("interlock-certs"),
        m.helm_template(&[]),
    );
}

/// certificates.mode=cert-manager gives the objects of
/// manifests/overlays/cert-manager.
#[test]
fn chart_cert_manager_mode_renders_the_cert_manager_overlay() {
    let m = Manifests::with_certs();
    let helm = {
        let out = run(Command::new(helm())
            .args(["template", "interlock"])
            .arg(m.root().join("chart"))
            .args(["--set", "certificates.mode=cert-manager"]));
        documents(&out.stdout)
    };
    assert_same("cert-manager", m.kustomize("cert-manager"), helm);
}

/// The comparison itself can fail: a value changed on the helm side only
/// shows up as a difference naming the object and the field.
#[test]
fn chart_comparison_names_the_object_and_field_that_differ() {
    let m = Manifests::with_certs();
    let diffs = differences(
        m.kustomize("interlock-certs"),
        m.helm_template(&["--set", "webhook.replicas=3"]),
    );
    assert_eq!(
        diffs,
        ["apps/v1 Deployment interlock-system/interlock: .spec.replicas: kustomize 2, helm 3"],
    );
}

/// `helm lint --strict` passes in both certificate modes: no error and no
/// warning (helm's INFO lines, such as "icon is recommended", are allowed).
#[test]
fn chart_helm_lint_is_clean() {
    let m = Manifests::with_certs();
    let chart = m.root().join("chart");
    let modes: [Vec<String>; 2] = [
        m.cert_args(),
        vec!["--set".into(), "certificates.mode=cert-manager".into()],
    ];
    for args in modes {
        let out = run(Command::new(helm())
            .args(["lint", "--strict"])
            .arg(&chart)
            .args(&args));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("1 chart(s) linted, 0 chart(s) failed"),
            "helm lint {args:?}:\n{text}"
        );
        assert!(
            !text.contains("[WARNING]") && !text.contains("[ERROR]"),
            "helm lint {args:?}:\n{text}"
        );
    }
}
