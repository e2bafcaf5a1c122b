//! `interlock serve` against a real kube-apiserver: the webhook registered by
//! URL on 127.0.0.1, kubectl as the tenant.

use crate::support;

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::sync::OnceLock;
use support::cluster::TestCluster;
use support::webhook::{apply, ingress, namespace, Webhook};

/// One webhook for this test binary, on the shared cluster, with
/// pod-references-exist beside the support's policies.
fn webhook() -> &'static Webhook {
    static HOOK: OnceLock<Webhook> = OnceLock::new();
    HOOK.get_or_init(|| {
        let policy = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("policies/pod-references-exist/policy.yaml");
        // The test cluster's kube-controller-manager (garbage collector)
        // runs with the admin kubeconfig: exempt as the break-glass user,
        // as an installation would exempt its own control plane.
        support::webhook::start(
            TestCluster::shared(),
            &[
                "-p",
                &policy.display().to_string(),
                "--boundary-exempt",
                "admin",
            ],
        )
    })
}

/// Fails with kubectl's stderr unless the command succeeded.
fn assert_admitted(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pod(ns: &str, name: &str, config_map: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "app", "image": "registry.example.com/app:1.0.0"}],
                 "volumes": [{"name": "settings", "configMap": {"name": config_map}}]}})
}

/// A policy's lookups reach the kinds it names: `serve` watches ConfigMaps
/// because pod-references-exist looks them up by a constant kind. (When the
/// policy computed the kind, nothing watched ConfigMaps and this Pod was
/// reported as mounting a ConfigMap that does not exist.)
#[test]
fn a_pod_may_mount_a_config_map_that_exists() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    webhook();
    let ns = namespace(cluster, "mounts");
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": ns}, "data": {"mode": "fast"}});
    let out = apply(cluster, &config, &[]);
    assert_admitted(&out, "the ConfigMap was refused");
    let out = apply(cluster, &pod(&ns, "reader", "settings"), &[]);
    assert_admitted(&out, "a Pod mounting an existing ConfigMap was refused");
    // A missing ConfigMap may be created later (`kubectl apply -f DIR`
    // applies in name order): admission warns and lets the Pod in.
    let out = apply(cluster, &pod(&ns, "lost", "no-such-settings"), &[]);
    assert_admitted(&out, "a Pod mounting a missing ConfigMap was refused");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Warning:"), "{err}");
    assert!(err.contains("pod-references-exist"), "{err}");
    assert!(err.contains("ConfigMap no-such-settings"), "{err}");
}

#[test]
fn a_duplicate_host_is_refused_with_our_message_and_no_other_tenant_names() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    webhook();
    let a = namespace(cluster, "tenant-a");
    let b = namespace(cluster, "tenant-b");
    let first = apply(cluster, &ingress(&a, "shop", "shop.e2e.example"), &[]);
    assert_admitted(&first, "the first Ingress for the host was refused");
    let second = apply(cluster, &ingress(&b, "copycat", "shop.e2e.example"), &[]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "the duplicate host was admitted");
    assert!(err.contains("unique-ingress-host"), "{err}");
    assert!(err.contains("shop.e2e.example"), "{err}");
    assert!(
        !err.contains(&a),
        "the message leaks the other tenant's namespace: {err}"
    );
    // The owner can still update its own Ingress.
    let mut update = ingress(&a, "shop", "shop.e2e.example");
    update["metadata"]["labels"] = json!({"tier": "front"});
    let out = apply(cluster, &update, &[]);
    assert_admitted(&out, "an UPDATE was blocked by its own old version");
    // A distinct host passes.
    let out = apply(cluster, &ingress(&b, "own", "blog.e2e.example"), &[]);
    assert_admitted(&out, "an Ingress with a distinct host was refused");
}

#[test]
fn server_dry_run_is_evaluated_and_leaves_nothing_behind() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    webhook();
    let ns = namespace(cluster, "dry-run");
    let out = apply(
        cluster,
        &ingress(&ns, "trial", "dry.e2e.example"),
        &["--dry-run=server"],
    );
    assert_admitted(&out, "the dry run was refused");
    let get = cluster.kubectl(&["-n", &ns, "get", "ingress", "trial"]);
    assert!(!get.status.success(), "dry run stored the object");
    // Nothing was recorded either: the host is still free for a real create.
    let out = apply(cluster, &ingress(&ns, "real", "dry.e2e.example"), &[]);
    assert_admitted(&out, "a real create after the dry run was refused");
}

#[test]
fn a_mutation_is_visible_in_the_stored_object() {
    let cluster = TestCluster::shared();
    webhook();
    let ns = namespace(cluster, "mutate");
    let out = cluster.kubectl(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "settings",
        "--from-literal=a=b",
    ]);
    assert_admitted(&out, "the ConfigMap create was refused");
    let out = cluster.kubectl(&[
        "-n",
        &ns,
        "get",
        "configmap",
        "settings",
        "-o",
        "jsonpath={.metadata.labels.interlock\\.dev/checked}",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "true");
}

