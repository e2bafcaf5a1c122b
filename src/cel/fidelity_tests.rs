//! What kube-apiserver v1.36's CEL answers, checked against a real
//! kube-apiserver (tests/integration/vap_differential.rs and probes made while writing
//! it): runtime error texts, `format` as its strings extension (version 2)
//! prints, and the literals `format` exempts from the homogeneous check.

use super::{Activation, Env, Value};

/// What kube-apiserver makes of an expression: its value, or its error
/// text (a compile error's prefixed `compile: `); both are what these
/// cases compare.
#[derive(Debug, PartialEq)]
enum Answer {
    Value(serde_json::Value),
    Error(String),
}

impl Answer {
    fn expect_err(self, what: &str) -> String {
        match self {
            Answer::Error(e) => e,
            Answer::Value(v) => panic!("{what}: expected an error, got {v}"),
        }
    }
}

fn eval_in(mut env: Env, src: &str) -> Answer {
    let object = env.add_variable("object");
    let program = match env.compile(src) {
        Ok(p) => p,
        Err(e) => return Answer::Error(format!("compile: {e}")),
    };
    let json = serde_json::json!({"data": {"s": "x", "n": "-1", "big": "1e30", "huge": "99999999999999999999"}});
    let mut act = Activation::new(&env);
    act.set(object, Value::from_json(&json));
    match program.eval(&act) {
        Ok(v) => Answer::Value(v.to_json()),
        Err(e) => Answer::Error(e.to_string()),
    }
}

fn kube(src: &str) -> Answer {
    eval_in(Env::kubernetes(), src)
}

fn kube_string(src: &str) -> String {
    match kube(src) {
        Answer::Value(serde_json::Value::String(s)) => s,
        other => panic!("{src}: {other:?}"),
    }
}

fn kube_error(src: &str) -> String {
    match kube(src) {
        Answer::Error(e) => e,
        Answer::Value(v) => panic!("{src}: expected an error, got {v:?}"),
    }
}

#[test]
fn runtime_errors_use_cel_go_words() {
    for (src, want) in [
        ("dyn(1) + 'a' == 'x'", "no such overload"),
        ("dyn('a') < 1", "no such overload"),
        ("dyn('s') ? true : false", "no such overload"),
        ("!dyn('x')", "no such overload"),
        ("dyn(1).startsWith('a')", "no such overload"),
        ("'x' in dyn(1)", "no such overload"),
        ("size(dyn(1)) == 1", "no such overload: size"),
        (
            "int(object.data.s) == 1",
            "type conversion error from 'string' to 'int'",
        ),
        (
            "int(object.data.huge) == 1",
            "type conversion error from 'string' to 'int'",
        ),
        (
            "uint(object.data.s) == 1u",
            "type conversion error from 'string' to 'uint'",
        ),
        (
            "double(object.data.s) == 1.0",
            "type conversion error from 'string' to 'double'",
        ),
        (
            "duration(object.data.s) > duration('1s')",
            "type conversion error from 'string' to 'google.protobuf.Duration'",
        ),
        (
            "timestamp(object.data.s) > timestamp(0)",
            "type conversion error from 'string' to 'google.protobuf.Timestamp'",
        ),
        (
            "uint(int(object.data.n)) == 1u",
            "unsigned integer overflow",
        ),
        ("int(double(object.data.big)) == 1", "integer overflow"),
        (
            "9223372036854775807 + int(object.data.n) * -1 > 0",
            "integer overflow",
        ),
        ("dyn({'a': 1})['b'] == 1", "no such key: b"),
        ("dyn({'a': 1})[1] == 1", "no such key: 1"),
        ("dyn([1, 2])[5] == 1", "index out of bounds: 5"),
        ("'abc'.substring(5) == ''", "index out of range: 5"),
        ("object.data.missing == 'x'", "no such key: missing"),
    ] {
        assert_eq!(kube_error(src), want, "{src}");
    }
}

