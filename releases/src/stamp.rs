//! What `stat` says of a file, as the read-back cache compares it between
//! read-backs and the tree listing records it (see `readback` for why a
//! stamp may stand for a re-hash).

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A stamp whose ctime is this close to when it was taken is not
/// recorded: filesystems with 1 s (or 2 s) timestamps would not show an
/// edit made in the same tick.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// What `stat` says of a file, compared between read-backs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of `meta` (from `symlink_metadata`).
    pub(crate) fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mode: meta.mode(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether the file may have changed within the tick of its ctime, as
    /// seen at `now`: a ctime in the future counts as racy too.
    pub(crate) fn racy(&self, now: SystemTime) -> bool {
        let (secs, nanos) = self.ctime;
        let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else {
            return true;
        };
        let ctime = UNIX_EPOCH + Duration::new(secs, nanos.min(999_999_999));
        match now.duration_since(ctime) {
            Ok(age) => age < RACY_WINDOW,
            Err(_) => true,
        }
    }
}
