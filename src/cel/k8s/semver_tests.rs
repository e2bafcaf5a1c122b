use super::*;

const GOLDEN: &str = include_str!("testdata/semver_golden.jsonl");
/// The same for random inputs (testdata/gen/README.md).
const RANDOM: &str = include_str!("testdata/semver_random.jsonl");

fn v(s: &str) -> Semver {
    Semver::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn parse_matches_go() {
    let mut count = 0;
    for line in GOLDEN.lines().chain(RANDOM.lines()) {
        let want: serde_json::Value = serde_json::from_str(line).unwrap();
        let input = want["in"].as_str().unwrap();
        let normalize = want["norm"].as_bool().unwrap();
        match (Semver::parse_with(input, normalize), want.get("err")) {
            (Ok(got), None) => {
                assert_eq!(got.to_string(), want["str"].as_str().unwrap(), "{input}");
                assert_eq!(got.major_i64(), want["major"].as_i64().unwrap(), "{input}");
                assert_eq!(got.minor_i64(), want["minor"].as_i64().unwrap(), "{input}");
                assert_eq!(got.patch_i64(), want["patch"].as_i64().unwrap(), "{input}");
            }
            (Err(e), Some(msg)) => assert_eq!(e.to_string(), msg.as_str().unwrap(), "{input}"),
            (got, _) => panic!("{input} (normalize {normalize}): got {got:?}, want {want}"),
        }
        count += 1;
    }
    assert!(count > 50);
}

#[test]
fn precedence_follows_semver_spec() {
    let order = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.1.0",
        "2.0.0",
    ];
    for w in order.windows(2) {
        assert!(v(w[0]).is_less_than(&v(w[1])), "{} < {}", w[0], w[1]);
        assert!(v(w[1]).is_greater_than(&v(w[0])));
        assert_eq!(v(w[0]).compare_to(&v(w[1])), -1);
    }
    assert_eq!(v("1.0.0+a"), v("1.0.0+b"));
    assert_eq!(v("1.0.0+a").compare_to(&v("1.0.0")), 0);
}

#[test]
fn normalisation() {
    assert!(!is_semver("v1.0.0", false));
    assert!(is_semver("v1.0.0", true));
    assert_eq!(
        Semver::parse_with("v01.01", true).unwrap().to_string(),
        "1.1.0"
    );
    assert_eq!(Semver::parse_with("1", true).unwrap().to_string(), "1.0.0");
    assert_eq!(
        Semver::parse_with("1.2-alpha", true).unwrap_err(),
        SemverError::ShortWithMetadata
    );
    assert_eq!(v("18446744073709551615.0.0").major_i64(), -1);
}
