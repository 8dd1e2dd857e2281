//! The format-2 release manifest (`releases::manifest::decode_manifest`,
//! the verifier's decoding and every rule before the signature check, and
//! `split`/`read_unverified`, the release file's framing). Decoding never
//! panics and never allocates past its bound; an accepted manifest encodes
//! back to a manifest that decodes to itself, within every limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use releases::limits::{CHUNK_BYTES_MAX, ENTRIES_MAX, RELEASE_BYTES_MAX};
use releases::manifest::{decode_manifest, encode_manifest, read_unverified, split};

fuzz_target!(|data: &[u8]| {
    if let Ok(manifest) = decode_manifest(data) {
        let bytes = encode_manifest(&manifest).expect("an accepted manifest encodes");
        assert_eq!(
            decode_manifest(&bytes).expect("an encoded manifest decodes"),
            manifest
        );
        assert!(manifest.entries.len() <= ENTRIES_MAX);
        assert!(manifest.total_bytes() <= RELEASE_BYTES_MAX);
        for entry in &manifest.entries {
            releases::path::validate_path(&entry.path).expect("accepted paths are valid");
            assert!(entry
                .chunks
                .iter()
                .all(|c| c.len >= 1 && c.len <= CHUNK_BYTES_MAX));
        }
        let _ = manifest
            .probe
            .to_spec()
            .expect("an accepted probe converts");
    }
    // The same bytes as a whole release file (magic, length, signature).
    if let Ok(parts) = split(data) {
        let _ = decode_manifest(parts.manifest);
    }
    let _ = read_unverified(data);
});
