use super::*;

#[test]
fn lease_names_are_stable_dns_labels() {
    let w = Wanted {
        policy: "unique-ingress-host".into(),
        index: "ingress-hosts".into(),
        key: "*.Shop.example.com/with spaces".into(),
        holder: "team-a".into(),
        fail_closed: true,
    };
    let name = lease_name(&w);
    assert_eq!(name, lease_name(&w.clone()));
    assert!(name.len() <= 63, "{name}");
    assert!(name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    let other = Wanted {
        key: "shop.example.com".into(),
        ..w.clone()
    };
    assert_ne!(lease_name(&other), name);
}
