//! The format-2 release manifest: a signed list of entries (path, mode,
//! size, whole-file SHA-256 and the ordered chunks of its content), with
//! the run command, the probe, the name and the version.
//!
//! # Release file (format 2)
//!
//! ```text
//! "FLEETWEFT-RELEASE-2\n"   magic, 20 bytes
//! u32 big-endian            manifest_len, at most MANIFEST_BYTES_MAX
//! manifest_len bytes        the manifest, bincode 2 (standard: varint, LE)
//! 64 bytes                  Ed25519 signature over
//!                           b"fleetweft-release-manifest-v2\0" || manifest
//! ```
//!
//! The release identity is the SHA-256 of the whole release file (the
//! signed manifest): it covers every entry and every chunk digest, so a
//! chunk is trusted by its digest alone (SPEC §11, S15). Nothing may
//! follow the signature. The encoding is pinned by `tests/golden.rs`.
//!
//! Entries are strictly ascending by path bytes: the encoding of one tree is
//! unique, and a duplicate path cannot be expressed. Only files are listed;
//! directories are implied by paths (an empty directory is not released).
//!
//! # One release for every architecture (format 3, issue #24 item 5)
//!
//! A manifest whose `format` is 3 carries, after the format-2 fields, a
//! list of per-architecture trees ([`ArchTree`]: `x86_64`, `aarch64`, at
//! most one each, in that order). The release file's framing, magic and
//! signature domain are the format-2 ones: the format number is inside the
//! signed bytes, so a format-3 manifest never reads as a format-2 one. A
//! node of architecture A stages the common `entries` together with A's
//! tree ([`Manifest::into_arch`]: one tree, checked as a format-2 tree is);
//! a node whose architecture has no tree is refused. A manifest without
//! architecture trees is written as format 2, byte for byte as before, and
//! runs on every architecture. Pinned by `tests/golden.rs`
//! (`release_v3_arch.hex`).
//!
//! # Limits and a user (format 4, issue #24 item 4)
//!
//! A manifest whose `format` is 4 carries, after the format-2 fields, the
//! architecture trees (possibly none) and then the app's limits
//! ([`AppLimits`]: memory, CPU, open files, processes, user), signed like
//! the rest. A manifest that declares no limit is written as format 2 or 3,
//! byte for byte as before, so each release has one encoding. Pinned by
//! `tests/golden.rs` (`release_v4_limits.hex`).
//!
//! # A data migration (format 5, issue #24 item 2)
//!
//! A manifest whose `format` is 5 carries, after format 4's fields (the
//! trees and the limits, each possibly empty), the release's migration
//! ([`AppMigration`]: the `migrate` command and whether it is
//! irreversible), signed like the rest. A manifest without a migration is
//! written as format 2, 3 or 4, byte for byte as before. Pinned by
//! `tests/golden.rs` (`release_v5_migration.hex`).

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use model::platform::{Arch, ArchSet, ReleaseArches};
use model::Digest;
use protocol::bundle::{self, JsonField, ProbeSpec};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::app_limits::AppLimits;
use crate::app_migration::AppMigration;
use crate::error::ReleaseError;
use crate::limits::{
    CHUNKS_MAX, CHUNK_BYTES_MAX, ENTRIES_MAX, MANIFEST_BYTES_MAX, MANIFEST_DECODE_BYTES_MAX,
    RELEASE_BYTES_MAX, SIGNATURE_BYTES,
};

/// First bytes of every format-2 release file.
pub const MAGIC: &[u8] = b"FLEETWEFT-RELEASE-2\n";
/// Largest release file: magic, length, manifest and signature.
pub const RELEASE_FILE_BYTES_MAX: u64 =
    MAGIC.len() as u64 + 4 + MANIFEST_BYTES_MAX as u64 + SIGNATURE_BYTES as u64;
