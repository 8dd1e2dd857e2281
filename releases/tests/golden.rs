//! Golden bytes of the format-2 manifest and release file: a fixed tree,
//! signed with a fixed key (Ed25519 signatures are deterministic), must
//! encode to `tests/golden/release_v2.hex` exactly. A change of encoding is
//! a new format, never a refactor: if this fails, bump MANIFEST_FORMAT and
//! the magic and bless a new file with `FLEETWEFT_BLESS=1` (it writes only
//! a file that does not exist).

mod common;

use std::path::PathBuf;

use common::{fields, fixed_key};
use model::platform::Arch;
use protocol::bundle::JsonField;
use releases::manifest::{
    self, ArchTree, ChunkRef, Entry, Mode, MANIFEST_FORMAT, MANIFEST_FORMAT_ARCH,
};

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

/// The golden release with a tree per architecture (format 3): the common
/// entries of [`golden_release`], a binary per architecture.
fn golden_arch_release() -> Vec<u8> {
    let bytes = golden_release();
    let common = manifest::verify(&fixed_key().verifying_key(), &bytes)
        .expect("golden verifies")
        .manifest;
    let binary = |fill: u8, len: u32| Entry {
        path: "bin/native".into(),
        mode: Mode::Executable,
        size: len.into(),
        sha256: [fill; 32],
        chunks: vec![ChunkRef {
            sha256: [fill; 32],
            len,
        }],
    };
    let trees = vec![
        ArchTree {
            arch: Arch::X86_64,
            entries: vec![binary(0x86, 7)],
        },
        ArchTree {
            arch: Arch::Aarch64,
            entries: vec![binary(0xa6, 9)],
        },
    ];
    let mut f = fields();
    f.probe = common.probe.to_spec().expect("probe");
    manifest::sign_arches(&fixed_key(), f, common.entries, trees).expect("sign")
}

/// Compares `bytes` with the golden file `name`, writing it first when
/// `FLEETWEFT_BLESS` is set and it does not exist; returns the golden bytes.
fn golden_bytes(name: &str, bytes: &[u8]) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("FLEETWEFT_BLESS").is_some() && !path.exists() {
        std::fs::write(&path, to_hex(bytes)).expect("write the golden file");
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; bless with FLEETWEFT_BLESS=1", path.display()));
    hex::decode(text.split_whitespace().collect::<String>()).expect("hex")
}

#[test]
fn the_per_architecture_release_matches_its_golden_bytes() {
    let bytes = golden_arch_release();
    let golden = golden_bytes("release_v3_arch.hex", &bytes);
    let verified =
        manifest::verify(&fixed_key().verifying_key(), &golden).expect("golden verifies");
    assert_eq!(verified.manifest.format, MANIFEST_FORMAT_ARCH);
    assert_eq!(verified.manifest.arch_trees.len(), 2);
    assert!(
        bytes == golden,
        "the format-3 encoding changed (see the module docs).\nnow:\n{}",
        to_hex(&bytes)
    );
    // The format-2 fields come first, byte for byte as format 2 encodes
    // them (only the format number differs): a format-2 reader cannot
    // mistake it, since the number is signed.
    let v2 = golden_release();
    let v2_manifest = manifest::split(&v2).expect("split").manifest;
    let v3_manifest = manifest::split(&golden).expect("split").manifest;
    assert_eq!(v2_manifest[0], 2);
    assert_eq!(v3_manifest[0], 3);
    assert_eq!(v2_manifest[1..], v3_manifest[1..v2_manifest.len()]);
}