#[test]
fn fifty_parallel_creates_of_one_host_admit_exactly_one() {
    let cluster = TestCluster::shared();
    webhook();
    let ns = namespace(cluster, "race");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let admitted = rt.block_on(async {
        let api: Api<Ingress> = Api::namespaced(cluster.client(), &ns);
        let creates = (0..50).map(|i| {
            let api = api.clone();
            let obj: Ingress =
                serde_json::from_value(ingress(&ns, &format!("racer-{i}"), "race.e2e.example"))
                    .unwrap();
            async move { api.create(&PostParams::default(), &obj).await }
        });
        futures::future::join_all(creates).await
    });
    let ok = admitted.iter().filter(|r| r.is_ok()).count();
    let refused_by_us = admitted
        .iter()
        .filter(|r| matches!(r, Err(e) if e.to_string().contains("unique-ingress-host")))
        .count();
    assert_eq!(ok, 1, "admitted {ok} of 50 Ingresses claiming one host");
    assert_eq!(
        refused_by_us, 49,
        "every other create is refused by the policy"
    );
}

/// Where the bundled library's webhook sees writes: every kind its
/// policies match, in namespaces labelled for it (apart from the other
/// webhook of this binary).
const INSTALL_SCOPE: support::webhook::Scope = support::webhook::Scope {
    config: "interlock-install-test",
    label: "interlock-install-test",
    groups: &[
        "",
        "apps",
        "batch",
        "policy",
        "autoscaling",
        "networking.k8s.io",
    ],
    resources: &[
        "pods",
        "replicationcontrollers",
        "podtemplates",
        "services",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "deployments",
        "statefulsets",
        "daemonsets",
        "replicasets",
        "jobs",
        "cronjobs",
        "poddisruptionbudgets",
        "horizontalpodautoscalers",
        "ingresses",
        "networkpolicies",
    ],
};

