use super::*;
use crate::fixtures::ingress;

fn bundled() -> (PolicySet, Inventory) {
    let mut inv = Inventory::new();
    let (set, errors) = PolicySet::compile_documents(crate::bundled::documents().documents);
    inv.set_indexes(&set.index_decls()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    (set, inv)
}

#[test]
fn an_ingress_claims_its_hosts_for_its_namespace() {
    let (set, mut inv) = bundled();
    assert!(set.has_claims());
    let web = ingress("team-a", "web", "shop.example.com", "cert");
    let r = Request::create(&web, "alice").expect("request");
    let wanted = set.claims_of(&r, &inv, &web);
    assert_eq!(
        wanted,
        [Wanted {
            policy: "unique-ingress-host".into(),
            index: "ingress-hosts".into(),
            key: "shop.example.com".into(),
            holder: "team-a".into(),
            fail_closed: true,
        }]
    );
    let held = |inv: &Inventory, holder| {
        set.claim_held(
            inv,
            "unique-ingress-host",
            "ingress-hosts",
            "shop.example.com",
            holder,
        )
    };
    assert_eq!(held(&inv, "team-a"), Some(false), "nothing stored yet");
    inv.upsert(&web, None).expect("stored");
    assert_eq!(held(&inv, "team-a"), Some(true));
    assert_eq!(held(&inv, "team-b"), Some(false));
    assert_eq!(
        set.claim_held(
            &inv,
            "retired-policy",
            "ingress-hosts",
            "shop.example.com",
            "team-a"
        ),
        None
    );
    // An UPDATE claims only what its old version did not hold.
    let mut moved = web.clone();
    moved["spec"]["rules"] =
        serde_json::json!([{"host": "shop.example.com"}, {"host": "new.example.com"}]);
    let mut r = Request::create(&moved, "alice").expect("request");
    r.operation = super::super::Operation::Update;
    r.old_object = super::super::OldObject::Json(&web);
    let keys: Vec<String> = set
        .claims_of(&r, &inv, &moved)
        .into_iter()
        .map(|w| w.key)
        .collect();
    assert_eq!(keys, ["new.example.com"]);
    // A ConfigMap claims nothing.
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "team-a"}});
    let r = Request::create(&cm, "alice").expect("request");
    assert!(set.claims_of(&r, &inv, &cm).is_empty());
}

#[test]
fn claims_name_a_declared_index_and_a_known_holder() {
    let policy = |claims: serde_json::Value| {
        serde_json::json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
            "metadata": {"name": "p"},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "operations": ["CREATE"]}]},
                "indexes": [{"name": "names", "apiVersion": "v1", "kind": "ConfigMap", "keys": "[object.metadata.name]"}],
                "claims": claims,
                "validations": [{"expression": "true"}]}})
    };
    let errors = |claims| {
        let source = crate::inventory::Source {
            file: "p.yaml".into(),
            line: 1,
        };
        let (_, errors) = PolicySet::compile(&[(policy(claims), source)]);
        errors.into_iter().map(|e| e.message).collect::<Vec<_>>()
    };
    assert!(errors(serde_json::json!([{"index": "names", "holder": "Object"}])).is_empty());
    let e = errors(serde_json::json!([{"index": "other", "holder": "Object"}]));
    assert!(e[0].contains("spec.claims[0].index"), "{e:?}");
    let e = errors(serde_json::json!([{"index": "names", "holder": "Cluster"}]));
    assert!(e[0].contains("not Namespace or Object"), "{e:?}");
}
