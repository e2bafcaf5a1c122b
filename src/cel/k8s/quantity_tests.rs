use super::*;
use serde_json::Value;

/// Results printed by kube-apiserver v1.36's own code (testdata/gen) for the
/// inputs in testdata/quantity_inputs.txt.
const GOLDEN: &str = include_str!("testdata/quantity_golden.jsonl");
/// The same for random inputs (testdata/gen/README.md).
const RANDOM: &str = include_str!("testdata/quantity_random.jsonl");
const PAIRS: &str = include_str!("testdata/quantity_pairs_golden.jsonl");
const INTS: &str = include_str!("testdata/quantity_int_golden.jsonl");

fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn go_float(s: &str) -> f64 {
    match s {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => s.parse().unwrap_or_else(|_| panic!("bad float {s}")),
    }
}

fn check_info(what: &str, got: &Quantity, want: &Value) {
    assert_eq!(
        got.to_string(),
        want["str"].as_str().unwrap(),
        "{what}: string"
    );
    assert_eq!(
        got.is_integer(),
        want["isInt"].as_bool().unwrap(),
        "{what}: isInteger"
    );
    if got.is_integer() {
        assert_eq!(
            got.as_integer(),
            Ok(want["int"].as_i64().unwrap()),
            "{what}: asInteger"
        );
    } else {
        assert_eq!(got.as_integer(), Err(QuantityError::NotInteger), "{what}");
    }
    let want_float = go_float(want["float"].as_str().unwrap());
    let got_float = got.as_approximate_float();
    let same =
        got_float.to_bits() == want_float.to_bits() || (got_float.is_nan() && want_float.is_nan());
    assert!(same, "{what}: float {got_float} != {want_float}");
    assert_eq!(got.sign(), want["sign"].as_i64().unwrap(), "{what}: sign");
}

fn lines(text: &str) -> impl Iterator<Item = Value> + '_ {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("golden line"))
}

#[test]
fn parse_matches_go() {
    let mut count = 0;
    for want in lines(GOLDEN).chain(lines(RANDOM)) {
        let input = want["in"].as_str().unwrap();
        match (Quantity::parse(input), want.get("err")) {
            (Ok(got), None) => check_info(input, &got, &want),
            (Err(e), Some(msg)) => assert_eq!(e.to_string(), msg.as_str().unwrap(), "{input}"),
            (got, _) => panic!("{input}: got {got:?}, want {want}"),
        }
        count += 1;
    }
    assert!(count > 150);
}

#[test]
fn arithmetic_and_comparison_match_go() {
    for want in lines(PAIRS) {
        let (a, b) = (want["a"].as_str().unwrap(), want["b"].as_str().unwrap());
        let (qa, qb) = (q(a), q(b));
        let what = format!("{a} ? {b}");
        assert_eq!(qa.compare_to(&qb), want["cmp"].as_i64().unwrap(), "{what}");
        assert_eq!(qa == qb, want["cmp"].as_i64() == Some(0), "{what}");
        check_info(&format!("{a} + {b}"), &qa.add(&qb).unwrap(), &want["add"]);
        check_info(&format!("{a} - {b}"), &qa.sub(&qb).unwrap(), &want["sub"]);
    }
}

#[test]
fn int_arithmetic_matches_go() {
    for want in lines(INTS) {
        let a = want["a"].as_str().unwrap();
        let n = want["n"].as_i64().unwrap();
        check_info(
            &format!("{a} + {n}"),
            &q(a).add_int(n).unwrap(),
            &want["add"],
        );
        check_info(
            &format!("{a} - {n}"),
            &q(a).sub_int(n).unwrap(),
            &want["sub"],
        );
    }
}

