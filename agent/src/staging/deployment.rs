//! Deployments on disk (issue #24 item 1): a release's code plus one
//! configuration revision, named by its deployment digest D
//! (`releases::config::deployment_digest`).
//!
//! `DATA/deployments/<D>/deployment.bin` is the document as the controller
//! sent it (it holds the secrets in the clear: mode 0600), and
//! `DATA/deployments/<D>/config/<name>` its files, read-only for the app.
//! The code is staged as any release under `DATA/releases/<R>`; a
//! deployment is installed only once its code is, and renamed into place
//! whole (temporary directory, fsync, rename, fsync of the parent), so its
//! directory's presence means both are there.
//!
//! Nothing here is trusted for its own word: loading or reading back a
//! deployment decodes its document again and checks it hashes to D.

use super::{sync_dir, Release, StageError};
use model::Digest;
use releases::config::Deployment;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The directory of all deployments under the agent's data directory.
pub const DEPLOYMENTS_DIR: &str = "deployments";
/// The document's file name inside a deployment's directory.
pub const DOCUMENT_FILE: &str = "deployment.bin";
/// The directory of the configuration's files inside a deployment's.
pub const CONFIG_DIR: &str = "config";
/// The document holds secrets in the clear: the agent's user only.
const DOCUMENT_MODE: u32 = 0o600;
/// A configuration file: readable, never writable, by the app (which may
/// run as another user than the agent).
const CONFIG_FILE_MODE: u32 = 0o444;
/// The configuration directory: the app reads and lists it, never
/// writes into it.
const CONFIG_DIR_MODE: u32 = 0o555;
/// `deployments/` and `deployments/<D>/`: an app running as another user
/// may pass through to its `config/`, but lists nothing.
const TRAVERSE_MODE: u32 = 0o711;

/// The configuration a deployment adds to its code, as the app gets it.
#[derive(Clone, PartialEq, Eq)]
pub struct Configured {
    /// `Configuration::fingerprint()` of the revision.
    pub fingerprint: Digest,
    /// Its environment variables, secrets in the clear.
    pub env: Vec<(String, String)>,
    /// The directory of its files (`deployments/<D>/config`).
    pub dir: PathBuf,
}

// Written by hand: a derived Debug would print the secrets' values into
// every log line that shows a release.
impl std::fmt::Debug for Configured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Configured")
            .field("fingerprint", &self.fingerprint)
            .field("keys", &keys)
            .field("dir", &self.dir)
            .finish()
    }
}

impl Configured {
    /// The configuration of `doc`, installed as deployment `digest`.
    pub fn of(data_dir: &Path, digest: Digest, doc: &Deployment) -> Configured {
        Configured {
            fingerprint: doc.config.fingerprint(),
            env: doc
                .config
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.value().to_string()))
                .collect(),
            dir: config_dir(data_dir, digest),
        }
    }

    /// The environment an instance of deployment `deployment` gets on top
    /// of the agent's own variables: the configuration's, then
    /// `FLEETWEFT_CONFIG_DIR`, `FLEETWEFT_CONFIG_FINGERPRINT` (read back
    /// from the serving process by every readback) and
    /// `FLEETWEFT_DEPLOYMENT`. A configuration key can never be one of
    /// these (`model::config::key_problem` refuses `FLEETWEFT_*`).
    pub fn env_for(&self, deployment: Digest) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        env.push((
            "FLEETWEFT_CONFIG_DIR".into(),
            self.dir.to_string_lossy().into_owned(),
        ));
        env.push((
            "FLEETWEFT_CONFIG_FINGERPRINT".into(),
            self.fingerprint.to_hex(),
        ));
        env.push(("FLEETWEFT_DEPLOYMENT".into(), deployment.to_hex()));
        env
    }
}

/// The directory of deployment `digest`.
pub fn deployment_dir(data_dir: &Path, digest: Digest) -> PathBuf {
    data_dir.join(DEPLOYMENTS_DIR).join(digest.to_hex())
}

/// The directory of deployment `digest`'s configuration files.
pub fn config_dir(data_dir: &Path, digest: Digest) -> PathBuf {
    deployment_dir(data_dir, digest).join(CONFIG_DIR)
}

/// Whether `digest` names an installed deployment (its directory exists:
/// installs are renamed into place whole). Says nothing of whether it is
/// good: [`load`] and [`read_back`] check.
pub fn is_installed(data_dir: &Path, digest: Digest) -> bool {
    std::fs::symlink_metadata(deployment_dir(data_dir, digest)).is_ok()
}

