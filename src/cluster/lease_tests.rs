use super::*;

fn held(by: &str, renewed: Timestamp, secs: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(by.into()),
        renew_time: Some(MicroTime(renewed)),
        lease_duration_seconds: Some(secs),
        ..LeaseSpec::default()
    }
}

#[test]
fn a_lease_is_taken_only_when_free_ours_or_expired() {
    let now = Timestamp::now();
    let ago = |s: i64| now - SignedDuration::from_secs(s);
    assert_eq!(decide(None, "a", now), Decision::Acquire);
    assert_eq!(
        decide(Some(&held("a", ago(1), 15)), "a", now),
        Decision::Renew
    );
    assert_eq!(
        decide(Some(&held("b", ago(5), 15)), "a", now),
        Decision::Wait
    );
    assert_eq!(
        decide(Some(&held("b", ago(16), 15)), "a", now),
        Decision::Acquire
    );
    assert_eq!(
        decide(Some(&held("", ago(1), 15)), "a", now),
        Decision::Acquire
    );
    let never_renewed = LeaseSpec {
        holder_identity: Some("b".into()),
        ..LeaseSpec::default()
    };
    assert_eq!(decide(Some(&never_renewed), "a", now), Decision::Acquire);
}

#[test]
fn taking_over_counts_a_transition_and_renewing_does_not() {
    let now = Timestamp::now();
    let cfg = LeaseConfig {
        namespace: "ns".into(),
        name: "l".into(),
        identity: "a".into(),
        duration: Duration::from_secs(15),
        renew_every: Duration::from_secs(5),
    };
    let mut theirs = held("b", now, 15);
    theirs.lease_transitions = Some(3);
    let taken = spec_for(&cfg, Some(&theirs), now);
    assert_eq!(taken.lease_transitions, Some(4));
    assert_eq!(taken.holder_identity.as_deref(), Some("a"));
    let renewed = spec_for(&cfg, Some(&taken), now);
    assert_eq!(renewed.lease_transitions, Some(4));
    assert_eq!(renewed.acquire_time, taken.acquire_time);
}

fn cfg(duration: u64, renew_every: u64) -> LeaseConfig {
    LeaseConfig {
        namespace: "ns".into(),
        name: "l".into(),
        identity: "a".into(),
        duration: Duration::from_secs(duration),
        renew_every: Duration::from_secs(renew_every),
    }
}

#[test]
fn a_term_ends_before_another_replica_may_take_the_lease() {
    // The shipped 15 s / 5 s: leading stops 10 s after the last
    // successful renewal began, 5 s before the lease expires for others.
    assert_eq!(renew_deadline(&cfg(15, 5)), Duration::from_secs(10));
    // Never a deadline of zero or past the lease itself.
    for (d, r) in [(4, 4), (4, 1), (1, 5), (2, 1)] {
        let c = cfg(d, r);
        let dl = renew_deadline(&c);
        assert!(!dl.is_zero() && dl < c.duration, "{d} s / {r} s: {dl:?}");
    }
}

const S: fn(u64) -> Duration = Duration::from_secs;

#[test]
fn a_renewal_extends_the_term_from_when_it_started() {
    let mut t = Term::won(S(0), S(10));
    assert_eq!(t.renewed(S(5), S(7), Renewal::Held), Verdict::Lead);
    // From 5 s (the write's start), not 7 s (its answer).
    assert_eq!(t.until(), S(15));
}

#[test]
fn failed_renewals_keep_the_term_only_until_it_ends() {
    let mut t = Term::won(S(0), S(10));
    assert_eq!(t.renewed(S(5), S(6), Renewal::Failed), Verdict::Lead);
    assert_eq!(t.until(), S(10));
    assert_eq!(t.renewed(S(9), S(10), Renewal::Failed), Verdict::Stop);
}

#[test]
fn an_answer_after_the_term_ended_does_not_revive_it() {
    let mut t = Term::won(S(0), S(10));
    assert_eq!(t.renewed(S(9), S(11), Renewal::Held), Verdict::Stop);
    assert_eq!(t.until(), S(10));
}

#[test]
fn a_lease_taken_by_another_replica_stops_the_term_at_once() {
    let mut t = Term::won(S(0), S(10));
    assert_eq!(t.renewed(S(1), S(2), Renewal::Taken), Verdict::Stop);
}
