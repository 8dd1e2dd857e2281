//! Signed app bundles: one app file plus a manifest, signed with Ed25519.
//!
//! The design follows minisign: an Ed25519 key with an 8-byte key id, a
//! domain-separated signed message, and `verify_strict` (which refuses
//! small-order keys and non-canonical signatures).
//!
//! # Bundle file format (version 1)
//!
//! ```text
//! "FLEETWEFT-BUNDLE-1\n"            magic, 19 bytes
//! u32 big-endian  manifest_len      at most MANIFEST_BYTES_MAX
//! manifest_len bytes                the manifest, compact JSON
//! u32 big-endian  signature_len     always 64
//! 64 bytes                          Ed25519 signature (see below)
//! u64 big-endian  app_len           at most APP_BYTES_MAX
//! app_len bytes                     the app file
//! ```
//!
//! Nothing may follow the app bytes: the release identity is the SHA-256 of
//! the whole file ([`bundle_digest`]), so trailing bytes would give one
//! verified content two identities.
//!
//! The signature is over `b"fleetweft-bundle-manifest-v1\0" || manifest`,
//! the manifest bytes exactly as stored. The manifest carries the app's
//! SHA-256, so the signature covers the app too.
//!
//! # Key id
//!
//! The first 8 bytes of `SHA-256(b"fleetweft-bundle-key-id-v1\0" || public
//! key)`. It is derived rather than stored, so a key file is a plain PKCS#8
//! (secret) or SPKI (public) PEM file.
//!
//! Signatures prove origin, not safety: the agent does not sandbox the app.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use model::Digest;
use rand_core::OsRng;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// First bytes of every bundle file.
pub const MAGIC: &[u8] = b"FLEETWEFT-BUNDLE-1\n";
/// The manifest format this code writes and reads.
pub const MANIFEST_FORMAT: u16 = 1;
/// Largest app file a bundle may carry.
pub const APP_BYTES_MAX: u64 = 8 * 1024 * 1024;
/// Largest manifest a bundle may carry.
pub const MANIFEST_BYTES_MAX: u32 = 16 * 1024;
/// Length of an Ed25519 signature.
pub const SIGNATURE_BYTES: u32 = 64;
/// Largest bundle file: the header, the largest manifest and the largest app.
pub const BUNDLE_BYTES_MAX: u64 = MAGIC.len() as u64
    + 4
    + MANIFEST_BYTES_MAX as u64
    + 4
    + SIGNATURE_BYTES as u64
    + 8
    + APP_BYTES_MAX;
/// Longest release name or version.
pub const NAME_LEN_MAX: usize = 128;
/// Longest app file name.
pub const APP_FILE_NAME_LEN_MAX: usize = 255;
/// Most arguments in the run command (program included).
pub const RUN_ARGS_MAX: usize = 64;
/// Longest probe path.
pub const PROBE_PATH_LEN_MAX: usize = 1024;
/// Largest key file we read; real ones are about 120 bytes.
pub const KEY_FILE_BYTES_MAX: u64 = 16 * 1024;

/// Prefix of the signed message, so a bundle signature can never be
/// mistaken for a signature over anything else.
const SIGNATURE_DOMAIN: &[u8] = b"fleetweft-bundle-manifest-v1\0";
/// Prefix of the hashed public key that gives the key id.
const KEY_ID_DOMAIN: &[u8] = b"fleetweft-bundle-key-id-v1\0";
/// Mode of the secret key file.
const SECRET_FILE_MODE: u32 = 0o600;
/// Mode of the public key file.
const PUBLIC_FILE_MODE: u32 = 0o644;

