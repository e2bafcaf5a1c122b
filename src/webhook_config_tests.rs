use super::*;

fn bundled() -> PolicySet {
    LoadedPolicies::from_paths(&[])
        .expect("the bundled library loads")
        .policies
}

fn webhook<'a>(config: &'a Json, name: &str) -> Option<&'a Json> {
    config["webhooks"]
        .as_array()?
        .iter()
        .find(|w| w["name"] == name)
}

/// Does some rule of `hook` send `op` on `group`/`resource`?
fn sends(hook: &Json, group: &str, resource: &str, op: &str) -> bool {
    hook["rules"].as_array().unwrap().iter().any(|r| {
        r["apiGroups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == group)
            && r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == resource)
            && r["operations"].as_array().unwrap().iter().any(|o| o == op)
    })
}

#[test]
fn resource_groups_are_judged_strictly() {
    let (validating, _) = generate(
        &bundled(),
        &Options::new(Endpoint::service("ns/svc").unwrap()),
    );
    let strict = webhook(&validating, "validate.interlock.dev").expect("strict webhook");
    assert!(sends(strict, "interlock.dev", "resourcegroups", "CREATE"));
    assert!(sends(strict, "interlock.dev", "resourcegroups", "UPDATE"));
}

#[test]
fn the_bundled_library_sends_what_it_denies_strictly_and_the_rest_leniently() {
    let (v, m) = generate(
        &bundled(),
        &Options::new(Endpoint::url("https://x").unwrap()),
    );
    let strict = webhook(&v, "validate.interlock.dev").expect("a Fail webhook");
    assert_eq!(strict["failurePolicy"], "Fail");
    for (g, r) in [
        ("apps", "deployments"),
        ("", "pods"),
        ("networking.k8s.io", "ingresses"),
    ] {
        assert!(
            sends(strict, g, r, "CREATE"),
            "{g}/{r} not checked strictly"
        );
    }
    // hpa-target-exists only warns at admission: a down webhook must not
    // block HPAs.
    assert!(!sends(
        strict,
        "autoscaling",
        "horizontalpodautoscalers",
        "CREATE"
    ));
    let lenient = webhook(&v, "advise.interlock.dev").expect("an Ignore webhook");
    assert_eq!(lenient["failurePolicy"], "Ignore");
    assert!(sends(
        lenient,
        "autoscaling",
        "horizontalpodautoscalers",
        "CREATE"
    ));
    // Looked up by pod-references-exist, matched by nothing.
    assert!(sends(lenient, "", "configmaps", "CREATE"));
    // Never in both: each call evaluates every policy.
    assert!(!sends(lenient, "apps", "deployments", "CREATE"));
    for hook in [strict, lenient] {
        for (g, r) in NEVER_SENT {
            assert!(!sends(hook, g, r, "CREATE"), "{g}/{r} is sent");
        }
    }
    // No bundled policy mutates: no mutating webhook to fail.
    assert_eq!(m.get("webhooks"), None);
}

#[test]
fn wildcards_and_mutations_are_kept_and_infrastructure_kinds_dropped() {
    let doc = |spec: Json| {
        json!({"apiVersion": "interlock.dev/v1alpha1", "kind": "InterlockPolicy",
               "metadata": {"name": "p"}, "spec": spec})
    };
    let docs = vec![(
        doc(json!({"validationActions": ["Deny"],
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                 "resources": ["namespaces", "configmaps"]},
                {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["DELETE"],
                 "resources": ["*"]}]},
            "validations": [{"expression": "true"}],
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}]})),
        crate::inventory::Source {
            file: "p.yaml".into(),
            line: 1,
        },
    )];
    let (set, errors) = PolicySet::compile(&docs);
    assert!(errors.is_empty(), "{errors:?}");
    let opts = Options::new(Endpoint::service("ops/hook").unwrap());
    let (v, m) = generate(&set, &opts);
    let strict = webhook(&v, "validate.interlock.dev").unwrap();
    assert!(sends(strict, "", "configmaps", "CREATE"));
    assert!(!sends(strict, "", "namespaces", "CREATE"));
    assert!(sends(strict, "*", "*", "DELETE"));
    // The wildcard would reach Leases and Events: the condition stops it.
    let conditions = strict["matchConditions"].to_string();
    assert!(conditions.contains("coordination.k8s.io"), "{conditions}");
    assert_eq!(
        strict["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["kube-system", "ops"])
    );
    assert_eq!(strict["clientConfig"]["service"]["namespace"], "ops");
    let mutate = webhook(&m, "mutate.interlock.dev").expect("a mutating webhook");
    assert!(sends(mutate, "", "configmaps", "CREATE"));
}

#[test]
fn bad_endpoints_are_errors() {
    assert!(Endpoint::service("no-slash").is_err());
    assert!(Endpoint::service("/name").is_err());
    assert!(Endpoint::service("a/b/c").is_err());
    assert!(Endpoint::url("http://plain").is_err());
    assert_eq!(
        Endpoint::url("https://h:1/")
            .unwrap()
            .client_config("/validate", None)["url"],
        "https://h:1/validate"
    );
}

/// The committed manifests are this command's output for the bundled
/// library: a policy change that changes the rules fails here until
/// `interlock webhook-config --service interlock-system/interlock >
/// manifests/base/webhookconfigurations.yaml` is run again.
#[test]
fn committed_manifests_are_the_generated_ones() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/base/webhookconfigurations.yaml"
    );
    let committed = std::fs::read_to_string(path).expect("the committed configurations");
    let opts = Options::new(Endpoint::service("interlock-system/interlock").unwrap());
    assert_eq!(
        committed,
        to_yaml(&bundled(), &opts),
        "run: interlock webhook-config --service interlock-system/interlock > manifests/base/webhookconfigurations.yaml"
    );
}
