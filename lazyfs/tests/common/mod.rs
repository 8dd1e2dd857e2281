//! Shared fixture: a real lazy mount over a temporary backing directory.

#![allow(dead_code)]

use lazyfs::{LazyConfig, LazyMount};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Set to `1` to fail (instead of skip) when FUSE cannot be mounted.
const REQUIRE_ENV: &str = "FLEETWEFT_REQUIRE_FUSE";

/// A mounted lazy fs; fields drop in order, so it unmounts before the
/// temporary directories are removed (also when a test panics).
pub struct Fixture {
    pub mount: LazyMount,
    pub mnt: tempfile::TempDir,
    pub backing: tempfile::TempDir,
}

impl Fixture {
    /// A path inside the mount.
    pub fn at(&self, rel: &str) -> PathBuf {
        self.mnt.path().join(rel)
    }

    /// A path inside the backing directory.
    pub fn durable(&self, rel: &str) -> PathBuf {
        self.backing.path().join(rel)
    }
}

/// Mounts with `configure` applied to a default config, after `prepare`
/// filled the backing directory. None (with a loud notice) when FUSE is not
/// available, unless FLEETWEFT_REQUIRE_FUSE=1.
pub fn mount_with(
    prepare: impl FnOnce(&Path),
    configure: impl FnOnce(&mut LazyConfig),
) -> Option<Fixture> {
    let backing = tempfile::tempdir().expect("tempdir");
    let mnt = tempfile::tempdir().expect("tempdir");
    prepare(backing.path());
    let mut config = LazyConfig::new(backing.path());
    configure(&mut config);
    match LazyMount::mount(mnt.path(), config) {
        Ok(mount) => Some(Fixture {
            mount,
            mnt,
            backing,
        }),
        Err(e) => {
            if std::env::var(REQUIRE_ENV).as_deref() == Ok("1") {
                panic!("FUSE mount failed and {REQUIRE_ENV}=1: {e}");
            }
            eprintln!("\n!!!!! SKIPPING lazyfs test: cannot mount FUSE ({e}); set {REQUIRE_ENV}=1 to fail instead !!!!!\n");
            None
        }
    }
}

/// Mounts an empty backing directory with the default config.
pub fn mount() -> Option<Fixture> {
    mount_with(|_| {}, |_| {})
}

/// Writes `data` to `path` (create/truncate), without any fsync.
pub fn write(path: &Path, data: &[u8]) {
    let mut f = File::create(path).expect("create");
    f.write_all(data).expect("write");
}

/// Writes `data` to `path` (create/truncate) and fsyncs the file.
pub fn write_synced(path: &Path, data: &[u8]) {
    let mut f = File::create(path).expect("create");
    f.write_all(data).expect("write");
    f.sync_all().expect("fsync");
}

/// Appends `data` to `path` without fsync.
pub fn append(path: &Path, data: &[u8]) {
    let mut f = OpenOptions::new().append(true).open(path).expect("open");
    f.write_all(data).expect("append");
}

/// fsyncs a directory (FUSE fsyncdir).
pub fn sync_dir(path: &Path) {
    File::open(path)
        .expect("open dir")
        .sync_all()
        .expect("fsyncdir");
}

/// Names in a directory, sorted.
pub fn names(path: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(path)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Deterministic pseudo-random bytes (xorshift64).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