/// Why a bundle or a key was refused.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The bytes do not start with the bundle magic.
    #[error("not a Fleetweft bundle (bad magic)")]
    NotABundle,
    /// The bundle ends before a part it announces.
    #[error("bundle is truncated: the {what} is cut short")]
    Truncated {
        /// The part that is cut short.
        what: &'static str,
    },
    /// A part is larger than its limit.
    #[error("{what} is {len} bytes, over the {max}-byte limit")]
    TooLarge {
        /// The part.
        what: &'static str,
        /// Its length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Bytes follow the app.
    #[error("{0} unexpected bytes after the app")]
    TrailingBytes(u64),
    /// The signature field is not 64 bytes long.
    #[error("signature field is {0} bytes; an Ed25519 signature is 64")]
    BadSignatureLength(u32),
    /// The manifest does not parse or has an invalid field.
    #[error("malformed manifest: {0}")]
    MalformedManifest(String),
    /// The manifest is of a format this code does not know.
    #[error("unsupported manifest format {0} (this build reads format {MANIFEST_FORMAT})")]
    UnsupportedFormat(u16),
    /// The signature is all zeros: the bundle was never signed.
    #[error("bundle is unsigned")]
    Unsigned,
    /// The bundle names a signing key other than the trusted one.
    #[error("bundle is signed by unknown key {found}; the trusted key is {expected}")]
    UnknownKey {
        /// The key id in the bundle (hex).
        found: String,
        /// The trusted key's id (hex).
        expected: String,
    },
    /// The signature does not verify under the trusted key.
    #[error("bad signature: the manifest was not signed by the trusted key or was altered")]
    BadSignature,
    /// The app bytes do not hash to the SHA-256 the manifest names.
    #[error("app digest mismatch: manifest says {expected}, app hashes to {actual}")]
    DigestMismatch {
        /// SHA-256 from the manifest (hex).
        expected: String,
        /// SHA-256 of the app bytes (hex).
        actual: String,
    },
    /// A key file does not hold a key of the expected kind.
    #[error("{path}: {reason}")]
    BadKeyFile {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How the agent checks that the app serves: an HTTP GET of `path` must
/// answer `expect_status` and, for the body, either exactly `expect_body`
/// (surrounding whitespace ignored) or, when `expect_json` is given, a JSON
/// document whose field at that pointer equals the value (SPEC §6: "exact
/// or JSON field"). Giving both is refused when signing and verifying.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// The HTTP path to GET, starting with `/`.
    pub path: String,
    /// The expected HTTP status.
    pub expect_status: u16,
    /// The expected response body (empty when `expect_json` judges it).
    #[serde(default)]
    pub expect_body: String,
    /// The expected JSON field, instead of an exact body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_json: Option<JsonField>,
}

/// One field of a JSON answer: the value at `pointer` (RFC 6901, e.g.
/// `/version` or `/build/ok`) must equal `equals`, type included
/// (`"2"` is not `2`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonField {
    /// Where the field is; empty means the whole document.
    pub pointer: String,
    /// What it must equal.
    pub equals: serde_json::Value,
}

/// Longest JSON pointer a probe spec may name.
pub const PROBE_POINTER_LEN_MAX: usize = 256;

impl JsonField {
    /// Parse the CLI form `POINTER=JSON`, e.g. `/version="v2"` or `/ok=true`.
    /// The value must be JSON: a bare word is refused rather than guessed
    /// to be a string.
    pub fn parse(text: &str) -> Result<JsonField, String> {
        let (pointer, value) = text.split_once('=').ok_or_else(|| {
            format!("{text:?}: expected POINTER=JSON, e.g. /version=\"v2\" or /ok=true")
        })?;
        let equals = serde_json::from_str(value).map_err(|e| {
            format!(
                "{text:?}: the value after '=' must be JSON ({e}); a string needs quotes: {pointer}=\"{value}\""
            )
        })?;
        Ok(JsonField {
            pointer: pointer.to_string(),
            equals,
        })
    }

    /// Whether `body` is JSON whose field at the pointer equals the value.
    /// A body that is not JSON, or lacks the field, does not match.
    pub fn matches(&self, body: &str) -> bool {
        serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|doc| doc.pointer(&self.pointer).cloned())
            .is_some_and(|found| found == self.equals)
    }
}

impl ProbeSpec {
    /// Judge one answer of the route against this spec. `status` is `None`
    /// when nothing answered; `identity` is the `X-Fleetweft-Release` the
    /// route answered with. A 5xx without an identity is the proxy saying
    /// no instance answered: unreachable, not a wrong answer. The agent and
    /// the controller judge with this one function. The process uptime and
    /// restart count are left unobserved (`None`).
    pub fn judge(
        &self,
        status: Option<u16>,
        body: &str,
        identity: Option<Digest>,
        process_healthy: bool,
    ) -> model::RouteObservation {
        use model::ProbeVerdict;
        let verdict = match status {
            None => ProbeVerdict::Unreachable,
            Some(s) if s >= 500 && identity.is_none() => ProbeVerdict::Unreachable,
            Some(s) if s == self.expect_status && self.body_matches(body) => ProbeVerdict::Pass,
            Some(_) => ProbeVerdict::WrongAnswer,
        };
        // Uptime and restart count are the supervisor's to add (the agent
        // does); a judge of an HTTP answer alone cannot see them.
        model::RouteObservation::new(verdict, identity, process_healthy)
    }

    /// Whether a body is the expected one (exact, or the JSON field).
    pub fn body_matches(&self, body: &str) -> bool {
        match &self.expect_json {
            Some(field) => field.matches(body),
            None => body.trim() == self.expect_body.trim(),
        }
    }

    /// What the body is expected to be, in words (for tables and reports).
    pub fn expected_body_text(&self) -> String {
        match &self.expect_json {
            Some(field) => format!("JSON {} = {}", field.pointer, field.equals),
            None => format!("{:?}", self.expect_body),
        }
    }
}

/// The signed description of a release.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Manifest format; [`MANIFEST_FORMAT`].
    pub format: u16,
    /// Release name.
    pub name: String,
    /// Release version.
    pub version: String,
    /// The file name the app is staged under, e.g. `app.py`: a plain name of
    /// `[A-Za-z0-9._-]`, not starting with `.`.
    pub app_file_name: String,
    /// SHA-256 of the app bytes (hex in JSON).
    #[serde(with = "hex_array")]
    pub app_sha256: [u8; 32],
    /// The command that starts the app, e.g. `["python3", "app.py"]`.
    pub run: Vec<String>,
    /// How to check that the app serves.
    pub probe: ProbeSpec,
    /// Id of the signing key (hex in JSON); see [`key_id`].
    #[serde(with = "hex_array")]
    pub key_id: [u8; 8],
}

