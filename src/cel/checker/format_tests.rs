//! cel-go's format validator as kube-apiserver v1.36.3 answers (each case
//! found by the differential fuzzer, tests/vap-corpus/creation/fuzz-found.tsv).

use crate::cel::Env;

fn refusal(src: &str) -> String {
    let env = Env::kubernetes().with_variables(&["object"]);
    match env.compile(src) {
        Ok(_) => "accepted".into(),
        Err(e) => e.to_string().lines().next().unwrap_or_default().to_string(),
    }
}

#[test]
fn clauses_are_checked_against_the_checked_type_of_any_argument() {
    for (src, want) in [
        (
            "format.uri().validate('%b'.format([{}])).hasValue()",
            "ERROR: <input>:1:36: error during formatting: only integers and bools can be formatted as binary, was given map",
        ),
        (
            "{}[?'%s'.format([quantity('1.5Gi')])].hasValue()",
            "ERROR: <input>:1:26: error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given kubernetes.Quantity",
        ),
        (
            "has(object.data.a) && (strings.quote(\"q'\".charAt(2)) == '%o'.format([quantity('100Mi')]))",
            "ERROR: <input>:1:78: error during formatting: octal clause can only be used on integers, was given kubernetes.Quantity",
        ),
        (
            "object.data.all(v2, v3, isIP('%x'.format([map]).replace('https://example.com:8080/p?q=1', (has(object.data.z) ? v3 : v2), v2)))",
            "ERROR: <input>:1:43: error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given type",
        ),
        (
            "size(bytes('%f'.format([(has(object.data.z) ? null : null)]))) == ip('::ffff:1.2.3.4').family()",
            "ERROR: <input>:1:45: error during formatting: fixed-point clause can only be used on doubles, was given null_type",
        ),
    ] {
        assert_eq!(refusal(src), want, "{src}");
    }
}

#[test]
fn the_first_clause_that_fails_wins_over_too_many_arguments() {
    for (src, want) in [
        (
            "size('%v'.format([-0x1F, object.metadata.labels]))",
            "ERROR: <input>:1:17: could not parse formatting clause: unrecognized formatting clause \"v\"",
        ),
        (
            "('a'.contains('b') && format.uri().validate('a').hasValue() ? '%.2f'.format([b'ü' + b'ü', cidr('192.168.1.5/24').masked()]) : string(ip('10.0.0.1'))).matches('ü✓x')",
            "ERROR: <input>:1:83: error during formatting: fixed-point clause can only be used on doubles, was given bytes",
        ),
    ] {
        assert_eq!(refusal(src), want, "{src}");
    }
}

#[test]
fn a_string_argument_passes_fixed_point_and_scientific_clauses() {
    // The validator goes by type; kube-apiserver accepts these and fails
    // when it evaluates them.
    for src in [
        "cidr('%.2f'.format(['%v'])).ip().isLinkLocalUnicast()",
        "ip('::1') != ip('%e'.format(['\\n']))",
    ] {
        assert_eq!(refusal(src), "accepted", "{src}");
    }
}

#[test]
fn an_argument_that_is_a_macro_is_blamed_at_its_parenthesis() {
    for (src, want) in [
        (
            "isIP('%X'.format([has(object.data.z)]))",
            "ERROR: <input>:1:22: error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given bool",
        ),
        (
            "format.dns1123Label().validate('%.2f'.format([({?'a': optional.of('10.0.0.1')}).all(v9, 'a'.endsWith('ü✓x'))])).hasValue()",
            "ERROR: <input>:1:84: error during formatting: fixed-point clause can only be used on doubles, was given bool",
        ),
        (
            "(quantity('%d'.format([(['[a-z]+', 'ü✓x']).filter(v22, has(object.data.z))]))).isLessThan(quantity(url('10.0.0.1').getHost()))",
            "ERROR: <input>:1:50: error during formatting: decimal clause can only be used on integers, was given list",
        ),
        (
            "(cidr('10.0.0.0/8').masked().containsCIDR(cidr((['a,b,c', '%s-%d'])[-5]))) || ('%X'.format([optional.none().optFlatMap(v8, v8)])).startsWith('%x'.format([]))",
            "ERROR: <input>:1:119: error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given optional_type",
        ),
    ] {
        assert_eq!(refusal(src), want, "{src}");
    }
}

/// Asked of kube-apiserver v1.36.3 with a dry-run create.
#[test]
fn clause_syntax_and_nested_literals_as_kube_apiserver_reports_them() {
    for (src, want) in [
        ("'%.2'.format([1.0]) == ''", "ERROR: <input>:1:13: could not parse formatting clause: error while parsing precision: could not find end of precision specifier"),
        ("'%.-1f'.format([1.0]) == ''", "ERROR: <input>:1:15: could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax"),
        ("'%.99999999999999999999f'.format([1.0]) == ''", "ERROR: <input>:1:33: could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"99999999999999999999\": value out of range"),
        ("'%ü'.format([1]) == ''", "ERROR: <input>:1:12: could not parse formatting clause: unrecognized formatting clause \"Ã\""),
        ("'abc%'.format([1]) == ''", "ERROR: <input>:1:14: unexpected end of string"),
        ("'%s %s'.format([1]) == ''", "ERROR: <input>:1:15: index 1 out of range"),
        ("'%d'.format([1, 'a', 2.0]) == ''", "ERROR: <input>:1:12: too many arguments supplied to string.format (expected 1, got 3)"),
        ("'%s'.format([[[ip('::1')]]]) == ''", "ERROR: <input>:1:18: error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given net.IP"),
        ("'%s'.format([{1: 'a', 'b': optional.none()}]) == ''", "ERROR: <input>:1:41: error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given optional_type"),
        ("'%s'.format([?optional.of(1)]) == ''", "ERROR: <input>:1:26: error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given optional_type"),
        ("'%d'.format(['a'])", "ERROR: <input>:1:14: error during formatting: decimal clause can only be used on integers, was given string"),
    ] {
        assert_eq!(refusal(src), want, "{src}");
    }
    for src in [
        "'%d'.format([dyn(1.0)]) == ''",
        "'%d'.format([[][0]]) == ''",
        "'%d'.format([object]) == ''",
        "'%.3d'.format([1]) == ''",
        "'%s %s %s'.format([null, string, duration('1s')]) == ''",
    ] {
        assert_eq!(refusal(src), "accepted", "{src}");
    }
}
