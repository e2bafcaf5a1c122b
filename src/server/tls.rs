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
//!
//! The served certificate's validity is checked at start, at every poll
//! (the clock moves on) and on every reload: expired, not yet valid, or
//! expiring within the margin (`--tls-expiry-margin`) makes the server
//! unready with the reason ([`CertReloader::problem`]); each change of that
//! verdict is logged once, naming the file and the date, and the expiry is
//! exported as `interlock_tls_certificate_expiry_timestamp_seconds`. Every
//! handshake with an expired certificate fails at the client, so a pod that
//! served one while reporting Ready refused every write under
//! `failurePolicy: Fail`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
) -> Result<CertifiedKey, PairError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(PairError::CertificatePem)?;
    if chain.is_empty() {
        return Err(PairError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(PairError::KeyPem)?;
    CertifiedKey::from_der(chain, key, provider).map_err(PairError::Mismatch)
}

/// Why a certificate and key do not make a pair to serve.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error("certificate: {0}")]
    CertificatePem(rustls::pki_types::pem::Error),
    #[error("certificate: no CERTIFICATE block found")]
    NoCertificate,
    #[error("private key: {0}")]
    KeyPem(rustls::pki_types::pem::Error),
    #[error("certificate and key: {0}")]
    Mismatch(rustls::Error),
    #[error(transparent)]
    Validity(#[from] DerError),
    /// A file of the pair could not be read (its path and why).
    #[error("{0}")]
    Unreadable(String),
}

/// Why a certificate's validity could not be read; `what` names the
/// certificate field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DerError {
    #[error("certificate: {what} is truncated")]
    Truncated { what: &'static str },
    #[error("certificate: {what} has a bad length")]
    BadLength { what: &'static str },
    #[error("certificate: {what} has tag {found:#04x}, not {expected:#04x}")]
    Tag {
        what: &'static str,
        found: u8,
        expected: u8,
    },
    #[error("certificate: {what} is not a valid time")]
    Time { what: &'static str },
}

/// The validity window of a certificate, in seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// notBefore.
    pub not_before: i64,
    /// notAfter.
    pub not_after: i64,
}

/// Why the served certificate makes the server unready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertProblem {
    /// Past its notAfter (at this time).
    Expired(i64),
    /// Within the margin of its notAfter (at this time).
    ExpiresSoon(i64),
    /// Before its notBefore (at this time).
    NotYetValid(i64),
}

impl std::fmt::Display for CertProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            CertProblem::Expired(at) => write!(f, "expired at {}", rfc3339(at)),
            CertProblem::ExpiresSoon(at) => write!(f, "expires at {}", rfc3339(at)),
            CertProblem::NotYetValid(at) => write!(f, "not valid before {}", rfc3339(at)),
        }
    }
}

fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0).map_or_else(
        || format!("{unix} s after the Unix epoch"),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

impl Validity {
    /// What is wrong with a certificate of this validity at `now` (Unix
    /// seconds), with `margin` before its expiry counted as expiring.
    pub fn problem(&self, now: i64, margin: Duration) -> Option<CertProblem> {
        let margin = i64::try_from(margin.as_secs()).unwrap_or(i64::MAX);
        if now >= self.not_after {
            Some(CertProblem::Expired(self.not_after))
        } else if now < self.not_before {
            Some(CertProblem::NotYetValid(self.not_before))
        } else if self.not_after.saturating_sub(margin) <= now {
            Some(CertProblem::ExpiresSoon(self.not_after))
        } else {
            None
        }
    }
}

/// The validity of a DER certificate: the `validity` of its
/// `tbsCertificate` (RFC 5280, 4.1), read with a minimal DER walk rather
/// than a full X.509 parser.
pub fn validity(der: &[u8]) -> Result<Validity, DerError> {
    let cert = Der(der).expect(0x30, "certificate")?;
    let mut tbs = Der(Der(cert).expect(0x30, "tbsCertificate")?);
    if tbs.peek() == Some(0xa0) {
        tbs.next("version")?;
    }
    tbs.expect(0x02, "serialNumber")?;
    tbs.expect(0x30, "signature")?;
    tbs.expect(0x30, "issuer")?;
    let mut window = Der(tbs.expect(0x30, "validity")?);
    let not_before = window.time("notBefore")?;
    let not_after = window.time("notAfter")?;
    Ok(Validity {
        not_before,
        not_after,
    })
}

/// A DER reader over a sequence of TLVs.
struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// The next element's tag and content.
    fn next(&mut self, what: &'static str) -> Result<(u8, &'a [u8]), DerError> {
        let short = || DerError::Truncated { what };
        let (&tag, rest) = self.0.split_first().ok_or_else(short)?;
        let (&first, rest) = rest.split_first().ok_or_else(short)?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return Err(DerError::BadLength { what });
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            (len, &rest[n..])
        };
        if rest.len() < len {
            return Err(short());
        }
        let (content, rest) = rest.split_at(len);
        self.0 = rest;
        Ok((tag, content))
    }

    /// The next element's content, which must have tag `tag`.
    fn expect(&mut self, tag: u8, what: &'static str) -> Result<&'a [u8], DerError> {
        match self.next(what)? {
            (t, content) if t == tag => Ok(content),
            (found, _) => Err(DerError::Tag {
                what,
                found,
                expected: tag,
            }),
        }
    }

    /// The next element as a UTCTime or GeneralizedTime, in Unix seconds.
    fn time(&mut self, what: &'static str) -> Result<i64, DerError> {
        let bad = || DerError::Time { what };
        let (tag, content) = self.next(what)?;
        let text = std::str::from_utf8(content).map_err(|_| bad())?;
        let text = text.strip_suffix('Z').ok_or_else(bad)?;
        // UTCTime's two-digit years: 50-99 are 19xx (RFC 5280, 4.1.2.5.1).
        let full = match (tag, text.len()) {
            (0x17, 12) => {
                let century = if text < "50" { "20" } else { "19" };
                format!("{century}{text}")
            }
            (0x18, 14) => text.to_owned(),
            _ => return Err(bad()),
        };
        chrono::NaiveDateTime::parse_from_str(&full, "%Y%m%d%H%M%S")
            .map(|t| t.and_utc().timestamp())
            .map_err(|_| bad())
    }
}

fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
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
    /// The served certificate's validity, and the margin before its expiry
    /// that already counts as expiring.
    validity: Mutex<Validity>,
    margin: Duration,
    /// The verdict last logged (and served on `/readyz`).
    problem: Mutex<Option<CertProblem>>,
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
    /// Load the initial pair; failing here is fatal (nothing to serve). A
    /// certificate that is expired or expires within `margin` loads (the
    /// server starts, unready, and recovers when a valid one is written).
    pub fn load(
        cert_path: &Path,
        key_path: &Path,
        provider: Arc<CryptoProvider>,
        metrics: Arc<ServerMetrics>,
        margin: Duration,
    ) -> Result<Self, ServerError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|e| ServerError::Certificate {
                path: p.to_owned(),
                reason: e.to_string(),
            })
        };
        let cert = read(cert_path)?;
        let key = read(key_path)?;
        let invalid = |e: PairError| ServerError::Certificate {
            path: cert_path.to_owned(),
            reason: e.to_string(),
        };
        let pair = load_pair(&cert, &key, &provider).map_err(invalid)?;
        let window = leaf_validity(&pair).map_err(invalid)?;
        metrics.set_cert_expiry(window.not_after);
        let reloader = CertReloader {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            provider,
            current: ArcSwap::from_pointee(pair),
            seen: Mutex::new(Seen::Pair(cert, key)),
            metrics,
            validity: Mutex::new(window),
            margin,
            problem: Mutex::new(None),
        };
        reloader.check_validity(unix_now());
        Ok(reloader)
    }

    /// Why the served certificate makes the server unready, if it does.
    pub fn problem(&self) -> Option<CertProblem> {
        *lock(&self.problem)
    }

    /// Judge the served certificate at `now` (Unix seconds): remember the
    /// verdict for `/readyz` and log it when it changed.
    fn check_validity(&self, now: i64) {
        let verdict = lock(&self.validity).problem(now, self.margin);
        let mut last = lock(&self.problem);
        if *last == verdict {
            return;
        }
        let cert = self.cert_path.display();
        match verdict {
            Some(problem) => tracing::error!(
                cert = %cert,
                %problem,
                margin_s = self.margin.as_secs(),
                "serving certificate {problem}; not ready until a valid one is written"
            ),
            None => tracing::info!(cert = %cert, "serving certificate valid again; ready"),
        }
        *last = verdict;
    }

    /// The pair served to new handshakes.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }

    /// Re-read both files; swap in the pair if it changed and is valid;
    /// then judge the served certificate's validity against the clock.
    /// Returns whether a new pair was installed. Blocking file I/O: call from
    /// a blocking context (the poller uses `spawn_blocking`).
    pub fn poll(&self) -> bool {
        let installed = self.reload();
        self.check_validity(unix_now());
        installed
    }

    fn reload(&self) -> bool {
        let now = match (
            std::fs::read(&self.cert_path),
            std::fs::read(&self.key_path),
        ) {
            (Ok(c), Ok(k)) => Seen::Pair(c, k),
            (Err(e), _) => Seen::Unreadable(format!("{}: {e}", self.cert_path.display())),
            (_, Err(e)) => Seen::Unreadable(format!("{}: {e}", self.key_path.display())),
        };
        let mut seen = lock(&self.seen);
        if *seen == now {
            return false;
        }
        let result = match &now {
            Seen::Pair(c, k) => load_pair(c, k, &self.provider)
                .and_then(|pair| leaf_validity(&pair).map(|window| (pair, window))),
            Seen::Unreadable(reason) => Err(PairError::Unreadable(reason.clone())),
        };
        *seen = now;
        match result {
            Ok((pair, window)) => {
                self.current.store(Arc::new(pair));
                *lock(&self.validity) = window;
                self.metrics.set_cert_expiry(window.not_after);
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

/// The validity of a pair's first (leaf) certificate.
fn leaf_validity(pair: &CertifiedKey) -> Result<Validity, PairError> {
    let leaf = pair.cert.first().ok_or(PairError::NoCertificate)?;
    Ok(validity(leaf.as_ref())?)
}

/// A panic elsewhere cannot leave these values half-written: use them.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