/// What the signer chooses; [`sign`] fills in the rest of the [`Manifest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestFields {
    /// Release name.
    pub name: String,
    /// Release version.
    pub version: String,
    /// The file name the app is staged under.
    pub app_file_name: String,
    /// The command that starts the app.
    pub run: Vec<String>,
    /// How to check that the app serves.
    pub probe: ProbeSpec,
}

/// A bundle whose signature and app digest have been checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedBundle {
    /// The signed manifest.
    pub manifest: Manifest,
    /// The app bytes; their SHA-256 matches the manifest.
    pub app: Vec<u8>,
    /// The release identity: SHA-256 of the whole bundle file.
    pub digest: Digest,
}

/// Hex (de)serialization of fixed-size byte arrays.
mod hex_array {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer, const N: usize>(
        bytes: &[u8; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        d: D,
    ) -> Result<[u8; N], D::Error> {
        let text = <&str>::deserialize(d)?;
        let bytes = hex::decode(text).map_err(D::Error::custom)?;
        bytes
            .try_into()
            .map_err(|_| D::Error::custom(format!("expected {N} hex-encoded bytes")))
    }
}

/// A new random signing key and its public key.
pub fn keygen() -> (SigningKey, VerifyingKey) {
    let signing = SigningKey::generate(&mut OsRng);
    let verifying = signing.verifying_key();
    (signing, verifying)
}

/// The 8-byte id of a public key (see the module docs).
pub fn key_id(key: &VerifyingKey) -> [u8; 8] {
    let hash = Sha256::new()
        .chain_update(KEY_ID_DOMAIN)
        .chain_update(key.as_bytes())
        .finalize();
    let mut id = [0u8; 8];
    id.copy_from_slice(&hash[..8]);
    id
}

/// The release identity of a bundle file: SHA-256 of all its bytes.
pub fn bundle_digest(bytes: &[u8]) -> Digest {
    Digest(Sha256::digest(bytes).into())
}

/// Writes a new file with `mode` set at creation; refuses to overwrite.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), BundleError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io_err(path))?;
    file.write_all(bytes).map_err(io_err(path))?;
    file.sync_all().map_err(io_err(path))
}

/// Reads at most `max` bytes of `path`; `TooLarge` if it holds more.
fn read_bounded(path: &Path, what: &'static str, max: u64) -> Result<Vec<u8>, BundleError> {
    let file = File::open(path).map_err(io_err(path))?;
    let mut bytes = Vec::new();
    // One byte past the limit tells "at the limit" from "over it".
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err(path))?;
    let len = bytes.len() as u64;
    if len > max {
        return Err(BundleError::TooLarge { what, len, max });
    }
    Ok(bytes)
}

fn read_key_text(path: &Path) -> Result<String, BundleError> {
    let bytes = read_bounded(path, "key file", KEY_FILE_BYTES_MAX)?;
    String::from_utf8(bytes).map_err(|_| BundleError::BadKeyFile {
        path: path.to_path_buf(),
        reason: "not a PEM text file".to_string(),
    })
}

