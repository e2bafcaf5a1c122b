use super::*;

#[test]
fn a_ready_timeout_that_is_not_a_duration_is_refused() {
    let spec = |timeout: &str| -> ResourceGroupSpec {
        serde_json::from_value(serde_json::json!({
            "serviceAccountName": "d", "waitForReady": true, "readyTimeout": timeout}))
        .expect("spec")
    };
    assert!(ready_when_verdicts(&spec("90s")).is_empty());
    let refused = ready_when_verdicts(&spec("soon"));
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].action, Action::Deny);
    assert!(
        refused[0]
            .message
            .starts_with("spec.readyTimeout: invalid duration \"soon\""),
        "{}",
        refused[0].message
    );
}
