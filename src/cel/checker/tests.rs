use crate::cel::{CompileError, Env, Ty};

pub(super) fn env() -> Env {
    let mut env = Env::kubernetes();
    env.add_variable("object");
    env.add_typed_variable("request", super::request_type());
    env.add_typed_variable("namespaceObject", super::namespace_type());
    env.add_typed_variable(
        "authorizer",
        Ty::Named(crate::cel::k8s_authz::AUTHORIZER.into()),
    );
    env.enable_lazy_variables();
    env
}

pub(super) fn type_of(src: &str) -> Ty {
    let p = env().compile(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    p.static_type().expect("checked").clone()
}

fn refused(src: &str) -> CompileError {
    match env().compile(src) {
        Ok(p) => panic!("{src} type-checks as {:?}", p.static_type()),
        Err(e) => e,
    }
}

#[test]
fn mixed_numeric_equality_is_refused_with_cel_go_text_and_position() {
    let e = refused("1 == 2.0");
    assert_eq!(
        e.message,
        "found no matching overload for '_==_' applied to '(int, double)'"
    );
    assert_eq!((e.line, e.column), (1, 3));
}

#[test]
fn ill_typed_expressions_are_refused() {
    for (src, msg) in [
        (
            "'a' + 1",
            "found no matching overload for '_+_' applied to '(string, int)'",
        ),
        (
            "object.x ? 1 : 'b'",
            "found no matching overload for '_?_:_' applied to '(dyn, int, string)'",
        ),
        (
            "2 in [1.0]",
            "found no matching overload for '@in' applied to '(int, list(double))'",
        ),
        (
            "string(type(object))",
            "found no matching overload for 'string' applied to '(type(dyn))'",
        ),
        (
            "'abc'.startsWith(1)",
            "found no matching overload for 'startsWith' applied to 'string.(int)'",
        ),
        ("[1, 'a']", "expected type 'int' but found 'string'"),
        ("request.foo == 'x'", "undefined field 'foo'"),
        ("(1).x", "type 'int' does not support field selection"),
        ("1 && true", "expected type 'bool' but found 'int'"),
    ] {
        assert_eq!(refused(src).message, msg, "{src}");
    }
}

#[test]
fn well_typed_expressions_get_their_static_type() {
    for (src, ty) in [
        ("object.spec.replicas > 2", "bool"),
        ("1 < 2.0", "bool"),
        ("object.x", "dyn"),
        ("[1, 2].map(x, x * 2)", "list(int)"),
        ("{'a': 1}", "map(string, int)"),
        ("request.userInfo.groups", "list(string)"),
        ("namespaceObject.metadata.labels", "map(string, string)"),
        ("object.?spec.orValue(1)", "dyn"),
        ("optional.of(1).value()", "int"),
        ("[1, 2].exists(x, x > 1)", "bool"),
        ("'a,b'.split(',').join('-')", "string"),
        (
            "duration('1s') + timestamp('2024-01-01T00:00:00Z')",
            "timestamp",
        ),
        ("[].size()", "int"),
        ("dyn(1) == 1.0", "bool"),
        ("quantity('1').isGreaterThan(quantity('2'))", "bool"),
        ("semver('1.0.0').major()", "int"),
        ("cidr('10.0.0.0/8').ip()", "net.IP"),
        ("url('https://a').getQuery()", "map(string, list(string))"),
        (
            "format.named('uuid')",
            "optional_type(kubernetes.NamedFormat)",
        ),
        ("[[1], [2]].flatten()", "list(int)"),
        ("optional.unwrap([optional.of('a')])", "list(string)"),
        (
            "authorizer.group('').resource('pods').check('get')",
            "kubernetes.authorization.Decision",
        ),
    ] {
        assert_eq!(type_of(src).to_string(), ty, "{src}");
    }
}

#[test]
fn lazy_variables_carry_their_types() {
    let mut env = env();
    env.add_typed_lazy_variable("n", Ty::Int);
    let e = env.compile("variables.n == 'x'").unwrap_err();
    assert_eq!(
        e.message,
        "found no matching overload for '_==_' applied to '(int, string)'"
    );
}

/// Every function the checker declares is one the VAP runtime has, in the
/// same call style (operators and macro internals aside).
#[test]
fn declarations_match_the_kubernetes_runtime() {
    use crate::cel::functions::{lookup, LibSet, Style};
    let mut missing = Vec::new();
    for (name, member) in super::declarations() {
        if name.starts_with(['_', '@', '!', '-']) {
            continue;
        }
        let style = if member { Style::Member } else { Style::Global };
        if lookup(LibSet::KUBERNETES, name, style).is_empty() {
            missing.push(format!("{name} (member: {member})"));
        }
    }
    assert!(
        missing.is_empty(),
        "declared but not in the runtime: {missing:?}"
    );
}

/// The surface kube-apiserver v1.36 gives a ValidatingAdmissionPolicy where
/// Interlock used to differ (found by tests/integration/cel_creation_e2e.rs).
#[test]
fn vap_library_surface_of_1_36() {
    for (src, refusal) in [
        (
            "jsonpatch.escapeKey('a') == 'a'",
            Some("undeclared reference to 'jsonpatch' (in container '')"),
        ),
        (
            "quantity('1').sign() == 1",
            Some("found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'"),
        ),
        (
            "'abc'.reverse() == 'cba'",
            Some("found no matching overload for 'reverse' applied to 'string.()'"),
        ),
        (
            "cel.bind(x, 1, x == 1)",
            Some("undeclared reference to 'cel' (in container '')"),
        ),
        (
            "math.greatest(1, 2) == 2",
            Some("undeclared reference to 'math' (in container '')"),
        ),
        ("sign(quantity('1')) == 1", None),
        ("optional.of(1).optMap(x, x + 1).hasValue()", None),
        (
            "optional.of(1).optFlatMap(x, optional.of(x)).hasValue()",
            None,
        ),
        ("quantity('x') == quantity('1')", None),
        ("ip('x') == ip('1.2.3.4')", None),
    ] {
        let got = env().compile(src).err().map(|e| e.message);
        assert_eq!(got.as_deref(), refusal, "{src}");
    }
}

#[test]
fn constant_conversions_that_fail_refuse_the_expression_at_planning() {
    for (src, msg) in [
        ("uint(-1) == 1u", "unsigned integer overflow"),
        (
            "int('x') == 1",
            "type conversion error from 'string' to 'int'",
        ),
        ("int(null) == 1", "no such overload: int(null_type)"),
        (
            "double('1e400') > 0.0",
            "type conversion error from 'string' to 'double'",
        ),
        (
            "string(b'\\xff') == 'a'",
            "invalid UTF-8 in bytes, cannot convert to string",
        ),
    ] {
        let e = refused(src);
        assert!(e.planning, "{src}");
        assert_eq!(
            e.to_string(),
            format!("program instantiation failed: {msg}"),
            "{src}"
        );
    }
}
