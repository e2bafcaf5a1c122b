//! A policy reload that reads more of a kind than the live inventory kept
//! (its projection): the watched kinds are listed again, so the new rule
//! sees the new fields of objects created before it was loaded. And a
//! webhook started after the objects knows them from its first list.

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::webhook::{apply, ingress, namespace};

/// Rejects an Ingress whose TLS secret another Ingress already uses: it
/// reads `spec.tls`, which the first policies never read, so the inventory
/// did not keep it before the reload.
const SHARED_TLS_POLICY: &str = r#"
---
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata:
  name: unique-tls-secret
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [networking.k8s.io], apiVersions: [v1], resources: [ingresses], operations: [CREATE, UPDATE]}
  indexes:
    - name: tls-secrets
      apiVersion: networking.k8s.io/v1
      kind: Ingress
      keys: "object.spec.?tls.orValue([]).map(t, object.metadata.namespace + '/' + t.secretName)"
  validations:
    - expression: >-
        object.spec.?tls.orValue([]).all(t,
          inventory.index('tls-secrets', object.metadata.namespace + '/' + t.secretName).size() == 0)
      message: "TLS secret already used by another Ingress"
"#;

fn with_tls(mut ingress: serde_json::Value, secret: &str) -> serde_json::Value {
    ingress["spec"]["tls"] =
        json!([{"hosts": [ingress["spec"]["rules"][0]["host"]], "secretName": secret}]);
    ingress
}

#[test]
fn reloads_and_restarts_see_the_objects_listed_before_them() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let hook = support::webhook::start(cluster, &[]);
    let ns = namespace(cluster, "tls");
    let first = apply(
        cluster,
        &with_tls(ingress(&ns, "one", "one.reload.example"), "shared-cert"),
        &[],
    );
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );

    // Add the policy to a policy file the server watches.
    let file = hook.dir.path().join("mutate.yaml");
    let mut text = std::fs::read_to_string(&file).expect("policy file");
    text.push_str(SHARED_TLS_POLICY);
    std::fs::write(&file, text).expect("write policy");

    // The reload is polled. From the moment the new rule is in, no request
    // may pass it: until the re-list is in, inventory-reading rules answer
    // by their failurePolicy (Fail: "still loading"); then from the
    // re-listed objects, which have the first Ingress's tls.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut attempt = 0;
    loop {
        assert!(
            Instant::now() < deadline,
            "the reloaded policy never refused the shared secret; server log:\n{}",
            hook.log()
        );
        std::thread::sleep(Duration::from_millis(500));
        if !hook.log().contains("policies reloaded") {
            continue;
        }
        attempt += 1;
        let name = format!("two-{attempt}");
        let out = apply(
            cluster,
            &with_tls(
                ingress(&ns, &name, &format!("{name}.reload.example")),
                "shared-cert",
            ),
            &["--dry-run=server"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "admitted after the reload (attempt {attempt}); server log:\n{}",
            hook.log()
        );
        if err.contains("still loading") {
            continue;
        }
        assert!(err.contains("TLS secret already used"), "{err}");
        break;
    }
    assert!(
        hook.log().contains("re-listing"),
        "the watched kinds were not listed again:\n{}",
        hook.log()
    );
    // A webhook started now knows the existing objects from its first
    // list alone (list items come without apiVersion and kind).
    let fresh = support::webhook::start(cluster, &[]);
    let other = namespace(cluster, "tls-other");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = apply(
            cluster,
            &ingress(&other, "copy", "one.reload.example"),
            &["--dry-run=server"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "a restarted webhook admitted a host its first list shows taken; log:\n{}",
            fresh.log()
        );
        if err.contains("unique-ingress-host") {
            break;
        }
        assert!(err.contains("still loading"), "{err}");
        assert!(Instant::now() < deadline, "never ready: {err}");
        std::thread::sleep(Duration::from_millis(500));
    }
    // Another secret is still fine (for the first policies: the restarted
    // webhook has them).
    let out = apply(
        cluster,
        &with_tls(ingress(&ns, "three", "three.reload.example"), "own-cert"),
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
