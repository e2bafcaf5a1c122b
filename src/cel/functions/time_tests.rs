use super::*;

#[test]
fn durations_parse_like_go() {
    assert_eq!(parse_duration("1h2m3.5s").unwrap().0, 3_723_500_000_000);
    assert_eq!(parse_duration("-1.5s").unwrap().0, -1_500_000_000);
    assert_eq!(parse_duration("0").unwrap().0, 0);
    assert_eq!(parse_duration("1µs").unwrap().0, 1_000);
    assert!(parse_duration("1d").is_err());
    assert!(parse_duration("").is_err());
    assert!(parse_duration("9999999999h").is_err());
}

#[test]
fn durations_format_as_seconds() {
    assert_eq!(format_duration(Duration(3_600_000_000_000)), "3600s");
    assert_eq!(format_duration(Duration(1_500_000_000)), "1.5s");
    assert_eq!(format_duration(Duration(-1)), "-0.000000001s");
}

#[test]
fn timestamps_round_trip() {
    let t = parse_timestamp("2009-02-13T23:31:30.5Z").unwrap();
    assert_eq!(t.secs, 1_234_567_890);
    assert_eq!(format_timestamp(t), "2009-02-13T23:31:30.5Z");
    // The offset is kept, as cel-go keeps Go's time.Time location.
    let t = parse_timestamp("2009-02-13T15:31:30-08:00").unwrap();
    assert_eq!(t.secs, 1_234_567_890);
    assert_eq!(format_timestamp(t), "2009-02-13T15:31:30-08:00");
    assert_eq!(t, parse_timestamp("2009-02-13T23:31:30Z").unwrap());
    let t = parse_timestamp("2009-02-13T23:31:30.25+05:30").unwrap();
    assert_eq!(format_timestamp(t), "2009-02-13T23:31:30.25+05:30");
    assert!(parse_timestamp("2009-02-13 23:31:30Z").is_err());
}

#[test]
fn durations_and_timestamps_print_as_go_prints_them() {
    for (nanos, want) in [
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5µs"),
        (1_200_000, "1.2ms"),
        (1_000_000_000, "1s"),
        (60_000_000_000, "1m0s"),
        (7_200_500_000_000, "2h0m0.5s"),
        (-90_000_000_000, "-1m30s"),
    ] {
        assert_eq!(go_duration(Duration(nanos)), want);
    }
    let t = parse_timestamp("2024-01-01T00:00:00Z").unwrap();
    assert_eq!(go_time(t), "2024-01-01 00:00:00 +0000 UTC");
    let t = parse_timestamp("2024-01-01T01:00:00.5+01:00").unwrap();
    assert_eq!(go_time(t), "2024-01-01 01:00:00.5 +0100 +0100");
    let t = parse_timestamp("2024-01-01T01:00:00-05:30").unwrap();
    assert_eq!(go_time(t), "2024-01-01 01:00:00 -0530 -0530");
}
