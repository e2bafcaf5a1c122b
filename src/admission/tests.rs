use super::*;
use crate::inventory::ObjectKey;
use kube::core::admission::AdmissionReview;
use serde_json::json;

/// The shared unique-host policy, plus a mutation.
fn policy() -> String {
    format!(
        "{}{}",
        crate::fixtures::UNIQUE_HOST,
        "  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: \"[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'checked': 'yes'}}]\"
"
    )
}

fn engine(ready: bool) -> Engine {
    engine_with(ready, EngineOptions::default())
}

fn engine_with(ready: bool, options: EngineOptions) -> Engine {
    engine_of(&policy(), ready, options)
}

fn engine_of(policies: &str, ready: bool, options: EngineOptions) -> Engine {
    let docs = crate::manifest::load_str(
        crate::manifest::Source::file("p.yaml"),
        policies,
        crate::manifest::Format::Yaml,
        &Default::default(),
    );
    assert!(docs.errors.is_empty(), "{:?}", docs.errors);
    let mut inv = Inventory::new();
    let (set, errors) = PolicySet::compile_documents(docs.documents);
    inv.set_indexes(&set.index_decls()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    inv.set_projection(set.projection());
    let e = Engine::new(set, inv, options);
    e.set_ready(ready);
    e
}

/// Through the server's parse (oldObject kept as text), a policy that
/// reads oldObject sees it, and an objectSelector matches the old
/// object's labels.
#[test]
fn old_object_is_read_when_a_policy_reads_it() {
    const POLICIES: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: immutable-mode}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["UPDATE"]}
  validations:
    - expression: "object.data.mode == oldObject.data.mode"
      message: mode is immutable
---
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: frozen-label}
spec:
  validationActions: [Deny]
  matchConstraints:
    objectSelector: {matchLabels: {frozen: "yes"}}
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["UPDATE"]}
  validations:
    - expression: "false"
      message: frozen
"#;
    let e = engine_of(POLICIES, true, EngineOptions::default());
    let answer = |old_labels: Json, old_mode: &str, mode: &str| {
        let cm = |labels: Json, mode: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "c", "namespace": "n", "labels": labels},
                   "data": {"mode": mode}})
        };
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "operation": "UPDATE", "name": "c", "namespace": "n",
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "userInfo": {"username": "alice"},
                "object": cm(json!({}), mode),
                "oldObject": cm(old_labels, old_mode),
            }
        });
        let (status, out) =
            crate::server::answer_body(&e, false, &serde_json::to_vec(&body).unwrap());
        assert_eq!(status, 200);
        let out: Json = serde_json::from_slice(&out).unwrap();
        let message = out["response"]["status"]["message"]
            .as_str()
            .map(str::to_owned);
        (out["response"]["allowed"] == true, message)
    };
    assert_eq!(answer(json!({}), "a", "a"), (true, None));
    let (allowed, message) = answer(json!({}), "a", "b");
    assert!(!allowed && message.unwrap().contains("mode is immutable"));
    let (allowed, message) = answer(json!({"frozen": "yes"}), "a", "a");
    assert!(!allowed && message.unwrap().contains("frozen"));
}

#[test]
fn an_expired_record_never_blocks_requests_that_would_not_record() {
    let e = engine_with(
        true,
        EngineOptions {
            pending_ttl: Duration::from_millis(300),
            ..EngineOptions::default()
        },
    );
    // Admitted, then (say) refused by another admission step: the watch
    // never shows it, and its record expires.
    assert!(e.validate(&review("a", "one", "x.example", false)).allowed);
    assert!(!e.validate(&review("b", "two", "x.example", true)).allowed);
    std::thread::sleep(Duration::from_millis(400));
    // A dry run records nothing, yet it must not see the expired record.
    assert!(e.validate(&review("b", "two", "x.example", true)).allowed);
    // Expired before the decision, not after it: a decision made again
    // under the write lock would stall every request for as long as
    // its lookups take.
    assert_eq!(e.metrics.reevaluations.get(), 0);
}

