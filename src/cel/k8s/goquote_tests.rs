use super::quote;

#[test]
fn quotes_like_go() {
    assert_eq!(quote("abc"), "\"abc\"");
    assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
    assert_eq!(quote("\n\t\x01\x7f"), "\"\\n\\t\\x01\\x7f\"");
    assert_eq!(quote("é"), "\"é\"");
    assert_eq!(quote("\u{a0}"), "\"\\u00a0\"");
    assert_eq!(quote("\u{feff}"), "\"\\ufeff\"");
    assert_eq!(quote("\u{f0000}"), "\"\\U000f0000\"");
}
