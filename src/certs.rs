//! `interlock certs`: a private CA and a serving certificate for the webhook.
//!
//! [`generate`] makes the PEM texts in memory (tests use it directly);
//! [`write`] puts them in a directory as `ca.crt`, `tls.crt` and `tls.key`
//! (the key with mode 0600, every file replaced atomically); [`run`] is the
//! subcommand. The CA's private key is never written: it signs the serving
//! certificate and is dropped. Rotation therefore makes a new CA, which is
//! added to the webhook's caBundle before the new serving certificate is
//! installed (see certs/README.md).

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

/// File names written by [`write`] (the names kubernetes.io/tls Secrets use).
pub const CA_CERT_FILE: &str = "ca.crt";
/// Serving certificate file name.
pub const TLS_CERT_FILE: &str = "tls.crt";
/// Serving key file name.
pub const TLS_KEY_FILE: &str = "tls.key";

/// Errors of certificate generation and writing.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    /// No host was given.
    #[error("at least one --host is needed")]
    NoHosts,
    /// A host is neither an IP address nor a valid DNS name.
    #[error("invalid host {host:?}: {reason}")]
    InvalidHost {
        /// The host as given.
        host: String,
        /// Why it was refused.
        reason: String,
    },
    /// A validity of zero days.
    #[error("validity must be at least one day")]
    Validity,
    /// rcgen refused the parameters.
    #[error("certificate generation: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file already exists and `force` was not given.
    #[error("{} exists (use --force to replace it)", .0.display())]
    Exists(PathBuf),
    /// Writing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct CertsOptions {
    /// DNS names and IP addresses of the serving certificate; the first is
    /// also its common name.
    pub hosts: Vec<String>,
    /// Validity of the serving certificate in days.
    pub days: u32,
    /// Validity of the CA in days.
    pub ca_days: u32,
}

impl CertsOptions {
    /// Defaults: one year for the serving certificate, ten for the CA.
    pub fn new(hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        CertsOptions {
            hosts: hosts.into_iter().map(Into::into).collect(),
            days: 365,
            ca_days: 3650,
        }
    }
}

/// PEM texts of a generated set.
#[derive(Clone)]
pub struct CertBundle {
    /// The CA certificate (the webhook's caBundle).
    pub ca_cert_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for CertBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertBundle")
            .field("ca_cert_pem", &self.ca_cert_pem)
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

fn san(host: &str) -> Result<SanType, CertsError> {
    let invalid = |reason: &str| CertsError::InvalidHost {
        host: host.to_owned(),
        reason: reason.to_owned(),
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if host.len() > 253 || !name.split('.').all(label_ok) {
        return Err(invalid("not an IP address or a DNS name"));
    }
    let ia5 = host
        .to_ascii_lowercase()
        .try_into()
        .map_err(|e: rcgen::Error| invalid(&e.to_string()))?;
    Ok(SanType::DnsName(ia5))
}

/// Make a CA and a serving certificate for `opts.hosts` (ECDSA P-256).
pub fn generate(opts: &CertsOptions) -> Result<CertBundle, CertsError> {
    if opts.hosts.is_empty() {
        return Err(CertsError::NoHosts);
    }
    if opts.days == 0 || opts.ca_days == 0 {
        return Err(CertsError::Validity);
    }
    let sans = opts
        .hosts
        .iter()
        .map(|h| san(h))
        .collect::<Result<Vec<_>, _>>()?;
    let now = OffsetDateTime::now_utc();
    // Tolerate some clock skew between this machine and the cluster.
    let not_before = now - Duration::hours(1);

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "interlock webhook CA");
    ca.distinguished_name
        .push(DnType::OrganizationName, "interlock");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = not_before;
    ca.not_after = now + Duration::days(i64::from(opts.ca_days));
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, &ca_key);

    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::default();
    leaf.distinguished_name = DistinguishedName::new();
    leaf.distinguished_name
        .push(DnType::CommonName, opts.hosts[0].as_str());
    leaf.subject_alt_names = sans;
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    leaf.not_before = not_before;
    let ca_not_after = now + Duration::days(i64::from(opts.ca_days));
    leaf.not_after = (now + Duration::days(i64::from(opts.days))).min(ca_not_after);
    let cert = leaf.signed_by(&key, &issuer)?;

    Ok(CertBundle {
        ca_cert_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Write `bundle` into `dir` (created if missing) as ca.crt, tls.crt and
/// tls.key. Each file is written to a temporary name and renamed, so a
/// server polling the directory never reads half a file; tls.key gets mode
/// 0600. Without `force`, existing files are an error and nothing is written.
/// Returns the paths written.
pub fn write(dir: &Path, bundle: &CertBundle, force: bool) -> Result<Vec<PathBuf>, CertsError> {
    std::fs::create_dir_all(dir).map_err(|source| CertsError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let files = [
        (CA_CERT_FILE, &bundle.ca_cert_pem, 0o644),
        (TLS_CERT_FILE, &bundle.cert_pem, 0o644),
        (TLS_KEY_FILE, &bundle.key_pem, 0o600),
    ];
    if !force {
        for (name, _, _) in &files {
            let path = dir.join(name);
            if path.exists() {
                return Err(CertsError::Exists(path));
            }
        }
    }
    // Key first: a reader that pairs the new key with the old certificate
    // sees a mismatch and retries on its next poll.
    let mut written = Vec::new();
    for (name, text, mode) in files.iter().rev() {
        let path = dir.join(name);
        write_atomic(&path, text.as_bytes(), *mode)?;
        written.push(path);
    }
    written.reverse();
    Ok(written)
}

fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<(), CertsError> {
    let io = |source| CertsError::Io {
        path: path.to_owned(),
        source,
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let result = (|| {
        let mut f = opts.open(&tmp)?;
        #[cfg(unix)]
        {
            // The mode given to open() is reduced by the umask; set it exactly.
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// `interlock certs`: generate and write, then say what was written.
pub fn run(opts: &CertsOptions, out: &std::path::Path, force: bool) -> anyhow::Result<()> {
    let bundle = generate(opts)?;
    let written = write(out, &bundle, force)?;
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
#[path = "certs_tests.rs"]
mod tests;
