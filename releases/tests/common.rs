//! Shared fixtures of the `releases` tests.

#![allow(dead_code)]

use ed25519_dalek::SigningKey;
use protocol::bundle::ProbeSpec;
use releases::manifest::{ChunkRef, Entry, Mode, ReleaseFields};

/// A fixed signing key, so signatures (deterministic in Ed25519) are too.
pub fn fixed_key() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32])
}

/// Name, version, run and probe of the test releases.
pub fn fields() -> ReleaseFields {
    ReleaseFields {
        name: "shop".to_string(),
        version: "2.0.0".to_string(),
        run: vec!["python3".to_string(), "-m".to_string(), "shop".to_string()],
        probe: ProbeSpec {
            path: "/health".to_string(),
            expect_status: 200,
            expect_body: "ok".to_string(),
            expect_json: None,
        },
        limits: Default::default(),
        migration: None,
    }
}

/// An entry of `size` bytes in chunks of at most `chunk` bytes, with
/// made-up digests (for manifests that are never assembled).
pub fn synthetic_entry(path: String, size: u64, chunk: u32) -> Entry {
    let mut chunks = Vec::new();
    let mut left = size;
    let mut n: u64 = 0;
    while left > 0 {
        let len = left.min(u64::from(chunk)) as u32;
        let mut sha256 = [0u8; 32];
        sha256[..8].copy_from_slice(&n.to_le_bytes());
        sha256[8..16].copy_from_slice(&size.to_le_bytes());
        sha256[16..24].copy_from_slice(&(path.len() as u64).to_le_bytes());
        chunks.push(ChunkRef { sha256, len });
        left -= u64::from(len);
        n += 1;
    }
    Entry {
        path,
        mode: Mode::File,
        size,
        sha256: [0x5a; 32],
        chunks,
    }
}