// The largest signed release file fits the QUIC transfer's bound for a
// signed file (`protocol::quic`, which cannot name this crate).
const _: () = assert!(RELEASE_FILE_BYTES_MAX <= protocol::quic::SIGNED_FILE_BYTES_MAX);
/// The manifest format this module writes and reads for a release without
/// per-architecture trees.
pub const MANIFEST_FORMAT: u16 = 2;
/// The manifest format of a release with per-architecture trees: format 2's
/// fields followed by the trees ([`ArchTree`]).
pub const MANIFEST_FORMAT_ARCH: u16 = 3;
/// The manifest format of a release that declares limits or a user
/// ([`AppLimits`]): format 3's fields (its trees possibly none) followed
/// by the limits.
pub const MANIFEST_FORMAT_LIMITS: u16 = 4;
/// The manifest format of a release that declares a data migration
/// ([`AppMigration`]): format 4's fields (trees and limits possibly empty)
/// followed by the migration.
pub const MANIFEST_FORMAT_MIGRATION: u16 = 5;
/// Prefix of the signed message: a release signature is never a valid
/// signature over a format-1 manifest or anything else.
const SIGNATURE_DOMAIN: &[u8] = b"fleetweft-release-manifest-v2\0";

/// A SHA-256 digest, 32 bytes.
pub type Sha256Bytes = [u8; 32];

/// What the agent may do with a file: read it, or also execute it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// A regular file, staged with mode 0644.
    File,
    /// An executable regular file, staged with mode 0755.
    Executable,
}

impl Mode {
    /// The Unix permission bits a file of this mode is staged with.
    pub fn permissions(self) -> u32 {
        match self {
            Mode::File => 0o644,
            Mode::Executable => 0o755,
        }
    }

    /// The mode of a file with these permission bits: executable when the
    /// owner may execute it.
    pub fn of_permissions(bits: u32) -> Mode {
        if bits & 0o100 != 0 {
            Mode::Executable
        } else {
            Mode::File
        }
    }
}

/// One chunk of a file's content, named by its SHA-256.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkRef {
    /// SHA-256 of the chunk's bytes (plain, no domain prefix, so
    /// `sha256sum` of a chunk file names it).
    pub sha256: Sha256Bytes,
    /// The chunk's length in bytes, 1 to [`CHUNK_BYTES_MAX`].
    pub len: u32,
}

impl ChunkRef {
    /// The digest as lowercase hex: the chunk's file name in a store.
    pub fn hex(&self) -> String {
        hex::encode(self.sha256)
    }
}

/// One file of the tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Relative path, `/`-separated (see [`crate::path`]).
    pub path: String,
    /// Regular or executable.
    pub mode: Mode,
    /// Size in bytes: the sum of the chunk lengths.
    pub size: u64,
    /// SHA-256 of the whole file.
    pub sha256: Sha256Bytes,
    /// The content, in order.
    pub chunks: Vec<ChunkRef>,
}

/// The probe as the manifest encodes it: [`ProbeSpec`] with the JSON value
/// as compact JSON text (bincode cannot encode a free-form JSON value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// The HTTP path to GET.
    pub path: String,
    /// The expected status.
    pub expect_status: u16,
    /// The expected body (empty when `expect_json` judges it).
    pub expect_body: String,
    /// `(pointer, value as compact JSON text)`.
    pub expect_json: Option<(String, String)>,
}

impl Probe {
    /// The manifest form of a probe spec.
    pub fn from_spec(spec: &ProbeSpec) -> Probe {
        Probe {
            path: spec.path.clone(),
            expect_status: spec.expect_status,
            expect_body: spec.expect_body.clone(),
            expect_json: spec
                .expect_json
                .as_ref()
                .map(|f| (f.pointer.clone(), f.equals.to_string())),
        }
    }

    /// The probe spec the agent judges with.
    pub fn to_spec(&self) -> Result<ProbeSpec, ReleaseError> {
        let expect_json = match &self.expect_json {
            None => None,
            Some((pointer, text)) => Some(JsonField {
                pointer: pointer.clone(),
                equals: serde_json::from_str(text).map_err(|e| {
                    ReleaseError::Malformed(format!("probe JSON value {text:?}: {e}"))
                })?,
            }),
        };
        Ok(ProbeSpec {
            path: self.path.clone(),
            expect_status: self.expect_status,
            expect_body: self.expect_body.clone(),
            expect_json,
        })
    }
}

/// The signed description of a release tree. A format-1 bundle read as a
/// tree ([`crate::v1`]) has `format` 1 and is never encoded as format 2.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`].
    pub format: u16,
    /// Release name.
    pub name: String,
    /// Release version.
    pub version: String,
    /// The command that starts the app, run in the release directory.
    pub run: Vec<String>,
    /// How to check that the app serves.
    pub probe: Probe,
    /// The files, strictly ascending by path bytes.
    pub entries: Vec<Entry>,
    /// Id of the signing key ([`protocol::bundle::key_id`]).
    pub key_id: [u8; 8],
    /// Per-architecture trees (formats 3 and 4; empty in format 2): each
    /// node stages `entries` together with its architecture's tree.
    pub arch_trees: Vec<ArchTree>,
    /// What the app may use and who it runs as (formats 4 and 5; empty in
    /// formats 2 and 3).
    pub limits: AppLimits,
    /// The data migration (format 5 only; `None` in formats 2 to 4).
    pub migration: Option<AppMigration>,
}

