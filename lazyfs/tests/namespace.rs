//! Real-mount tests of the corner cases of directory-entry durability.

mod common;

use common::*;
use std::fs;
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::process::Command;

#[test]
fn new_directory_needs_its_parent_synced() {
    let Some(fx) = mount() else { return };
    fs::create_dir(fx.at("d")).unwrap();
    write_synced(&fx.at("d/f"), b"inside");
    sync_dir(&fx.at("d"));
    fx.mount.cut();
    assert!(
        !fx.at("d").exists(),
        "parent not synced: the directory is gone"
    );

    // Synced bottom-up (file, its dir, then the parent) it all survives.
    fs::create_dir(fx.at("d")).unwrap();
    fs::create_dir(fx.at("d/e")).unwrap();
    write_synced(&fx.at("d/e/f"), b"deep");
    sync_dir(&fx.at("d/e"));
    sync_dir(&fx.at("d"));
    sync_dir(fx.mnt.path());
    fx.mount.cut();
    assert_eq!(fs::read(fx.at("d/e/f")).unwrap(), b"deep");
    assert_eq!(fs::read(fx.durable("d/e/f")).unwrap(), b"deep");
}

#[test]
fn directory_synced_top_down_keeps_only_what_was_synced() {
    let Some(fx) = mount() else { return };
    fs::create_dir(fx.at("d")).unwrap();
    sync_dir(fx.mnt.path());
    write_synced(&fx.at("d/f"), b"data");
    // d's entry for f never synced: d survives empty.
    fx.mount.cut();
    assert!(fx.at("d").is_dir());
    assert!(names(&fx.at("d")).is_empty());
}

#[test]
fn name_synced_but_data_not_gives_an_empty_file() {
    let Some(fx) = mount() else { return };
    write(&fx.at("f"), b"unsynced data");
    sync_dir(fx.mnt.path());
    fx.mount.cut();
    assert_eq!(fs::read(fx.at("f")).unwrap(), b"");
}

#[test]
fn atomic_replace_pattern_needs_the_dirsync() {
    let prepare = |b: &Path| fs::write(b.join("config"), b"v1").unwrap();
    let Some(fx) = mount_with(prepare, |_| {}) else {
        return;
    };
    write_synced(&fx.at("config.tmp"), b"v2");
    fs::rename(fx.at("config.tmp"), fx.at("config")).unwrap();
    fx.mount.cut();
    assert_eq!(names(fx.mnt.path()), ["config"]);
    assert_eq!(fs::read(fx.at("config")).unwrap(), b"v1");

    write_synced(&fx.at("config.tmp"), b"v2");
    fs::rename(fx.at("config.tmp"), fx.at("config")).unwrap();
    sync_dir(fx.mnt.path());
    fx.mount.cut();
    assert_eq!(names(fx.mnt.path()), ["config"]);
    assert_eq!(fs::read(fx.at("config")).unwrap(), b"v2");
}

#[test]
fn rename_across_directories_is_durable_per_directory() {
    let prepare = |b: &Path| {
        fs::create_dir(b.join("a")).unwrap();
        fs::create_dir(b.join("b")).unwrap();
        fs::write(b.join("a/x"), b"moved").unwrap();
    };
    let Some(fx) = mount_with(prepare, |_| {}) else {
        return;
    };
    fs::rename(fx.at("a/x"), fx.at("b/x")).unwrap();
    sync_dir(&fx.at("b"));
    fx.mount.cut();
    // Only the destination synced: the new name is durable, the old name's
    // removal is not (documented per-directory model).
    assert_eq!(fs::read(fx.at("a/x")).unwrap(), b"moved");
    assert_eq!(fs::read(fx.at("b/x")).unwrap(), b"moved");

    fs::remove_file(fx.at("b/x")).unwrap();
    fs::rename(fx.at("a/x"), fx.at("b/x")).unwrap();
    sync_dir(&fx.at("a"));
    sync_dir(&fx.at("b"));
    fx.mount.cut();
    assert!(names(&fx.at("a")).is_empty());
    assert_eq!(fs::read(fx.at("b/x")).unwrap(), b"moved");
}

#[test]
fn directory_moves_to_another_parent_are_refused() {
    let Some(fx) = mount() else { return };
    fs::create_dir_all(fx.at("a/sub")).unwrap();
    fs::create_dir(fx.at("b")).unwrap();
    let err = fs::rename(fx.at("a/sub"), fx.at("b/sub")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EXDEV));
    // Renaming a directory within its parent works and syncs.
    fs::rename(fx.at("a/sub"), fx.at("a/renamed")).unwrap();
    sync_dir(&fx.at("a"));
    sync_dir(fx.mnt.path());
    fx.mount.cut();
    assert_eq!(names(&fx.at("a")), ["renamed"]);
}