/// A multi-file install with the bundled defaults, as `kubectl apply -f
/// DIR` makes it: files in name order (an HPA before its Deployment, a Job
/// before its ServiceAccount), Secrets that an install Job makes, a
/// PodDisruptionBudget for pods an operator will make. Kubernetes accepts
/// all of it and converges; so must the webhook: nothing is denied, and
/// the references that do not exist yet are warnings.
/// `interlock serve` with the bundled library (every policies/*/policy.yaml),
/// registered for [`INSTALL_SCOPE`]; one per test process.
fn install_hook(cluster: &'static TestCluster) -> &'static Webhook {
    static HOOK: OnceLock<Webhook> = OnceLock::new();
    HOOK.get_or_init(|| {
        let policies: Vec<String> =
            std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
                .expect("policies/")
                .flatten()
                .map(|d| d.path().join("policy.yaml"))
                .filter(|p| p.is_file())
                .map(|p| p.display().to_string())
                .collect();
        let mut args: Vec<&str> = Vec::new();
        for p in &policies {
            args.extend(["-p", p.as_str()]);
        }
        support::webhook::start_scoped(cluster, &INSTALL_SCOPE, &args)
    })
}

/// Writes the namespaced objects of tests/corpus/`app` into `dir`, one file
/// per corpus file (same names, so `kubectl apply -f DIR` keeps their
/// order), all in namespace `ns`. Cluster-scoped objects and custom
/// resources are left out: the test cluster is shared and has no CRDs.
fn install_files(app: &str, ns: &str, dir: &std::path::Path) {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(app);
    for entry in std::fs::read_dir(&corpus).expect("the corpus").flatten() {
        let loaded = interlock::manifest::load_paths(&[entry.path()], &Default::default());
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        let items: Vec<serde_json::Value> = loaded
            .documents
            .into_iter()
            .map(|d| d.value)
            .filter(|v| {
                let (group, kind) = interlock::policy::resources::group_kind(v);
                interlock::policy::resources::is_namespaced(group, kind) == Some(true)
            })
            .map(|mut v| {
                v["metadata"]["namespace"] = json!(ns);
                v
            })
            .collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(dir.join(entry.file_name()), list.to_string()).expect("write");
    }
}

#[test]
fn a_multi_file_install_is_admitted_with_warnings_for_what_comes_later() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let hook = install_hook(cluster);
    let ns = support::webhook::namespace_labelled(cluster, "install", INSTALL_SCOPE.label);
    let dir = tempfile::tempdir().expect("tempdir");
    install_files("argocd", &ns, dir.path());
    // Before the Deployment it scales, in name order.
    std::fs::write(
        dir.path().join("00-autoscaling.yaml"),
        format!(
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {{name: argocd-server, namespace: {ns}}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: argocd-server}}\n  minReplicas: 1\n  maxReplicas: 3\n"
        ),
    )
    .expect("write");
    // Pods that an operator will make.
    std::fs::write(
        dir.path().join("00-budget.yaml"),
        format!(
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: redis-ha, namespace: {ns}}}\nspec:\n  maxUnavailable: 1\n  selector: {{matchLabels: {{app.kubernetes.io/name: redis-ha-operated}}}}\n"
        ),
    )
    .expect("write");
    let out = cluster.kubectl(&["apply", "-f", dir.path().to_str().expect("utf-8 path")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the install was refused:\n{err}\n{}",
        hook.log()
    );
    assert!(!err.contains("denied"), "{err}");
    for expected in [
        "hpa-target-exists",
        "pdb-selects-workload",
        "pod-references-exist",
        "Secret argocd-redis",
        "ServiceAccount argocd-redis-secret-init",
    ] {
        assert!(
            err.contains(expected),
            "no warning mentions {expected}:\n{err}"
        );
    }
    let listed = cluster.kubectl(&["-n", &ns, "get", "deployments,statefulsets", "-o", "name"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(listed.lines().count(), 4, "{listed}");
}

/// The other official-install-shaped corpora through the bundled library:
/// kube-apiserver takes every object except the ones the library is right
/// to refuse (node-exporter's host access in a namespace that is not
/// exempt, the demo load generator's `busybox:latest`); what may come later
/// (ingress-nginx's Job-made webhook Secret) is a warning.
#[test]
fn official_install_shapes_are_refused_only_where_the_library_is_right() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let hook = install_hook(cluster);
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: [Case; 3] = [
        (
            "ingress-nginx",
            &[][..],
            &["Secret ingress-nginx-admission"][..],
        ),
        (
            "kube-prometheus",
            &[("node-exporter.yaml", "pod-security-baseline")][..],
            &[][..],
        ),
        (
            "microservices-demo",
            &[("loadgenerator.yaml", "disallow-latest-tag")][..],
            &[][..],
        ),
    ];
    for (app, denials, warnings) in cases {
        let ns = support::webhook::namespace_labelled(cluster, "install", INSTALL_SCOPE.label);
        let dir = tempfile::tempdir().expect("tempdir");
        install_files(app, &ns, dir.path());
        let out = cluster.kubectl(&["apply", "-f", dir.path().to_str().expect("utf-8 path")]);
        let err = String::from_utf8_lossy(&out.stderr);
        let refused: Vec<&str> = err.lines().filter(|l| l.contains("denied")).collect();
        assert_eq!(
            refused.len(),
            denials.len(),
            "{app}:\n{err}\n{}",
            hook.log()
        );
        for (line, (file, policy)) in refused.iter().zip(denials) {
            assert!(
                line.contains(file) && line.contains(policy),
                "{app}: {line}"
            );
        }
        assert_eq!(out.status.success(), denials.is_empty(), "{app}:\n{err}");
        for want in warnings {
            assert!(
                err.contains(want),
                "{app}: no warning mentions {want}:\n{err}"
            );
        }
    }
}

/// The bundled ValidatingAdmissionPolicies are plain kube-apiserver
/// policies: kube-apiserver itself accepts them and, on the pod-template
/// kinds Pod Security admission covers (a ReplicationController here),
/// denies what Interlock denies. Their bindings are narrowed to one
/// labelled namespace so the rest of this binary's cluster is untouched.
#[test]
fn kube_apiserver_runs_the_bundled_policies_on_pod_template_kinds() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    const LABEL: &str = "interlock-bundled-vap-test";
    let mut items = Vec::new();
    for name in [
        "pod-security-baseline",
        "disallow-latest-tag",
        "require-resource-limits",
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("policies")
            .join(name)
            .join("policy.yaml");
        let loaded = interlock::manifest::load_paths(&[path], &Default::default());
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        for d in loaded.documents {
            let mut v = d.value;
            if v["kind"] == "ValidatingAdmissionPolicyBinding" {
                v["spec"]["matchResources"] =
                    json!({"namespaceSelector": {"matchLabels": {LABEL: "true"}}});
            }
            items.push(v);
        }
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &list.to_string());
    assert_admitted(&out, "kube-apiserver refused the bundled policies");
    let ns = support::webhook::namespace_labelled(cluster, "vap", LABEL);
    let rc = |spec: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": "legacy", "namespace": ns},
            "spec": {"replicas": 0, "selector": {"app": "legacy"},
                     "template": {"metadata": {"labels": {"app": "legacy"}}, "spec": spec}}})
    };
    // kube-apiserver answers a denial with the first denying policy only:
    // one object per policy. Each policy takes effect a moment after it is
    // created, independently of the others: each is polled for.
    let host_pid =
        rc(json!({"hostPID": true, "containers": [{"name": "app", "image": "nginx:1.27.3"}]}));
    let latest = rc(json!({"containers": [{"name": "app", "image": "nginx:latest"}]}));
    let ok = rc(json!({"containers": [{"name": "app", "image": "nginx:1.27.3"}]}));
    let answer =
        |object: &serde_json::Value, until: &dyn Fn(bool, &str) -> bool| -> (bool, String) {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let out = apply(cluster, object, &["--dry-run=server"]);
                let err = String::from_utf8_lossy(&out.stderr).to_string();
                if until(out.status.success(), &err) || std::time::Instant::now() > deadline {
                    return (out.status.success(), err);
                }
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        };
    let (admitted, err) = answer(&host_pid, &|ok, err| {
        !ok && err.contains("pod-security-baseline")
    });
    assert!(
        !admitted && err.contains("shares host namespaces (hostPID)"),
        "{err}"
    );
    let (admitted, err) = answer(&latest, &|ok, err| {
        !ok && err.contains("disallow-latest-tag")
    });
    assert!(!admitted && err.contains("app (nginx:latest)"), "{err}");
    // Compliant: admitted, with the resources warning.
    let (admitted, err) = answer(&ok, &|ok, err| {
        ok && err.contains("require-resource-limits")
    });
    assert!(
        admitted,
        "a compliant ReplicationController was refused: {err}"
    );
    assert!(
        err.contains("containers without resource settings"),
        "{err}"
    );
}

