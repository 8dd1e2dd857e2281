//! One release for every architecture (issue #24 item 5): a format-3
//! manifest carries a tree per architecture; each node stages the common
//! files with its own architecture's tree, and nothing else.

mod common;

use std::fs;
use std::path::Path;

use common::{fields, fixed_key};
use model::platform::{Arch, ArchSet, ReleaseArches};
use releases::manifest::{self, MANIFEST_FORMAT, MANIFEST_FORMAT_ARCH};
use releases::tree::{assemble, sign_dir_arches, store_sink, verify_dir};
use releases::{ArchTree, ChunkRef, ChunkStore, Entry, Mode, ReleaseError};

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
    fs::write(path, bytes).expect("write");
}

fn entry(path: &str, fill: u8) -> Entry {
    Entry {
        path: path.into(),
        mode: Mode::File,
        size: 3,
        sha256: [fill; 32],
        chunks: vec![ChunkRef {
            sha256: [fill; 32],
            len: 3,
        }],
    }
}

fn signed(common: Vec<Entry>, trees: Vec<ArchTree>) -> Result<Vec<u8>, ReleaseError> {
    manifest::sign_arches(&fixed_key(), fields(), common, trees)
}

#[test]
fn each_node_stages_the_common_files_and_its_own_tree() {
    let temp = tempfile::tempdir().expect("temp");
    let (common, x86, arm) = (
        temp.path().join("common"),
        temp.path().join("x86"),
        temp.path().join("arm"),
    );
    write(&common, "app.py", b"print('hi')");
    write(&x86, "bin/native", b"x86 code");
    write(&arm, "bin/native", b"arm code, longer");
    write(&arm, "lib/extra.so", b"arm only");
    let (store, _) = ChunkStore::open(&temp.path().join("chunks")).expect("store");
    let roots = [(Arch::Aarch64, arm.clone()), (Arch::X86_64, x86.clone())];
    let bytes = sign_dir_arches(
        &fixed_key(),
        fields(),
        &common,
        &roots,
        &mut store_sink(&store),
    )
    .expect("sign");
    let release = manifest::verify(&fixed_key().verifying_key(), &bytes).expect("verify");
    let m = release.manifest;
    assert_eq!(m.format, MANIFEST_FORMAT_ARCH);
    assert_eq!(
        m.arches(),
        ReleaseArches::Only(ArchSet::of([Arch::X86_64, Arch::Aarch64]))
    );
    assert_eq!(
        m.unique_chunks().len(),
        4,
        "every tree's chunks are the release's"
    );

    let for_x86 = m.clone().into_arch(Arch::X86_64).expect("x86_64 tree");
    let paths: Vec<&str> = for_x86.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["app.py", "bin/native"]);
    assert_eq!(for_x86.format, MANIFEST_FORMAT);
    assert!(for_x86.arch_trees.is_empty());
    let for_arm = m.clone().into_arch(Arch::Aarch64).expect("aarch64 tree");
    let paths: Vec<&str> = for_arm.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["app.py", "bin/native", "lib/extra.so"]);

    let staged_arm = temp.path().join("staged-arm");
    assemble(&for_arm, &store, &staged_arm).expect("assemble aarch64");
    verify_dir(&for_arm, &staged_arm).expect("aarch64 tree verifies");
    assert_eq!(
        fs::read(staged_arm.join("bin/native")).expect("read"),
        b"arm code, longer"
    );
    // The other architecture's tree is not what was staged.
    assert!(verify_dir(&for_x86, &staged_arm).is_err());

    let err = m.into_arch(Arch::Other).expect_err("no tree for other");
    assert!(matches!(
        err,
        ReleaseError::NoTreeForArch {
            arch: Arch::Other,
            ..
        }
    ));
    assert!(err.to_string().contains("x86_64, aarch64"), "{err}");
}

