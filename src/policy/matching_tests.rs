use super::*;

#[test]
fn resource_patterns() {
    assert!(resource_matches("pods", "pods", ""));
    assert!(!resource_matches("pods", "pods", "status"));
    assert!(resource_matches("pods/status", "pods", "status"));
    assert!(resource_matches("*", "pods", ""));
    assert!(!resource_matches("*", "pods", "status"));
    assert!(resource_matches("*/*", "pods", "status"));
    assert!(resource_matches("pods/*", "pods", "exec"));
    assert!(resource_matches("*/scale", "deployments", "scale"));
}