/// Runs `interlock ARGS` against `cluster`: (exit code, stdout, stderr).
fn interlock(cluster: &TestCluster, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(args)
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("run interlock");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `unstick -n NS -o json` with no age threshold: its `stuck` entries.
fn stuck_in(cluster: &TestCluster, ns: &str) -> (i32, Vec<serde_json::Value>) {
    let (code, out, err) = interlock(
        cluster,
        &["unstick", "-n", ns, "--older-than", "0s", "-o", "json"],
    );
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    (code, v["stuck"].as_array().cloned().unwrap_or_default())
}

#[test]
fn unstick_lists_a_stuck_config_map_with_age_and_owner_and_clears_it_guarded() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("unstick");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": ns, "finalizers": ["acme.example/cleanup"]}});
    // Written by a manager of its own: unstick names it as the remover.
    let out = apply(
        cluster,
        &cm,
        &["--server-side", "--field-manager", "acme-operator"],
    );
    assert_admitted(&out, "the ConfigMap");
    let out = cluster.kubectl(&["delete", "configmap", "held", "-n", &ns, "--wait=false"]);
    assert_admitted(&out, "delete");
    std::thread::sleep(std::time::Duration::from_secs(2));

    let (code, stuck) = stuck_in(cluster, &ns);
    assert_eq!(code, 1, "stuck objects exit 1: {stuck:?}");
    let held = stuck
        .iter()
        .find(|s| s["kind"] == "ConfigMap" && s["name"] == "held")
        .unwrap_or_else(|| panic!("not listed: {stuck:?}"));
    let age = held["deletingForSeconds"].as_i64().unwrap_or(-1);
    assert!((2..120).contains(&age), "age {age}");
    let f = &held["finalizers"][0];
    assert_eq!(f["name"], "acme.example/cleanup");
    assert_eq!(f["remover"]["controller"], "acme-operator", "{held}");
    assert_eq!(f["remover"]["source"], "managedFields");
    let listed_rv = held["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();

    // A change after the listing: clearing for the listed version fails and
    // leaves the finalizer in place.
    let out = cluster.kubectl(&["label", "configmap", "held", "-n", &ns, "touched=yes"]);
    assert_admitted(&out, "label");
    let target = "configmap/held";
    let (code, _, err) = interlock(
        cluster,
        &[
            "unstick",
            "--clear",
            "acme.example/cleanup",
            "--yes",
            target,
            "-n",
            &ns,
            "--resource-version",
            &listed_rv,
        ],
    );
    assert_eq!(code, 3, "a stale resourceVersion must be refused: {err}");
    assert!(err.contains("changed since"), "{err}");
    let out = cluster.kubectl(&["get", "configmap", "held", "-n", &ns, "-o", "json"]);
    assert_admitted(&out, "still there after the refused clear");

    // Without --yes nothing is written.
    let (code, said, _) = interlock(
        cluster,
        &[
            "unstick",
            "--clear",
            "acme.example/cleanup",
            target,
            "-n",
            &ns,
        ],
    );
    assert_eq!(code, 2);
    assert!(said.contains("not released"), "{said}");
    assert!(cluster
        .kubectl(&["get", "configmap", "held", "-n", &ns])
        .status
        .success());

    let (code, said, err) = interlock(
        cluster,
        &[
            "unstick",
            "--clear",
            "acme.example/cleanup",
            "--yes",
            target,
            "-n",
            &ns,
        ],
    );
    assert_eq!(code, 0, "{said} {err}");
    let out = cluster.kubectl(&["get", "configmap", "held", "-n", &ns]);
    assert!(
        !out.status.success(),
        "the cleared ConfigMap is still there"
    );
    let (code, stuck) = stuck_in(cluster, &ns);
    assert_eq!((code, stuck.len()), (0, 0), "{stuck:?}");
}

/// Installs the ResourceGroup CRD (once per test binary).
fn resource_group_crd(cluster: &TestCluster) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| support::controller::install_resource_group_crd(cluster));
}

#[test]
fn unstick_reports_a_resource_group_whose_controller_is_not_running() {
    // A cluster of its own: the controller tests run a controller on the
    // shared one, which would remove the finalizer this test needs stuck.
    let own = TestCluster::start();
    let cluster = &own;
    let _logs = cluster.logs_on_panic();
    support::controller::install_resource_group_crd(cluster);
    let ns = cluster.create_namespace("unstick-rg");
    let rg = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": "app", "namespace": ns, "finalizers": ["interlock.dev/members"]},
        "spec": {"serviceAccountName": "deployer", "resources": []}});
    assert_admitted(&apply(cluster, &rg, &[]), "the group");
    assert_admitted(
        &cluster.kubectl(&["delete", "resourcegroup", "app", "-n", &ns, "--wait=false"]),
        "delete",
    );
    let (code, stuck) = stuck_in(cluster, &ns);
    assert_eq!(code, 1);
    let g = stuck
        .iter()
        .find(|s| s["kind"] == "ResourceGroup")
        .unwrap_or_else(|| panic!("not listed: {stuck:?}"));
    let f = &g["finalizers"][0];
    assert_eq!(f["remover"]["controller"], "interlock controller");
    let status = f["controller_status"].as_str().unwrap_or_default();
    assert!(status.starts_with("controller not running"), "{status}");
    let (code, _, err) = interlock(
        cluster,
        &[
            "unstick",
            "--clear",
            "interlock.dev/members",
            "--yes",
            "resourcegroup/app",
            "-n",
            &ns,
        ],
    );
    assert_eq!(code, 0, "{err}");
}

