use super::*;

fn object(name: &str, uid: &str, generation: i64, expression: &str) -> ObjectDoc {
    ObjectDoc {
        uid: uid.into(),
        generation,
        doc: json!({"apiVersion": "interlock.dev/v1alpha1", "kind": KIND,
            "metadata": {"name": name, "generation": generation},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""],
                "apiVersions": ["v1"], "resources": ["configmaps"], "operations": ["CREATE"]}]},
                "validations": [{"expression": expression, "message": "no"}]}}),
        status: Json::Null,
    }
}

fn ready(r: &Resolved, name: &str) -> (String, String, String) {
    let c = &r.statuses[name]["conditions"][0];
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (s("status"), s("reason"), s("message"))
}

fn expressions(r: &Resolved) -> Vec<String> {
    r.docs
        .iter()
        .map(|(d, _)| d["spec"]["validations"][0]["expression"].to_string())
        .collect()
}

#[test]
fn a_broken_generation_leaves_the_previous_in_force_and_says_where() {
    let mut ledger = Ledger::default();
    let none = BTreeSet::new();
    let mut objects = BTreeMap::from([("p".to_string(), object("p", "u1", 1, "true"))]);
    let r = ledger.resolve(&objects, &none, &none);
    assert_eq!(ready(&r, "p").0, "True");
    assert_eq!(r.statuses["p"]["observedGeneration"], 1);
    assert_eq!(expressions(&r), ["\"true\""]);

    objects.insert("p".into(), object("p", "u1", 2, "object.("));
    let r = ledger.resolve(&objects, &none, &none);
    let (status, reason, message) = ready(&r, "p");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "CompileError")
    );
    assert!(
        message.contains("spec.validations[0].expression")
            && message.contains("<input>:1:")
            && message.ends_with("generation 1 stays in force"),
        "{message}"
    );
    assert_eq!(r.statuses["p"]["observedGeneration"], 2);
    assert_eq!(expressions(&r), ["\"true\""], "generation 1 stays");

    // Re-created under the same name: the old generation is not kept.
    objects.insert("p".into(), object("p", "u2", 1, "object.("));
    let r = ledger.resolve(&objects, &none, &none);
    assert!(r.docs.is_empty());
    assert!(ready(&r, "p")
        .2
        .ends_with("no generation of this policy is in force"));

    objects.clear();
    let r = ledger.resolve(&objects, &none, &none);
    assert!(r.docs.is_empty() && r.statuses.is_empty());
}

#[test]
fn a_file_policy_wins_over_an_object_and_an_object_over_a_bundled_one() {
    let mut ledger = Ledger::default();
    let objects = BTreeMap::from([
        ("filed".to_string(), object("filed", "u1", 1, "true")),
        ("bundled".to_string(), object("bundled", "u2", 3, "true")),
    ]);
    let files = BTreeSet::from(["filed".to_string()]);
    let bundled = BTreeSet::from(["bundled".to_string()]);
    let r = ledger.resolve(&objects, &files, &bundled);
    assert_eq!(ready(&r, "filed").1, "NameConflict");
    assert_eq!(ready(&r, "bundled").0, "True");
    assert_eq!(r.docs.len(), 1);
    assert_eq!(r.docs[0].0["metadata"]["name"], "bundled");
    assert_eq!(r.replaces, BTreeSet::from(["bundled".to_string()]));
}

/// Loaded with the files: an object replaces the bundled policy of its
/// name; beside `-p` files of the same name it is left out.
#[test]
fn loaded_with_the_files_the_winner_is_in_the_set() {
    use crate::policy::load::LoadedPolicies;
    use crate::policy::overrides::Overrides;
    let objects = BTreeMap::from([(
        "unique-ingress-host".to_string(),
        object("unique-ingress-host", "u1", 1, "true"),
    )]);
    let bundled = LoadedPolicies::from_paths(&[]).expect("bundled").policies;
    let (loaded, statuses) =
        LoadedPolicies::with_objects(&[], &Overrides::default(), &objects, &mut Ledger::default())
            .expect("loads");
    assert_eq!(loaded.policies.len(), bundled.len());
    let replaced = loaded
        .policies
        .policies
        .iter()
        .find(|p| p.name == "unique-ingress-host")
        .expect("in the set");
    assert_eq!(replaced.source.file, "InterlockPolicy/unique-ingress-host");
    assert_eq!(
        statuses["unique-ingress-host"]["conditions"][0]["status"],
        "True"
    );

    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("policies/unique-ingress-host/policy.yaml");
    let (loaded, statuses) = LoadedPolicies::with_objects(
        &[folder],
        &Overrides::default(),
        &objects,
        &mut Ledger::default(),
    )
    .expect("loads");
    assert_eq!(loaded.policies.len(), 1);
    assert_ne!(
        loaded.policies.policies[0].source.file, "InterlockPolicy/unique-ingress-host",
        "the file's policy stays"
    );
    assert_eq!(
        statuses["unique-ingress-host"]["conditions"][0]["reason"],
        "NameConflict"
    );
}

#[test]
fn a_stored_status_that_says_the_same_needs_no_write() {
    let mut ledger = Ledger::default();
    let mut o = object("p", "u1", 1, "true");
    let objects = BTreeMap::from([("p".to_string(), o.clone())]);
    let desired = ledger
        .resolve(&objects, &BTreeSet::new(), &BTreeSet::new())
        .statuses["p"]
        .clone();
    assert!(status_differs(&o, &desired));
    o.status = desired;
    let objects = BTreeMap::from([("p".to_string(), o.clone())]);
    let again = ledger
        .resolve(&objects, &BTreeSet::new(), &BTreeSet::new())
        .statuses["p"]
        .clone();
    assert!(!status_differs(&o, &again), "the transition time is kept");
}

/// An expression that compiles but does not fit the kind's schema: Ready,
/// with kube-apiserver's type-check warning as a VAP's status has it.
#[test]
fn a_type_check_warning_is_reported_beside_ready() {
    let mut ledger = Ledger::default();
    let objects = BTreeMap::from([(
        "p".to_string(),
        object("p", "u1", 1, "object.data.noSuchField == 1"),
    )]);
    let r = ledger.resolve(&objects, &BTreeSet::new(), &BTreeSet::new());
    assert_eq!(ready(&r, "p").0, "True");
    let warnings = &r.statuses["p"]["typeChecking"]["expressionWarnings"];
    assert_eq!(
        warnings[0]["fieldRef"], "spec.validations[0].expression",
        "{warnings}"
    );
    assert!(
        warnings[0]["warning"]
            .as_str()
            .unwrap_or_default()
            .contains("ConfigMap"),
        "{warnings}"
    );
    let clean = BTreeMap::from([("q".to_string(), object("q", "u2", 1, "true"))]);
    let r = ledger.resolve(&clean, &BTreeSet::new(), &BTreeSet::new());
    assert!(r.statuses["q"].get("typeChecking").is_none());
}
