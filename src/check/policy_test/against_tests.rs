use super::*;

#[test]
fn warnings_and_agreement() {
    assert_eq!(
        warning_text(
            r#"299 - "Validation failed for ValidatingAdmissionPolicy 'p-1' with binding 'b-1': no \"latest\" tag""#
        ),
        r#"no "latest" tag"#
    );
    let deny = |m: &str| Answer {
        denied: Some(m.into()),
        ..Answer::default()
    };
    let row = |a, b| Row {
        object: "Pod a/b".into(),
        interlock: a,
        kube: b,
    };
    assert!(row(deny("x"), deny("x")).agrees());
    assert!(!row(deny("x"), Answer::default()).agrees());
    assert!(!row(deny("x"), deny("y")).agrees());
    assert_eq!(deny("x").to_string(), "Deny: x");
    assert_eq!(Answer::default().to_string(), "admitted");
}
