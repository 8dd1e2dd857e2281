//! The fleet's PKI: a fleet CA, the controller's server certificate, one
//! client certificate per node, and the operator token.
//!
//! # Layout of a PKI directory
//!
//! ```text
//! DIR/ca.pem                  fleet CA certificate (public)
//! DIR/ca-key.pem              fleet CA private key (0600)
//! DIR/controller.pem          controller server certificate (public)
//! DIR/controller-key.pem      controller private key (0600)
//! DIR/nodes/<node>.pem        node client certificate (public)
//! DIR/nodes/<node>-key.pem    node private key (0600)
//! DIR/operator-token          64 hex characters and a newline (0600)
//! DIR/config-key              64 hex characters and a newline (0600): the
//!                             key configuration secrets are sealed with
//! ```
//!
//! # Node identity
//!
//! A node id is `[a-z0-9-]{1,63}` (see [`validate_node_id`]). A node's
//! certificate carries exactly one SAN DNS name `<node>.nodes.fleetweft`
//! ([`NODE_SAN_SUFFIX`]); after the TLS handshake has verified the chain, the
//! controller reads the node id from that SAN with [`node_id_from_cert`],
//! never from a message, so a node cannot speak for another node.
//!
//! All keys are ECDSA P-256 with SHA-256: rustls with the ring provider
//! verifies it for TLS 1.3 server and client authentication.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rand_core::{OsRng, RngCore};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType, PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::extensions::GeneralName;

/// Suffix of the SAN DNS name that carries a node id: `<node>.nodes.fleetweft`.
pub const NODE_SAN_SUFFIX: &str = ".nodes.fleetweft";
/// Longest node id: one DNS label.
pub const NODE_ID_LEN_MAX: usize = 63;
/// Longest controller host name: a DNS name.
pub const CONTROLLER_HOST_LEN_MAX: usize = 253;
/// The controller host used when the operator names none.
pub const DEFAULT_CONTROLLER_HOST: &str = "localhost";
/// Largest PEM or token file we read; real ones are a few KiB.
pub const PEM_FILE_BYTES_MAX: u64 = 1024 * 1024;
/// Random bytes in the operator token (hex-encoded on disk).
pub const OPERATOR_TOKEN_BYTES: usize = 32;

/// The configuration key's file name in the PKI directory.
pub const CONFIG_KEY_FILE: &str = "config-key";

/// Lifetime of the fleet CA certificate, in days (about ten years): the CA
/// outlives every certificate it signs, and replacing it means re-issuing
/// the whole fleet, so it is long.
pub const CA_CERT_LIFETIME_DAYS: u32 = 3650;
/// Lifetime of the controller's server certificate, in days (about two
/// years): re-issued with the CA key when it nears its end.
pub const CONTROLLER_CERT_LIFETIME_DAYS: u32 = 730;
/// Lifetime of a node's client certificate, in days (one year): a copied
/// node key stops working on its own within a year, and `fleetweft pki
/// issue NODE` replaces it before then.
pub const NODE_CERT_LIFETIME_DAYS: u32 = 365;
/// How far back a new certificate's `notBefore` is set, in seconds: a node
/// whose clock is a little behind the issuer's still accepts it.
pub const CERT_BACKDATE_S: u64 = 300;
const SECONDS_PER_DAY: u64 = 86_400;

/// Mode of private keys and the operator token.
const SECRET_FILE_MODE: u32 = 0o600;
/// Mode of certificates.
const PUBLIC_FILE_MODE: u32 = 0o644;
/// Mode of the PKI directory and its `nodes` directory.
const DIR_MODE: u32 = 0o700;

