//! Evaluation-phase disagreements the differential fuzzer
//! (tests/integration/cel_fuzz_differential.rs) found with kube-apiserver
//! v1.36: the expressions both sides accept but evaluate with other
//! results or messages. Expected texts are cel-go's, as kube-apiserver
//! reports them.

use super::{Activation, Env};

/// The error text of `src`, at run time or, for the cases whose operands
/// are constants that cel-go's planner folds (`uint(dyn({'a': 1}))`), at
/// planning: the same text, which kube-apiserver prefixes with
/// "program instantiation failed: " (the fuzzer's own cases have
/// operands that are not constant, and fail at run time).
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
        Err(e) => {
            let text = e.to_string();
            let text = text
                .strip_prefix("program instantiation failed: ")
                .map_or(text.clone(), str::to_string);
            return Answer::Error(text);
        }
    };
    match program.eval(&Activation::new(&env)) {
        Ok(v) => Answer::Value(v.to_json().to_string()),
        Err(e) => Answer::Error(e.to_string()),
    }
}

fn assert_errors(cases: &[(&str, &str)]) {
    for (src, want) in cases {
        assert_eq!(kube(src), Answer::Error(want.to_string()), "{src}");
    }
}

#[test]
fn no_such_overload_names_the_function_and_the_runtime_types() {
    assert_errors(&[
        ("uint(dyn({'a': 1})) < 1u", "no such overload: uint(map)"),
        (
            "string(dyn(null)) == ''",
            "no such overload: string(null_type)",
        ),
        ("dyn('x').hasValue()", "no such overload: hasValue(string)"),
        (
            "double(dyn(semver('1.2.3'))) > 1.0",
            "no such overload: double(kubernetes.Semver)",
        ),
        (
            "format.dns1123Label().validate(dyn({'a': 1})).hasValue()",
            "no such overload: validate(kubernetes.NamedFormat, map)",
        ),
        (
            "semver('1.2.3').isGreaterThan(dyn(null))",
            "no such overload: isGreaterThan(kubernetes.Semver, null_type)",
        ),
        (
            "'abc'.replace('a', 'b', dyn('1')) == ''",
            "no such overload: replace(string, string, string, string)",
        ),
        (
            "dyn({}).slice(0, 1) == []",
            "no such overload: slice(map, int, int)",
        ),
        (
            "dyn({}).lastIndexOf('a') == 0",
            "no such overload: lastIndexOf(map, string)",
        ),
        (
            "dyn('a').flatten() == []",
            "no such overload: string.flatten()",
        ),
    ]);
}

#[test]
fn operators_bound_by_trait_name_only_the_function() {
    assert_errors(&[
        (
            "size(dyn(quantity('500m'))) < 1000",
            "no such overload: size",
        ),
        ("size(dyn(optional.none())) < 1", "no such overload: size"),
        ("size(dyn(1)) == 1", "no such overload: size"),
        ("!(dyn(true) * 1u <= 0u)", "no such overload: _*_"),
        (
            "dyn(null) - duration('90m') <= duration('1h')",
            "no such overload: _-_",
        ),
        ("dyn({'a': 1}).sort() == []", "no such overload: sort"),
        ("dyn(1).matches('a')", "no such overload: matches"),
        // A value with the trait, or a receiver type, refuses the other
        // operand itself, in the plain words.
        ("dyn(1) + 'a' == 'x'", "no such overload"),
        ("dyn(duration('1s')) * 2 == 2", "no such overload"),
        ("'a'.startsWith(dyn(1))", "no such overload"),
        ("'a'.matches(dyn(1))", "no such overload"),
    ]);
}

#[test]
fn nan_cannot_be_ordered() {
    assert_errors(&[
        ("dyn(double('NaN')) < 1", "NaN values cannot be ordered"),
        ("1 >= dyn(double('NaN'))", "NaN values cannot be ordered"),
    ]);
}

