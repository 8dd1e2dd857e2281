//! The controller's store of format-2 (tree) releases (issue #23 item 2):
//! a content-addressed [`releases::ChunkStore`] under `data_dir/chunks`
//! and the signed manifests of accepted releases under
//! `data_dir/releases/<digest>.release`, each written with the bundle
//! store's fsync discipline ([`BundleDir`]).
//!
//! A manifest is accepted only when every chunk it names is held, so a
//! release digest the controller knows always has its bytes here.

use super::bundles::BundleDir;
use ed25519_dalek::VerifyingKey;
use model::Digest;
use releases::manifest::Sha256Bytes;
use releases::{ChunkStore, ReleaseError, VerifiedRelease};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The chunk store's directory under the data directory.
pub const CHUNKS_DIR: &str = "chunks";
/// The accepted manifests' directory under the data directory.
pub const MANIFESTS_DIR: &str = "releases";
/// Extension of a stored signed manifest.
const MANIFEST_EXTENSION: &str = "release";
/// Most missing chunks named in a refusal (the count is always given).
pub const MISSING_NAMED_MAX: usize = 16;

/// Chunks and accepted tree releases.
pub struct ReleaseStore {
    /// Every chunk received, verified as it landed.
    pub chunks: ChunkStore,
    /// Accepted signed manifests, by release digest.
    pub manifests: BundleDir,
    /// What was handed to agents since the start (`/metrics`).
    pub served: ServedBytes,
}

/// Bytes the controller handed to agents' bundle and chunk streams since
/// it started: its artifact egress, before QUIC and TLS framing (exposed
/// on `/metrics`; `fleetweft-transfer-bench` reads it). Counted when read
/// to be sent, so a transfer cut short (an agent killed mid-chunk) still
/// counts whole: an upper bound on what the agents received.
#[derive(Debug, Default)]
pub struct ServedBytes {
    /// Chunk answers (`ChunkFollows`).
    pub chunks: AtomicU64,
    /// Bytes of those chunks.
    pub chunk_bytes: AtomicU64,
    /// Bytes of signed files (format-1 bundles and release manifests).
    pub signed_bytes: AtomicU64,
}

impl ServedBytes {
    /// The Prometheus text of the counters.
    pub fn metrics(&self) -> String {
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        format!(
            "# HELP fleetweft_chunks_served_total Content chunks sent to agents since the controller started.\n# TYPE fleetweft_chunks_served_total counter\nfleetweft_chunks_served_total {}\n# HELP fleetweft_artifact_bytes_served_total Artifact bytes sent to agents since the controller started (chunks, and signed bundles and manifests), before transport framing.\n# TYPE fleetweft_artifact_bytes_served_total counter\nfleetweft_artifact_bytes_served_total{{kind=\"chunk\"}} {}\nfleetweft_artifact_bytes_served_total{{kind=\"signed\"}} {}\n",
            get(&self.chunks),
            get(&self.chunk_bytes),
            get(&self.signed_bytes),
        )
    }
}

