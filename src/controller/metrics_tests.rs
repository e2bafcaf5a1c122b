use super::*;

#[test]
fn drifted_members_are_summed_over_groups_and_cleared_per_group() {
    let m = Metrics::default();
    m.set_drifted("a", "shop", 2);
    m.set_drifted("b", "shop", 1);
    assert_eq!(m.drifted.get(), 3);
    m.set_drifted("a", "shop", 0);
    assert_eq!(m.drifted.get(), 1);
    m.set_drifted("b", "shop", 4);
    assert_eq!(m.drifted.get(), 4);
}
