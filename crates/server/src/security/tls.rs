//! TLS of the client listeners (rustls, no OpenSSL): the node's
//! certificate chain and private key, read from PEM files named in the
//! config (`tls_certfile`, `tls_keyfile`), for `RpbStartTls`.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// The TLS settings could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("TLS: {0}")]
pub struct TlsError(pub String);

/// A server config from a PEM certificate chain and a PEM private key.
pub fn server_config(
    certfile: &Path,
    keyfile: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(certfile)
        .map_err(|e| TlsError(format!("reading {}: {e}", certfile.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError(format!("parsing {}: {e}", certfile.display())))?;
    if certs.is_empty() {
        return Err(TlsError(format!(
            "no certificate in {}",
            certfile.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(keyfile).map_err(|e| {
        TlsError(format!(
            "reading the private key in {}: {e}",
            keyfile.display()
        ))
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            TlsError(format!(
                "certificate and key do not match or are unusable: {e}"
            ))
        })?;
    Ok(Arc::new(config))
}