fn review(ns: &str, name: &str, host: &str, dry_run: bool) -> AdmissionRequest<DynamicObject> {
    let obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": ns, "name": name}, "spec": {"rules": [{"host": host}]}});
    let r: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
            "resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
            "name": name, "namespace": ns, "operation": "CREATE",
            "userInfo": {"username": "alice"}, "object": obj, "dryRun": dry_run}
    }))
    .unwrap();
    r.try_into().unwrap()
}

fn group_review(ns: &str, resources: serde_json::Value) -> AdmissionRequest<DynamicObject> {
    let obj = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"namespace": ns, "name": "shop"},
        "spec": {"serviceAccountName": "deployer", "resources": resources}});
    let r: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-2", "kind": {"group": "interlock.dev", "version": "v1alpha1", "kind": "ResourceGroup"},
            "resource": {"group": "interlock.dev", "version": "v1alpha1", "resource": "resourcegroups"},
            "name": "shop", "namespace": ns, "operation": "CREATE",
            "userInfo": {"username": "alice"}, "object": obj}
    }))
    .unwrap();
    r.try_into().unwrap()
}

/// A group is judged at admission by its members, against the
/// inventory with them in place: a host another tenant holds is refused,
/// without naming that tenant's object; two members of one group may
/// not claim one host either.
#[test]
fn a_resource_group_is_refused_for_its_members_findings() {
    let e = engine(true);
    assert!(
        e.validate(&review("other", "theirs", "taken.example", false))
            .allowed
    );
    let ing = |name: &str, host: &str| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name}, "spec": {"rules": [{"host": host}]}})
    };
    let resp = e.validate(&group_review("t", json!([ing("web", "taken.example")])));
    assert!(!resp.allowed);
    let m = &resp.result.message;
    assert!(m.contains("member Ingress web: unique-host"), "{m}");
    assert!(
        m.contains("Ingress in another namespace") && !m.contains("theirs"),
        "{m}"
    );
    let resp = e.validate(&group_review(
        "t",
        json!([ing("a", "new.example"), ing("b", "new.example")]),
    ));
    assert!(!resp.allowed, "two members claim one host");
    assert!(
        e.validate(&group_review("t", json!([ing("a", "free.example")])))
            .allowed
    );
}

#[test]
fn unready_inventory_answers_by_failure_policy() {
    let e = engine(false);
    let resp = e.validate(&review("a", "one", "x.example", false));
    assert!(!resp.allowed);
    assert!(
        resp.result.message.contains("still loading"),
        "{}",
        resp.result.message
    );
    assert_eq!(resp.result.code, 503);
}

#[test]
fn an_admitted_write_is_seen_by_the_next_request_and_names_are_redacted() {
    let e = engine(true);
    // A dry run is evaluated but not recorded.
    assert!(e.validate(&review("a", "one", "x.example", true)).allowed);
    assert!(e.validate(&review("a", "one", "x.example", false)).allowed);
    let resp = e.validate(&review("b", "two", "x.example", false));
    assert!(!resp.allowed, "the pending write must block the duplicate");
    let m = &resp.result.message;
    assert!(
        m.starts_with("interlock policy 'unique-host': host taken by Ingress in another namespace"),
        "{m}"
    );
    assert!(!m.contains("a/one"), "{m}");
    assert_eq!(resp.result.code, 422);
    // In the same namespace the conflicting object is named.
    let resp = e.validate(&review("a", "three", "x.example", false));
    assert!(
        resp.result.message.contains("a/one"),
        "{}",
        resp.result.message
    );
}

#[test]
fn fifty_parallel_creates_of_one_host_admit_exactly_one() {
    let e = std::sync::Arc::new(engine(true));
    let handles: Vec<_> = (0..50)
        .map(|i| {
            let e = e.clone();
            std::thread::spawn(move || {
                let req = review(&format!("ns-{i}"), "shop", "race.example", false);
                // The server's path: the objects as parsed JSON.
                let parsed = ParsedReview {
                    object: req
                        .object
                        .as_ref()
                        .map(|o| serde_json::to_value(o).unwrap()),
                    old_object: None,
                    request: AdmissionRequest {
                        object: None,
                        ..req
                    },
                };
                e.validate_parsed(parsed).allowed
            })
        })
        .collect();
    let admitted = handles
        .into_iter()
        .map(|h| h.join().expect("no panic"))
        .filter(|&a| a)
        .count();
    assert_eq!(admitted, 1, "admitted {admitted} of 50 creates of one host");
}