#[test]
fn format_prints_like_kube_apiserver() {
    for (src, want) in [
        ("'%.2f'.format([1234567.891])", "1,234,567.89"),
        ("'%f'.format([1000.0])", "1,000.000000"),
        ("'%.3f'.format([-0.0005])", "-0.001"),
        ("'%.1f'.format([0.25])", "0.2"),
        ("'%f'.format([double('Infinity')])", "∞"),
        ("'%e'.format([123456.0])", "1.234560×10⁰⁵"),
        ("'%e'.format([0.001])", "1.000000×10⁻⁰³"),
        ("'%e'.format([-1.5])", "-1.500000×10⁰⁰"),
        ("'%e'.format([1e300])", "1.000000×10³⁰⁰"),
        // The precision of %e is a width in kube-apiserver's strings extension.
        ("'%.2e'.format([5.555])", "5.555000×10⁰⁰"),
        ("'%.0e'.format([0.0])", "0.000000×10⁰⁰"),
        ("'%e'.format([double('NaN')])", "   NaN"),
        ("'%e'.format([double('-Infinity')])", "    -∞"),
        ("'%d'.format([1234567])", "1234567"),
        ("'%.3s'.format(['abcdef'])", "abcdef"),
        ("'%s'.format([1.5])", "1.5"),
        ("'%s'.format([type(1)])", "int"),
        ("'%s'.format([b'abc'])", "abc"),
        (
            "'%s'.format([[1.5, 'a', b'x', true, null, duration('1s'), timestamp('2020-01-01T00:00:00Z'), {'b': 2.0, 'a': [1u]}]])",
            r#"[1.500000, "a", b"x", true, null, duration("1s"), timestamp("2020-01-01T00:00:00Z"), {"a":[1], "b":2.000000}]"#,
        ),
        ("'%s'.format([{'k': 1, 'j': 'v'}])", r#"{"j":"v", "k":1}"#),
        ("'%s'.format([[double('NaN'), -0.0, 1e20]])", r#"["NaN", -0.000000, 100000000000000000000.000000]"#),
        ("'%s'.format([[type(1), 3u, -2]])", "[int, 3, -2]"),
        ("'%s'.format([[[], {}]])", "[[], {}]"),
    ] {
        assert_eq!(kube_string(src), want, "{src}");
    }
    assert_eq!(
        kube_error("'%.2f'.format([object.data.s]) == ''"),
        "error during formatting: fixed-point clause can only be used on doubles, was given string"
    );
}

#[test]
fn the_latest_strings_extension_keeps_go_formatting() {
    assert_eq!(
        eval_in(Env::conformance(), "'%e'.format([0.001])"),
        Answer::Value(serde_json::json!("1.000000e-03"))
    );
}

#[test]
fn format_arguments_may_mix_types_other_lists_may_not() {
    assert_eq!(
        kube_string("'%x|%d|%s|%s'.format([255, -7, [1, 2], true])"),
        "ff|-7|[1, 2]|true"
    );
    assert_eq!(
        kube_string("'%s'.format([[1, 'a', {'k': [true, 2]}]])"),
        r#"[1, "a", {"k":[true, 2]}]"#
    );
    let err = kube("[1, 'a'].size() == 2").expect_err("a mixed list literal outside format");
    assert!(
        err.contains("expected type 'int' but found 'string'"),
        "{err}"
    );
    let err =
        kube("'%s'.format([1]) == [[1], 'a'][1]").expect_err("a mixed list beside a format call");
    assert!(
        err.contains("expected type 'list(int)' but found 'string'"),
        "{err}"
    );
}

/// A compile error's message without its position and caret, which
/// `dyn(...)` shifts.
fn without_position(r: Answer) -> Answer {
    let Answer::Error(e) = r else {
        return r;
    };
    let first = e.lines().next().unwrap_or_default();
    Answer::Error(match first.strip_prefix("compile: ERROR: <input>:") {
        Some(rest) => rest
            .splitn(3, ':')
            .nth(2)
            .unwrap_or(rest)
            .trim()
            .to_string(),
        None => e,
    })
}

/// `x.?a.?b.orValue(d)` and `x.?a.?b.hasValue()` are evaluated as one
/// node; `dyn(...)` around the selects keeps them apart, as they were
/// before. Both forms give the same value, or the same error, for present,
/// absent and mistyped fields, optionals as operands, and failing defaults.
#[test]
fn fused_optional_selects_answer_as_the_selects_and_the_call() {
    let operands = [
        "object",
        "object.data",
        "[1]",
        "object.data.s",
        "optional.none()",
        "optional.of(object.data)",
        "optional.of(optional.of(object.data))",
        "optional.of('x')",
        "{'s': {'t': 1}}",
        "{'s': optional.none()}",
        "object.?data",
    ];
    let chains = [
        ".?data",
        ".?data.?s",
        ".?s",
        ".?data.?missing.?deeper",
        ".?list.?x",
    ];
    // The end of each expression: `orValue` with a default, or `hasValue`.
    let ends = [
        ".orValue('default')",
        ".orValue(1 / 0)",
        ".orValue(object.data)",
        ".hasValue()",
    ];
    let mut compared = 0;
    for operand in operands {
        for chain in chains {
            for end in ends {
                // `dyn(operand)`: the checker would refuse some chains on
                // typed literals; the evaluation is what is compared.
                let fused = format!("dyn({operand}){chain}{end}");
                let apart = format!("dyn(dyn({operand}){chain}){end}");
                assert_eq!(
                    without_position(kube(&fused)),
                    without_position(kube(&apart)),
                    "{fused}"
                );
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 220);
}

#[test]
fn library_errors_use_kube_apiserver_words() {
    for (src, want) in [
        (
            "[1].filter(x, x > 5).max() == 1",
            "max called on empty list",
        ),
        (
            "['a'].filter(x, x == 'b').min() == ''",
            "min called on empty list",
        ),
        (
            "timestamp('2024-01-01T00:00:00Z').getHours(object.data.s) == 1",
            "unknown time zone x",
        ),
        (
            "timestamp('2024-01-01T00:00:00Z').getHours('x:00') == 1",
            "strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        // cel-go's guard: the first element is not an optional.
        (
            "optional.unwrap(dyn([1])).size() == 0",
            "no such overload: optional.unwrap(list)",
        ),
    ] {
        assert_eq!(kube_error(src), want, "{src}");
    }
}

/// kube-apiserver keeps the offset a timestamp was written with: `string()`
/// prints it and arithmetic keeps it, but the getters without a time zone
/// read UTC; equality compares instants.
#[test]
fn timestamps_keep_their_offset() {
    let t = "timestamp('2024-01-02T01:30:00+03:00')";
    for (src, want) in [
        (
            format!("string({t})"),
            serde_json::json!("2024-01-02T01:30:00+03:00"),
        ),
        (format!("{t}.getHours()"), serde_json::json!(22)),
        (format!("{t}.getHours('UTC')"), serde_json::json!(22)),
        (format!("{t}.getHours('+03:00')"), serde_json::json!(1)),
        (format!("{t}.getHours('+01:75')"), serde_json::json!(0)),
        (format!("{t}.getDayOfMonth()"), serde_json::json!(0)),
        (
            format!("string({t} + duration('90m'))"),
            serde_json::json!("2024-01-02T03:00:00+03:00"),
        ),
        (
            format!("{t} == timestamp('2024-01-01T22:30:00Z')"),
            serde_json::json!(true),
        ),
        (
            "string(timestamp('2024-01-02T01:30:00.120-05:30'))".to_string(),
            serde_json::json!("2024-01-02T01:30:00.12-05:30"),
        ),
        (
            "string(timestamp('2024-01-02T01:30:00+00:00'))".to_string(),
            serde_json::json!("2024-01-02T01:30:00Z"),
        ),
    ] {
        assert_eq!(kube(&src), Answer::Value(want), "{src}");
    }
}

/// kube-apiserver's strings extension: past the end, nothing is found.
#[test]
fn index_of_past_the_end_finds_nothing() {
    for (src, want) in [
        ("'abc'.indexOf('a', 10)", -1),
        ("'abc'.lastIndexOf('a', 10)", -1),
        ("'abc'.indexOf('', 10)", 10),
        ("'abc'.lastIndexOf('c', 2)", 2),
        ("'abcabc'.lastIndexOf('bc')", 4),
        ("'abc'.indexOf('c', 1)", 2),
    ] {
        assert_eq!(kube(src), Answer::Value(serde_json::json!(want)), "{src}");
    }
    assert_eq!(
        eval_in(Env::conformance(), "'abc'.indexOf('a', 10)"),
        Answer::Error("index out of range: 10".to_string())
    );
}

#[test]
fn optional_unwrap_keeps_present_values() {
    assert_eq!(
        kube("optional.unwrap([optional.of(1), optional.none(), optional.of(3)])"),
        Answer::Value(serde_json::json!([1, 3]))
    );
    assert_eq!(
        kube("[optional.none(), optional.of('a')].unwrapOpt()"),
        Answer::Value(serde_json::json!(["a"]))
    );
}
