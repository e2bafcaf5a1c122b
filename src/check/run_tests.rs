//! `interlock check` over real-world repository shapes: objects named only
//! by generateName, objects given twice, tool files next to manifests,
//! `--namespace`, `--inventory`, `--exclude`, empty runs, JUnit cases.

use super::*;
use crate::report::Action as ReportAction;
use std::fs;
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

fn run_on(dir: &Path, f: impl FnOnce(&mut CheckOptions)) -> Report {
    let mut opts = CheckOptions {
        inputs: vec![dir.to_path_buf()],
        user: DEFAULT_USER.into(),
        ..CheckOptions::default()
    };
    f(&mut opts);
    let mut r = run(&opts);
    r.sort();
    r
}

fn findings<'r>(r: &'r Report, policy: &str) -> Vec<&'r Finding> {
    r.results.iter().filter(|f| f.policy == policy).collect()
}

const HOOK_JOB: &str = "apiVersion: batch/v1
kind: Job
metadata:
  generateName: db-migrate-
  annotations: {helm.sh/hook: pre-install}
spec:
  template:
    spec:
      hostNetwork: true
      restartPolicy: Never
      containers:
      - name: migrate
        image: registry.example.com/migrate:latest
        securityContext: {privileged: true}
";

#[test]
fn an_object_named_by_generate_name_is_evaluated() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "hook.yaml", HOOK_JOB);
    let r = run_on(dir.path(), |_| {});
    assert_eq!(r.objects, 1);
    let latest = findings(&r, "disallow-latest-tag");
    assert_eq!(latest.len(), 1, "{:?}", r.results);
    assert_eq!(latest[0].object.name, "db-migrate-*");
    let pss: Vec<&str> = findings(&r, "pod-security-baseline")
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    assert!(pss.iter().any(|m| m.contains("hostNetwork")), "{pss:?}");
    assert!(pss.iter().any(|m| m.contains("privileged")), "{pss:?}");
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn pod_template_kinds_are_checked_like_workloads() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "legacy.yaml",
        "apiVersion: v1
kind: ReplicationController
metadata: {name: legacy, namespace: shop}
spec:
  replicas: 1
  template:
    metadata: {labels: {app: legacy}}
    spec:
      hostPID: true
      containers: [{name: app, image: nginx}]
---
apiVersion: v1
kind: PodTemplate
metadata: {name: tpl, namespace: shop}
template:
  spec:
    containers: [{name: app, image: 'nginx:latest', securityContext: {privileged: true}}]
",
    );
    let r = run_on(dir.path(), |_| {});
    let kinds = |policy: &str| {
        let mut k: Vec<String> = findings(&r, policy)
            .iter()
            .map(|f| f.object.kind.clone())
            .collect();
        k.sort();
        k.dedup();
        k
    };
    assert_eq!(
        kinds("disallow-latest-tag"),
        ["PodTemplate", "ReplicationController"]
    );
    assert_eq!(
        kinds("pod-security-baseline"),
        ["PodTemplate", "ReplicationController"]
    );
}

#[test]
fn every_copy_of_an_object_is_checked_and_copies_are_notices() {
    let dir = tempfile::tempdir().expect("tempdir");
    let deploy = |image: &str| {
        format!(
            "apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: shop}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: '{image}', envFrom: [{{configMapRef: {{name: web-config}}}}]}}]
"
        )
    };
    write(dir.path(), "overlays/a/web.yaml", &deploy("web:1.0"));
    // The second copy differs: only it has the latest tag.
    write(dir.path(), "overlays/b/web.yaml", &deploy("web:latest"));
    write(
        dir.path(),
        "overlays/a/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config, namespace: shop}\n",
    );
    write(
        dir.path(),
        "overlays/b/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config, namespace: shop}\ndata: {mode: b}\n",
    );
    let r = run_on(dir.path(), |_| {});
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.objects, 4);
    let latest = findings(&r, "disallow-latest-tag");
    assert_eq!(latest.len(), 1);
    assert!(latest[0].source.file.ends_with("overlays/b/web.yaml"));
    let notices: Vec<&str> = r.notices.iter().map(|n| n.message.as_str()).collect();
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("Deployment shop/web is given 2 times (first at ")),
        "{notices:?}"
    );
    // Each Deployment's lookup read the duplicated ConfigMap: which copy is said.
    let said: Vec<&&str> = notices
        .iter()
        .filter(|n| n.contains("lookups read ConfigMap shop/web-config, which is given 2 times: they used the copy at "))
        .collect();
    assert_eq!(said.len(), 2, "{notices:?}");
    assert!(
        said[0].contains("overlays/a/config.yaml:1 (not "),
        "{said:?}"
    );
    // Duplicates are notices: the exit status comes from findings only.
    assert_eq!(r.exit_code(), 1);
    let mut json = Vec::new();
    r.write_json(&mut json).expect("json");
    let json: serde_json::Value = serde_json::from_slice(&json).expect("json");
    assert_eq!(json["summary"]["errors"], 0);
    assert_eq!(json["summary"]["notices"], 4);
}

