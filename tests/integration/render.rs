//! `interlock check` over kustomize layouts and Helm charts, rendered by the
//! real tools (the kubectl of the test control plane; helm built by
//! scripts/helm.sh from its Go module): the findings are those of
//! `kubectl kustomize DIR | interlock check -` and `helm template`, reported
//! at the source file and line of each object, with what rendered it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value as Json;

fn kubectl_dir() -> PathBuf {
    crate::support::cluster::control_plane_dir().expect("the control plane's kubectl")
}

/// PATH with only the control plane's binaries (kubectl, no kustomize).
fn path_with_kubectl() -> std::ffi::OsString {
    std::env::join_paths([kubectl_dir()]).expect("PATH")
}

/// helm's folder: `INTERLOCK_HELM_DIR` when it holds helm, or what
/// scripts/helm.sh builds (cached).
fn helm_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("INTERLOCK_HELM_DIR").map(PathBuf::from) {
            if d.join("helm").is_file() {
                return d;
            }
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/helm.sh");
        let out = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/helm.sh");
        assert!(out.status.success(), "scripts/helm.sh failed");
        let text = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(text.lines().last().expect("the bin dir").trim())
    })
    .clone()
}

fn path_with_helm() -> std::ffi::OsString {
    std::env::join_paths([kubectl_dir(), helm_dir()]).expect("PATH")
}

fn check_in(dir: &Path, path: &std::ffi::OsStr, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_interlock"))
        .arg("check")
        .args(args)
        .env("PATH", path)
        .current_dir(dir)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run interlock check");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().expect("interlock check")
}

