//! Type-checker disagreements the differential fuzzer
//! (tests/integration/cel_fuzz_differential.rs) found with kube-apiserver
//! v1.36; each expression is in tests/vap-corpus/creation/fuzz-found.tsv
//! and each expected text is kube-apiserver's.

use super::tests::env;
use crate::cel::Ty;

/// kube-apiserver's answer: the first error, as it prints it.
fn refusal(src: &str) -> String {
    match env().compile(src) {
        Ok(p) => format!("accepted as {:?}", p.static_type()),
        Err(e) => e.to_string().lines().next().unwrap_or_default().to_string(),
    }
}

fn assert_refusals(cases: &[(&str, &str)]) {
    for (src, want) in cases {
        assert_eq!(refusal(src), *want, "{src}");
    }
}

#[test]
fn checking_goes_on_past_an_error_as_cel_go_does() {
    assert_refusals(&[
        (
            "ip(ip('::1').string().reverse()).isLinkLocalMulticast()",
            "ERROR: <input>:1:3: found no matching overload for 'ip' applied to '(list(dyn))'",
        ),
        (
            "'[a-z]+' >= ([1e3, -0.0])[?42].hasValue().replace(url('example.com').getPort() + (has(object.data.z) ? null : null), 1u[?\"q'\"].value(), 1)",
            "ERROR: <input>:1:50: found no matching overload for 'replace' applied to 'bool.(!error!, dyn, int)'",
        ),
        (
            "null != (true ? [] : (cidr('10.0.0.1/33').containsIP(\"q'\") ? (has(object.data.a) ? null : null) : (true ? -5 : 1)))",
            "ERROR: <input>:1:6: found no matching overload for '_!=_' applied to '(null, list(dyn))'",
        ),
        (
            "semver('1.2.3-alpha+b1').isGreaterThan(semver(duration('90m') && (size('%v') > 9223372036854775807)))",
            "ERROR: <input>:1:55: expected type 'bool' but found 'duration'",
        ),
    ]);
}

#[test]
fn macro_expansions_sit_at_the_call_parenthesis() {
    assert_refusals(&[
        (
            "object.metadata.labels.all(v8, v9, sets.equivalent([?optional.of(v9).or(v9), [].exists(v10, false)], [].distinct()))",
            "ERROR: <input>:1:87: expected type 'dyn' but found 'bool'",
        ),
        (
            "(uint(object.data.d) - (1u % 1u)).sortBy(v13, 1).exists(v14, true)",
            "ERROR: <input>:1:41: expression of type 'uint' cannot be range of a comprehension (must be list, map, or dynamic)",
        ),
        (
            "(!(has(object.data.z).filter(v18, has(object.data.a))).all(v19, has(object.data.a))) || true",
            "ERROR: <input>:1:7: expression of type 'bool' cannot be range of a comprehension (must be list, map, or dynamic)",
        ),
        (
            "({'10.0.0.1': object.data})[?'%v'].optFlatMap(v30, optional.of('1.2.3')).exists(v31, true)",
            "ERROR: <input>:1:46: expression of type 'optional_type(string)' cannot be range of a comprehension (must be list, map, or dynamic)",
        ),
        // An optional element is placed where its call is.
        (
            "([?semver('v1.0'), 1.5]).isSorted()",
            "ERROR: <input>:1:10: expected type 'optional_type(kubernetes.Semver)' but found 'kubernetes.Semver'",
        ),
    ]);
}

#[test]
fn sort_by_refuses_a_literal_target_when_it_expands() {
    assert_refusals(&[
        (
            "(null.sortBy(v17, 1)).size() == 0",
            "ERROR: <input>:1:2: sortBy can only be applied to a list, identifier, comprehension, call or select expression",
        ),
        (
            "('  pad  ').sortBy(v1, 42) == []",
            "ERROR: <input>:1:2: sortBy can only be applied to a list, identifier, comprehension, call or select expression",
        ),
        (
            "{'a': 1}.sortBy(v1, 42) == []",
            "ERROR: <input>:1:1: sortBy can only be applied to a list, identifier, comprehension, call or select expression",
        ),
    ]);
}

