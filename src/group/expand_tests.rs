use super::*;
use crate::manifest::{load_str, Format, LoadOptions, Source};

fn load(text: &str) -> Document {
    let loaded = load_str(Source::Stdin, text, Format::Yaml, &LoadOptions::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    loaded.documents.into_iter().next().unwrap()
}

const GROUP_YAML: &str = "\
apiVersion: interlock.dev/v1alpha1
kind: ResourceGroup
metadata:
  name: shop
  namespace: team-a
spec:
  serviceAccountName: deployer
  resources:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: conf
    data:
      a: b
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: other
      namespace: team-b
  - apiVersion: v1
    kind: Namespace
    metadata:
      name: ns1
  - kind: Secret
    metadata:
      name: s
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: conf
";

#[test]
fn members_become_documents_of_the_group_namespace_at_the_group_line() {
    let e = expand(load(GROUP_YAML));
    assert_eq!(e.documents.len(), 2, "the group and its one usable member");
    let (group, group_user) = &e.documents[0];
    assert_eq!(group.kind(), "ResourceGroup");
    assert_eq!(*group_user, None);
    let (member, user) = &e.documents[1];
    assert_eq!(member.display_name(), "ConfigMap team-a/conf");
    assert_eq!(member.line, 1);
    assert_eq!(
        user.as_deref(),
        Some("system:serviceaccount:team-a:deployer")
    );
    let label = &member.value["metadata"]["labels"][PART_OF_LABEL];
    assert_eq!(label.as_str(), Some(applyset_id("team-a", "shop").as_str()));
}

#[test]
fn unusable_members_are_input_errors_at_their_own_line() {
    let e = expand(load(GROUP_YAML));
    let found: Vec<(Option<usize>, &str)> = e
        .errors
        .iter()
        .map(|x| (x.line, x.message.as_str()))
        .collect();
    assert_eq!(found.len(), 4, "{found:?}");
    assert_eq!(found[0].0, Some(15));
    assert!(found[0].1.contains("namespace team-b"), "{}", found[0].1);
    assert!(found[1].1.contains("cluster-scoped"), "{}", found[1].1);
    assert!(found[2].1.contains("no apiVersion"), "{}", found[2].1);
    assert!(found[3].1.contains("listed twice"), "{}", found[3].1);
    assert!(found
        .iter()
        .all(|(_, m)| m.starts_with("ResourceGroup team-a/shop: ")));
}

#[test]
fn a_group_without_service_account_or_list_is_an_error() {
    let doc = load("apiVersion: interlock.dev/v1alpha1\nkind: ResourceGroup\nmetadata:\n  name: g\nspec:\n  resources: {a: 1}\n");
    let e = expand(doc);
    let messages: Vec<&str> = e.errors.iter().map(|x| x.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "ResourceGroup default/g: spec.serviceAccountName is required",
            "ResourceGroup default/g: spec.resources is not a list",
        ]
    );
    assert_eq!(e.errors[1].line, Some(6));
    assert_eq!(e.documents.len(), 1, "the group itself is still checked");
}

#[test]
fn the_group_rules_judge_the_usable_members_together() {
    let doc = load("apiVersion: interlock.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: g, namespace: a}\nspec:\n  serviceAccountName: sa\n  resources:\n  - {apiVersion: v1, kind: Service, metadata: {name: web}, spec: {selector: {app: wbe}, ports: [{port: 80}]}}\n  - {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}}}}\n");
    let e = expand(doc);
    assert!(e.errors.is_empty(), "{:?}", e.errors);
    let found: Vec<(&str, &str)> = e
        .findings
        .iter()
        .map(|f| (f.policy.as_str(), f.object.name.as_str()))
        .collect();
    assert_eq!(
        found,
        [(super::super::rules::SERVICE_SELECTS_MEMBER, "web")]
    );
    assert_eq!(e.findings[0].object.namespace.as_deref(), Some("a"));
}

#[test]
fn other_documents_pass_through() {
    let doc = load("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n");
    let e = expand(doc);
    assert_eq!(e.documents.len(), 1);
    assert!(e.errors.is_empty());
    assert!(e.findings.is_empty());
}
