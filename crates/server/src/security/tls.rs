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
    build_server(certfile, keyfile, cacertfile.map(|ca| (ca, false)))
}

/// A server config from a PEM certificate chain and key; with `clients`
/// = (CA file, required), client certificates chaining to those CAs are
/// asked for, and refused when missing if `required`.
fn build_server(
    certfile: &Path,
    keyfile: &Path,
    clients: Option<(&Path, bool)>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(e.to_string()))?;
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some((ca, required)) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots(ca)?.into(),
                provider,
            );
            let verifier = if required {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError(format!("client verifier: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(read_certs(certfile)?, read_key(keyfile)?)
        .map_err(|e| {
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

/// The organizational unit of a node certificate ([`super::certs::NODE_OU`]).
pub use super::certs::NODE_OU;

/// Who is at the other end of a mutual-TLS cluster connection, from its
/// verified certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterPeer {
    /// A node certificate (OU [`NODE_OU`]) with this common name.
    Node(String),
    /// Any other certificate of the cluster CA: the user it names (CN).
    User(String),
}

impl ClusterPeer {
    /// The role of the verified leaf certificate `der`; `None` when it has
    /// no common name.
    pub fn of_cert(der: &[u8]) -> Option<ClusterPeer> {
        let cn = super::certs::common_name(der)?;
        Some(if super::certs::has_ou(der, NODE_OU) {
            ClusterPeer::Node(cn)
        } else {
            ClusterPeer::User(cn)
        })
    }

    /// The role of the peer of a server-side TLS connection.
    pub fn of_conn(conn: &rustls::ServerConnection) -> Option<ClusterPeer> {
        ClusterPeer::of_cert(conn.peer_certificates()?.first()?)
    }
}

/// Mutual TLS of the cluster port (`cluster_certfile`, `cluster_keyfile`,
/// `cluster_cacertfile`): the listener's config (a client certificate of
/// the cluster CA is required) and the dialler's (this node's certificate
/// as its client certificate; the peer's verified against the cluster CA
/// and the address dialled).
#[derive(Clone)]
pub struct ClusterTls {
    /// For the cluster listener.
    pub server: Arc<rustls::ServerConfig>,
    /// For connections to other nodes (and `basalt admin`).
    pub client: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterTls")
    }
}

fn roots(cafile: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in read_certs(cafile)? {
        roots
            .add(c)
            .map_err(|e| TlsError(format!("CA certificate in {}: {e}", cafile.display())))?;
    }
    Ok(roots)
}

fn read_key(keyfile: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(keyfile).map_err(|e| {
        TlsError(format!(
            "reading the private key in {}: {e}",
            keyfile.display()
        ))
    })
}

impl ClusterTls {
    /// Loads the node's certificate chain, key and the cluster CA.
    pub fn load(certfile: &Path, keyfile: &Path, cafile: &Path) -> Result<ClusterTls, TlsError> {
        let server = build_server(certfile, keyfile, Some((cafile, true)))?;
        let client = client_config(Some((certfile, keyfile)), cafile)?;
        Ok(ClusterTls { server, client })
    }
}

/// A client config trusting the CAs in `cafile`, presenting the
/// certificate and key in `identity` when given.
pub fn client_config(
    identity: Option<(&Path, &Path)>,
    cafile: &Path,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(e.to_string()))?
        .with_root_certificates(roots(cafile)?);
    let config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(read_certs(cert)?, read_key(key)?)
            .map_err(|e| TlsError(format!("client certificate and key: {e}")))?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The name a dialled address `host:port` is verified as: its IP address,
/// or its host name.
pub fn server_name(addr: &str) -> Result<rustls::pki_types::ServerName<'static>, TlsError> {
    let host = match addr.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    };
    rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| TlsError(format!("{host:?} is not a host name or IP address: {e}")))
}
