use super::*;
use crate::cluster::ClusterOptions;
use crate::fixtures::{compile, UNIQUE_HOST};
use crate::inventory::Inventory;
use serde_json::json;

const REFERENCES: &str = include_str!("../../../../policies/pod-references-exist/policy.yaml");

fn deployment(ns: &str, name: &str, config_map: &str) -> Json {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": ns, "name": name, "uid": format!("u-{name}")},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "r.example/app:1"}],
                     "volumes": [{"name": "v", "configMap": {"name": config_map}}]}}}})
}

fn config_map(ns: &str, name: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns, "name": name}})
}

fn namespace(name: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// A cluster state with both policies, Namespaces a and b, a ConfigMap in
/// a; a store with two Deployments using it and an Ingress.
fn setup() -> (Cluster, Shared) {
    let mut inv = Inventory::new();
    let set = compile(&[REFERENCES, UNIQUE_HOST], &mut inv);
    inv.set_projection(set.projection());
    for o in [namespace("a"), namespace("b"), config_map("a", "settings")] {
        inv.upsert(&o, None).unwrap();
    }
    let cluster = Cluster::new(set, inv, ClusterOptions::default());
    let store = Shared::default();
    {
        let mut s = store.lock();
        s.upsert(deployment("a", "web", "settings"));
        s.upsert(deployment("a", "api", "settings"));
        s.upsert(crate::fixtures::ingress("b", "site", "b.example", "cert"));
    }
    (cluster, store)
}

fn names(a: &Auditor) -> Vec<String> {
    let mut v: Vec<String> = a
        .findings()
        .map(|f| format!("{} {}", f.policy, f.object))
        .collect();
    v.sort();
    v
}

#[test]
fn a_deleted_config_map_re_evaluates_only_what_reads_config_maps() {
    let (cluster, store) = setup();
    let mut a = Auditor::default();
    let first = a.pass(&cluster, &store, false, None);
    assert!(first.full, "the first pass is full");
    assert_eq!(first.evaluated, 3);
    assert!(names(&a).is_empty(), "{:?}", names(&a));

    let idle = a.pass(&cluster, &store, false, None);
    assert_eq!(idle.evaluated, 0, "nothing changed, nothing evaluated");

    cluster.update_inventory(|inv, _| {
        inv.remove(&ObjectKey::of(&config_map("a", "settings")).unwrap())
    });
    let after = a.pass(&cluster, &store, false, None);
    assert!(!after.full);
    assert_eq!(after.evaluated, 2, "the two Deployments, not the Ingress");
    assert_eq!(
        after.changed.iter().collect::<Vec<_>>(),
        vec!["a"],
        "only namespace a's results changed"
    );
    assert_eq!(
        names(&a),
        vec![
            "pod-references-exist Deployment a/api",
            "pod-references-exist Deployment a/web"
        ]
    );
    assert_eq!(a.findings_in("a").len(), 2);
    assert!(a.findings_in("b").is_empty());

    cluster.update_inventory(|inv, _| {
        inv.upsert(&config_map("a", "settings"), None)
            .map(|_| ())
            .unwrap()
    });
    let fixed = a.pass(&cluster, &store, false, None);
    assert_eq!(fixed.evaluated, 2);
    assert!(names(&a).is_empty(), "fixing it clears the results");
    assert!(fixed.changed.contains("a"));
}

#[test]
fn a_changed_or_deleted_object_is_evaluated_alone_and_a_full_pass_takes_all() {
    let (cluster, store) = setup();
    let mut a = Auditor::default();
    a.pass(&cluster, &store, false, None);
    store.lock().upsert(deployment("a", "web", "missing"));
    let changed = a.pass(&cluster, &store, false, None);
    assert_eq!(changed.evaluated, 1);
    assert_eq!(names(&a), vec!["pod-references-exist Deployment a/web"]);

    let web = ObjectKey::of(&deployment("a", "web", "missing")).unwrap();
    store.lock().remove(&web);
    let removed = a.pass(&cluster, &store, false, None);
    assert_eq!(removed.evaluated, 0);
    assert!(
        names(&a).is_empty(),
        "a deleted object's results go with it"
    );
    assert!(removed.changed.contains("a"));

    let full = a.pass(&cluster, &store, true, None);
    assert!(full.full);
    assert_eq!(full.evaluated, 2);
}

#[test]
fn a_policy_reload_makes_a_full_pass() {
    let (cluster, store) = setup();
    let mut a = Auditor::default();
    a.pass(&cluster, &store, false, None);
    cluster.update(|_| ());
    let after = a.pass(&cluster, &store, false, None);
    assert!(after.full);
    assert_eq!(after.evaluated, 3);
}

#[test]
fn an_ingress_change_re_evaluates_only_what_reads_ingresses() {
    let (cluster, store) = setup();
    let mut a = Auditor::default();
    a.pass(&cluster, &store, false, None);
    // Another tenant's Ingress, stored: the Deployments' policy reads no
    // Ingress, so only the audited Ingress is evaluated again.
    let other = crate::fixtures::ingress("a", "other", "a.example", "cert");
    cluster.update_inventory(|inv, _| inv.upsert(&other, None).map(|_| ()).unwrap());
    let after = a.pass(&cluster, &store, false, None);
    assert!(!after.full);
    assert_eq!(after.evaluated, 1, "the Ingress, not the two Deployments");
    assert!(names(&a).is_empty(), "{:?}", names(&a));

    // The same host in namespace a: the audited Ingress now conflicts.
    let clash = crate::fixtures::ingress("a", "clash", "b.example", "cert");
    cluster.update_inventory(|inv, _| inv.upsert(&clash, None).map(|_| ()).unwrap());
    let clashed = a.pass(&cluster, &store, false, None);
    assert_eq!(clashed.evaluated, 1);
    assert_eq!(names(&a), vec!["unique-host Ingress b/site"]);
}

#[test]
fn a_pass_holds_the_lock_briefly_and_many_times() {
    let (cluster, store) = setup();
    // A hold too short for two evaluations: one object per hold.
    let mut a = Auditor {
        hold: std::time::Duration::ZERO,
        pace: 0.0,
        ..Auditor::default()
    };
    let p = a.pass(&cluster, &store, true, None);
    assert_eq!((p.evaluated, p.holds), (3, 3));
    let mut whole = Auditor {
        hold: std::time::Duration::MAX,
        ..Auditor::default()
    };
    let p = whole.pass(&cluster, &store, true, None);
    assert_eq!((p.evaluated, p.holds), (3, 1), "one batch, one hold");
    assert_eq!(names(&a), names(&whole), "the same results either way");
}

/// A Deployment policy that asks the authorizer: not evaluable in audit,
/// so no result; the policy's other validation still reports.
const READS_SECRETS: &str = "
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: writer-reads-secrets}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE]}
  validations:
    - expression: \"authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('get').allowed()\"
    - expression: \"object.metadata.name != 'api'\"
      message: no api
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: writer-reads-secrets}
spec: {policyName: writer-reads-secrets, validationActions: [Deny]}
";

#[test]
fn an_authorizer_check_gives_no_result_in_the_continuous_audit() {
    let mut inv = Inventory::new();
    let set = compile(&[READS_SECRETS], &mut inv);
    let cluster = Cluster::new(set, inv, ClusterOptions::default());
    let store = Shared::default();
    store.lock().upsert(deployment("a", "web", "settings"));
    store.lock().upsert(deployment("a", "api", "settings"));
    let mut a = Auditor::default();
    assert_eq!(a.pass(&cluster, &store, false, None).evaluated, 2);
    let messages: Vec<String> = a
        .findings()
        .map(|f| format!("{} {}", f.object, f.message))
        .collect();
    assert_eq!(messages, ["Deployment a/api no api"]);
}
