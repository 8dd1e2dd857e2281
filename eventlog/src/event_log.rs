//! [`EventLog`]: typed, append-only, hash-chained, group-committed.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::commit::{CommitStats, GroupCommit, GroupResult, Request};
use super::durable::Durable;
use super::envelope::{decode_payload, encode_payload, Envelope, Hash, ENVELOPE_OVERHEAD_MAX};
use super::error::LogError;
use super::sled_storage::SledStorage;
use super::storage::LogStorage;
use super::verify::{
    check_layout, check_watermark, walk_chain, walk_from, VerifyError, VerifyReport,
};

/// Most events accepted by one [`EventLog::append`]. Bounds the work done
/// by a group-commit leader for one append. The controller's batches stay
/// under it by construction (a soft batch bound plus one input's events,
/// at most two slots' worth of 10,000); `commit::GROUP_EVENTS_MAX` bounds
/// how many further queued appends join one group.
pub const APPEND_EVENTS_MAX: usize = 32_768;

/// Most payload bytes accepted by one [`EventLog::append`]: bounds one
/// storage batch in memory (entries are at most 64 KiB each, so the event
/// count alone would allow 2 GiB).
pub const APPEND_BYTES_MAX: usize = 64 << 20;

/// A durable log of events of type `E`.
///
/// Share it between threads as `Arc<EventLog<E>>`: all methods but
/// [`close`](EventLog::close) take `&self`, and concurrent appends share
/// flushes (group commit, see the `commit` module docs).
pub struct EventLog<E, S: LogStorage = SledStorage> {
    storage: S,
    /// Sequence assignment and chaining; only the group-commit leader locks
    /// it on the append path, so it is uncontended there.
    writer: Mutex<Writer>,
    /// End of the inserted prefix (written by group-commit leaders), so an
    /// empty append can tell whether anything is still owed a flush.
    inserted_end: AtomicU64,
    commit: GroupCommit,
    /// `fn() -> E`: the log stores encoded bytes, never an `E`, so it is
    /// Send and Sync whatever `E` is.
    events: PhantomData<fn() -> E>,
}

/// State only the writer mutex's holder may touch.
struct Writer {
    /// Sequence the next entry gets.
    next_sequence: u64,
    /// Hash of the last entry's encoded bytes, the next entry's `prev_hash`.
    last_hash: Hash,
    /// The leader's buffer of sealed entries, kept to reuse its allocation.
    entries: Vec<(u64, Vec<u8>)>,
}

impl<E: Serialize + DeserializeOwned> EventLog<E, SledStorage> {
    /// Opens the log in `dir` (creating it if `dir` is missing or empty),
    /// verifies the whole chain and decodes every event.
    ///
    /// Returns the log and its events in sequence order for the caller to
    /// replay. Any verification failure refuses the log: nothing is repaired.
    #[allow(clippy::type_complexity)]
    pub fn open(dir: impl AsRef<Path>) -> Result<(Self, Vec<(u64, E)>), LogError> {
        let storage = SledStorage::create_or_open(dir.as_ref())?;
        check_layout(&storage)?;
        let (log, events, report) = Self::replay(storage)?;
        check_watermark(&log.storage, &report)?;
        Ok((log, events))
    }
}

impl<E: Serialize + DeserializeOwned, S: LogStorage> EventLog<E, S> {
    /// Opens a log on any storage: verifies the chain, decodes every event.
    ///
    /// For a sled directory use [`EventLog::open`], which also refuses
    /// foreign data and entries lost below the durable watermark.
    #[allow(clippy::type_complexity)]
    pub fn with_storage(storage: S) -> Result<(Self, Vec<(u64, E)>), LogError> {
        let (log, events, _) = Self::replay(storage)?;
        Ok((log, events))
    }

