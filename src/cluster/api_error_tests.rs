use super::*;

#[derive(Debug, thiserror::Error)]
#[error("client error (Connect)")]
struct Connect(#[source] std::io::Error);

#[test]
fn a_certificate_error_behind_an_io_error_is_named() {
    let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
    // As hyper-rustls delivers it: an io::Error around tokio-rustls's.
    let e = Connect(std::io::Error::other(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        tls,
    )));
    let text = explain(&e);
    assert!(
        text.starts_with("client error (Connect): the TLS handshake with the API server failed")
            && text.contains("UnknownIssuer")
            && text.contains("not trusted by"),
        "{text}"
    );
}

#[test]
fn other_errors_are_left_as_they_are() {
    let e = Connect(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "connection refused",
    ));
    assert_eq!(explain(&e), "client error (Connect)");
}
