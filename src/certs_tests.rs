use super::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

#[test]
fn generates_a_verifiable_chain() {
    let b = generate(&CertsOptions::new([
        "interlock.interlock-system.svc",
        "127.0.0.1",
        "::1",
    ]))
    .expect("generate");
    let provider = crate::server::tls::provider();
    // The key matches the certificate.
    crate::server::tls::load_pair(b.cert_pem.as_bytes(), b.key_pem.as_bytes(), &provider)
        .expect("pair");
    // The leaf verifies against the CA for every host.
    let ca = CertificateDer::from_pem_slice(b.ca_cert_pem.as_bytes()).expect("ca");
    let leaf = CertificateDer::from_pem_slice(b.cert_pem.as_bytes()).expect("leaf");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).expect("root");
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        std::sync::Arc::new(roots),
        provider,
    )
    .build()
    .expect("verifier");
    use rustls::client::danger::ServerCertVerifier;
    for host in ["interlock.interlock-system.svc", "127.0.0.1", "::1"] {
        let name = rustls::pki_types::ServerName::try_from(host).expect("name");
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], rustls::pki_types::UnixTime::now())
            .unwrap_or_else(|e| panic!("{host}: {e}"));
    }
    let other = rustls::pki_types::ServerName::try_from("evil.example").expect("name");
    assert!(verifier
        .verify_server_cert(&leaf, &[], &other, &[], rustls::pki_types::UnixTime::now())
        .is_err());
}

#[test]
fn rejects_bad_hosts() {
    for bad in ["", "a b", "-x.svc", "x..svc", "exa_mple.com"] {
        assert!(
            matches!(
                generate(&CertsOptions::new([bad])),
                Err(CertsError::InvalidHost { .. })
            ),
            "{bad:?} accepted"
        );
    }
    assert!(matches!(
        generate(&CertsOptions::new(Vec::<String>::new())),
        Err(CertsError::NoHosts)
    ));
    assert!(generate(&CertsOptions::new(["*.interlock-system.svc"])).is_ok());
}

#[test]
fn writes_files_with_key_mode_0600_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("certs");
    let b = generate(&CertsOptions::new(["localhost"])).expect("generate");
    let written = write(&out, &b, false).expect("write");
    assert_eq!(written.len(), 3);
    assert_eq!(
        std::fs::read_to_string(out.join(TLS_KEY_FILE)).expect("key"),
        b.key_pem
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out.join(TLS_KEY_FILE))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(matches!(write(&out, &b, false), Err(CertsError::Exists(_))));
    let b2 = generate(&CertsOptions::new(["localhost"])).expect("generate");
    write(&out, &b2, true).expect("force");
    assert_eq!(
        std::fs::read_to_string(out.join(TLS_CERT_FILE)).expect("cert"),
        b2.cert_pem
    );
    // No temporary files left behind.
    assert_eq!(std::fs::read_dir(&out).expect("dir").count(), 3);
}
