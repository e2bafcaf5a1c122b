//! What the differential fuzzer (tests/integration/cel_fuzz_differential.rs)
//! found kube-apiserver v1.36 doing differently; each case is also in
//! tests/vap-corpus/creation/fuzz-found.tsv.

use super::{Activation, Env};

/// What kube-apiserver makes of an expression: its value (as JSON text)
/// or its error text; both are what these cases compare.
#[derive(Debug, PartialEq)]
enum Answer {
    Value(String),
    Error(String),
}

fn kube(src: &str) -> Answer {
    let env = Env::kubernetes();
    let program = match env.compile(src) {
        Ok(p) => p,
        Err(e) => return Answer::Error(e.to_string()),
    };
    match program.eval(&Activation::new(&env)) {
        Ok(v) => Answer::Value(v.to_json().to_string()),
        Err(e) => Answer::Error(e.to_string()),
    }
}

/// The first line of a compile error.
fn refusal(src: &str) -> String {
    let Answer::Error(text) = kube(src) else {
        return String::new();
    };
    text.lines().next().unwrap_or_default().to_string()
}

#[test]
fn or_and_or_value_evaluate_the_alternative_only_when_empty() {
    for (src, want) in [
        ("optional.of(1).or(optional.of(1 / 0)).value()", "1"),
        ("optional.of(1).orValue(1 / 0)", "1"),
        ("optional.of({'a': 1}).?a.orValue(1 / 0)", "1"),
        ("optional.none().orValue(2)", "2"),
    ] {
        assert_eq!(kube(src), Answer::Value(want.to_string()), "{src}");
    }
    assert_eq!(
        kube("optional.none().orValue(1 / 0)"),
        Answer::Error("division by zero".into())
    );
}

#[test]
fn substring_checks_the_order_of_two_indexes_first() {
    assert_eq!(
        kube("'abc'.substring(7, -1)"),
        Answer::Error("invalid substring range. start: 7, end: -1".into())
    );
    assert_eq!(
        kube("'abc'.substring(5)"),
        Answer::Error("index out of range: 5".into())
    );
}

#[test]
fn format_arity_is_checked_on_any_list_literal() {
    for (src, want) in [
        (
            "'%%'.format([dyn(1), 2]) == ''",
            "ERROR: <input>:1:12: too many arguments supplied to string.format (expected 0, got 2)",
        ),
        (
            "'%s'.format([dyn(1), 2]) == ''",
            "ERROR: <input>:1:12: too many arguments supplied to string.format (expected 1, got 2)",
        ),
        (
            "'%d %d'.format([dyn(1)]) == ''",
            "ERROR: <input>:1:15: index 1 out of range",
        ),
        (
            "'%v'.format([]) == ''",
            "ERROR: <input>:1:12: index 0 out of range",
        ),
    ] {
        assert_eq!(refusal(src), want, "{src}");
    }
}

#[test]
fn checker_positions_and_conversions_of_library_types() {
    for (src, want) in [
        ("cidr('10.0.0.0/8').ip() && true", "ERROR: <input>:1:22: expected type 'bool' but found 'net.IP'"),
        ("double(1).exists(x, true)", "ERROR: <input>:1:7: expression of type 'double' cannot be range of a comprehension (must be list, map, or dynamic)"),
        ("ip('::1').string() == ''", "ERROR: <input>:1:17: found no matching overload for 'string' applied to 'net.IP.()'"),
        ("string(quantity('1')) == ''", "ERROR: <input>:1:7: found no matching overload for 'string' applied to '(kubernetes.Quantity)'"),
        ("dyn(1) in [dyn(1).reverse(), 'a']", "ERROR: <input>:1:30: expected type 'list(dyn)' but found 'string'"),
    ] {
        assert_eq!(refusal(src), want, "{src}");
    }
}