#[test]
fn raw_tool_files_are_skipped_with_one_notice_and_malformed_objects_stay_errors() {
    // `--kustomize never`: the raw files, as written (rendering is tested
    // against the real kustomize in tests/integration/kustomize.rs).
    let run_on = |d: &Path, f: fn(&mut CheckOptions)| {
        run_on(d, |o| {
            o.kustomize = crate::check::render::kustomize::KustomizeMode::Never;
            f(o)
        })
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "base/kustomization.yaml", "resources: [cm.yaml]\n");
    write(
        d,
        "base/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    );
    write(
        d,
        "chart/Chart.yaml",
        "apiVersion: v2\nname: web\nversion: 1.0.0\n",
    );
    write(d, "chart/values.yaml", "replicas: 2\n");
    write(
        d,
        "chart/templates/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
    );
    write(
        d,
        "skaffold.yaml",
        "apiVersion: skaffold/v4beta6\nkind: Config\n",
    );
    write(
        d,
        "dashboards/web.json",
        "{\"title\": \"web\", \"panels\": []}",
    );
    let r = run_on(d, |_| {});
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.objects, 1);
    assert_eq!(r.notices.len(), 1, "{:?}", r.notices);
    let n = &r.notices[0].message;
    assert!(
        n.starts_with("skipped 6 files that hold no Kubernetes objects"),
        "{n}"
    );
    assert!(
        n.contains("kubectl kustomize DIR | interlock check -"),
        "{n}"
    );
    assert!(n.contains("helm template"), "{n}");
    assert_eq!(r.exit_code(), 0);
    // What the kustomization's generator makes is there for lookups.
    write(
        d,
        "base/kustomization.yaml",
        "resources: [cm.yaml]\nconfigMapGenerator:\n- name: settings\n  literals: [a=b]\n",
    );
    write(
        d,
        "base/pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: 'nginx:1.27', envFrom: [{configMapRef: {name: settings}}]}]\n",
    );
    let r = run_on(d, |_| {});
    assert!(
        findings(&r, "pod-references-exist").is_empty(),
        "{:?}",
        r.results
    );
    fs::remove_file(d.join("base/pod.yaml")).expect("rm");
    // A document shaped like an object but without a kind is still an error.
    write(
        d,
        "base/broken.yaml",
        "apiVersion: v1\nmetadata: {name: b}\n",
    );
    let r = run_on(d, |_| {});
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert!(r.errors[0].file.ends_with("base/broken.yaml"));
    assert_eq!(r.exit_code(), 2);
    // --exclude leaves it out.
    let r = run_on(d, |o| o.exclude = vec!["broken.yaml".into()]);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
}

#[test]
fn namespace_option_places_objects_without_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "app.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: 'nginx:1.27', envFrom: [{configMapRef: {name: settings}}]}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: team-a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n",
    );
    // In `default` the ConfigMap (in team-a) is missing.
    let r = run_on(dir.path(), |_| {});
    let refs = findings(&r, "pod-references-exist");
    assert_eq!(refs.len(), 1, "{:?}", r.results);
    assert_eq!(refs[0].object.namespace.as_deref(), Some("default"));
    assert!(
        refs[0].message.contains("ConfigMap settings"),
        "{}",
        refs[0].message
    );
    let r = run_on(dir.path(), |o| o.namespace = Some("team-a".into()));
    assert!(
        findings(&r, "pod-references-exist").is_empty(),
        "{:?}",
        r.results
    );
    assert_eq!(r.objects, 3);
}