#[test]
fn index_and_qualifier_texts() {
    assert_errors(&[
        ("dyn('abc')[true] == 'a'", "no such key: true"),
        ("dyn(null)[7] == 1", "no such key: 7"),
        ("{1u: 2}[dyn(7u)] == 1", "no such key: 7"),
        ("[1][dyn(5u)] == 1", "index out of bounds: 5"),
        (
            "{'a': 1}[dyn(null)] == 1",
            "invalid qualifier type: types.Null",
        ),
        (
            "{'a': 1}[dyn(optional.none())] == 1",
            "invalid qualifier type: *types.Optional",
        ),
        (
            "{'a': 1}[dyn(ip('::1'))] == 1",
            "invalid qualifier type: cel.IP",
        ),
        (
            "{'a': 1}[dyn(b'a')] == 1",
            "invalid qualifier type: types.Bytes",
        ),
    ]);
}

#[test]
fn library_values_refuse_equality_with_other_types() {
    assert_errors(&[
        ("semver('1.2.3') == dyn('1.2.3')", "no such overload"),
        (
            "cidr('10.0.0.0/8') == dyn('10.0.0.0/8')",
            "no such overload",
        ),
        // `add` and `sub` return the quantity by pointer.
        ("quantity('2') == quantity('1').add(1)", "no such overload"),
    ]);
    assert_eq!(
        kube("quantity('1').add(1) == quantity('2')"),
        Answer::Value("true".into())
    );
    assert_eq!(
        kube("semver('1.2.3') == dyn(null)"),
        Answer::Value("false".into())
    );
    assert_eq!(
        kube("dyn('1.2.3') == semver('1.2.3')"),
        Answer::Value("false".into())
    );
}

#[test]
fn sort_keys_in_cel_go_words() {
    assert_errors(&[
        (
            "dyn([{}, {}]).sort() == []",
            "list elements must be comparable",
        ),
        (
            "[dyn(1), dyn('a')].sort() == []",
            "list elements must have the same type",
        ),
    ]);
}

#[test]
fn or_and_or_value_answer_a_receiver_that_is_not_optional() {
    assert_eq!(
        kube("dyn('x').orValue(1 / 0)"),
        Answer::Value("\"x\"".into())
    );
    assert_eq!(
        kube("dyn(dyn('x').or(optional.of(1))) == 'x'"),
        Answer::Value("true".into())
    );
    assert_eq!(
        kube("dyn(optional.none().or(dyn(1))) == 1"),
        Answer::Value("true".into())
    );
}

#[test]
fn cost_tracker_panics_on_an_error_where_a_list_is_asserted() {
    const PANIC: &str =
        "internal error: interface conversion: *types.Err is not traits.Lister: missing method Add";
    assert_errors(&[
        ("[''.charAt(-5)].sort() == []", PANIC),
        ("[1, 2].sortBy(v, v / 0) == []", PANIC),
        ("['a'].sortBy(v, int(v)).size() == 1", PANIC),
        // No `||`, `&&` or comprehension absorbs it.
        ("true && ([1 / 0].distinct() == [] || true)", PANIC),
        (
            "dyn(1).distinct() == []",
            "internal error: interface conversion: types.Int is not traits.Lister: missing method Contains",
        ),
    ]);
    // Only where the checker resolved one overload: not for `dyn` lists.
    assert_errors(&[
        ("dyn([1 / 0]).sort() == []", "division by zero"),
        (
            "[dyn(1), dyn(1 / 0)].sortBy(v, v) == []",
            "division by zero",
        ),
    ]);
    // Nothing to sort, no key computed.
    assert_eq!(
        kube("[].sortBy(v, v / 0) == []"),
        Answer::Value("true".into())
    );
}