/// Saves a signing key as PKCS#8 PEM, mode 0600; refuses to overwrite.
pub fn save_signing_key(path: &Path, key: &SigningKey) -> Result<(), BundleError> {
    let pem = key
        .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map_err(|e| BundleError::BadKeyFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    write_new(path, pem.as_bytes(), SECRET_FILE_MODE)
}

/// Saves a public key as SPKI PEM; refuses to overwrite.
pub fn save_verifying_key(path: &Path, key: &VerifyingKey) -> Result<(), BundleError> {
    let pem = key
        .to_public_key_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map_err(|e| BundleError::BadKeyFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    write_new(path, pem.as_bytes(), PUBLIC_FILE_MODE)
}

/// Loads a signing key saved by [`save_signing_key`].
pub fn load_signing_key(path: &Path) -> Result<SigningKey, BundleError> {
    let text = read_key_text(path)?;
    SigningKey::from_pkcs8_pem(&text).map_err(|e| BundleError::BadKeyFile {
        path: path.to_path_buf(),
        reason: format!("not an Ed25519 PKCS#8 private key: {e}"),
    })
}

/// Loads a public key saved by [`save_verifying_key`].
pub fn load_verifying_key(path: &Path) -> Result<VerifyingKey, BundleError> {
    let text = read_key_text(path)?;
    VerifyingKey::from_public_key_pem(&text).map_err(|e| BundleError::BadKeyFile {
        path: path.to_path_buf(),
        reason: format!("not an Ed25519 public key: {e}"),
    })
}

/// Reads a bundle file, refusing anything over [`BUNDLE_BYTES_MAX`].
pub fn read_bundle(path: &Path) -> Result<Vec<u8>, BundleError> {
    read_bounded(path, "bundle", BUNDLE_BYTES_MAX)
}

fn malformed(reason: impl Into<String>) -> BundleError {
    BundleError::MalformedManifest(reason.into())
}

/// A name or version: non-empty, bounded, no control characters.
fn check_label(what: &str, value: &str) -> Result<(), BundleError> {
    if value.is_empty() || value.len() > NAME_LEN_MAX {
        return Err(malformed(format!(
            "{what} must be 1 to {NAME_LEN_MAX} bytes"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(malformed(format!("{what} contains control characters")));
    }
    Ok(())
}

/// Checks the fields the signer chose. Shared by [`sign`] and [`verify`], so
/// a bad field is refused before signing and never trusted after.
fn check_fields(
    name: &str,
    version: &str,
    app_file_name: &str,
    run: &[String],
    probe: &ProbeSpec,
) -> Result<(), BundleError> {
    check_release_fields(name, version, run, probe)?;
    // The agent writes the app under this name: it must not escape the
    // staging directory or hide as a dotfile.
    let plain = !app_file_name.is_empty()
        && app_file_name.len() <= APP_FILE_NAME_LEN_MAX
        && !app_file_name.starts_with('.')
        && app_file_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !plain {
        return Err(malformed(format!(
            "app file name {app_file_name:?} must be 1 to {APP_FILE_NAME_LEN_MAX} of \
             A-Z a-z 0-9 . _ - and not start with '.'"
        )));
    }
    Ok(())
}

/// Checks the fields every manifest format shares: name, version, run
/// command and probe. Public so the format-2 manifest of the `releases`
/// crate refuses exactly what format 1 refuses.
pub fn check_release_fields(
    name: &str,
    version: &str,
    run: &[String],
    probe: &ProbeSpec,
) -> Result<(), BundleError> {
    check_label("name", name)?;
    check_label("version", version)?;
    match run.first() {
        None => return Err(malformed("run command is empty")),
        Some(program) if program.is_empty() => return Err(malformed("run program is empty")),
        Some(_) => {}
    }
    if run.len() > RUN_ARGS_MAX {
        return Err(malformed(format!(
            "run command has {} arguments, over the limit of {RUN_ARGS_MAX}",
            run.len()
        )));
    }
    // exec(2) cannot pass a NUL inside an argument.
    if run.iter().any(|arg| arg.contains('\0')) {
        return Err(malformed("run argument contains a NUL byte"));
    }
    let path_ok = probe.path.starts_with('/')
        && probe.path.len() <= PROBE_PATH_LEN_MAX
        && probe
            .path
            .chars()
            .all(|c| !c.is_control() && !c.is_whitespace());
    if !path_ok {
        return Err(malformed(format!(
            "probe path {:?} must start with '/', have no spaces or control characters, \
             and be at most {PROBE_PATH_LEN_MAX} bytes",
            probe.path
        )));
    }
    if let Some(field) = &probe.expect_json {
        if !probe.expect_body.is_empty() {
            return Err(malformed(
                "probe gives both an exact body and a JSON field: give one",
            ));
        }
        let pointer_ok = (field.pointer.is_empty() || field.pointer.starts_with('/'))
            && field.pointer.len() <= PROBE_POINTER_LEN_MAX
            && !field.pointer.chars().any(char::is_control);
        if !pointer_ok {
            return Err(malformed(format!(
                "probe JSON pointer {:?} must be empty or start with '/', have no control \
                 characters, and be at most {PROBE_POINTER_LEN_MAX} bytes",
                field.pointer
            )));
        }
    }
    if !(100..=599).contains(&probe.expect_status) {
        return Err(malformed(format!(
            "probe status {} is not an HTTP status (100-599)",
            probe.expect_status
        )));
    }
    Ok(())
}

fn signed_message(manifest: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(SIGNATURE_DOMAIN.len() + manifest.len());
    message.extend_from_slice(SIGNATURE_DOMAIN);
    message.extend_from_slice(manifest);
    message
}

/// Builds and signs a bundle of `app` described by `fields`; returns the
/// bundle file's bytes.
pub fn sign(key: &SigningKey, app: &[u8], fields: ManifestFields) -> Result<Vec<u8>, BundleError> {
    let ManifestFields {
        name,
        version,
        app_file_name,
        run,
        probe,
    } = fields;
    check_fields(&name, &version, &app_file_name, &run, &probe)?;
    let app_len = app.len() as u64;
    if app_len > APP_BYTES_MAX {
        return Err(BundleError::TooLarge {
            what: "app",
            len: app_len,
            max: APP_BYTES_MAX,
        });
    }
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        name,
        version,
        app_file_name,
        app_sha256: Sha256::digest(app).into(),
        run,
        probe,
        key_id: key_id(&key.verifying_key()),
    };
    let manifest_bytes = serde_json::to_vec(&manifest).map_err(|e| malformed(e.to_string()))?;
    let manifest_len = u32::try_from(manifest_bytes.len())
        .ok()
        .filter(|len| *len <= MANIFEST_BYTES_MAX)
        .ok_or(BundleError::TooLarge {
            what: "manifest",
            len: manifest_bytes.len() as u64,
            max: MANIFEST_BYTES_MAX.into(),
        })?;
    let signature = key.sign(&signed_message(&manifest_bytes));

    let mut out = Vec::with_capacity(MAGIC.len() + 16 + manifest_bytes.len() + 64 + app.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&manifest_len.to_be_bytes());
    out.extend_from_slice(&manifest_bytes);
    out.extend_from_slice(&SIGNATURE_BYTES.to_be_bytes());
    out.extend_from_slice(&signature.to_bytes());
    out.extend_from_slice(&app_len.to_be_bytes());
    out.extend_from_slice(app);
    Ok(out)
}

/// A cursor over the bundle bytes that reports which part is cut short.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8], BundleError> {
        if self.rest.len() < len {
            return Err(BundleError::Truncated { what });
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], BundleError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }
}

/// Parses a manifest's JSON and checks its format and fields, as [`verify`]
/// does before it looks at the signature. It proves nothing about who wrote
/// the manifest: only [`verify`] does. Public so the `manifest` fuzz target
/// runs the verifier's own parsing.
pub fn parse_manifest(manifest_bytes: &[u8]) -> Result<Manifest, BundleError> {
    let manifest: Manifest =
        serde_json::from_slice(manifest_bytes).map_err(|e| malformed(e.to_string()))?;
    if manifest.format != MANIFEST_FORMAT {
        return Err(BundleError::UnsupportedFormat(manifest.format));
    }
    check_fields(
        &manifest.name,
        &manifest.version,
        &manifest.app_file_name,
        &manifest.run,
        &manifest.probe,
    )?;
    Ok(manifest)
}

/// A bundle file's parts: manifest bytes, signature, app.
type Framed<'a> = (&'a [u8], [u8; 64], &'a [u8]);

/// Splits a bundle file into manifest bytes, signature and app, checking
/// the magic, every size and the framing (nothing else).
fn frame(bytes: &[u8]) -> Result<Framed<'_>, BundleError> {
    if !bytes.starts_with(MAGIC) {
        return Err(BundleError::NotABundle);
    }
    let total = bytes.len() as u64;
    if total > BUNDLE_BYTES_MAX {
        return Err(BundleError::TooLarge {
            what: "bundle",
            len: total,
            max: BUNDLE_BYTES_MAX,
        });
    }
    let mut reader = Reader {
        rest: &bytes[MAGIC.len()..],
    };
    let manifest_len = u32::from_be_bytes(reader.array("manifest length")?);
    if manifest_len > MANIFEST_BYTES_MAX {
        return Err(BundleError::TooLarge {
            what: "manifest",
            len: manifest_len.into(),
            max: MANIFEST_BYTES_MAX.into(),
        });
    }
    // Lossless: bounded by MANIFEST_BYTES_MAX above.
    let manifest_bytes = reader.take(manifest_len as usize, "manifest")?;
    let signature_len = u32::from_be_bytes(reader.array("signature length")?);
    if signature_len != SIGNATURE_BYTES {
        return Err(BundleError::BadSignatureLength(signature_len));
    }
    let signature: [u8; 64] = reader.array("signature")?;
    let app_len = u64::from_be_bytes(reader.array("app length")?);
    if app_len > APP_BYTES_MAX {
        return Err(BundleError::TooLarge {
            what: "app",
            len: app_len,
            max: APP_BYTES_MAX,
        });
    }
    // Lossless: bounded by APP_BYTES_MAX above.
    let app = reader.take(app_len as usize, "app")?;
    if !reader.rest.is_empty() {
        return Err(BundleError::TrailingBytes(reader.rest.len() as u64));
    }

    Ok((manifest_bytes, signature, app))
}

/// Reads a bundle file WITHOUT checking its signature: framing, manifest
/// rules and the app digest only. For `fleetweft bundle inspect` without a
/// key; nothing read this way may be trusted or staged.
pub fn read_unverified(bytes: &[u8]) -> Result<VerifiedBundle, BundleError> {
    let (manifest_bytes, _, app) = frame(bytes)?;
    let manifest = parse_manifest(manifest_bytes)?;
    let actual: [u8; 32] = Sha256::digest(app).into();
    if actual != manifest.app_sha256 {
        return Err(BundleError::DigestMismatch {
            expected: hex::encode(manifest.app_sha256),
            actual: hex::encode(actual),
        });
    }
    Ok(VerifiedBundle {
        manifest,
        app: app.to_vec(),
        digest: bundle_digest(bytes),
    })
}

/// Checks a bundle against the trusted public key; returns its manifest,
/// app and release identity.
///
/// Checks, in order: magic, sizes and framing, the manifest parses and is
/// valid, the bundle is signed at all, it names the trusted key, the
/// signature (`verify_strict`), and the app's SHA-256 against the manifest.
pub fn verify(key: &VerifyingKey, bytes: &[u8]) -> Result<VerifiedBundle, BundleError> {
    let (manifest_bytes, signature, app) = frame(bytes)?;
    let manifest = parse_manifest(manifest_bytes)?;

    if signature.iter().all(|b| *b == 0) {
        return Err(BundleError::Unsigned);
    }
    let expected_id = key_id(key);
    if manifest.key_id != expected_id {
        return Err(BundleError::UnknownKey {
            found: hex::encode(manifest.key_id),
            expected: hex::encode(expected_id),
        });
    }
    key.verify_strict(
        &signed_message(manifest_bytes),
        &Signature::from_bytes(&signature),
    )
    .map_err(|_| BundleError::BadSignature)?;

    let actual: [u8; 32] = Sha256::digest(app).into();
    if actual != manifest.app_sha256 {
        return Err(BundleError::DigestMismatch {
            expected: hex::encode(manifest.app_sha256),
            actual: hex::encode(actual),
        });
    }
    Ok(VerifiedBundle {
        manifest,
        app: app.to_vec(),
        digest: bundle_digest(bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::fs::PermissionsExt;

    const APP: &[u8] = b"print('hello from the edge')\n";

    fn fields() -> ManifestFields {
        ManifestFields {
            name: "hello".to_string(),
            version: "1.2.3".to_string(),
            app_file_name: "app.py".to_string(),
            run: vec!["python3".to_string(), "app.py".to_string()],
            probe: ProbeSpec {
                path: "/health".to_string(),
                expect_status: 200,
                expect_body: "ok".to_string(),
                expect_json: None,
            },
        }
    }

    fn signed() -> (VerifyingKey, Vec<u8>) {
        let (secret, public) = keygen();
        (public, sign(&secret, APP, fields()).expect("sign"))
    }

    /// Where the manifest starts and ends in a bundle.
    fn manifest_range(bytes: &[u8]) -> std::ops::Range<usize> {
        let start = MAGIC.len() + 4;
        let len = u32::from_be_bytes(bytes[MAGIC.len()..start].try_into().expect("4")) as usize;
        start..start + len
    }

    fn signature_range(bytes: &[u8]) -> std::ops::Range<usize> {
        let start = manifest_range(bytes).end + 4;
        start..start + 64
    }

    #[test]
    fn round_trip() {
        let (public, bytes) = signed();
        let verified = verify(&public, &bytes).expect("verify");
        assert_eq!(verified.app, APP);
        assert_eq!(verified.manifest.name, "hello");
        assert_eq!(verified.manifest.version, "1.2.3");
        assert_eq!(verified.manifest.run, ["python3", "app.py"]);
        assert_eq!(verified.manifest.probe, fields().probe);
        assert_eq!(verified.manifest.key_id, key_id(&public));
        assert_eq!(verified.digest, bundle_digest(&bytes));
        // The manifest is plain JSON with hex digests.
        let json = std::str::from_utf8(&bytes[manifest_range(&bytes)]).expect("utf8");
        assert!(json.contains(&hex::encode(Sha256::digest(APP))), "{json}");
    }

    #[test]
    fn flipped_app_byte_is_a_digest_mismatch() {
        let (public, mut bytes) = signed();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        let err = verify(&public, &bytes).unwrap_err();
        assert!(matches!(err, BundleError::DigestMismatch { .. }), "{err}");
    }

    #[test]
    fn altered_manifest_is_a_bad_signature() {
        let (public, mut bytes) = signed();
        let range = manifest_range(&bytes);
        // Change the version "1.2.3" to "1.2.4": still a valid manifest.
        let at = range.start
            + bytes[range.clone()]
                .windows(5)
                .position(|w| w == b"1.2.3")
                .expect("version in manifest")
            + 4;
        bytes[at] = b'4';
        let err = verify(&public, &bytes).unwrap_err();
        assert!(matches!(err, BundleError::BadSignature), "{err}");
    }

    #[test]
    fn flipped_signature_byte_is_a_bad_signature() {
        let (public, mut bytes) = signed();
        let at = signature_range(&bytes).start + 10;
        bytes[at] ^= 0x40;
        let err = verify(&public, &bytes).unwrap_err();
        assert!(matches!(err, BundleError::BadSignature), "{err}");
    }

    #[test]
    fn foreign_key_is_unknown() {
        let (_, bytes) = signed();
        let (_, other) = keygen();
        let err = verify(&other, &bytes).unwrap_err();
        assert!(matches!(err, BundleError::UnknownKey { .. }), "{err}");
    }

    #[test]
    fn foreign_signature_under_our_key_id_is_bad() {
        // An attacker copies our key id into a manifest signed by their key.
        let (ours, _) = keygen();
        let (theirs, _) = keygen();
        let manifest = Manifest {
            format: MANIFEST_FORMAT,
            name: "evil".to_string(),
            version: "1".to_string(),
            app_file_name: "app.py".to_string(),
            app_sha256: Sha256::digest(APP).into(),
            run: vec!["python3".to_string()],
            probe: fields().probe,
            key_id: key_id(&ours.verifying_key()),
        };
        let json = serde_json::to_vec(&manifest).expect("json");
        let sig = theirs.sign(&signed_message(&json)).to_bytes();
        let bytes = assemble(&json, &sig, APP);
        let err = verify(&ours.verifying_key(), &bytes).unwrap_err();
        assert!(matches!(err, BundleError::BadSignature), "{err}");
    }

    fn assemble(manifest: &[u8], sig: &[u8; 64], app: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&(manifest.len() as u32).to_be_bytes());
        out.extend_from_slice(manifest);
        out.extend_from_slice(&64u32.to_be_bytes());
        out.extend_from_slice(sig);
        out.extend_from_slice(&(app.len() as u64).to_be_bytes());
        out.extend_from_slice(app);
        out
    }

    #[test]
    fn unsigned_is_refused() {
        let (public, mut bytes) = signed();
        let range = signature_range(&bytes);
        bytes[range].fill(0);
        let err = verify(&public, &bytes).unwrap_err();
        assert!(matches!(err, BundleError::Unsigned), "{err}");
    }

    #[test]
    fn framing_errors() {
        let (public, bytes) = signed();
        assert!(matches!(
            verify(&public, b"#!/bin/sh\necho hi\n"),
            Err(BundleError::NotABundle)
        ));
        assert!(matches!(verify(&public, b""), Err(BundleError::NotABundle)));
        let cut = &bytes[..bytes.len() - 1];
        assert!(matches!(
            verify(&public, cut),
            Err(BundleError::Truncated { what: "app" })
        ));
        let cut = &bytes[..MAGIC.len() + 2];
        assert!(matches!(
            verify(&public, cut),
            Err(BundleError::Truncated {
                what: "manifest length"
            })
        ));
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(
            verify(&public, &long),
            Err(BundleError::TrailingBytes(1))
        ));
    }

    #[test]
    fn oversized_parts_are_refused() {
        let (secret, public) = keygen();
        let big = vec![0u8; APP_BYTES_MAX as usize + 1];
        assert!(matches!(
            sign(&secret, &big, fields()),
            Err(BundleError::TooLarge { what: "app", .. })
        ));
        // A header announcing a huge manifest is refused before reading it.
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&u32::MAX.to_be_bytes());
        let err = verify(&public, &bytes).unwrap_err();
        assert!(
            matches!(
                err,
                BundleError::TooLarge {
                    what: "manifest",
                    ..
                }
            ),
            "{err}"
        );
        // And an app length over the limit.
        let good = sign(&secret, APP, fields()).expect("sign");
        let at = signature_range(&good).end;
        let mut bytes = good[..at].to_vec();
        bytes.extend_from_slice(&(APP_BYTES_MAX + 1).to_be_bytes());
        let err = verify(&public, &bytes).unwrap_err();
        assert!(
            matches!(err, BundleError::TooLarge { what: "app", .. }),
            "{err}"
        );
        // Exactly at the limit is fine.
        let max = vec![7u8; APP_BYTES_MAX as usize];
        let bytes = sign(&secret, &max, fields()).expect("sign max");
        assert_eq!(
            verify(&public, &bytes).expect("verify max").app.len(),
            max.len()
        );
    }

    #[test]
    fn malformed_manifests_are_refused() {
        let (secret, public) = keygen();
        let sig = secret.sign(&signed_message(b"{}")).to_bytes();
        let err = verify(&public, &assemble(b"not json", &sig, APP)).unwrap_err();
        assert!(matches!(err, BundleError::MalformedManifest(_)), "{err}");
        let err = verify(&public, &assemble(b"{}", &sig, APP)).unwrap_err();
        assert!(matches!(err, BundleError::MalformedManifest(_)), "{err}");

        let bad = [
            ManifestFields {
                app_file_name: "../evil".to_string(),
                ..fields()
            },
            ManifestFields {
                app_file_name: ".hidden".to_string(),
                ..fields()
            },
            ManifestFields {
                app_file_name: "a/b".to_string(),
                ..fields()
            },
            ManifestFields {
                name: String::new(),
                ..fields()
            },
            ManifestFields {
                run: vec![],
                ..fields()
            },
            ManifestFields {
                probe: ProbeSpec {
                    path: "health".to_string(),
                    ..fields().probe
                },
                ..fields()
            },
            ManifestFields {
                probe: ProbeSpec {
                    expect_status: 42,
                    ..fields().probe
                },
                ..fields()
            },
            // An exact body and a JSON field at once: which one judges?
            ManifestFields {
                probe: ProbeSpec {
                    expect_json: Some(JsonField::parse("/ok=true").unwrap()),
                    ..fields().probe
                },
                ..fields()
            },
            ManifestFields {
                probe: ProbeSpec {
                    expect_body: String::new(),
                    expect_json: Some(JsonField::parse("ok=true").unwrap()),
                    ..fields().probe
                },
                ..fields()
            },
        ];
        for f in bad {
            let err = sign(&secret, APP, f.clone()).unwrap_err();
            assert!(matches!(err, BundleError::MalformedManifest(_)), "{f:?}");
        }
    }

    #[test]
    fn unknown_format_is_refused() {
        let (secret, public) = keygen();
        let good = sign(&secret, APP, fields()).expect("sign");
        let mut manifest: Manifest =
            serde_json::from_slice(&good[manifest_range(&good)]).expect("parse");
        manifest.format = 2;
        let json = serde_json::to_vec(&manifest).expect("json");
        let sig = secret.sign(&signed_message(&json)).to_bytes();
        let err = verify(&public, &assemble(&json, &sig, APP)).unwrap_err();
        assert!(matches!(err, BundleError::UnsupportedFormat(2)), "{err}");
    }

    #[test]
    fn keys_round_trip_through_files() {
        let temp = tempfile::tempdir().expect("tempdir");
        let (secret, public) = keygen();
        let secret_path = temp.path().join("k.key");
        let public_path = temp.path().join("k.pub");
        save_signing_key(&secret_path, &secret).expect("save secret");
        save_verifying_key(&public_path, &public).expect("save public");
        let mode = std::fs::metadata(&secret_path)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            load_signing_key(&secret_path).expect("load").to_bytes(),
            secret.to_bytes()
        );
        assert_eq!(load_verifying_key(&public_path).expect("load"), public);
        // No overwrite, and the wrong kind of key is refused with the path.
        assert!(save_signing_key(&secret_path, &secret).is_err());
        let err = load_verifying_key(&secret_path).unwrap_err();
        assert!(err.to_string().contains("k.key"), "{err}");
        let err = load_signing_key(&public_path).unwrap_err();
        assert!(matches!(err, BundleError::BadKeyFile { .. }), "{err}");
    }

    proptest! {
        #[test]
        fn any_single_byte_corruption_is_refused(at in any::<prop::sample::Index>(), xor in 1u8..=255) {
            let (public, mut bytes) = signed();
            let i = at.index(bytes.len());
            bytes[i] ^= xor;
            prop_assert!(verify(&public, &bytes).is_err(), "byte {} ^ {:#x} accepted", i, xor);
        }

        #[test]
        fn any_truncation_is_refused(at in any::<prop::sample::Index>()) {
            let (public, bytes) = signed();
            let len = at.index(bytes.len());
            prop_assert!(verify(&public, &bytes[..len]).is_err());
        }
    }
}