/// Secrets are kept out of repositories: a Secret a pod names that the
/// inputs do not give is supplied out of band (a notice), unless its name
/// is a near miss of one they give in that namespace.
#[test]
fn secrets_the_inputs_do_not_give_are_supplied_out_of_band_unless_a_near_miss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pod = |ns: &str, secret: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: {ns}}}\nspec:\n  imagePullSecrets: [{{name: pull}}]\n  containers: [{{name: c, image: 'nginx:1.27', envFrom: [{{secretRef: {{name: {secret}}}}}]}}]\n")
    };
    let secret = |ns: &str, name: &str| {
        format!("---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\n")
    };
    write(dir.path(), "by-hand.yaml", &pod("by-hand", "creds"));
    write(
        dir.path(),
        "managed.yaml",
        &format!("{}{}", pod("managed", "creds"), secret("managed", "pull")),
    );
    write(
        dir.path(),
        "slip.yaml",
        &format!(
            "{}{}",
            pod("slip", "webhook-cert-api"),
            secret("slip", "webhook-cert")
        ),
    );
    // A Job's guessed Secrets (the leading parts of its name) are no
    // yardstick for a near miss.
    write(
        dir.path(),
        "job.yaml",
        &format!(
            "{}---\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: tls-cert-setup, namespace: job}}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{{name: c, image: 'kubectl:1.36'}}]\n",
            pod("job", "tls-certs")
        ),
    );
    let r = run_on(dir.path(), |_| {});
    let refs = findings(&r, "pod-references-exist");
    assert_eq!(refs.len(), 1, "{:?}", r.results);
    assert_eq!(refs[0].object.namespace.as_deref(), Some("slip"));
    assert!(
        refs[0].message.contains("Secret webhook-cert-api"),
        "{}",
        refs[0].message
    );
    let notice = |ns: &str, names: &str| {
        r.notices.iter().any(|n| {
            n.message.starts_with(&format!("namespace {ns}: ")) && n.message.contains(names)
        })
    };
    assert!(notice("by-hand", "(creds, pull)"), "{:?}", r.notices);
    assert!(notice("managed", "(creds)"), "{:?}", r.notices);
    assert!(notice("slip", "(pull)"), "{:?}", r.notices);
    assert!(notice("job", "(pull, tls-certs)"), "{:?}", r.notices);
}

#[test]
fn near_misses_are_a_suffix_or_two_edits_away() {
    assert!(super::evaluate::near_miss(
        "hnc-resourcelist-apiextension",
        "hnc-resourcelist"
    ));
    assert!(super::evaluate::near_miss("webhook-cert", "webhook-certs"));
    assert!(super::evaluate::near_miss(
        "misspelt-secret",
        "mispelt-secret"
    ));
    assert!(!super::evaluate::near_miss("argocd-redis", "argocd-secret"));
    assert!(!super::evaluate::near_miss("tls", "tlx"));
    assert!(!super::evaluate::near_miss("db-credentials", "db"));
}

#[test]
fn inventory_objects_are_seen_by_lookups_but_not_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "app.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: a}\nspec:\n  containers: [{name: c, image: 'nginx:1.27', envFrom: [{secretRef: {name: creds}}]}]\n",
    );
    // The baseline has the Secret and a Pod that breaks every rule.
    write(
        cluster.path(),
        "baseline.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad, namespace: a}\nspec:\n  hostNetwork: true\n  containers: [{name: c, image: nginx}]\n",
    );
    let r = run_on(dir.path(), |o| {
        o.inventory = vec![cluster.path().to_path_buf()]
    });
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.objects, 1);
    assert!(
        r.results.iter().all(|f| f.object.name == "p"),
        "{:?}",
        r.results
    );
    assert!(findings(&r, "pod-references-exist").is_empty());
}

