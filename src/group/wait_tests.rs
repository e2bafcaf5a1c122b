use super::*;
use chrono::TimeZone;

fn step(rank: u8, settled: bool) -> Step {
    Step { rank, settled }
}

#[test]
fn later_ranks_wait_for_the_first_unsettled_member() {
    // ConfigMap (3) settled, Job (6) running, Deployment (7), Ingress (8).
    let steps = [
        step(3, true),
        step(6, false),
        step(7, false),
        step(8, false),
    ];
    assert_eq!(hold(&steps), Some(Hold { index: 1, rank: 6 }));
    // Two members of one rank: the first not ready is named.
    let steps = [step(6, true), step(6, false), step(7, true)];
    assert_eq!(hold(&steps), Some(Hold { index: 1, rank: 6 }));
}

#[test]
fn nothing_waits_when_all_earlier_ranks_are_settled_or_only_the_last_is_not() {
    assert_eq!(hold(&[step(3, true), step(6, true), step(7, true)]), None);
    assert_eq!(hold(&[step(3, true), step(7, false), step(7, false)]), None);
    assert_eq!(hold(&[]), None);
}

#[test]
fn a_claim_settles_once_applied_anything_else_once_ready() {
    assert!(settles("v1", "PersistentVolumeClaim", true, false));
    assert!(!settles("v1", "PersistentVolumeClaim", false, false));
    assert!(!settles("batch/v1", "Job", true, false));
    assert!(settles("batch/v1", "Job", true, true));
    assert!(!settles("batch/v1", "Job", false, true));
    assert!(!settles(
        "example.com/v1",
        "PersistentVolumeClaim",
        true,
        false
    ));
}

#[test]
fn timeouts_use_go_durations() {
    assert_eq!(timeout("10m"), Ok(Duration::from_secs(600)));
    assert_eq!(timeout("1m30s"), Ok(Duration::from_secs(90)));
    assert!(timeout("ten minutes")
        .unwrap_err()
        .to_string()
        .contains("spec.readyTimeout"));
    assert!(timeout("0s").is_err());
}

fn at(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, minute, 0).unwrap()
}

fn waiting(kind: &str, api_version: &str, since: DateTime<Utc>) -> WaitingFor {
    WaitingFor {
        api_version: api_version.into(),
        kind: kind.into(),
        name: "x".into(),
        since: since.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }
}

#[test]
fn the_wait_keeps_its_start_at_the_same_rank_of_the_same_generation() {
    let job = waiting("Job", "batch/v1", at(1));
    assert_eq!(since(Some(&job), Some(3), 3, 6, at(5)), at(1));
    // Another rank, another generation, or no previous wait: now.
    assert_eq!(since(Some(&job), Some(3), 3, 7, at(5)), at(5));
    assert_eq!(since(Some(&job), Some(2), 3, 6, at(5)), at(5));
    assert_eq!(since(None, Some(3), 3, 6, at(5)), at(5));
    // A start in the future (a clock skew) is not trusted.
    assert_eq!(since(Some(&job), Some(3), 3, 6, at(0)), at(0));
    assert_eq!(deadline(at(1), Duration::from_secs(600)), at(11));
}