#[test]
fn synced_directory_rename_and_rmdir() {
    let prepare = |b: &Path| {
        fs::create_dir_all(b.join("d/inner")).unwrap();
        fs::write(b.join("d/inner/f"), b"kept").unwrap();
        fs::create_dir(b.join("gone")).unwrap();
        fs::write(b.join("gone/g"), b"x").unwrap();
    };
    let Some(fx) = mount_with(prepare, |_| {}) else {
        return;
    };
    fs::rename(fx.at("d"), fx.at("d2")).unwrap();
    fs::remove_file(fx.at("gone/g")).unwrap();
    fs::remove_dir(fx.at("gone")).unwrap();
    sync_dir(fx.mnt.path());
    fx.mount.cut();
    assert_eq!(names(fx.mnt.path()), ["d2"]);
    assert_eq!(fs::read(fx.at("d2/inner/f")).unwrap(), b"kept");
    assert_eq!(names(fx.backing.path()), [".lazyfs-store", "d2"]);
}

#[test]
fn unlinked_open_file_keeps_working_until_the_cut() {
    let prepare = |b: &Path| fs::write(b.join("f"), b"durable").unwrap();
    let Some(fx) = mount_with(prepare, |_| {}) else {
        return;
    };
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(fx.at("f"))
        .unwrap();
    fs::remove_file(fx.at("f")).unwrap();
    f.write_all(b"DURABLE").unwrap();
    f.rewind().unwrap();
    let mut back = String::new();
    f.read_to_string(&mut back).unwrap();
    assert_eq!(back, "DURABLE");
    // Same inode as the durable name: its fsync reaches that name's content.
    f.sync_all().unwrap();
    fx.mount.cut();
    assert_eq!(fs::read(fx.at("f")).unwrap(), b"DURABLE");
    // Handles opened before a cut are stale.
    assert!(f.read(&mut [0u8; 4]).is_err());
}

#[test]
fn truncate_without_fsync_is_dropped() {
    let prepare = |b: &Path| fs::write(b.join("f"), vec![7u8; 10_000]).unwrap();
    let Some(fx) = mount_with(prepare, |_| {}) else {
        return;
    };
    fs::OpenOptions::new()
        .write(true)
        .open(fx.at("f"))
        .unwrap()
        .set_len(10)
        .unwrap();
    assert_eq!(fs::metadata(fx.at("f")).unwrap().len(), 10);
    fx.mount.cut();
    assert_eq!(fs::read(fx.at("f")).unwrap(), vec![7u8; 10_000]);
}

/// Kills (SIGKILL) and reaps the binary if a test fails before SIGTERM, so
/// no mount outlives the test; the kernel then aborts the dead mount and a
/// lazy unmount removes it.
struct ChildGuard(Option<std::process::Child>, std::path::PathBuf);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
            if let Ok(path) = std::ffi::CString::new(self.1.as_os_str().as_encoded_bytes()) {
                // SAFETY: a valid NUL-terminated path.
                unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

#[test]
fn binary_cuts_through_control_file_and_exits_on_sigterm() {
    if !Path::new("/dev/fuse").exists() {
        eprintln!("\n!!!!! SKIPPING lazyfs binary test: no /dev/fuse !!!!!\n");
        return;
    }
    let backing = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    fs::write(backing.path().join("kept"), b"k").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_fleetweft-lazyfs"))
        .arg("--backing")
        .arg(backing.path())
        .arg("--mount")
        .arg(mnt.path())
        .spawn()
        .unwrap();
    let mut guard = ChildGuard(Some(child), mnt.path().to_path_buf());
    let ctl = mnt.path().join(lazyfs::CTL_NAME);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ctl.exists() {
        assert!(std::time::Instant::now() < deadline, "binary did not mount");
        if let Some(status) = guard.0.as_mut().and_then(|c| c.try_wait().unwrap()) {
            if std::env::var("FLEETWEFT_REQUIRE_FUSE").as_deref() == Ok("1") {
                panic!("binary could not mount: {status:?}");
            }
            eprintln!(
                "\n!!!!! SKIPPING lazyfs binary test: it could not mount ({status:?}) !!!!!\n"
            );
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    write(&mnt.path().join("pending"), b"p");
    fs::write(&ctl, b"cut\n").unwrap();
    assert_eq!(names(mnt.path()), ["kept"]);
    let mut child = guard.0.take().unwrap();
    // SAFETY: signalling the child we spawned, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(names(backing.path()), ["kept"], "unmounted, store cleaned");
    assert!(!ctl.exists());
}

#[test]
fn statfs_reports_the_backing_filesystem() {
    let Some(fx) = mount() else { return };
    let path = std::ffi::CString::new(fx.mnt.path().as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statvfs is plain data, filled by the call from a valid path.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(path.as_ptr(), &mut st), 0);
        st
    };
    assert!(st.f_blocks > 0 && st.f_bavail > 0, "free space is reported");
}
