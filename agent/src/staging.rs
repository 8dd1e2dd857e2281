//! Installed releases on disk: `DATA/releases/<digest>/` holds the bundle as
//! received, the app file and the manifest. Nothing here is trusted on its
//! own word: loading a release re-verifies the bundle (signature and digest)
//! every time.
//!
//! A format-2 (tree) release is staged by [`tree`]: its tree
//! is `DATA/releases/<digest>/` and its signed manifest lies beside it at
//! `DATA/releases/<digest>.release`; [`load`], [`observe`] and
//! [`read_back`] tell the formats apart by that file.

/// Format-2 (tree) releases: the part of staging that fetches chunks and
/// assembles a tree (a child of this module: it shares its IO helpers).
pub mod tree;

/// The disk budget and housekeeping of staged releases.
pub mod disk;

/// Deployments: a release's code plus one configuration revision
/// (issue #24 item 1), installed under `DATA/deployments/<digest>/`.
pub mod deployment;

use crate::probe::ProbeExpect;
use ed25519_dalek::VerifyingKey;
use model::platform::Arch;
use model::Digest;
use protocol::bundle::{self, BundleError, Manifest};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The name of the bundle file inside a release directory.
pub const BUNDLE_FILE: &str = "bundle";
/// The temporary name an app file is rewritten under before it is renamed
/// over the real one (a dot file: never a manifest's app file name).
const APP_TEMP_FILE: &str = ".app.tmp";

/// A verified release ready to run, of either format: what the
/// supervisor starts and the probe judges comes from its signed manifest.
#[derive(Clone, Debug)]
pub struct Release {
    /// The identity that serves: the journal, the route's identity header
    /// and every report name it. A deployment's digest when this is a
    /// deployment, else the release's own digest.
    pub digest: Digest,
    /// The code's release digest: `digest` itself for a plain release,
    /// the deployment's code otherwise. The app gets it as
    /// `FLEETWEFT_RELEASE`.
    pub code: Digest,
    /// The configuration a deployment adds to its code; `None` for a
    /// plain release.
    pub configured: Option<std::sync::Arc<deployment::Configured>>,
    /// The directory the app runs in.
    pub dir: PathBuf,
    /// The manifest's name.
    pub name: String,
    /// The manifest's version.
    pub version: String,
    /// The command that starts the app, run in `dir`.
    pub run: Vec<String>,
    /// What the route probe expects.
    pub probe: ProbeExpect,
    /// What the app may use and who it runs as (a format-4 release's;
    /// none declared for the others).
    pub limits: releases::AppLimits,
    /// The data migration the release declares (format 5), run after
    /// staging and before the switch.
    pub migration: Option<releases::AppMigration>,
}

impl Release {
    /// What the route probe expects of this release.
    pub fn probe_expect(&self) -> ProbeExpect {
        self.probe.clone()
    }

    /// A format-1 release installed in `dir`.
    fn of_bundle(digest: Digest, dir: PathBuf, manifest: Manifest) -> Release {
        Release {
            digest,
            code: digest,
            configured: None,
            dir,
            name: manifest.name,
            version: manifest.version,
            run: manifest.run,
            probe: manifest.probe,
            limits: releases::AppLimits::default(),
            migration: None,
        }
    }

    /// This release's code run as deployment `digest` with `configured`:
    /// everything the manifest says (directory, run command, probe,
    /// limits, migration) stays the code's.
    pub fn deployed(self, digest: Digest, configured: deployment::Configured) -> Release {
        Release {
            digest,
            configured: Some(std::sync::Arc::new(configured)),
            ..self
        }
    }

    /// The environment the configuration adds for an instance (none for a
    /// plain release): [`deployment::Configured::env_for`].
    pub fn config_env(&self) -> Vec<(String, String)> {
        self.configured
            .as_ref()
            .map(|c| c.env_for(self.digest))
            .unwrap_or_default()
    }
}

