use super::*;
use serde_json::Value;

/// kube-apiserver v1.36's answers (testdata/gen) for testdata/net_inputs.txt.
const GOLDEN: &str = include_str!("testdata/net_golden.jsonl");
/// The same for random inputs (testdata/gen/README.md).
const RANDOM: &str = include_str!("testdata/net_random.jsonl");
const PAIRS: &str = include_str!("testdata/net_pairs_golden.jsonl");

fn lines(text: &str) -> impl Iterator<Item = Value> + '_ {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("golden line"))
}

fn check<T: PartialEq<Value> + std::fmt::Debug>(
    what: &str,
    got: Result<T, NetError>,
    want: &Value,
) {
    match (got, want.get("err")) {
        (Ok(v), None) => assert!(v == *want, "{what}: got {v:?}, want {want}"),
        (Err(e), Some(msg)) => assert_eq!(e.to_string(), msg.as_str().unwrap(), "{what}"),
        (got, _) => panic!("{what}: got {got:?}, want {want}"),
    }
}

#[test]
fn ip_and_cidr_match_go() {
    let mut count = 0;
    for want in lines(GOLDEN).chain(lines(RANDOM)) {
        let s = want["in"].as_str().unwrap();
        assert_eq!(is_ip(s), want["isIP"].as_bool().unwrap(), "isIP({s:?})");
        assert_eq!(
            is_cidr(s),
            want["isCIDR"].as_bool().unwrap(),
            "isCIDR({s:?})"
        );
        check(
            &format!("ip.isCanonical({s:?})"),
            ip_is_canonical(s),
            &want["canonical"],
        );
        let ip = &want["ip"];
        match Ip::parse(s) {
            Ok(got) => {
                assert_eq!(got.to_string(), ip["str"].as_str().unwrap(), "{s}");
                assert_eq!(got.family(), ip["family"].as_i64().unwrap(), "{s}");
                let flags = [
                    ("isUnspecified", got.is_unspecified()),
                    ("isLoopback", got.is_loopback()),
                    ("isLinkLocalMulticast", got.is_link_local_multicast()),
                    ("isLinkLocalUnicast", got.is_link_local_unicast()),
                    ("isGlobalUnicast", got.is_global_unicast()),
                ];
                for (name, value) in flags {
                    assert_eq!(value, ip[name].as_bool().unwrap(), "{name}({s})");
                }
            }
            Err(e) => assert_eq!(
                Some(e.to_string().as_str()),
                ip["err"].as_str(),
                "ip({s:?})"
            ),
        }
        let cidr = &want["cidr"];
        match Cidr::parse(s) {
            Ok(got) => {
                assert_eq!(got.to_string(), cidr["str"].as_str().unwrap(), "{s}");
                assert_eq!(got.ip().to_string(), cidr["ip"].as_str().unwrap(), "{s}");
                assert_eq!(
                    got.masked().to_string(),
                    cidr["masked"].as_str().unwrap(),
                    "{s}"
                );
                assert_eq!(
                    got.prefix_length(),
                    cidr["prefixLength"].as_i64().unwrap(),
                    "{s}"
                );
            }
            Err(e) => assert_eq!(
                Some(e.to_string().as_str()),
                cidr["err"].as_str(),
                "cidr({s:?})"
            ),
        }
        count += 1;
    }
    assert!(count > 90);
}

#[test]
fn containment_and_equality_match_go() {
    for want in lines(PAIRS) {
        let (a, b) = (want["a"].as_str().unwrap(), want["b"].as_str().unwrap());
        let c = Cidr::parse(a).unwrap();
        check(
            &format!("{a}.containsIP({b})"),
            c.contains_ip_str(b),
            &want["containsIP"],
        );
        check(
            &format!("{a}.containsCIDR({b})"),
            c.contains_cidr_str(b),
            &want["containsCIDR"],
        );
        let eq = Cidr::parse(b).map(|d| d == c);
        check(&format!("{a} == {b}"), eq, &want["eq"]);
        if let (Ok(x), Ok(y)) = (Ip::parse(a), Ip::parse(b)) {
            assert_eq!(Some(x == y), want["ipEq"].as_bool(), "{a} == {b}");
        }
    }
}

#[test]
fn typed_containment() {
    let c = Cidr::parse("192.168.0.0/16").unwrap();
    assert!(c.contains_ip(&Ip::parse("192.168.3.4").unwrap()));
    assert!(!c.contains_ip(&Ip::parse("::1").unwrap()));
    assert!(c.contains_cidr(&Cidr::parse("192.168.1.0/24").unwrap()));
    assert!(!Cidr::parse("192.168.1.0/24").unwrap().contains_cidr(&c));
    assert_ne!(
        Cidr::parse("10.0.0.1/8").unwrap(),
        Cidr::parse("10.0.0.0/8").unwrap()
    );
    assert_eq!(
        Cidr::parse("10.0.0.1/8").unwrap().masked(),
        Cidr::parse("10.0.0.0/8").unwrap()
    );
}