/// A decision made under the read lock is made again before its write
/// is recorded only if a write since changed a kind its policies read,
/// or the policies changed.
#[test]
fn an_evaluation_holds_unless_a_write_since_changed_a_kind_it_reads() {
    // One policy on Pods that looks up ConfigMaps, one on Services whose
    // lookup computes its kind.
    const LOOKUPS: &str = r#"
---
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: config-exists}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"]}
  validations:
    - expression: "inventory.get('v1', 'ConfigMap', object.metadata.namespace, object.spec.config).hasValue()"
---
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: any-kind}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: ["v1"], resources: ["services"], operations: ["CREATE"]}]}
  validations: [{expression: "!inventory.get('v1', object.spec.kind, 'n', 'x').hasValue()"}]
"#;
    let e = engine_of(
        &format!("{}{LOOKUPS}", policy()),
        true,
        EngineOptions::default(),
    );
    let object = |kind: &str, api: &str, name: &str| {
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "n"},
               "spec": {"rules": [{"host": "h.example"}], "config": "c", "kind": "Secret"}})
    };
    let ingress = object("Ingress", "networking.k8s.io/v1", "i");
    let pod = object("Pod", "v1", "p");
    let service = object("Service", "v1", "s");
    let holds = |seen: crate::cluster::Seen, o: &Json| {
        e.read(|st| {
            let outcome = st
                .policies
                .evaluate(&Request::create(o, "me").unwrap(), &st.inventory);
            st.still_holds(seen, &outcome)
        })
    };
    let add = |o: Json| {
        e.cluster
            .update_inventory(|inv, _| inv.upsert(&o, None).unwrap());
    };

    let seen = e.read(State::seen);
    assert!(holds(seen, &ingress) && holds(seen, &pod) && holds(seen, &service));
    add(object("ConfigMap", "v1", "c"));
    assert!(
        holds(seen, &ingress),
        "no policy on Ingresses reads ConfigMaps"
    );
    assert!(!holds(seen, &pod), "the Pod's policy reads ConfigMaps");
    assert!(!holds(seen, &service), "a computed kind may be any kind");

    let seen = e.read(State::seen);
    add(object("Ingress", "networking.k8s.io/v1", "other"));
    assert!(!holds(seen, &ingress), "the host index is on Ingresses");
    assert!(holds(seen, &pod));
    add(object("Namespace", "v1", "n"));
    assert!(
        !holds(seen, &pod),
        "selectors and namespaceObject read Namespaces"
    );

    let seen = e.read(State::seen);
    e.cluster.update_inventory(|inv, _| {
        inv.remove(&ObjectKey::of(&object("ConfigMap", "v1", "c")).unwrap())
    });
    assert!(!holds(seen, &pod), "a removal is a change");

    let seen = e.read(State::seen);
    e.update(|_| ());
    assert!(!holds(seen, &ingress), "the policies may have changed");
}

/// A write is recorded when its kind is one that policies look up,
/// whether or not a policy that reads the inventory matched it; the
/// inventory holds no other kinds, so a record of those would only wait
/// to expire.
/// A Pod must name an existing ConfigMap in `spec.config`.
const CONFIG_EXISTS: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: config-exists}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"]}
  validations:
    - expression: "inventory.get('v1', 'ConfigMap', object.metadata.namespace, object.spec.config).hasValue()"
      message: no such ConfigMap
"#;

/// A CREATE of a core `kind` in namespace `n`.
fn core_create(kind: &str, resource: &str, object: Json) -> AdmissionRequest<DynamicObject> {
    let r: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": resource},
            "name": object["metadata"]["name"], "namespace": "n", "operation": "CREATE",
            "userInfo": {"username": "alice"}, "object": object}
    }))
    .unwrap();
    r.try_into().unwrap()
}