/// Decodes `bytes` as the deployment `digest`; a refusal is permanent.
pub fn decode(bytes: &[u8], digest: Digest) -> Result<Deployment, StageError> {
    Deployment::decode(bytes, digest)
        .map_err(|source| StageError::DeploymentRefused { digest, source })
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StageError {
    let path = path.to_path_buf();
    move |source| StageError::Io { path, source }
}

/// Installs the document `bytes` as deployment `digest` (its code must be
/// staged already): checked first, then written under a temporary name,
/// fsynced and renamed. An installed one is loaded (and repaired) instead.
pub fn install(data_dir: &Path, digest: Digest, bytes: &[u8]) -> Result<Deployment, StageError> {
    let doc = decode(bytes, digest)?;
    if is_installed(data_dir, digest) {
        return load(data_dir, digest);
    }
    let parent = data_dir.join(DEPLOYMENTS_DIR);
    if !parent.exists() {
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        set_mode(&parent, TRAVERSE_MODE)?;
        sync_dir(data_dir).map_err(io(data_dir))?;
    }
    let tmp = parent.join(format!(".{}.tmp", digest.to_hex()));
    remove_tree(&tmp)?;
    std::fs::create_dir(&tmp).map_err(io(&tmp))?;
    set_mode(&tmp, TRAVERSE_MODE)?;
    write_private(&tmp.join(DOCUMENT_FILE), bytes)?;
    write_config(&tmp.join(CONFIG_DIR), &doc.config.files)?;
    sync_dir(&tmp).map_err(io(&tmp))?;
    let dir = deployment_dir(data_dir, digest);
    std::fs::rename(&tmp, &dir).map_err(io(&dir))?;
    sync_dir(&parent).map_err(io(&parent))?;
    Ok(doc)
}

/// Loads the installed deployment `digest`: its document decoded again
/// and checked against `digest`, and its configuration files rewritten
/// from it when they differ (what the app reads must be what the
/// document says, as a release's app file is rewritten from its bundle).
pub fn load(data_dir: &Path, digest: Digest) -> Result<Deployment, StageError> {
    let path = deployment_dir(data_dir, digest).join(DOCUMENT_FILE);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    let doc = decode(&bytes, digest)?;
    let config = config_dir(data_dir, digest);
    if !files_match(&config, &doc.config.files) {
        repair_config(&deployment_dir(data_dir, digest), &doc.config.files)?;
    }
    Ok(doc)
}

/// The runnable deployment `digest`: its code, loaded (and re-verified)
/// by `load_code`, with the configuration added; named by `digest`.
pub fn load_release(
    data_dir: &Path,
    digest: Digest,
    load_code: impl FnOnce(Digest) -> Result<Release, StageError>,
) -> Result<Release, StageError> {
    let doc = load(data_dir, digest)?;
    let code = load_code(doc.release)?;
    Ok(code.deployed(digest, Configured::of(data_dir, digest, &doc)))
}

/// Reads back deployment `digest` for a proof: the document re-read and
/// decoded against `digest`, the code's artifact read by `read_code`,
/// then the configuration files compared with the document.
///
/// - document unreadable => `Unreadable`;
/// - a document that decodes to another deployment => `Digest` of it; one
///   that does not decode => `Digest` of its SHA-256 (something else,
///   never `digest`);
/// - the code's read of its own digest is said of `digest`
///   (`Digest(R)` => `Digest(D)`, `AppFileAltered(R)` =>
///   `AppFileAltered(D)`, `AppFileOf { installed: R, .. }` =>
///   `AppFileOf { installed: D, .. }`); any other read is passed on;
/// - intact code but configuration files that differ from the document
///   => `AppFileAltered(D)` (something else would be read by the app).
pub fn read_back(
    data_dir: &Path,
    digest: Digest,
    read_code: impl FnOnce(Digest) -> model::ArtifactRead,
) -> model::ArtifactRead {
    use model::ArtifactRead as Read;
    let path = deployment_dir(data_dir, digest).join(DOCUMENT_FILE);
    let Ok(bytes) = std::fs::read(&path) else {
        return Read::Unreadable;
    };
    let doc = match Deployment::decode(&bytes, digest) {
        Ok(doc) => doc,
        Err(releases::config::DeploymentError::WrongDigest { actual, .. }) => {
            return Read::Digest(actual)
        }
        Err(_) => {
            use sha2::Digest as _;
            return Read::Digest(Digest(sha2::Sha256::digest(&bytes).into()));
        }
    };
    let code = doc.release;
    match read_code(code) {
        Read::Digest(d) if d == code => {}
        Read::AppFileAltered(d) if d == code => return Read::AppFileAltered(digest),
        Read::AppFileOf { installed, release } if installed == code => {
            return Read::AppFileOf {
                installed: digest,
                release,
            }
        }
        other => return other,
    }
    if files_match(&config_dir(data_dir, digest), &doc.config.files) {
        Read::Digest(digest)
    } else {
        Read::AppFileAltered(digest)
    }
}

/// Whether `dir` holds exactly `files` (names and bytes).
fn files_match(dir: &Path, files: &[(String, Vec<u8>)]) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let count = entries.count();
    count == files.len()
        && files
            .iter()
            .all(|(name, bytes)| std::fs::read(dir.join(name)).is_ok_and(|b| &b == bytes))
}