#[test]
fn nothing_to_check_is_not_all_fine() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "kustomization.yaml", "resources: []\n");
    let r = run_on(dir.path(), |_| {});
    assert_eq!(r.exit_code(), 2);
    assert!(
        r.errors[0]
            .message
            .starts_with("no Kubernetes objects in the inputs"),
        "{:?}",
        r.errors
    );
    let empty = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    );
    let r = run_on(dir.path(), |o| {
        o.policies = vec![empty.path().to_path_buf()]
    });
    assert_eq!(r.exit_code(), 2);
    assert!(
        r.errors[0].message.starts_with("no policies were loaded"),
        "{:?}",
        r.errors
    );
}

#[test]
fn junit_lists_a_case_only_where_a_policy_applies() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "objects.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i}\nspec: {rules: [{host: a.example.com}]}\n",
    );
    let r = run_on(dir.path(), |o| o.record_evaluated = true);
    let pairs: Vec<(String, String)> = r
        .evaluated
        .iter()
        .map(|e| (e.policy.clone(), e.object.kind.clone()))
        .collect();
    assert_eq!(
        pairs,
        [("unique-ingress-host".to_string(), "Ingress".to_string())]
    );
    let mut xml = Vec::new();
    r.write_junit(&mut xml).expect("junit");
    let xml = String::from_utf8(xml).expect("utf-8");
    assert!(!xml.contains("ConfigMap"), "{xml}");
    assert!(r.results.iter().all(|f| f.action != ReportAction::Deny));
}

/// The repository's own library folder, as `-p policies/`: its `tests/`
/// folders hold PolicyTest cases, not policies.
#[test]
fn a_policy_folder_with_test_cases_loads_as_policies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let r = run_on(&root.join("examples"), |o| {
        o.policies = vec![root.join("policies")];
    });
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let bundled = run_on(&root.join("examples"), |_| {});
    assert_eq!(r.policy_names, bundled.policy_names);
    assert_eq!(r.results.len(), bundled.results.len());
}

/// A PolicyTest file found outside a `tests/` folder is left out too; one
/// named on the command line is read (and refused: it is no policy).
#[test]
fn policy_test_files_found_in_a_walk_are_not_policies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/disallow-latest-tag/policy.yaml"),
    )
    .expect("policy");
    write(dir.path(), "p/policy.yaml", &policy);
    let case = "apiVersion: interlock.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: c}\nspec: {expect: []}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
    write(dir.path(), "p/cases/c.yaml", case);
    write(
        dir.path(),
        "m/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n",
    );
    let r = run_on(&dir.path().join("m"), |o| {
        o.policies = vec![dir.path().join("p")]
    });
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.policy_names, vec!["disallow-latest-tag".to_string()]);
    let named = run_on(&dir.path().join("m"), |o| {
        o.policies = vec![
            dir.path().join("p/policy.yaml"),
            dir.path().join("p/cases/c.yaml"),
        ]
    });
    assert!(
        named
            .errors
            .iter()
            .any(|e| e.message.contains("is not a policy")),
        "{:?}",
        named.errors
    );
}

/// A CRD that makes Pods (an Argo Rollout, a cron kind with a
/// jobTemplate) is checked through its pod template, by shape, with the
/// pod policies as they are; a kind the policies list is not checked twice.
#[test]
fn pod_templates_of_kinds_no_policy_lists_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "rollout.yaml",
        "apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers: [{name: app, image: 'nginx:latest', securityContext: {privileged: true}}]
---
apiVersion: example.com/v1
kind: NightlyJob
metadata: {name: report, namespace: shop}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          hostNetwork: true
          containers: [{name: r, image: 'registry.example.com/report:1.0'}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: app, image: 'nginx:latest'}]