/// Why a PKI operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `init_fleet` refuses to overwrite an existing PKI.
    #[error("{0} already exists; refusing to overwrite an existing PKI directory")]
    AlreadyExists(PathBuf),
    /// The PKI directory path has no usable final component.
    #[error("{0}: not a usable directory path")]
    BadDirectory(PathBuf),
    /// A node id does not match `[a-z0-9-]{{1,63}}`.
    #[error("invalid node id {0:?}: expected 1 to 63 of a-z, 0-9, '-'")]
    InvalidNodeId(String),
    /// The same node id was given twice.
    #[error("node id {0:?} given twice")]
    DuplicateNode(String),
    /// `init_fleet` was given no nodes.
    #[error("no nodes given; a fleet needs at least one node")]
    NoNodes,
    /// The controller host is not a DNS name or IP address.
    #[error("invalid controller host {0:?}: expected a DNS name or IP address")]
    InvalidControllerHost(String),
    /// rcgen failed to generate a key or certificate.
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    /// A certificate could not be parsed.
    #[error("certificate does not parse: {0}")]
    BadCertificate(String),
    /// A certificate carries no `<node>.nodes.fleetweft` SAN.
    #[error("certificate carries no node id (no SAN DNS name ending in {NODE_SAN_SUFFIX})")]
    NoNodeId,
    /// A certificate carries more than one node SAN.
    #[error("certificate carries {0} node ids; exactly one is allowed")]
    AmbiguousNodeId(usize),
    /// A PEM file holds no certificate.
    #[error("{0}: no certificate found")]
    NoCertificate(PathBuf),
    /// A PEM file holds no private key.
    #[error("{0}: no private key found")]
    NoPrivateKey(PathBuf),
    /// A PEM or token file is larger than any real one.
    #[error("{path}: {len} bytes, larger than the {max}-byte limit")]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The operator token file does not hold 64 hex characters.
    #[error("{0}: not an operator token (expected 64 hex characters)")]
    BadToken(PathBuf),
    /// `issue_node` refuses to overwrite a node's files without `force`.
    #[error("{0} already exists; refusing to overwrite it (pass --force to replace the node's certificate and key)")]
    NodeFilesExist(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> PkiError + '_ {
    move |source| PkiError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Checks that `id` is `[a-z0-9-]{1,63}`: one DNS label, so
/// `<id>.nodes.fleetweft` is a valid SAN and ids compare byte for byte.
pub fn validate_node_id(id: &str) -> Result<(), PkiError> {
    let ok = !id.is_empty()
        && id.len() <= NODE_ID_LEN_MAX
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(PkiError::InvalidNodeId(id.to_string()))
    }
}

/// The SAN DNS name that carries `node`'s identity.
pub fn node_san(node: &str) -> String {
    format!("{node}{NODE_SAN_SUFFIX}")
}

/// Where the files of a PKI directory live (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetPki {
    /// The PKI directory.
    pub dir: PathBuf,
    /// The node ids, in the order given to [`init_fleet`].
    pub nodes: Vec<String>,
}

impl FleetPki {
    /// The fleet CA certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
    /// The fleet CA private key.
    pub fn ca_key(&self) -> PathBuf {
        self.dir.join("ca-key.pem")
    }
    /// The controller's server certificate.
    pub fn controller_cert(&self) -> PathBuf {
        self.dir.join("controller.pem")
    }
    /// The controller's private key.
    pub fn controller_key(&self) -> PathBuf {
        self.dir.join("controller-key.pem")
    }
    /// `node`'s client certificate.
    pub fn node_cert(&self, node: &str) -> PathBuf {
        self.dir.join("nodes").join(format!("{node}.pem"))
    }
    /// `node`'s private key.
    pub fn node_key(&self, node: &str) -> PathBuf {
        self.dir.join("nodes").join(format!("{node}-key.pem"))
    }
    /// The operator token file.
    pub fn operator_token(&self) -> PathBuf {
        self.dir.join("operator-token")
    }
    /// The configuration key file (issue #24 item 1): the key secrets are
    /// sealed with in the controller's log.
    pub fn config_key(&self) -> PathBuf {
        self.dir.join(CONFIG_KEY_FILE)
    }
}

