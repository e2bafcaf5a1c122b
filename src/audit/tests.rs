//! The audit without a cluster: what listing would add, evaluated.

use super::list::plan;
use super::*;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde_json::json;

fn bundled() -> LoadedPolicies {
    LoadedPolicies::from_paths(&[]).expect("the bundled library loads")
}

fn deployment(ns: &str, name: &str, config_map: &str) -> Json {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "registry.example/app:1.0",
                "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}}],
                "volumes": [{"name": "v", "configMap": {"name": config_map}}]}}},
        "status": {"replicas": 0}
    })
}

fn config_map(ns: &str, name: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns, "name": name}})
}

fn ingress(ns: &str, name: &str, host: &str) -> Json {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
           "metadata": {"namespace": ns, "name": name},
           "spec": {"rules": [{"host": host}]}})
}

/// Adds objects as listing would: read and matched as the policies say.
fn audit(loaded: &LoadedPolicies, opts: &AuditOptions, objects: &[Json]) -> Report {
    let mut snapshot = Snapshot::new(loaded, opts).expect("snapshot");
    for o in objects {
        let (group, kind) = crate::k8s::kinds::group_kind(o);
        let read = loaded.policies.reads_kind(group, kind);
        let matched = loaded.policies.may_match_kind(
            o["apiVersion"].as_str().unwrap_or(""),
            kind,
            o.pointer("/metadata/namespace").is_some(),
        );
        snapshot.add(o.clone(), read, matched);
    }
    evaluate(&loaded.policies, snapshot, opts)
}

#[test]
fn a_deployment_whose_config_map_is_missing_is_denied_as_check_denies_it() {
    let loaded = bundled();
    let opts = AuditOptions::default();
    let broken = audit(&loaded, &opts, &[deployment("shop", "web", "settings")]);
    let found: Vec<_> = broken
        .results
        .iter()
        .filter(|f| f.policy == "pod-references-exist")
        .collect();
    assert_eq!(found.len(), 1, "{:#?}", broken.results);
    // Warn at admission, Deny offline: an audit is offline (empty uid).
    assert_eq!(found[0].action, crate::policy::Action::Deny);
    assert_eq!(found[0].object.to_string(), "Deployment shop/web");
    assert_eq!(found[0].source.file, SOURCE_FILE);
    assert_eq!(found[0].source.line, 0);
    assert!(
        found[0].message.contains("settings"),
        "{}",
        found[0].message
    );
    assert_eq!(broken.exit_code(), 1);
    assert_eq!(broken.to_json()["results"][0]["source"]["file"], "cluster");

    let fixed = audit(
        &loaded,
        &opts,
        &[
            deployment("shop", "web", "settings"),
            config_map("shop", "settings"),
        ],
    );
    assert!(
        !fixed
            .results
            .iter()
            .any(|f| f.policy == "pod-references-exist"),
        "{:#?}",
        fixed.results
    );
    assert_eq!(fixed.objects, 1, "ConfigMaps are looked up, not matched");
}

#[test]
fn two_ingresses_claiming_a_host_name_each_other_and_the_filter_narrows_the_report() {
    let loaded = bundled();
    let objects = [
        ingress("team-a", "shop", "shop.example"),
        ingress("team-b", "copy", "shop.example"),
        ingress("team-b", "other", "other.example"),
    ];
    let all = audit(&loaded, &AuditOptions::default(), &objects);
    let hosts: Vec<_> = all
        .results
        .iter()
        .filter(|f| f.policy == "unique-ingress-host")
        .collect();
    assert_eq!(hosts.len(), 2, "{:#?}", all.results);
    let copy = hosts
        .iter()
        .find(|f| f.object.name == "copy")
        .expect("the copy is reported");
    assert_eq!(copy.related.len(), 1, "{copy:#?}");
    assert_eq!(
        copy.related[0].object.to_string(),
        "Ingress team-a/shop",
        "the related object is named with the version it was listed at"
    );
    assert_eq!(copy.related[0].object.api_version, "networking.k8s.io/v1");

    // Only team-b is reported, but its lookups still see team-a.
    let team_b = AuditOptions {
        namespaces: vec!["team-b".into()],
        ..AuditOptions::default()
    };
    let narrowed = audit(&loaded, &team_b, &objects);
    let names: Vec<String> = narrowed
        .results
        .iter()
        .map(|f| f.object.to_string())
        .collect();
    assert_eq!(
        names,
        vec!["Ingress team-b/copy"],
        "{:#?}",
        narrowed.results
    );
    assert_eq!(narrowed.objects, 2);
}

