//! Certificates for a test or small cluster, made with `rcgen` (behind
//! `basalt certs`): a self-signed CA, node certificates signed by it
//! (SANs `127.0.0.1`, `localhost` and the node's name, usable as server
//! and as client: the cluster port's mutual TLS), and client certificates
//! whose common name is a user (Riak's `certificate` sources).
//!
//! Keys are ECDSA P-256. Everything is PEM. This is a helper for tests and
//! small deployments, not a CA: no revocation, no renewal; rotate by
//! issuing new files and restarting nodes one by one.
//!
//! Also here: [`common_name`], the CN of a DER certificate (the user of a
//! verified client certificate).

/// The organizational unit that marks a node certificate of the cluster
/// CA (`basalt certs node` sets it): its holder is a cluster member and may
/// send every cluster message; any other certificate of the cluster CA is
/// a user's (its common name), limited to admin and replication requests
/// its grants allow.
pub const NODE_OU: &str = "basalt-node";

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

/// The longest validity `basalt certs` issues, in days (about 30 years).
pub const MAX_VALIDITY_DAYS: u32 = 11_000;
/// The longest node name or user name put in a certificate, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// A certificate could not be made or read.
#[derive(Debug, thiserror::Error)]
#[error("certificate: {0}")]
pub struct CertError(pub String);

fn fail(what: &str) -> impl Fn(rcgen::Error) -> CertError + '_ {
    move |e| CertError(format!("{what}: {e}"))
}

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

/// When a certificate is valid: from `not_before` for `days` days.
#[derive(Debug, Clone, Copy)]
pub struct Validity {
    /// Start.
    pub not_before: OffsetDateTime,
    /// Length in days (1..=[`MAX_VALIDITY_DAYS`]).
    pub days: u32,
}

impl Validity {
    /// From an hour ago (clocks differ a little) for `days` days.
    pub fn days(days: u32) -> Validity {
        Validity {
            not_before: OffsetDateTime::now_utc() - Duration::hours(1),
            days,
        }
    }

    fn apply(self, p: &mut CertificateParams) -> Result<(), CertError> {
        if self.days == 0 || self.days > MAX_VALIDITY_DAYS {
            return Err(CertError(format!(
                "validity must be 1..={MAX_VALIDITY_DAYS} days, not {}",
                self.days
            )));
        }
        p.not_before = self.not_before;
        p.not_after = self.not_before + Duration::days(i64::from(self.days));
        Ok(())
    }
}

fn check_name(what: &str, name: &str) -> Result<(), CertError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(CertError(format!(
            "{what} {name:?} must be 1..={MAX_NAME_BYTES} bytes without control characters"
        )));
    }
    Ok(())
}

fn dn(cn: &str) -> DistinguishedName {
    let mut d = DistinguishedName::new();
    d.push(DnType::OrganizationName, "Basalt");
    d.push(DnType::CommonName, cn);
    d
}

/// A new self-signed CA named `name`.
pub fn new_ca(name: &str, validity: Validity) -> Result<Issued, CertError> {
    check_name("CA name", name)?;
    let mut p = CertificateParams::default();
    p.distinguished_name = dn(name);
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity.apply(&mut p)?;
    let key = KeyPair::generate().map_err(fail("generating the CA key"))?;
    let cert = p.self_signed(&key).map_err(fail("signing the CA"))?;
    Ok(Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The CA to sign with, from its PEM certificate and key.
fn load_ca(ca: &Issued) -> Result<(rcgen::Certificate, KeyPair), CertError> {
    let key = KeyPair::from_pem(&ca.key_pem).map_err(fail("reading the CA key"))?;
    let params =
        CertificateParams::from_ca_cert_pem(&ca.cert_pem).map_err(fail("reading the CA"))?;
    // Signing the CA's own parameters again with its key gives an issuer
    // with the same name and key: what a chain check compares.
    let cert = params
        .self_signed(&key)
        .map_err(fail("the CA key does not fit the CA certificate"))?;
    Ok((cert, key))
}

fn issue(ca: &Issued, mut p: CertificateParams, validity: Validity) -> Result<Issued, CertError> {
    validity.apply(&mut p)?;
    let (ca_cert, ca_key) = load_ca(ca)?;
    let key = KeyPair::generate().map_err(fail("generating a key"))?;
    let cert = p
        .signed_by(&key, &ca_cert, &ca_key)
        .map_err(fail("signing"))?;
    Ok(Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A node certificate: CN `name`, OU [`NODE_OU`], SANs `127.0.0.1`, `localhost`, `name`
/// (a DNS name or an IP address) and each of `extra`; usable by the node
/// as a server (client ports, cluster port) and as a client (joining,
/// gossip and handoff to other nodes).
pub fn node_cert(
    ca: &Issued,
    name: &str,
    extra: &[String],
    validity: Validity,
) -> Result<Issued, CertError> {
    check_name("node name", name)?;
    let mut sans: Vec<String> = vec!["127.0.0.1".into(), "localhost".into(), name.into()];
    for e in extra {
        check_name("SAN", e)?;
        sans.push(e.clone());
    }
    sans.sort();
    sans.dedup();
    let mut p = CertificateParams::default();
    p.distinguished_name = dn(name);
    // Marks a node (a cluster member) on the cluster port's mutual TLS.
    p.distinguished_name
        .push(DnType::OrganizationalUnitName, NODE_OU);
    p.subject_alt_names = sans
        .iter()
        .map(|s| match s.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) if is_dns_name(s) => s
                .clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|e| CertError(format!("SAN {s:?}: {e}"))),
            Err(_) => Err(CertError(format!(
                "{s:?} is neither a DNS name (letters, digits, '-', '.') nor an IP address"
            ))),
        })
        .collect::<Result<_, _>>()?;
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    issue(ca, p, validity)
}

fn is_dns_name(s: &str) -> bool {
    s.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    })
}

