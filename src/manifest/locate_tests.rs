use super::position_in_scalar;

fn find(text: &str, key_line: usize, value: &str, at: &str) -> Option<(usize, usize)> {
    // The (line, column) in `value` of the first `at`.
    let off = value.find(at).unwrap();
    let line = value[..off].matches('\n').count() + 1;
    let col = value[..off].rsplit('\n').next().unwrap().chars().count() + 1;
    position_in_scalar(text, key_line, "expression", value, line, col)
}

#[test]
fn literal_block() {
    let text = "spec:\n  validations:\n    - expression: |\n        a &&\n          bogus(x)\n      message: m\n";
    let value = "a &&\n  bogus(x)\n";
    assert_eq!(find(text, 3, value, "bogus"), Some((5, 11)));
}

#[test]
fn folded_block() {
    let text = "x:\n  expression: >-\n    a.b &&\n    c.d(e)\n";
    let value = "a.b && c.d(e)";
    assert_eq!(find(text, 2, value, "d(e)"), Some((4, 7)));
}

#[test]
fn quoted_on_the_key_line() {
    let text = "- expression: \"object.x == 1\"\n";
    assert_eq!(find(text, 1, "object.x == 1", "=="), Some((1, 25)));
}

#[test]
fn flow_mapping_quoted() {
    let text = "    - {expression: \"object.x == 1\", message: m}\n";
    assert_eq!(find(text, 1, "object.x == 1", "=="), Some((1, 30)));
    assert_eq!(&text[29..31], "==");
}

#[test]
fn flow_mapping_plain() {
    let text = "    - {message: m, expression: object.x == 1, reason: Invalid}\n";
    assert_eq!(find(text, 1, "object.x == 1", "1"), Some((1, 44)));
    assert_eq!(&text[43..44], "1");
    let text = "- {expression: a.b(c)}\n";
    assert_eq!(find(text, 1, "a.b(c)", "c"), Some((1, 20)));
}

#[test]
fn escapes_in_a_double_quoted_string() {
    let text = "- expression: \"object.a == \\\"b\\\" && bad(\\u00e9)\"\n";
    let value = "object.a == \"b\" && bad(\u{e9})";
    // `bad` is 2 characters further right in the file than in the value.
    assert_eq!(find(text, 1, value, "bad"), Some((1, 37)));
    assert_eq!(&text[36..39], "bad");
    // The character after an escape: `)` follows the 6-character `\u00e9`.
    assert_eq!(find(text, 1, value, ")"), Some((1, 47)));
    assert_eq!(&text[46..47], ")");
}

#[test]
fn doubled_quotes_in_a_single_quoted_string() {
    let text = "- expression: 'x == ''y'' + zz'\n";
    assert_eq!(find(text, 1, "x == 'y' + zz", "zz"), Some((1, 29)));
    assert_eq!(&text[28..30], "zz");
}

#[test]
fn plain_folded_over_lines() {
    let text = "k:\n  expression: object.a ||\n    object.bad\n";
    let value = "object.a || object.bad";
    assert_eq!(find(text, 2, value, "object.bad"), Some((3, 5)));
    assert_eq!(find(text, 2, value, "||"), Some((2, 24)));
}
