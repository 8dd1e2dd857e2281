//! Group commit by flat combining: many appenders, one leader, one flush.
//!
//! An appender encodes its events, then queues them as a [`Request`] and
//! parks. One appender at a time is the leader. The leader takes the whole
//! queue (bounded, see [`GROUP_EVENTS_MAX`]), and for that group alone
//! assigns sequences, seals the envelopes, inserts them, flushes once and
//! only then records every request's outcome. Nobody else touches the chain
//! or the storage's insert path, so there is no per-event lock handoff.
//!
//! While a leader works, the next group queues up. When it is done the
//! leader first hands leadership to the oldest queued request (so the next
//! group starts on the other CPU at once), then wakes exactly the appenders
//! its group covered, each on its own thread handle: no condition variable
//! shared by all waiters, no thundering herd, no woken thread competing for
//! a shared mutex before it can return.
//!
//! A leader leads exactly one group, which always contains its own request
//! (it is elected while that request is still queued), so an appender's
//! latency is bounded by the groups ahead of it.
//!
//! A failed insert or flush poisons the log for good: after a failed fsync
//! the kernel may have dropped the dirty pages, so a later "successful"
//! flush would not prove anything. Every queued and future append fails.
//! A panicking leader poisons the log too (and wakes everyone), rather than
//! leaving its waiters parked forever.

use std::mem;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use super::envelope::encoded_bytes_bound;
use super::error::LogError;
use super::storage::BatchLimits;

/// Longest a new leader waits for its group to gather.
const GATHER_MAX: Duration = Duration::from_millis(1);

/// A leader stops taking queued requests once its group holds this many
/// events (it always takes at least one request). Bounds one storage batch.
pub(super) const GROUP_EVENTS_MAX: usize = 4096;

/// One queued append.
pub(super) struct Request {
    /// Encoded payloads, in order; the leader takes them when sealing.
    pub(super) payloads: Vec<Vec<u8>>,
    /// Set by the leader: the first sequence given to the request, or why
    /// it failed. Published to the waiter only after the group's flush.
    pub(super) outcome: Option<Result<u64, LogError>>,
    waiter: Arc<Waiter>,
}

/// Where a parked appender learns what became of its request.
struct Waiter {
    thread: Thread,
    signal: Mutex<Option<Signal>>,
}

enum Signal {
    /// The request was handled: its outcome.
    Done(Result<u64, LogError>),
    /// Become the leader: the request is still queued.
    Lead,
}

/// Counters of the group commit, for diagnostics and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitStats {
    /// Successful storage flushes since the log was opened.
    pub flushes: u64,
    /// Every sequence below this is durable.
    pub durable_end: u64,
}

/// The queue of appends and who leads.
pub(super) struct GroupCommit {
    queue: Mutex<Queue>,
    /// Every sequence below this is durable (written by leaders, after flush).
    durable_end: AtomicU64,
    flushes: AtomicU64,
    /// The storage's atomic batch limits: a group never exceeds them (each
    /// request alone fits, the log checks that before queueing it).
    limits: BatchLimits,
}

struct Queue {
    pending: Vec<Request>,
    /// A leader is elected (running, or woken and about to run).
    leading: bool,
    /// A storage operation failed or a leader panicked.
    failed: bool,
    /// Spare buffer swapped in for `pending`, so draining does not allocate.
    spare: Vec<Request>,
    /// Requests in the last group: the group size a new leader gathers for.
    last_group: usize,
    /// How long the last group took to process: bounds the gathering wait.
    last_took: Duration,
    /// A leader gathering until `pending` holds this many requests.
    gathering: Option<(Thread, usize)>,
}

/// What the leader's work on one group reports.
pub(super) struct GroupResult {
    /// Everything below this is durable now (only meaningful on `Ok`).
    pub(super) durable_end: u64,
    /// Whether a flush was done.
    pub(super) flushed: bool,
}

impl GroupCommit {
    /// Starts with `durable_end` sequences already on disk (from replay).
    /// `limits` bounds each group (see [`BatchLimits`]).
    pub(super) fn new(durable_end: u64, limits: BatchLimits) -> Self {
        GroupCommit {
            queue: Mutex::new(Queue {
                pending: Vec::new(),
                leading: false,
                failed: false,
                spare: Vec::new(),
                last_group: 0,
                last_took: Duration::ZERO,
                gathering: None,
            }),
            durable_end: AtomicU64::new(durable_end),
            flushes: AtomicU64::new(0),
            limits,
        }
    }

