use super::*;
use serde_json::json;

fn object(ns: &str, name: &str, spec: Json) -> DynamicObject {
    // As a list response has it: no apiVersion or kind.
    let mut o: DynamicObject = serde_json::from_value(json!({
        "apiVersion": API_VERSION, "kind": CLUSTER_KIND,
        "metadata": {"namespace": ns, "name": name}, "spec": spec
    }))
    .unwrap();
    o.types = None;
    o
}

fn spec(namespaces: &[&str]) -> Json {
    json!({"policies": ["p"], "namespaces": namespaces, "reason": "r"})
}

/// Installed into the state: the next evaluation is excepted, the
/// generation moves (the continuous audit evaluates again), the next
/// expiry is returned for the timer, and a deletion ends it.
#[test]
fn an_exception_seen_applies_at_once_and_goes_with_its_deletion() {
    let policy = json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
        "metadata": {"name": "p"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"], "operations": ["CREATE"]}]},
                 "validations": [{"expression": "false", "message": "no"}]}});
    let source = crate::inventory::Source {
        file: "p.yaml".into(),
        line: 1,
    };
    let mut inv = crate::inventory::Inventory::new();
    let (set, errors) = crate::policy::PolicySet::compile(&[(policy, source)]);
    inv.set_indexes(&set.index_decls()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let cluster = Cluster::new(set, inv, Default::default());
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "team-a"}});
    let action = |c: &Cluster| {
        c.read(|st| {
            let req = crate::policy::Request::create(&cm, "u").unwrap();
            st.policies.evaluate(&req, &st.inventory).verdicts[0].action
        })
    };
    assert_eq!(action(&cluster), crate::policy::Action::Deny);

    let mut sync = ExceptionSync::new("interlock-system");
    let spec = json!({"policies": ["p"], "reason": "r", "expires": "2999-01-01T00:00:00Z"});
    sync.on_event(Event::Apply(object("team-a", "e", spec.clone())));
    let before = cluster.read(|st| st.generation());
    let next = install(&cluster, &sync);
    assert_eq!(next, Some("2999-01-01T00:00:00Z".parse().unwrap()));
    assert!(cluster.read(|st| st.generation()) > before);
    assert_eq!(action(&cluster), crate::policy::Action::Audit);

    sync.on_event(Event::Delete(object("team-a", "e", spec)));
    install(&cluster, &sync);
    assert_eq!(action(&cluster), crate::policy::Action::Deny);
}

#[test]
fn a_tenant_exception_is_confined_to_its_namespace() {
    let mut sync = ExceptionSync::new("interlock-system");
    sync.on_event(Event::Init);
    sync.on_event(Event::InitApply(object("team-a", "mine", spec(&[]))));
    sync.on_event(Event::InitApply(object(
        "team-a",
        "theirs",
        spec(&["team-b"]),
    )));
    sync.on_event(Event::InitApply(object(
        "interlock-system",
        "wide",
        spec(&["team-b"]),
    )));
    assert!(sync.on_event(Event::InitDone));
    let names: Vec<(String, Vec<String>)> = sync
        .compiled()
        .iter()
        .map(|e| (e.name.clone(), e.namespaces().to_vec()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("wide".to_string(), vec!["team-b".to_string()]),
            ("mine".to_string(), vec!["team-a".to_string()]),
        ],
        "the exception naming another tenant's namespace is left out"
    );
    let err = compile(
        serde_json::to_value(object("team-a", "theirs", spec(&["team-b"]))).unwrap(),
        "interlock-system",
    )
    .unwrap_err();
    assert!(err.0.contains("excepts only objects of team-a"), "{err}");

    assert!(sync.on_event(Event::Delete(object("team-a", "mine", spec(&[])))));
    assert_eq!(sync.compiled().len(), 1, "deleted: no longer applies");
}