#[cfg(test)]
mod judge_tests {
    use super::{JsonField, ProbeSpec};
    use model::{Digest, ProbeVerdict};

    fn spec() -> ProbeSpec {
        ProbeSpec {
            path: "/hello".into(),
            expect_status: 200,
            expect_body: "hello from v2".into(),
            expect_json: None,
        }
    }

    #[test]
    fn judging_a_route_answer() {
        let id = Some(Digest::repeat(2));
        let v = |status, body, identity| spec().judge(status, body, identity, true).verdict;
        assert_eq!(v(Some(200), "hello from v2\n", id), ProbeVerdict::Pass);
        assert_eq!(
            v(Some(200), "goodbye from v2", id),
            ProbeVerdict::WrongAnswer
        );
        assert_eq!(v(Some(404), "hello from v2", id), ProbeVerdict::WrongAnswer);
        // The proxy's 502 without an identity: nothing answered.
        assert_eq!(v(Some(502), "", None), ProbeVerdict::Unreachable);
        // A 5xx the app itself sent (identity stamped): a wrong answer.
        assert_eq!(v(Some(500), "", id), ProbeVerdict::WrongAnswer);
        assert_eq!(v(None, "", None), ProbeVerdict::Unreachable);
        assert_eq!(
            spec().judge(Some(200), "hello from v2", id, true).identity,
            id
        );
    }

