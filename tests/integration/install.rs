//! The install commands of docs/install.md against a real control plane of
//! the test's own (the shipped webhook configurations fail closed, so they
//! must never reach the shared cluster): `kubectl apply -k` of the
//! interlock-certs overlay, as shipped, is accepted object by object; the
//! same apply again changes nothing; with the webhook down, the documented
//! bypass lets a tenant's write through and the apply restores it; the
//! documented uninstall leaves nothing behind.
//!
//! Not shown here (no kubelet runs pods in the test cluster): the
//! Deployments becoming Ready, and admission through the shipped Service.

use std::time::{Duration, Instant};

use crate::chart::Manifests;
use crate::support::cluster::{Options, TestCluster};

fn ok(cluster: &TestCluster, args: &[&str]) -> String {
    let out = cluster.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// kubectl apply's lines ("kind/name created") that do not end in `word`.
fn lines_not(output: &str, word: &str) -> Vec<String> {
    output
        .lines()
        .filter(|l| !l.trim_end().ends_with(word))
        .map(str::to_string)
        .collect()
}

/// Every object of the overlay as "Kind namespace/name resourceVersion".
fn versions(cluster: &TestCluster, overlay: &str) -> Vec<String> {
    let columns = "custom-columns=KIND:.kind,NAMESPACE:.metadata.namespace,\
                   NAME:.metadata.name,VERSION:.metadata.resourceVersion";
    let out = ok(
        cluster,
        &["get", "-k", overlay, "--no-headers", "-o", columns],
    );
    let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn install_overlay_applies_reapplies_as_a_no_op_bypasses_and_uninstalls() {
    let cluster = TestCluster::start_with(Options {
        // The namespace controller: uninstall deletes interlock-system.
        controller_manager: true,
        ..Options::default()
    });
    let _logs = cluster.logs_on_panic();
    let m = Manifests::with_certs();
    let overlay = m.overlay("interlock-certs");
    let overlay = overlay.to_str().expect("a UTF-8 path");
    let objects = m.kustomize("interlock-certs").len();

    let first = ok(&cluster, &["apply", "-k", overlay]);
    assert_eq!(
        first.lines().count(),
        objects,
        "one line per object:\n{first}"
    );
    assert_eq!(
        lines_not(&first, " created"),
        Vec::<String>::new(),
        "{first}"
    );

    // Upgrade to the same version: nothing is written. kubectl still says
    // "configured" for a few objects (the Secret and the
    // ValidatingWebhookConfiguration: kustomize wraps base64 at 76 columns
    // and the API server returns it unwrapped; the PodDisruptionBudgets: a
    // selector is patched by replacement, so kubectl always sends it); the
    // API server, finding each object unchanged, writes nothing. So the
    // resourceVersions, not kubectl's words, are what must not move (an
    // empty `webhooks: []` did move them, on every apply).
    let before = versions(&cluster, overlay);
    assert_eq!(before.len(), objects, "{before:#?}");
    let again = ok(&cluster, &["apply", "-k", overlay]);
    assert_eq!(again.lines().count(), objects, "{again}");
    assert_eq!(
        versions(&cluster, overlay),
        before,
        "the second apply wrote:\n{again}"
    );

    // No webhook pod runs here, as when every replica is down: the strict
    // webhook refuses a tenant's Ingress, the documented bypass
    // (docs/webhook-down.md) lets it through, and applying the overlay
    // again restores failurePolicy Fail.
    ok(&cluster, &["create", "namespace", "tenant-a"]);
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\n\
                   metadata: {name: shop, namespace: tenant-a}\n\
                   spec: {rules: [{host: shop.example.com}]}\n";
    let refused = cluster.kubectl_stdin(&["create", "-f", "-"], ingress);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("validate.interlock.dev"),
        "the strict webhook, unreachable, refuses the write: {stderr}"
    );
    let hooks = "jsonpath={.webhooks[*].name}";
    let names = ok(
        &cluster,
        &[
            "get",
            "validatingwebhookconfiguration",
            "interlock",
            "-o",
            hooks,
        ],
    );
    assert!(names.starts_with("validate.interlock.dev "), "{names}");
    ok(
        &cluster,
        &[
            "patch",
            "validatingwebhookconfiguration",
            "interlock",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]"#,
        ],
    );
    let admitted = cluster.kubectl_stdin(&["create", "-f", "-"], ingress);
    assert!(
        admitted.status.success(),
        "bypassed: {}",
        String::from_utf8_lossy(&admitted.stderr)
    );
    ok(&cluster, &["apply", "-k", overlay]);
    let policy = "jsonpath={.webhooks[0].failurePolicy}";
    let restored = ok(
        &cluster,
        &[
            "get",
            "validatingwebhookconfiguration",
            "interlock",
            "-o",
            policy,
        ],
    );
    assert_eq!(restored, "Fail", "apply -k restores the strict webhook");
    ok(
        &cluster,
        &["delete", "namespace", "tenant-a", "--wait=false"],
    );

    // Uninstall, in the documented order: admission first, so nothing the
    // later deletes touch waits on a webhook that is going away.
    ok(
        &cluster,
        &[
            "delete",
            "validatingwebhookconfiguration/interlock",
            "mutatingwebhookconfiguration/interlock",
        ],
    );
    ok(
        &cluster,
        &["delete", "-k", overlay, "--ignore-not-found", "--wait=true"],
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // Every kind the overlay makes cluster-wide or in its namespace
        // carries the base's label.
        let left = ok(
            &cluster,
            &[
                "get",
                "namespaces,customresourcedefinitions,clusterroles,clusterrolebindings,\
                 validatingwebhookconfigurations,mutatingwebhookconfigurations",
                "-l",
                "app.kubernetes.io/part-of=interlock",
                "-o",
                "name",
            ],
        );
        if left.trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left after uninstall (120 s):\n{left}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