/// Why a manifest was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The signature, format or limits refused it.
    #[error("release refused: {0}")]
    Refused(#[source] ReleaseError),
    /// Chunks it names are not held: upload them, then post it again.
    #[error("{count} chunk(s) missing, upload them and post the manifest again: {named}")]
    Missing {
        /// How many are missing.
        count: usize,
        /// The first [`MISSING_NAMED_MAX`], hex, comma separated.
        named: String,
    },
    /// Storing it failed.
    #[error("storing the release manifest: {0}")]
    Store(#[source] io::Error),
}

impl ReleaseStore {
    /// Opens (creating) both directories under `data_dir`, removing what a
    /// crash left half written.
    pub fn open(data_dir: &Path) -> anyhow::Result<ReleaseStore> {
        let (chunks, _) = ChunkStore::open(&data_dir.join(CHUNKS_DIR))?;
        let (manifests, _) =
            BundleDir::open_with_extension(data_dir.join(MANIFESTS_DIR), MANIFEST_EXTENSION)?;
        Ok(ReleaseStore {
            chunks,
            manifests,
            served: ServedBytes::default(),
        })
    }

    /// Whether the release `digest` was accepted.
    pub fn knows(&self, digest: Digest) -> bool {
        self.manifests.path(digest).is_file()
    }

    /// The hex digests of the chunks `release` names that are not held.
    pub fn missing(&self, release: &VerifiedRelease) -> Vec<String> {
        release
            .manifest
            .unique_chunks()
            .iter()
            .filter(|c| !self.chunks.has(&c.sha256))
            .map(|c| c.hex())
            .collect()
    }

    /// Verifies the signed manifest `bytes` with `key`, checks every chunk
    /// is held, and stores it durably (fsynced file and directory) before
    /// returning.
    pub fn accept(&self, key: &VerifyingKey, bytes: &[u8]) -> Result<VerifiedRelease, AcceptError> {
        let release = releases::verify(key, bytes).map_err(AcceptError::Refused)?;
        let missing = self.missing(&release);
        if !missing.is_empty() {
            let named: Vec<&str> = missing
                .iter()
                .take(MISSING_NAMED_MAX)
                .map(String::as_str)
                .collect();
            let more = missing.len().saturating_sub(MISSING_NAMED_MAX);
            let tail = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            return Err(AcceptError::Missing {
                count: missing.len(),
                named: format!("{}{tail}", named.join(", ")),
            });
        }
        self.manifests
            .store(release.digest, bytes)
            .map_err(AcceptError::Store)?;
        Ok(release)
    }

    /// The verified manifest of an accepted release.
    pub fn read(&self, key: &VerifyingKey, digest: Digest) -> Result<VerifiedRelease, String> {
        let bytes = std::fs::read(self.manifests.path(digest)).map_err(|e| e.to_string())?;
        releases::verify(key, &bytes).map_err(|e| e.to_string())
    }
}

/// What the agents' bundle and chunk streams are served from: format-1
/// bundles, the signed manifests of accepted tree releases (asked for by
/// release digest, as a bundle is) and their chunks.
pub struct Artifacts {
    /// Uploaded format-1 bundles.
    pub bundles: std::sync::Arc<BundleDir>,
    /// Accepted tree releases and their chunks.
    pub releases: std::sync::Arc<ReleaseStore>,
    /// Deployment documents (issue #24 item 1).
    pub deployments: std::sync::Arc<super::configuration::Deployments>,
}

impl protocol::quic::BundleStore for Artifacts {
    /// A format-1 bundle, else the signed manifest of an accepted tree
    /// release: its digest is the release digest, so the agent checks it
    /// as it checks a bundle.
    fn get(&self, digest: Digest) -> Option<Vec<u8>> {
        let bytes = self.signed(digest)?;
        let served = &self.releases.served;
        served
            .signed_bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Some(bytes)
    }

    /// The document of a deployment a rollout of the app's latest
    /// configuration revision names.
    fn deployment(&self, digest: Digest) -> Option<Vec<u8>> {
        self.deployments.get(digest).map(|doc| doc.as_ref().clone())
    }
}

impl Artifacts {
    /// The format-1 bundle or the accepted release manifest `digest`.
    fn signed(&self, digest: Digest) -> Option<Vec<u8>> {
        if let Some(bytes) = protocol::quic::BundleStore::get(&*self.bundles, digest) {
            return Some(bytes);
        }
        let path = self.releases.manifests.path(digest);
        let bytes = releases::manifest::read_release_file(&path).ok()?;
        // Serve only what still hashes to its name.
        if releases::release_digest(&bytes) != digest {
            tracing::warn!(
                "{} hashes to another digest: refusing to serve it (tampered or damaged)",
                path.display()
            );
            return None;
        }
        Some(bytes)
    }
}

impl protocol::quic::ChunkSource for Artifacts {
    /// A held chunk, re-verified whole as it is read (a damaged one is
    /// removed and answered missing). Its bytes are counted as they are
    /// sent ([`Self::sent`]), so a resumed fetch counts only the bytes
    /// after `offset`, and a transfer cut short only what was handed over.
    fn chunk(&self, digest: Digest, _offset: u64) -> Option<Vec<u8>> {
        match self.releases.chunks.get(&digest.0) {
            Ok(found) => {
                if found.is_some() {
                    let served = &self.releases.served;
                    served.chunks.fetch_add(1, Ordering::Relaxed);
                }
                found
            }
            Err(e) => {
                tracing::warn!("chunk {digest} not served: {e}");
                None
            }
        }
    }

    fn sent(&self, bytes: u64) {
        let served = &self.releases.served;
        served.chunk_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Decodes a chunk name: 64 lowercase hex digits.
pub fn parse_chunk_name(text: &str) -> Result<Sha256Bytes, String> {
    releases::chunk_name(text)
        .ok_or_else(|| format!("path `sha256`: {text:?} is not 64 lowercase hex digits"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use releases::{ChunkRef, Entry, Mode, ReleaseFields};
    use sha2::{Digest as _, Sha256};

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "fleetweft-release-store-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A release of one file made of `chunks`, signed with `key`.
    fn signed(key: &ed25519_dalek::SigningKey, chunks: &[&[u8]]) -> Vec<u8> {
        let whole: Vec<u8> = chunks.concat();
        let entry = Entry {
            path: "app.bin".into(),
            mode: Mode::File,
            size: whole.len() as u64,
            sha256: Sha256::digest(&whole).into(),
            chunks: chunks
                .iter()
                .map(|c| ChunkRef {
                    sha256: Sha256::digest(c).into(),
                    len: c.len() as u32,
                })
                .collect(),
        };
        let fields = ReleaseFields {
            name: "app".into(),
            version: "v2".into(),
            run: vec!["./app.bin".into()],
            probe: protocol::bundle::ProbeSpec {
                path: "/health".into(),
                expect_status: 200,
                expect_body: "ok".into(),
                expect_json: None,
            },
            limits: Default::default(),
            migration: None,
        };
        releases::sign(key, fields, vec![entry]).expect("sign")
    }

    #[test]
    fn a_manifest_is_accepted_only_once_every_chunk_is_held() {
        let dir = temp_dir("accept");
        let store = ReleaseStore::open(&dir).expect("open");
        let (signing, verifying) = protocol::bundle::keygen();
        let chunks: [&[u8]; 2] = [b"the first chunk", b"the second"];
        let bytes = signed(&signing, &chunks);
        let digest = releases::release_digest(&bytes);
        let second = hex::encode(Sha256::digest(chunks[1]));
        let refused = store.accept(&verifying, &bytes);
        assert!(matches!(
            refused,
            Err(AcceptError::Missing { count: 2, .. })
        ));
        store
            .chunks
            .put_bytes(&Sha256::digest(chunks[0]).into(), chunks[0])
            .expect("put");
        match store.accept(&verifying, &bytes) {
            Err(AcceptError::Missing { count: 1, named }) => assert_eq!(named, second),
            _ => panic!("one chunk missing, named"),
        }
        assert!(!store.knows(digest));
        store
            .chunks
            .put_bytes(&Sha256::digest(chunks[1]).into(), chunks[1])
            .expect("put");
        let (_, stranger) = protocol::bundle::keygen();
        let foreign = store.accept(&stranger, &bytes);
        assert!(matches!(foreign, Err(AcceptError::Refused(_))));
        assert!(!store.knows(digest));
        let accepted = store.accept(&verifying, &bytes).expect("accepted");
        assert_eq!(accepted.digest, digest);
        assert!(store.knows(digest));
        assert_eq!(store.read(&verifying, digest).expect("read").digest, digest);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Egress is counted per answer: a served chunk and a served manifest
    /// add their bytes, a missing chunk adds nothing.
    #[test]
    fn served_chunks_and_manifests_are_counted() {
        use protocol::quic::{BundleStore, ChunkSource};
        let dir = temp_dir("served");
        let store = std::sync::Arc::new(ReleaseStore::open(&dir).expect("open"));
        let bundles = BundleDir::open(dir.join("bundles")).expect("bundles").0;
        let artifacts = Artifacts {
            bundles: std::sync::Arc::new(bundles),
            releases: store.clone(),
            deployments: Default::default(),
        };
        let (signing, verifying) = protocol::bundle::keygen();
        let chunk: &[u8] = b"one chunk of content";
        let sha: Sha256Bytes = Sha256::digest(chunk).into();
        store.chunks.put_bytes(&sha, chunk).expect("put");
        let bytes = signed(&signing, &[chunk]);
        let release = store.accept(&verifying, &bytes).expect("accepted");
        assert!(artifacts.chunk(Digest([7; 32]), 0).is_none());
        assert_eq!(artifacts.chunk(Digest(sha), 0).as_deref(), Some(chunk));
        artifacts.sent(chunk.len() as u64);
        assert_eq!(artifacts.get(release.digest), Some(bytes.clone()));
        let served = &store.served;
        assert_eq!(served.chunks.load(Ordering::Relaxed), 1);
        let chunk_bytes = served.chunk_bytes.load(Ordering::Relaxed);
        assert_eq!(chunk_bytes, chunk.len() as u64);
        let signed_bytes = served.signed_bytes.load(Ordering::Relaxed);
        assert_eq!(signed_bytes, bytes.len() as u64);
        // A resumed fetch counts what is sent: the bytes after its offset.
        assert_eq!(artifacts.chunk(Digest(sha), 5).as_deref(), Some(chunk));
        artifacts.sent(chunk.len() as u64 - 5);
        assert_eq!(served.chunks.load(Ordering::Relaxed), 2);
        let text = served.metrics();
        let total = 2 * chunk.len() - 5;
        assert!(
            text.contains(&format!("{{kind=\"chunk\"}} {total}\n")),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn chunk_names_are_64_lowercase_hex_digits() {
        let name = "ab".repeat(32);
        assert_eq!(parse_chunk_name(&name), Ok([0xab; 32]));
        for bad in [
            "",
            "ab",
            &"AB".repeat(32),
            &"ab".repeat(33),
            &"zz".repeat(32),
        ] {
            let why = parse_chunk_name(bad).expect_err(bad);
            assert!(why.contains("`sha256`"), "{why}");
        }
    }
}
