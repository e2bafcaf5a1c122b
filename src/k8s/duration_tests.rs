use super::*;

#[test]
fn durations() {
    assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse("4s"), Ok(Duration::from_secs(4)));
    assert_eq!(parse("2"), Ok(Duration::from_secs(2)));
    assert_eq!(parse("1.5"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse("1h2m3.5s"), Ok(Duration::from_millis(3_723_500)));
    assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse("750us"), Ok(Duration::from_micros(750)));
    assert_eq!(parse("0"), Ok(Duration::ZERO));
    assert!(parse("4 parsecs").is_err());
    assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
    assert_eq!(
        parse("2d4h"),
        Ok(Duration::from_secs(2 * 86_400 + 4 * 3600))
    );
    assert!(parse("d").is_err());
    assert!(parse("1w").is_err());
    assert!(parse("99999999999999999999d").is_err());
    assert!(parse("").is_err());
    let negative = parse("-1s").unwrap_err();
    assert_eq!(negative.why, "negative");
    assert!(negative.to_string().contains("\"-1s\""), "{negative}");
}
