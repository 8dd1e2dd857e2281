//! The leader's housekeeping thread (issue #26 items 2 and 3): archives
//! history after snapshots, compacts etcd's revision history after the
//! archived keys are deleted, and measures the storage against its quota.
//!
//! Archiving reads, compresses and fsyncs segments and then deletes the
//! archived keys (sled: about 28,000 keys/s; docs/operations.md), seconds
//! for a snapshot interval of events: too slow for the core task, whose
//! every pause delays every agent's answer. So it runs here, beside the
//! core's appends (the event log allows that: it archives only durable
//! entries below the newest snapshot), in steps of at most
//! [`ARCHIVE_STEP_EVENTS`] entries, each logged as it ends. A crash at any
//! point is harmless (`eventlog::archive_log`): the next run finishes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::view::storage::StorageUse;
use eventlog::ArchiveConfig;

use super::fatal::{deposed, FatalCell};
use crate::archive::Archiver;

/// How often the storage's size is measured (one etcd `Status` call).
pub const SPACE_POLL_S: u64 = 10;

/// Most entries archived in one step: a progress line per step, and
/// segments cut at least this often.
pub const ARCHIVE_STEP_EVENTS: u64 = 1_000_000;

/// The core's handle on the thread. Dropping it stops the thread after
/// its current step (a step cut by the process's end is harmless).
pub struct Housekeeping {
    jobs: mpsc::Sender<u64>,
    busy: Arc<AtomicBool>,
    measured: Arc<Mutex<Option<StorageUse>>>,
}

impl Housekeeping {
    /// Starts the thread over `archiver`; `dir` is `[log] archive_dir`,
    /// `quota` the configured quota where the storage reports none; a
    /// fenced archive step stops the daemon as deposed through `fatal`.
    pub fn start(
        archiver: Archiver,
        dir: Option<PathBuf>,
        quota: Option<u64>,
        fatal: FatalCell,
    ) -> Self {
        let (jobs, queue) = mpsc::channel::<u64>();
        let busy = Arc::new(AtomicBool::new(false));
        let measured = Arc::new(Mutex::new(None));
        let worker = Worker {
            archiver,
            dir,
            quota,
            fatal,
            busy: Arc::clone(&busy),
            measured: Arc::clone(&measured),
        };
        let spawned = std::thread::Builder::new()
            .name("fleetweft-housekeeping".into())
            .spawn(move || worker.run(&queue));
        if let Err(e) = spawned {
            tracing::warn!(
                "cannot start the housekeeping thread (no archiving, no storage gauge): {e}"
            );
        }
        Housekeeping {
            jobs,
            busy,
            measured,
        }
    }

    /// Asks for the entries below `upto` to be archived, unless a run is
    /// under way (the next snapshot asks again, for more).
    pub fn archive(&self, upto: u64) {
        if self.busy.swap(true, Ordering::AcqRel) {
            tracing::debug!("archiving below {upto} waits: a run is under way");
            return;
        }
        if self.jobs.send(upto).is_err() {
            self.busy.store(false, Ordering::Release);
        }
    }

    /// The storage as last measured.
    pub fn storage(&self) -> Option<StorageUse> {
        self.measured.lock().ok().and_then(|m| *m)
    }
}

struct Worker {
    archiver: Archiver,
    dir: Option<PathBuf>,
    quota: Option<u64>,
    /// Where a fenced step reports the daemon deposed.
    fatal: FatalCell,
    busy: Arc<AtomicBool>,
    measured: Arc<Mutex<Option<StorageUse>>>,
}

impl Worker {
    fn run(self, queue: &mpsc::Receiver<u64>) {
        self.measure();
        loop {
            match queue.recv_timeout(Duration::from_secs(SPACE_POLL_S)) {
                Ok(upto) => {
                    if let Some(dir) = &self.dir {
                        self.archive(dir, upto);
                    }
                    self.busy.store(false, Ordering::Release);
                    self.measure();
                }
                Err(RecvTimeoutError::Timeout) => self.measure(),
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn measure(&self) {
        match self.archiver.space() {
            Ok(Some(space)) => {
                let used = StorageUse {
                    bytes: space.bytes,
                    quota_bytes: space.quota_bytes.or(self.quota),
                };
                if let Some(q) = used.quota_bytes {
                    if api::view::storage::over_threshold(used.bytes, q) {
                        tracing::warn!("{}", api::view::storage::sentence(used.bytes, q));
                    }
                }
                if let Ok(mut m) = self.measured.lock() {
                    *m = Some(used);
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("measuring the log's storage failed (retried): {e}"),
        }
    }

    /// Archives below `upto` in steps, each logged.
    fn archive(&self, dir: &std::path::Path, upto: u64) {
        let config = ArchiveConfig::default();
        let mut first_live = match self.archiver.first_live() {
            Ok(first) => first,
            Err(e) => {
                tracing::warn!("archiving: reading the live start failed (retried after the next snapshot): {e}");
                return;
            }
        };
        if upto <= first_live {
            return;
        }
        let total = upto - first_live;
        let began = Instant::now();
        tracing::info!(
            from = first_live,
            upto,
            dir = %dir.display(),
            "archiving {total} entries of history"
        );
        while first_live < upto {
            let step = upto.min(first_live.saturating_add(ARCHIVE_STEP_EVENTS));
            let started = Instant::now();
            match self.archiver.archive(dir, step, &config) {
                Ok(done) => {
                    let r = &done.report;
                    let entries = r.archived.end.saturating_sub(r.archived.start);
                    let secs = started.elapsed().as_secs_f64();
                    tracing::info!(
                        archived_from = r.archived.start,
                        archived_to = r.archived.end,
                        segments = r.segments.len(),
                        deleted = r.deleted,
                        compacted_to = ?done.compacted_to,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        entries_per_s = if secs > 0.0 { (entries as f64 / secs) as u64 } else { 0 },
                        "archived entries below {} ({} of {total} done); the live log starts there",
                        r.first_live,
                        r.first_live.saturating_sub(upto - total)
                    );
                    if r.first_live <= first_live {
                        return;
                    }
                    first_live = r.first_live;
                }
                Err(e) if e.is_fencing() => deposed(&self.fatal, &e.to_string()),
                Err(e) => {
                    tracing::warn!(
                        "archiving below {step} failed, nothing is lost (retried after the next snapshot): {e}"
                    );
                    return;
                }
            }
        }
        tracing::info!(
            elapsed_ms = began.elapsed().as_millis() as u64,
            "archiving done: the live log starts at {first_live}"
        );
    }
}
