use super::*;
use crate::cluster::ClusterOptions;
use crate::inventory::{Inventory, ObjectKey};
use crate::policy::PolicySet;
use serde_json::json;

#[test]
fn entries_outlive_the_lock_and_writers_get_in_between_lookups() {
    let cm = |data: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"namespace": "a", "name": "c"}, "data": {"k": data}})
    };
    let mut inventory = Inventory::new();
    inventory.upsert(&cm("first"), None).expect("upsert");
    let cluster = Cluster::new(PolicySet::default(), inventory, ClusterOptions::default());
    let live = Live::new(&cluster);
    let key = ObjectKeyRef {
        group: "",
        kind: "ConfigMap",
        namespace: "a",
        name: "c",
    };
    let first = live.find(key).expect("found");
    let listed = live.list("", "ConfigMap", Some("a"));
    // A writer on this very thread: it would deadlock if a lookup had
    // kept the lock.
    cluster.update_inventory(|inv, _| {
        inv.remove(&ObjectKey::of(&cm("")).expect("key"));
        inv.upsert(&cm("second"), None).expect("upsert");
    });
    assert_eq!(first.object.json()["data"]["k"], "first", "kept alive");
    assert_eq!(listed[0].object.json()["data"]["k"], "first");
    let again = live.find(key).expect("found");
    assert_eq!(again.object.json()["data"]["k"], "second", "read anew");
}
