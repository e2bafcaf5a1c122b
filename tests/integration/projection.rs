//! The inventory keeps only the fields policies read (docs/architecture.md:
//! projection). These tests hold the two halves of that promise: little is
//! kept, and nothing a policy reads is lost (the same report with whole
//! objects and with projected ones).

use interlock::check::{self, check_documents, CheckOptions};
use interlock::inventory::projection::Projection;
use interlock::manifest::{self, Document, Format, LoadOptions};
use interlock::policy::PolicySet;
use interlock::report::Report;
use serde_json::json;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn projection_of(docs: Vec<Document>) -> Projection {
    let (set, errors) = PolicySet::compile_documents(docs);
    assert!(errors.is_empty(), "{errors:?}");
    set.projection()
}

fn yaml(text: &str) -> Vec<Document> {
    let loaded = manifest::load_str(
        manifest::Source::Stdin,
        text,
        Format::Yaml,
        &LoadOptions::default(),
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    loaded.documents
}

#[test]
fn the_bundled_library_keeps_identities_and_the_fields_it_reads() {
    let p = projection_of(interlock::bundled::documents().documents);
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": "a", "labels": {"app": "db"}, "annotations": {"note": "x"}},
        "type": "Opaque", "data": {"password": "c2VjcmV0"}});
    assert_eq!(
        p.apply(&secret),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "db", "namespace": "a", "labels": {"app": "db"}}}),
        "a Secret keeps no data"
    );
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "a", "uid": "u1", "generation": 4},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
                              "spec": {"containers": [{"name": "web", "image": "web:1"}]}}}});
    assert_eq!(
        p.apply(&deployment),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "a", "uid": "u1"},
               "spec": {"replicas": 3, "template": {"metadata": {"labels": {"app": "web"}}}}}),
        "a Deployment keeps what the PDB policy reads"
    );
    let ingress = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "shop", "namespace": "a"},
        "spec": {"tls": [{"hosts": ["shop.example.com"]}],
                 "rules": [{"host": "shop.example.com", "http": {"paths": [{"path": "/"}]}}]}});
    assert_eq!(
        p.apply(&ingress),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "shop", "namespace": "a"},
               "spec": {"rules": [{"host": "shop.example.com", "http": {"paths": [{"path": "/"}]}}]}}),
        "an Ingress keeps the hosts its index reads, and the paths unique-ingress-host compares"
    );
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "a", "annotations": {"x": "y"}}, "spec": {"finalizers": ["kubernetes"]}});
    assert_eq!(p.apply(&namespace), namespace, "namespaceObject is whole");
}

#[test]
fn a_policy_that_reads_secret_data_by_kind_keeps_it() {
    let p = projection_of(yaml(
        r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: tls-secret-has-cert}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [networking.k8s.io], apiVersions: [v1], resources: [ingresses], operations: [CREATE]}]
  validations:
    - expression: >-
        object.spec.tls.all(t, inventory.get('v1', 'Secret', object.metadata.namespace, t.secretName)
          .?data[?'tls.crt'].hasValue())
"#,
    ));
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"},
        "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}, "type": "kubernetes.io/tls"});
    assert_eq!(
        p.apply(&secret),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"},
               "data": {"tls.crt": "Y2VydA=="}}),
        "only the key the policy reads"
    );
}

