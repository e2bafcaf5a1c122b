use super::*;

#[test]
fn converged_groups_come_back_spread_over_minutes_not_together() {
    let waits: Vec<f64> = (0..1000)
        .map(|_| requeue_after(true).as_secs_f64())
        .collect();
    assert!(waits.iter().all(|w| (1440.0..=2160.0).contains(w)));
    // A thousand groups reconciled at one start: no minute of the
    // window gets more than a few percent of them.
    let mut per_minute = std::collections::BTreeMap::<u64, usize>::new();
    for w in &waits {
        *per_minute.entry((*w / 60.0) as u64).or_default() += 1;
    }
    assert!(per_minute.len() >= 11, "{per_minute:?}");
    assert!(per_minute.values().all(|n| *n <= 150), "{per_minute:?}");
}