/// Why staging failed; `permanent()` tells the recovery table's error class.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("bundle {digest} refused: {source}")]
    Refused {
        digest: Digest,
        #[source]
        source: BundleError,
    },
    #[error("bundle {digest}: its bytes hash to {actual}")]
    WrongDigest { digest: Digest, actual: Digest },
    #[error("staging {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A format-2 release manifest that does not verify (signature, format,
    /// paths, limits): it fails the same way again.
    #[error("release {digest} refused: {source}")]
    TreeRefused {
        digest: Digest,
        #[source]
        source: releases::ReleaseError,
    },
    /// Storing chunks or assembling the tree failed (disk, a chunk gone or
    /// damaged meanwhile): another attempt can succeed.
    #[error("staging the tree of release {digest}: {source}")]
    Tree {
        digest: Digest,
        #[source]
        source: releases::ReleaseError,
    },
    /// The installed tree no longer matches its signed manifest.
    #[error("the installed tree of release {digest} does not match its manifest: {source}")]
    TreeAltered {
        digest: Digest,
        #[source]
        source: releases::ReleaseError,
    },
    /// The release does not fit the agent's `[storage] max_bytes`, even
    /// with every release not in use removed ([`disk::make_room`]).
    #[error("no_space: needs {}, budget leaves {}", disk::bytes_text(*.needs), disk::bytes_text(*.left))]
    NoSpace {
        /// Bytes the release needs (tree, manifest, chunks not held).
        needs: u64,
        /// Bytes the budget leaves once housekeeping ran.
        left: u64,
    },
    /// A deployment document that does not decode as the deployment
    /// asked for (wrong digest, malformed, bad names): it fails the same
    /// way again.
    #[error("deployment {digest} refused: {source}")]
    DeploymentRefused {
        /// The deployment digest the `Apply` named.
        digest: Digest,
        #[source]
        source: releases::config::DeploymentError,
    },
}

impl StageError {
    /// A refused or mismatched bundle or release manifest fails the same
    /// way again; so does a release larger than the disk budget leaves
    /// (removing what is not in use already ran).
    pub fn permanent(&self) -> bool {
        matches!(
            self,
            StageError::Refused { .. }
                | StageError::WrongDigest { .. }
                | StageError::TreeRefused { .. }
                | StageError::NoSpace { .. }
                | StageError::DeploymentRefused { .. }
        )
    }
}

/// `DATA/releases`, created (and made durable) when it does not exist yet.
fn releases_parent(data_dir: &Path) -> Result<PathBuf, StageError> {
    let parent = data_dir.join("releases");
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StageError::Io { path, source }
    };
    if !parent.exists() {
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        // `releases/` is a new name in the data directory: durable only
        // once the data directory is synced.
        sync_dir(data_dir).map_err(io(data_dir))?;
    }
    Ok(parent)
}

/// The directory of a release.
pub fn release_dir(data_dir: &Path, digest: Digest) -> PathBuf {
    data_dir.join("releases").join(digest.to_hex())
}

/// Check fetched `bytes` as the bundle `digest`: they must hash to it and
/// verify under `key` (the verify stage; nothing is written).
pub fn verify(
    key: &VerifyingKey,
    digest: Digest,
    bytes: &[u8],
) -> Result<bundle::VerifiedBundle, StageError> {
    let actual = bundle::bundle_digest(bytes);
    if actual != digest {
        return Err(StageError::WrongDigest { digest, actual });
    }
    bundle::verify(key, bytes).map_err(|source| StageError::Refused { digest, source })
}

/// What recovery observes of an installed release (SPEC §5's third axis).
#[derive(Debug)]
pub enum Installed {
    /// Its bundle was re-read, re-hashed and re-verified: good. (Boxed:
    /// a release with its manifest dwarfs the other variants.)
    ReVerified(Box<Release>),
    /// Its directory does not exist: nothing of the stage's effect is there
    /// (installs are renamed into place whole, never half-written).
    Absent,
    /// Something is there that could not be shown good: unreadable, or
    /// bytes that hash to another digest or no longer verify.
    Unknown(StageError),
}

/// Observe the installed release `digest`, never trusting its presence:
/// see [`Installed`].
pub fn observe(data_dir: &Path, key: &VerifyingKey, arch: Arch, digest: Digest) -> Installed {
    // A deployment is there once its directory is (renamed into place
    // after its code was staged); loading it re-verifies both.
    let dir = if deployment::is_installed(data_dir, digest) {
        deployment::deployment_dir(data_dir, digest)
    } else {
        release_dir(data_dir, digest)
    };
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Installed::Absent,
        Err(source) => return Installed::Unknown(StageError::Io { path: dir, source }),
        Ok(_) => {}
    }
    match load(data_dir, key, arch, digest) {
        Ok(release) => Installed::ReVerified(Box::new(release)),
        Err(e) => Installed::Unknown(e),
    }
}