/// Writes `files` into the new directory `dir`, each fsynced and
/// read-only, then the directory fsynced and made read-only.
fn write_config(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<(), StageError> {
    std::fs::create_dir(dir).map_err(io(dir))?;
    for (name, bytes) in files {
        // `check_names` (in `Deployment::decode`) allowed only one plain
        // path component: the file stays inside `dir`.
        let path = dir.join(name);
        write_with_mode(&path, bytes, CONFIG_FILE_MODE)?;
    }
    sync_dir(dir).map_err(io(dir))?;
    set_mode(dir, CONFIG_DIR_MODE)
}

/// Replaces the configuration directory of the deployment in `dir` with
/// `files`: written beside it, then swapped in by renames (the old one set
/// aside first: a rename cannot replace a directory that has files).
fn repair_config(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<(), StageError> {
    tracing::warn!(
        "the configuration files in {} differ from the deployment document: rewriting them",
        dir.display()
    );
    let (config, fresh, old) = (
        dir.join(CONFIG_DIR),
        dir.join(".config.tmp"),
        dir.join(".config.old"),
    );
    remove_tree(&fresh)?;
    remove_tree(&old)?;
    write_config(&fresh, files)?;
    if std::fs::symlink_metadata(&config).is_ok() {
        std::fs::rename(&config, &old).map_err(io(&config))?;
    }
    std::fs::rename(&fresh, &config).map_err(io(&config))?;
    sync_dir(dir).map_err(io(dir))?;
    remove_tree(&old)
}

/// Removes the deployment `digest` (housekeeping): renamed aside first, so
/// a crash never leaves a half-removed deployment under its name.
pub fn remove(data_dir: &Path, digest: Digest) -> Result<(), StageError> {
    let parent = data_dir.join(DEPLOYMENTS_DIR);
    let dir = deployment_dir(data_dir, digest);
    let aside = parent.join(format!(".{}.gc", digest.to_hex()));
    std::fs::rename(&dir, &aside).map_err(io(&dir))?;
    sync_dir(&parent).map_err(io(&parent))?;
    remove_tree(&aside)
}

/// The deployments installed: every directory of `deployments/` named by
/// a digest. What a crash left under a temporary or set-aside name is
/// removed on the way.
pub fn installed(data_dir: &Path) -> Vec<Digest> {
    let parent = data_dir.join(DEPLOYMENTS_DIR);
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        match crate::probe::parse_digest(name) {
            Some(digest) => found.push(digest),
            None if name.starts_with('.') => {
                let _ = remove_tree(&entry.path());
            }
            None => {}
        }
    }
    found
}

/// The code digest of installed deployment `digest`, from its document
/// checked against `digest`; `None` when it does not check.
pub fn code_of(data_dir: &Path, digest: Digest) -> Option<Digest> {
    let bytes = std::fs::read(deployment_dir(data_dir, digest).join(DOCUMENT_FILE)).ok()?;
    Deployment::decode(&bytes, digest).ok().map(|d| d.release)
}

/// Removes `path` and everything under it, if there: read-only
/// directories are made writable first (for an agent not running as root,
/// removing from a 0555 directory fails).
fn remove_tree(path: &Path) -> Result<(), StageError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if meta.is_dir() {
        set_mode(path, 0o700)?;
        let entries = std::fs::read_dir(path).map_err(io(path))?;
        for entry in entries.flatten() {
            remove_tree(&entry.path())?;
        }
        std::fs::remove_dir(path).map_err(io(path))
    } else {
        std::fs::remove_file(path).map_err(io(path))
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), StageError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io(path))
}

/// Creates `path` with `bytes`, fsynced, readable by the agent only from
/// its first byte (never created wider and narrowed after).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StageError> {
    write_with_mode(path, bytes, DOCUMENT_MODE)
}

/// Creates `path` (which must not exist) with `mode` and `bytes`, fsynced.
fn write_with_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), StageError> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io(path))?;
    file.write_all(bytes).map_err(io(path))?;
    file.sync_all().map_err(io(path))?;
    // The umask may have narrowed the mode asked for: set it exactly.
    set_mode(path, mode)
}

#[cfg(test)]
#[path = "deployment/tests.rs"]
pub(crate) mod tests;
