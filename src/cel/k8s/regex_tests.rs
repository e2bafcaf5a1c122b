use super::*;
use serde_json::Value;

/// Go 1.26 `regexp` on the patterns of testdata/regex_inputs.txt: the
/// compile error, or `FindString`, `FindAllString(-1)` and
/// `FindAllString(2)` on a fixed set of haystacks.
const GOLDEN: &str = include_str!("testdata/regex_golden.jsonl");
/// The same for random patterns (testdata/gen/README.md).
const RANDOM: &str = include_str!("testdata/regex_random.jsonl");

const HAYSTACKS: [&str; 10] = [
    "",
    "abc",
    "baaab",
    "a1b22c333",
    "Hello, World! 123",
    "x\ny\nz",
    "αβγ δ 42",
    "aaa",
    "foo.bar-baz_qux",
    "[x]{y}(z)",
];

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

#[test]
fn compile_and_find_match_go() {
    let mut count = 0;
    for line in GOLDEN.lines().chain(RANDOM.lines()) {
        let want: Value = serde_json::from_str(line).unwrap();
        let pattern = want["re"].as_str().unwrap();
        let re = match (compile(pattern), want.get("err")) {
            (Ok(re), None) => re,
            (Err(e), Some(msg)) => {
                assert_eq!(e.to_string(), msg.as_str().unwrap(), "{pattern:?}");
                continue;
            }
            (got, _) => panic!("{pattern:?}: got {got:?}, want {want}"),
        };
        for (h, w) in HAYSTACKS.iter().zip(want["finds"].as_array().unwrap()) {
            let what = format!("{pattern:?} on {h:?}");
            assert_eq!(find(&re, h), w["find"].as_str().unwrap(), "find {what}");
            assert_eq!(find_all(&re, h, -1), strings(&w["all"]), "findAll {what}");
            assert_eq!(find_all(&re, h, 2), strings(&w["two"]), "findAll(2) {what}");
        }
        count += 1;
    }
    assert!(count > 100);
}

#[test]
fn library_examples() {
    let re = compile("[0-9]+").unwrap();
    assert_eq!(find(&re, "abc 123"), "123");
    assert_eq!(find(&compile("xyz").unwrap(), "abc 123"), "");
    let all = compile("[0-9]+").unwrap();
    assert_eq!(find_all(&all, "123 abc 456", -1), vec!["123", "456"]);
    assert_eq!(find_all(&all, "123 456 789", 2), vec!["123", "456"]);
    assert!(find_all(&all, "123 456", 0).is_empty());
    assert!(find_all(&compile("xyz").unwrap(), "123 abc 456", -1).is_empty());
    let e = compile("[").unwrap_err();
    assert_eq!(
        e.illegal_regex(),
        "Illegal regex: error parsing regexp: missing closing ]: `[`"
    );
}

#[test]
fn ascii_perl_classes() {
    assert!(!compile(r"^\d$").unwrap().is_match("٣"));
    assert!(!compile(r"^\w$").unwrap().is_match("é"));
    assert!(!compile(r"^\s$").unwrap().is_match("\u{a0}"));
    assert!(compile(r"^\pN$").unwrap().is_match("٣"));
}

#[test]
fn surrogate_escapes_compile_and_never_match() {
    let lone = compile(r"a\x{D800}?b").unwrap();
    assert!(lone.is_match("ab") && !lone.is_match("a\u{fffd}b"));
    let range = compile(r"^[\x{D000}-\x{E001}]$").unwrap();
    assert!(
        range.is_match("\u{d7ff}") && range.is_match("\u{e001}") && !range.is_match("\u{fffd}")
    );
    assert!(compile(r"[\x{D800}]").is_ok());
}
