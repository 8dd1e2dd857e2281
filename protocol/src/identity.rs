//! The checks a node identity must pass where it is held: before an agent
//! dials anything, its key must match its certificate, the certificate must
//! name the configured node, be signed by the configured fleet CA and be
//! valid now. An agent that fails one refuses to start (it would otherwise
//! retry a handshake that can never succeed, or connect as another node).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, InconsistentKeys, RootCertStore};

use crate::tls::{load_certs, load_key, TlsError};

/// A node identity that passed [`check_identity`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The node id its certificate names (equal to the configured one).
    pub node: String,
    /// The SHA-256 fingerprint of its leaf certificate (what a revocation
    /// names).
    pub fingerprint: [u8; 32],
}

/// Why a node identity cannot be used. Every variant names the files.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// A certificate, key or CA file cannot be read or holds nothing usable.
    #[error("{0}")]
    Load(#[from] TlsError),
    /// The private key is not the one the certificate was issued for.
    #[error("key {key} does not match certificate {cert} (the key's public half is not the certificate's)")]
    KeyMismatch {
        /// The key file.
        key: PathBuf,
        /// The certificate file.
        cert: PathBuf,
    },
    /// The key file holds a key rustls cannot use.
    #[error("key {key} is not a usable private key: {detail}")]
    BadKey {
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        detail: String,
    },
    /// The certificate names another node than the configured one.
    #[error("certificate {cert} is node {in_cert:?}'s, but the config says node = {configured:?}")]
    NodeMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The node id in the certificate.
        in_cert: String,
        /// The node id in the config.
        configured: String,
    },
    /// The certificate carries no usable node id.
    #[error("certificate {cert} is not a node certificate: {detail}")]
    NotANodeCert {
        /// The certificate file.
        cert: PathBuf,
        /// Why.
        detail: String,
    },
    /// The certificate is not signed by the configured CA.
    #[error("certificate {cert} is not signed by the fleet CA {ca}")]
    UntrustedIssuer {
        /// The certificate file.
        cert: PathBuf,
        /// The CA file.
        ca: PathBuf,
    },
    /// The certificate's validity ended.
    #[error("certificate {cert} has expired (issue a new one: fleetweft pki issue NODE)")]
    Expired {
        /// The certificate file.
        cert: PathBuf,
    },
    /// The certificate's validity has not begun (or this clock is behind).
    #[error("certificate {cert} is not valid yet (check this machine's clock)")]
    NotYetValid {
        /// The certificate file.
        cert: PathBuf,
    },
    /// The fleet CA refused the certificate for another reason.
    #[error("certificate {cert} is refused by the fleet CA {ca}: {detail}")]
    Refused {
        /// The certificate file.
        cert: PathBuf,
        /// The CA file.
        ca: PathBuf,
        /// What the verifier said.
        detail: String,
    },
}

/// Checks the identity an agent is configured with, as of now.
pub fn check_identity(
    ca: &Path,
    cert: &Path,
    key: &Path,
    node: &str,
) -> Result<NodeIdentity, IdentityError> {
    check_identity_at(ca, cert, key, node, SystemTime::now())
}

/// [`check_identity`] as of `now`. The order is the operator's order of
/// questions: is the pair mine, is it this node, is it our CA's, is it valid.
pub fn check_identity_at(
    ca: &Path,
    cert: &Path,
    key: &Path,
    node: &str,
    now: SystemTime,
) -> Result<NodeIdentity, IdentityError> {
    let roots = load_certs(ca)?;
    let chain = load_certs(cert)?;
    let private = load_key(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let signing = provider
        .key_provider
        .load_private_key(private)
        .map_err(|e| IdentityError::BadKey {
            key: key.to_path_buf(),
            detail: e.to_string(),
        })?;
    let certified = rustls::sign::CertifiedKey::new(chain.clone(), signing);
    match certified.keys_match() {
        Ok(()) => {}
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
            return Err(IdentityError::KeyMismatch {
                key: key.to_path_buf(),
                cert: cert.to_path_buf(),
            })
        }
        Err(e) => {
            return Err(IdentityError::BadKey {
                key: key.to_path_buf(),
                detail: e.to_string(),
            })
        }
    }
    let leaf = &chain[0];
    let in_cert =
        crate::pki::node_id_from_cert(leaf.as_ref()).map_err(|e| IdentityError::NotANodeCert {
            cert: cert.to_path_buf(),
            detail: e.to_string(),
        })?;
    if in_cert != node {
        return Err(IdentityError::NodeMismatch {
            cert: cert.to_path_buf(),
            in_cert,
            configured: node.to_string(),
        });
    }
    verify_chain(ca, cert, &roots, &chain, now, provider)?;
    Ok(NodeIdentity {
        node: in_cert,
        fingerprint: crate::pki::cert_fingerprint(leaf.as_ref()),
    })
}

