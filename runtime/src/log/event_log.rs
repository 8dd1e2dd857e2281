//! [`EventLog`]: typed, append-only, hash-chained, group-committed.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::commit::{CommitStats, GroupCommit};
use super::durable::Durable;
use super::envelope::{decode_payload, encode_payload, hash_bytes, Envelope, Hash};
use super::error::LogError;
use super::sled_storage::SledStorage;
use super::storage::LogStorage;
use super::verify::{check_layout, check_watermark, walk_chain, VerifyReport};

/// Most events accepted by one [`EventLog::append`]. Bounds the work done
/// under the writer lock and the size of one storage batch (≤ 4096 × 64 KiB).
pub const APPEND_EVENTS_MAX: usize = 4096;

/// A durable log of events of type `E`.
///
/// Share it between threads as `Arc<EventLog<E>>`: all methods but
/// [`close`](EventLog::close) take `&self`, and concurrent appends share
/// flushes (group commit, see the `commit` module docs).
pub struct EventLog<E, S: LogStorage = SledStorage> {
    storage: S,
    /// Serializes sequence assignment, chaining and insertion.
    writer: Mutex<Writer>,
    /// End of the inserted prefix, published after each insert for the
    /// flush leader (Release here, Acquire there).
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

    #[allow(clippy::type_complexity)]
    fn replay(storage: S) -> Result<(Self, Vec<(u64, E)>, VerifyReport), LogError> {
        let mut events = Vec::new();
        let report = walk_chain(&storage, |sequence, payload| {
            let event = decode_payload::<E>(payload).map_err(|err| err.to_string())?;
            events.push((sequence, event));
            Ok(())
        })?;
        let log = EventLog {
            storage,
            writer: Mutex::new(Writer {
                next_sequence: report.entries,
                last_hash: report.head_hash,
            }),
            inserted_end: AtomicU64::new(report.entries),
            // What is on disk at open counts as durable: it is what a crash
            // right now would leave.
            commit: GroupCommit::new(report.entries),
            events: PhantomData,
        };
        Ok((log, events, report))
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
        // Encode outside the lock so concurrent appenders do it in parallel.
        let payloads = events
            .iter()
            .map(encode_payload)
            .collect::<Result<Vec<_>, _>>()?;
        let first = self.insert(payloads)?;
        let end = first + events.len() as u64;
        self.commit.wait_durable(
            end,
            || self.inserted_end.load(Ordering::Acquire),
            || self.storage.flush(),
        )?;
        let sequenced = (first..).zip(events).collect();
        Ok(Durable::new(sequenced))
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

    /// Assigns sequences, chains and validates the envelopes and inserts
    /// them as one batch; returns the first sequence.
    fn insert(&self, payloads: Vec<Vec<u8>>) -> Result<u64, LogError> {
        let mut writer = self.writer.lock().map_err(|_| LogError::Poisoned)?;
        self.commit.check_healthy()?;
        let first = writer.next_sequence;
        let mut prev_hash = writer.last_hash;
        let mut entries = Vec::with_capacity(payloads.len());
        for (sequence, payload) in (first..).zip(payloads) {
            let encoded = Envelope::seal(sequence, prev_hash, payload)
                .encode()
                .map_err(|fault| LogError::InvalidEntry { sequence, fault })?;
            prev_hash = hash_bytes(&encoded);
            entries.push((sequence, encoded));
        }
        let end = first + entries.len() as u64;
        if !entries.is_empty() {
            if let Err(err) = self.storage.append_batch(&entries) {
                // The batch may or may not be in the engine; sequences can no
                // longer be assigned safely.
                self.commit.fail();
                return Err(err.into());
            }
        }
        writer.next_sequence = end;
        writer.last_hash = prev_hash;
        self.inserted_end.store(end, Ordering::Release);
        drop(writer);
        self.commit.notify_inserted();
        Ok(first)
    }
}