/// Verify `bytes` as the bundle `digest` and install it. The directory is
/// written under a temporary name, fsynced and renamed, so a crash never
/// leaves a half-installed release under the real name.
pub fn install(
    data_dir: &Path,
    key: &VerifyingKey,
    digest: Digest,
    bytes: &[u8],
) -> Result<Release, StageError> {
    let verified = verify(key, digest, bytes)?;
    let dir = release_dir(data_dir, digest);
    if dir.exists() {
        return load_code(data_dir, key, Arch::current(), digest);
    }
    let parent = releases_parent(data_dir)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StageError::Io { path, source }
    };
    let tmp = parent.join(format!(".{}.tmp", digest.to_hex()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    write_synced(&tmp.join(BUNDLE_FILE), bytes)?;
    write_synced(&tmp.join(&verified.manifest.app_file_name), &verified.app)?;
    // The files' names inside the new directory must be durable before the
    // directory gets its real name: otherwise a power cut can leave the
    // release under its final name with nothing in it, while the journal
    // already says it was staged (found by fleetweft-powercut: a verified
    // node came back with its serving release empty).
    sync_dir(&tmp).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &dir).map_err(io(&dir))?;
    sync_dir(&parent).map_err(io(&parent))?;
    Ok(Release::of_bundle(digest, dir, verified.manifest))
}

/// Read back the installed release `digest`: hash its bundle file, and
/// compare the app file that is started (and restarted by the supervisor)
/// with the app inside that bundle. Evidence for proofs; never trusted to
/// run, and never repairs anything (that is [`load`]'s job).
///
/// - bundle missing or unreadable, or app file unreadable =>
///   [`model::ArtifactRead::Unreadable`] (could not read);
/// - bundle bytes hash to another digest, or no longer verify =>
///   [`model::ArtifactRead::Digest`] of what is there (read something else);
/// - bundle intact but the app file differs =>
///   [`model::ArtifactRead::AppFileOf`] when it is, byte for byte, the
///   signed app of another format-1 release installed beside it
///   ([`release_with_app`]: an older release swapped in behind the route),
///   else [`model::ArtifactRead::AppFileAltered`] (read something else);
/// - otherwise `Digest(digest)`.
pub fn read_back(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
) -> model::ArtifactRead {
    read_back_as(data_dir, digest, |code| {
        read_back_code(data_dir, key, arch, code)
    })
}

/// The read-back of `digest`: of its code by `read_code` when it is a
/// release, or of the deployment it names ([`deployment::read_back`]).
fn read_back_as(
    data_dir: &Path,
    digest: Digest,
    read_code: impl FnOnce(Digest) -> model::ArtifactRead,
) -> model::ArtifactRead {
    if deployment::is_installed(data_dir, digest) {
        deployment::read_back(data_dir, digest, read_code)
    } else {
        read_code(digest)
    }
}

/// [`read_back`] of a release's code (never a deployment).
fn read_back_code(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
) -> model::ArtifactRead {
    if tree::is_installed_tree(data_dir, digest) {
        return tree::read_back(data_dir, key, arch, digest);
    }
    let verified = match read_installed(data_dir, key, digest) {
        Ok(verified) => verified,
        Err(StageError::Io { .. }) => return model::ArtifactRead::Unreadable,
        // Format-2 and disk budget errors do not come from a bundle read:
        // never reached.
        Err(
            StageError::TreeRefused { .. }
            | StageError::Tree { .. }
            | StageError::TreeAltered { .. }
            | StageError::NoSpace { .. }
            | StageError::DeploymentRefused { .. },
        ) => return model::ArtifactRead::Unreadable,
        Err(StageError::WrongDigest { actual, .. }) => return model::ArtifactRead::Digest(actual),
        // The bytes hash to the intended release, so they are it; they can
        // only stop verifying if the trusted key changed.
        Err(StageError::Refused { .. }) => return model::ArtifactRead::Digest(digest),
    };
    let app_file = release_dir(data_dir, digest).join(&verified.manifest.app_file_name);
    match std::fs::read(app_file) {
        Ok(app) if app == verified.app => model::ArtifactRead::Digest(digest),
        Ok(app) => match release_with_app(data_dir, key, digest, &app) {
            Some(release) => model::ArtifactRead::AppFileOf {
                installed: digest,
                release,
            },
            None => model::ArtifactRead::AppFileAltered(digest),
        },
        Err(_) => model::ArtifactRead::Unreadable,
    }
}

