use super::*;
use serde_json::json;

#[test]
fn lines_of_fields() {
    let text =
        "{\n  \"a\": 1,\n  \"b\": {\n    \"c\": [\n      1,\n      {\"d\": 2}\n    ]\n  }\n}\n";
    let p = parse_stream(text);
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let d = &p.docs[0];
    assert_eq!(d.line, 1);
    let a = child_key(ROOT, "a");
    assert_eq!(d.index.get(a), Some(2));
    let c = child_key(child_key(ROOT, "b"), "c");
    assert_eq!(d.index.get(c), Some(4));
    assert_eq!(d.index.get(child_index(c, 1)), Some(6));
}

#[test]
fn duplicate_keys_are_errors() {
    let text = "{\n \"a\": 1,\n \"b\": 2,\n \"a\": 3\n}";
    let p = parse_stream(text);
    assert!(p.docs.is_empty());
    assert_eq!(
        p.errors[0].kind,
        LoadErrorKind::DuplicateKey {
            key: "a".into(),
            first_line: 2
        }
    );
    assert_eq!(p.errors[0].line, 4);
    assert_eq!(p.errors[0].column, Some(2));
}

#[test]
fn escaped_keys_and_strings() {
    let text = r#"{"a\"b": "x}{\"", "c\u0041": [1.0, 2.5]}"#;
    let p = parse_stream(text);
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.docs[0].value, json!({"a\"b": "x}{\"", "cA": [1, 2.5]}));
}

#[test]
fn several_values_and_syntax_errors() {
    let text = "{\"a\": 1}\n\n{\"b\": 2}\n{\"c\": }";
    let p = parse_stream(text);
    assert_eq!(p.docs.len(), 2);
    assert_eq!(p.docs[1].line, 3);
    assert_eq!(p.errors.len(), 1);
    assert_eq!(p.errors[0].line, 4);
    assert!(matches!(p.errors[0].kind, LoadErrorKind::Syntax(_)));
}
