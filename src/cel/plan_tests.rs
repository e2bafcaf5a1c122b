//! What happens between parsing and evaluation, as kube-apiserver v1.36's
//! cel-go does it: negated literals, the validators' order, the result
//! type before planning, and the planner's constant folding and
//! qualifiers. The expressions are from the differential fuzzer
//! (tests/vap-corpus/creation/fuzz-found.tsv); the messages are
//! kube-apiserver's.

use super::{Env, Ty};

fn env() -> Env {
    let mut env = Env::kubernetes();
    for name in ["object", "oldObject"] {
        env.add_variable(name);
    }
    env
}

/// The first line of the error `src` is refused with, or `accepted`.
fn answer(src: &str) -> String {
    match env().compile(src) {
        Ok(_) => "accepted".into(),
        Err(e) => e.to_string().lines().next().unwrap_or_default().to_string(),
    }
}

fn assert_answers(cases: &[(&str, &str)]) {
    for (src, want) in cases {
        assert_eq!(answer(src), *want, "{src}");
    }
}

#[test]
fn a_run_of_minus_signs_is_all_operators() {
    assert_answers(&[
        (
            "3u - (uint(--9223372036854775808) % (uint(object.data.f) * uint(0)))",
            "ERROR: <input>:1:14: invalid int literal",
        ),
        (
            "optional.of(--9223372036854775808[1]).hasValue()",
            "ERROR: <input>:1:15: invalid int literal",
        ),
        ("-9223372036854775808 < 0", "accepted"),
        ("--5 == 5 && ---5 == -5 && --2.25 == 2.25", "accepted"),
        (
            "-9223372036854775809 < 0",
            "ERROR: <input>:1:1: invalid int literal",
        ),
        (
            "18446744073709551616u > 0u",
            "ERROR: <input>:1:1: invalid uint literal",
        ),
        (
            "18446744073709551616 > 0",
            "ERROR: <input>:1:1: invalid int literal",
        ),
        // An even run of `!` cancels out, without a type check.
        ("!!true", "accepted"),
        (
            "!--1",
            "ERROR: <input>:1:3: Syntax error: no viable alternative at input '--'",
        ),
        (
            "!-quantity('100Mi').asApproximateFloat()",
            "ERROR: <input>:1:3: Syntax error: no viable alternative at input '-quantity'",
        ),
        (
            "!-1 == -1",
            "ERROR: <input>:1:1: found no matching overload for '!_' applied to '(int)'",
        ),
    ]);
}

#[test]
fn validator_issues_are_reported_first_by_position() {
    assert_answers(&[
        (
            "({'k0': 1u, 'k1': timestamp(9223372036854775807) - timestamp('1970-01-01T00:00:00Z')}).exists(v0, cidr('2001:db8::/32').masked().masked() != cidr('10.0.0.1/33'))",
            "ERROR: <input>:1:29: invalid timestamp argument",
        ),
        (
            "timestamp(r'\\d+') - timestamp(42) == duration(([1u, 0x1F]).max())",
            "ERROR: <input>:1:11: invalid timestamp argument",
        ),
        ("duration(1) == duration(1)", "ERROR: <input>:1:10: invalid duration argument"),
        // cel-go validates the first argument of `matches`: the string of
        // the global form; the pattern fails when the program is planned.
        ("matches('(', 'a')", "ERROR: <input>:1:9: invalid matches argument"),
        (
            "matches('a', '(')",
            "program instantiation failed: error parsing regexp: missing closing ): `(`",
        ),
        (
            "[1, 'a'] == [duration('x')]",
            "ERROR: <input>:1:5: expected type 'int' but found 'string'",
        ),
    ]);
}

#[test]
fn the_result_type_is_compared_before_the_program_is_planned() {
    for (src, ty, planning) in [
        ("uint(-1)", Ty::Uint, "unsigned integer overflow"),
        (
            "7 * int('v1.2.3')",
            Ty::Int,
            "type conversion error from 'string' to 'int'",
        ),
    ] {
        let checked = env().check_expression(src).expect(src);
        assert_eq!(checked.static_type(), Some(&ty), "{src}");
        assert_eq!(
            checked.plan().unwrap_err().to_string(),
            format!("program instantiation failed: {planning}"),
            "{src}"
        );
    }
}

#[test]
fn constant_qualifiers_of_other_types_are_refused_when_planning() {
    let refused = |t: &str| format!("program instantiation failed: invalid qualifier type: {t}");
    assert_answers(&[
        (
            "size(object.metadata.labels.missing[[b'', b'']]) < 1000",
            &refused("*types.baseList"),
        ),
        ("object.data[{}] == 1", &refused("*types.baseMap")),
        (
            "object.kind[duration('-3m')] == 1",
            &refused("types.Duration"),
        ),
        (
            "object.kind[timestamp('2024-01-01T00:00:00Z')] == 1",
            &refused("types.Timestamp"),
        ),
        (
            "object.data['f'][bytes('https://example.com:8080/p?q=1')] == 1",
            &refused("types.Bytes"),
        ),
        ("object.data[?null].hasValue()", &refused("types.Null")),
        ("object[double] == 1", &refused("*types.Type")),
        (
            "object.data[1] == object.data[1u] && object.data[true] == object.data[1.5] && object.data[string(1)] == 1",
            "accepted",
        ),
    ]);
}

#[test]
fn constant_conversions_fold_through_constants() {
    let failed = |m: &str| format!("program instantiation failed: {m}");
    assert_answers(&[
        (
            "double(dyn(null)) > 1.0",
            &failed("no such overload: double(null_type)"),
        ),
        (
            "uint(dyn(b'\\x00a')) > 1u",
            &failed("no such overload: uint(bytes)"),
        ),
        (
            "double(dyn({'a': 3u, 'b': 0u})) > 1.0",
            &failed("no such overload: double(map)"),
        ),
        (
            "[duration(string(1000))].size() == 1",
            &failed("type conversion error from 'string' to 'google.protobuf.Duration'"),
        ),
        (
            "uint(double(-5)) == 1u",
            &failed("unsigned integer overflow"),
        ),
        ("uint(--1e308) == 1u", &failed("unsigned integer overflow")),
        // Not constants: evaluated, not planned.
        ("uint(object.data) == 1u || int(-1 + 0) == 1", "accepted"),
    ]);
}

#[test]
fn a_comprehension_variable_holding_a_type_is_planned_as_a_type_name() {
    assert_answers(&[
        (
            "type(1) in ([uint].filter(v9, has(object.data.a) && false))",
            "program instantiation failed: reference to undefined type: v9",
        ),
        (
            "map in ([].filter(v7, has(object.data.z) || false))",
            "program instantiation failed: reference to undefined type: v7",
        ),
        ("[uint].exists(t, true)", "accepted"),
    ]);
}