#[test]
fn comprehension_range_and_timestamp_conversion_texts() {
    assert_errors(&[
        (
            "dyn('ab').all(v, true)",
            "got 'types.String', expected iterable type",
        ),
        (
            "dyn(timestamp(1)).exists(v, true)",
            "got 'types.Timestamp', expected iterable type",
        ),
        (
            "dyn('ab').exists(k, v, true)",
            "unsupported comprehension range type: types.String",
        ),
        (
            "timestamp(dyn(-9223372036854775807)) == timestamp(0)",
            "timestamp overflow",
        ),
    ]);
}

#[test]
fn membership_in_an_empty_list_literal_is_planned_as_false() {
    assert_eq!(kube("(1 / 0) in []"), Answer::Value("false".into()));
    assert_eq!(
        kube("cidr('10.0.0.1/33').masked() in []"),
        Answer::Value("false".into())
    );
    assert_errors(&[("(1 / 0) in [1]", "division by zero")]);
}

#[test]
fn optional_index_of_a_scalar_and_zero_timestamps() {
    assert_eq!(
        kube("dyn('abc')[?0].hasValue()"),
        Answer::Value("false".into())
    );
    assert_eq!(
        kube("optional.ofNonZeroValue(timestamp('1970-01-01T00:00:00Z')).hasValue()"),
        Answer::Value("true".into())
    );
    assert_eq!(
        kube("optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00Z')).hasValue()"),
        Answer::Value("false".into())
    );
}

#[test]
fn the_first_operand_of_a_logical_operator_errs_first() {
    assert_errors(&[
        ("dyn('a') && 1 / 0 == 1", "no such overload"),
        ("dyn('a') || 1 / 0 == 1", "no such overload"),
        ("1 / 0 == 1 || dyn('a')", "division by zero"),
    ]);
    assert_eq!(kube("dyn('a') || true"), Answer::Value("true".into()));
}

#[test]
fn an_empty_optional_takes_no_index() {
    assert_eq!(
        kube("dyn(optional.none())[1 / 0] == optional.none()"),
        Answer::Value("true".into())
    );
}

#[test]
fn lists_and_maps_as_index_by_their_go_types() {
    assert_errors(&[
        (
            "dyn({'a': 1})[[1, 2]] == 1",
            "invalid qualifier type: *types.baseList",
        ),
        (
            "dyn({'a': 1})[{'b': 2}] == 1",
            "invalid qualifier type: *types.baseMap",
        ),
        (
            "dyn([1])[[]] == 1",
            "invalid qualifier type: *types.baseList",
        ),
    ]);
}

#[test]
fn is_sorted_min_and_max_as_the_kubernetes_library() {
    // The first descending pair answers; comparisons that fail are skipped.
    assert_eq!(
        kube("[dyn(2), dyn(1), dyn('a')].isSorted()"),
        Answer::Value("false".into())
    );
    assert_eq!(
        kube("[dyn(1), dyn('a'), dyn(2)].isSorted()"),
        Answer::Value("true".into())
    );
    assert_eq!(
        kube("[dyn(1), dyn(2.5), dyn(3u)].isSorted()"),
        Answer::Value("true".into())
    );
    assert_eq!(
        kube("[dyn(3), dyn('a'), dyn(1)].min()"),
        Answer::Value("1".into())
    );
    assert_errors(&[
        (
            "dyn([dyn({}), dyn(1)]).isSorted()",
            "no such overload: isSorted(list)",
        ),
        ("[dyn(1), dyn({})].isSorted()", "no such overload"),
        ("dyn({}).max() == 1", "no such overload: max(map)"),
    ]);
}

#[test]
fn conversions_and_receivers_kube_apiserver_lacks() {
    assert_errors(&[
        (
            "string(dyn(quantity('1Gi'))) == ''",
            "no such overload: string(kubernetes.Quantity)",
        ),
        (
            "dyn(dyn('abc').reverse()) == 'cba'",
            "no such overload: reverse(string)",
        ),
    ]);
    assert_eq!(
        kube("string(dyn(ip('::1'))) == '::1'"),
        Answer::Value("true".into())
    );
}

