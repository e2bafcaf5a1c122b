//! The authorizer library under `interlock serve`: `check()` asks the real
//! kube-apiserver (a SubjectAccessReview), so a policy's answer follows
//! RBAC for the request's user (impersonated with `kubectl --as`) and for a
//! service account; kube-apiserver's own ValidatingAdmissionPolicy with the
//! same expressions answers the same. Offline, `check` is an evaluation
//! error.

use crate::support;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::webhook::{kubeconfig_as, namespace_labelled, start_scoped_as, Scope, Webhook};

const WEBHOOK_SA: &str = "system:serviceaccount:interlock-system:interlock";

const SCOPE: Scope = Scope {
    config: "interlock-authz",
    label: "interlock-authz-test",
    groups: &[""],
    resources: &["configmaps"],
};

/// Who may create the test's ConfigMaps: a user who may read the
/// namespace's Secrets (for alice, the decision's reason names the
/// RoleBinding that allows her; the admin, of system:masters, is allowed
/// with no reason), naming in `runs-as` a ServiceAccount that may list them.
/// `NAME` is replaced (the webhook's copy and kube-apiserver's own).
const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: NAME
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}
  matchConditions:
    - name: authz-test-objects
      expression: "has(object.metadata.labels) && 'authz-test' in object.metadata.labels"
  variables:
    - name: secrets
      expression: "authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('get')"
  validations:
    - expression: "variables.secrets.allowed()"
      message: "only users who may read this namespace's Secrets may create these ConfigMaps"
    - expression: >-
        request.userInfo.username != 'alice' ||
        (variables.secrets.reason().startsWith('RBAC: allowed by RoleBinding "alice-reads/') &&
         !variables.secrets.errored() && variables.secrets.error() == '')
      message: "alice's decision does not read as RBAC's"
    - expression: >-
        !('runs-as' in object.metadata.labels) ||
        authorizer.serviceAccount(object.metadata.namespace, object.metadata.labels['runs-as'])
          .group('').resource('secrets').namespace(object.metadata.namespace).check('list').allowed()
      message: "the runs-as ServiceAccount may not list this namespace's Secrets"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: NAME
spec:
  policyName: NAME
  validationActions: [Deny]
"#;

fn policy(name: &str) -> String {
    POLICY.replace("NAME", name)
}

