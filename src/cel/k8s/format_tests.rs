use super::*;
use serde_json::Value;

/// kube-apiserver v1.36's `format.named(name).value().validate(s)` for each
/// named format and each input of testdata/format_inputs.txt.
const GOLDEN: &str = include_str!("testdata/format_golden.jsonl");
/// The same for random inputs (testdata/gen/README.md).
const RANDOM: &str = include_str!("testdata/format_random.jsonl");

#[test]
fn validators_match_go() {
    let mut count = 0;
    for line in GOLDEN.lines().chain(RANDOM.lines()) {
        let want: Value = serde_json::from_str(line).unwrap();
        let s = want["in"].as_str().unwrap();
        for f in NamedFormat::ALL {
            let expected: Option<Vec<String>> =
                serde_json::from_value(want[f.key()].clone()).unwrap();
            assert_eq!(
                f.validate(s),
                expected,
                "format.{}().validate({s:?})",
                f.key()
            );
            count += 1;
        }
    }
    assert!(count > 1000);
}

#[test]
fn named_lookup() {
    assert_eq!(
        NamedFormat::named("dns1123Label"),
        Some(NamedFormat::Dns1123Label)
    );
    assert_eq!(NamedFormat::named("DNS1123Label"), None);
    assert_eq!(NamedFormat::named("nope"), None);
    for f in NamedFormat::ALL {
        assert_eq!(NamedFormat::named(f.key()), Some(f));
    }
    assert_eq!(NamedFormat::Uri.name(), "URI");
}

#[test]
fn prefix_masking_drops_two_bytes() {
    assert_eq!(mask_trailing_dash(b"ab-"), b"aa".to_vec());
    assert_eq!(mask_trailing_dash(b"-"), b"-".to_vec());
    assert_eq!(NamedFormat::Dns1123LabelPrefix.validate("my-name-"), None);
    assert!(NamedFormat::Dns1123Label.validate("my-name-").is_some());
}