/// The files only nodes of one architecture stage, besides the common
/// entries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchTree {
    /// The architecture (`x86_64` or `aarch64`).
    pub arch: Arch,
    /// Its files, strictly ascending by path bytes; merged with the common
    /// entries they form one valid tree (no path twice, no file that is
    /// also a directory).
    pub entries: Vec<Entry>,
}

/// The format-2 fields as they are encoded, in order (a format-3 manifest
/// is these followed by its `Vec<ArchTree>`).
#[derive(Serialize)]
struct WireRef<'a> {
    format: u16,
    name: &'a str,
    version: &'a str,
    run: &'a [String],
    probe: &'a Probe,
    entries: &'a [Entry],
    key_id: [u8; 8],
}

/// [`WireRef`], decoded.
#[derive(Deserialize)]
struct Wire {
    format: u16,
    name: String,
    version: String,
    run: Vec<String>,
    probe: Probe,
    entries: Vec<Entry>,
    key_id: [u8; 8],
}

impl Manifest {
    /// Every entry: the common ones, then each architecture tree's.
    pub fn all_entries(&self) -> impl Iterator<Item = &Entry> {
        let trees = self.arch_trees.iter().flat_map(|t| t.entries.iter());
        self.entries.iter().chain(trees)
    }

    /// Sum of the sizes of every entry (every architecture tree's too), in
    /// bytes.
    pub fn total_bytes(&self) -> u64 {
        self.all_entries().map(|e| e.size).sum()
    }

    /// Number of chunk references (a chunk named twice counts twice).
    pub fn chunk_count(&self) -> usize {
        self.all_entries().map(|e| e.chunks.len()).sum()
    }

    /// The distinct chunks of every tree, each once, in first-use order
    /// (what the controller's store must hold; a node fetches those of
    /// [`Manifest::into_arch`]).
    pub fn unique_chunks(&self) -> Vec<ChunkRef> {
        let mut seen = std::collections::HashSet::new();
        let all = self.all_entries().flat_map(|e| e.chunks.iter());
        all.filter(|c| seen.insert(c.sha256)).copied().collect()
    }

    /// Checks every rule but the signature: the format, the fields shared
    /// with format 1, the paths and every limit; in format 3, the
    /// architecture trees and the tree each node of one would stage.
    pub fn validate(&self) -> Result<(), ReleaseError> {
        let trees = !self.arch_trees.is_empty();
        if self.format == MANIFEST_FORMAT_MIGRATION || self.migration.is_some() {
            return self.validate_migration();
        }
        match (self.format, trees, self.limits.is_empty()) {
            (MANIFEST_FORMAT, false, true) => self.validate_tree(),
            (MANIFEST_FORMAT_ARCH, true, true) => self.validate_arch_trees(),
            (MANIFEST_FORMAT_LIMITS, _, false) => {
                self.limits.validate()?;
                if trees {
                    self.validate_arch_trees()
                } else {
                    self.validate_tree()
                }
            }
            (MANIFEST_FORMAT_LIMITS, _, true) => Err(ReleaseError::BadAppLimit {
                field: "format",
                problem: format!(
                    "format {MANIFEST_FORMAT_LIMITS} declares at least one limit (without, the release is format {MANIFEST_FORMAT} or {MANIFEST_FORMAT_ARCH})"
                ),
            }),
            (MANIFEST_FORMAT | MANIFEST_FORMAT_ARCH, _, false) => Err(ReleaseError::BadAppLimit {
                field: "format",
                problem: format!(
                    "format {} has none (format {MANIFEST_FORMAT_LIMITS} carries them)",
                    self.format
                ),
            }),
            (MANIFEST_FORMAT, true, _) => Err(ReleaseError::BadArchTrees(format!(
                "format {MANIFEST_FORMAT} has none (format {MANIFEST_FORMAT_ARCH} carries them)"
            ))),
            (MANIFEST_FORMAT_ARCH, false, _) => Err(ReleaseError::BadArchTrees(format!(
                "format {MANIFEST_FORMAT_ARCH} needs at least one"
            ))),
            (other, _, _) => Err(ReleaseError::UnsupportedFormat(other)),
        }
    }

