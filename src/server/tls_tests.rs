use super::*;

/// A self-signed certificate valid from `not_before` to `not_after`
/// (Unix seconds).
fn cert(not_before: i64, not_after: i64) -> Vec<u8> {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    params.not_before = time::OffsetDateTime::from_unix_timestamp(not_before).expect("time");
    params.not_after = time::OffsetDateTime::from_unix_timestamp(not_after).expect("time");
    params.self_signed(&key).expect("sign").der().to_vec()
}

#[test]
fn the_validity_window_is_read_from_the_certificate() {
    // 2001 and 2049 are UTCTime; 2051 is GeneralizedTime (RFC 5280).
    for (from, to) in [(978_307_200, 2_524_607_999), (1_700_000_000, 2_556_143_999)] {
        assert_eq!(
            validity(&cert(from, to)),
            Ok(Validity {
                not_before: from,
                not_after: to
            })
        );
    }
}

#[test]
fn a_truncated_or_foreign_certificate_is_an_error_not_a_panic() {
    let der = cert(1_700_000_000, 1_800_000_000);
    for cut in [0, 1, 2, 10, 100, der.len() / 2, der.len() - 1] {
        let _ = validity(&der[..cut]);
    }
    assert!(validity(&der[..20]).is_err());
    assert!(validity(b"not a certificate").is_err());
    assert!(validity(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
}

#[test]
fn expired_expiring_and_not_yet_valid_certificates_are_problems() {
    let v = Validity {
        not_before: 1000,
        not_after: 10_000,
    };
    let hour = Duration::from_secs(3600);
    assert_eq!(v.problem(5000, Duration::from_secs(60)), None);
    assert_eq!(v.problem(10_000, hour), Some(CertProblem::Expired(10_000)));
    assert_eq!(
        v.problem(7000, hour),
        Some(CertProblem::ExpiresSoon(10_000))
    );
    assert_eq!(
        v.problem(999, Duration::ZERO),
        Some(CertProblem::NotYetValid(1000))
    );
    assert_eq!(
        v.problem(5000, Duration::MAX),
        Some(CertProblem::ExpiresSoon(10_000))
    );
    assert_eq!(
        CertProblem::Expired(0).to_string(),
        "expired at 1970-01-01T00:00:00Z"
    );
}