/// Creates a new fleet PKI in `dir` (see the module docs for the layout).
///
/// `dir` must not exist. Everything is written into a temporary directory
/// next to it and renamed into place at the end, so a failure leaves either
/// no `dir` or a complete one, never a half-written PKI.
pub fn init_fleet(
    dir: &Path,
    nodes: &[String],
    controller_host: &str,
) -> Result<FleetPki, PkiError> {
    if nodes.is_empty() {
        return Err(PkiError::NoNodes);
    }
    let mut seen = BTreeSet::new();
    for node in nodes {
        validate_node_id(node)?;
        if !seen.insert(node.as_str()) {
            return Err(PkiError::DuplicateNode(node.clone()));
        }
    }
    let controller_san = controller_san(controller_host)?;
    let name = dir
        .file_name()
        .ok_or_else(|| PkiError::BadDirectory(dir.to_path_buf()))?;
    if dir.symlink_metadata().is_ok() {
        return Err(PkiError::AlreadyExists(dir.to_path_buf()));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(io_err(&parent))?;

    let mut suffix = [0u8; 8];
    OsRng.fill_bytes(&mut suffix);
    let tmp = parent.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        hex::encode(suffix)
    ));
    fs::DirBuilder::new()
        .mode(DIR_MODE)
        .create(&tmp)
        .map_err(io_err(&tmp))?;
    let staged = FleetPki {
        dir: tmp.clone(),
        nodes: nodes.to_vec(),
    };
    let result = write_pki(&staged, controller_san).and_then(|()| {
        // Checked again: someone may have created `dir` while we generated,
        // and rename(2) would silently replace an empty directory.
        if dir.symlink_metadata().is_ok() {
            return Err(PkiError::AlreadyExists(dir.to_path_buf()));
        }
        fs::rename(&tmp, dir).map_err(io_err(dir))?;
        // Make the rename itself durable.
        File::open(&parent)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&parent))
    });
    if let Err(err) = result {
        // Best effort: the error we report matters more than cleanup failing.
        let _ = fs::remove_dir_all(&tmp);
        return Err(err);
    }
    Ok(FleetPki {
        dir: dir.to_path_buf(),
        nodes: nodes.to_vec(),
    })
}

/// The controller certificate's SAN for `host`: an IP SAN for an address,
/// else a DNS SAN.
fn controller_san(host: &str) -> Result<SanType, PkiError> {
    let invalid = || PkiError::InvalidControllerHost(host.to_string());
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    let ok = !host.is_empty()
        && host.len() <= CONTROLLER_HOST_LEN_MAX
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !ok {
        return Err(invalid());
    }
    let name = host
        .to_ascii_lowercase()
        .try_into()
        .map_err(|_| invalid())?;
    Ok(SanType::DnsName(name))
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "Fleetweft");
    dn.push(DnType::CommonName, common_name);
    dn
}

fn write_pki(pki: &FleetPki, controller_san: SanType) -> Result<(), PkiError> {
    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = distinguished_name("Fleetweft fleet CA");
    set_validity(&mut ca_params, CA_CERT_LIFETIME_DAYS);
    // Path length 0: the CA signs leaves only, never another CA.
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key)?;
    write_file(&pki.ca_cert(), ca.pem().as_bytes(), PUBLIC_FILE_MODE)?;
    write_file(
        &pki.ca_key(),
        ca_key.serialize_pem().as_bytes(),
        SECRET_FILE_MODE,
    )?;

    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name("Fleetweft controller");
    set_validity(&mut params, CONTROLLER_CERT_LIFETIME_DAYS);
    let mut sans = vec![controller_san];
    let loopback = SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST));
    if !sans.contains(&loopback) {
        sans.push(loopback);
    }
    params.subject_alt_names = sans;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Server auth only: the controller's certificate cannot pose as a node.
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca, &ca_key)?;
    write_file(
        &pki.controller_cert(),
        cert.pem().as_bytes(),
        PUBLIC_FILE_MODE,
    )?;
    write_file(
        &pki.controller_key(),
        key.serialize_pem().as_bytes(),
        SECRET_FILE_MODE,
    )?;

    let nodes_dir = pki.dir.join("nodes");
    fs::DirBuilder::new()
        .mode(DIR_MODE)
        .create(&nodes_dir)
        .map_err(io_err(&nodes_dir))?;
    for node in &pki.nodes {
        write_node(pki, node, &ca, &ca_key)?;
    }

    let mut token = [0u8; OPERATOR_TOKEN_BYTES];
    OsRng.fill_bytes(&mut token);
    let line = format!("{}\n", hex::encode(token));
    write_file(&pki.operator_token(), line.as_bytes(), SECRET_FILE_MODE)?;
    let mut config_key = [0u8; 32];
    OsRng.fill_bytes(&mut config_key);
    let line = format!("{}\n", hex::encode(config_key));
    write_file(&pki.config_key(), line.as_bytes(), SECRET_FILE_MODE)?;

    let dir = &pki.dir;
    File::open(&nodes_dir)
        .and_then(|d| d.sync_all())
        .and_then(|()| File::open(dir))
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Sets a certificate's validity: from [`CERT_BACKDATE_S`] ago for
/// `lifetime_days` days, explicit instead of rcgen's defaults.
fn set_validity(params: &mut CertificateParams, lifetime_days: u32) {
    let now = std::time::SystemTime::now();
    let backdate = std::time::Duration::from_secs(CERT_BACKDATE_S);
    let lifetime = std::time::Duration::from_secs(u64::from(lifetime_days) * SECONDS_PER_DAY);
    params.not_before = (now - backdate).into();
    params.not_after = (now + lifetime).into();
}

