use super::*;
use serde_json::json;

fn ingress(name: &str, host: &str) -> Json {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
           "metadata": {"namespace": "a", "name": name}, "spec": {"rules": [{"host": host}]}})
}

#[test]
fn records_expire_in_order_and_restore_what_they_replaced() {
    let mut inv = Inventory::new();
    inv.upsert(&ingress("one", "old.example"), None)
        .expect("upsert");
    let mut p = Pending::default();
    let key = ObjectKey::of(&ingress("one", "x")).expect("key");
    p.record(
        &mut inv,
        &ingress("one", "new.example"),
        Duration::from_millis(30),
    );
    p.record(
        &mut inv,
        &ingress("two", "b.example"),
        Duration::from_secs(60),
    );
    // Recorded again: the first queue item is stale, the new expiry counts.
    p.record(
        &mut inv,
        &ingress("one", "newer.example"),
        Duration::from_millis(80),
    );
    assert_eq!(p.len(), 2);
    std::thread::sleep(Duration::from_millis(40));
    p.expire(&mut inv);
    assert_eq!(p.len(), 2, "a stale queue item expired a newer record");
    std::thread::sleep(Duration::from_millis(60));
    p.expire(&mut inv);
    assert_eq!(p.len(), 1);
    let restored = inv.get(&key).expect("the original is back");
    assert_eq!(
        restored.object.json()["spec"]["rules"][0]["host"],
        "old.example"
    );
    // "two" replaced nothing: it stays until its own expiry.
    assert_eq!(inv.len(), 2);
    p.observed(&ObjectKey::of(&ingress("two", "x")).expect("key"));
    p.expire(&mut inv);
    assert_eq!(p.len(), 0);
    assert!(p.queue.is_empty());
}
