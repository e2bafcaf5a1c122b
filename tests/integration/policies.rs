//! The bundled policy library's own test cases (policies/NAME/tests/*.yaml)
//! and `interlock check` over examples/, end to end through the binary.

use crate::support::rng;

use interlock::check::policy_test::{discover, run_case};
use serde_json::{json, Value as Json};
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_bundled_policy_case_passes() {
    let cases = discover(&[root().join("policies")]);
    assert!(
        cases.len() >= 20,
        "expected the library's test cases, found {}",
        cases.len()
    );
    let failures: Vec<String> = cases
        .iter()
        .map(|(p, c)| run_case(p, c))
        .filter(|r| !r.passed())
        .map(|r| format!("{}: {}", r.file.display(), r.failures.join("; ")))
        .collect();
    assert!(
        failures.is_empty(),
        "failing policy cases:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_cross_object_policy_has_allowed_and_denied_cases() {
    for name in [
        "unique-ingress-host",
        "service-port-names-agree",
        "pod-references-exist",
        "pdb-selects-workload",
        "hpa-target-exists",
    ] {
        let cases = discover(&[root().join("policies").join(name)]);
        assert!(cases.len() >= 3, "{name} has {} cases", cases.len());
    }
}

/// `serve` watches the kinds that lookups name with constants; a lookup that
/// computes its kind finds only what is watched for other reasons. Before
/// the library named every kind it looks up, `serve` on a cluster refused
/// a Pod mounting an existing ConfigMap, and an HPA scaling an existing
/// StatefulSet, as referring to objects that do not exist.
#[test]
fn serve_watches_every_kind_the_library_looks_up() {
    let mut report = interlock::check::Report::default();
    let docs = interlock::check::run::load_policy_documents(&[], &mut report);
    let mut inventory = interlock::inventory::Inventory::new();
    let (set, errors) = interlock::policy::PolicySet::compile_documents(docs);
    inventory.set_indexes(&set.index_decls()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(set.with_computed_lookups(), Vec::<&str>::new());
    let kinds = set.kinds_read();
    for (api_version, kind) in [
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "ReplicaSet"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "ServiceAccount"),
        ("v1", "PersistentVolumeClaim"),
    ] {
        assert!(
            kinds.contains(&interlock::k8s::kind::GroupVersionKind::from_api_version(
                api_version,
                kind
            )),
            "{api_version} {kind} is not watched: {kinds:?}"
        );
    }
}

fn interlock(args: &[&str]) -> std::process::Output {
    // The control plane's kubectl renders the corpus's kustomizations.
    let bin = crate::support::cluster::control_plane_dir().expect("control plane");
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(args)
        .env("PATH", path)
        .current_dir(root())
        .output()
        .expect("run interlock")
}

#[test]
fn check_examples_reports_the_deliberate_violations_as_json() {
    let out = interlock(&["check", "-o", "json", "examples"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a Deny finding exits 1; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let results = v["results"].as_array().expect("results");
    assert_eq!(
        v["summary"]["violations"].as_u64(),
        Some(results.len() as u64)
    );
    let has = |policy: &str, kind: &str, name: &str| {
        results.iter().any(|r| {
            r["policy"] == policy
                && r["object"]["kind"] == kind
                && r["object"]["name"] == name
                && r["action"] == "Deny"
        })
    };
    assert!(has("unique-ingress-host", "Ingress", "blog-promo"));
    assert!(has(
        "hpa-target-exists",
        "HorizontalPodAutoscaler",
        "blog-frontend"
    ));
    assert!(has("pod-security-baseline", "Pod", "debug-toolbox"));
    for r in results {
        assert!(r["source"]["file"]
            .as_str()
            .is_some_and(|f| f.starts_with("examples/")));
        assert!(r["source"]["line"].as_u64().is_some_and(|l| l >= 1));
    }
}

#[test]
fn bad_input_exits_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: [unclosed\n",
    )
    .unwrap();
    let out = interlock(&["check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("bad.yaml:"), "{text}");
}

#[test]
fn a_policy_that_does_not_compile_exits_2_with_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.yaml");
    std::fs::write(&p, "apiVersion: interlock.dev/v1alpha1\nkind: InterlockPolicy\nmetadata:\n  name: broken\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE]}]\n  validations:\n    - expression: \"objct.spec != null\"\n").unwrap();
    let out = interlock(&["check", "-p", p.to_str().unwrap(), "examples"]);
    assert_eq!(out.status.code(), Some(2));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    // The line and column of the expression itself, not of the document.
    assert!(text.contains("p.yaml:9:20: policy broken"), "{text}");
    assert!(text.contains("undeclared reference to 'objct'"), "{text}");
    assert!(text.contains("spec.validations[0].expression"), "{text}");
}

#[test]
fn eval_prints_type_and_value() {
    let out = interlock(&["eval", "-e", "duration('1h') + duration('30m')"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"type": "google.protobuf.Duration", "value": "5400s"})
    );
    let out = interlock(&["eval", "-e", "{'a': [1, 2u, 3.5]}.a"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "mixed list literal is a compile error"
    );
    let out = interlock(&["eval", "-e", "1 / 0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("division by zero"));
    let out = interlock(&["eval", "-e", "objct"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<input>:1:1"));
}

#[test]
fn eval_reads_objects_and_the_inventory() {
    let out = interlock(&[
        "eval",
        "-e",
        "inventory.list('networking.k8s.io/v1', 'Ingress', '').map(i, i.metadata.name).sort()",
        "--inventory",
        "examples",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "list");
    assert!(v["value"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n == "blog-promo"));
}

/// pod-references-exist decides with `allExist` (no lists built) and names
/// what is missing with `missing`: both must read the same references. Over
/// generated Pods and workloads (every reference kind, optional and empty
/// names, some objects present), a copy of the policy whose validation is
/// their agreement finds nothing, while the policy itself both admits and
/// denies some of them.
#[test]
fn pod_references_exist_decides_as_its_message_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = std::fs::read_to_string(root().join("policies/pod-references-exist/policy.yaml"))
        .expect("the policy");
    let decision = "- expression: \"variables.allExist\"";
    assert!(policy.contains(decision), "the policy decides by allExist");
    let agreement = policy.replace(
        decision,
        "- expression: \"variables.allExist == (variables.missing.size() == 0)\"",
    );
    std::fs::write(dir.path().join("agreement.yaml"), agreement).expect("write");
    let objects = dir.path().join("objects");
    std::fs::create_dir(&objects).expect("mkdir");
    let pods = 300;
    std::fs::write(objects.join("all.yaml"), reference_objects(pods, 7)).expect("write");

    let run = |policy: &std::path::Path| {
        let out = interlock(&[
            "check",
            "-o",
            "json",
            "-p",
            policy.to_str().unwrap(),
            objects.to_str().unwrap(),
        ]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
        });
        v["summary"]["violations"].as_u64().expect("a count")
    };
    assert_eq!(run(&dir.path().join("agreement.yaml")), 0);
    let denied = run(&root().join("policies/pod-references-exist/policy.yaml"));
    assert!(
        denied > pods / 10 && denied < pods * 9 / 10,
        "{denied} of {pods} denied: the generated objects should exercise both answers"
    );
}

/// Generated Pod specs, reproducible from a seed.
struct Gen(rng::Rng);

impl Gen {
    fn pick(&mut self, n: u64) -> u64 {
        self.0.below(n as usize) as u64
    }

    /// Mostly names that exist (`a`, `b`), sometimes one that does not, or
    /// none.
    fn name(&mut self) -> &'static str {
        ["a", "b", "a", "b", "a", "b", "c", ""][self.pick(8) as usize]
    }

    /// `{key: NAME}`, sometimes marked optional.
    fn reference(&mut self, key: &str) -> Json {
        let mut r = json!({ key: self.name() });
        if self.pick(5) == 0 {
            r["optional"] = (self.pick(2) == 0).into();
        }
        r
    }

    fn container(&mut self, c: u64) -> Json {
        let env: Vec<Json> = (0..self.pick(4))
            .map(|e| {
                let mut var = json!({"name": format!("E{e}")});
                match self.pick(4) {
                    0 => var["valueFrom"] = json!({"configMapKeyRef": self.reference("name")}),
                    1 => var["valueFrom"] = json!({"secretKeyRef": self.reference("name")}),
                    2 => var["valueFrom"] = json!({"fieldRef": {"fieldPath": "metadata.name"}}),
                    _ => var["value"] = "x".into(),
                }
                var
            })
            .collect();
        let env_from: Vec<Json> = (0..self.pick(3))
            .map(|_| match self.pick(2) {
                0 => json!({"configMapRef": self.reference("name")}),
                _ => json!({"secretRef": self.reference("name")}),
            })
            .collect();
        json!({"name": format!("c{c}"), "image": "x:1", "env": env, "envFrom": env_from})
    }

    fn volume(&mut self, v: u64) -> Json {
        let mut vol = json!({"name": format!("v{v}")});
        match self.pick(5) {
            0 => vol["configMap"] = self.reference("name"),
            1 => vol["secret"] = self.reference("secretName"),
            2 => vol["persistentVolumeClaim"] = json!({"claimName": self.name()}),
            3 => {
                let sources: Vec<Json> = (0..self.pick(3))
                    .map(|_| match self.pick(3) {
                        0 => json!({"configMap": self.reference("name")}),
                        1 => json!({"secret": self.reference("name")}),
                        _ => json!({"downwardAPI": {}}),
                    })
                    .collect();
                vol["projected"] = json!({ "sources": sources });
            }
            _ => vol["emptyDir"] = json!({}),
        }
        vol
    }

    fn pod_spec(&mut self) -> Json {
        let containers: Vec<Json> = (0..1 + self.pick(3)).map(|c| self.container(c)).collect();
        let volumes: Vec<Json> = (0..self.pick(4)).map(|v| self.volume(v)).collect();
        let mut spec = json!({"containers": containers, "volumes": volumes});
        if self.pick(3) == 0 {
            spec["initContainers"] = json!([self.container(9)]);
        }
        if self.pick(3) == 0 {
            spec["imagePullSecrets"] = json!([{ "name": self.name() }]);
        }
        match self.pick(4) {
            0 => {
                spec["serviceAccountName"] = ["a", "c", "default", ""][self.pick(4) as usize].into()
            }
            1 => spec["serviceAccount"] = ["a", "c"][self.pick(2) as usize].into(),
            _ => {}
        }
        spec
    }
}

/// ConfigMaps, Secrets, ServiceAccounts and PVCs `a` and `b` in namespace
/// `ns`, and `pods` Pods, Deployments, Jobs and CronJobs referencing them,
/// `c` and `""` through every path pod-references-exist reads.
fn reference_objects(pods: u64, seed: u64) -> String {
    let mut rng = Gen(rng::Rng(seed));
    let mut docs = Vec::new();
    for kind in [
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "PersistentVolumeClaim",
    ] {
        for name in ["a", "b"] {
            docs.push(json!({"apiVersion": "v1", "kind": kind,
                             "metadata": {"name": name, "namespace": "ns"}}));
        }
    }
    for i in 0..pods {
        let spec = rng.pod_spec();
        let meta = json!({"name": format!("p{i}"), "namespace": "ns"});
        let template = json!({"metadata": {"labels": {"app": "x"}}, "spec": spec});
        docs.push(match rng.pick(4) {
            0 => json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}),
            1 => json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}}),
            2 => json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                        "spec": {"template": template}}),
            _ => json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
                        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}}),
        });
    }
    docs.iter()
        .map(Json::to_string)
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Full objects of every kind a bundled policy matches, each field set.
fn full_objects() -> Vec<Json> {
    let container = json!({
        "name": "app", "image": "registry.example.com/app:1.2",
        "ports": [{"name": "http", "containerPort": 8080, "hostPort": 0}],
        "env": [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "p"}}},
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "m"}}}],
        "envFrom": [{"configMapRef": {"name": "cfg"}}, {"secretRef": {"name": "db"}}],
        "resources": {"limits": {"memory": "128Mi", "cpu": "1"}, "requests": {"cpu": "100m"}},
        "securityContext": {"privileged": false, "capabilities": {"add": ["NET_BIND_SERVICE"]},
                            "seLinuxOptions": {"type": "container_t"}, "seccompProfile": {"type": "RuntimeDefault"},
                            "procMount": "Default", "windowsOptions": {"hostProcess": false}},
        "livenessProbe": {"httpGet": {"path": "/", "port": 8080}},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}}
    });
    let pod_spec = json!({
        "serviceAccountName": "app",
        "imagePullSecrets": [{"name": "pull"}],
        "securityContext": {"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}],
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container.clone()],
        "initContainers": [container.clone()],
        "volumes": [
            {"name": "c", "configMap": {"name": "cfg"}},
            {"name": "s", "secret": {"secretName": "db"}},
            {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "p", "projected": {"sources": [{"configMap": {"name": "cfg"}}, {"secret": {"name": "db"}}]}},
            {"name": "h", "hostPath": {"path": "/tmp"}}
        ]
    });
    let template = json!({"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}}, "spec": pod_spec});
    let meta = |name: &str| json!({"name": name, "namespace": "t", "labels": {"app": "web"}});
    let workload = |api: &str, kind: &str| {
        json!({"apiVersion": api, "kind": kind, "metadata": meta("w"),
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template,
                        "volumeClaimTemplates": [{"metadata": {"name": "d"}}]}})
    };
    vec![
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta("p"), "spec": pod_spec}),
        workload("apps/v1", "Deployment"),
        workload("apps/v1", "StatefulSet"),
        workload("apps/v1", "DaemonSet"),
        workload("apps/v1", "ReplicaSet"),
        workload("batch/v1", "Job"),
        workload("v1", "ReplicationController"),
        json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta("pt"), "template": template}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("cj"),
               "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta("svc"),
               "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta("ing"),
               "spec": {"rules": [{"host": "a.example.com", "http": {"paths": [{"path": "/"}]}}],
                        "tls": [{"hosts": ["a.example.com"]}]}}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta("pdb"),
               "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}}}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta("hpa"),
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"},
                        "minReplicas": 1, "maxReplicas": 3}}),
    ]
}