/// Verifies the chain exactly as the controller's handshake will: the same
/// webpki client verifier over the same roots.
fn verify_chain(
    ca: &Path,
    cert: &Path,
    roots: &[CertificateDer<'static>],
    chain: &[CertificateDer<'static>],
    now: SystemTime,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<(), IdentityError> {
    let refused = |detail: String| IdentityError::Refused {
        cert: cert.to_path_buf(),
        ca: ca.to_path_buf(),
        detail,
    };
    let mut store = RootCertStore::empty();
    for root in roots {
        store
            .add(root.clone())
            .map_err(|e| IdentityError::Load(TlsError::BadRoot(e)))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider)
        .build()
        .map_err(|e| refused(e.to_string()))?;
    let since_epoch = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| refused("the clock is before 1970".into()))?;
    let result = verifier.verify_client_cert(
        &chain[0],
        &chain[1..],
        UnixTime::since_unix_epoch(since_epoch),
    );
    match result {
        Ok(_) => Ok(()),
        Err(rustls::Error::InvalidCertificate(e)) => Err(match e {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                IdentityError::Expired {
                    cert: cert.to_path_buf(),
                }
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                IdentityError::NotYetValid {
                    cert: cert.to_path_buf(),
                }
            }
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                IdentityError::UntrustedIssuer {
                    cert: cert.to_path_buf(),
                    ca: ca.to_path_buf(),
                }
            }
            other => refused(format!("{other:?}")),
        }),
        Err(other) => Err(refused(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{init_fleet, FleetPki, DEFAULT_CONTROLLER_HOST};
    use rcgen::{
        CertificateParams, ExtendedKeyUsagePurpose, KeyPair, SanType, PKCS_ECDSA_P256_SHA256,
    };
    use std::time::Duration;

    fn fleet(temp: &tempfile::TempDir, name: &str) -> FleetPki {
        let nodes = vec!["node-a".to_string(), "node-b".to_string()];
        init_fleet(&temp.path().join(name), &nodes, DEFAULT_CONTROLLER_HOST).expect("init")
    }

    fn check(
        pki: &FleetPki,
        cert: &Path,
        key: &Path,
        node: &str,
    ) -> Result<NodeIdentity, IdentityError> {
        check_identity(&pki.ca_cert(), cert, key, node)
    }

    /// A node-a certificate signed by `pki`'s CA, valid from `from` to `to`.
    fn node_a_cert_valid(pki: &FleetPki, dir: &Path, from: SystemTime, to: SystemTime) -> PathBuf {
        let ca_key = KeyPair::from_pem(&std::fs::read_to_string(pki.ca_key()).expect("ca key"))
            .expect("parse ca key");
        let ca_pem = std::fs::read_to_string(pki.ca_cert()).expect("ca");
        let ca = CertificateParams::from_ca_cert_pem(&ca_pem)
            .expect("ca params")
            .self_signed(&ca_key)
            .expect("issuer");
        // The node's existing key, so only validity differs.
        let key = KeyPair::from_pem(&std::fs::read_to_string(pki.node_key("node-a")).expect("key"))
            .expect("parse key");
        assert_eq!(key.algorithm(), &PKCS_ECDSA_P256_SHA256);
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![SanType::DnsName(
            "node-a.nodes.fleetweft".try_into().expect("san"),
        )];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = from.into();
        params.not_after = to.into();
        let cert = params.signed_by(&key, &ca, &ca_key).expect("sign");
        let path = dir.join("node-a-dated.pem");
        std::fs::write(&path, cert.pem()).expect("write");
        path
    }

    /// The pairs the PKI issues (`pki::issue_node`, forced over an
    /// existing node and for a node it never had) are valid identities.
    #[test]
    fn pairs_the_pki_issues_are_valid_identities() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let (cert, key) = crate::pki::issue_node(&pki.dir, "node-a", true).expect("force");
        check(&pki, &cert, &key, "node-a").expect("the new pair is a valid node-a identity");
        let (cert, key) = crate::pki::issue_node(&pki.dir, "node-c", false).expect("new node");
        check(&pki, &cert, &key, "node-c").expect("node-c");
    }

    #[test]
    fn a_good_identity_passes() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let id = check(
            &pki,
            &pki.node_cert("node-a"),
            &pki.node_key("node-a"),
            "node-a",
        )
        .expect("good identity");
        assert_eq!(id.node, "node-a");
        let der = crate::tls::load_certs(&pki.node_cert("node-a")).expect("cert");
        assert_eq!(
            id.fingerprint,
            crate::pki::cert_fingerprint(der[0].as_ref())
        );
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_naming_both_files() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let err = check(
            &pki,
            &pki.node_cert("node-a"),
            &pki.node_key("node-b"),
            "node-a",
        )
        .expect_err("mismatch");
        assert!(matches!(err, IdentityError::KeyMismatch { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("node-b-key.pem") && text.contains("node-a.pem"),
            "{text}"
        );
    }

    #[test]
    fn another_nodes_certificate_is_refused() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let err = check(
            &pki,
            &pki.node_cert("node-a"),
            &pki.node_key("node-a"),
            "node-b",
        )
        .expect_err("other node");
        match &err {
            IdentityError::NodeMismatch {
                in_cert,
                configured,
                ..
            } => assert_eq!(
                (in_cert.as_str(), configured.as_str()),
                ("node-a", "node-b")
            ),
            other => panic!("expected NodeMismatch, got {other}"),
        }
        assert!(err.to_string().contains("node-a.pem"), "{err}");
    }

    #[test]
    fn a_foreign_cas_certificate_is_refused() {
        let temp = tempfile::tempdir().expect("tempdir");
        let ours = fleet(&temp, "ours");
        let foreign = fleet(&temp, "foreign");
        let err = check(
            &ours,
            &foreign.node_cert("node-a"),
            &foreign.node_key("node-a"),
            "node-a",
        )
        .expect_err("foreign");
        assert!(
            matches!(err, IdentityError::UntrustedIssuer { .. }),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains("foreign") && text.contains("ours"), "{text}");
    }

    #[test]
    fn expired_and_not_yet_valid_certificates_are_refused() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let day = Duration::from_secs(86_400);
        let now = SystemTime::now();
        let expired = node_a_cert_valid(&pki, temp.path(), now - 3 * day, now - day);
        let err = check(&pki, &expired, &pki.node_key("node-a"), "node-a").expect_err("expired");
        assert!(matches!(err, IdentityError::Expired { .. }), "{err}");
        assert!(err.to_string().contains("node-a-dated.pem"), "{err}");
        let early = node_a_cert_valid(&pki, temp.path(), now + day, now + 3 * day);
        let err = check(&pki, &early, &pki.node_key("node-a"), "node-a").expect_err("early");
        assert!(matches!(err, IdentityError::NotYetValid { .. }), "{err}");
        // The same certificate is fine at a time inside its validity.
        check_identity_at(
            &pki.ca_cert(),
            &early,
            &pki.node_key("node-a"),
            "node-a",
            now + 2 * day,
        )
        .expect("valid then");
    }

    #[test]
    fn a_controller_certificate_is_not_a_node_identity() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let err = check(
            &pki,
            &pki.controller_cert(),
            &pki.controller_key(),
            "node-a",
        )
        .expect_err("controller cert");
        assert!(matches!(err, IdentityError::NotANodeCert { .. }), "{err}");
    }

    #[test]
    fn unreadable_files_are_named() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let missing = temp.path().join("nope-key.pem");
        let err = check(&pki, &pki.node_cert("node-a"), &missing, "node-a").expect_err("missing");
        assert!(matches!(err, IdentityError::Load(_)), "{err}");
        assert!(err.to_string().contains("nope-key.pem"), "{err}");
    }
}
