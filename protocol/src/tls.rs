//! rustls configurations for mutual TLS between the controller and agents.
//!
//! Both sides use an explicit ring crypto provider and TLS 1.3 only (QUIC
//! requires 1.3 anyway). Nothing here touches rustls's process-wide default
//! provider, so another library in the same process cannot change what we
//! accept. The fleet CA is the only trust root: the controller requires a
//! client certificate signed by it, agents require the controller's
//! certificate to be signed by it and to name the host they dialled.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use thiserror::Error;

/// ALPN protocol id; a peer speaking anything else fails the handshake.
pub const ALPN: &[u8] = b"fleetweft/1";

/// DNS-name suffix that marks a SAN as a node id: `<node>.nodes.fleetweft`.
pub const NODE_SAN_SUFFIX: &str = ".nodes.fleetweft";

/// Longest node id accepted: one DNS label.
pub const NODE_ID_LEN_MAX: usize = 63;

/// Largest PEM file read. Certificates and keys are a few KiB; the bound
/// keeps a wrong path (a log, a disk image) from being slurped into memory.
pub const PEM_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// Why a TLS configuration could not be built.
#[derive(Debug, Error)]
pub enum TlsError {
    /// A PEM file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A PEM file is larger than [`PEM_FILE_BYTES_MAX`].
    #[error("{path} is larger than {max} bytes; not a certificate or key file")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// [`PEM_FILE_BYTES_MAX`].
        max: u64,
    },
    /// A PEM file is malformed.
    #[error("{path} is not valid PEM: {source}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: std::io::Error,
    },
    /// A certificate file holds no certificate.
    #[error("{0} contains no certificate")]
    NoCertificate(PathBuf),
    /// A key file holds no private key.
    #[error("{0} contains no private key")]
    NoPrivateKey(PathBuf),
    /// A CA certificate cannot be used as a trust root.
    #[error("CA certificate is not a usable trust root: {0}")]
    BadRoot(rustls::Error),
    /// The certificate verifier could not be built.
    #[error("cannot build certificate verifier: {0}")]
    Verifier(String),
    /// rustls refused the configuration (e.g. key does not match certificate).
    #[error("TLS configuration refused: {0}")]
    Config(#[from] rustls::Error),
}

/// Upper bound on revoked certificate fingerprints held in memory: far
/// above any fleet's churn, low enough that a runaway script cannot grow it
/// without bound.
pub const DENY_LIST_ENTRIES_MAX: usize = 65_536;

/// SHA-256 fingerprints of revoked certificates, shared between the
/// controller core (which adds them as revocations become durable) and the
/// QUIC handshake (which refuses them).
#[derive(Clone, Debug, Default)]
pub struct DenyList(Arc<RwLock<HashSet<[u8; 32]>>>);

impl DenyList {
    /// Adds a fingerprint; false if the list is full (it is not added).
    pub fn insert(&self, fingerprint: [u8; 32]) -> bool {
        // A poisoned lock only means a writer panicked mid-insert; the set
        // itself is still a set of fingerprints.
        let mut set = self.0.write().unwrap_or_else(|e| e.into_inner());
        if set.len() >= DENY_LIST_ENTRIES_MAX && !set.contains(&fingerprint) {
            return false;
        }
        set.insert(fingerprint);
        true
    }

    /// Whether the certificate with this fingerprint is revoked.
    pub fn contains(&self, fingerprint: &[u8; 32]) -> bool {
        let set = self.0.read().unwrap_or_else(|e| e.into_inner());
        set.contains(fingerprint)
    }