/// Every path of a JSON tree below its top level (metadata name,
/// namespace, apiVersion and kind kept: the loader requires them).
fn paths(v: &Json, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let children: Vec<(String, &Json)> = match v {
        Json::Object(m) => m.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Json::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => return,
    };
    for (k, child) in children {
        at.push(k);
        let segs: Vec<&str> = at.iter().map(String::as_str).collect();
        // The loader requires apiVersion, kind and the name; kube-apiserver
        // refuses a selector requirement without key or operator before
        // any admission webhook sees the object.
        let keep = matches!(
            segs.as_slice(),
            ["apiVersion" | "kind"] | ["metadata"] | ["metadata", "name" | "namespace"]
        ) || matches!(
            segs.as_slice(),
            [.., "matchExpressions", _, "key" | "operator"]
        );
        if !keep {
            out.push(at.clone());
        }
        paths(child, at, out);
        at.pop();
    }
}

/// Removes the node at `path`, or empties it (same type, no content).
fn cut(v: &mut Json, path: &[String], empty: bool) {
    let (last, parents) = path.split_last().expect("a path");
    let mut node = v;
    for p in parents {
        node = match node {
            Json::Object(m) => m.get_mut(p).expect("a key"),
            Json::Array(a) => &mut a[p.parse::<usize>().expect("an index")],
            _ => return,
        };
    }
    match node {
        Json::Object(m) if empty => {
            if let Some(child) = m.get_mut(last) {
                match child {
                    Json::Object(c) => c.clear(),
                    Json::Array(c) => c.clear(),
                    _ => {
                        m.remove(last);
                    }
                }
            }
        }
        Json::Object(m) => {
            m.remove(last);
        }
        Json::Array(a) => {
            a.remove(last.parse::<usize>().expect("an index"));
        }
        _ => {}
    }
}