/// Registers the test webhook for UPDATE and DELETE of ConfigMaps that
/// carry the ApplySet part-of label, as manifests/base does for members
/// (the shared registration sends only CREATE and UPDATE).
fn register_member_writes(cluster: &TestCluster, hook: &Webhook) {
    use base64::Engine as _;
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let ca = std::fs::read_to_string(hook.dir.path().join("ca.crt")).expect("ca.crt");
        let ca = base64::engine::general_purpose::STANDARD.encode(ca);
        let config = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "interlock-test-members"},
            "webhooks": [{
                "name": "members.interlock.dev",
                "clientConfig": {"url": format!("https://127.0.0.1:{}/validate", hook.port),
                                 "caBundle": ca},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                           "operations": ["UPDATE", "DELETE"], "resources": ["configmaps"]}],
                "namespaceSelector": {"matchLabels": {support::webhook::LABEL: "true"}},
                "objectSelector": {"matchExpressions": [
                    {"key": "applyset.kubernetes.io/part-of", "operator": "Exists"}]},
                "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail", "timeoutSeconds": 10}]});
        assert_admitted(
            &cluster.kubectl_stdin(&["apply", "-f", "-"], &config.to_string()),
            "register the member webhook",
        );
    });
}

/// Retries `f` until it is true (registration and the GC take a moment).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

#[test]
fn a_member_is_written_only_by_the_controller_and_removed_by_the_group_cascade() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let hook = webhook();
    resource_group_crd(cluster);
    register_member_writes(cluster, hook);
    let ns = namespace(cluster, "boundary");
    // The group's ServiceAccount, allowed to write ConfigMaps, as the
    // controller impersonates it.
    assert_admitted(
        &cluster.kubectl(&["create", "serviceaccount", "deployer", "-n", &ns]),
        "ServiceAccount",
    );
    let sa = format!("system:serviceaccount:{ns}:deployer");
    // (A Role of its own: the aggregated `edit` ClusterRole needs a
    // controller the test cluster does not run.)
    assert_admitted(
        &cluster.kubectl(&[
            "create",
            "role",
            "deployer",
            "--verb=get,list,create,update,patch,delete",
            "--resource=configmaps",
            "-n",
            &ns,
        ]),
        "Role",
    );
    assert_admitted(
        &cluster.kubectl(&[
            "create",
            "rolebinding",
            "deployer",
            "--role=deployer",
            "-n",
            &ns,
            &format!("--serviceaccount={ns}:deployer"),
        ]),
        "RoleBinding",
    );
    // The tenant, alice, may write ConfigMaps as far as RBAC goes: only
    // the boundary stands in her way.
    assert_admitted(
        &cluster.kubectl(&[
            "create",
            "rolebinding",
            "alice",
            "--role=deployer",
            "--user=alice",
            "-n",
            &ns,
        ]),
        "alice's RoleBinding",
    );
    let rg = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": "app", "namespace": ns},
        "spec": {"serviceAccountName": "deployer", "resources": []}});
    assert_admitted(&apply(cluster, &rg, &[]), "the group");
    let out = cluster.kubectl(&[
        "get",
        "resourcegroup",
        "app",
        "-n",
        &ns,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let uid = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!uid.is_empty(), "no uid");
    let member = |mode: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": ns,
                "labels": {"applyset.kubernetes.io/part-of": "applyset-test-v1"},
                "ownerReferences": [{"apiVersion": "interlock.dev/v1alpha1",
                    "kind": "ResourceGroup", "name": "app", "uid": uid, "controller": true}]},
            "data": {"mode": mode}})
    };
    // The controller's write: server-side apply as the group's
    // ServiceAccount with field manager `interlock`; create, then update.
    let controller_apply = |mode: &str| {
        apply(
            cluster,
            &member(mode),
            &[
                "--server-side",
                "--force-conflicts",
                "--field-manager",
                "interlock",
                "--as",
                &sa,
                "--as-group",
                "system:serviceaccounts",
                "--as-group",
                &format!("system:serviceaccounts:{ns}"),
            ],
        )
    };
    assert_admitted(&controller_apply("fast"), "the controller's create");
    // The member registration and alice's RoleBinding may still be
    // propagating: the first boundary refusal shows both are in force.
    let mut refusal = String::new();
    eventually("the member webhook refuses a patch", || {
        let out = cluster.kubectl(&[
            "patch",
            "configmap",
            "settings",
            "-n",
            &ns,
            "-p",
            r#"{"data":{"mode":"slow"}}"#,
            "--as",
            "alice",
        ]);
        refusal = String::from_utf8_lossy(&out.stderr).into_owned();
        // (RBAC for alice may not be in force yet either.)
        !out.status.success() && refusal.contains("ownership boundary")
    });
    assert!(refusal.contains("ResourceGroup 'app'"), "{refusal}");
    assert!(
        refusal.contains(&format!("kubectl get resourcegroup app -n {ns} -o yaml")),
        "{refusal}"
    );
    assert_admitted(&controller_apply("faster"), "the controller's update");

    // kubectl edit, as a tenant would (the editor changes the data).
    let out = std::process::Command::new(cluster.bin("kubectl"))
        .args(["edit", "configmap", "settings", "-n", &ns, "--as", "alice"])
        .env("KUBECONFIG", cluster.kubeconfig())
        .env("KUBE_EDITOR", "sed -i s/faster/edited/")
        .output()
        .expect("kubectl edit");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "kubectl edit of a member was admitted"
    );
    assert!(err.contains("ownership boundary"), "{err}");
    // Leaving the group by dropping the label is a refused edit too.
    let out = cluster.kubectl(&[
        "label",
        "configmap",
        "settings",
        "-n",
        &ns,
        "applyset.kubernetes.io/part-of-",
        "--as",
        "alice",
    ]);
    assert!(!out.status.success(), "the label removal was admitted");
    let out = cluster.kubectl(&[
        "delete",
        "configmap",
        "settings",
        "-n",
        &ns,
        "--as",
        "alice",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the delete of a member was admitted");
    assert!(err.contains("spec.resources"), "{err}");
    // A new object claiming membership is refused.
    let mut imposter = member("x");
    imposter["metadata"]["name"] = json!("imposter");
    let out = apply(cluster, &imposter, &["--as", "alice"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the membership claim was admitted");
    assert!(err.contains("claims to be a member"), "{err}");
    let out = cluster.kubectl(&["get", "configmap", "settings", "-n", &ns, "-o", "json"]);
    let cm: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the member");
    assert_eq!(cm["data"]["mode"], "faster");

    // The group's deletion cascades through the garbage collector, which
    // the boundary lets through.
    assert_admitted(
        &cluster.kubectl(&["delete", "resourcegroup", "app", "-n", &ns]),
        "delete the group",
    );
    eventually("the garbage collector deletes the member", || {
        !cluster
            .kubectl(&["get", "configmap", "settings", "-n", &ns])
            .status
            .success()
    });
}

#[test]
fn unstick_explains_a_namespace_stuck_on_its_contents() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let ns = cluster.create_namespace("unstick-ns");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": ns, "finalizers": ["acme.example/cleanup"]}});
    assert_admitted(&apply(cluster, &cm, &[]), "the ConfigMap");
    assert_admitted(
        &cluster.kubectl(&["delete", "namespace", &ns, "--wait=false"]),
        "delete the namespace",
    );
    // The namespace controller deletes what it can; the held ConfigMap stays.
    let (code, stuck) = stuck_in(cluster, &ns);
    assert_eq!(code, 1);
    let namespace = stuck
        .iter()
        .find(|s| s["kind"] == "Namespace")
        .unwrap_or_else(|| panic!("the namespace is not listed: {stuck:?}"));
    assert_eq!(
        namespace["finalizers"][0]["name"], "kubernetes",
        "{namespace}"
    );
    let blocked = namespace["blockedBy"].to_string();
    assert!(blocked.contains("ConfigMap"), "{blocked}");
    // Clearing the namespace finalizer itself is refused: clear the content.
    let (code, _, err) = interlock(
        cluster,
        &[
            "unstick",
            "--clear",
            "kubernetes",
            "--yes",
            &format!("namespace/{ns}"),
        ],
    );
    assert_eq!(code, 2, "{err}");
    eventually("the namespace controller deletes the ConfigMap", || {
        let out = cluster.kubectl(&[
            "get",
            "configmap",
            "held",
            "-n",
            &ns,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ]);
        !out.stdout.is_empty()
    });
    let (code, _, err) = interlock(
        cluster,
        &[
            "unstick",
            "--clear",
            "acme.example/cleanup",
            "--yes",
            "configmap/held",
            "-n",
            &ns,
        ],
    );
    assert_eq!(code, 0, "{err}");
    eventually("the namespace goes once its contents are gone", || {
        !cluster.kubectl(&["get", "namespace", &ns]).status.success()
    });
}

/// `interlock webhook-config` for `policies` (files under policies/ or
/// absolute paths), reaching the webhook at `url`, with `ca` as caBundle.
fn generated_config(policies: &[&str], url: &str, ca: &std::path::Path) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_interlock"));
    cmd.args(["webhook-config", "--url", url, "--ca-bundle"])
        .arg(ca);
    for p in policies {
        cmd.arg("-p").arg(root.join(p));
    }
    let out = cmd.output().expect("run interlock webhook-config");
    assert!(
        out.status.success(),
        "webhook-config: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 YAML")
}

fn deployment(ns: &str, name: &str, image: &str) -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]}}}})
}

