//! A PolicyException loaded with the policies is honoured by `interlock
//! serve` against a real kube-apiserver: the excepted Ingress is admitted,
//! the same write by another name is still refused.

use crate::support;

use support::cluster::TestCluster;
use support::webhook::{apply, ingress, namespace};

#[test]
fn serve_admits_what_an_exception_covers_and_nothing_else() {
    let cluster = TestCluster::shared();
    let _logs = cluster.logs_on_panic();
    let owner = namespace(cluster, "exc-owner");
    let other = namespace(cluster, "exc-other");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("exception.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: interlock.dev/v1alpha1
kind: PolicyException
metadata: {{name: promo-shares-the-host}}
spec:
  policies: [unique-ingress-host]
  namespaces: [{other}]
  names: [promo]
  expires: \"2099-01-01T00:00:00Z\"
  reason: campaign
"
        ),
    )
    .expect("write exception");
    let hook = support::webhook::start(cluster, &["-p", file.to_str().unwrap()]);

    let first = apply(
        cluster,
        &ingress(&owner, "shop", "shop.exception.example"),
        &[],
    );
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );

    let refused = apply(
        cluster,
        &ingress(&other, "copy", "shop.exception.example"),
        &[],
    );
    assert!(
        !refused.status.success(),
        "a name the exception does not list is refused"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("unique-ingress-host"), "{stderr}");

    let excepted = apply(
        cluster,
        &ingress(&other, "promo", "shop.exception.example"),
        &[],
    );
    assert!(
        excepted.status.success(),
        "the excepted Ingress is admitted: {}\nserver log:\n{}",
        String::from_utf8_lossy(&excepted.stderr),
        hook.log()
    );
}