#[test]
fn sort_by_keys_must_be_of_a_comparable_type() {
    assert_refusals(&[
        (
            "('1.5Gi'.findAll('1.5Gi').sortBy(v3, [].flatten())).filter(v4, has(object.data.a)).isSorted()",
            "ERROR: <input>:1:33: found no matching overload for '@sortByAssociatedKeys' applied to 'list(string).(list(list(dyn)))'",
        ),
        (
            "string([].sortBy(v10, v10)) == ''",
            "ERROR: <input>:1:7: found no matching overload for 'string' applied to '(list(int))'",
        ),
    ]);
}

#[test]
fn an_even_run_of_prefix_operators_cancels_out() {
    assert_eq!(super::tests::type_of("!!object.data.d"), Ty::Dyn);
    assert_refusals(&[
        (
            "--0.0.ip().isUnspecified()",
            "ERROR: <input>:1:9: found no matching overload for 'ip' applied to 'double.()'",
        ),
        (
            "--has(object.data.a) - 1.5 == 0.0",
            "ERROR: <input>:1:22: found no matching overload for '_-_' applied to '(bool, double)'",
        ),
        // `--9223372036854775808` is the literal 9223372036854775808.
        (
            "(['10.0.0.1', 'a'])[-1] + string(duration('1h') + duration('1.5s')) in {'k0': --9223372036854775808}",
            "ERROR: <input>:1:81: invalid int literal",
        ),
        (
            "-9223372036854775809 < 0",
            "ERROR: <input>:1:1: invalid int literal",
        ),
    ]);
}

#[test]
fn type_variables_are_numbered_as_cel_go_numbers_them() {
    assert_refusals(&[
        (
            "([].sortBy(v13, 9223372036854775807)).flatten().flatten().exists(v14, {?'a': optional.none()})",
            "ERROR: <input>:1:71: expected type 'bool' but found 'map(string, _var14)'",
        ),
        (
            "(optional.of(object.data['[a-z]+']).optFlatMap(v0, (v0.slice(v0, v0))[?int(v0)])).exists(v1, true)",
            "ERROR: <input>:1:47: expression of type 'optional_type(_var24)' cannot be range of a comprehension (must be list, map, or dynamic)",
        ),
    ]);
}

#[test]
fn overloads_bind_type_parameters_in_cel_go_order() {
    // cel-go declares `-_` on double before int.
    assert_refusals(&[(
        "size([0, 2]) == -[][object.metadata.namespace.indexOf('1.2.3')]",
        "ERROR: <input>:1:14: found no matching overload for '_==_' applied to '(int, double)'",
    )]);
}

#[test]
fn a_bytes_map_key_is_an_evaluation_error() {
    use crate::cel::Activation;
    let env = env();
    let program = env.compile("size({b'a': 1}) < 1").expect("compiles");
    assert_eq!(
        program
            .eval(&Activation::new(&env))
            .map(|_| ())
            .unwrap_err()
            .to_string(),
        "internal error: runtime error: hash of unhashable type types.Bytes"
    );
}

#[test]
fn a_member_call_checks_its_arguments_before_its_target() {
    // `indexOf`'s argument binds the element type to int before `split`
    // would bind it to string.
    assert_refusals(&[(
        "sets.intersects(quantity('1e3'), [].sortBy(v7, ('  pad  ').split(v7)[9223372036854775807].indexOf(([v7, v7])[v7])))",
        "ERROR: <input>:1:16: found no matching overload for 'sets.intersects' applied to '(kubernetes.Quantity, list(int))'",
    )]);
}

#[test]
fn the_type_names_list_and_map_carry_type_parameters() {
    assert_refusals(&[(
        "map.exists(v20, true)",
        "ERROR: <input>:1:1: expression of type 'type(map(A, B))' cannot be range of a comprehension (must be list, map, or dynamic)",
    )]);
}

#[test]
fn map_literals_take_keys_of_any_type() {
    assert_refusals(&[
        ("size({null: '%s-%d'}) < 1", "accepted as Some(Bool)"),
        ("{1.5: 1}.exists(k, k == 1.5)", "accepted as Some(Bool)"),
        (
            "{null: 1, 'a': 2}.size() == 2",
            "ERROR: <input>:1:11: expected type 'null' but found 'string'",
        ),
        (
            "{null: 'a'}[null] == 'a'",
            "program instantiation failed: invalid qualifier type: types.Null",
        ),
        (
            "dyn({null: 1})[null] == 1",
            "program instantiation failed: invalid qualifier type: types.Null",
        ),
    ]);
}
