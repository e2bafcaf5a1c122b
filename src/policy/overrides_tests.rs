use super::*;

fn docs() -> Vec<Document> {
    crate::bundled::documents().documents
}

#[test]
fn disable_leaves_the_policy_out() {
    let mut d = docs();
    let before = d.len();
    let o = Overrides {
        disable: vec!["unique-ingress-host".into()],
        ..Default::default()
    };
    o.apply(&mut d).expect("applies");
    assert_eq!(d.len(), before - 1);
    assert!(d
        .iter()
        .all(|d| policy_of(d) != Some("unique-ingress-host")));
}

#[test]
fn action_rewrites_every_action_of_the_policy() {
    let mut d = docs();
    let o = Overrides {
        actions: vec![parse_action("hpa-target-exists=Audit").unwrap()],
        ..Default::default()
    };
    o.apply(&mut d).expect("applies");
    let p = d
        .iter()
        .find(|d| policy_of(d) == Some("hpa-target-exists"))
        .unwrap();
    assert_eq!(p.value["spec"]["validationActions"], json!(["Audit"]));
    assert_eq!(p.value["spec"]["admissionActions"], json!(["Audit"]));
    assert_eq!(p.value["spec"]["checkActions"], json!(["Audit"]));
}

#[test]
fn an_unknown_name_is_an_error_listing_the_policies() {
    let o = Overrides {
        disable: vec!["unique-ingres-host".into()],
        ..Default::default()
    };
    let e = o.apply(&mut docs()).unwrap_err();
    assert!(
        e[0].starts_with(
            "--disable unique-ingres-host: no loaded policy has that name; the policies are "
        ),
        "{e:?}"
    );
    assert!(e[0].contains("unique-ingress-host"), "{e:?}");
    assert!(parse_action("x=Block").is_err());
    assert!(parse_action("x").is_err());
}

#[test]
fn a_policy_config_file_adds_to_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(
        &file,
        "apiVersion: interlock.dev/v1alpha1\nkind: PolicyConfig\nmetadata: {name: site}\nspec:\n  disable: [disallow-latest-tag]\n  actions: {hpa-target-exists: Warn}\n",
    )
    .unwrap();
    let o = Overrides {
        disable: vec!["unique-ingress-host".into()],
        config: Some(file.clone()),
        ..Default::default()
    };
    let mut d = docs();
    o.apply(&mut d).expect("applies");
    let names: Vec<&str> = d.iter().filter_map(policy_of).collect();
    assert!(!names.contains(&"unique-ingress-host") && !names.contains(&"disallow-latest-tag"));
    let hpa = d
        .iter()
        .find(|d| policy_of(d) == Some("hpa-target-exists"))
        .unwrap();
    assert_eq!(hpa.value["spec"]["validationActions"], json!(["Warn"]));

    std::fs::write(&file, "apiVersion: interlock.dev/v1alpha1\nkind: PolicyConfig\nmetadata: {name: site}\nspec:\n  actions: {hpa-target-exists: Block}\n").unwrap();
    let e = o.apply(&mut docs()).unwrap_err();
    assert!(
        e[0].contains("config.yaml:1: spec.actions.hpa-target-exists: \"Block\" is not an action"),
        "{e:?}"
    );
}
