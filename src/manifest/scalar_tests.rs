use super::*;
use serde_json::json;
use std::borrow::Cow;

fn plain(s: &str) -> Value {
    to_json(resolve_plain(Cow::Borrowed(s))).unwrap()
}

#[test]
fn booleans_follow_yaml_1_1() {
    for t in [
        "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y",
    ] {
        assert_eq!(plain(t), json!(true), "{t}");
    }
    for f in [
        "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N",
    ] {
        assert_eq!(plain(f), json!(false), "{f}");
    }
    assert_eq!(plain("tRue"), json!("tRue"));
    assert_eq!(plain("yEs"), json!("yEs"));
}

#[test]
fn nulls() {
    for n in ["", "~", "null", "Null", "NULL"] {
        assert_eq!(plain(n), Value::Null, "{n:?}");
    }
    assert_eq!(plain("nULL"), json!("nULL"));
}

#[test]
fn integers() {
    assert_eq!(plain("0"), json!(0));
    assert_eq!(plain("42"), json!(42));
    assert_eq!(plain("-42"), json!(-42));
    assert_eq!(plain("+42"), json!(42));
    assert_eq!(plain("0x1F"), json!(31));
    assert_eq!(plain("-0x1f"), json!(-31));
    assert_eq!(plain("0o17"), json!(15));
    assert_eq!(plain("0755"), json!(493));
    assert_eq!(plain("0b101"), json!(5));
    assert_eq!(plain("1_000"), json!(1000));
    assert_eq!(plain("9223372036854775807"), json!(i64::MAX));
    assert_eq!(plain("-9223372036854775808"), json!(i64::MIN));
    assert_eq!(plain("18446744073709551615"), json!(u64::MAX));
    // "08" is not octal; Go then reads it as the float 8.
    assert_eq!(plain("08"), json!(8));
    assert_eq!(plain("0x"), json!("0x"));
    assert_eq!(plain("12abc"), json!("12abc"));
    assert_eq!(plain("1.2.3"), json!("1.2.3"));
    assert_eq!(plain("-"), json!("-"));
    assert_eq!(plain("0xZZ"), json!("0xZZ"));
}

#[test]
fn floats() {
    assert_eq!(plain("1.5"), json!(1.5));
    assert_eq!(plain(".5"), json!(0.5));
    assert_eq!(plain("-2.5e-3"), json!(-0.0025));
    // Integral floats reach the API server as integers.
    assert_eq!(plain("3.0"), json!(3));
    assert_eq!(plain("1e3"), json!(1000));
    assert_eq!(plain("1e300"), json!(1e300));
    assert_eq!(plain("."), json!("."));
    assert_eq!(plain("1e"), json!("1e"));
    for s in [".inf", "-.Inf", "+.INF", ".nan", ".NaN"] {
        let err = to_json(resolve_plain(Cow::Borrowed(s))).unwrap_err();
        assert!(matches!(err, ScalarError::NotFinite(_)), "{s}");
    }
    // Not YAML floats.
    assert_eq!(plain("inf"), json!("inf"));
    assert_eq!(plain("NaN"), json!("NaN"));
    assert_eq!(plain("infinity"), json!("infinity"));
}

#[test]
fn timestamps_and_versions_stay_strings() {
    assert_eq!(plain("2024-01-01"), json!("2024-01-01"));
    assert_eq!(
        plain("2001-12-14t21:59:43.10-05:00"),
        json!("2001-12-14t21:59:43.10-05:00")
    );
    assert_eq!(plain("1.25.3"), json!("1.25.3"));
    assert_eq!(plain("v1"), json!("v1"));
    assert_eq!(plain("10Gi"), json!("10Gi"));
    assert_eq!(plain("500m"), json!("500m"));
}

#[test]
fn quoted_scalars_are_strings() {
    let r = resolve(Cow::Borrowed("true"), Style::Quoted, None).unwrap();
    assert_eq!(to_json(r).unwrap(), json!("true"));
    let r = resolve(Cow::Borrowed("123"), Style::Quoted, None).unwrap();
    assert_eq!(to_json(r).unwrap(), json!("123"));
}

#[test]
fn tags() {
    let r = resolve(Cow::Borrowed("123"), Style::Plain, Some(CoreTag::Str)).unwrap();
    assert_eq!(to_json(r).unwrap(), json!("123"));
    let r = resolve(Cow::Borrowed("123"), Style::Quoted, Some(CoreTag::Int)).unwrap();
    assert_eq!(to_json(r).unwrap(), json!(123));
    let r = resolve(Cow::Borrowed("2"), Style::Plain, Some(CoreTag::Float)).unwrap();
    assert_eq!(r, Resolved::Float(2.0));
    assert!(resolve(Cow::Borrowed("abc"), Style::Plain, Some(CoreTag::Int)).is_err());
    let r = resolve(
        Cow::Borrowed("aGVsbG8="),
        Style::Plain,
        Some(CoreTag::Binary),
    )
    .unwrap();
    assert_eq!(to_json(r).unwrap(), json!("hello"));
    assert!(resolve(Cow::Borrowed("!!!"), Style::Plain, Some(CoreTag::Binary)).is_err());
    let r = resolve(Cow::Borrowed("true"), Style::Plain, Some(CoreTag::Other)).unwrap();
    assert_eq!(to_json(r).unwrap(), json!("true"));
}

#[test]
fn keys_are_stringified_like_sigs_yaml() {
    let key = |s: &str| to_key(resolve_plain(Cow::Borrowed(s)));
    assert_eq!(key("1").as_deref(), Some("1"));
    assert_eq!(key("0x10").as_deref(), Some("16"));
    assert_eq!(key("yes").as_deref(), Some("true"));
    assert_eq!(key("1.5").as_deref(), Some("1.5"));
    assert_eq!(key("1.0").as_deref(), Some("1"));
    assert_eq!(key("1e6").as_deref(), Some("1e+06"));
    assert_eq!(key("123456").as_deref(), Some("123456"));
    assert_eq!(key("0.0001").as_deref(), Some("0.0001"));
    assert_eq!(key("0.00001").as_deref(), Some("1e-05"));
    assert_eq!(key("0.1").as_deref(), Some("0.1"));
    assert_eq!(key("-2.5").as_deref(), Some("-2.5"));
    assert_eq!(key(".inf").as_deref(), Some(".inf"));
    assert_eq!(key("-.inf").as_deref(), Some("-.inf"));
    assert_eq!(key(".nan").as_deref(), Some(".nan"));
    assert_eq!(key("name").as_deref(), Some("name"));
    assert_eq!(key("~"), None);
    assert_eq!(key(""), None);
}