    /// Fails fast if an earlier storage failure poisoned the log.
    pub(super) fn check_healthy(&self) -> Result<(), LogError> {
        if self.lock()?.failed {
            return Err(LogError::Poisoned);
        }
        Ok(())
    }

    /// Every sequence below this is durable.
    pub(super) fn durable_end(&self) -> u64 {
        self.durable_end.load(Ordering::Acquire)
    }

    /// Entries read from the storage (a follower catching up) are durable:
    /// another writer committed them. Moves the durable end forward only.
    pub(super) fn advance_durable(&self, end: u64) {
        self.durable_end.fetch_max(end, Ordering::AcqRel);
    }

    /// Current counters.
    pub(super) fn stats(&self) -> Result<CommitStats, LogError> {
        Ok(CommitStats {
            flushes: self.flushes.load(Ordering::Acquire),
            durable_end: self.durable_end(),
        })
    }

    /// Queues `payloads` and returns the first sequence given to them once
    /// they are durable.
    ///
    /// If this call is elected leader it runs `process` on the group, which
    /// must seal, insert and flush every request in it, set each request's
    /// `outcome`, and return `Err` only for a storage failure (which poisons
    /// the log; the error is this caller's, the others get `Poisoned`).
    pub(super) fn submit(
        &self,
        payloads: Vec<Vec<u8>>,
        process: impl FnOnce(&mut [Request]) -> Result<GroupResult, LogError>,
    ) -> Result<u64, LogError> {
        let waiter = Arc::new(Waiter {
            thread: thread::current(),
            signal: Mutex::new(None),
        });
        {
            let mut queue = self.lock()?;
            if queue.failed {
                return Err(LogError::Poisoned);
            }
            queue.pending.push(Request {
                payloads,
                outcome: None,
                waiter: Arc::clone(&waiter),
            });
            if !queue.leading {
                queue.leading = true;
                drop(queue);
                return self.lead(&waiter, process);
            }
            if let Some((leader, target)) = &queue.gathering {
                if queue.pending.len() >= *target {
                    leader.unpark();
                }
            }
        }
        loop {
            let signal = waiter.signal.lock().map_err(|_| LogError::Poisoned)?.take();
            match signal {
                Some(Signal::Done(outcome)) => return outcome,
                Some(Signal::Lead) => return self.lead(&waiter, process),
                // Not yet (or a spurious unpark): park until signalled. An
                // unpark that came before this park makes it return at once.
                None => thread::park(),
            }
        }
    }

    /// Runs one group as its leader; `own` identifies this caller's request.
    fn lead(
        &self,
        own: &Arc<Waiter>,
        process: impl FnOnce(&mut [Request]) -> Result<GroupResult, LogError>,
    ) -> Result<u64, LogError> {
        let mut group = {
            let mut queue = self.gather(self.lock()?)?;
            if queue.failed {
                queue.leading = false;
                let pending = mem::take(&mut queue.pending);
                drop(queue);
                signal_all(pending);
                return Err(LogError::Poisoned);
            }
            PoisonOnDrop {
                commit: self,
                requests: take_group(&mut queue, self.limits),
            }
        };
        let started = Instant::now();
        let result = process(&mut group.requests);
        let took = started.elapsed();
        let mut group = mem::take(&mut group.requests);
        // Never poisoned: nothing panics while holding it.
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let own_outcome = match result {
            Ok(done) => {
                // Publish before anyone is told: a woken appender may look.
                self.durable_end
                    .fetch_max(done.durable_end, Ordering::AcqRel);
                if done.flushed {
                    self.flushes.fetch_add(1, Ordering::AcqRel);
                }
                queue.last_group = group.len();
                queue.last_took = took;
                // Hand over first, so the next group starts while we wake.
                match queue.pending.first() {
                    Some(next) => signal(&next.waiter, Signal::Lead),
                    None => queue.leading = false,
                }
                drop(queue);
                let mut own_outcome = None;
                for request in group.drain(..) {
                    let outcome = request.outcome.unwrap_or(Err(LogError::Poisoned));
                    if Arc::ptr_eq(&request.waiter, own) {
                        own_outcome = Some(outcome);
                    } else {
                        signal(&request.waiter, Signal::Done(outcome));
                    }
                }
                self.give_back(group);
                own_outcome
            }
            Err(err) => {
                queue.failed = true;
                queue.leading = false;
                let pending = mem::take(&mut queue.pending);
                drop(queue);
                let mut err = Some(err);
                let mut own_outcome = None;
                for request in group.drain(..).chain(pending) {
                    if Arc::ptr_eq(&request.waiter, own) {
                        own_outcome = Some(Err(err.take().unwrap_or(LogError::Poisoned)));
                    } else {
                        signal(&request.waiter, Signal::Done(Err(LogError::Poisoned)));
                    }
                }
                own_outcome
            }
        };
        // The group always holds the leader's own request (see module docs).
        own_outcome.unwrap_or(Err(LogError::Poisoned))
    }

