//! Issue 36: an expired serving certificate was served silently (`/readyz`
//! 200, nothing logged, no expiry metric) while every handshake failed at
//! the client. Now the server reports unready with the reason, logs one
//! line naming the file and the expiry, and exports the expiry.

use super::*;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::UnixTime;

/// A self-signed serving certificate and key (PEM) valid from
/// `not_before` to `not_after`, Unix seconds.
fn certificate(not_before: i64, not_after: i64) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("params");
    params.not_before = time::OffsetDateTime::from_unix_timestamp(not_before).expect("time");
    params.not_after = time::OffsetDateTime::from_unix_timestamp(not_after).expect("time");
    let cert = params.self_signed(&key).expect("sign");
    (cert.pem(), key.serialize_pem())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

/// Accepts any certificate, as kubelet's HTTPS probes do: an expired one
/// must still be asked whether it is ready.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A client configuration that trusts any certificate and offers `alpn`
/// (none when empty), with full handshakes only.
pub(super) fn trusting_anything(alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    if !alpn.is_empty() {
        config.alpn_protocols = vec![alpn.to_vec()];
    }
    Arc::new(config)
}

/// GET `path` over a TLS connection that trusts any certificate.
async fn probe(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    let tcp = TcpStream::connect(addr).await.expect("tcp");
    let tls = TlsConnector::from(trusting_anything(b""))
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
        .expect("handshake");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http");
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()).boxed())
        .expect("request");
    let resp = sender.send_request(req).await.expect("answer");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The log lines about the serving certificate at `cert`.
fn certificate_lines(cert: &Path) -> Vec<String> {
    let cert = cert.display().to_string();
    String::from_utf8_lossy(&LOGS.lock().expect("logs"))
        .lines()
        .filter(|l| l.contains(&cert) && l.contains("serving certificate"))
        .map(str::to_owned)
        .collect()
}

/// Started with an expired certificate: `/readyz` 503 with the reason,
/// exactly one log line (polls every 50 ms do not repeat it), the expiry
/// metric; a valid certificate written over it makes the server ready
/// again on reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_certificate_makes_the_server_unready_and_loud() {
    capture_logs();
    let expired_at = now() - 86_400;
    let (cert, key) = certificate(expired_at - 86_400, expired_at);
    let tmp = tempfile::tempdir().expect("tempdir");
    let cert_path = tmp.path().join("tls.crt");
    std::fs::write(&cert_path, &cert).expect("write");
    std::fs::write(tmp.path().join("tls.key"), &key).expect("write");
    let server = Server::bind(config_for(tmp.path()), TestReviewer::ready())
        .await
        .expect("an expired certificate still starts the server");
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));

    let (status, body) = probe(addr, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let expiry = chrono::DateTime::from_timestamp(expired_at, 0)
        .expect("date")
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    assert!(
        body.contains("serving certificate") && body.contains(&format!("expired at {expiry}")),
        "{body}"
    );
    let (_, metrics) = probe(addr, "/metrics").await;
    assert_eq!(
        metric(
            &metrics,
            "interlock_tls_certificate_expiry_timestamp_seconds"
        ),
        Some(expired_at as f64),
        "{metrics}"
    );
    // Twenty polls later, still one line.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let lines = certificate_lines(&cert_path);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains(&expiry), "{lines:#?}");

    let valid_until = now() + 30 * 86_400;
    let (cert, key) = certificate(now() - 60, valid_until);
    std::fs::write(tmp.path().join("tls.key"), &key).expect("write");
    std::fs::write(&cert_path, &cert).expect("write");
    let mut ready = false;
    for _ in 0..200 {
        if probe(addr, "/readyz").await.0 == StatusCode::OK {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "a valid certificate did not make the server ready");
    let (_, metrics) = probe(addr, "/metrics").await;
    assert_eq!(
        metric(
            &metrics,
            "interlock_tls_certificate_expiry_timestamp_seconds"
        ),
        Some(valid_until as f64),
        "{metrics}"
    );
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}

/// A certificate that expires within `tls_expiry_margin` is reported
/// before it expires (the rotation has failed): unready with "expires at".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_expiring_within_the_margin_makes_the_server_unready() {
    let expires = now() + 3600;
    let (cert, key) = certificate(now() - 60, expires);
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("tls.crt"), &cert).expect("write");
    std::fs::write(tmp.path().join("tls.key"), &key).expect("write");
    let mut config = config_for(tmp.path());
    config.tls_expiry_margin = Duration::from_secs(2 * 3600);
    let server = Server::bind(config, TestReviewer::ready())
        .await
        .expect("bind");
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    let (status, body) = probe(addr, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("expires at"), "{body}");
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}