fn json(out: &Output) -> Json {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Each finding as (policy, action, object, message), sorted.
fn findings(report: &Json) -> Vec<String> {
    let mut v: Vec<String> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let o = &r["object"];
            format!(
                "{} {} {} {}/{}: {}",
                r["policy"].as_str().unwrap_or(""),
                r["action"].as_str().unwrap_or(""),
                o["kind"].as_str().unwrap_or(""),
                o["namespace"].as_str().unwrap_or(""),
                o["name"].as_str().unwrap_or(""),
                r["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    v.sort();
    v
}

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A base, an overlay that sets a namespace, a prefix, an image and a
/// patch, a generated ConfigMap, a scaffold patch nobody references, and a
/// plain manifest beside them.
fn layout(d: &Path) {
    write(
        d,
        "base/kustomization.yaml",
        "resources: [deploy.yaml, ingress.yaml]\nconfigMapGenerator:\n- name: web-config\n  literals: [mode=live]\n",
    );
    write(
        d,
        "base/deploy.yaml",
        "# the web Deployment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: web\n        image: nginx\n        envFrom: [{configMapRef: {name: web-config}}]\n        volumeMounts: [{name: creds, mountPath: /c}]\n        securityContext: {privileged: true}\n      volumes: [{name: creds, secret: {secretName: web-creds}}]\n",
    );
    write(
        d,
        "base/ingress.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\nspec:\n  rules: [{host: shop.example.com}]\n",
    );
    write(
        d,
        "base/manager_auth_proxy_patch.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers: [{name: proxy, image: proxy}]\n",
    );
    write(
        d,
        "overlays/prod/kustomization.yaml",
        "namespace: prod\nnamePrefix: prod-\nresources: [../../base]\nimages: [{name: nginx, newTag: '1.27.1'}]\npatches: [{path: patches/replicas.yaml}]\n",
    );
    write(
        d,
        "overlays/prod/patches/replicas.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n",
    );
    write(
        d,
        "plain/ingress.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: other, namespace: blog}\nspec:\n  rules: [{host: shop.example.com}]\n",
    );
}

#[test]
fn a_kustomize_tree_is_checked_as_kustomize_renders_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    layout(d);
    let path = path_with_kubectl();
    let out = check_in(d, &path, &["-o", "json", "."], None);
    let report = json(&out);
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    let got = findings(&report);
    // The overlay's image tag, generated ConfigMap (with its hash) and
    // namespace are applied: no `latest`, no missing ConfigMap; the
    // unreferenced scaffold patch and the referenced patch are not objects.
    assert!(
        got.iter().all(|f| !f.starts_with("disallow-latest-tag")),
        "{got:#?}"
    );
    assert!(
        got.iter().all(|f| !f.contains("ConfigMap web-config")),
        "{got:#?}"
    );
    assert!(
        got.iter().all(|f| !f.contains("/web:")),
        "only prefixed names: {got:#?}"
    );
    let privileged: Vec<&Json> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["policy"] == "pod-security-baseline")
        .collect();
    assert_eq!(privileged.len(), 1, "{got:#?}");
    let r = privileged[0];
    assert_eq!(r["object"]["namespace"], "prod");
    assert_eq!(r["object"]["name"], "prod-web");
    // Reported at the base's document (line 2: after the comment), with
    // the overlay that rendered it.
    assert_eq!(r["source"]["file"], "base/deploy.yaml", "{r}");
    assert_eq!(r["source"]["line"], 2, "{r}");
    assert_eq!(r["source"]["renderedBy"], "./overlays/prod", "{r}");
    // The host is shared with the plain file's Ingress, found across both.
    assert!(
        got.iter()
            .any(|f| f.starts_with("unique-ingress-host Deny Ingress prod/prod-web")),
        "{got:#?}"
    );
    let notices = report["notices"].to_string();
    assert!(notices.contains("rendered 1 kustomization"), "{notices}");
    assert!(
        notices.contains("manager_auth_proxy_patch.yaml"),
        "{notices}"
    );

    // The same findings as kustomize's output piped in, with the plain file.
    let rendered = Command::new(kubectl_dir().join("kubectl"))
        .args(["kustomize", "overlays/prod"])
        .current_dir(d)
        .output()
        .expect("kubectl kustomize");
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let piped = check_in(
        d,
        &path,
        &["-o", "json", "-", "plain"],
        Some(&rendered.stdout),
    );
    assert_eq!(findings(&json(&piped)), got);
    assert_eq!(piped.status.code(), out.status.code());
}

#[test]
fn an_overlay_alone_follows_its_base() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    layout(d);
    let out = check_in(
        d,
        &path_with_kubectl(),
        &["-o", "json", "overlays/prod"],
        None,
    );
    let report = json(&out);
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    assert_eq!(report["summary"]["objects"], 3, "{report}");
    assert_eq!(out.status.code(), Some(1), "the privileged container");
}

#[test]
fn without_kustomize_the_error_names_the_fix_and_never_reads_raw_files() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    layout(d);
    let empty = tempfile::tempdir().unwrap();
    let path = std::env::join_paths([empty.path()]).unwrap();
    let out = check_in(d, &path, &["."], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--kustomize never"), "{stderr}");
    assert!(stderr.contains("kubectl"), "{stderr}");
    let raw = check_in(d, &path, &["--kustomize", "never", "-o", "json", "."], None);
    let report = json(&raw);
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    // Raw: the base's objects as written, the patches skipped.
    assert!(
        findings(&report)
            .iter()
            .any(|f| f.starts_with("disallow-latest-tag")),
        "{report}"
    );
}

#[test]
fn a_kustomization_kustomize_refuses_is_an_error_at_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "app/kustomization.yaml", "resources: [missing.yaml]\n");
    let out = check_in(d, &path_with_kubectl(), &["app"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("app/kustomization.yaml"), "{stderr}");
    assert!(stderr.contains("missing.yaml"), "{stderr}");
}

