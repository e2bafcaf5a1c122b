use super::RateLimit;

#[test]
fn a_rate_limit_lets_one_line_through_per_interval_and_counts_the_rest() {
    let limit = RateLimit::new();
    assert_eq!(limit.allow(), Some(0));
    for _ in 0..5 {
        assert_eq!(limit.allow(), None);
    }
    // Pretend the interval passed.
    limit.next_ms.store(0, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(limit.allow(), Some(5));
}
