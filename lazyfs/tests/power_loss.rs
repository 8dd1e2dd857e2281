//! Real-mount tests of lazyfs: what survives a cut and what does not.
//! They need root and /dev/fuse (see `common::mount_with` for the skip rule).

mod common;

use common::*;
use lazyfs::TearMode;
use std::fs;
use std::process::Command;

const BLOCK: usize = 4096;
const MIB: usize = 1024 * 1024;

#[test]
fn unsynced_file_is_gone_after_cut() {
    let Some(fx) = mount() else { return };
    write(&fx.at("plain"), b"never synced");
    // Data fsynced, but the directory never was: the name is not durable.
    write_synced(&fx.at("data-only"), b"fsynced data");
    assert_eq!(fs::read(fx.at("plain")).unwrap(), b"never synced");
    assert_eq!(names(fx.mnt.path()), ["data-only", "plain"]);

    let report = fx.mount.cut();

    assert!(!fx.at("plain").exists());
    assert!(!fx.at("data-only").exists());
    assert!(names(fx.mnt.path()).is_empty());
    assert!(!fx.durable("plain").exists() && !fx.durable("data-only").exists());
    assert_eq!(report.dropped_entries, 2, "{report:?}");
    assert_eq!(report.dropped_files, 1, "{report:?}");
    assert_eq!(report.dropped_bytes, 12, "{report:?}");
}

#[test]
fn synced_file_survives_cut_byte_for_byte() {
    let Some(fx) = mount() else { return };
    let data = random_bytes(MIB, 42);
    write_synced(&fx.at("blob"), &data);
    sync_dir(fx.mnt.path());

    let report = fx.mount.cut();

    assert_eq!(fs::read(fx.at("blob")).unwrap(), data);
    assert_eq!(fs::read(fx.durable("blob")).unwrap(), data);
    assert_eq!(
        report.dropped_files + report.dropped_entries,
        0,
        "{report:?}"
    );
}

#[test]
fn overwrite_without_fsync_reverts_to_durable_content() {
    let Some(fx) = mount_with(|b| fs::write(b.join("f"), b"content A").unwrap(), |_| {}) else {
        return;
    };
    write(&fx.at("f"), b"content B, longer");
    assert_eq!(fs::read(fx.at("f")).unwrap(), b"content B, longer");
    // O_TRUNC reaches the fs as a pending truncate: a shorter B reads exact.
    write(&fx.at("f"), b"B");
    assert_eq!(fs::read(fx.at("f")).unwrap(), b"B");

    fx.mount.cut();

    assert_eq!(fs::read(fx.at("f")).unwrap(), b"content A");
}

#[test]
fn rename_is_durable_only_with_its_directory() {
    let prepare = |b: &std::path::Path| fs::write(b.join("old"), b"payload").unwrap();
    let Some(fx) = mount_with(prepare, |_| {}) else {
        return;
    };
    fs::rename(fx.at("old"), fx.at("new")).unwrap();
    assert_eq!(names(fx.mnt.path()), ["new"]);

    fx.mount.cut();
    assert_eq!(names(fx.mnt.path()), ["old"]);
    assert_eq!(fs::read(fx.at("old")).unwrap(), b"payload");

    fs::rename(fx.at("old"), fx.at("new")).unwrap();
    sync_dir(fx.mnt.path());
    fx.mount.cut();
    assert_eq!(names(fx.mnt.path()), ["new"]);
    assert_eq!(fs::read(fx.at("new")).unwrap(), b"payload");
}

#[test]
fn unlink_without_dirsync_comes_back() {
    let prepare = |b: &std::path::Path| fs::write(b.join("victim"), b"still here").unwrap();
    let Some(fx) = mount_with(prepare, |_| {}) else {
        return;
    };
    fs::remove_file(fx.at("victim")).unwrap();
    assert!(!fx.at("victim").exists());

    let report = fx.mount.cut();
    assert_eq!(fs::read(fx.at("victim")).unwrap(), b"still here");
    assert_eq!(report.dropped_entries, 1, "{report:?}");

    fs::remove_file(fx.at("victim")).unwrap();
    sync_dir(fx.mnt.path());
    fx.mount.cut();
    assert!(!fx.at("victim").exists());
    assert!(!fx.durable("victim").exists());
}