/// A layout whose base is a remote one this machine cannot fetch: a
/// notice names it, the local kustomization it includes is checked on its
/// own, and `--remote-bases error` stops the run.
#[test]
fn a_remote_base_that_cannot_be_fetched_is_named_and_its_local_parts_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "deploy/install/kustomization.yaml",
        "resources:\n- https://github.invalid/acme/app//config/default?ref=v1.0.0\n- ../rbac\n",
    );
    write(
        d,
        "deploy/rbac/kustomization.yaml",
        "resources: [sa.yaml]\n",
    );
    write(
        d,
        "deploy/rbac/sa.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: app, namespace: apps}\n",
    );
    write(
        d,
        "plain/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, namespace: apps}\n",
    );
    let out = check_in(d, &path_with_kubectl(), &["-o", "json", "."], None);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    assert_eq!(
        report["summary"]["objects"], 2,
        "the plain ConfigMap and the ServiceAccount of the local part: {report}"
    );
    let notices = report["notices"].to_string();
    assert!(
        notices.contains("deploy/install/kustomization.yaml"),
        "{report}"
    );
    assert!(notices.contains("loads a remote base"), "{report}");

    let out = check_in(
        d,
        &path_with_kubectl(),
        &["--remote-bases", "error", "."],
        None,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("deploy/install/kustomization.yaml"),
        "{stderr}"
    );
    assert!(stderr.contains("--remote-bases error"), "{stderr}");
}

/// A chart (named unlike its folder) with a vendored subchart, a helper
/// template, and a default value that makes an image `latest`.
fn chart(d: &Path) {
    write(
        d,
        "charts/web/Chart.yaml",
        "apiVersion: v2\nname: webapp\nversion: 1.0.0\n",
    );
    write(
        d,
        "charts/web/values.yaml",
        "image: {tag: latest}\nreplicas: 2\n",
    );
    write(
        d,
        "charts/web/templates/_helpers.tpl",
        "{{- define \"web.name\" -}}{{ .Release.Name }}-web{{- end }}\n",
    );
    write(
        d,
        "charts/web/templates/app.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: {{ include \"web.name\" . }}}\nspec:\n  selector: {app: web}\n  ports: [{name: http, port: 80, targetPort: 8080}]\n---\n# the workload\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: {{ include \"web.name\" . }}}\nspec:\n  replicas: {{ .Values.replicas }}\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:{{ .Values.image.tag }}\n        resources: {requests: {cpu: 10m}, limits: {memory: 64Mi}}\n",
    );
    write(
        d,
        "charts/web/charts/db/Chart.yaml",
        "apiVersion: v2\nname: db\nversion: 0.1.0\n",
    );
    write(
        d,
        "charts/web/charts/db/templates/db.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-db}\ndata: {a: b}\n",
    );
}

#[test]
fn a_helm_chart_is_checked_as_helm_template_renders_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    chart(d);
    let out = check_in(d, &path_with_helm(), &["-o", "json", "."], None);
    let report = json(&out);
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    // The Service, the Deployment and the subchart's ConfigMap.
    assert_eq!(report["summary"]["objects"], 3, "{report}");
    let latest: Vec<&Json> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["policy"] == "disallow-latest-tag")
        .collect();
    assert_eq!(latest.len(), 1, "{report}");
    let r = latest[0];
    assert_eq!(r["object"]["name"], "web-web", "{r}");
    assert_eq!(r["source"]["file"], "charts/web/templates/app.yaml", "{r}");
    // The line of the Deployment's `kind:` in its template.
    assert_eq!(r["source"]["line"], 10, "{r}");
    assert_eq!(r["source"]["renderedBy"], "./charts/web", "{r}");
    assert_eq!(out.status.code(), Some(1));

    // The same findings as `helm template` piped in.
    let rendered = Command::new(helm_dir().join("helm"))
        .args(["template", "web", "charts/web"])
        .current_dir(d)
        .output()
        .expect("helm template");
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let piped = check_in(
        d,
        &path_with_helm(),
        &["-o", "json", "-"],
        Some(&rendered.stdout),
    );
    assert_eq!(findings(&json(&piped)), findings(&report));

    // A values file pins the image.
    write(d, "prod-values.yaml", "image: {tag: '1.27.1'}\n");
    let pinned = check_in(
        d,
        &path_with_helm(),
        &["-o", "json", "--values", "prod-values.yaml", "charts"],
        None,
    );
    let pinned = json(&pinned);
    assert!(
        findings(&pinned)
            .iter()
            .all(|f| !f.starts_with("disallow-latest-tag")),
        "{pinned}"
    );
}

