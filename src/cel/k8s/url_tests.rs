use super::*;
use serde_json::Value;

/// kube-apiserver v1.36's answers (testdata/gen) for testdata/url_inputs.txt.
const GOLDEN: &str = include_str!("testdata/url_golden.jsonl");
/// The same for random inputs (testdata/gen/README.md).
const RANDOM: &str = include_str!("testdata/url_random.jsonl");

#[test]
fn urls_match_go() {
    let mut count = 0;
    for line in GOLDEN.lines().chain(RANDOM.lines()) {
        let want: Value = serde_json::from_str(line).unwrap();
        let s = want["in"].as_str().unwrap();
        assert_eq!(is_url(s), want["isURL"].as_bool().unwrap(), "isURL({s:?})");
        match (Url::parse(s), want.get("err")) {
            (Ok(u), None) => check_getters(s, &u, &want),
            (Err(e), Some(msg)) => assert_eq!(e.to_string(), msg.as_str().unwrap(), "{s:?}"),
            (got, _) => panic!("{s:?}: got {got:?}, want {want}"),
        }
        count += 1;
    }
    assert!(count > 70);
}

fn check_getters(s: &str, u: &Url, want: &Value) {
    let got = [
        ("getScheme", u.scheme().to_string()),
        ("getHost", u.host().to_string()),
        ("getHostname", u.hostname().to_string()),
        ("getPort", u.port().to_string()),
        ("getEscapedPath", u.escaped_path()),
        ("str", u.to_string()),
    ];
    for (name, value) in got {
        assert_eq!(value, want[name].as_str().unwrap(), "{name}({s:?})");
    }
    let query: serde_json::Map<String, Value> = u
        .query()
        .into_iter()
        .map(|(k, v)| (k, Value::from(v)))
        .collect();
    let query = Value::Object(query);
    assert_eq!(query, want["query"], "getQuery({s:?})");
}

#[test]
fn library_doc_examples() {
    let u = Url::parse("https://user:pass@example.com:80/path?query=val#fragment").unwrap();
    assert_eq!(u.scheme(), "https");
    assert_eq!(u.host(), "example.com:80");
    assert_eq!(u.hostname(), "example.com");
    assert_eq!(u.port(), "80");
    assert_eq!(u.escaped_path(), "/path");
    assert_eq!(u.query()["query"], vec!["val".to_string()]);
    let v6 = Url::parse("https://[::1]:80/").unwrap();
    assert_eq!(
        (v6.host(), v6.hostname(), v6.port()),
        ("[::1]:80", "::1", "80")
    );
    assert!(!is_url("example.com") && !is_url("") && is_url("/relative-path"));
    assert_eq!(
        Url::parse("https://a.com/x").unwrap(),
        Url::parse("https://a.com/x").unwrap()
    );
}
