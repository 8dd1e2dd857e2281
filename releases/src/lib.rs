//! Releases as trees (issue #23 item 1, SPEC §11 S15): the signed format-2
//! manifest, path and limit validation, content-defined chunking, the
//! content-addressed chunk store and tree assembly.
//!
//! Its own crate, not part of `protocol`: the tree format, the chunking and
//! the chunk store are used by the CLI (signing, export, verification), the
//! controller (its store) and the agent (staging), and are storage and
//! format code, not wire code. It depends on `protocol` for keys,
//! `ProbeSpec` and the format-1 bundle, never the other way round.
//!
//! The shape the transfer work builds on: a chunk is named by its SHA-256
//! and fetched by it ([`ChunkStore::put`] verifies as the bytes land), a
//! partially stored chunk is simply absent (resumable), and a tree is
//! assembled only from verified chunks ([`tree::assemble`]).
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod app_limits;
pub mod app_migration;
pub mod chunking;
pub mod config;
pub mod error;
pub mod limits;
pub mod manifest;
pub mod partial;
pub mod path;
pub mod readback;
pub mod sample;
pub mod stamp;
pub mod store;
pub mod tree;
pub mod v1;

pub use app_limits::AppLimits;
pub use app_migration::AppMigration;
pub use error::{PathProblem, ReleaseError};
pub use manifest::{
    decode_manifest, encode_manifest, read_unverified, release_digest, sign, sign_arches, verify,
    ArchTree, ChunkRef, Entry, Manifest, Mode, Probe, ReleaseFields, VerifiedRelease,
};
pub use partial::PartialChunks;
pub use store::{chunk_name, ChunkStore, StoredChunk};

/// In a release directory (what `fleetweft bundle sign --dir` writes, and
/// the export layout any plain HTTP server can serve): the signed release
/// manifest's file name.
pub const EXPORT_MANIFEST_FILE: &str = "manifest";
/// In a release directory: the chunk store's directory, so a chunk is at
/// `BASE/chunks/<sha256>`.
pub const EXPORT_CHUNKS_DIR: &str = "chunks";