    /// Format 5: a migration, and the rest as format 4 has it (limits and
    /// trees each possibly empty). A migration in another format, or
    /// format 5 without one, is refused naming both.
    fn validate_migration(&self) -> Result<(), ReleaseError> {
        let Some(migration) = &self.migration else {
            return Err(ReleaseError::BadMigration(format!(
                "format {MANIFEST_FORMAT_MIGRATION} declares one (without, the release is format {MANIFEST_FORMAT} to {MANIFEST_FORMAT_LIMITS})"
            )));
        };
        if self.format != MANIFEST_FORMAT_MIGRATION {
            return Err(ReleaseError::BadMigration(format!(
                "format {} has none (format {MANIFEST_FORMAT_MIGRATION} carries it)",
                self.format
            )));
        }
        migration.validate()?;
        if !self.limits.is_empty() {
            self.limits.validate()?;
        }
        if self.arch_trees.is_empty() {
            self.validate_tree()
        } else {
            self.validate_arch_trees()
        }
    }

    /// The architectures this release runs on: any, or only those it has
    /// a tree for.
    pub fn arches(&self) -> ReleaseArches {
        if self.arch_trees.is_empty() {
            ReleaseArches::Any
        } else {
            ReleaseArches::Only(ArchSet::of(self.arch_trees.iter().map(|t| t.arch)))
        }
    }

    /// The tree a node of `arch` stages: the manifest itself when it has
    /// no architecture trees; otherwise the common entries merged with
    /// `arch`'s tree, as a format-2 tree without architecture trees (what
    /// staging, assembly and every read-back check the node's directory
    /// against). `NoTreeForArch` when the release has no tree for `arch`.
    pub fn into_arch(mut self, arch: Arch) -> Result<Manifest, ReleaseError> {
        if self.arch_trees.is_empty() {
            return Ok(self);
        }
        let has = ArchSet::of(self.arch_trees.iter().map(|t| t.arch));
        let at = self
            .arch_trees
            .iter()
            .position(|t| t.arch == arch)
            .ok_or(ReleaseError::NoTreeForArch { arch, has })?;
        let own = self.arch_trees.swap_remove(at).entries;
        self.arch_trees = Vec::new();
        // The tree view of one architecture: format 2's, or format 4's
        // when the release declares limits, or 5's with a migration (they
        // apply on every node).
        self.format = format_of(false, &self.limits, self.migration.as_ref());
        self.entries = merge_entries(std::mem::take(&mut self.entries), own);
        Ok(self)
    }

    /// Format 3: one tree per architecture at most, `x86_64` before
    /// `aarch64`, none for another; each node's merged tree keeps every
    /// rule of a format-2 tree, and the whole manifest (every tree counted)
    /// keeps the release limits.
    fn validate_arch_trees(&self) -> Result<(), ReleaseError> {
        let arches: Vec<Arch> = self.arch_trees.iter().map(|t| t.arch).collect();
        if let Some(bad) = arches.iter().find(|a| !Arch::WITH_TREES.contains(a)) {
            return Err(ReleaseError::BadArchTrees(format!(
                "no tree can be for {bad} (only x86_64 and aarch64)"
            )));
        }
        if arches.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ReleaseError::BadArchTrees(
                "out of order or twice (x86_64 first, then aarch64, each once)".into(),
            ));
        }
        let all = || self.all_entries();
        over_limit("entries", all().count() as u64, ENTRIES_MAX as u64)?;
        let total = all().fold(0u64, |sum, e| sum.saturating_add(e.size));
        over_limit("release bytes", total, RELEASE_BYTES_MAX)?;
        let chunks: u64 = all().map(|e| e.chunks.len() as u64).sum();
        over_limit("chunks", chunks, CHUNKS_MAX as u64)?;
        for tree in &self.arch_trees {
            crate::path::validate_tree_paths(tree.entries.iter().map(|e| e.path.as_str()))?;
            self.clone().into_arch(tree.arch)?.validate_tree()?;
        }
        Ok(())
    }

    /// [`Manifest::validate`] without the format check: what a tree view
    /// of either format must satisfy.
    pub fn validate_tree(&self) -> Result<(), ReleaseError> {
        let spec = self.probe.to_spec()?;
        bundle::check_release_fields(&self.name, &self.version, &self.run, &spec)?;
        over_limit("entries", self.entries.len() as u64, ENTRIES_MAX as u64)?;
        crate::path::validate_tree_paths(self.entries.iter().map(|e| e.path.as_str()))?;
        let mut total: u64 = 0;
        let mut chunks: u64 = 0;
        for entry in &self.entries {
            check_entry(entry)?;
            total = total.saturating_add(entry.size);
            chunks += entry.chunks.len() as u64;
        }
        over_limit("release bytes", total, RELEASE_BYTES_MAX)?;
        over_limit("chunks", chunks, CHUNKS_MAX as u64)
    }
}

