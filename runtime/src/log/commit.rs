//! Group commit: many appenders, one flush.
//!
//! Appenders first insert their entries (under the log's writer mutex, which
//! also assigns sequences) and publish the end of what has been inserted.
//! Then each waits here until its last sequence is durable:
//!
//! - if a completed flush already covers it, it returns at once (a follower
//!   whose data a leader flushed never flushes again);
//! - if a flush is running, it sleeps until that flush ends, then re-checks
//!   (the running flush may have started before its insert, so it may not
//!   cover it);
//! - otherwise it becomes the leader: it reads the inserted end *before*
//!   flushing, flushes without holding the lock, and on success records that
//!   end as durable and wakes everyone.
//!
//! While one flush runs, the next group accumulates, so under load each
//! flush covers every appender that arrived during the previous one.
//!
//! A failed flush poisons the log for good: after a failed fsync the kernel
//! may have dropped the dirty pages, so a later "successful" flush would not
//! prove anything. The owner must reopen the log to learn what reached disk.

use std::sync::{Condvar, Mutex, MutexGuard};

use super::error::LogError;
use super::storage::StorageError;

/// Tracks which prefix of the log is durable and who is flushing it.
pub(super) struct GroupCommit {
    state: Mutex<CommitState>,
    flush_done: Condvar,
}

struct CommitState {
    /// Every sequence below this is durable.
    durable_end: u64,
    /// A leader is flushing right now.
    flushing: bool,
    /// A storage operation failed; no further commits are possible.
    failed: bool,
}

impl GroupCommit {
    /// Starts with `durable_end` sequences already on disk (from replay).
    pub(super) fn new(durable_end: u64) -> Self {
        GroupCommit {
            state: Mutex::new(CommitState {
                durable_end,
                flushing: false,
                failed: false,
            }),
            flush_done: Condvar::new(),
        }
    }

    /// Fails fast if an earlier storage failure poisoned the log.
    pub(super) fn check_healthy(&self) -> Result<(), LogError> {
        if self.lock()?.failed {
            return Err(LogError::Poisoned);
        }
        Ok(())
    }

    /// Poisons the log after a storage failure outside a flush.
    pub(super) fn fail(&self) {
        // A poisoned mutex already means every later call errors out.
        if let Ok(mut state) = self.state.lock() {
            state.failed = true;
        }
        self.flush_done.notify_all();
    }

    /// Blocks until every sequence below `end` is durable.
    ///
    /// `inserted_end` reports how far inserts have completed; a leader flushes
    /// that whole prefix. `flush` is called only when no completed or running
    /// flush can cover `end`, and (since the target includes our own insert)
    /// at most once per call.
    pub(super) fn wait_durable(
        &self,
        end: u64,
        inserted_end: impl Fn() -> u64,
        mut flush: impl FnMut() -> Result<(), StorageError>,
    ) -> Result<(), LogError> {
        let mut state = self.lock()?;
        loop {
            if state.failed {
                return Err(LogError::Poisoned);
            }
            if state.durable_end >= end {
                return Ok(());
            }
            if state.flushing {
                state = self
                    .flush_done
                    .wait(state)
                    .map_err(|_| LogError::Poisoned)?;
                continue;
            }
            // Leader. Read the target before flushing: every insert counted in
            // it completed before the flush starts, so the flush covers it.
            // Our own insert completed before this call, so target >= end.
            let target = inserted_end();
            state.flushing = true;
            drop(state);
            let result = flush();
            state = self.lock()?;
            state.flushing = false;
            self.flush_done.notify_all();
            match result {
                // Loop to re-check rather than return: correctness of the
                // acknowledgement never rests on the target >= end argument.
                Ok(()) => state.durable_end = state.durable_end.max(target),
                Err(err) => {
                    state.failed = true;
                    return Err(err.into());
                }
            }
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, CommitState>, LogError> {
        // Poisoned by a panicking thread: the state may be inconsistent, so
        // treat it like a storage failure rather than guess.
        self.state.lock().map_err(|_| LogError::Poisoned)
    }
}