#[test]
fn without_helm_a_chart_is_skipped_with_a_notice_and_one_that_needs_values_too() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    chart(d);
    let out = check_in(d, &path_with_kubectl(), &["-o", "json", "."], None);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(2), "no objects at all: {report}");
    assert!(
        report["errors"].to_string().contains("nothing was checked"),
        "{report}"
    );
    assert!(
        report["notices"].to_string().contains("helm template"),
        "{report}"
    );
    // A chart that cannot render with its defaults is a notice, not exit 2.
    write(
        d,
        "charts/web/templates/ingress.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\nspec:\n  rules: [{host: {{ required \"ingress.host is required\" .Values.host }}}]\n",
    );
    let notices = notices_beside_a_plain_file(d);
    assert!(notices.contains("ingress.host is required"), "{notices}");
    assert!(notices.contains("--values FILE"), "{notices}");
}

/// Adds a plain manifest beside the charts and checks with helm: exit 0
/// (a chart that does not render is a notice); the notices, as text.
fn notices_beside_a_plain_file(d: &Path) -> String {
    write(
        d,
        "plain/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\n",
    );
    let out = check_in(d, &path_with_helm(), &["-o", "json", "."], None);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    report["notices"].to_string()
}

/// Two top-level kustomizations of one install (its Deployment mode and
/// its StatefulSet mode) are alternatives: a conflict between them is not
/// certain and is a notice; a raw install YAML that repeats one of them is
/// a third alternative. A raw file of its own is applied with each.
#[test]
fn conflicts_between_alternative_renders_are_notices_not_findings() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let service = |name: &str, target: u16| {
        format!("apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: app}}\nspec:\n  selector: {{app: controller}}\n  ports: [{{name: metrics, port: 80, targetPort: {target}}}]\n")
    };
    let workload = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: controller, namespace: app}\nspec:\n  selector: {matchLabels: {app: controller}}\n  template:\n    metadata: {labels: {app: controller}}\n    spec:\n      containers: [{name: c, image: 'c:1', resources: {limits: {memory: 1Gi}, requests: {cpu: 1}}}]\n";
    write(
        d,
        "statefulset-mode/kustomization.yaml",
        "resources: [workload.yaml, metrics.yaml]\n",
    );
    write(d, "statefulset-mode/workload.yaml", workload);
    write(
        d,
        "statefulset-mode/metrics.yaml",
        &service("metrics", 8082),
    );
    write(
        d,
        "deployment-mode/kustomization.yaml",
        "resources: [workload.yaml, service.yaml]\n",
    );
    write(d, "deployment-mode/workload.yaml", workload);
    write(
        d,
        "deployment-mode/service.yaml",
        &service("controller", 8084),
    );
    // The committed output of `kustomize build statefulset-mode`.
    write(
        d,
        "install.yaml",
        &format!("{workload}---\n{}", service("metrics", 8082)),
    );
    let path = path_with_kubectl();
    let out = check_in(d, &path, &["-o", "json", "."], None);
    let report = json(&out);
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    let ports: Vec<String> = findings(&report)
        .into_iter()
        .filter(|f| f.starts_with("service-port-names-agree"))
        .collect();
    assert!(ports.is_empty(), "{ports:#?}");
    let notices = report["notices"].to_string();
    assert!(
        notices.contains("service-port-names-agree not reported"),
        "{notices}"
    );
    // A raw Service of its own is applied with every render: its conflict
    // is certain.
    write(d, "extra/monitor.yaml", &service("monitor", 9000));
    let report = json(&check_in(d, &path, &["-o", "json", "."], None));
    let ports: Vec<String> = findings(&report)
        .into_iter()
        .filter(|f| f.starts_with("service-port-names-agree"))
        .collect();
    assert!(
        ports.iter().any(|f| f.contains("Service app/monitor")),
        "{ports:#?}"
    );
}