/// Two lists each ascending by path bytes, merged in that order (a path in
/// both stays twice, for [`crate::path::validate_tree_paths`] to refuse).
fn merge_entries(common: Vec<Entry>, own: Vec<Entry>) -> Vec<Entry> {
    let mut merged = Vec::with_capacity(common.len() + own.len());
    let mut common = common.into_iter().peekable();
    let mut own = own.into_iter().peekable();
    loop {
        let take_common = match (common.peek(), own.peek()) {
            (Some(c), Some(o)) => c.path.as_bytes() <= o.path.as_bytes(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return merged,
        };
        let next = if take_common {
            common.next()
        } else {
            own.next()
        };
        merged.extend(next);
    }
}

/// `OverLimit` when `value > max`.
pub(crate) fn over_limit(what: &'static str, value: u64, max: u64) -> Result<(), ReleaseError> {
    if value > max {
        return Err(ReleaseError::OverLimit { what, value, max });
    }
    Ok(())
}

/// An entry's chunks are each 1 to [`CHUNK_BYTES_MAX`] bytes and add up to
/// its size.
fn check_entry(entry: &Entry) -> Result<(), ReleaseError> {
    let mut sum: u64 = 0;
    for chunk in &entry.chunks {
        if chunk.len == 0 || chunk.len > CHUNK_BYTES_MAX {
            return Err(ReleaseError::BadChunkLength {
                path: entry.path.clone(),
                len: chunk.len.into(),
                max: CHUNK_BYTES_MAX.into(),
            });
        }
        sum += u64::from(chunk.len);
    }
    if sum != entry.size {
        return Err(ReleaseError::SizeMismatch {
            path: entry.path.clone(),
            size: entry.size,
            chunks: sum,
        });
    }
    Ok(())
}

/// What the signer chooses besides the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseFields {
    /// Release name.
    pub name: String,
    /// Release version.
    pub version: String,
    /// The command that starts the app.
    pub run: Vec<String>,
    /// How to check that the app serves.
    pub probe: ProbeSpec,
    /// What the app may use and who it runs as; empty: nothing declared
    /// (the release is format 2 or 3).
    pub limits: AppLimits,
    /// The data migration; `None`: none (the release is format 2 to 4,
    /// byte for byte as before migrations).
    pub migration: Option<AppMigration>,
}

/// The one format a release is written in: the lowest that carries what
/// it declares.
fn format_of(trees: bool, limits: &AppLimits, migration: Option<&AppMigration>) -> u16 {
    if migration.is_some() {
        MANIFEST_FORMAT_MIGRATION
    } else if !limits.is_empty() {
        MANIFEST_FORMAT_LIMITS
    } else if trees {
        MANIFEST_FORMAT_ARCH
    } else {
        MANIFEST_FORMAT
    }
}

/// A release whose signature and rules have been checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedRelease {
    /// The manifest.
    pub manifest: Manifest,
    /// The release identity: SHA-256 of the release file.
    pub digest: Digest,
}

type Config = bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<MANIFEST_DECODE_BYTES_MAX>,
>;

/// The bincode configuration: the limit bounds what the decoder allocates
/// for a claimed length, whatever the input claims. (The encoded size is
/// checked against [`MANIFEST_BYTES_MAX`] separately.)
fn config() -> Config {
    bincode::config::standard().with_limit::<MANIFEST_DECODE_BYTES_MAX>()
}