#[test]
fn the_plan_lists_matched_and_read_kinds_once_and_says_what_the_cluster_lacks() {
    let loaded = bundled();
    let ar = |group: &str, version: &str, kind: &str, plural: &str| {
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version,
            kind: kind.into(),
            plural: plural.into(),
        }
    };
    let caps = |ops: &[&str]| ApiCapabilities {
        scope: Scope::Namespaced,
        subresources: vec![],
        operations: ops.iter().map(|s| s.to_string()).collect(),
    };
    let list = ["list", "get", "watch"];
    let served = vec![
        (ar("apps", "v1", "Deployment", "deployments"), caps(&list)),
        (ar("", "v1", "ConfigMap", "configmaps"), caps(&list)),
        (ar("", "v1", "Event", "events"), caps(&list)),
        // Served but not listable: never listed.
        (
            ar("networking.k8s.io", "v1", "Ingress", "ingresses"),
            caps(&["get"]),
        ),
    ];
    let (planned, notices) = plan(&loaded.policies, &served);
    let summary: Vec<(String, bool, bool)> = planned
        .iter()
        .map(|p| (p.resource.kind.clone(), p.read, p.matched))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("Deployment".to_string(), true, true),
            ("ConfigMap".to_string(), true, false),
        ],
        "Events are neither matched nor read"
    );
    assert!(
        notices.iter().any(|n| n.contains("Ingress")),
        "a read kind the cluster does not list is a notice: {notices:?}"
    );
}

#[test]
fn policies_that_do_not_load_are_input_errors_with_their_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: interlock.dev/v1alpha1\nkind: InterlockPolicy\nmetadata: {name: bad}\nspec:\n  validations:\n    - expression: 'object.('\n",
    )
    .expect("write");
    let opts = AuditOptions {
        policies: vec![dir.path().to_path_buf()],
        ..AuditOptions::default()
    };
    // Fails before any cluster is contacted.
    let r = run(&opts);
    assert_eq!(r.exit_code(), 2, "{r:#?}");
    assert!(
        r.errors.iter().any(|e| e.file.ends_with("bad.yaml")),
        "{:#?}",
        r.errors
    );
}

/// A check of the authorizer has no user to ask about in an audit: not a
/// violation, a notice; the policy's other validations still count.
#[test]
fn an_authorizer_check_is_not_evaluable_in_audit_and_not_a_violation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("authz.yaml");
    std::fs::write(
        &policy,
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: writer-reads-secrets}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}
  validations:
    - expression: "authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('get').allowed()"
    - expression: "has(object.data)"
      message: "no data"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: writer-reads-secrets}
spec: {policyName: writer-reads-secrets, validationActions: [Deny]}
"#,
    )
    .expect("write");
    let loaded = LoadedPolicies::from_paths(&[policy]).expect("loads");
    let opts = AuditOptions::default();
    let r = audit(
        &loaded,
        &opts,
        &[config_map("a", "empty"), config_map("b", "empty")],
    );
    let messages: Vec<_> = r.results.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(messages, ["no data", "no data"]);
    let notices: Vec<_> = r.notices.iter().map(|n| n.message.as_str()).collect();
    assert_eq!(
        notices,
        ["policy writer-reads-secrets: not evaluable in audit for 2 object(s): it calls authorizer...check(), and a stored object has no requesting user to ask about (admission and the controller ask kube-apiserver); not counted as violations"]
    );
}