#[test]
fn map_keeps_its_first_error_and_both_operands_are_evaluated() {
    assert_errors(&[
        ("[dyn({}), dyn('a')].map(v, v.sub(v)) == []", "no such overload: sub(map, map)"),
        (
            "1 / 0 < [1].sortBy(v, v / 0).size()",
            "internal error: interface conversion: *types.Err is not traits.Lister: missing method Add",
        ),
    ]);
}

fn assert_true(cases: &[&str]) {
    for src in cases {
        assert_eq!(kube(src), Answer::Value("true".to_string()), "{src}");
    }
}

/// cel-go builds a map literal as a Go map keyed by the CEL value: any
/// value Go can hash is a key, compared with Go's `==` (by value, or by
/// identity for the values cel-go holds by pointer); a repeated key
/// replaces the value; an unhashable key panics.
#[test]
fn map_literal_keys_of_any_type_are_go_map_keys() {
    assert_true(&[
        "size({null: '%s-%d'}) < 2",
        "{1.5: 'a'}[1.5] == 'a'",
        "{1.5: 'a'}[?1.5] == optional.of('a')",
        "{0.0: 'a'}[-0.0] == 'a'",
        "size({double('NaN'): 'a', double('NaN'): 'b'}) == 2",
        "size({1.0: 'a', 1.0: 'b'}) == 1",
        "size({1: 'a', 1: 'b'}) == 1",
        "{'a': 1, 'a': 2}['a'] == 2",
        "size({dyn(1): 'a', dyn(1u): 'b'}) == 2",
        "{dyn(1): 'a', dyn(1u): 'b'}[1u] == 'b'",
        "ip('10.0.0.1') in {ip('10.0.0.1'): 1}",
        "size({ip('10.0.0.1'): 1, ip('10.0.0.1'): 2}) == 1",
        "cidr('10.0.0.0/8') in {cidr('10.0.0.0/8'): 1}",
        "size({cidr('10.0.0.0/8'): 1, cidr('10.0.0.1/8'): 1}) == 2",
        "optional.none() in {optional.none(): 1}",
        "size({optional.none(): 1, optional.none(): 2}) == 1",
        "!(optional.of(1) in {optional.of(1): 1})",
        "size({optional.of(1): 1, optional.of(1): 2}) == 2",
        "!([1] in {[1]: 2})",
        "size({[1]: 1, [1]: 2}) == 2",
        "size({{}: 1}) == 1",
        "size({quantity('1'): 1, quantity('1'): 2}) == 2",
        "!(quantity('1') in {quantity('1'): 1})",
        "size({url('https://x'): 1, url('https://x'): 2}) == 2",
        "timestamp('2024-01-01T01:00:00+01:00') in {timestamp('2024-01-01T01:00:00+01:00'): 1}",
        "size({timestamp('2024-01-01T00:00:00Z'): 1, timestamp('2024-01-01T01:00:00+01:00'): 2}) == 2",
        "size({duration('1s'): 1, duration('1000ms'): 2}) == 1",
        "int in {int: 1}",
        "size({int: 1, type(1): 2}) == 1",
        "{null: 1} == {null: 1}",
        "{ip('10.0.0.1'): 1} == {ip('10.0.0.1'): 1}",
        "{optional.of(1): 1} != {optional.of(1): 1}",
        "{1.5: 1}.exists(k, k == 1.5)",
        "{null: 1}.all(k, k == null)",
        "{null: 1}.exists_one(k, true)",
        "({optional.of(1): 1}).exists(k, k.value() == 1)",
        "!(b'a' in {})",
        "size({'a': 1, ?'a': optional.none()}) == 0",
    ]);
    assert_errors(&[
        (
            "{double('NaN'): 'a'}[double('NaN')] == 'a'",
            "no such key: NaN",
        ),
        ("{1.5: 'x'}[2.5] == 'x'", "no such key: 2.5"),
        (
            "{ip('10.0.0.1'): 1}[ip('10.0.0.1')] == 1",
            "invalid qualifier type: cel.IP",
        ),
        (
            "size({semver('1.0.0'): 1}) == 1",
            "internal error: runtime error: hash of unhashable type cel.Semver",
        ),
        (
            "size({b'a': 1}) == 1 || true",
            "internal error: runtime error: hash of unhashable type types.Bytes",
        ),
        (
            "dyn(b'a') in {'a': 1} || true",
            "internal error: runtime error: hash of unhashable type types.Bytes",
        ),
        // The value is evaluated before the key is hashed.
        ("size({b'a': 1 / 0}) == 1", "division by zero"),
    ]);
}

