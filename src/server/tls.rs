//! TLS: rustls configuration, the reloadable certificate resolver and the
//! poller that swaps it.
//!
//! The served pair lives in an [`ArcSwap`]; each handshake loads it without
//! a lock. A background task re-reads the certificate and key files every
//! poll interval and compares their *contents* with what it saw last (kubelet
//! updates a mounted Secret by swapping a `..data` symlink, which file
//! watches report as a delete, so polling contents is the robust choice).
//! A changed pair is parsed and checked (the key must match the
//! certificate); only then is it swapped in. A pair that fails keeps the
//! previous one serving, is logged once per distinct content and counted.
//! Established connections are never touched: the pair is only read at
//! handshake time.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;

use super::metrics::ServerMetrics;
use super::ServerError;

/// The crypto provider the server uses (ring, as kube does).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parse a PEM certificate chain and PEM private key and check that they
/// belong together.
pub fn load_pair(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("certificate: {e}"))?;
    if chain.is_empty() {
        return Err("certificate: no CERTIFICATE block found".to_owned());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("private key: {e}"))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| format!("certificate and key: {e}"))
}

/// What the poller saw last, so each distinct content is tried (and logged)
/// once.
#[derive(PartialEq, Eq)]
enum Seen {
    Pair(Vec<u8>, Vec<u8>),
    Unreadable(String),
}

/// The serving certificate, reloadable from its files.
pub struct CertReloader {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
    seen: Mutex<Seen>,
    metrics: Arc<ServerMetrics>,
}

impl std::fmt::Debug for CertReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertReloader")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

impl CertReloader {
    /// Load the initial pair; failing here is fatal (nothing to serve).
    pub fn load(
        cert_path: &Path,
        key_path: &Path,
        provider: Arc<CryptoProvider>,
        metrics: Arc<ServerMetrics>,
    ) -> Result<Self, ServerError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|e| ServerError::Certificate {
                path: p.to_owned(),
                reason: e.to_string(),
            })
        };
        let cert = read(cert_path)?;
        let key = read(key_path)?;
        let pair =
            load_pair(&cert, &key, &provider).map_err(|reason| ServerError::Certificate {
                path: cert_path.to_owned(),
                reason,
            })?;
        Ok(CertReloader {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            provider,
            current: ArcSwap::from_pointee(pair),
            seen: Mutex::new(Seen::Pair(cert, key)),
            metrics,
        })
    }

    /// The pair served to new handshakes.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }

    /// Re-read both files; swap in the pair if it changed and is valid.
    /// Returns whether a new pair was installed. Blocking file I/O: call from
    /// a blocking context (the poller uses `spawn_blocking`).
    pub fn poll(&self) -> bool {
        let now = match (
            std::fs::read(&self.cert_path),
            std::fs::read(&self.key_path),
        ) {
            (Ok(c), Ok(k)) => Seen::Pair(c, k),
            (Err(e), _) => Seen::Unreadable(format!("{}: {e}", self.cert_path.display())),
            (_, Err(e)) => Seen::Unreadable(format!("{}: {e}", self.key_path.display())),
        };
        let mut seen = match self.seen.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if *seen == now {
            return false;
        }
        let result = match &now {
            Seen::Pair(c, k) => load_pair(c, k, &self.provider),
            Seen::Unreadable(reason) => Err(reason.clone()),
        };
        *seen = now;
        match result {
            Ok(pair) => {
                self.current.store(Arc::new(pair));
                self.metrics.cert_reloaded();
                tracing::info!(
                    cert = %self.cert_path.display(),
                    key = %self.key_path.display(),
                    "serving certificate reloaded"
                );
                true
            }
            Err(reason) => {
                self.metrics.cert_reload_failed();
                tracing::warn!(
                    cert = %self.cert_path.display(),
                    key = %self.key_path.display(),
                    error = %reason,
                    "certificate files changed but could not be loaded; still serving the previous certificate"
                );
                false
            }
        }
    }
}

/// Hands rustls the current pair at every handshake.
#[derive(Debug)]
pub struct Resolver(pub Arc<CertReloader>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current())
    }
}

/// Build the rustls server configuration: TLS 1.3 and 1.2 only, ALPN h2 and
/// http/1.1, optional client certificate verification.
pub fn server_config(
    reloader: Arc<CertReloader>,
    client_ca: Option<&Path>,
    provider: Arc<CryptoProvider>,
) -> Result<rustls::ServerConfig, ServerError> {
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| ServerError::Tls(e.to_string()))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let ca_err = |reason: String| ServerError::Certificate {
                path: path.to_owned(),
                reason,
            };
            let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
            let mut roots = RootCertStore::empty();
            let mut n = 0;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| ca_err(e.to_string()))?;
                roots.add(cert).map_err(|e| ca_err(e.to_string()))?;
                n += 1;
            }
            if n == 0 {
                return Err(ca_err("no CERTIFICATE block found".to_owned()));
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| ca_err(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(Arc::new(Resolver(reloader)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
