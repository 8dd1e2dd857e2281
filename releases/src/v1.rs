//! A format-1 bundle read as a tree of one file.
//!
//! The view has `format` 1, the bundle's name, version, run command and
//! probe, and one entry: the app under its file name, executable when the
//! run command starts it directly (`./FILE`), chunked like any release
//! file. Its digest stays the bundle digest (SHA-256 of the bundle file):
//! the release identity of a format-1 release does not change.

use std::path::Path;

use protocol::bundle::VerifiedBundle;

use crate::chunking::{chunk_reader, Chunking};
use crate::error::ReleaseError;
use crate::manifest::{ChunkRef, Entry, Manifest, Mode, Probe, VerifiedRelease};

/// A format-1 bundle as a tree, with its chunks' bytes (at most
/// `protocol::bundle::APP_BYTES_MAX` in all).
#[derive(Clone, Debug)]
pub struct V1Tree {
    /// The tree view (format 1).
    pub release: VerifiedRelease,
    /// Each chunk with its bytes, in order.
    pub chunks: Vec<(ChunkRef, Vec<u8>)>,
}

/// The tree view of a verified format-1 bundle.
pub fn tree_of_bundle(bundle: &VerifiedBundle) -> Result<V1Tree, ReleaseError> {
    let m = &bundle.manifest;
    let mut chunks = Vec::new();
    let chunked = chunk_reader(
        bundle.app.as_slice(),
        Chunking::RELEASE,
        Path::new(&m.app_file_name),
        &mut |chunk, bytes| {
            chunks.push((*chunk, bytes.to_vec()));
            Ok(())
        },
    )?;
    let direct = m.run.first().map(String::as_str) == Some(&format!("./{}", m.app_file_name));
    let manifest = Manifest {
        format: protocol::bundle::MANIFEST_FORMAT,
        name: m.name.clone(),
        version: m.version.clone(),
        run: m.run.clone(),
        probe: Probe::from_spec(&m.probe),
        entries: vec![Entry {
            path: m.app_file_name.clone(),
            mode: if direct { Mode::Executable } else { Mode::File },
            size: chunked.size,
            sha256: chunked.sha256,
            chunks: chunked.chunks,
        }],
        key_id: m.key_id,
        arch_trees: Vec::new(),
        limits: crate::app_limits::AppLimits::default(),
        migration: None,
    };
    manifest.validate_tree()?;
    Ok(V1Tree {
        release: VerifiedRelease {
            manifest,
            digest: bundle.digest,
        },
        chunks,
    })
}