/// A list built with `+` from two lists that are not empty is cel-go's
/// `*types.concatList`; with an empty one, `+` answers the other list.
#[test]
fn a_concatenated_list_as_index_is_named_by_its_go_type() {
    assert_errors(&[
        (
            "dyn({'a': 3u})[[b'abc', b'\\xc3\\xbc'] + [b'\\x00a', b'']] == 1u",
            "invalid qualifier type: *types.concatList",
        ),
        (
            "dyn({'a': 1})[[1] + [2] + [3]] == 1",
            "invalid qualifier type: *types.concatList",
        ),
        (
            "dyn({'a': 1})[[] + [1]] == 1",
            "invalid qualifier type: *types.baseList",
        ),
        (
            "dyn({'a': 1})[[1] + []] == 1",
            "invalid qualifier type: *types.baseList",
        ),
        (
            "dyn({'a': 1})[([1] + [2]).map(x, x)] == 1",
            "invalid qualifier type: *types.baseList",
        ),
    ]);
}

/// cel-go's `string.format` at run time takes the clause's argument before
/// it reads the clause: a missing argument is reported first, then a `%`
/// that ends the string, then the clause itself.
#[test]
fn format_reports_a_missing_argument_before_a_bad_clause() {
    assert_errors(&[
        ("('%v' + '10.0.0.0/8').format([]) == ''", "index 0 out of range"),
        ("('%' + '').format([]) == ''", "index 0 out of range"),
        ("('%' + '').format(['a']) == ''", "unexpected end of string"),
        (
            "('%v' + 'x').format(['a']) == ''",
            "could not parse formatting clause: unrecognized formatting clause \"v\"",
        ),
        (
            "('%.' + '').format([1]) == ''",
            "could not parse formatting clause: error while parsing precision: could not find end of precision specifier",
        ),
        (
            "('%.' + 's').format([1]) == ''",
            "could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax",
        ),
        (
            "('%\u{e9}' + '').format([1]) == ''",
            "could not parse formatting clause: unrecognized formatting clause \"\u{c3}\"",
        ),
    ]);
}

/// Where the checker resolved a call to one overload, cel-go calls that
/// overload, and its guard refuses arguments of another runtime type even
/// when another overload of the function would take them: a value whose
/// static type is wrong (`orValue` on a value that is not an optional
/// answers the value, checked as the alternative's type) meets the guard.
#[test]
fn a_call_checked_to_one_overload_refuses_other_runtime_types() {
    assert_errors(&[
        (
            "isCIDR(string(dyn('10.0.0.0/8').orValue(18446744073709551615u)))",
            "no such overload: string(string)",
        ),
        (
            "int(dyn('7').orValue(1)) == 7",
            "no such overload: int(string)",
        ),
        ("[dyn(1)].join() == '1'", "no such overload: join(list)"),
    ]);
    // Several overloads: dispatched on the runtime types. A conditional
    // with a `dyn` branch is `dyn`.
    assert_true(&[
        "string(dyn('a')) == 'a'",
        "dyn([]).join() == ''",
        "string(false ? 1u : dyn('a')) == 'a'",
    ]);
}