/// Generates `node`'s key and client certificate, signed by `ca`, and
/// writes both (new files only).
fn write_node(
    pki: &FleetPki,
    node: &str,
    ca: &rcgen::Certificate,
    ca_key: &KeyPair,
) -> Result<(), PkiError> {
    write_node_with(pki, node, ca, ca_key, Sync::EachFile)
}

/// Whether the files written are synced one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sync {
    /// Each file synced before the next is written.
    EachFile,
    /// Left to the caller (one directory sync for a whole batch).
    Batch,
}

fn write_node_with(
    pki: &FleetPki,
    node: &str,
    ca: &rcgen::Certificate,
    ca_key: &KeyPair,
    sync: Sync,
) -> Result<(), PkiError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(node);
    set_validity(&mut params, NODE_CERT_LIFETIME_DAYS);
    let san = node_san(node)
        .try_into()
        .map_err(|_| PkiError::InvalidNodeId(node.to_string()))?;
    params.subject_alt_names = vec![SanType::DnsName(san)];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Client auth only: a node's certificate cannot pose as the controller.
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, ca, ca_key)?;
    write_file_with(
        &pki.node_cert(node),
        cert.pem().as_bytes(),
        PUBLIC_FILE_MODE,
        sync,
    )?;
    write_file_with(
        &pki.node_key(node),
        key.serialize_pem().as_bytes(),
        SECRET_FILE_MODE,
        sync,
    )
}

/// The existing CA of `dir` as an issuer: rebuilt from `ca.pem` with the
/// CA's own key (same subject, same key), so what it signs chains to the
/// existing `ca.pem`.
fn load_issuer(pki: &FleetPki) -> Result<(rcgen::Certificate, KeyPair), PkiError> {
    let ca_pem = String::from_utf8(read_small(&pki.ca_cert())?)
        .map_err(|_| PkiError::NoCertificate(pki.ca_cert()))?;
    let ca_key_pem = String::from_utf8(read_small(&pki.ca_key())?)
        .map_err(|_| PkiError::NoPrivateKey(pki.ca_key()))?;
    let ca_key = KeyPair::from_pem(&ca_key_pem)
        .map_err(|e| PkiError::BadCertificate(format!("{}: {e}", pki.ca_key().display())))?;
    let ca = CertificateParams::from_ca_cert_pem(&ca_pem)
        .and_then(|params| params.self_signed(&ca_key))
        .map_err(|e| PkiError::BadCertificate(format!("{}: {e}", pki.ca_cert().display())))?;
    Ok((ca, ca_key))
}

/// Issues a certificate and key for each of `nodes` from the existing CA
/// in `dir`, for a PKI that is a cache (the fleet simulator's): the CA is
/// read once and the files are not synced one by one, only the `nodes`
/// directory at the end. [`issue_node`] syncs every file (two `fsync`s
/// per node: 90,000 nodes took hours on a busy disk, this takes seconds).
/// A power cut in between can leave a pair empty or torn: that node's
/// handshake then fails and the cache directory is to be removed. Nodes
/// whose files exist are refused ([`PkiError::NodeFilesExist`]).
pub fn issue_nodes_unsynced(dir: &Path, nodes: &[String]) -> Result<(), PkiError> {
    let pki = FleetPki {
        dir: dir.to_path_buf(),
        nodes: nodes.to_vec(),
    };
    for node in nodes {
        validate_node_id(node)?;
        for path in [pki.node_cert(node), pki.node_key(node)] {
            if path.symlink_metadata().is_ok() {
                return Err(PkiError::NodeFilesExist(path));
            }
        }
    }
    let (ca, ca_key) = load_issuer(&pki)?;
    let nodes_dir = dir.join("nodes");
    if !nodes_dir.is_dir() {
        fs::DirBuilder::new()
            .mode(DIR_MODE)
            .create(&nodes_dir)
            .map_err(io_err(&nodes_dir))?;
    }
    for node in nodes {
        write_node_with(&pki, node, &ca, &ca_key, Sync::Batch)?;
    }
    File::open(&nodes_dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(&nodes_dir))
}

