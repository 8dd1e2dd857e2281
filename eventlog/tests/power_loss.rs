//! Crash points of a new sled log on the lazy filesystem (issue #25 item
//! 4): creating the log (staging directory, marker, watermark, rename) and
//! its first appends, with a power cut at every sync and one after the
//! writes returned. The log must then open (never "corrupt" or "not a
//! log") and hold every append that returned. Skips loudly without FUSE
//! unless FLEETWEFT_REQUIRE_FUSE=1.

use eventlog::EventLog;
use lazyfs::enumerate::{every_sync_point, CutPoint};
use std::path::Path;

/// Appends that must survive once they returned.
const APPENDS: u64 = 3;

#[test]
fn a_new_log_opens_with_every_returned_append_at_every_crash_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write_log = |mnt: &Path| {
        let Ok((log, _)) = EventLog::<String>::open(mnt.join("log")) else {
            return false;
        };
        let mut done = 0;
        for i in 0..APPENDS {
            if log.append(vec![format!("event {i}")]).is_err() {
                break;
            }
            done += 1;
        }
        done == APPENDS
    };
    // sled 0.34.7 panics (`sync_all().unwrap()` in its IoBufs' Drop) when
    // the fsync of a database being closed fails, as the cut sync does: a
    // panic counts as a failed write (the process dies there).
    let write = |mnt: &Path| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write_log(mnt))).unwrap_or(false)
    };
    let check = |mnt: &Path, point: CutPoint, ok: bool| {
        let (_, events) = EventLog::<String>::open(mnt.join("log"))
            .unwrap_or_else(|e| panic!("{point:?}: the log must open after the cut: {e}"));
        if ok {
            assert_eq!(
                events.len() as u64,
                APPENDS,
                "{point:?}: appends that returned are durable"
            );
        }
        for (i, (sequence, event)) in events.iter().enumerate() {
            assert_eq!(*sequence, i as u64, "{point:?}");
            assert_eq!(event, &format!("event {i}"), "{point:?}");
        }
    };
    match every_sync_point(dir.path(), |_| {}, write, check) {
        Ok(figures) => {
            eprintln!("crash points: {figures:?}");
            assert!(figures.syncs > APPENDS, "{figures:?}");
        }
        Err(e) if std::env::var("FLEETWEFT_REQUIRE_FUSE").as_deref() != Ok("1") => {
            eprintln!("\n!!!!! SKIPPING crash-point enumeration: cannot mount FUSE ({e}) !!!!!\n");
        }
        Err(e) => panic!("FUSE mount failed and FLEETWEFT_REQUIRE_FUSE=1: {e}"),
    }
}