#[test]
fn a_release_without_architecture_trees_is_format_2_and_runs_anywhere() {
    let bytes = signed(vec![entry("app.py", 1)], vec![]).expect("sign");
    let m = manifest::verify(&fixed_key().verifying_key(), &bytes)
        .expect("verify")
        .manifest;
    assert_eq!(m.format, MANIFEST_FORMAT);
    assert_eq!(m.arches(), ReleaseArches::Any);
    for arch in [Arch::X86_64, Arch::Aarch64, Arch::Other] {
        assert_eq!(m.clone().into_arch(arch).expect("any arch"), m);
    }
    assert_eq!(
        bytes,
        manifest::sign(&fixed_key(), fields(), vec![entry("app.py", 1)]).expect("sign")
    );
}

#[test]
fn architecture_trees_that_break_a_rule_are_refused() {
    let tree = |arch, entries| ArchTree { arch, entries };
    let bad = |trees: Vec<ArchTree>| signed(vec![entry("app.py", 1)], trees).expect_err("refused");
    // No tree can be for an architecture other than x86_64 and aarch64.
    let e = bad(vec![tree(Arch::Other, vec![])]);
    assert!(matches!(e, ReleaseError::BadArchTrees(_)), "{e}");
    // Twice, or out of order.
    let e = bad(vec![tree(Arch::X86_64, vec![]), tree(Arch::X86_64, vec![])]);
    assert!(matches!(e, ReleaseError::BadArchTrees(_)), "{e}");
    let e = bad(vec![
        tree(Arch::Aarch64, vec![]),
        tree(Arch::X86_64, vec![]),
    ]);
    assert!(matches!(e, ReleaseError::BadArchTrees(_)), "{e}");
    // A path in both the common files and a tree.
    let e = bad(vec![tree(Arch::X86_64, vec![entry("app.py", 2)])]);
    assert!(matches!(e, ReleaseError::DuplicatePath { .. }), "{e}");
    // A file of a tree that is a directory of a common file.
    let mut common = vec![entry("bin/tool", 1)];
    let e = signed(
        common.clone(),
        vec![tree(Arch::Aarch64, vec![entry("bin", 2)])],
    )
    .expect_err("file and directory");
    assert!(matches!(e, ReleaseError::FileIsDirectory { .. }), "{e}");
    // A tree's own entries out of order.
    common.clear();
    let e = signed(
        common,
        vec![tree(Arch::X86_64, vec![entry("b", 1), entry("a", 2)])],
    )
    .expect_err("unsorted");
    assert!(matches!(e, ReleaseError::Unsorted { .. }), "{e}");
}

#[test]
fn the_format_number_must_match_whether_there_are_trees() {
    let bytes = signed(
        vec![entry("app.py", 1)],
        vec![ArchTree {
            arch: Arch::X86_64,
            entries: vec![entry("bin/native", 2)],
        }],
    )
    .expect("sign");
    let mut m = manifest::verify(&fixed_key().verifying_key(), &bytes)
        .expect("verify")
        .manifest;
    m.format = MANIFEST_FORMAT;
    assert!(matches!(m.validate(), Err(ReleaseError::BadArchTrees(_))));
    m.format = MANIFEST_FORMAT_ARCH;
    m.arch_trees.clear();
    assert!(matches!(m.validate(), Err(ReleaseError::BadArchTrees(_))));
    // Format 4 carries limits (issue #24 item 4): without any it is refused.
    m.format = manifest::MANIFEST_FORMAT_LIMITS;
    assert!(matches!(
        m.validate(),
        Err(ReleaseError::BadAppLimit {
            field: "format",
            ..
        })
    ));
    // Format 5 carries a migration (issue #24 item 2): without one it is
    // refused as such.
    m.format = manifest::MANIFEST_FORMAT_MIGRATION;
    assert!(matches!(m.validate(), Err(ReleaseError::BadMigration(_))));
    m.format = 6;
    assert!(matches!(
        m.validate(),
        Err(ReleaseError::UnsupportedFormat(6))
    ));
}
