use super::*;

#[test]
fn a_verdict_becomes_a_status_finding() {
    let verdict = crate::policy::Verdict {
        policy: "p".into(),
        binding: None,
        action: crate::policy::Action::Warn,
        message: "m".into(),
        reason: None,
        related: vec![],
    };
    let member = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "shop"}});
    let f = GroupFinding::from_verdict(&verdict, &member);
    assert_eq!(f.action, FindingAction::Warn);
    assert_eq!(
        serde_json::to_value(&f).unwrap(),
        serde_json::json!({"policy": "p", "binding": null, "action": "Warn", "message": "m",
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "c"}})
    );
}
