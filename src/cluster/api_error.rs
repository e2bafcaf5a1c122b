//! API errors as an operator needs to read them.
//!
//! kube's message for a TLS handshake the API server's certificate failed
//! is "client error (Connect)", which reads like a dead address: the
//! rustls error that says why sits in the error's sources, behind an
//! `io::Error` whose `source()` skips it. [`explain`] finds it and names
//! the certificate authority the client trusted, so a wrong CA in the
//! kubeconfig is told apart from an unreachable server.

use std::error::Error;

/// `e`'s message, followed, when its cause is the API server's certificate
/// failing verification, by that cause and the CA the client trusted.
pub fn explain(e: &(dyn Error + 'static)) -> String {
    match certificate_error(e) {
        Some(cause) => format!(
            "{e}: the TLS handshake with the API server failed ({cause}): its certificate is not \
             trusted by {}",
            trusted_ca()
        ),
        None => e.to_string(),
    }
}

/// The rustls certificate error among `e`'s sources, if any.
fn certificate_error<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(tls) = unwrap_io(err).downcast_ref::<rustls::Error>() {
            if matches!(
                tls,
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
            ) {
                return Some(tls);
            }
        }
        next = err.source();
    }
    None
}

/// The error inside `e`'s `io::Error` wrappers (hyper-rustls wraps
/// tokio-rustls's, which wraps rustls's): `io::Error::source()` is its
/// inner error's source, which skips the inner error itself.
fn unwrap_io<'a>(mut e: &'a (dyn Error + 'static)) -> &'a (dyn Error + 'static) {
    while let Some(inner) = e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
    {
        e = inner;
    }
    e
}

/// Where the client's trust came from: the current kubeconfig context's
/// cluster CA, or the in-cluster service account's.
fn trusted_ca() -> String {
    const IN_CLUSTER_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    let Ok(config) = kube::config::Kubeconfig::read() else {
        return format!("the in-cluster CA ({IN_CLUSTER_CA}) or the kubeconfig's CA");
    };
    let context = config.current_context.as_deref().and_then(|name| {
        config
            .contexts
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.context.as_ref())
    });
    let Some(cluster_name) = context.map(|c| c.cluster.as_str()) else {
        return "the kubeconfig's CA (its current context names no cluster)".to_owned();
    };
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.as_ref());
    use kube::config::Cluster;
    match cluster {
        Some(Cluster {
            certificate_authority: Some(file),
            ..
        }) => {
            format!("the kubeconfig's CA: certificate-authority {file} of cluster {cluster_name:?}")
        }
        Some(Cluster {
            certificate_authority_data: Some(_),
            ..
        }) => {
            format!("the kubeconfig's CA: certificate-authority-data of cluster {cluster_name:?}")
        }
        _ => format!(
            "the system's roots: cluster {cluster_name:?} of the kubeconfig names no \
             certificate-authority"
        ),
    }
}

#[cfg(test)]
#[path = "api_error_tests.rs"]
mod tests;
