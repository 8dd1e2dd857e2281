//! A power line shared by two mounts: the Nth sync on either one is where
//! power fails; that sync and every later one, on both mounts, are held
//! unanswered until the cut, and never become durable.

mod common;

use common::mount_with;
use lazyfs::PowerLine;
use std::fs::{self, File};
use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

/// How long a held sync must stay unanswered to count as held.
const HELD_MS: u64 = 300;

/// Writes `name` on `dir` with `bytes` and fsyncs it on a thread; the
/// receiver gets the fsync's result when (if) it returns.
fn write_and_sync(path: std::path::PathBuf, bytes: &'static [u8]) -> mpsc::Receiver<bool> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut file = File::create(&path).expect("create");
        file.write_all(bytes).expect("write");
        let _ = tx.send(file.sync_all().is_ok());
    });
    rx
}

#[test]
fn the_nth_sync_on_any_mount_holds_every_sync_until_the_cut() {
    let line = PowerLine::new();
    let on_line = |c: &mut lazyfs::LazyConfig| c.power = Some(line.clone());
    let Some(a) = mount_with(|_| {}, on_line) else {
        return;
    };
    let Some(b) = mount_with(|_| {}, on_line) else {
        return;
    };
    line.trip_at_sync(2);
    let first = write_and_sync(a.at("one"), b"one");
    assert_eq!(first.recv_timeout(Duration::from_secs(5)), Ok(true));
    // The second sync, on the other mount, is where power fails.
    let second = write_and_sync(b.at("two"), b"two");
    assert!(
        second.recv_timeout(Duration::from_millis(HELD_MS)).is_err(),
        "the sync at the trip point must not return"
    );
    assert!(line.tripped());
    // After the trip, a sync on the first mount is held too.
    let third = write_and_sync(a.at("three"), b"three");
    assert!(third.recv_timeout(Duration::from_millis(HELD_MS)).is_err());
    assert_eq!(a.mount.held_syncs(), 1);
    assert_eq!(b.mount.held_syncs(), 1);
    a.mount.cut();
    b.mount.cut();
    assert_eq!(third.recv_timeout(Duration::from_secs(5)), Ok(false));
    assert_eq!(second.recv_timeout(Duration::from_secs(5)), Ok(false));
    line.restore();
    // What the held syncs covered never reached the disk; the first did
    // (its data; its name needs the directory sync, which never came).
    assert!(!b.durable("two").exists());
    assert!(!a.durable("three").exists());
    assert_eq!(line.syncs(), 1);
    // Power is back: syncs complete again.
    let after = write_and_sync(a.at("four"), b"four");
    assert_eq!(after.recv_timeout(Duration::from_secs(5)), Ok(true));
    fs::remove_file(a.at("four")).expect("remove");
}
