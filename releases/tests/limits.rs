//! Every named limit of a format-2 release, at the limit and one past it.
//! Large releases are built as manifests (synthetic chunk digests), never
//! as bytes on disk.

mod common;

use common::{fields, fixed_key, synthetic_entry};
use releases::limits::{
    CHUNK_BYTES_MAX, ENTRIES_MAX, GIB, MANIFEST_BYTES_MAX, PATH_BYTES_MAX, RELEASE_BYTES_MAX,
};
use releases::manifest::{self, Manifest};
use releases::ReleaseError;

fn over(err: ReleaseError, what: &str) -> (u64, u64) {
    match err {
        ReleaseError::OverLimit {
            what: w,
            value,
            max,
        } if w == what => (value, max),
        other => panic!("expected {what} over its limit, got {other}"),
    }
}

#[test]
fn entries_at_the_limit_and_one_past() {
    let entries: Vec<_> = (0..ENTRIES_MAX)
        .map(|i| synthetic_entry(format!("f/{i:06}"), 10, CHUNK_BYTES_MAX))
        .collect();
    let bytes = manifest::sign(&fixed_key(), fields(), entries.clone()).expect("100,000 entries");
    let verified = manifest::verify(&fixed_key().verifying_key(), &bytes).expect("verifies");
    assert_eq!(verified.manifest.entries.len(), ENTRIES_MAX);
    let mut more = entries;
    more.push(synthetic_entry("g".to_string(), 10, CHUNK_BYTES_MAX));
    let err = manifest::sign(&fixed_key(), fields(), more).unwrap_err();
    assert_eq!(
        over(err, "entries"),
        (ENTRIES_MAX as u64 + 1, ENTRIES_MAX as u64)
    );
}

#[test]
fn release_bytes_at_16_gib_and_one_past() {
    assert_eq!(RELEASE_BYTES_MAX, 16 * GIB);
    let quarter = RELEASE_BYTES_MAX / 4;
    let mut entries: Vec<_> = (0..4)
        .map(|i| synthetic_entry(format!("data/{i}.bin"), quarter, CHUNK_BYTES_MAX))
        .collect();
    let bytes = manifest::sign(&fixed_key(), fields(), entries.clone()).expect("16 GiB");
    let verified = manifest::verify(&fixed_key().verifying_key(), &bytes).expect("verifies");
    assert_eq!(verified.manifest.total_bytes(), RELEASE_BYTES_MAX);
    entries[3] = synthetic_entry("data/3.bin".to_string(), quarter + 1, CHUNK_BYTES_MAX);
    let err = manifest::sign(&fixed_key(), fields(), entries).unwrap_err();
    assert_eq!(
        over(err, "release bytes"),
        (RELEASE_BYTES_MAX + 1, RELEASE_BYTES_MAX)
    );
}

#[test]
fn chunk_length_at_the_limit_and_one_past() {
    let mut entry = synthetic_entry("a".to_string(), u64::from(CHUNK_BYTES_MAX), CHUNK_BYTES_MAX);
    assert_eq!(entry.chunks.len(), 1);
    manifest::sign(&fixed_key(), fields(), vec![entry.clone()]).expect("4 MiB chunk");
    entry.size += 1;
    entry.chunks[0].len += 1;
    let err = manifest::sign(&fixed_key(), fields(), vec![entry.clone()]).unwrap_err();
    assert!(
        matches!(err, ReleaseError::BadChunkLength { ref path, len, .. } if path == "a" && len == u64::from(CHUNK_BYTES_MAX) + 1),
        "{err}"
    );
    // A chunk of zero bytes is refused too, and sizes must add up.
    entry.chunks[0].len = 0;
    let err = manifest::sign(&fixed_key(), fields(), vec![entry.clone()]).unwrap_err();
    assert!(
        matches!(err, ReleaseError::BadChunkLength { len: 0, .. }),
        "{err}"
    );
    entry.chunks[0].len = 5;
    let err = manifest::sign(&fixed_key(), fields(), vec![entry]).unwrap_err();
    assert!(
        matches!(err, ReleaseError::SizeMismatch { size, chunks: 5, .. } if size == u64::from(CHUNK_BYTES_MAX) + 1),
        "{err}"
    );
}

