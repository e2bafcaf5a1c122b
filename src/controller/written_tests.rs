use super::*;
use crate::group::crd::ResourceGroupStatus;

fn status(generation: i64) -> ResourceGroupStatus {
    ResourceGroupStatus {
        observed_generation: Some(generation),
        ..ResourceGroupStatus::default()
    }
}

#[test]
fn a_store_behind_the_last_write_of_the_same_status_is_not_written_again() {
    let w = Written::default();
    w.wrote("u", vec!["10".into(), "11".into()], &status(1));
    // The pass's own version, or the one after its metadata patch.
    assert!(w.pending("u", "10", &status(1)));
    assert!(w.pending("u", "11", &status(1)));
    // Another status is written, whatever the store holds.
    assert!(!w.pending("u", "11", &status(2)));
    // Another group knows nothing of it.
    assert!(!w.pending("v", "11", &status(1)));
}

#[test]
fn a_store_that_moved_on_is_compared_as_usual_and_the_write_forgotten() {
    let w = Written::default();
    w.wrote("u", vec!["10".into()], &status(1));
    assert!(
        !w.pending("u", "12", &status(1)),
        "a version after the write"
    );
    assert_eq!(w.len(), 0, "forgotten");
    assert!(
        !w.pending("u", "10", &status(1)),
        "and not remembered again"
    );
}