    /// Gathering: a new leader whose previous group held several requests
    /// waits until as many are queued, or at most half the last group's
    /// processing time (capped at [`GATHER_MAX`]). Without it, with few
    /// appenders, the requests queued during one group's flush form the next
    /// group at once, before the appenders just released have queued again,
    /// so groups split in two alternating halves. A lone appender never
    /// waits: its previous group had one request.
    fn gather<'a>(
        &'a self,
        mut queue: MutexGuard<'a, Queue>,
    ) -> Result<MutexGuard<'a, Queue>, LogError> {
        let target = queue.last_group;
        if target <= 1 || queue.pending.len() >= target {
            return Ok(queue);
        }
        let deadline = Instant::now() + (queue.last_took / 2).min(GATHER_MAX);
        queue.gathering = Some((thread::current(), target));
        loop {
            let now = Instant::now();
            if queue.failed || queue.pending.len() >= target || now >= deadline {
                queue.gathering = None;
                return Ok(queue);
            }
            drop(queue);
            // A stale unpark only ends this wait early.
            thread::park_timeout(deadline - now);
            queue = self.lock()?;
        }
    }

    /// Returns a drained group buffer for reuse.
    fn give_back(&self, group: Vec<Request>) {
        if let Ok(mut queue) = self.queue.lock() {
            if queue.spare.capacity() < group.capacity() {
                queue.spare = group;
            }
        }
    }

    /// Marks the log failed and wakes every queued appender with `Poisoned`.
    fn poison(&self) {
        let pending = match self.queue.lock() {
            Ok(mut queue) => {
                queue.failed = true;
                queue.leading = false;
                mem::take(&mut queue.pending)
            }
            Err(poisoned) => {
                let mut queue = poisoned.into_inner();
                queue.failed = true;
                queue.leading = false;
                mem::take(&mut queue.pending)
            }
        };
        signal_all(pending);
    }

    fn lock(&self) -> Result<MutexGuard<'_, Queue>, LogError> {
        // Poisoned by a panicking thread: treat like a storage failure.
        self.queue.lock().map_err(|_| LogError::Poisoned)
    }
}

/// Takes the oldest requests up to [`GROUP_EVENTS_MAX`] events and the
/// storage's `limits` (at least one request) out of the queue. With
/// unbounded limits (sled) only the event count bounds a group.
fn take_group(queue: &mut Queue, limits: BatchLimits) -> Vec<Request> {
    let events_max = GROUP_EVENTS_MAX.min(limits.entries_max);
    let bounded_bytes = limits.bytes_max != usize::MAX;
    let mut events = 0;
    let mut bytes: usize = 0;
    let take = queue
        .pending
        .iter()
        .position(|request| {
            events += request.payloads.len();
            if bounded_bytes {
                bytes = bytes.saturating_add(encoded_bytes_bound(&request.payloads));
            }
            events > events_max || bytes > limits.bytes_max
        })
        .map_or(queue.pending.len(), |over| over.max(1));
    if take == queue.pending.len() {
        let spare = mem::take(&mut queue.spare);
        mem::replace(&mut queue.pending, spare)
    } else {
        queue.pending.drain(..take).collect()
    }
}

/// Fails every request with `Poisoned`.
fn signal_all(requests: impl IntoIterator<Item = Request>) {
    for request in requests {
        signal(&request.waiter, Signal::Done(Err(LogError::Poisoned)));
    }
}

fn signal(waiter: &Waiter, signal: Signal) {
    // A poisoned signal mutex can only come from a panic while holding it,
    // which never happens (it only moves a value in or out).
    match waiter.signal.lock() {
        Ok(mut slot) => *slot = Some(signal),
        Err(poisoned) => *poisoned.into_inner() = Some(signal),
    }
    waiter.thread.unpark();
}

/// A group being processed. If the leader unwinds while it still holds
/// requests, the log is poisoned and their appenders are woken with
/// `Poisoned` instead of staying parked forever.
struct PoisonOnDrop<'a> {
    commit: &'a GroupCommit,
    requests: Vec<Request>,
}

impl Drop for PoisonOnDrop<'_> {
    fn drop(&mut self) {
        if !self.requests.is_empty() {
            self.commit.poison();
            signal_all(self.requests.drain(..));
        }
    }
}