/// Issues one new certificate and key for `node` from the existing CA in
/// `dir` (`ca.pem`, `ca-key.pem`), without touching anything else of the
/// PKI. Refuses to replace the node's existing files unless `force`.
/// Returns the certificate and key paths.
pub fn issue_node(dir: &Path, node: &str, force: bool) -> Result<(PathBuf, PathBuf), PkiError> {
    validate_node_id(node)?;
    let pki = FleetPki {
        dir: dir.to_path_buf(),
        nodes: vec![node.to_string()],
    };
    let (cert_path, key_path) = (pki.node_cert(node), pki.node_key(node));
    for path in [&cert_path, &key_path] {
        if path.symlink_metadata().is_ok() && !force {
            return Err(PkiError::NodeFilesExist(path.clone()));
        }
    }
    let (ca, ca_key) = load_issuer(&pki)?;
    let nodes_dir = dir.join("nodes");
    if !nodes_dir.is_dir() {
        fs::DirBuilder::new()
            .mode(DIR_MODE)
            .create(&nodes_dir)
            .map_err(io_err(&nodes_dir))?;
    }
    // Replacing: the old files go only once the new pair is generated.
    let tmp = FleetPki {
        dir: nodes_dir.join(format!(".issue-{node}")),
        nodes: vec![node.to_string()],
    };
    let _ = fs::remove_dir_all(&tmp.dir);
    fs::DirBuilder::new()
        .mode(DIR_MODE)
        .recursive(true)
        .create(tmp.dir.join("nodes"))
        .map_err(io_err(&tmp.dir))?;
    let result = write_node(&tmp, node, &ca, &ca_key).and_then(|()| {
        fs::rename(tmp.node_key(node), &key_path).map_err(io_err(&key_path))?;
        fs::rename(tmp.node_cert(node), &cert_path).map_err(io_err(&cert_path))?;
        File::open(&nodes_dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&nodes_dir))
    });
    let _ = fs::remove_dir_all(&tmp.dir);
    result.map(|()| (cert_path, key_path))
}

/// The SHA-256 fingerprint of a DER certificate: what the controller's
/// deny list holds and what `fleetweft node revoke-cert` records.
pub fn cert_fingerprint(der: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(der).into()
}

/// Writes a new file with `mode` set at creation, so a secret is never
/// readable by others even for an instant, and syncs it.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), PkiError> {
    write_file_with(path, bytes, mode, Sync::EachFile)
}

fn write_file_with(path: &Path, bytes: &[u8], mode: u32, sync: Sync) -> Result<(), PkiError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io_err(path))?;
    file.write_all(bytes).map_err(io_err(path))?;
    match sync {
        Sync::EachFile => file.sync_all().map_err(io_err(path)),
        Sync::Batch => Ok(()),
    }
}

/// Reads a small file, refusing anything over [`PEM_FILE_BYTES_MAX`].
fn read_small(path: &Path) -> Result<Vec<u8>, PkiError> {
    let file = File::open(path).map_err(io_err(path))?;
    let mut bytes = Vec::new();
    // Read one byte past the limit to tell "at the limit" from "over it".
    file.take(PEM_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err(path))?;
    let len = bytes.len() as u64;
    if len > PEM_FILE_BYTES_MAX {
        return Err(PkiError::FileTooLarge {
            path: path.to_path_buf(),
            len,
            max: PEM_FILE_BYTES_MAX,
        });
    }
    Ok(bytes)
}

/// The node id carried by a certificate: the one SAN DNS name of the form
/// `<node>.nodes.fleetweft`, with `<node>` a valid node id.
///
/// This reads the identity only; it does not verify the chain. Call it on a
/// peer certificate that the TLS handshake has already verified.
pub fn node_id_from_cert(der: &[u8]) -> Result<String, PkiError> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| PkiError::BadCertificate(e.to_string()))?;
    if !rest.is_empty() {
        return Err(PkiError::BadCertificate(format!(
            "{} trailing bytes after the certificate",
            rest.len()
        )));
    }
    let san = cert
        .subject_alternative_name()
        .map_err(|e| PkiError::BadCertificate(e.to_string()))?;
    let mut ids = Vec::new();
    if let Some(san) = san {
        for name in &san.value.general_names {
            if let GeneralName::DNSName(dns) = name {
                if let Some(node) = dns.strip_suffix(NODE_SAN_SUFFIX) {
                    validate_node_id(node)?;
                    ids.push(node.to_string());
                }
            }
        }
    }
    match ids.len() {
        0 => Err(PkiError::NoNodeId),
        1 => Ok(ids.remove(0)),
        n => Err(PkiError::AmbiguousNodeId(n)),
    }
}