",
    );
    let r = run_on(dir.path(), |_| {});
    assert_eq!(r.objects, 3, "templates are not objects of their own");
    let on = |policy: &str, kind: &str| -> Vec<&Finding> {
        findings(&r, policy)
            .into_iter()
            .filter(|f| f.object.kind == kind)
            .collect()
    };
    let latest = on("disallow-latest-tag", "Rollout");
    assert_eq!(latest.len(), 1, "{:?}", r.results);
    assert_eq!(latest[0].object.namespace.as_deref(), Some("shop"));
    assert_eq!(latest[0].source.line, 5, "reported at spec.template");
    let pss = on("pod-security-baseline", "Rollout");
    assert!(
        pss.iter().any(|f| f.message.contains("privileged")),
        "{pss:?}"
    );
    let nightly = on("pod-security-baseline", "NightlyJob");
    assert!(
        nightly.iter().any(|f| f.message.contains("hostNetwork")),
        "{:?}",
        r.results
    );
    assert_eq!(on("disallow-latest-tag", "Deployment").len(), 1);
    assert!(on("disallow-latest-tag", "PodTemplate").is_empty());
}

/// A policy that reads fields kube-apiserver defaults: the answer offline
/// is the answer in admission, unless `--no-defaults`; the finding stays at
/// the object's line either way.
#[test]
fn objects_are_defaulted_before_policies_read_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "policy/pull.yaml",
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: pull-always}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: \"object.spec.containers.all(c, c.?imagePullPolicy.orValue('') == 'Always')\"
    message: pull every time
  - expression: \"object.spec.containers.all(c, has(c.resources.requests))\"
    message: requests are set
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: pull-always}
spec: {policyName: pull-always, validationActions: [Deny]}
",
    );
    write(
        dir.path(),
        "app/pods.yaml",
        "# two pods
apiVersion: v1
kind: Pod
metadata: {name: untagged}
spec:
  containers:
  - {name: c, image: nginx, resources: {limits: {cpu: '1'}}}
---
apiVersion: v1
kind: Pod
metadata: {name: pinned}
spec:
  containers:
  - {name: c, image: 'nginx:1.27', resources: {limits: {cpu: '1'}}}
",
    );
    let check = |no_defaults: bool| {
        let r = run_on(&dir.path().join("app"), |o| {
            o.policies = vec![dir.path().join("policy")];
            o.no_defaults = no_defaults;
        });
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        r.results
            .iter()
            .map(|f| (f.object.name.clone(), f.message.clone(), f.source.line))
            .collect::<Vec<_>>()
    };
    // Defaulted: the untagged image is pulled Always, requests come from
    // limits; the tagged one is IfNotPresent.
    assert_eq!(
        check(false),
        vec![("pinned".to_string(), "pull every time".to_string(), 9)]
    );
    // As written: neither has a pull policy nor requests.
    let mut as_written = check(true);
    as_written.sort();
    let expected: Vec<(String, String, usize)> = [
        ("pinned", "pull every time", 9),
        ("pinned", "requests are set", 9),
        ("untagged", "pull every time", 2),
        ("untagged", "requests are set", 2),
    ]
    .iter()
    .map(|(n, m, l)| (n.to_string(), m.to_string(), *l))
    .collect();
    assert_eq!(as_written, expected);
}

/// A policy on a CRD kind, with a typo and a wrong type in its expressions.
const WIDGET_POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: widget-size}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [example.com], apiVersions: [v1], resources: [widgets], operations: [CREATE]}
  validations:
  - expression: \"object.spec.size < 10 || object.spec.sise == 1\"
    messageExpression: \"'size ' + object.spec.size\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: widget-size}
spec: {policyName: widget-size, validationActions: [Deny]}
";

