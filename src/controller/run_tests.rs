use super::*;

#[test]
fn backoff_doubles_to_a_cap_with_jitter() {
    let secs = |n| backoff(n).as_secs_f64();
    assert!((0.8..=1.2).contains(&secs(1)), "{}", secs(1));
    assert!((3.2..=4.8).contains(&secs(3)), "{}", secs(3));
    for n in [10, 11, 40, u32::MAX] {
        assert!(
            (240.0..=360.0).contains(&secs(n)),
            "attempt {n}: {}",
            secs(n)
        );
    }
    // Jitter: a hundred groups failing together do not come back together.
    let spread: std::collections::BTreeSet<u64> =
        (0..100).map(|_| backoff(5).as_millis() as u64).collect();
    assert!(spread.len() > 50, "only {} distinct waits", spread.len());
}