#[test]
fn path_length_at_the_limit_and_one_past_in_a_manifest() {
    let at = format!("{}/{}", vec!["p".repeat(200); 5].join("/"), "q".repeat(19));
    assert_eq!(at.len(), PATH_BYTES_MAX);
    let entry = synthetic_entry(at.clone(), 1, CHUNK_BYTES_MAX);
    manifest::sign(&fixed_key(), fields(), vec![entry]).expect("1024-byte path");
    let past = format!("{at}q");
    let err = manifest::sign(
        &fixed_key(),
        fields(),
        vec![synthetic_entry(past.clone(), 1, CHUNK_BYTES_MAX)],
    )
    .unwrap_err();
    assert!(
        matches!(err, ReleaseError::BadPath { ref path, .. } if *path == past),
        "{err}"
    );
}

/// A path of exactly `len` bytes (at least 11), unique and ascending by
/// `i`: components of at most 200 bytes.
fn path_of_len(i: usize, len: usize) -> String {
    let mut path = format!("{i:09}");
    while path.len() < len {
        let room = len - path.len();
        let component = if room > 255 { 200 } else { room - 1 };
        path.push('/');
        path.push_str(&"n".repeat(component));
    }
    path
}

/// Encoded bytes of an empty entry with a path of more than 250 bytes:
/// path length (3-byte varint) + path + mode + size + digest + chunk count.
fn entry_cost(path_len: usize) -> usize {
    3 + path_len + 1 + 1 + 32 + 1
}

fn encoded_len(m: &Manifest) -> usize {
    manifest::encode_manifest(m).map_or(usize::MAX, |b| b.len())
}

/// A valid manifest encoding to exactly `target` bytes: empty files with
/// 1024-byte paths, then two paths sized to the remaining room.
fn manifest_of_len(target: usize) -> Manifest {
    let mut m = Manifest {
        format: manifest::MANIFEST_FORMAT,
        name: "big".into(),
        version: "1".into(),
        run: vec!["./run".into()],
        probe: releases::Probe::from_spec(&fields().probe),
        entries: vec![],
        key_id: [0; 8],
        arch_trees: vec![],
        limits: Default::default(),
        migration: None,
    };
    let full = entry_cost(PATH_BYTES_MAX);
    // The entry count's varint grows to 3 bytes: leave room for it.
    let bulk = (target - encoded_len(&m) - 2) / full - 2;
    m.entries = (0..bulk)
        .map(|i| synthetic_entry(path_of_len(i, PATH_BYTES_MAX), 0, CHUNK_BYTES_MAX))
        .collect();
    while target - encoded_len(&m) > 2 * full {
        let i = m.entries.len();
        m.entries.push(synthetic_entry(
            path_of_len(i, PATH_BYTES_MAX),
            0,
            CHUNK_BYTES_MAX,
        ));
    }
    let room = target - encoded_len(&m);
    for cost in [room / 2, room - room / 2] {
        let i = m.entries.len();
        m.entries.push(synthetic_entry(
            path_of_len(i, cost - entry_cost(0)),
            0,
            CHUNK_BYTES_MAX,
        ));
    }
    m
}

#[test]
fn manifest_bytes_at_the_limit_and_one_past() {
    let m = manifest_of_len(MANIFEST_BYTES_MAX);
    let bytes = manifest::encode_manifest(&m).expect("at the limit");
    assert_eq!(bytes.len(), MANIFEST_BYTES_MAX);
    m.validate().expect("a valid manifest at the limit");
    assert!(m.entries.len() <= ENTRIES_MAX);
    let decoded = manifest::decode_manifest(&bytes).expect("decodes at the limit");
    assert_eq!(decoded.entries.len(), m.entries.len());
    let mut past = m;
    let last = past.entries.last_mut().expect("entry");
    last.path.push('x');
    let err = manifest::encode_manifest(&past).unwrap_err();
    assert_eq!(
        over(err, "manifest bytes"),
        (MANIFEST_BYTES_MAX as u64 + 1, MANIFEST_BYTES_MAX as u64)
    );
    // A decoder handed more bytes refuses before decoding them.
    let err = manifest::decode_manifest(&vec![0u8; MANIFEST_BYTES_MAX + 1]).unwrap_err();
    over(err, "manifest bytes");
}

#[test]
fn the_decode_allocation_bound_covers_the_in_memory_sizes() {
    // MANIFEST_DECODE_BYTES_MAX assumes an entry or a chunk takes at most
    // 3 times its smallest encoding in memory (entry 37 bytes, chunk 33).
    assert!(std::mem::size_of::<releases::Entry>() <= 3 * 37);
    assert!(std::mem::size_of::<releases::ChunkRef>() <= 3 * 33);
    assert_eq!(
        releases::limits::MANIFEST_DECODE_BYTES_MAX,
        4 * MANIFEST_BYTES_MAX
    );
}