/// Most other installed releases [`release_with_app`] reads: each is a
/// bundle of at most 8 MiB read and verified, and the disk budget usually
/// keeps the serving release and the one before it, so this bounds the
/// cost of a read-back without missing the usual suspect.
pub const RELEASES_COMPARED_MAX: usize = 16;

/// The format-1 release installed beside `installed` whose signed app is,
/// byte for byte, `app`: what an altered app file really is, when it is a
/// release at all (issue #24 item 1). A release counts only if its bundle
/// hashes to its directory's name and verifies under `key`; its own app
/// file on disk is never trusted. Tree releases are not compared (their
/// app is a whole tree); at most [`RELEASES_COMPARED_MAX`] are read.
pub fn release_with_app(
    data_dir: &Path,
    key: &VerifyingKey,
    installed: Digest,
    app: &[u8],
) -> Option<Digest> {
    let entries = std::fs::read_dir(data_dir.join("releases")).ok()?;
    entries
        .flatten()
        .filter_map(|entry| crate::probe::parse_digest(entry.file_name().to_str()?))
        .filter(|d| *d != installed && !tree::is_installed_tree(data_dir, *d))
        .take(RELEASES_COMPARED_MAX)
        .find(|d| read_installed(data_dir, key, *d).is_ok_and(|v| v.app == app))
}

/// [`read_back`] for a running agent: a tree release is read back at a
/// bounded cost with what earlier read-backs verified
/// ([`tree::read_back_cached`]); a format-1 bundle (at most 8 MiB) is read
/// back whole, as always.
pub fn read_back_cached(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
    caches: &tree::ReadBacks,
) -> model::ArtifactRead {
    read_back_as(data_dir, digest, |code| {
        if tree::is_installed_tree(data_dir, code) {
            tree::read_back_cached(data_dir, key, arch, code, caches)
        } else {
            read_back_code(data_dir, key, arch, code)
        }
    })
}

/// Load an installed release, re-verifying its bundle and its app file;
/// or an installed deployment, its document decoded again and its code
/// loaded so ([`deployment::load_release`]).
pub fn load(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
) -> Result<Release, StageError> {
    if deployment::is_installed(data_dir, digest) {
        return deployment::load_release(data_dir, digest, |code| {
            load_code(data_dir, key, arch, code)
        });
    }
    load_code(data_dir, key, arch, digest)
}

/// [`load`] of a release's code (never a deployment).
pub fn load_code(
    data_dir: &Path,
    key: &VerifyingKey,
    arch: Arch,
    digest: Digest,
) -> Result<Release, StageError> {
    if tree::is_installed_tree(data_dir, digest) {
        return tree::load(data_dir, key, arch, digest);
    }
    let verified = read_installed(data_dir, key, digest)?;
    let dir = release_dir(data_dir, digest);
    // The app file is what runs: rewrite it from the verified bundle so a
    // tampered copy on disk is never started. Only when it differs, and
    // never in place: a power cut during an in-place rewrite (truncate,
    // write, fsync) tore the app file of a verified release, and the
    // proof then read it as altered until the next start (found by
    // fleetweft-powercut). A temporary file renamed over it is old or new.
    let app_file = dir.join(&verified.manifest.app_file_name);
    if std::fs::read(&app_file).ok().as_deref() != Some(verified.app.as_slice()) {
        replace_synced(&dir, &app_file, &verified.app)?;
    }
    Ok(Release::of_bundle(digest, dir, verified.manifest))
}

/// Read the installed bundle of `digest` and check it: its bytes must hash
/// to `digest` and verify under `key`. Shared by [`load`] (which then
/// rewrites the app file) and [`read_back`] (which only compares).
fn read_installed(
    data_dir: &Path,
    key: &VerifyingKey,
    digest: Digest,
) -> Result<bundle::VerifiedBundle, StageError> {
    let path = release_dir(data_dir, digest).join(BUNDLE_FILE);
    let bytes = std::fs::read(&path).map_err(|source| StageError::Io { path, source })?;
    let actual = bundle::bundle_digest(&bytes);
    if actual != digest {
        return Err(StageError::WrongDigest { digest, actual });
    }
    bundle::verify(key, &bytes).map_err(|source| StageError::Refused { digest, source })
}