#[test]
fn only_kinds_that_policies_look_up_are_recorded() {
    let e = engine_of(CONFIG_EXISTS, true, EngineOptions::default());
    let create = |kind: &str, resource: &str, object: Json| {
        e.validate(&core_create(kind, resource, object)).allowed
    };
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "p", "namespace": "n"}, "spec": {"config": "c"}});
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "c", "namespace": "n"}});
    let pending = || e.read(|st| (st.pending.len(), st.inventory.len()));
    assert!(!create("Pod", "pods", pod.clone()));
    // No policy matches ConfigMaps, but one looks them up.
    assert!(create("ConfigMap", "configmaps", config));
    assert_eq!(pending(), (1, 1));
    assert!(create("Pod", "pods", pod), "the pending ConfigMap is seen");
    assert_eq!(pending(), (1, 1), "no policy looks Pods up: not recorded");
}

/// A policy that never reads the inventory is evaluated without the
/// state's lock: while a writer holds it (or waits for it behind a long
/// reader), requests that only such policies match are still decided.
/// A policy that reads the inventory waits for the writer.
#[test]
fn only_policies_that_read_the_inventory_wait_for_the_lock() {
    const SECRET_HAS_DATA: &str = r#"
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: secret-has-data}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["secrets"], operations: ["CREATE"]}
  validations:
    - expression: "object.?data.orValue({}).size() > 0"
      message: an empty Secret
"#;
    let policies = format!("{CONFIG_EXISTS}---\n{SECRET_HAS_DATA}");
    let e = Arc::new(engine_of(&policies, true, EngineOptions::default()));
    let decide = |kind: &'static str, resource: &'static str, object: Json| {
        let e = Arc::clone(&e);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(e.validate(&core_create(kind, resource, object)));
        });
        rx
    };
    let writer = e.cluster().write();
    let secret = decide(
        "Secret",
        "secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"}}),
    );
    let answer = secret
        .recv_timeout(Duration::from_secs(60))
        .expect("decided while a writer holds the state");
    assert!(!answer.allowed);
    assert!(format!("{:?}", answer.result).contains("an empty Secret"));
    let pod = decide(
        "Pod",
        "pods",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "namespace": "n"}, "spec": {"config": "c"}}),
    );
    assert!(
        pod.recv_timeout(Duration::from_millis(300)).is_err(),
        "an inventory lookup must wait for the writer"
    );
    drop(writer);
    let answer = pod.recv_timeout(Duration::from_secs(60)).expect("decided");
    assert!(!answer.allowed, "no ConfigMap c");
}

/// A decision whose deadline passed (its interrupt set) records no
/// pending write: the apiserver got 503 and applies the webhook's
/// failurePolicy, and a record would block others' writes until it
/// expired. With failurePolicy Ignore the interrupted evaluation
/// allows, which without the check would have recorded the host.
#[test]
fn an_interrupted_decision_records_no_pending_write() {
    let ignoring = policy().replace(
        "spec:\n  matchConstraints:",
        "spec:\n  failurePolicy: Ignore\n  matchConstraints:",
    );
    assert_ne!(ignoring, policy());
    let e = engine_of(&ignoring, true, EngineOptions::default());
    let interrupt = crate::cel::Interrupt::new();
    interrupt.cancel();
    let resp = crate::cel::interrupt::scope(&interrupt, || {
        e.validate(&review("a", "one", "x.example", false))
    });
    assert!(resp.allowed, "failurePolicy Ignore: {:?}", resp.result);
    assert_eq!(interrupt.stats().interrupted, 1);
    assert_eq!(e.read(|st| st.pending.len()), 0);
    assert!(
        e.validate(&review("b", "two", "x.example", false)).allowed,
        "the interrupted write must not hold the host"
    );
}

#[test]
fn mutations_answer_a_json_patch() {
    let e = engine(true);
    let resp = e.mutate(&review("a", "one", "y.example", false));
    assert!(resp.allowed);
    let patch: Json = serde_json::from_slice(resp.patch.as_deref().expect("a patch")).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/annotations", "value": {"checked": "yes"}}])
    );
}