/// Every bundled policy reads absent fields with optionals: over minimal
/// objects and over every object with one field removed or emptied (a
/// kustomize patch, a half-written manifest), no evaluation error is shown
/// as a finding. (A finding from an error has "resulted in error" in its
/// message, or "failed expression" when its messageExpression failed.)
#[test]
fn no_bundled_policy_fails_on_minimal_or_partial_objects() {
    let policies = interlock::bundled::documents();
    assert!(policies.errors.is_empty(), "{:?}", policies.errors);
    let mut objects: Vec<Json> = Vec::new();
    for full in full_objects() {
        objects.push(
            json!({"apiVersion": full["apiVersion"], "kind": full["kind"],
                            "metadata": {"name": "minimal", "namespace": "t"}}),
        );
        let mut all = Vec::new();
        paths(&full, &mut vec![], &mut all);
        for (i, path) in all.iter().enumerate() {
            let mut partial = full.clone();
            cut(&mut partial, path, i % 2 == 1);
            partial["metadata"]["name"] = json!(format!("cut-{i}"));
            objects.push(partial);
        }
        objects.push(full);
    }
    assert!(objects.len() > 500, "{} objects", objects.len());
    let docs: Vec<interlock::manifest::Document> = objects
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            interlock::manifest::Document::new(interlock::manifest::Source::Stdin, i + 1, v)
        })
        .collect();
    let opts = interlock::check::CheckOptions {
        user: interlock::check::DEFAULT_USER.into(),
        ..Default::default()
    };
    let mut report = interlock::check::Report::default();
    interlock::check::check_documents(&policies.documents, &docs, &opts, &mut report);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let failures: Vec<String> = report
        .results
        .iter()
        .filter(|f| {
            f.message.contains("resulted in error") || f.message.starts_with("failed expression")
        })
        .map(|f| {
            format!(
                "{} line {} ({}): {}",
                f.policy, f.source.line, f.object, f.message
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{}",
        failures[..failures.len().min(10)].join("\n")
    );
    // The generated objects do break rules: the check did evaluate them.
    assert!(
        report.results.len() > 100,
        "{} findings",
        report.results.len()
    );
}

/// `interlock check tests/corpus` (official-install-shaped Argo CD,
/// ingress-nginx, kube-prometheus and microservices-demo manifests, and a
/// team's kustomize/Helm monorepo) reports exactly the findings classified
/// in tests/corpus/findings.tsv, and the precision table of
/// policies/README.md states their counts.
#[test]
fn the_corpus_findings_are_the_classified_ones() {
    let out = interlock(&[
        "check",
        "-o",
        "json",
        root().join("tests/corpus").to_str().unwrap(),
    ]);
    let report: Json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    let key = |policy: &str, action: &str, object: &str| format!("{policy}\t{action}\t{object}");
    let mut got: Vec<String> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let o = &r["object"];
            let object = format!(
                "{} {}/{}",
                o["kind"].as_str().unwrap_or(""),
                o["namespace"].as_str().unwrap_or(""),
                o["name"].as_str().unwrap_or("")
            );
            key(
                r["policy"].as_str().unwrap_or(""),
                r["action"].as_str().unwrap_or(""),
                &object,
            )
        })
        .collect();
    let table =
        std::fs::read_to_string(root().join("tests/corpus/findings.tsv")).expect("findings.tsv");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').collect())
        .collect();
    let mut want: Vec<String> = rows.iter().map(|r| key(r[0], r[1], r[2])).collect();
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "the corpus findings changed: classify them in tests/corpus/findings.tsv"
    );
    // Per policy: findings, true, false, as the README's table says.
    let readme = std::fs::read_to_string(root().join("policies/README.md")).expect("README");
    let mut policies: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    policies.sort();
    policies.dedup();
    for p in policies {
        let of: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == p).collect();
        let tp = of.iter().filter(|r| r[3] == "TP").count();
        let line = format!("| `{p}` | {} | {tp} | {} |", of.len(), of.len() - tp);
        assert!(
            readme.contains(&line),
            "policies/README.md lacks the row {line}"
        );
    }
}