/// kubebuilder's scaffold: `config/default` lists its optional parts
/// (`../webhook`, `../certmanager`) in commented-out lines; built alone
/// they fail (controller-gen's `manifests.yaml` is not committed). Such a
/// part is a notice; the same folder that nothing names, not even in a
/// comment, is broken input.
#[test]
fn a_scaffold_part_left_commented_out_is_a_notice_not_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "config/default/kustomization.yaml",
        "namespace: system\nresources:\n- ../manager\n# [WEBHOOK] uncomment to enable the webhook\n#- ../webhook\n",
    );
    write(
        d,
        "config/manager/kustomization.yaml",
        "resources: [cm.yaml]\n",
    );
    write(
        d,
        "config/manager/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: manager-config}\n",
    );
    write(
        d,
        "config/webhook/kustomization.yaml",
        "resources: [manifests.yaml, service.yaml]\n",
    );
    write(
        d,
        "config/webhook/service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: webhook-service}\nspec:\n  ports: [{port: 443}]\n",
    );
    let out = check_in(d, &path_with_kubectl(), &["-o", "json", "config"], None);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(report["summary"]["objects"], 1, "{report}");
    let notices = report["notices"].to_string();
    assert!(
        notices
            .contains("config/default/kustomization.yaml:5 lists it only in a commented-out entry"),
        "{notices}"
    );

    // Uncommented nowhere and named nowhere: really broken.
    write(
        d,
        "config/default/kustomization.yaml",
        "namespace: system\nresources:\n- ../manager\n",
    );
    let out = check_in(d, &path_with_kubectl(), &["-o", "json", "config"], None);
    assert_eq!(out.status.code(), Some(2), "{}", json(&out));
}

/// A chart whose `Chart.yaml` names a dependency its `charts/` folder
/// lacks: helm refuses it (`helm dependency build` would fetch it). Its
/// own objects are checked without the dependency, with a notice naming
/// the fix; a reference the dependency may satisfy is not reported. When
/// its templates use the dependency it cannot render at all: a notice.
#[test]
fn a_chart_without_its_dependencies_is_checked_without_them() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "shop/Chart.yaml",
        "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n- name: redis\n  version: 1.0.0\n  repository: https://charts.example.com\n",
    );
    write(
        d,
        "shop/templates/app.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: shop}\nspec:\n  selector: {matchLabels: {app: shop}}\n  template:\n    metadata: {labels: {app: shop}}\n    spec:\n      containers:\n      - name: shop\n        image: shop:latest\n        envFrom: [{configMapRef: {name: redis-config}}]\n        resources: {limits: {memory: 1Gi}, requests: {cpu: 1}}\n",
    );
    let out = check_in(d, &path_with_helm(), &["-o", "json", "."], None);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    let found = findings(&report);
    assert!(
        found
            .iter()
            .any(|f| f.starts_with("disallow-latest-tag Deny Deployment default/shop")),
        "{found:?}"
    );
    assert!(
        found.iter().all(|f| !f.starts_with("pod-references-exist")),
        "{found:?}"
    );
    let notices = report["notices"].to_string();
    assert!(
        notices.contains("rendered without its dependencies redis"),
        "{notices}"
    );
    assert!(notices.contains("helm dependency build"), "{notices}");

    // A template that needs the dependency: nothing renders.
    write(
        d,
        "shop/templates/cache.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ include \"redis.fullname\" . }}}\n",
    );
    let notices = notices_beside_a_plain_file(d);
    assert!(notices.contains("are not vendored"), "{notices}");
    assert!(notices.contains("helm dependency build"), "{notices}");
}