const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {plural: widgets, kind: Widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
";

#[test]
fn type_check_warnings_are_notices_typed_by_the_crds_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policies = tempfile::tempdir().expect("tempdir");
    write(policies.path(), "policy.yaml", WIDGET_POLICY);
    write(dir.path(), "crd.yaml", WIDGET_CRD);
    write(
        dir.path(),
        "widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: a}\nspec: {size: 3}\n",
    );
    let r = run_on(dir.path(), |o| {
        o.policies = vec![policies.path().to_path_buf()]
    });
    let notes: Vec<&str> = r.notices.iter().map(|n| n.message.as_str()).collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].starts_with("policy widget-size: kube-apiserver's type check of spec.validations[0].expression: example.com/v1, Kind=Widget: ERROR: <input>:1:37: undefined field 'sise'"), "{notes:?}");
    assert!(notes[1].contains("spec.validations[0].messageExpression: example.com/v1, Kind=Widget: ERROR: <input>:1:9: found no matching overload for '_+_' applied to '(string, int)'"), "{notes:?}");
    assert_eq!(r.notices[0].line, Some(1));
    // Warnings only: the object is admitted and the run succeeds.
    assert!(
        r.results.is_empty() && r.errors.is_empty(),
        "{:?}",
        r.results
    );
    assert_eq!(r.exit_code(), 0);
    // Without the CRD the kind has no schema: no warnings, as in kube.
    fs::remove_file(dir.path().join("crd.yaml")).expect("remove");
    let r = run_on(dir.path(), |o| {
        o.policies = vec![policies.path().to_path_buf()]
    });
    assert!(r.notices.is_empty(), "{:?}", r.notices);
}

const PDB_FOR_WEB: &str = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: NS}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
";

/// A lookup that finds nothing settles nothing where the files cannot show
/// every object: kube-system (the distribution fills it), and a namespace
/// a HelmRelease or an Argo CD Application installs into.
#[test]
fn absences_in_namespaces_the_files_cannot_show_are_notices() {
    let dir = tempfile::tempdir().expect("tempdir");
    for ns in ["shop", "kube-system", "dns", "web"] {
        write(
            dir.path(),
            &format!("{ns}/pdb.yaml"),
            &PDB_FOR_WEB.replace("NS", ns),
        );
    }
    write(
        dir.path(),
        "dns/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: dns}\nspec: {}\n",
    );
    write(
        dir.path(),
        "apps/web.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: web, namespace: argocd}\nspec: {destination: {namespace: web}}\n",
    );
    let r = run_on(dir.path(), |_| {});
    let pdb: Vec<String> = findings(&r, "pdb-selects-workload")
        .iter()
        .map(|f| f.object.to_string())
        .collect();
    assert_eq!(pdb.len(), 1, "{pdb:?}");
    assert!(pdb[0].contains("shop/web"), "{pdb:?}");
    let notices: Vec<&str> = r.notices.iter().map(|n| n.message.as_str()).collect();
    for why in [
        "the cluster's own components live in kube-system",
        "installs into namespace dns",
        "installs into namespace web",
    ] {
        assert!(
            notices.iter().any(|n| n.contains(why)),
            "{why}: {notices:#?}"
        );
    }
}

#[test]
fn objects_the_readme_creates_by_hand_are_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(dir.path().join(".git")).expect("mkdir");
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: gateway, namespace: demo}\nspec:\n  serviceAccountName: gateway-ksa\n  containers: [{name: c, image: 'nginx:1.27', envFrom: [{configMapRef: {name: gateway-env}}, {configMapRef: {name: gateway-extra}}]}]\n";
    write(dir.path(), "deploy/gateway.yaml", pod);
    // kubectl's reference: `kubectl create configmap NAME`, and
    // `kubectl create serviceaccount NAME -n NS` in the namespace named.
    write(
        dir.path(),
        "README.md",
        "```\nkubectl create configmap gateway-env --from-literal url=https://example.test\nkubectl create serviceaccount gateway-ksa -n elsewhere\n```\n",
    );
    let r = run_on(&dir.path().join("deploy"), |_| {});
    let refs = findings(&r, "pod-references-exist");
    assert_eq!(refs.len(), 1, "{:?}", r.results);
    // gateway-env is given by the README; gateway-extra is not, and the
    // ServiceAccount is made in another namespace.
    assert!(
        refs[0].message.contains("ConfigMap gateway-extra"),
        "{}",
        refs[0].message
    );
    assert!(
        refs[0].message.contains("ServiceAccount gateway-ksa"),
        "{}",
        refs[0].message
    );
    assert!(
        !refs[0].message.contains("gateway-env"),
        "{}",
        refs[0].message
    );
    assert!(
        r.notices.iter().any(|n| n.message.starts_with(
            "ConfigMap gateway-env is created by hand (kubectl create at README.md:2)"
        )),
        "{:?}",
        r.notices
    );
}