/// The durable content after a cut that tears a 3-block append.
fn torn_append(tear: TearMode) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let fx = mount_with(
        |_| {},
        |c| {
            c.tear = tear;
            c.block_bytes = BLOCK as u64;
        },
    )?;
    let base = random_bytes(BLOCK, 1);
    write_synced(&fx.at("log"), &base);
    sync_dir(fx.mnt.path());
    let pending = random_bytes(3 * BLOCK, 2);
    append(&fx.at("log"), &pending);
    let report = fx.mount.cut();
    let expected_torn = u64::from(tear != TearMode::None);
    assert_eq!(report.torn_writes, expected_torn, "{report:?}");
    Some((base, pending, fs::read(fx.at("log")).unwrap()))
}

#[test]
fn tearing_zero_keeps_a_prefix_of_whole_blocks_then_zeros() {
    let Some((base, pending, after)) = torn_append(TearMode::Zero) else {
        return;
    };
    assert_eq!(&after[..BLOCK], &base[..], "the synced block is intact");
    let tail = &after[BLOCK..];
    assert!(tail.len() <= pending.len());
    assert_ne!(tail, &pending[..], "tearing must not keep the whole write");
    // General property: whole blocks of the pending data, then zeros.
    let kept = tail
        .iter()
        .zip(&pending)
        .take_while(|(a, b)| a == b)
        .count()
        / BLOCK
        * BLOCK;
    assert!(
        tail[kept..].iter().all(|&b| b == 0),
        "after the kept blocks only zeros"
    );
    // The documented deterministic choice: floor(3 / 2) = 1 block kept.
    assert_eq!(kept, BLOCK);
    assert_eq!(tail.len(), 3 * BLOCK);
}

#[test]
fn tearing_garbage_keeps_a_prefix_then_not_the_data() {
    let Some((base, pending, after)) = torn_append(TearMode::Garbage) else {
        return;
    };
    assert_eq!(&after[..BLOCK], &base[..]);
    assert_eq!(&after[BLOCK..2 * BLOCK], &pending[..BLOCK]);
    assert_eq!(after.len(), 4 * BLOCK);
    assert_ne!(&after[2 * BLOCK..], &pending[BLOCK..]);
}

#[test]
fn no_tearing_drops_the_whole_pending_write() {
    let Some((base, _, after)) = torn_append(TearMode::None) else {
        return;
    };
    assert_eq!(after, base);
}

#[test]
fn cut_at_third_sync() {
    let prepare = |b: &std::path::Path| {
        for name in ["a", "b", "c"] {
            fs::write(b.join(name), b"old").unwrap();
        }
    };
    let Some(fx) = mount_with(prepare, |c| c.cut_at_sync = Some(3)) else {
        return;
    };
    write_synced(&fx.at("a"), b"new a");
    write_synced(&fx.at("b"), b"new b");
    let mut f = fs::File::create(fx.at("c")).unwrap();
    std::io::Write::write_all(&mut f, b"new c").unwrap();
    let third = f.sync_all();
    assert!(third.is_err(), "the cutting sync must not report success");
    drop(f);

    assert_eq!(fs::read(fx.at("a")).unwrap(), b"new a");
    assert_eq!(fs::read(fx.at("b")).unwrap(), b"new b");
    assert_eq!(fs::read(fx.at("c")).unwrap(), b"old");
    let report = fx.mount.report();
    assert_eq!((report.syncs, report.cuts), (3, 1), "{report:?}");
    // Later syncs work normally.
    write_synced(&fx.at("c"), b"newer c");
    fx.mount.cut();
    assert_eq!(fs::read(fx.at("c")).unwrap(), b"newer c");
}

#[test]
fn control_file_cut_from_another_process() {
    let Some(fx) = mount() else { return };
    write(&fx.at("pending"), b"x");
    let ctl = fx.at(lazyfs::CTL_NAME);
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("echo cut > '{}'", ctl.display()))
        .status()
        .unwrap();
    assert!(status.success());
    assert!(!fx.at("pending").exists());
    assert_eq!(fx.mount.report().cuts, 1);
    let counters = Command::new("cat").arg(&ctl).output().unwrap();
    let text = String::from_utf8_lossy(&counters.stdout);
    assert!(text.contains("cuts 1\n"), "{text}");
    // The control file is not listed, and rejects unknown commands.
    assert!(names(fx.mnt.path()).is_empty());
    assert!(fs::write(&ctl, b"bogus").is_err());
}