/// All certificates in a PEM file, in order; an error if there are none.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, PkiError> {
    let bytes = read_small(path)?;
    let certs = rustls_pemfile::certs(&mut bytes.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_err(path))?;
    if certs.is_empty() {
        return Err(PkiError::NoCertificate(path.to_path_buf()));
    }
    Ok(certs)
}

/// The first private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, PkiError> {
    let bytes = read_small(path)?;
    rustls_pemfile::private_key(&mut bytes.as_slice())
        .map_err(io_err(path))?
        .ok_or_else(|| PkiError::NoPrivateKey(path.to_path_buf()))
}

/// The operator token: 64 lower-case hex characters, surrounding whitespace
/// ignored.
pub fn load_operator_token(path: &Path) -> Result<String, PkiError> {
    let bytes = read_small(path)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| PkiError::BadToken(path.to_path_buf()))?;
    let token = text.trim();
    let ok = token.len() == 2 * OPERATOR_TOKEN_BYTES
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(token.to_string())
    } else {
        Err(PkiError::BadToken(path.to_path_buf()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    use rustls::client::danger::ServerCertVerifier;
    use rustls::client::WebPkiServerVerifier;
    use rustls::pki_types::{ServerName, UnixTime};
    use rustls::server::danger::ClientCertVerifier;
    use rustls::server::WebPkiClientVerifier;
    use rustls::RootCertStore;

    fn nodes(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn fleet(temp: &tempfile::TempDir, name: &str) -> FleetPki {
        init_fleet(
            &temp.path().join(name),
            &nodes(&["node-a", "node-b"]),
            DEFAULT_CONTROLLER_HOST,
        )
        .expect("init fleet")
    }

    fn roots(pki: &FleetPki) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        for cert in load_certs(&pki.ca_cert()).expect("ca") {
            roots.add(cert).expect("add root");
        }
        Arc::new(roots)
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    fn client_verifier(pki: &FleetPki) -> Arc<dyn ClientCertVerifier> {
        WebPkiClientVerifier::builder_with_provider(roots(pki), provider())
            .build()
            .expect("client verifier")
    }

    fn server_verifier(pki: &FleetPki) -> Arc<WebPkiServerVerifier> {
        WebPkiServerVerifier::builder_with_provider(roots(pki), provider())
            .build()
            .expect("server verifier")
    }

    fn leaf(path: &Path) -> CertificateDer<'static> {
        load_certs(path).expect("certs").remove(0)
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).expect("metadata").permissions().mode() & 0o777
    }

    #[test]
    fn layout_and_modes() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        for public in [
            pki.ca_cert(),
            pki.controller_cert(),
            pki.node_cert("node-a"),
        ] {
            assert_eq!(mode(&public), PUBLIC_FILE_MODE, "{}", public.display());
        }
        for secret in [
            pki.ca_key(),
            pki.controller_key(),
            pki.node_key("node-a"),
            pki.node_key("node-b"),
            pki.operator_token(),
        ] {
            assert_eq!(mode(&secret), SECRET_FILE_MODE, "{}", secret.display());
        }
        load_key(&pki.node_key("node-b")).expect("node key");
        load_key(&pki.controller_key()).expect("controller key");
        let token = load_operator_token(&pki.operator_token()).expect("token");
        assert_eq!(token.len(), 64);
        // No temporary directory is left behind.
        let entries: Vec<_> = fs::read_dir(temp.path()).expect("read").collect();
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn node_ids_come_from_certificates() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        for node in ["node-a", "node-b"] {
            let cert = leaf(&pki.node_cert(node));
            assert_eq!(node_id_from_cert(&cert).expect("node id"), node);
        }
        let controller = leaf(&pki.controller_cert());
        assert!(matches!(
            node_id_from_cert(&controller),
            Err(PkiError::NoNodeId)
        ));
        assert!(matches!(
            node_id_from_cert(b"not a certificate"),
            Err(PkiError::BadCertificate(_))
        ));
    }

    #[test]
    fn rustls_accepts_fleet_certificates() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let now = UnixTime::now();
        client_verifier(&pki)
            .verify_client_cert(&leaf(&pki.node_cert("node-a")), &[], now)
            .expect("node cert verifies as a client");
        let server = server_verifier(&pki);
        let controller = leaf(&pki.controller_cert());
        for name in ["localhost", "127.0.0.1"] {
            let name = ServerName::try_from(name).expect("name");
            server
                .verify_server_cert(&controller, &[], &name, &[], now)
                .expect("controller cert verifies as a server");
        }
    }

    #[test]
    fn roles_do_not_swap() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let now = UnixTime::now();
        // The controller's certificate cannot act as a node...
        assert!(client_verifier(&pki)
            .verify_client_cert(&leaf(&pki.controller_cert()), &[], now)
            .is_err());
        // ...and a node's certificate cannot act as the controller.
        let name = ServerName::try_from("node-a.nodes.fleetweft").expect("name");
        assert!(server_verifier(&pki)
            .verify_server_cert(&leaf(&pki.node_cert("node-a")), &[], &name, &[], now)
            .is_err());
    }

    #[test]
    fn foreign_certificates_are_refused() {
        let temp = tempfile::tempdir().expect("tempdir");
        let ours = fleet(&temp, "ours");
        let foreign = fleet(&temp, "foreign");
        let now = UnixTime::now();
        assert!(client_verifier(&ours)
            .verify_client_cert(&leaf(&foreign.node_cert("node-a")), &[], now)
            .is_err());
        let name = ServerName::try_from("localhost").expect("name");
        assert!(server_verifier(&ours)
            .verify_server_cert(&leaf(&foreign.controller_cert()), &[], &name, &[], now)
            .is_err());
    }

    #[test]
    fn controller_host_becomes_a_san() {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path().join("pki");
        let pki = init_fleet(&dir, &nodes(&["n1"]), "ctl.example.org").expect("init");
        let controller = leaf(&pki.controller_cert());
        let server = server_verifier(&pki);
        let now = UnixTime::now();
        for ok in ["ctl.example.org", "127.0.0.1"] {
            let name = ServerName::try_from(ok).expect("name");
            server
                .verify_server_cert(&controller, &[], &name, &[], now)
                .expect("verifies");
        }
        let other = ServerName::try_from("localhost").expect("name");
        assert!(server
            .verify_server_cert(&controller, &[], &other, &[], now)
            .is_err());
    }

    #[test]
    fn refuses_to_overwrite() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let before = fs::read(pki.ca_cert()).expect("read");
        let err = init_fleet(&pki.dir, &nodes(&["node-c"]), "localhost").unwrap_err();
        assert!(matches!(err, PkiError::AlreadyExists(_)), "{err}");
        assert_eq!(fs::read(pki.ca_cert()).expect("read"), before);
        // An empty directory counts too: rename(2) would replace it.
        let empty = temp.path().join("empty");
        fs::create_dir(&empty).expect("mkdir");
        let err = init_fleet(&empty, &nodes(&["node-c"]), "localhost").unwrap_err();
        assert!(matches!(err, PkiError::AlreadyExists(_)), "{err}");
    }

    #[test]
    fn bad_inputs_write_nothing() {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path().join("pki");
        for (ids, host) in [
            (nodes(&[]), "localhost"),
            (nodes(&["Node-A"]), "localhost"),
            (nodes(&["node_a"]), "localhost"),
            (nodes(&[""]), "localhost"),
            (nodes(&[&"a".repeat(64)]), "localhost"),
            (nodes(&["a", "a"]), "localhost"),
            (nodes(&["a"]), ""),
            (nodes(&["a"]), "bad host"),
            (nodes(&["a"]), "a..b"),
        ] {
            assert!(init_fleet(&dir, &ids, host).is_err(), "{ids:?} {host:?}");
        }
        assert_eq!(fs::read_dir(temp.path()).expect("read").count(), 0);
        validate_node_id(&"a".repeat(NODE_ID_LEN_MAX)).expect("63 is fine");
    }

    fn not_after_days_from_now(path: &Path) -> i64 {
        let der = leaf(path);
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).expect("parse");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs() as i64;
        (cert.validity().not_after.timestamp() - now) / SECONDS_PER_DAY as i64
    }

    #[test]
    fn lifetimes_are_the_named_ones() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        for (path, days) in [
            (pki.ca_cert(), CA_CERT_LIFETIME_DAYS),
            (pki.controller_cert(), CONTROLLER_CERT_LIFETIME_DAYS),
            (pki.node_cert("node-a"), NODE_CERT_LIFETIME_DAYS),
        ] {
            let left = not_after_days_from_now(&path);
            // Rounded down: a day less than the lifetime while it is new.
            assert!(
                left == i64::from(days) || left == i64::from(days) - 1,
                "{}: {left} days left, lifetime {days}",
                path.display()
            );
        }
    }

    #[test]
    fn issue_node_signs_with_the_existing_ca_and_refuses_to_overwrite() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let ca_before = fs::read(pki.ca_cert()).expect("ca");
        let old = fs::read(pki.node_cert("node-a")).expect("old cert");
        let err = issue_node(&pki.dir, "node-a", false).expect_err("exists");
        assert!(matches!(err, PkiError::NodeFilesExist(_)), "{err}");
        assert_eq!(fs::read(pki.node_cert("node-a")).expect("cert"), old);
        let (cert, key) = issue_node(&pki.dir, "node-a", true).expect("force");
        assert_eq!(cert, pki.node_cert("node-a"));
        assert_ne!(fs::read(&cert).expect("new cert"), old);
        assert_eq!(fs::read(pki.ca_cert()).expect("ca"), ca_before);
        assert_eq!(mode(&key), SECRET_FILE_MODE);
        // A node the PKI never had gets its first pair.
        let (cert, key) = issue_node(&pki.dir, "node-c", false).expect("new node");
        assert_eq!(mode(&key), SECRET_FILE_MODE);
        let left = not_after_days_from_now(&cert);
        let days = i64::from(NODE_CERT_LIFETIME_DAYS);
        assert!(left == days || left == days - 1, "{left} days left");
        assert!(issue_node(&pki.dir, "Bad_Id", true).is_err());
        // No temporary directory is left behind.
        let names: Vec<_> = fs::read_dir(pki.dir.join("nodes"))
            .expect("read")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(
            names.iter().all(|n| !n.to_string_lossy().starts_with('.')),
            "{names:?}"
        );
    }

    /// The batch issue makes the same pairs as `issue_node` (the node's id
    /// in the SAN, the key private, the CA untouched) and refuses a node
    /// that has files before writing anything.
    #[test]
    fn issue_nodes_unsynced_signs_with_the_existing_ca_and_refuses_existing_nodes() {
        let temp = tempfile::tempdir().expect("tempdir");
        let pki = fleet(&temp, "pki");
        let ca_before = fs::read(pki.ca_cert()).expect("ca");
        let err = issue_nodes_unsynced(&pki.dir, &nodes(&["node-c", "node-a"])).expect_err("a");
        assert!(matches!(err, PkiError::NodeFilesExist(_)), "{err}");
        assert!(!pki.node_cert("node-c").exists(), "wrote before refusing");
        issue_nodes_unsynced(&pki.dir, &nodes(&["node-c", "node-d"])).expect("issued");
        assert_eq!(fs::read(pki.ca_cert()).expect("ca"), ca_before);
        for node in ["node-c", "node-d"] {
            assert_eq!(mode(&pki.node_key(node)), SECRET_FILE_MODE);
            let certs = load_certs(&pki.node_cert(node)).expect("certificate");
            assert_eq!(node_id_from_cert(&certs[0]).expect("SAN"), node);
            load_key(&pki.node_key(node)).expect("key");
        }
    }

    #[test]
    fn load_errors_name_the_file() {
        let temp = tempfile::tempdir().expect("tempdir");
        let missing = temp.path().join("missing.pem");
        let err = load_certs(&missing).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let empty = temp.path().join("empty.pem");
        fs::write(&empty, "nothing here\n").expect("write");
        let err = load_certs(&empty).unwrap_err();
        assert!(matches!(err, PkiError::NoCertificate(_)), "{err}");
        assert!(err.to_string().contains("empty.pem"), "{err}");
        let err = load_key(&empty).unwrap_err();
        assert!(matches!(err, PkiError::NoPrivateKey(_)), "{err}");
        let big = temp.path().join("big.pem");
        fs::write(&big, vec![b'a'; PEM_FILE_BYTES_MAX as usize + 1]).expect("write");
        assert!(matches!(
            load_certs(&big),
            Err(PkiError::FileTooLarge { .. })
        ));
        assert!(matches!(
            load_operator_token(&empty),
            Err(PkiError::BadToken(_))
        ));
    }
}