    /// How many fingerprints are denied.
    pub fn len(&self) -> usize {
        self.0.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing is denied.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The controller's TLS identity: its certificate chain and key, the
/// fleet CA that agents' certificates must chain to, and the revoked
/// certificates the handshake refuses.
#[derive(Debug)]
pub struct ServerIdentity {
    roots: Vec<CertificateDer<'static>>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    deny: DenyList,
}

/// An agent's TLS identity: its node certificate chain and key, and the fleet
/// CA that the controller's certificate must chain to.
#[derive(Debug)]
pub struct ClientIdentity {
    roots: Vec<CertificateDer<'static>>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl ServerIdentity {
    /// An identity from in-memory DER: the fleet CA, the controller's chain
    /// (leaf first) and its private key.
    pub fn new(
        ca: CertificateDer<'static>,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Self {
        ServerIdentity {
            roots: vec![ca],
            chain,
            key,
            deny: DenyList::default(),
        }
    }

    /// The same identity, refusing every certificate in `deny` at the
    /// handshake (checked on each handshake, so later additions count).
    pub fn with_deny_list(mut self, deny: DenyList) -> Self {
        self.deny = deny;
        self
    }

    /// Loads `ca.pem`, `controller.pem` and `controller-key.pem` (or any
    /// paths in the same roles). Errors name the offending file.
    pub fn from_pem_files(ca: &Path, cert: &Path, key: &Path) -> Result<Self, TlsError> {
        Ok(ServerIdentity {
            roots: load_certs(ca)?,
            chain: load_certs(cert)?,
            key: load_key(key)?,
            deny: DenyList::default(),
        })
    }
}

impl ClientIdentity {
    /// An identity from in-memory DER: the fleet CA, the node's chain (leaf
    /// first) and its private key.
    pub fn new(
        ca: CertificateDer<'static>,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Self {
        ClientIdentity {
            roots: vec![ca],
            chain,
            key,
        }
    }

    /// Loads `ca.pem`, `nodes/<node>.pem` and `nodes/<node>-key.pem` (or any
    /// paths in the same roles). Errors name the offending file.
    pub fn from_pem_files(ca: &Path, cert: &Path, key: &Path) -> Result<Self, TlsError> {
        Ok(ClientIdentity {
            roots: load_certs(ca)?,
            chain: load_certs(cert)?,
            key: load_key(key)?,
        })
    }
}

/// The crypto provider for every config built here: explicit, never the
/// process default.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn root_store(roots: &[CertificateDer<'static>]) -> Result<Arc<RootCertStore>, TlsError> {
    let mut store = RootCertStore::empty();
    for root in roots {
        store.add(root.clone()).map_err(TlsError::BadRoot)?;
    }
    Ok(Arc::new(store))
}

/// The controller's rustls config: TLS 1.3, ALPN [`ALPN`], and a client
/// certificate signed by the fleet CA is required (no anonymous agents).
pub fn server_config(identity: &ServerIdentity) -> Result<rustls::ServerConfig, TlsError> {
    let provider = provider();
    let inner =
        WebPkiClientVerifier::builder_with_provider(root_store(&identity.roots)?, provider.clone())
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let verifier = Arc::new(DenyingVerifier {
        inner,
        deny: identity.deny.clone(),
    });
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// The fleet CA's client verifier, refusing revoked certificates first.
#[derive(Debug)]
struct DenyingVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    deny: DenyList,
}

impl ClientCertVerifier for DenyingVerifier {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if self
            .deny
            .contains(&crate::pki::cert_fingerprint(end_entity.as_ref()))
        {
            tracing::warn!(
                fingerprint = %hex::encode(crate::pki::cert_fingerprint(end_entity.as_ref())),
                "refused a revoked client certificate at the handshake"
            );
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Revoked,
            ));
        }
        self.inner
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }
}

/// An agent's rustls config: TLS 1.3, ALPN [`ALPN`], the controller must
/// present a certificate from the fleet CA for the dialled name, and the
/// agent presents its node certificate.
pub fn client_config(identity: &ClientIdentity) -> Result<rustls::ClientConfig, TlsError> {
    let provider = provider();
    let verifier =
        WebPkiServerVerifier::builder_with_provider(root_store(&identity.roots)?, provider.clone())
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_webpki_verifier(verifier)
        .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// Reads a whole PEM file, refusing files over [`PEM_FILE_BYTES_MAX`].
fn read_pem_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    let read_err = |source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(read_err)?;
    let mut bytes = Vec::new();
    // Read one byte past the limit so an oversized file is detected without
    // trusting metadata (which may lie for pipes and special files).
    file.take(PEM_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > PEM_FILE_BYTES_MAX {
        return Err(TlsError::TooLarge {
            path: path.to_path_buf(),
            max: PEM_FILE_BYTES_MAX,
        });
    }
    Ok(bytes)
}

/// Loads every certificate in a PEM file (at least one).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_pem_file(path)?;
    let certs = rustls_pemfile::certs(&mut BufReader::new(bytes.as_slice()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(path.to_path_buf()));
    }
    Ok(certs)
}

/// Loads the first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_pem_file(path)?;
    rustls_pemfile::private_key(&mut BufReader::new(bytes.as_slice()))
        .map_err(|source| TlsError::Pem {
            path: path.to_path_buf(),
            source,
        })?
        .ok_or_else(|| TlsError::NoPrivateKey(path.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deny_list_refuses_a_revoked_certificate_and_only_it() {
        let temp = tempfile::tempdir().expect("tempdir");
        let nodes = vec!["node-a".to_string(), "node-b".to_string()];
        let pki =
            crate::pki::init_fleet(&temp.path().join("pki"), &nodes, "localhost").expect("pki");
        let roots = root_store(&load_certs(&pki.ca_cert()).expect("ca")).expect("roots");
        let deny = DenyList::default();
        let verifier = DenyingVerifier {
            inner: WebPkiClientVerifier::builder_with_provider(roots, provider())
                .build()
                .expect("verifier"),
            deny: deny.clone(),
        };
        let a = load_certs(&pki.node_cert("node-a")).expect("a").remove(0);
        let b = load_certs(&pki.node_cert("node-b")).expect("b").remove(0);
        let now = UnixTime::now();
        verifier
            .verify_client_cert(&a, &[], now)
            .expect("a before revocation");
        assert!(deny.insert(crate::pki::cert_fingerprint(a.as_ref())));
        let err = verifier
            .verify_client_cert(&a, &[], now)
            .expect_err("revoked");
        assert_eq!(
            err,
            rustls::Error::InvalidCertificate(rustls::CertificateError::Revoked)
        );
        verifier
            .verify_client_cert(&b, &[], now)
            .expect("b untouched");
        assert_eq!(deny.len(), 1);
    }

    #[test]
    fn pem_errors_name_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing.pem");
        let err = load_certs(&missing).expect_err("missing file");
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not pem").expect("write");
        let err = load_certs(&empty).expect_err("no certs");
        assert!(err.to_string().contains("empty.pem"), "{err}");
        let err = load_key(&empty).expect_err("no key");
        assert!(err.to_string().contains("empty.pem"), "{err}");
    }
}
