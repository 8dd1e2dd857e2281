//! The log backends a test controller can run on: the test matrix of
//! issue #14 ("the existing suite runs on both backends where it touches
//! the log"). A test written against [`LogHome`] runs once per backend in
//! [`backends`]: sled always, etcd when the test command's cluster is up
//! (`etcd_harness`; without etcd and without root it skips loudly).
//!
//! On etcd a controller holds the prefix's leadership. Its restarts are
//! the two ways a controller ends there: an orderly stop **resigns** (a new
//! process is elected at once), a crash **abandons** the lease (the next
//! process is elected only once etcd expires it, one TTL later), so a
//! crash-restart test also walks the takeover path.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use controller::driver::{Controller, ControllerLog};
use eventlog::{EtcdClient, EtcdConfig, EtcdStorage, EventLog, Leadership};
use model::controller::Event;

use crate::etcd_harness;

/// The matrix tests' lease TTL: a crash-restart waits for the lease to
/// expire, so keep it at etcd's minimum (whole seconds).
const MATRIX_LEASE_TTL_MS: u64 = 1_000;

/// Longest a (re)started test controller campaigns for the leadership: the
/// old lease's TTL plus room for a loaded machine.
const MATRIX_CAMPAIGN_MS: u64 = 15_000;

/// Characters of a test's name kept in its etcd prefix.
const PREFIX_TAG_CHARS_MAX: usize = 16;

/// Logs made by this process, numbering their etcd prefixes.
static LOGS_MADE: AtomicU64 = AtomicU64::new(0);

/// Which storage a test controller's log is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The embedded default, in a directory.
    Sled,
    /// The shared test cluster, under a prefix of the test's own.
    Etcd(Vec<String>),
}

impl Backend {
    /// `sled` or `etcd`, for assertion messages.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sled => "sled",
            Backend::Etcd(_) => "etcd",
        }
    }
}

/// Every backend available to this run: sled, and etcd when its cluster
/// could be started.
pub fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::Sled];
    if let Some(endpoints) = etcd_harness::shared_endpoints() {
        all.push(Backend::Etcd(endpoints));
    }
    all
}

/// Where one test controller's log lives, and (on etcd) the leadership
/// its current process holds.
pub struct LogHome {
    backend: Backend,
    dir: PathBuf,
    etcd: Option<(EtcdClient, EtcdConfig)>,
    leadership: Option<Leadership>,
}

impl LogHome {
    /// A fresh, empty log on `backend`: in `dir` on sled, under a prefix
    /// named after `dir` and `test` on etcd.
    pub fn new(backend: &Backend, dir: &Path, test: &str) -> Self {
        let etcd = match backend {
            Backend::Sled => None,
            Backend::Etcd(endpoints) => {
                // Tests of one process share the cluster: a prefix each.
                let n = LOGS_MADE.fetch_add(1, Ordering::Relaxed);
                // Keys repeat the prefix (at most 64 bytes): a short tag.
                let tag: String = test.chars().take(PREFIX_TAG_CHARS_MAX).collect();
                let prefix = etcd_harness::prefix(&format!("{tag}-{n}"));
                let mut config = etcd_harness::config(endpoints, &prefix);
                config.lease_ttl_ms = MATRIX_LEASE_TTL_MS;
                let client = EtcdClient::connect(&config).expect("connect to the test cluster");
                Some((client, config))
            }
        };
        LogHome {
            backend: backend.clone(),
            dir: dir.to_path_buf(),
            etcd,
            leadership: None,
        }
    }

    /// The backend this log is on.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The sled directory (also where a test keeps other files on etcd).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Opens the controller on this log, as a (re)starting process does:
    /// on etcd it first wins the leadership (waiting out a crashed
    /// predecessor's lease), then opens the fenced log.
    pub fn open(&mut self) -> Controller {
        let Some((client, config)) = &self.etcd else {
            return Controller::open(&self.dir).expect("open the sled log");
        };
        assert!(self.leadership.is_none(), "one controller per log at once");
        let wait = Duration::from_millis(MATRIX_CAMPAIGN_MS);
        let leadership =
            Leadership::campaign(client, config, "matrix-test", wait).expect("elected");
        let storage = EtcdStorage::open(client, config, &leadership).expect("open the etcd log");
        self.leadership = Some(leadership);
        Controller::open_on_storage(Box::new(storage))
            .expect("open the controller on etcd")
            .0
    }

    /// Ends the controller process: `close` is an orderly stop (on etcd
    /// the lease is resigned), otherwise a crash (the controller is
    /// dropped unflushed, and on etcd its lease is left to expire).
    pub fn stop(&mut self, ctrl: Controller, close: bool) {
        if close {
            ctrl.close().expect("close");
        } else {
            drop(ctrl);
        }
        if let Some(leadership) = self.leadership.take() {
            if close {
                leadership.resign().expect("resign");
            } else {
                leadership.abandon();
            }
        }
    }

    /// Every event in the log, read back from storage with its chain
    /// verified (no controller needs to hold it).
    pub fn logged(&self) -> Vec<(u64, Event)> {
        match &self.etcd {
            None => {
                EventLog::<Event>::open(&self.dir)
                    .expect("read the sled log")
                    .1
            }
            Some((client, config)) => {
                let storage =
                    EtcdStorage::open_read_only(client, config).expect("read the etcd log");
                ControllerLog::with_storage(Box::new(storage))
                    .expect("verify the etcd log")
                    .1
            }
        }
    }
}