/// A client certificate whose common name is `user`.
pub fn client_cert(ca: &Issued, user: &str, validity: Validity) -> Result<Issued, CertError> {
    check_name("user", user)?;
    let mut p = CertificateParams::default();
    p.distinguished_name = dn(user);
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    issue(ca, p, validity)
}

/// Whether the subject of a DER certificate has the organizational unit
/// `ou` (false when unparsable).
pub fn has_ou(der: &[u8], ou: &str) -> bool {
    x509_parser::parse_x509_certificate(der).is_ok_and(|(_, cert)| {
        cert.subject()
            .iter_organizational_unit()
            .any(|u| u.as_str() == Ok(ou))
    })
}

/// The subject's common name of a DER certificate (`None`: unparsable, or
/// no UTF-8 common name).
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;

    fn der(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .expect("pem")
            .to_vec()
    }

    #[test]
    fn a_client_certificate_names_its_user_and_chains_to_the_ca() {
        let ca = new_ca("test CA", Validity::days(10)).expect("ca");
        let c = client_cert(&ca, "alice", Validity::days(1)).expect("client");
        assert_eq!(common_name(&der(&c.cert_pem)).as_deref(), Some("alice"));
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der(&ca.cert_pem).into()).expect("root");
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .expect("verifier");
        let now = rustls::pki_types::UnixTime::now();
        verifier
            .verify_client_cert(&der(&c.cert_pem).into(), &[], now)
            .expect("chains to the CA");
    }

    #[test]
    fn a_node_certificate_has_its_names() {
        let ca = new_ca("test CA", Validity::days(10)).expect("ca");
        let n = node_cert(
            &ca,
            "node1.example",
            &["10.0.0.7".into()],
            Validity::days(1),
        )
        .expect("node");
        let bytes = der(&n.cert_pem);
        let (_, cert) = x509_parser::parse_x509_certificate(&bytes).expect("parse");
        let sans = format!("{:?}", cert.subject_alternative_name());
        for want in [
            "IPAddress([127, 0, 0, 1])",
            "IPAddress([10, 0, 0, 7])",
            "DNSName(\"localhost\")",
            "DNSName(\"node1.example\")",
        ] {
            assert!(sans.contains(want), "{want} in {sans}");
        }
        assert_eq!(common_name(&bytes).as_deref(), Some("node1.example"));
    }

    #[test]
    fn bad_names_and_validity_are_errors() {
        let ca = new_ca("ca", Validity::days(1)).expect("ca");
        assert!(client_cert(&ca, "", Validity::days(1)).is_err());
        assert!(client_cert(&ca, "a\u{0}b", Validity::days(1)).is_err());
        assert!(client_cert(&ca, &"x".repeat(200), Validity::days(1)).is_err());
        assert!(client_cert(&ca, "bob", Validity::days(0)).is_err());
        assert!(node_cert(&ca, "bad name!", &[], Validity::days(1)).is_err());
        let garbage = Issued {
            cert_pem: "not a certificate".into(),
            key_pem: ca.key_pem.clone(),
        };
        assert!(client_cert(&garbage, "bob", Validity::days(1)).is_err());
        assert_eq!(common_name(b"garbage"), None);
    }
}
