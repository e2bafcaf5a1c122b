use super::*;
use crate::cluster::ClusterOptions;
use crate::inventory::Inventory;
use crate::policy::PolicySet;

/// As a list response has it: without apiVersion and kind.
pub(super) fn listed(mut o: DynamicObject) -> DynamicObject {
    o.types = None;
    o
}

fn ingress(ns: &str, name: &str, host: &str) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": ns, "name": name, "managedFields": [{"manager": "x"}]},
        "spec": {"rules": [{"host": host}]}
    }))
    .unwrap()
}

#[test]
fn a_relist_never_empties_the_index_and_drops_what_it_did_not_see() {
    let mut inv = Inventory::new();
    let id = inv
        .declare_index(
            "networking.k8s.io/v1",
            "Ingress",
            "object.spec.rules.map(r, r.host)",
        )
        .unwrap();
    let cluster = Cluster::new(PolicySet::default(), inv, ClusterOptions::default());
    let mut sync = KindSync::new(&GroupVersionKind::from_api_version(
        "networking.k8s.io/v1",
        "Ingress",
    ));
    assert!(!sync.on_event(&mut InventorySink(&cluster), Event::Init));
    sync.on_event(
        &mut InventorySink(&cluster),
        Event::InitApply(listed(ingress("a", "one", "a.example"))),
    );
    sync.on_event(
        &mut InventorySink(&cluster),
        Event::InitApply(listed(ingress("b", "two", "b.example"))),
    );
    assert!(
        sync.on_event(&mut InventorySink(&cluster), Event::InitDone),
        "first list completes the sync"
    );
    // A re-list (after 410 Gone) that no longer contains `two`.
    sync.on_event(&mut InventorySink(&cluster), Event::Init);
    sync.on_event(
        &mut InventorySink(&cluster),
        Event::InitApply(listed(ingress("a", "one", "a.example"))),
    );
    cluster.read(|st| {
        assert_eq!(
            st.inventory.lookup_index(id, "b.example").len(),
            1,
            "still answered mid re-list"
        );
    });
    assert!(
        !sync.on_event(&mut InventorySink(&cluster), Event::InitDone),
        "only the first list counts for readiness"
    );
    cluster.read(|st| {
        assert!(st.inventory.lookup_index(id, "b.example").is_empty());
        assert_eq!(st.inventory.lookup_index(id, "a.example").len(), 1);
        let e = st.inventory.list("networking.k8s.io", "Ingress", Some("a"))[0];
        assert!(
            e.object.json().pointer("/metadata/managedFields").is_none(),
            "managed fields are not kept"
        );
    });
    sync.on_event(
        &mut InventorySink(&cluster),
        Event::Delete(ingress("a", "one", "a.example")),
    );
    cluster.read(|st| assert!(st.inventory.lookup_index(id, "a.example").is_empty()));
}

mod reload {
    use super::*;
    use crate::cluster::ClusterOptions;
    use crate::inventory::Inventory;
    use crate::policy::Request;

    use crate::fixtures::{compile, UNIQUE_HOST as HOSTS, UNIQUE_TLS as TLS};

    fn ingress(name: &str, uid: &str, secret: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"namespace": "a", "name": name, "uid": uid},
            "spec": {"tls": [{"secretName": secret}], "rules": [{"host": format!("{name}.example")}]}
        })
    }

    #[test]
    fn a_relist_after_a_reload_keeps_what_the_new_policies_read() {
        let mut inv = Inventory::new();
        let set = compile(&[HOSTS], &mut inv);
        inv.set_projection(set.projection());
        let cluster = Cluster::new(set, inv, ClusterOptions::default());
        let mut sync = KindSync::new(&GroupVersionKind::from_api_version(
            "networking.k8s.io/v1",
            "Ingress",
        ));
        let one = ingress("one", "u1", "cert");
        sync.on_event(&mut InventorySink(&cluster), Event::Init);
        sync.on_event(
            &mut InventorySink(&cluster),
            Event::InitApply(super::tests::listed(serde_json::from_value(one).unwrap())),
        );
        sync.on_event(&mut InventorySink(&cluster), Event::InitDone);
        cluster.update(|st| {
            let set = compile(&[HOSTS, TLS], &mut st.inventory);
            let p = set.projection();
            assert!(*st.inventory.projection() != p);
            st.inventory.set_projection(p);
            st.policies = set;
        });
        let two = ingress("two", "u2", "cert");
        let denied = |cluster: &Cluster| {
            cluster.read(|st| {
                let r = Request::create(&two, "me").unwrap();
                !st.policies.evaluate(&r, &st.inventory).verdicts.is_empty()
            })
        };
        assert!(
            !denied(&cluster),
            "before the re-list the inventory lacks tls"
        );
        sync.on_event(&mut InventorySink(&cluster), Event::Init);
        sync.on_event(
            &mut InventorySink(&cluster),
            Event::InitApply(super::tests::listed(
                serde_json::from_value(ingress("one", "u1", "cert")).unwrap(),
            )),
        );
        sync.on_event(&mut InventorySink(&cluster), Event::InitDone);
        assert!(denied(&cluster), "after the re-list the new rule sees tls");
    }
}