/// With several overloads left by the checker, cel-go's dispatcher calls
/// the first whose declared types the arguments fit, and refuses
/// arguments no overload takes.
#[test]
fn a_call_with_several_overloads_takes_only_declared_runtime_types() {
    assert_errors(&[
        (
            "(false ? [1] : dyn(['a'])).sum() == 1",
            "no such overload: sum(list)",
        ),
        ("dyn(['a']).sum() == 1", "no such overload: sum(list)"),
    ]);
    assert_true(&["dyn([1.5, 2.5]).sum() == 4.0", "dyn([]).sum() == 0"]);
}

/// kube-apiserver plans `find` and `findAll` with a constant pattern as
/// calls of their own, without cel-go's guard; a pattern that is not a
/// constant leaves the guarded call.
#[test]
fn find_with_a_constant_pattern_refuses_other_operands_in_plain_words() {
    assert_errors(&[
        ("dyn(1).find('x') == 'x'", "no such overload"),
        ("dyn(1).findAll('x') == []", "no such overload"),
        (
            "dyn(1).find(dyn('x')) == 'x'",
            "no such overload: find(int, string)",
        ),
        (
            "'abc'.find(dyn(1)) == 'x'",
            "no such overload: find(string, int)",
        ),
    ]);
}

/// A key a comprehension inserts twice is printed as Go's `%v` prints
/// the CEL value.
#[test]
fn repeated_keys_are_printed_as_go_prints_them() {
    assert_errors(&[
        (
            "[1, 2].transformMapEntry(i, v, {null: v}).size() == 1",
            "insert failed: key 0 already exists",
        ),
        (
            "[1, 2].transformMapEntry(i, v, {2.0: v}).size() == 1",
            "insert failed: key 2 already exists",
        ),
        (
            "[1, 2].transformMapEntry(i, v, {1.5: v}).size() == 1",
            "insert failed: key 1.5 already exists",
        ),
        (
            "[1, 2].transformMapEntry(i, v, {ip('1.2.3.4'): v}).size() == 1",
            "insert failed: key 1.2.3.4 already exists",
        ),
        (
            "[1, 2].transformMapEntry(i, v, {timestamp('2024-01-01T00:00:00Z'): v}).size() == 1",
            "insert failed: key 2024-01-01 00:00:00 +0000 UTC already exists",
        ),
        (
            "[1, 2].transformMapEntry(i, v, {duration('1s'): v}).size() == 1",
            "insert failed: key 1s already exists",
        ),
        (
            "[1, 2].transformMapEntry(i, v, {1u: v}).size() == 1",
            "insert failed: key 1 already exists",
        ),
        (
            "[1, 2].transformMapEntry(i, v, {int: v}).size() == 1",
            "insert failed: key int already exists",
        ),
        (
            "[1, 2].transformMapEntry(i, v, {optional.none(): v}).size() == 1",
            "insert failed: key optional.none() already exists",
        ),
    ]);
}

/// cel-go's `!=` is `Equal(a, b) != true`: where `==` is refused (a
/// library value compared with another type, a quantity with the result
/// of `sub`), `!=` is true.
#[test]
fn not_equal_is_true_where_equality_is_refused() {
    assert_true(&[
        "quantity('-1') != quantity('1.5').sub(7)",
        "ip('1.2.3.4') != dyn(1)",
        "cidr('10.0.0.0/8') != dyn('10.0.0.0/8')",
        "url('https://a') != dyn('https://a')",
        "!(quantity('-1') != quantity('1.5').sub(7)) || (type(-9223372036854775808) in ([[map, map], []]).flatten()) == false",
    ]);
    assert_errors(&[
        (
            "quantity('-1') == quantity('1.5').sub(7)",
            "no such overload",
        ),
        ("ip('1.2.3.4') == dyn(1)", "no such overload"),
    ]);
}
