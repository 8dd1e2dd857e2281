//! Golden bytes of the format-2 manifest and release file: a fixed tree,
//! signed with a fixed key (Ed25519 signatures are deterministic), must
//! encode to `tests/golden/release_v2.hex` exactly. A change of encoding is
//! a new format, never a refactor: if this fails, bump MANIFEST_FORMAT and
//! the magic and bless a new file with `FLEETWEFT_BLESS=1` (it writes only
//! a file that does not exist).

mod common;

use std::path::PathBuf;

use common::{fields, fixed_key};
use protocol::bundle::JsonField;
use releases::manifest::{self, ChunkRef, Entry, Mode, MANIFEST_FORMAT};

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/golden/release_v{MANIFEST_FORMAT}.hex"))
}

fn golden_release() -> Vec<u8> {
    let mut f = fields();
    f.probe.expect_body = String::new();
    f.probe.expect_json = Some(JsonField::parse("/build/version=\"2.0.0\"").expect("json"));
    let entries = vec![
        Entry {
            path: "bin/shop".into(),
            mode: Mode::Executable,
            size: 300,
            sha256: [0x11; 32],
            chunks: vec![
                ChunkRef {
                    sha256: [0x21; 32],
                    len: 200,
                },
                ChunkRef {
                    sha256: [0x22; 32],
                    len: 100,
                },
            ],
        },
        Entry {
            path: "empty".into(),
            mode: Mode::File,
            size: 0,
            sha256: [0x33; 32],
            chunks: vec![],
        },
        Entry {
            path: "static/logo.svg".into(),
            mode: Mode::File,
            size: 6,
            sha256: [0x44; 32],
            chunks: vec![ChunkRef {
                sha256: [0x44; 32],
                len: 6,
            }],
        },
    ];
    manifest::sign(&fixed_key(), f, entries).expect("sign")
}

fn to_hex(bytes: &[u8]) -> String {
    bytes
        .chunks(32)
        .map(|line| hex::encode(line) + "\n")
        .collect()
}

#[test]
fn the_release_file_matches_its_golden_bytes() {
    let bytes = golden_release();
    let path = golden_path();
    if std::env::var_os("FLEETWEFT_BLESS").is_some() && !path.exists() {
        std::fs::write(&path, to_hex(&bytes)).expect("write the golden file");
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; bless with FLEETWEFT_BLESS=1", path.display()));
    let golden = hex::decode(text.split_whitespace().collect::<String>()).expect("hex");
    let verified =
        manifest::verify(&fixed_key().verifying_key(), &golden).expect("golden verifies");
    assert_eq!(verified.manifest.entries.len(), 3);
    assert_eq!(
        verified.manifest.probe.expect_json,
        Some(("/build/version".into(), "\"2.0.0\"".into()))
    );
    assert!(
        bytes == golden,
        "the format-2 encoding changed (see the module docs).\nnow:\n{}",
        to_hex(&bytes)
    );
    assert_eq!(
        verified.digest.to_hex(),
        hex::encode(<[u8; 32]>::from(<sha2::Sha256 as sha2::Digest>::digest(
            &golden
        )))
    );
}

#[test]
fn tampering_is_refused_by_name() {
    let bytes = golden_release();
    let key = fixed_key().verifying_key();
    let parts = manifest::split(&bytes).expect("split");
    let start = manifest::MAGIC.len() + 4;
    let mut flipped = bytes.clone();
    // The last byte of the manifest is the key id's last byte.
    flipped[start + parts.manifest.len() - 1] ^= 1;
    assert!(matches!(
        manifest::verify(&key, &flipped),
        Err(releases::ReleaseError::UnknownKey { .. })
    ));
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    assert!(matches!(
        manifest::verify(&key, &flipped),
        Err(releases::ReleaseError::BadSignature)
    ));
    let mut zero = bytes.clone();
    zero[last - 63..].fill(0);
    assert!(matches!(
        manifest::verify(&key, &zero),
        Err(releases::ReleaseError::Unsigned)
    ));
    let mut long = bytes.clone();
    long.push(0);
    assert!(matches!(
        manifest::verify(&key, &long),
        Err(releases::ReleaseError::TrailingBytes(1, _))
    ));
    for cut in [0, 5, start + 2, start + 10, bytes.len() - 1] {
        assert!(
            manifest::verify(&key, &bytes[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    let other = ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]).verifying_key();
    assert!(matches!(
        manifest::verify(&other, &bytes),
        Err(releases::ReleaseError::UnknownKey { .. })
    ));
}

proptest::proptest! {
    #[test]
    fn any_single_byte_corruption_is_refused(
        at in proptest::prelude::any::<proptest::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let mut bytes = golden_release();
        let i = at.index(bytes.len());
        bytes[i] ^= xor;
        let key = fixed_key().verifying_key();
        proptest::prop_assert!(manifest::verify(&key, &bytes).is_err(), "byte {} ^ {:#x} accepted", i, xor);
    }

    #[test]
    fn any_bytes_decode_without_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
        let _ = manifest::decode_manifest(&data);
        let _ = manifest::read_unverified(&data);
    }
}