/// Asks nobody: records each question and allows only alice.
#[derive(Debug, Default)]
struct Recorder(std::sync::Mutex<Vec<crate::cel::k8s_authz::UserInfo>>);

impl Authorizer for Recorder {
    fn authorize(
        &self,
        user: &crate::cel::k8s_authz::UserInfo,
        _: &crate::cel::k8s_authz::Attributes,
        _: Option<&crate::cel::interrupt::Interrupt>,
    ) -> Option<crate::cel::k8s_authz::Decision> {
        self.0.lock().unwrap().push(user.clone());
        Some(crate::cel::k8s_authz::Decision {
            allowed: user.username == "alice",
            ..Default::default()
        })
    }
}

/// The AdmissionReview's whole userInfo reaches the authorizer; without
/// one (serving from files) the check is the offline error.
#[test]
fn checks_ask_the_authorizer_about_the_requests_user() {
    const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: readers}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["CREATE"]}
  validations:
    - expression: "authorizer.group('').resource('secrets').namespace('n').check('get').allowed()"
      message: may not read secrets
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: readers}
spec: {policyName: readers, validationActions: [Deny]}
"#;
    let recorder = Arc::new(Recorder::default());
    let with = engine_of(POLICY, true, EngineOptions::default())
        .with_authorizer(recorder.clone(), crate::cluster::authz::Metrics::default());
    let without = engine_of(POLICY, true, EngineOptions::default());
    let answer = |e: &Engine, user: &str| {
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "operation": "CREATE", "name": "c", "namespace": "n",
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "userInfo": {"username": user, "uid": "uid-1", "groups": ["devs"],
                             "extra": {"scopes": ["a", "b"]}},
                "object": {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "c", "namespace": "n"}},
            }
        });
        let (_, out) = crate::server::answer_body(e, false, &serde_json::to_vec(&body).unwrap());
        let out: Json = serde_json::from_slice(&out).unwrap();
        let message = out["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (out["response"]["allowed"] == true, message)
    };
    assert_eq!(answer(&with, "alice"), (true, String::new()));
    let (allowed, message) = answer(&with, "bob");
    assert!(
        !allowed && message.contains("may not read secrets"),
        "{message}"
    );
    let asked = recorder.0.lock().unwrap().clone();
    assert_eq!(
        asked[0],
        crate::cel::k8s_authz::UserInfo {
            username: "alice".into(),
            uid: "uid-1".into(),
            groups: vec!["devs".into()],
            extra: [("scopes".into(), vec!["a".into(), "b".into()])].into(),
        }
    );
    assert_eq!(asked.len(), 2);
    let (allowed, message) = answer(&without, "alice");
    assert!(
        !allowed && message.contains("authorizer unavailable"),
        "{message}"
    );

    // A ResourceGroup's members are asked about as the controller will
    // write them: by the group's ServiceAccount, not by who writes the
    // group.
    let group = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "g", "operation": "CREATE", "name": "g", "namespace": "n",
            "kind": {"group": "interlock.dev", "version": "v1alpha1", "kind": "ResourceGroup"},
            "resource": {"group": "interlock.dev", "version": "v1alpha1", "resource": "resourcegroups"},
            "userInfo": {"username": "alice", "groups": ["devs"]},
            "object": {"apiVersion": "interlock.dev/v1alpha1", "kind": "ResourceGroup",
                       "metadata": {"name": "g", "namespace": "n"},
                       "spec": {"serviceAccountName": "deployer", "resources": [
                           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]}},
        }
    });
    let (_, out) = crate::server::answer_body(&with, false, &serde_json::to_vec(&group).unwrap());
    let out: Json = serde_json::from_slice(&out).unwrap();
    assert_eq!(out["response"]["allowed"], false, "{out}");
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("member ConfigMap c: readers: may not read secrets"),
        "{out}"
    );
    let asked = recorder.0.lock().unwrap().clone();
    assert_eq!(asked.len(), 3);
    assert_eq!(
        asked[2],
        crate::group::validate::Writer {
            namespace: "n",
            service_account: "deployer"
        }
        .user()
    );
}