/// Encodes a manifest (no validation, no signature): the format-2 fields,
/// then, in format 3, the architecture trees.
pub fn encode_manifest(manifest: &Manifest) -> Result<Vec<u8>, ReleaseError> {
    let wire = WireRef {
        format: manifest.format,
        name: &manifest.name,
        version: &manifest.version,
        run: &manifest.run,
        probe: &manifest.probe,
        entries: &manifest.entries,
        key_id: manifest.key_id,
    };
    let encoding =
        |e: bincode::error::EncodeError| ReleaseError::Malformed(format!("encoding: {e}"));
    let mut bytes = bincode::serde::encode_to_vec(&wire, config()).map_err(encoding)?;
    let format = manifest.format;
    if (MANIFEST_FORMAT_ARCH..=MANIFEST_FORMAT_MIGRATION).contains(&format) {
        let trees =
            bincode::serde::encode_to_vec(&manifest.arch_trees, config()).map_err(encoding)?;
        bytes.extend_from_slice(&trees);
    }
    if format == MANIFEST_FORMAT_LIMITS || format == MANIFEST_FORMAT_MIGRATION {
        let limits = bincode::serde::encode_to_vec(&manifest.limits, config()).map_err(encoding)?;
        bytes.extend_from_slice(&limits);
    }
    if let (MANIFEST_FORMAT_MIGRATION, Some(migration)) = (format, &manifest.migration) {
        let migration = bincode::serde::encode_to_vec(migration, config()).map_err(encoding)?;
        bytes.extend_from_slice(&migration);
    }
    over_limit(
        "manifest bytes",
        bytes.len() as u64,
        MANIFEST_BYTES_MAX as u64,
    )?;
    Ok(bytes)
}

/// Decodes and validates a manifest's bytes (no signature check: only
/// [`verify`] proves who wrote it). Public for the fuzz target.
pub fn decode_manifest(bytes: &[u8]) -> Result<Manifest, ReleaseError> {
    over_limit(
        "manifest bytes",
        bytes.len() as u64,
        MANIFEST_BYTES_MAX as u64,
    )?;
    let malformed = |e: bincode::error::DecodeError| ReleaseError::Malformed(e.to_string());
    let (wire, mut used): (Wire, usize) =
        bincode::serde::decode_from_slice(bytes, config()).map_err(malformed)?;
    let mut arch_trees = Vec::new();
    let format = wire.format;
    if (MANIFEST_FORMAT_ARCH..=MANIFEST_FORMAT_MIGRATION).contains(&format) {
        let (trees, more) =
            bincode::serde::decode_from_slice(&bytes[used..], config()).map_err(malformed)?;
        arch_trees = trees;
        used += more;
    }
    let mut limits = AppLimits::default();
    if format == MANIFEST_FORMAT_LIMITS || format == MANIFEST_FORMAT_MIGRATION {
        let (declared, more) =
            bincode::serde::decode_from_slice(&bytes[used..], config()).map_err(malformed)?;
        limits = declared;
        used += more;
    }
    let mut migration = None;
    if format == MANIFEST_FORMAT_MIGRATION {
        let (declared, more) =
            bincode::serde::decode_from_slice(&bytes[used..], config()).map_err(malformed)?;
        migration = Some(declared);
        used += more;
    }
    let manifest = Manifest {
        format: wire.format,
        name: wire.name,
        version: wire.version,
        run: wire.run,
        probe: wire.probe,
        entries: wire.entries,
        key_id: wire.key_id,
        arch_trees,
        limits,
        migration,
    };
    if used != bytes.len() {
        return Err(ReleaseError::TrailingBytes(
            (bytes.len() - used) as u64,
            "encoded manifest",
        ));
    }
    manifest.validate()?;
    Ok(manifest)
}

fn signed_message(manifest: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(SIGNATURE_DOMAIN.len() + manifest.len());
    message.extend_from_slice(SIGNATURE_DOMAIN);
    message.extend_from_slice(manifest);
    message
}

/// Builds, validates and signs the manifest of `entries`; returns the
/// release file's bytes (its SHA-256 is the release identity).
pub fn sign(
    key: &SigningKey,
    fields: ReleaseFields,
    entries: Vec<Entry>,
) -> Result<Vec<u8>, ReleaseError> {
    sign_arches(key, fields, entries, Vec::new())
}