/// Lookups whose results flow through every construct the analysis
/// follows, and some it does not; each message shows what was read.
const FLOWS: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: flows}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [services], operations: [CREATE]}]
  indexes:
    - {name: by-app, apiVersion: apps/v1, kind: Deployment, keys: "[object.spec.selector.matchLabels.app]"}
  variables:
    - name: deps
      expression: "inventory.list('apps/v1', 'Deployment', object.metadata.namespace)"
    - name: cm
      expression: "inventory.get('v1', 'ConfigMap', object.metadata.namespace, 'settings')"
    - name: field
      expression: "object.metadata.annotations['field']"
  validations:
    - expression: "false"
      messageExpression: "string(variables.deps.map(d, d.spec.replicas).sum()) + ' replicas'"
    - expression: "false"
      messageExpression: "cel.bind(x, variables.deps.filter(d, has(d.spec.strategy)), x.map(d, d.metadata.name).join(','))"
    - expression: "false"
      messageExpression: "variables.deps.sortBy(d, d.spec.minReadySeconds).map(d, d.metadata.name).join(',')"
    - expression: "false"
      messageExpression: "string(variables.cm.value().data.size()) + ' keys'"
    - expression: "false"
      messageExpression: "variables.cm.?data[?variables.field].orValue('none')"
    - expression: "false"
      messageExpression: "variables.deps.map(d, string(d.spec.template.spec.containers.size())).join(',') + ' containers'"
    - expression: "false"
      messageExpression: "inventory.index('by-app', 'web').map(d, string(d.spec.?paused.orValue(false))).join(',')"
    - expression: "false"
      messageExpression: "string(variables.deps.last().value().spec.revisionHistoryLimit) + ' revisions'"
    - expression: "false"
      messageExpression: "string((variables.deps + variables.deps).exists(d, d.metadata.annotations.size() > 1))"
    - expression: "false"
      messageExpression: "variables.deps.map(d, d.spec.template.metadata).map(m, m.labels.app).join('+')"
    - expression: "false"
      messageExpression: "string(inventory.get('apps/v1', object.metadata.annotations['kind'], object.metadata.namespace, 'web').?spec.?progressDeadlineSeconds.orValue(0)) + 's deadline'"
    - expression: "false"
      messageExpression: "string(variables.deps.all(d, d.spec.template.spec.containers.all(c, c.image.endsWith(':1'))))"
"#;

const OBJECTS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: a, annotations: {x: "1", y: "2"}}
spec:
  replicas: 3
  minReadySeconds: 5
  revisionHistoryLimit: 7
  progressDeadlineSeconds: 600
  paused: true
  strategy: {type: Recreate}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, tier: front}, annotations: {note: unread}}
    spec: {containers: [{name: web, image: "web:1"}, {name: side, image: "side:2"}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: a, annotations: {x: "1"}}
spec:
  replicas: 2
  minReadySeconds: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: "api:1"}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: a}
data: {color: blue, size: large}
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: a, annotations: {field: size, kind: Deployment}}
spec: {selector: {app: web}}
"#;

fn report(policies: &[Document], objects: &[Document], whole_objects: bool) -> Report {
    let opts = CheckOptions {
        policies: vec![],
        inputs: vec![],
        user: check::DEFAULT_USER.into(),
        record_evaluated: false,
        whole_objects,
        ..Default::default()
    };
    let mut report = Report::default();
    check_documents(policies, objects, &opts, &mut report);
    report.sort();
    report
}

fn messages(r: &Report) -> Vec<String> {
    r.results.iter().map(|f| f.message.clone()).collect()
}

#[test]
fn lookups_read_the_same_values_from_projected_and_whole_objects() {
    let (policies, objects) = (yaml(FLOWS), yaml(OBJECTS));
    let whole = report(&policies, &objects, true);
    assert!(whole.errors.is_empty(), "{:?}", whole.errors);
    let projected = report(&policies, &objects, false);
    assert_eq!(messages(&projected), messages(&whole));
    // And the projection did leave out what no expression reads.
    let web = projection_of(policies.clone()).apply(&objects[0].value);
    assert_eq!(
        web.pointer("/spec/template/metadata"),
        Some(&json!({"labels": {"app": "web"}}))
    );
    assert_eq!(
        web.pointer("/spec/selector"),
        Some(&json!({"matchLabels": {"app": "web"}}))
    );
    // The values are the real ones, not empty reads that happen to agree.
    for expected in [
        "5 replicas",
        // has(spec.strategy): api's is defaulted, as kube-apiserver stores it.
        "api,web",
        "api,web",
        "2 keys",
        "large",
        "1,2 containers",
        "false,true",
        "7 revisions",
        "true",
        "api+web",
        "600s deadline",
        "false",
    ] {
        assert!(
            messages(&whole).iter().any(|m| m == expected),
            "no message {expected:?} in {:?}",
            messages(&whole)
        );
    }
}

#[test]
fn check_reports_are_the_same_with_whole_objects() {
    for input in ["examples", "policies"] {
        let run = |whole_objects| {
            let mut r = check::run(&CheckOptions {
                policies: vec![],
                inputs: vec![root().join(input)],
                user: check::DEFAULT_USER.into(),
                record_evaluated: false,
                whole_objects,
                ..Default::default()
            });
            r.sort();
            serde_json::to_string(&r.to_json()).expect("json")
        };
        assert_eq!(run(false), run(true), "check {input}");
    }
}