#[test]
fn library_doc_examples() {
    assert!(is_quantity("1.3G") && is_quantity("1.3Gi") && is_quantity("10000k"));
    assert!(!is_quantity("1,3G") && !is_quantity("200K") && !is_quantity("Three"));
    assert!(!is_quantity(""));
    // The library docs say `quantity('Mi')` is an error, but Go's parser
    // reads it as zero mebibytes, and so do we.
    assert!(is_quantity("Mi") && q("Mi").sign() == 0);
    assert!(q("50000000G").is_integer() && q("50k").is_integer());
    let huge = q("9999999999999999999999999999999999999G");
    assert_eq!(huge.as_integer(), Err(QuantityError::NotInteger));
    assert_eq!(q("50k").as_integer(), Ok(50000));
    assert_eq!(
        q("50k").sub_int(20000).unwrap().as_approximate_float(),
        30000.0
    );
    assert_eq!(q("50k").add(&q("20k")).unwrap(), q("70k"));
    assert_eq!(q("50k").add_int(20).unwrap(), q("50020"));
    assert_eq!(q("50k").sub(&q("20k")).unwrap(), q("30k"));
    let chain = q("50k")
        .add_int(20)
        .unwrap()
        .sub(&q("100k"))
        .unwrap()
        .sub_int(-50000);
    assert_eq!(chain.unwrap(), q("20"));
    assert_eq!(q("200M").compare_to(&q("0.2G")), 0);
    assert_eq!(q("50M").compare_to(&q("50Mi")), -1);
    assert_eq!(q("50Mi").compare_to(&q("50M")), 1);
    assert!(q("150Mi").is_greater_than(&q("100Mi")));
    assert!(!q("50Mi").is_greater_than(&q("100Mi")));
    assert!(q("50M").is_less_than(&q("100M")));
    assert!(!q("100M").is_less_than(&q("50M")));
}

#[test]
fn equality_is_by_value() {
    assert_eq!(q("1"), q("1000m"));
    assert_eq!(q("1Ki"), q("1024"));
    assert_ne!(q("1E"), q("999999999999999999"));
    assert!(q("1n") < q("2n") && q("1n") > q("0"));
    assert!(q("1E") > q("999999999999999999.999999999"));
    assert!(q("-1n") > q("-1E"));
}

#[test]
fn format_follows_go() {
    assert_eq!(q("1.5").to_string(), "1500m");
    assert_eq!(q("1.5Gi").to_string(), "1536Mi");
    assert_eq!(q("1.5Gi").format(), Format::BinarySI);
    assert_eq!(q("0").add_int(5000).unwrap().to_string(), "5e3");
    assert_eq!(q("0.1n").to_string(), "1n");
    assert_eq!(q("1000E").to_string(), "1", "Go has no suffix for 1e21");
}

#[test]
fn huge_exponents_error_instead_of_hanging() {
    // Go never returns for this one.
    assert_eq!(
        Quantity::parse("1e-2147483648").unwrap_err(),
        QuantityError::TooLarge
    );
    let big = q("1e100000");
    assert_eq!(big.add_int(1).unwrap_err(), QuantityError::TooLarge);
    assert_eq!(big.compare_to(&q("1")), 1);
    assert_eq!(big.to_string(), "10e99999");
    assert_eq!(q("1e-100000").compare_to(&q("0")), 1);
}

#[test]
fn pow10_matches_go_tables() {
    assert_eq!(go_pow10(0), 1.0);
    assert_eq!(go_pow10(309), f64::INFINITY);
    assert_eq!(go_pow10(-324), 0.0);
    assert_eq!(go_pow10(300), 1e288 * 1e12);
    assert_eq!(go_pow10(-9), 1.0 / 1e9);
}

#[test]
fn cel_equality_quirk_of_arithmetic_results() {
    // Checked against kube-apiserver v1.36 (see the module docs).
    let two = q("2");
    let sum = q("1").add_int(1).unwrap();
    assert_eq!(sum.cel_equal(&two), Some(true));
    assert_eq!(two.cel_equal(&sum), None, "no such overload");
    assert_eq!(sum.cel_equal(&sum), None);
    assert_eq!(q("1").cel_equal(&q("1000m")), Some(true));
    assert!(sum.is_arithmetic_result() && !two.is_arithmetic_result());
}
