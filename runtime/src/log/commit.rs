//! Group commit: many appenders, one flush.
//!
//! Appenders first insert their entries (under the log's writer mutex, which
//! also assigns sequences) and publish the end of what has been inserted.
//! Then each waits here until its last sequence is durable:
//!
//! - if a completed flush already covers it, it returns at once (a follower
//!   whose data a leader flushed never flushes again);
//! - if the running flush covers it (its target, read before that flush
//!   started, includes it), it sleeps until that flush ends;
//! - if a flush is running that does not cover it, it sleeps until that one
//!   ends and then competes to lead the next;
//! - otherwise it becomes the leader: it reads the inserted end *before*
//!   flushing, flushes without holding the lock, and on success records that
//!   end as durable.
//!
//! While one flush runs, the next group accumulates, so under load each
//! flush covers every appender that arrived during the previous one.
//!
//! Gathering: a new leader whose previous flush covered several events
//! first waits until as many entries are pending, or at most half the last
//! flush's duration (capped at [`GATHER_MAX`]). Without it, the waiter
//! already queued for the next flush leads it immediately and flushes
//! alone, before the threads the last flush just released have appended
//! again, so groups alternate between large and tiny. A lone appender never
//! waits: its previous group had one event.
//!
//! Wakeups are targeted: flushes alternate between two condition variables
//! by generation. A finished flush wakes everyone it covered plus one waiter
//! for the next flush (to lead it); the others sleep on until the flush that
//! covers them ends. Waking all waiters every time costs more CPU than the
//! flush itself with many threads on few cores.
//!
//! A failed flush poisons the log for good: after a failed fsync the kernel
//! may have dropped the dirty pages, so a later "successful" flush would not
//! prove anything. The owner must reopen the log to learn what reached disk.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::error::LogError;
use super::storage::StorageError;

/// Longest a leader waits for a group to gather.
const GATHER_MAX: Duration = Duration::from_millis(1);

/// Tracks which prefix of the log is durable and who is flushing it.
pub(super) struct GroupCommit {
    state: Mutex<CommitState>,
    /// `flush_done[g % 2]` is signalled when flush generation `g` ends.
    flush_done: [Condvar; 2],
    /// Signalled after each insert, for a gathering leader.
    inserted: Condvar,
}

struct CommitState {
    /// Every sequence below this is durable.
    durable_end: u64,
    /// The flush in progress, if any.
    running: Option<RunningFlush>,
    /// Generation the next flush gets.
    next_generation: u64,
    /// Successful flushes so far.
    flushes: u64,
    /// Events the last flush covered: the group size to gather for.
    last_group: u64,
    /// How long the last flush took: bounds the gathering wait.
    last_flush: Duration,
    /// A storage operation failed; no further commits are possible.
    failed: bool,
}

/// Counters of the group commit, for diagnostics and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitStats {
    /// Successful storage flushes since the log was opened.
    pub flushes: u64,
    /// Every sequence below this is durable.
    pub durable_end: u64,
}

#[derive(Clone, Copy)]
struct RunningFlush {
    generation: u64,
    /// Inserted end read before the flush started: what it will make durable.
    /// `u64::MAX` while the leader is still gathering: everyone arriving
    /// then has inserted already, so the target it reads later covers them.
    target: u64,
}

impl GroupCommit {
    /// Starts with `durable_end` sequences already on disk (from replay).
    pub(super) fn new(durable_end: u64) -> Self {
        GroupCommit {
            state: Mutex::new(CommitState {
                durable_end,
                running: None,
                next_generation: 0,
                flushes: 0,
                last_group: 0,
                last_flush: Duration::ZERO,
                failed: false,
            }),
            flush_done: [Condvar::new(), Condvar::new()],
            inserted: Condvar::new(),
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
        self.wake_everyone();
    }

    /// Tells a gathering leader that more entries were inserted.
    pub(super) fn notify_inserted(&self) {
        self.inserted.notify_one();
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
            if let Some(running) = state.running {
                // Covered: wait for this flush. Not covered: wait for it to
                // end and then for the one after, whose wakeup elects a leader.
                let generation = if end <= running.target {
                    running.generation
                } else {
                    running.generation + 1
                };
                state = self.flush_done[slot(generation)]
                    .wait(state)
                    .map_err(|_| LogError::Poisoned)?;
                continue;
            }
            // Leader.
            let generation = state.next_generation;
            state.next_generation += 1;
            state.running = Some(RunningFlush {
                generation,
                target: u64::MAX,
            });
            state = self.gather(state, &inserted_end)?;
            if state.failed {
                state.running = None;
                drop(state);
                self.wake_everyone();
                return Err(LogError::Poisoned);
            }
            // Read the target before flushing: every insert counted in it
            // completed before the flush starts, so the flush covers it.
            // Our own insert completed before this call, so target >= end.
            let running = RunningFlush {
                generation,
                target: inserted_end(),
            };
            state.running = Some(running);
            let group = running.target.saturating_sub(state.durable_end);
            drop(state);
            let started = Instant::now();
            let result = flush();
            let took = started.elapsed();
            state = self.lock()?;
            state.running = None;
            match result {
                // Loop to re-check rather than return: correctness of the
                // acknowledgement never rests on the target >= end argument.
                Ok(()) => {
                    state.durable_end = state.durable_end.max(running.target);
                    state.flushes += 1;
                    state.last_group = group;
                    state.last_flush = took;
                    self.flush_done[slot(running.generation)].notify_all();
                    self.flush_done[slot(running.generation + 1)].notify_one();
                }
                Err(err) => {
                    state.failed = true;
                    drop(state);
                    self.wake_everyone();
                    return Err(err.into());
                }
            }
        }
    }

    /// Waits until the pending group is as large as the last one, or half
    /// the last flush's duration has passed (see the module docs).
    fn gather<'a>(
        &'a self,
        mut state: MutexGuard<'a, CommitState>,
        inserted_end: &impl Fn() -> u64,
    ) -> Result<MutexGuard<'a, CommitState>, LogError> {
        if state.last_group <= 1 {
            return Ok(state);
        }
        let deadline = Instant::now() + (state.last_flush / 2).min(GATHER_MAX);
        loop {
            let pending = inserted_end().saturating_sub(state.durable_end);
            let now = Instant::now();
            if pending >= state.last_group || now >= deadline {
                return Ok(state);
            }
            // A missed notification only costs waiting until the deadline.
            state = self
                .inserted
                .wait_timeout(state, deadline - now)
                .map_err(|_| LogError::Poisoned)?
                .0;
        }
    }

    /// Current counters.
    pub(super) fn stats(&self) -> Result<CommitStats, LogError> {
        let state = self.lock()?;
        Ok(CommitStats {
            flushes: state.flushes,
            durable_end: state.durable_end,
        })
    }

    fn wake_everyone(&self) {
        for condvar in &self.flush_done {
            condvar.notify_all();
        }
        self.inserted.notify_all();
    }

    fn lock(&self) -> Result<MutexGuard<'_, CommitState>, LogError> {
        // Poisoned by a panicking thread: the state may be inconsistent, so
        // treat it like a storage failure rather than guess.
        self.state.lock().map_err(|_| LogError::Poisoned)
    }
}

/// Which of the two condition variables flush `generation` signals.
fn slot(generation: u64) -> usize {
    (generation % 2) as usize
}