fn plain_pod(ns: &str, name: &str, image: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "app", "image": image}]}})
}

/// `kubectl create -f -` of `obj` as `user` (with `groups`), or as the
/// admin when `user` is empty.
fn create_as(
    cluster: &TestCluster,
    user: &str,
    groups: &[&str],
    obj: &serde_json::Value,
) -> std::process::Output {
    let mut args: Vec<String> = vec!["create".into(), "-f".into(), "-".into()];
    if !user.is_empty() {
        args.push(format!("--as={user}"));
        args.extend(groups.iter().map(|g| format!("--as-group={g}")));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cluster.kubectl_stdin(&args, &obj.to_string())
}

/// The ReplicaSet controller as kube-controller-manager runs it with
/// `--use-service-account-credentials`.
const RS_CONTROLLER: &str = "system:serviceaccount:kube-system:replicaset-controller";
const RS_GROUPS: &[&str] = &[
    "system:serviceaccounts",
    "system:serviceaccounts:kube-system",
];

/// Issue 21: with the generated configuration installed and no webhook
/// behind it, only tenants' writes of kinds a policy can deny are refused;
/// the cluster's own controllers, Namespaces, Leases, kube-system and the
/// kinds that are only looked up or warned about go on. Then, with the
/// webhook reachable, a tenant cannot use those exemptions to skip a check.
///
/// A cluster of its own: an unreachable webhook for every namespace would
/// fail the other tests of this binary.
#[test]
fn a_down_webhook_blocks_only_tenant_writes_a_policy_can_deny() {
    let cluster = TestCluster::start();
    let _logs = cluster.logs_on_panic();
    let ok = |out: &std::process::Output, what: &str| assert_admitted(out, what);
    let refused_by_outage = |out: &std::process::Output, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{what} was admitted with the webhook down"
        );
        assert!(
            err.contains("failed calling webhook") && err.contains("validate.interlock.dev"),
            "{what}: not refused by the unreachable webhook: {err}"
        );
    };

    // Down: a port nobody listens on (bound, then released).
    let dir = tempfile::tempdir().unwrap();
    let certs =
        interlock::certs::generate(&interlock::certs::CertsOptions::new(["127.0.0.1"])).unwrap();
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, &certs.ca_cert_pem).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The bundled library, as manifests/base installs it.
    let config = generated_config(&[], &format!("https://127.0.0.1:{port}"), &ca);
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &config);
    ok(
        &out,
        "the generated configuration was refused by kube-apiserver",
    );

    // A tenant's onboarding: its Namespace.
    let ns = cluster.create_namespace("tenant");
    let good = "registry.example.com/app:1.0.0";
    let out = apply(&cluster, &deployment(&ns, "web", good), &[]);
    refused_by_outage(&out, "a tenant's Deployment");
    let out = create_as(&cluster, "", &[], &plain_pod(&ns, "by-hand", good));
    refused_by_outage(&out, "a tenant's Pod");
    // Healing: the ReplicaSet controller recreates a Pod.
    let out = create_as(
        &cluster,
        RS_CONTROLLER,
        RS_GROUPS,
        &plain_pod(&ns, "web-abcde", good),
    );
    ok(
        &out,
        "the ReplicaSet controller's Pod was blocked by the down webhook",
    );
    // kube-system is never sent, whoever writes.
    let out = apply(&cluster, &deployment("kube-system", "dns", good), &[]);
    ok(
        &out,
        "a kube-system Deployment was blocked by the down webhook",
    );
    // Only looked up by policies (failurePolicy Ignore): goes on.
    let out = cluster.kubectl(&["-n", &ns, "create", "configmap", "settings"]);
    ok(&out, "a ConfigMap was blocked by the down webhook");
    // Leases (leader election, heartbeats) never depend on the webhook.
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader", "namespace": ns}, "spec": {"holderIdentity": "a"}});
    let out = create_as(&cluster, "", &[], &lease);
    ok(&out, "a Lease was blocked by the down webhook");
    let out = cluster.kubectl(&["label", "namespace", &ns, "team=blue"]);
    ok(&out, "a Namespace update was blocked by the down webhook");

    // Up: the webhook with disallow-latest-tag (a Deny) and the support's
    // mutation, and the configuration generated from the same policies
    // instead of the support's test-scoped one.
    let policy = "policies/disallow-latest-tag/policy.yaml";
    let hook = support::webhook::start(&cluster, &["-p", &root_path(policy)]);
    let mutation = hook.dir.path().join("mutate.yaml").display().to_string();
    let config = generated_config(
        &[
            policy,
            &mutation,
            "policies/unique-ingress-host/policy.yaml",
        ],
        &format!("https://127.0.0.1:{}", hook.port),
        &hook.dir.path().join("ca.crt"),
    );
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let out = cluster.kubectl(&["delete", kind, support::webhook::TEST_SCOPE.config]);
        ok(&out, "the test-scoped configuration could not be deleted");
    }
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &config);
    ok(
        &out,
        "the generated configuration was refused by kube-apiserver",
    );
    let latest = "registry.example.com/app:latest";
    // The configuration takes effect within a second or so.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut i = 0;
    loop {
        i += 1;
        let out = create_as(
            &cluster,
            "",
            &[],
            &plain_pod(&ns, &format!("probe-{i}"), latest),
        );
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        if !out.status.success() && err.contains("disallow-latest-tag") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the reachable webhook never refused a :latest Pod: {err}\n{}",
            hook.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let out = apply(&cluster, &deployment(&ns, "web", good), &[]);
    ok(&out, "a good Deployment was refused with the webhook up");
    let out = apply(&cluster, &deployment(&ns, "bad", latest), &[]);
    assert!(!out.status.success(), "a :latest Deployment was admitted");

    // Tenants with the rights to create Pods here, under names that look
    // like the exemptions: a ServiceAccount of the tenant's own called
    // replicaset-controller, and an ordinary user.
    let role = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "writer", "namespace": ns},
         "rules": [{"apiGroups": ["", "apps"], "resources": ["pods", "deployments"],
                    "verbs": ["create", "get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "writer", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writer"},
         "subjects": [
            {"kind": "ServiceAccount", "name": "replicaset-controller", "namespace": ns},
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}]}]});
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &role.to_string());
    ok(&out, "the tenant's Role");
    let own_sa = format!("system:serviceaccount:{ns}:replicaset-controller");
    let own_groups = [
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{ns}"),
    ];
    let own_groups: Vec<&str> = own_groups.iter().map(String::as_str).collect();
    for (user, groups, name) in [
        (own_sa.as_str(), own_groups.as_slice(), "lookalike"),
        ("mallory", &["system:authenticated"][..], "mallory"),
    ] {
        let out = create_as(&cluster, user, groups, &plain_pod(&ns, name, latest));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("disallow-latest-tag"),
            "{user} skipped the check: {err}"
        );
        let out = create_as(&cluster, user, groups, &deployment(&ns, name, latest));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("disallow-latest-tag"),
            "{user}'s Deployment skipped the check: {err}"
        );
    }
    // The real controller is exempt by design: its Pods come from a
    // template that was checked when the Deployment was written.
    let out = create_as(
        &cluster,
        RS_CONTROLLER,
        RS_GROUPS,
        &plain_pod(&ns, "web-fghij", latest),
    );
    ok(&out, "the ReplicaSet controller's Pod was checked");
}