/// Replaces `path` (in `dir`) with `bytes` atomically and durably: a
/// temporary file, fsynced, renamed over it, then the directory fsynced.
fn replace_synced(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), StageError> {
    let tmp = dir.join(APP_TEMP_FILE);
    write_synced(&tmp, bytes)?;
    let io = |source| StageError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::rename(&tmp, path).map_err(io)?;
    sync_dir(dir).map_err(io)
}

/// Fsyncs a directory: the names created or renamed in it become durable.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Creates `path` with `bytes` and fsyncs it.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StageError> {
    let io = |source| StageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::create(path).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::bundle::{ManifestFields, ProbeSpec};

    fn signed(signing: &ed25519_dalek::SigningKey) -> Vec<u8> {
        signed_app(signing, b"print('hi')", "v1")
    }

    fn signed_app(signing: &ed25519_dalek::SigningKey, app: &[u8], version: &str) -> Vec<u8> {
        bundle::sign(
            signing,
            app,
            ManifestFields {
                name: "t".into(),
                version: version.into(),
                app_file_name: "app.py".into(),
                run: vec!["python3".into(), "app.py".into()],
                probe: ProbeSpec {
                    path: "/".into(),
                    expect_status: 200,
                    expect_body: "hi".into(),
                    expect_json: None,
                },
            },
        )
        .expect("sign")
    }

    #[test]
    fn observe_tells_absent_from_reverified_from_unknown() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (signing, verifying) = bundle::keygen();
        let bytes = signed(&signing);
        let digest = bundle::bundle_digest(&bytes);
        assert!(matches!(
            observe(dir.path(), &verifying, Arch::current(), digest),
            Installed::Absent
        ));
        // A crash mid-install leaves only the temporary directory: absent.
        let tmp = dir
            .path()
            .join("releases")
            .join(format!(".{}.tmp", digest.to_hex()));
        std::fs::create_dir_all(&tmp).expect("tmp dir");
        std::fs::write(tmp.join(BUNDLE_FILE), &bytes[..bytes.len() / 2]).expect("half");
        assert!(matches!(
            observe(dir.path(), &verifying, Arch::current(), digest),
            Installed::Absent
        ));
        install(dir.path(), &verifying, digest, &bytes).expect("install");
        assert!(matches!(
            observe(dir.path(), &verifying, Arch::current(), digest),
            Installed::ReVerified(r) if r.digest == digest
        ));
        // The directory is there but its bundle changed: not good, not
        // absent. Acting again could apply something twice: unknown.
        let file = release_dir(dir.path(), digest).join(BUNDLE_FILE);
        let mut changed = bytes.clone();
        changed[0] ^= 1;
        std::fs::write(&file, &changed).expect("tamper");
        assert!(matches!(
            observe(dir.path(), &verifying, Arch::current(), digest),
            Installed::Unknown(StageError::WrongDigest { .. })
        ));
        // The directory is there but its bundle is gone: unknown too.
        std::fs::remove_file(&file).expect("remove");
        assert!(matches!(
            observe(dir.path(), &verifying, Arch::current(), digest),
            Installed::Unknown(StageError::Io { .. })
        ));
    }

    #[test]
    fn verify_names_a_wrong_digest_and_a_bad_signature_apart() {
        let (signing, verifying) = bundle::keygen();
        let bytes = signed(&signing);
        let digest = bundle::bundle_digest(&bytes);
        assert!(verify(&verifying, digest, &bytes).is_ok());
        let mut changed = bytes.clone();
        changed[0] ^= 1;
        let e = verify(&verifying, digest, &changed).expect_err("changed bytes");
        assert!(matches!(e, StageError::WrongDigest { .. }) && e.permanent());
        let (_, other_key) = bundle::keygen();
        let e = verify(&other_key, digest, &bytes).expect_err("foreign key");
        assert!(matches!(e, StageError::Refused { .. }) && e.permanent());
    }

    /// Issue #24 item 1: an altered app file that is another installed
    /// release's signed app is named as that release; one that is no
    /// release's, or the app of a release whose bundle no longer verifies,
    /// stays merely altered.
    #[test]
    fn read_back_names_the_release_whose_app_runs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path();
        let (signing, verifying) = bundle::keygen();
        let v1 = signed_app(&signing, b"print('v1')", "v1");
        let v2 = signed_app(&signing, b"print('v2')", "v2");
        let (d1, d2) = (bundle::bundle_digest(&v1), bundle::bundle_digest(&v2));
        install(data, &verifying, d1, &v1).expect("install v1");
        install(data, &verifying, d2, &v2).expect("install v2");
        let app_file = release_dir(data, d2).join("app.py");
        std::fs::write(&app_file, b"print('v1')").expect("swap v1's app in");
        assert_eq!(
            read_back(data, &verifying, Arch::current(), d2),
            model::ArtifactRead::AppFileOf {
                installed: d2,
                release: d1,
            }
        );
        // v1's own app file on disk is not what counts: its signed app is.
        std::fs::write(release_dir(data, d1).join("app.py"), b"print('x')").expect("alter");
        assert_eq!(
            read_back(data, &verifying, Arch::current(), d2),
            model::ArtifactRead::AppFileOf {
                installed: d2,
                release: d1,
            }
        );
        std::fs::write(&app_file, b"print('x')").expect("no release's app");
        assert_eq!(
            read_back(data, &verifying, Arch::current(), d2),
            model::ArtifactRead::AppFileAltered(d2)
        );
        // v1's bundle no longer verifies: it names nothing.
        std::fs::write(&app_file, b"print('v1')").expect("swap v1's app in");
        let bundle_file = release_dir(data, d1).join(BUNDLE_FILE);
        let mut changed = v1.clone();
        changed[0] ^= 1;
        std::fs::write(&bundle_file, &changed).expect("tamper v1's bundle");
        assert_eq!(
            read_back(data, &verifying, Arch::current(), d2),
            model::ArtifactRead::AppFileAltered(d2)
        );
    }

    #[test]
    fn read_back_hashes_what_is_on_disk() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (signing, verifying) = bundle::keygen();
        let bytes = signed(&signing);
        let digest = bundle::bundle_digest(&bytes);
        assert_eq!(
            read_back(dir.path(), &verifying, Arch::current(), digest),
            model::ArtifactRead::Unreadable
        );
        install(dir.path(), &verifying, digest, &bytes).expect("install");
        assert_eq!(
            read_back(dir.path(), &verifying, Arch::current(), digest),
            model::ArtifactRead::Digest(digest)
        );
        // The app file that runs is changed behind the agent's back: the
        // bundle is intact, but something else would start.
        let app_file = release_dir(dir.path(), digest).join("app.py");
        let original = std::fs::read(&app_file).expect("app file");
        std::fs::write(&app_file, b"print('not the signed app')").expect("tamper app");
        assert_eq!(
            read_back(dir.path(), &verifying, Arch::current(), digest),
            model::ArtifactRead::AppFileAltered(digest)
        );
        // Loading the release (what every start does) rewrites it from the
        // verified bundle; the read-back agrees again.
        load(dir.path(), &verifying, Arch::current(), digest).expect("load");
        assert_eq!(std::fs::read(&app_file).expect("app file"), original);
        assert_eq!(
            read_back(dir.path(), &verifying, Arch::current(), digest),
            model::ArtifactRead::Digest(digest)
        );
        std::fs::remove_file(&app_file).expect("remove app");
        assert_eq!(
            read_back(dir.path(), &verifying, Arch::current(), digest),
            model::ArtifactRead::Unreadable
        );
        load(dir.path(), &verifying, Arch::current(), digest).expect("load");
        // The bundle changed on disk behind the agent's back: the read-back
        // reports the digest of what is there.
        let file = release_dir(dir.path(), digest).join(BUNDLE_FILE);
        let mut changed = bytes.clone();
        changed[0] ^= 1;
        std::fs::write(&file, &changed).expect("tamper");
        assert_eq!(
            read_back(dir.path(), &verifying, Arch::current(), digest),
            model::ArtifactRead::Digest(bundle::bundle_digest(&changed))
        );
        std::fs::remove_file(&file).expect("remove");
        assert_eq!(
            read_back(dir.path(), &verifying, Arch::current(), digest),
            model::ArtifactRead::Unreadable
        );
    }
}
