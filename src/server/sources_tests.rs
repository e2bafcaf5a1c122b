use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

#[test]
fn each_source_gets_its_own_limit_and_slots_free_on_drop() {
    let cap = SourceCap::new(2);
    let a1 = cap.try_enter(ip("10.0.0.1")).expect("first");
    let _a2 = cap.try_enter(ip("10.0.0.1")).expect("second");
    assert!(
        cap.try_enter(ip("10.0.0.1")).is_none(),
        "third from one source"
    );
    let _b = cap.try_enter(ip("10.0.0.2")).expect("another source");
    drop(a1);
    assert_eq!(cap.open_from(ip("10.0.0.1")), 1);
    let _a3 = cap.try_enter(ip("10.0.0.1")).expect("a freed slot");
}

#[test]
fn an_ipv4_mapped_address_counts_as_its_ipv4_address() {
    let cap = SourceCap::new(1);
    let _v4 = cap.try_enter(ip("192.0.2.7")).expect("v4");
    assert!(cap.try_enter(ip("::ffff:192.0.2.7")).is_none());
}

#[test]
fn the_map_forgets_sources_with_no_connection() {
    let cap = SourceCap::new(3);
    for i in 0..100u8 {
        drop(cap.try_enter(IpAddr::from([10, 0, 1, i])).expect("slot"));
    }
    assert!(cap.lock().is_empty());
    let zero = SourceCap::new(0);
    assert_eq!(zero.limit(), 1, "a limit of zero would refuse everything");
}