#[test]
fn a_per_architecture_release_stays_signed_over_its_exact_bytes() {
    let bytes = golden_arch_release();
    let key = fixed_key().verifying_key();
    let parts = manifest::split(&bytes).expect("split");
    let start = manifest::MAGIC.len() + 4;
    // Every byte of the architecture trees is signed: flip the last one
    // (the aarch64 binary's chunk length) and the signature breaks.
    let mut flipped = bytes.clone();
    flipped[start + parts.manifest.len() - 1] ^= 1;
    assert!(manifest::verify(&key, &flipped).is_err());
    // Relabelled as format 2, the trees are trailing bytes.
    let mut relabelled = bytes.clone();
    relabelled[start] = 2;
    assert!(matches!(
        manifest::verify(&key, &relabelled),
        Err(releases::ReleaseError::TrailingBytes(..))
    ));
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

/// The golden release with limits and a user (format 4): the trees of
/// [`golden_arch_release`] and every limit declared.
fn golden_limits_release() -> Vec<u8> {
    let bytes = golden_arch_release();
    let m = manifest::verify(&fixed_key().verifying_key(), &bytes)
        .expect("golden verifies")
        .manifest;
    let mut f = fields();
    f.probe = m.probe.to_spec().expect("probe");
    f.limits = releases::AppLimits {
        memory_bytes_max: Some(256 << 20),
        cpu_percent_max: Some(150),
        open_files_max: Some(1024),
        processes_max: Some(64),
        user: Some("hello".into()),
    };
    manifest::sign_arches(&fixed_key(), f, m.entries, m.arch_trees).expect("sign")
}

#[test]
fn the_release_with_limits_matches_its_golden_bytes() {
    let bytes = golden_limits_release();
    let golden = golden_bytes("release_v4_limits.hex", &bytes);
    let verified =
        manifest::verify(&fixed_key().verifying_key(), &golden).expect("golden verifies");
    assert_eq!(verified.manifest.format, manifest::MANIFEST_FORMAT_LIMITS);
    assert_eq!(verified.manifest.limits.user.as_deref(), Some("hello"));
    assert!(
        bytes == golden,
        "the format-4 encoding changed (see the module docs).\nnow:\n{}",
        to_hex(&bytes)
    );
    // Format 3's bytes come first (only the format number differs), then
    // the limits; relabelled as format 3 they are trailing bytes, and
    // every byte of them is signed.
    let v3 = golden_arch_release();
    let v3_manifest = manifest::split(&v3).expect("split").manifest;
    let v4_manifest = manifest::split(&golden).expect("split").manifest;
    assert_eq!(v4_manifest[0], 4);
    assert_eq!(v3_manifest[1..], v4_manifest[1..v3_manifest.len()]);
    let key = fixed_key().verifying_key();
    let start = manifest::MAGIC.len() + 4;
    let mut relabelled = golden.clone();
    relabelled[start] = 3;
    assert!(matches!(
        manifest::verify(&key, &relabelled),
        Err(releases::ReleaseError::TrailingBytes(..))
    ));
    let mut flipped = golden.clone();
    flipped[start + v4_manifest.len() - 1] ^= 1;
    assert!(manifest::verify(&key, &flipped).is_err());
}

#[test]
fn limits_are_checked_when_signed_and_one_encoding_per_release() {
    let m = manifest::verify(&fixed_key().verifying_key(), &golden_release())
        .expect("golden verifies")
        .manifest;
    let mut f = fields();
    f.probe = m.probe.to_spec().expect("probe");
    f.limits.memory_bytes_max = Some(1024);
    let err = manifest::sign(&fixed_key(), f.clone(), m.entries.clone()).expect_err("too small");
    assert!(err.to_string().contains("memory_bytes_max"), "{err}");
    // No limit declared: format 2, the same bytes as before limits.
    f.limits = releases::AppLimits::default();
    let plain = manifest::sign(&fixed_key(), f, m.entries).expect("sign");
    assert_eq!(plain, golden_release());
}

/// The golden release with a data migration (format 5): the trees and
/// limits of [`golden_limits_release`] and an irreversible migration.
fn golden_migration_release() -> Vec<u8> {
    let bytes = golden_limits_release();
    let m = manifest::verify(&fixed_key().verifying_key(), &bytes)
        .expect("golden verifies")
        .manifest;
    let mut f = fields();
    f.probe = m.probe.to_spec().expect("probe");
    f.limits = m.limits;
    f.migration = Some(releases::AppMigration {
        command: vec![
            "python3".into(),
            "migrate.py".into(),
            "--to".into(),
            "2".into(),
        ],
        irreversible: true,
    });
    manifest::sign_arches(&fixed_key(), f, m.entries, m.arch_trees).expect("sign")
}

#[test]
fn the_release_with_a_migration_matches_its_golden_bytes() {
    let bytes = golden_migration_release();
    let golden = golden_bytes("release_v5_migration.hex", &bytes);
    let verified =
        manifest::verify(&fixed_key().verifying_key(), &golden).expect("golden verifies");
    assert_eq!(
        verified.manifest.format,
        manifest::MANIFEST_FORMAT_MIGRATION
    );
    let migration = verified.manifest.migration.expect("declared");
    assert_eq!(migration.command[1], "migrate.py");
    assert!(migration.irreversible);
    assert!(
        bytes == golden,
        "the format-5 encoding changed (see the module docs).\nnow:\n{}",
        to_hex(&bytes)
    );
    // Format 4's bytes come first (only the format number differs), then
    // the migration; relabelled as format 4 they are trailing bytes, and
    // every byte of them is signed.
    let v4 = golden_limits_release();
    let v4_manifest = manifest::split(&v4).expect("split").manifest;
    let v5_manifest = manifest::split(&golden).expect("split").manifest;
    assert_eq!(v5_manifest[0], 5);
    assert_eq!(v4_manifest[1..], v5_manifest[1..v4_manifest.len()]);
    let key = fixed_key().verifying_key();
    let start = manifest::MAGIC.len() + 4;
    let mut relabelled = golden.clone();
    relabelled[start] = 4;
    assert!(matches!(
        manifest::verify(&key, &relabelled),
        Err(releases::ReleaseError::TrailingBytes(..))
    ));
    let mut flipped = golden.clone();
    flipped[start + v5_manifest.len() - 1] ^= 1;
    assert!(manifest::verify(&key, &flipped).is_err());
}

/// A release without a migration stays byte for byte what it was (format
/// 2, 3 or 4 as before); the migration's bounds are checked when it is
/// signed and again when it is read.
#[test]
fn a_migration_is_checked_when_signed_and_read_and_absent_changes_nothing() {
    let key = fixed_key();
    let m = manifest::verify(&key.verifying_key(), &golden_release())
        .expect("golden verifies")
        .manifest;
    let mut f = fields();
    f.probe = m.probe.to_spec().expect("probe");
    assert!(f.migration.is_none());
    let plain = manifest::sign(&key, f.clone(), m.entries.clone()).expect("sign");
    assert_eq!(plain, golden_release(), "format 2 unchanged");
    let limits = manifest::verify(&key.verifying_key(), &golden_limits_release())
        .expect("verifies")
        .manifest;
    assert!(limits.migration.is_none());
    // Signing refuses a migration out of its bounds.
    let too_many = vec!["a".to_string(); releases::app_migration::MIGRATE_ARGS_MAX + 1];
    for command in [vec![], vec![String::new()], too_many] {
        let mut bad = f.clone();
        bad.migration = Some(releases::AppMigration {
            command,
            irreversible: false,
        });
        let err = manifest::sign(&key, bad, m.entries.clone()).expect_err("refused");
        assert!(
            matches!(err, releases::ReleaseError::BadMigration(_)),
            "{err}"
        );
    }
    // Reading refuses one too, even if its manifest was encoded by hand:
    // an empty command, and a migration in a format that has none.
    let mut forged = m.clone();
    forged.format = manifest::MANIFEST_FORMAT_MIGRATION;
    forged.migration = Some(releases::AppMigration {
        command: vec![],
        irreversible: false,
    });
    let encoded = manifest::encode_manifest(&forged).expect("encodes");
    let err = manifest::decode_manifest(&encoded).expect_err("refused");
    assert!(
        matches!(err, releases::ReleaseError::BadMigration(_)),
        "{err}"
    );
    forged.format = manifest::MANIFEST_FORMAT_LIMITS;
    forged.migration = Some(releases::AppMigration {
        command: vec!["./m".into()],
        irreversible: false,
    });
    let err = forged.validate().expect_err("refused");
    assert!(
        matches!(err, releases::ReleaseError::BadMigration(_)),
        "{err}"
    );
}