/// [`sign`] with per-architecture trees: format 3 when `arch_trees` is not
/// empty, else exactly [`sign`]'s format 2.
pub fn sign_arches(
    key: &SigningKey,
    fields: ReleaseFields,
    entries: Vec<Entry>,
    arch_trees: Vec<ArchTree>,
) -> Result<Vec<u8>, ReleaseError> {
    let format = format_of(
        !arch_trees.is_empty(),
        &fields.limits,
        fields.migration.as_ref(),
    );
    let manifest = Manifest {
        format,
        name: fields.name,
        version: fields.version,
        run: fields.run,
        probe: Probe::from_spec(&fields.probe),
        entries,
        key_id: bundle::key_id(&key.verifying_key()),
        arch_trees,
        limits: fields.limits,
        migration: fields.migration,
    };
    manifest.validate()?;
    let bytes = encode_manifest(&manifest)?;
    let signature = key.sign(&signed_message(&bytes));
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + bytes.len() + SIGNATURE_BYTES);
    out.extend_from_slice(MAGIC);
    // Lossless: bounded by MANIFEST_BYTES_MAX in encode_manifest.
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(&bytes);
    out.extend_from_slice(&signature.to_bytes());
    Ok(out)
}

/// The parts of a release file, framing checked, nothing else.
pub struct Parts<'a> {
    /// The encoded manifest.
    pub manifest: &'a [u8],
    /// The signature.
    pub signature: [u8; 64],
}

/// Splits a release file into manifest and signature.
pub fn split(bytes: &[u8]) -> Result<Parts<'_>, ReleaseError> {
    let rest = bytes.strip_prefix(MAGIC).ok_or(ReleaseError::NotARelease)?;
    over_limit(
        "release file bytes",
        bytes.len() as u64,
        RELEASE_FILE_BYTES_MAX,
    )?;
    let (len, rest) = rest
        .split_first_chunk::<4>()
        .ok_or(ReleaseError::Truncated {
            what: "manifest length",
        })?;
    let len = u32::from_be_bytes(*len) as usize;
    over_limit("manifest bytes", len as u64, MANIFEST_BYTES_MAX as u64)?;
    if rest.len() < len {
        return Err(ReleaseError::Truncated { what: "manifest" });
    }
    let (manifest, rest) = rest.split_at(len);
    let (signature, rest) = rest
        .split_first_chunk::<64>()
        .ok_or(ReleaseError::Truncated { what: "signature" })?;
    if !rest.is_empty() {
        return Err(ReleaseError::TrailingBytes(rest.len() as u64, "signature"));
    }
    Ok(Parts {
        manifest,
        signature: *signature,
    })
}

/// The release identity of a release file: SHA-256 of all its bytes.
pub fn release_digest(bytes: &[u8]) -> Digest {
    Digest(Sha256::digest(bytes).into())
}

/// Reads a release file without checking the signature (for `inspect`):
/// framing, decoding and every rule.
pub fn read_unverified(bytes: &[u8]) -> Result<VerifiedRelease, ReleaseError> {
    let parts = split(bytes)?;
    Ok(VerifiedRelease {
        manifest: decode_manifest(parts.manifest)?,
        digest: release_digest(bytes),
    })
}

/// Checks a release file against the trusted key: framing, the manifest
/// decodes and keeps every rule, it is signed, by the trusted key
/// (`verify_strict`). The content is checked chunk by chunk elsewhere
/// ([`crate::tree::verify_dir`], [`crate::store::ChunkStore`]).
pub fn verify(key: &VerifyingKey, bytes: &[u8]) -> Result<VerifiedRelease, ReleaseError> {
    let parts = split(bytes)?;
    let manifest = decode_manifest(parts.manifest)?;
    if parts.signature.iter().all(|b| *b == 0) {
        return Err(ReleaseError::Unsigned);
    }
    let expected = bundle::key_id(key);
    if manifest.key_id != expected {
        return Err(ReleaseError::UnknownKey {
            found: hex::encode(manifest.key_id),
            expected: hex::encode(expected),
        });
    }
    key.verify_strict(
        &signed_message(parts.manifest),
        &Signature::from_bytes(&parts.signature),
    )
    .map_err(|_| ReleaseError::BadSignature)?;
    Ok(VerifiedRelease {
        manifest,
        digest: release_digest(bytes),
    })
}

/// Reads a release file from disk, refusing one over
/// [`RELEASE_FILE_BYTES_MAX`] before reading it all.
pub fn read_release_file(path: &std::path::Path) -> Result<Vec<u8>, ReleaseError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(crate::error::io_err(path))?;
    let mut bytes = Vec::new();
    file.take(RELEASE_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(crate::error::io_err(path))?;
    over_limit(
        "release file bytes",
        bytes.len() as u64,
        RELEASE_FILE_BYTES_MAX,
    )?;
    Ok(bytes)
}