fn configmap(ns: &str, name: &str, runs_as: Option<&str>) -> String {
    let mut labels = serde_json::json!({"authz-test": "true"});
    if let Some(sa) = runs_as {
        labels["runs-as"] = sa.into();
    }
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels}})
    .to_string()
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kubectl create` of a ConfigMap, as `user` (impersonated) or the admin.
fn create(cluster: &TestCluster, manifest: &str, user: Option<&str>) -> Output {
    let mut args = vec!["create", "-f", "-"];
    if let Some(u) = user {
        args.extend(["--as", u]);
    }
    cluster.kubectl_stdin(&args, manifest)
}

/// The roles of the test: alice and bob may create ConfigMaps, alice may
/// also read Secrets; the ServiceAccount `builder` (which need not exist
/// for RBAC) may list them, `nobody` may not.
fn grant(cluster: &TestCluster, ns: &str) {
    for (role, verbs, resource) in [
        ("cm-writer", "create", "configmaps"),
        ("secret-reader", "get", "secrets"),
        ("secret-lister", "list", "secrets"),
    ] {
        let verb = format!("--verb={verbs}");
        let resource = format!("--resource={resource}");
        let out = cluster.kubectl(&["create", "role", role, &verb, &resource, "-n", ns]);
        ok(&out, role);
    }
    let sa = format!("--serviceaccount={ns}:builder");
    for (binding, role, subject) in [
        ("alice-writes", "cm-writer", "--user=alice"),
        ("bob-writes", "cm-writer", "--user=bob"),
        ("alice-reads", "secret-reader", "--user=alice"),
        ("builder-lists", "secret-lister", sa.as_str()),
    ] {
        let role = format!("--role={role}");
        let out = cluster.kubectl(&["create", "rolebinding", binding, &role, subject, "-n", ns]);
        ok(&out, binding);
    }
    // RBAC's own cache: wait until the grants show, so that no check is
    // answered (and cached) from before them.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let can = |args: &[&str]| {
            let mut all = vec!["auth", "can-i", "-n", ns];
            all.extend_from_slice(args);
            cluster.kubectl(&all).status.success()
        };
        let builder = format!("system:serviceaccount:{ns}:builder");
        if can(&["get", "secrets", "--as", "alice"])
            && can(&["create", "configmaps", "--as", "bob"])
            && can(&["list", "secrets", "--as", &builder])
        {
            return;
        }
        assert!(Instant::now() < deadline, "RBAC never showed the grants");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether each of the test's writes in `ns` is admitted, with the denials'
/// texts.
fn outcomes(cluster: &TestCluster, ns: &str) -> Vec<(&'static str, bool, String)> {
    let writes: [(&str, Option<&str>, Option<&str>); 4] = [
        ("by-alice", Some("alice"), None),
        ("by-bob", Some("bob"), None),
        ("runs-as-builder", None, Some("builder")),
        ("runs-as-nobody", None, Some("nobody")),
    ];
    writes
        .into_iter()
        .map(|(name, user, runs_as)| {
            let out = create(cluster, &configmap(ns, name, runs_as), user);
            (
                name,
                out.status.success(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
        .collect()
}

fn assert_follows_rbac(outcomes: &[(&str, bool, String)], who: &str) {
    let admitted: Vec<(&str, bool)> = outcomes.iter().map(|(n, a, _)| (*n, *a)).collect();
    assert_eq!(
        admitted,
        [
            ("by-alice", true),
            ("by-bob", false),
            ("runs-as-builder", true),
            ("runs-as-nobody", false),
        ],
        "{who}: {outcomes:#?}"
    );
    assert!(
        outcomes[1]
            .2
            .contains("only users who may read this namespace's Secrets"),
        "{who}: {}",
        outcomes[1].2
    );
    assert!(
        outcomes[3]
            .2
            .contains("the runs-as ServiceAccount may not list this namespace's Secrets"),
        "{who}: {}",
        outcomes[3].2
    );
}

#[test]
fn checks_under_serve_follow_rbac_for_users_and_service_accounts_as_kube_apiserver() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("authz.yaml");
    std::fs::write(&file, policy("authz-serve")).unwrap();
    let file = file.display().to_string();
    // As the shipped ServiceAccount with the shipped roles: reading, and
    // creating SubjectAccessReviews.
    let rbac = root().join("manifests/base/rbac.yaml");
    ok(
        &cluster.kubectl(&["apply", "-f", &rbac.display().to_string()]),
        "manifests/base/rbac.yaml",
    );
    let kubeconfig = kubeconfig_as(cluster, dir.path(), WEBHOOK_SA);
    let can = |verb: &str, resource: &str| {
        cluster
            .kubectl(&["auth", "can-i", verb, resource, "--as", WEBHOOK_SA])
            .status
            .success()
    };
    assert!(can("create", "subjectaccessreviews.authorization.k8s.io"));
    assert!(!can("create", "tokenreviews.authentication.k8s.io"));
    let hook = start_scoped_as(cluster, &kubeconfig, &SCOPE, &["-p", &file]);

    let ns = namespace_labelled(cluster, "authz", SCOPE.label);
    grant(cluster, &ns);
    let served = outcomes(cluster, &ns);
    assert_follows_rbac(&served, "interlock serve");
    assert!(
        served[1]
            .2
            .contains("ValidatingAdmissionPolicy 'authz-serve'"),
        "{}",
        served[1].2
    );
    let metrics = metrics(&hook);
    assert!(
        metrics.contains("interlock_authorizer_checks_total{answer=\"allowed\",source=\"api\"}"),
        "{metrics}"
    );

    // kube-apiserver's own policy, with the same expressions, in a
    // namespace the webhook does not see.
    let vap_label = "interlock-authz-vap";
    let vap = policy("authz-kube").replace(
        "  validationActions: [Deny]",
        &format!("  validationActions: [Deny]\n  matchResources:\n    namespaceSelector:\n      matchLabels: {{{vap_label}: \"true\"}}"),
    );
    ok(
        &cluster.kubectl_stdin(&["apply", "-f", "-"], &vap),
        "kube-apiserver's policy",
    );
    let kube_ns = namespace_labelled(cluster, "authz-kube", vap_label);
    grant(cluster, &kube_ns);
    // A new policy takes a moment to be enforced: wait until bob is refused.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut probe = 0;
    loop {
        probe += 1;
        let out = create(
            cluster,
            &configmap(&kube_ns, &format!("probe-{probe}"), None),
            Some("bob"),
        );
        if !out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kube-apiserver never enforced the policy"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let kube = outcomes(cluster, &kube_ns);
    assert_follows_rbac(&kube, "kube-apiserver");
    assert!(
        kube[1].2.contains("ValidatingAdmissionPolicy 'authz-kube'"),
        "{}",
        kube[1].2
    );
    drop(hook);
}

/// The webhook's `/metrics`, over TLS trusting its CA.
fn metrics(hook: &Webhook) -> String {
    use rustls::pki_types::pem::PemObject;
    let ca = std::fs::read(hook.dir.path().join("ca.crt")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(&ca).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", hook.port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    // The server may close without close_notify: keep what came.
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn offline_check_is_an_evaluation_error_naming_the_question() {
    let dir = tempfile::tempdir().unwrap();
    let policy_file = dir.path().join("policy.yaml");
    std::fs::write(&policy_file, policy("authz-offline")).unwrap();
    let cm = dir.path().join("cm.json");
    std::fs::write(&cm, configmap("team-a", "settings", None)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(["check", "-p"])
        .arg(&policy_file)
        .arg(&cm)
        .current_dir(root())
        .output()
        .expect("run interlock check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("authorizer unavailable: Interlock has no authorizer to ask whether 'get' on resource 'secrets' of group '', namespace 'team-a' is allowed"),
        "{stdout}"
    );
}