    #[test]
    fn judging_by_a_json_field() {
        let json = ProbeSpec {
            expect_body: String::new(),
            expect_json: Some(JsonField::parse("/build/version=\"v2\"").expect("parse")),
            ..spec()
        };
        let id = Some(Digest::repeat(2));
        let v = |body| json.judge(Some(200), body, id, true).verdict;
        assert_eq!(
            v(r#"{"build": {"version": "v2", "at": 3}, "x": 1}"#),
            ProbeVerdict::Pass
        );
        assert_eq!(
            v(r#"{"build": {"version": "v1"}}"#),
            ProbeVerdict::WrongAnswer
        );
        // Type included: the number 2 is not the string "v2".
        assert_eq!(v(r#"{"build": {"version": 2}}"#), ProbeVerdict::WrongAnswer);
        assert_eq!(v(r#"{"build": {}}"#), ProbeVerdict::WrongAnswer);
        assert_eq!(v("hello from v2"), ProbeVerdict::WrongAnswer);
        assert_eq!(v(""), ProbeVerdict::WrongAnswer);
        assert_eq!(
            json.judge(Some(500), r#"{"build": {"version": "v2"}}"#, id, true)
                .verdict,
            ProbeVerdict::WrongAnswer
        );
        assert_eq!(json.expected_body_text(), "JSON /build/version = \"v2\"");
    }

    #[test]
    fn the_cli_form_of_a_json_field_is_checked() {
        let ok = JsonField::parse("/ok=true").expect("bool");
        assert_eq!(ok.equals, serde_json::Value::Bool(true));
        assert_eq!(JsonField::parse("=1").expect("whole doc").pointer, "");
        let e = JsonField::parse("/version=v2").expect_err("bare word");
        assert!(
            e.contains("must be JSON") && e.contains(r#"/version="v2""#),
            "{e}"
        );
        let e = JsonField::parse("/version").expect_err("no value");
        assert!(e.contains("POINTER=JSON"), "{e}");
    }
}
