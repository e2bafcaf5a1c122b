use super::*;
use crate::policy::Request;

fn write(dir: &std::path::Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write policy");
}

use crate::fixtures::{ingress, UNIQUE_HOST as HOSTS, UNIQUE_TLS as TLS};

#[test]
fn a_reload_that_removes_a_policy_removes_its_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "hosts.yaml", HOSTS);
    write(dir.path(), "tls.yaml", TLS);
    let sources = Sources {
        policies: vec![dir.path().to_path_buf()],
        ..Sources::default()
    };
    let (cluster, _) = initial(&sources, Default::default()).expect("load");
    cluster
        .update_inventory(|inv, _| {
            inv.upsert(&ingress("a", "one", "a.example", "cert"), None)
                .map(|_| ())
        })
        .expect("store");
    let decls = cluster.read(|st| st.inventory.index_decls());
    assert_eq!(decls.len(), 2, "{decls:?}");

    std::fs::remove_file(dir.path().join("hosts.yaml")).expect("rm");
    reload(&cluster, &sources).expect("reload");
    cluster.read(|st| {
        let decls = st.inventory.index_decls();
        assert_eq!(decls.len(), 1, "the hosts index is gone: {decls:?}");
        assert!(decls[0].keys.contains("secretName"));
        // The kept index kept its keys, under its new id.
        assert_eq!(st.inventory.lookup_index(0, "cert").len(), 1);
        let two = ingress("a", "two", "a.example", "cert");
        let r = Request::create(&two, "me").expect("request");
        let verdicts = st.policies.evaluate(&r, &st.inventory).verdicts;
        assert_eq!(
            verdicts.len(),
            1,
            "the tls rule still sees the stored Ingress"
        );
        assert_eq!(verdicts[0].policy, "unique-tls");
    });

    // A set that does not compile is refused and the old one stays.
    write(dir.path(), "bad.yaml", "apiVersion: interlock.dev/v1alpha1\nkind: InterlockPolicy\nmetadata: {name: bad}\nspec:\n  validations:\n    - expression: 'object.('\n");
    assert!(reload(&cluster, &sources).is_err());
    assert_eq!(cluster.read(|st| st.policies.len()), 1);

    // An empty set is refused at start and on reload, unless allowed.
    for f in ["tls.yaml", "bad.yaml"] {
        std::fs::remove_file(dir.path().join(f)).expect("rm");
    }
    let err = reload(&cluster, &sources).expect_err("an empty set is refused");
    assert!(err.to_string().contains("--allow-empty"), "{err}");
    assert_eq!(cluster.read(|st| st.policies.len()), 1, "the old set stays");
    assert!(initial(&sources, Default::default()).is_err());
    let allowed = Sources {
        allow_empty: true,
        ..sources.clone()
    };
    assert!(initial(&allowed, Default::default()).is_ok());
}

#[test]
fn a_changed_policy_config_is_applied_by_the_next_reload() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "config.yaml", "apiVersion: interlock.dev/v1alpha1\nkind: PolicyConfig\nmetadata: {name: site}\nspec: {}\n");
    let sources = Sources {
        overrides: crate::policy::overrides::Overrides {
            config: Some(dir.path().join("config.yaml")),
            ..Default::default()
        },
        ..Sources::default()
    };
    assert_eq!(
        sources.reloaded_files(),
        vec![dir.path().join("config.yaml")]
    );
    let (cluster, _) = initial(&sources, Default::default()).expect("starts");
    let all = cluster.read(|st| st.policies.len());
    write(dir.path(), "config.yaml", "apiVersion: interlock.dev/v1alpha1\nkind: PolicyConfig\nmetadata: {name: site}\nspec: {disable: [unique-ingress-host]}\n");
    reload(&cluster, &sources).expect("reloads");
    assert_eq!(cluster.read(|st| st.policies.len()), all - 1);
    // A config naming no policy is refused; the set in force stays.
    write(dir.path(), "config.yaml", "apiVersion: interlock.dev/v1alpha1\nkind: PolicyConfig\nmetadata: {name: site}\nspec: {disable: [no-such-policy]}\n");
    let err = reload(&cluster, &sources).expect_err("refused");
    assert!(
        err.to_string()
            .contains("--disable no-such-policy: no loaded policy has that name"),
        "{err}"
    );
    assert_eq!(cluster.read(|st| st.policies.len()), all - 1);
}

/// `serve -p policies/` (the repository's library folder, with its
/// tests/ cases) serves the same policies as the bundled library.
#[test]
fn the_library_folder_loads_without_its_test_cases() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let loaded = LoadedPolicies::from_paths(&[folder]).expect("policies/ loads");
    let bundled = LoadedPolicies::from_paths(&[]).expect("the bundled library loads");
    assert_eq!(loaded.policies.len(), bundled.policies.len());
    assert!(loaded.policies.len() >= 8, "{}", loaded.policies.len());
}