fn root_path(rel: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .display()
        .to_string()
}

/// `kubectl auth can-i` as `user`: whether the answer is yes.
fn can_i(cluster: &TestCluster, user: &str, args: &[&str]) -> bool {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let as_user = format!("--as={user}");
    all.push(&as_user);
    let out = cluster.kubectl(&all);
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

/// manifests/base as shipped, on a real kube-apiserver with no pod running
/// (no kubelet here): the objects are accepted (server-side dry run, then a
/// real apply), the RBAC grants what the controller and the webhook need
/// and no more, and this is issue 21's outage exactly: the webhook's
/// Service has no endpoints, yet Namespaces and the cluster's controllers
/// still go on while a tenant's Deployment is refused.
#[test]
fn the_base_manifests_install_and_leave_a_small_blast_radius() {
    let cluster = TestCluster::start();
    let _logs = cluster.logs_on_panic();
    let base = root_path("manifests/base");
    // A dry run of namespaced objects needs their namespace to exist.
    let out = cluster.kubectl(&["create", "namespace", "interlock-system"]);
    assert_admitted(&out, "interlock-system");
    let out = cluster.kubectl(&["apply", "--dry-run=server", "-k", &base]);
    assert_admitted(&out, "server-side dry run of manifests/base");
    let out = cluster.kubectl(&["apply", "--server-side", "-k", &base]);
    assert_admitted(&out, "apply of manifests/base");

    let controller = "system:serviceaccount:interlock-system:interlock-controller";
    let yes = |args: &[&str]| {
        assert!(
            can_i(&cluster, controller, args),
            "controller cannot {args:?}"
        )
    };
    let no = |args: &[&str]| {
        assert!(
            !can_i(&cluster, controller, args),
            "controller can {args:?}"
        )
    };
    yes(&["impersonate", "serviceaccounts"]);
    yes(&[
        "patch",
        "resourcegroups.interlock.dev",
        "--subresource=status",
        "-A",
    ]);
    yes(&[
        "update",
        "resourcegroups.interlock.dev",
        "--subresource=finalizers",
        "-A",
    ]);
    yes(&["watch", "deployments.apps", "-A"]);
    yes(&["delete", "configmaps", "-n", "tenant"]);
    yes(&[
        "update",
        "leases.coordination.k8s.io/interlock-controller",
        "-n",
        "interlock-system",
    ]);
    // Never anyone's groups (system:masters is a group), never a write of
    // its own but deletion and release, never another Lease.
    no(&["impersonate", "groups/system:masters"]);
    no(&["impersonate", "users/admin"]);
    no(&["create", "deployments.apps", "-n", "tenant"]);
    no(&[
        "update",
        "leases.coordination.k8s.io/interlock-controller",
        "-n",
        "kube-system",
    ]);
    no(&[
        "update",
        "leases.coordination.k8s.io/other",
        "-n",
        "interlock-system",
    ]);
    let webhook = "system:serviceaccount:interlock-system:interlock";
    assert!(can_i(&cluster, webhook, &["watch", "pods", "-A"]));
    // Claims of unique keys: Leases of its own namespace, nowhere else.
    for verb in ["create", "get", "list", "update", "delete"] {
        assert!(can_i(
            &cluster,
            webhook,
            &[verb, "leases.coordination.k8s.io", "-n", "interlock-system"]
        ));
    }
    assert!(!can_i(
        &cluster,
        webhook,
        &["create", "leases.coordination.k8s.io", "-n", "tenant"]
    ));
    assert!(!can_i(
        &cluster,
        webhook,
        &["create", "pods", "-n", "tenant"]
    ));
    // InterlockExceptions: both watch them everywhere, neither writes one;
    // nobody is granted the editor role by the base.
    for sa in [webhook, controller] {
        for verb in ["list", "watch"] {
            assert!(can_i(
                &cluster,
                sa,
                &[verb, "interlockexceptions.interlock.dev", "-A"]
            ));
        }
        assert!(!can_i(
            &cluster,
            sa,
            &[
                "create",
                "interlockexceptions.interlock.dev",
                "-n",
                "tenant"
            ]
        ));
    }

    // No webhook pod: the Service has no endpoints.
    let ns = cluster.create_namespace("tenant");
    let good = "registry.example.com/app:1.0.0";
    let out = apply(&cluster, &deployment(&ns, "web", good), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("validate.interlock.dev"),
        "a tenant's Deployment was not refused by the down webhook: {err}"
    );
    let out = create_as(
        &cluster,
        RS_CONTROLLER,
        RS_GROUPS,
        &plain_pod(&ns, "web-abcde", good),
    );
    assert_admitted(&out, "the ReplicaSet controller's Pod");
    let out = cluster.kubectl(&["-n", &ns, "create", "configmap", "settings"]);
    assert_admitted(&out, "a ConfigMap");
}