    /// The same log on another handle to its storage (e.g. boxed, so that
    /// one controller type runs on sled or etcd). Nothing is re-read.
    pub fn map_storage<T: LogStorage>(self, f: impl FnOnce(S) -> T) -> EventLog<E, T> {
        EventLog {
            storage: f(self.storage),
            writer: self.writer,
            inserted_end: self.inserted_end,
            commit: self.commit,
            events: PhantomData,
        }
    }

    /// Puts `storage` in place of this log's storage and returns the old
    /// one: a hot standby elected leader moves from its read-only storage
    /// to the fenced one without re-reading (then [`read_new`] reads to
    /// the tail). Both must hold the same log.
    ///
    /// [`read_new`]: EventLog::read_new
    pub fn swap_storage(&mut self, storage: S) -> S {
        std::mem::replace(&mut self.storage, storage)
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn replay(storage: S) -> Result<(Self, Vec<(u64, E)>, VerifyReport), LogError> {
        // A replay hands the caller every event: without the archived ones
        // that would be a state missing its history, silently.
        let start = storage.live_start()?;
        if start.is_archived() {
            return Err(LogError::HistoryArchived {
                first_live: start.sequence,
                snapshot_covers: storage.snapshot_sequences()?.first().copied(),
            });
        }
        let mut events = Vec::new();
        let report = walk_chain(&storage, |sequence, payload| {
            let event = decode_payload::<E>(payload).map_err(|err| err.to_string())?;
            events.push((sequence, event));
            Ok(())
        })?;
        let log = Self::verified(storage, report.entries, report.head_hash);
        Ok((log, events, report))
    }

    /// A log on `storage` whose `end` entries were verified, the last one
    /// hashing to `head_hash`: the next append gets sequence `end`.
    pub(super) fn verified(storage: S, end: u64, head_hash: Hash) -> Self {
        let limits = storage.batch_limits();
        EventLog {
            storage,
            writer: Mutex::new(Writer {
                next_sequence: end,
                last_hash: head_hash,
                entries: Vec::new(),
            }),
            inserted_end: AtomicU64::new(end),
            // What is on disk at open counts as durable: it is what a crash
            // right now would leave.
            commit: GroupCommit::new(end, limits),
            events: PhantomData,
        }
    }

    /// The end of the durable prefix, or why the log is unusable.
    pub(super) fn durable_end(&self) -> Result<u64, LogError> {
        self.commit.check_healthy()?;
        Ok(self.commit.durable_end())
    }

    /// Reads the entries another writer appended after this log's end (a
    /// hot standby following the leader's log), verifies each as opening
    /// does (key = sequence, no gap, envelope checksum, sequence inside the
    /// envelope, `prev_hash` = the hash of the entry before) and decodes its
    /// event; returns them in order and moves this log's end past them, so
    /// a later [`append`](EventLog::append) (after [`map_storage`] onto a
    /// writable storage) chains onto the last one.
    ///
    /// Nothing is written. On `Err` this log's end is unchanged: the first
    /// bad entry is named, and a standby must stop following.
    ///
    /// [`map_storage`]: EventLog::map_storage
    pub fn read_new(&self) -> Result<Vec<(u64, E)>, LogError> {
        self.commit.check_healthy()?;
        let mut writer = self.writer.lock().map_err(|_| LogError::Poisoned)?;
        let mut events = Vec::new();
        let next = writer.next_sequence;
        let walked = walk_from(
            &self.storage,
            next,
            writer.last_hash,
            |sequence, payload, _| {
                let event = decode_payload::<E>(payload).map_err(|err| err.to_string())?;
                events.push((sequence, event));
                Ok(())
            },
        );
        let walked = walked.map_err(|err| self.behind_archive(next, err))?;
        Self::advance(
            &mut writer,
            &self.inserted_end,
            &self.commit,
            walked.end,
            walked.head_hash,
        );
        Ok(events)
    }

    /// A follower's failed read from `next`: [`LogError::BehindArchive`]
    /// when its next entry is missing because the leader archived it,
    /// else `err` as it is.
    fn behind_archive(&self, next: u64, err: VerifyError) -> LogError {
        if !matches!(err, VerifyError::Gap { missing, .. } if missing == next) {
            return err.into();
        }
        match self.storage.live_start() {
            Ok(start) if next < start.sequence => LogError::BehindArchive {
                next,
                first_live: start.sequence,
            },
            Ok(_) => err.into(),
            Err(storage) => storage.into(),
        }
    }

    /// Moves this log's end to `end` (the entry before it hashing to
    /// `head_hash`): what a follower read is the log's durable end.
    fn advance(
        writer: &mut Writer,
        inserted_end: &AtomicU64,
        commit: &GroupCommit,
        end: u64,
        head_hash: Hash,
    ) {
        writer.next_sequence = end;
        writer.last_hash = head_hash;
        inserted_end.store(end, Ordering::Release);
        commit.advance_durable(end);
    }

    /// A follower caught up from a snapshot: this log's end moves to
    /// `end`, the entry before it hashing to `head_hash`.
    pub(super) fn advance_to(&self, end: u64, head_hash: Hash) -> Result<(), LogError> {
        self.commit.check_healthy()?;
        let mut writer = self.writer.lock().map_err(|_| LogError::Poisoned)?;
        Self::advance(
            &mut writer,
            &self.inserted_end,
            &self.commit,
            end,
            head_hash,
        );
        Ok(())
    }

    /// Appends `events` as consecutive entries and returns them with their
    /// sequences once they are durable.
    ///
    /// The `Durable` is created only after a storage flush that covers these
    /// entries returned `Ok`; it is the acknowledgement. On `Err` the events
    /// are not acknowledged, though some may still be on disk (reopen to
    /// see). A storage failure poisons the log.
    ///
    /// The batch is all-or-nothing on disk. An empty batch appends nothing
    /// and acts as a barrier: it returns once everything appended before it
    /// is durable.
    #[allow(clippy::type_complexity)]
    pub fn append(&self, events: Vec<E>) -> Result<Durable<Vec<(u64, E)>>, LogError> {
        if events.len() > APPEND_EVENTS_MAX {
            return Err(LogError::BatchTooLarge {
                len: events.len(),
                max: APPEND_EVENTS_MAX,
            });
        }
        if events.is_empty() {
            self.commit.check_healthy()?;
            // Appends that returned before this call are durable already;
            // only a flush still owed (e.g. after a failed one) needs a group.
            if self.commit.durable_end() >= self.inserted_end.load(Ordering::Acquire) {
                return Ok(Durable::new(Vec::new()));
            }
        }
        // Encode outside any lock so concurrent appenders do it in parallel.
        let payloads = events
            .iter()
            .map(encode_payload)
            .collect::<Result<Vec<_>, _>>()?;
        let bytes: usize = payloads.iter().map(Vec::len).sum();
        if bytes > APPEND_BYTES_MAX {
            return Err(LogError::BatchBytesTooLarge {
                bytes,
                max: APPEND_BYTES_MAX,
            });
        }
        self.check_storage_limits(&payloads)?;
        let first = self
            .commit
            .submit(payloads, |group| self.commit_group(group))?;
        let sequenced = (first..).zip(events).collect();
        Ok(Durable::new(sequenced))
    }

    /// Refuses an append the storage could not apply in one atomic batch
    /// (before it is sequenced, so the log stays usable). Bounds the
    /// encoded size by the envelope's worst-case overhead per entry.
    fn check_storage_limits(&self, payloads: &[Vec<u8>]) -> Result<(), LogError> {
        let limits = self.storage.batch_limits();
        let bytes = encoded_bytes_bound(payloads);
        if payloads.len() > limits.entries_max || bytes > limits.bytes_max {
            return Err(LogError::ExceedsStorageBatch {
                entries: payloads.len(),
                bytes,
                entries_max: limits.entries_max,
                bytes_max: limits.bytes_max,
            });
        }
        Ok(())
    }

    /// Sequence of the last appended entry (durable or not yet), `None` if
    /// the log is empty.
    pub fn last_sequence(&self) -> Result<Option<u64>, LogError> {
        let writer = self.writer.lock().map_err(|_| LogError::Poisoned)?;
        Ok(writer.next_sequence.checked_sub(1))
    }

    /// Group-commit counters: flushes so far and the durable end. Events
    /// appended divided by flushes is the average group size.
    pub fn commit_stats(&self) -> Result<CommitStats, LogError> {
        self.commit.stats()
    }

    /// The underlying storage, e.g. for its path or diagnostics.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Flushes and closes the log, reporting a failed final flush.
    ///
    /// Everything acknowledged is already durable, so dropping without
    /// `close` loses nothing acknowledged; but sled's `Drop` only logs flush
    /// errors, and `close` makes a failure visible. With an `Arc`, call
    /// `Arc::try_unwrap` first. sled's background tasks may hold the
    /// database's file lock a moment longer; `open` waits for that.
    pub fn close(self) -> Result<(), LogError> {
        self.commit.check_healthy()?;
        self.storage.flush()?;
        Ok(())
    }

    /// The group-commit leader's work: assigns sequences, chains and seals
    /// the envelopes of every request in `group`, inserts them all as one
    /// atomic batch, flushes once, and records each request's outcome.
    fn commit_group(&self, group: &mut [Request]) -> Result<GroupResult, LogError> {
        let mut writer = self.writer.lock().map_err(|_| LogError::Poisoned)?;
        let Writer {
            next_sequence,
            last_hash,
            entries,
        } = &mut *writer;
        entries.clear();
        for request in group.iter_mut() {
            let first = *next_sequence;
            let mut prev_hash = *last_hash;
            let mark = entries.len();
            let mut fault = None;
            for (sequence, payload) in (first..).zip(request.payloads.drain(..)) {
                match Envelope::seal_encoded(sequence, prev_hash, payload) {
                    Ok((encoded, hash)) => {
                        prev_hash = hash;
                        entries.push((sequence, encoded));
                    }
                    Err(err) => {
                        fault = Some(LogError::InvalidEntry {
                            sequence,
                            fault: err,
                        });
                        break;
                    }
                }
            }
            match fault {
                // Refused before writing: the chain goes on without it.
                Some(err) => {
                    entries.truncate(mark);
                    request.outcome = Some(Err(err));
                }
                None => {
                    *next_sequence = first + (entries.len() - mark) as u64;
                    *last_hash = prev_hash;
                    request.outcome = Some(Ok(first));
                }
            }
        }
        let end = *next_sequence;
        if crate::mutants::active(crate::mutants::ACK_BEFORE_FLUSH) {
            // Mutant: the previous group, acknowledged unflushed, is
            // flushed only now, with this group's entries still to come.
            self.storage.flush()?;
        }
        if !entries.is_empty() {
            // The batch may or may not be in the engine after a failure;
            // sequences can no longer be assigned safely: poison (by Err).
            self.storage.append_batch(entries)?;
            self.inserted_end.store(end, Ordering::Release);
        }
        entries.clear();
        drop(writer);
        let flushed = end > self.commit.durable_end();
        let skip_flush = crate::mutants::active(crate::mutants::ACK_BEFORE_FLUSH)
            || crate::mutants::active(crate::mutants::NO_FSYNC_AGENT_JOURNAL);
        if flushed && !skip_flush {
            self.storage.flush()?;
        }
        Ok(GroupResult {
            durable_end: end,
            flushed,
        })
    }
}

/// Upper bound of the encoded envelopes' total size for `payloads`.
pub(super) fn encoded_bytes_bound(payloads: &[Vec<u8>]) -> usize {
    payloads
        .iter()
        .map(|payload| payload.len().saturating_add(ENVELOPE_OVERHEAD_MAX))
        .fold(0, usize::saturating_add)
}
