use super::*;
use serde_json::json;

fn exception(spec: Json) -> Result<Exception, SpecError> {
    Exception::parse("legacy", &json!({"spec": spec}))
}

#[test]
fn matches_policy_namespace_name_labels_and_expiry() {
    let e = exception(json!({
        "policies": ["unique-ingress-host"], "namespaces": ["legacy"], "names": ["old"],
        "objectSelector": {"matchLabels": {"tier": "legacy"}},
        "expires": "2030-01-01T00:00:00Z", "reason": "migrating"
    }))
    .expect("parses");
    let obj = |ns: &str, name: &str, tier: &str| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": name, "namespace": ns, "labels": {"tier": tier}}})
    };
    let before: DateTime<Utc> = "2029-12-31T00:00:00Z".parse().unwrap();
    let after: DateTime<Utc> = "2030-01-02T00:00:00Z".parse().unwrap();
    let ok = obj("legacy", "old", "legacy");
    let req = Request::create(&ok, "u").unwrap();
    assert!(e.applies("unique-ingress-host", &req, before));
    assert!(!e.applies("unique-ingress-host", &req, after), "expired");
    assert!(!e.applies("other-policy", &req, before));
    for other in [
        obj("team", "old", "legacy"),
        obj("legacy", "new", "legacy"),
        obj("legacy", "old", "web"),
    ] {
        let r = Request::create(&other, "u").unwrap();
        assert!(!e.applies("unique-ingress-host", &r, before), "{other}");
    }
}

#[test]
fn only_the_cluster_wide_namespace_and_files_without_one_reach_other_namespaces() {
    let doc = |ns: Option<&str>, namespaces: Json| {
        let mut d = json!({"kind": FILE_KIND, "metadata": {"name": "e"},
            "spec": {"policies": ["p"], "namespaces": namespaces, "reason": "r"}});
        if let Some(ns) = ns {
            d["metadata"]["namespace"] = ns.into();
        }
        d
    };
    let mut tenant = doc(Some("team-a"), json!([]));
    confine(&mut tenant, "platform").expect("its own namespace");
    assert_eq!(tenant["spec"]["namespaces"], json!(["team-a"]));
    let mut other = doc(Some("team-a"), json!(["team-a", "team-b"]));
    let e = confine(&mut other, "platform").unwrap_err();
    assert!(
        e.0.contains("\"team-b\": an exception in namespace team-a"),
        "{e}"
    );
    for (ns, wide) in [(Some("platform"), "platform"), (None, "platform")] {
        let mut d = doc(ns, json!(["team-b"]));
        confine(&mut d, wide).expect("may name any namespace");
        assert_eq!(d["spec"]["namespaces"], json!(["team-b"]));
    }
    let e = Exception::parse("e", &tenant).unwrap();
    assert_eq!(e.label, "PolicyException team-a/e");
}

#[test]
fn bad_exceptions_name_the_field() {
    let e = exception(json!({"policies": [], "reason": "x"})).unwrap_err();
    assert!(e.0.contains("spec.policies"), "{e}");
    let e =
        exception(json!({"policies": ["p"], "reason": "x", "expires": "tomorrow"})).unwrap_err();
    assert!(
        e.0.contains("spec.expires: \"tomorrow\" is not an RFC 3339 time"),
        "{e}"
    );
    let e = exception(json!({"policies": ["p"], "reason": " "})).unwrap_err();
    assert!(e.0.contains("spec.reason"), "{e}");
}

/// Through the policy set: a covered failure becomes an Audit verdict
/// naming the exception; an exception for a policy not loaded is an error.
#[test]
fn a_policy_set_turns_excepted_failures_into_audit_verdicts() {
    let policy = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
        "metadata": {"name": "no-cm"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"], "operations": ["CREATE"]}]},
                 "validations": [{"expression": "false", "message": "no ConfigMaps"}]}});
    let exception = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "PolicyException",
        "metadata": {"name": "legacy"},
        "spec": {"policies": ["no-cm"], "names": ["old"], "reason": "migrating"}});
    let source = crate::inventory::Source {
        file: "p.yaml".into(),
        line: 1,
    };
    let docs = vec![(policy, source.clone()), (exception, source.clone())];
    let mut inv = crate::inventory::Inventory::new();
    let (set, errors) = super::super::PolicySet::compile(&docs);
    inv.set_indexes(&set.index_decls()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "a"}});
    let (old, new) = (cm("old"), cm("new"));
    let verdicts = set
        .evaluate(&Request::create(&old, "u").unwrap(), &inv)
        .verdicts;
    assert_eq!(verdicts[0].action, Action::Audit);
    assert_eq!(
        verdicts[0].message,
        "excepted by PolicyException legacy (migrating): no ConfigMaps"
    );
    let verdicts = set
        .evaluate(&Request::create(&new, "u").unwrap(), &inv)
        .verdicts;
    assert_eq!(verdicts[0].action, Action::Deny);

    let stray = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "PolicyException",
        "metadata": {"name": "typo"}, "spec": {"policies": ["no-cms"], "reason": "x"}});
    let (_, errors) = super::super::PolicySet::compile(&[(stray, source)]);
    assert_eq!(
        errors[0].message,
        "spec.policies: \"no-cms\" is not a loaded policy"
    );
}
