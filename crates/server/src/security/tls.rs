//! TLS of the client listeners (rustls, no OpenSSL): the node's
//! certificate chain and private key, read from PEM files named in the
//! config (`tls_certfile`, `tls_keyfile`), for `RpbStartTls` and
//! `https_listen`; with `tls_cacertfile`, client certificates chaining to
//! those CAs are asked for (optional: a client without one still connects
//! and may use a password) and verified by webpki (chain, validity dates,
//! client-auth usage); [`peer_common_name`] gives the verified
//! certificate's common name, the user of a `certificate` source.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// How long a client may take to finish a TLS handshake.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The TLS settings could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("TLS: {0}")]
pub struct TlsError(pub String);

fn read_certs(file: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
        .map_err(|e| TlsError(format!("reading {}: {e}", file.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError(format!("parsing {}: {e}", file.display())))?;
    if certs.is_empty() {
        return Err(TlsError(format!("no certificate in {}", file.display())));
    }
    Ok(certs)
}

/// A server config from a PEM certificate chain and a PEM private key;
/// with `cacertfile`, client certificates signed by its CAs are asked for
/// (and verified when given) but not required.
pub fn server_config(
    certfile: &Path,
    keyfile: &Path,
    cacertfile: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = read_certs(certfile)?;
    let key = PrivateKeyDer::from_pem_file(keyfile).map_err(|e| {
        TlsError(format!(
            "reading the private key in {}: {e}",
            keyfile.display()
        ))
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(e.to_string()))?;
    let builder = match cacertfile {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in read_certs(ca)? {
                roots
                    .add(c)
                    .map_err(|e| TlsError(format!("CA certificate in {}: {e}", ca.display())))?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| TlsError(format!("client verifier: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| {
        TlsError(format!(
            "certificate and key do not match or are unusable: {e}"
        ))
    })?;
    Ok(Arc::new(config))
}

/// The common name of the (verified) client certificate of a server-side
/// TLS connection, if the client presented one.
pub fn peer_common_name(conn: &rustls::ServerConnection) -> Option<String> {
    let leaf = conn.peer_certificates()?.first()?;
    super::certs::common_name(leaf)
}
