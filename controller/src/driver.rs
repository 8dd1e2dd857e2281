//! [`Controller`]: the pure `model` controller around the durable log.
//!
//! The loop of SPEC §3: `step` decides, the log makes the events durable,
//! `apply` folds them, `effects` says what to send. This module holds no rule
//! of its own; every decision comes from [`model::controller::step`], and
//! the rules are checked by the `invariants` crate (always on open, and as
//! TIGER_STYLE assertions on every step, in release builds too).
//!
//! **No effect before flush (S7).** Effects leave [`Controller::handle`] only
//! inside a [`Ready`], and a `Ready` can only be built from a [`Durable`]
//! token, which only the log creates after the flush covering the events.

use std::collections::VecDeque;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use model::controller::{
    effects, step_in_place, ControllerState, Effect, Event, Fold, Input, Refusal,
};

use eventlog::{Durable, EventLog, LogError};

pub use crate::event_log::{ControllerError, ControllerLog};

/// Upper bound on one encoded controller event, in bytes (varint bincode):
/// the largest is a `RolloutStarted` or `RolloutFollowersAdded` naming
/// [`FOLLOWERS_PER_EVENT_MAX`] followers (a node id is at most 5 bytes; a
/// plan of the whole fleet is recorded in several such entries) or an `OpClaimed` with two texts of
/// [`CLAIM_TEXT_MAX`] characters (at most 4 bytes each, plus a length),
/// each with under 128 bytes of fixed fields. The golden encoding test
/// measures the largest real ones against it.
///
/// [`FOLLOWERS_PER_EVENT_MAX`]: model::plan::FOLLOWERS_PER_EVENT_MAX
/// [`CLAIM_TEXT_MAX`]: model::controller::CLAIM_TEXT_MAX
pub const EVENT_BYTES_BOUND: usize = {
    let plan = 128 + model::plan::FOLLOWERS_PER_EVENT_MAX * 5;
    let claim = 128 + 2 * (9 + model::controller::CLAIM_TEXT_MAX * 4);
    // A `ConfigSet` at its bounds: its logged bytes, each entry's length
    // prefixes and tags, the app name and fixed fields.
    let config = {
        use model::config::*;
        let entries = CONFIG_KEYS_MAX + CONFIG_FILES_MAX;
        256 + CONFIG_APP_BYTES_MAX + CONFIG_BYTES_MAX + entries * CONFIG_ENTRY_OVERHEAD_BYTES_MAX
    };
    let wider = if plan > claim { plan } else { claim };
    if wider > config {
        wider
    } else {
        config
    }
};

// Every event the model can produce fits one log entry: an append can never
// fail for size on a valid input.
const _: () = assert!(EVENT_BYTES_BOUND <= eventlog::PAYLOAD_BYTES_MAX);

/// Most inputs stepped into one durable batch (one flush): bounds the wait
/// of the first input of a batch for the last one's decision.
pub const BATCH_INPUTS_MAX: usize = 256;

/// An input joins a batch only while the batch holds fewer events than
/// this; the input that crosses it is the batch's last.
pub const BATCH_EVENTS_SOFT_MAX: usize = 4096;

/// Upper bound on the events one input produces: a start that supersedes
/// a rollout aborts each of its undecided ops (at most one slot each) and
/// grants a slot's worth of the new one, each at most
/// [`SLOTS_MAX_LIMIT`](model::plan::SLOTS_MAX_LIMIT); every other event of
/// one input is one of a handful (start, policy, pause, settle, complete).
pub const EVENTS_PER_INPUT_MAX: usize = 2 * model::plan::SLOTS_MAX_LIMIT as usize + 64;

// A batch ends at the input that crosses the soft bound, so one append
// holds at most the soft bound plus one input's events.
const _: () = assert!(BATCH_EVENTS_SOFT_MAX + EVENTS_PER_INPUT_MAX <= eventlog::APPEND_EVENTS_MAX);

/// What one handled input produced, once durable: the events with their
/// sequences and the effects to perform (sends, timers).
///
/// Built only by [`Ready::from_durable`], which takes the log's [`Durable`]
/// token: holding a `Ready` proves its events reached disk (S7).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a Ready carries effects the runtime must perform"]
pub struct Ready {
    events: Vec<(u64, Event)>,
    effects: Vec<Effect>,
}

impl Ready {
    /// The only constructor. Private: only `handle` pairs a durable batch
    /// with the effects derived from applying it.
    fn from_durable(durable: Durable<Vec<(u64, Event)>>, effects: Vec<Effect>) -> Self {
        Ready {
            events: durable.into_inner(),
            effects,
        }
    }

    /// The durable events, in sequence order.
    pub fn events(&self) -> &[(u64, Event)] {
        &self.events
    }

    /// The effects to perform, in the order the events produced them.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Takes the events and effects out.
    pub fn into_parts(self) -> (Vec<(u64, Event)>, Vec<Effect>) {
        (self.events, self.effects)
    }
}

/// What one durable batch of inputs produced: its [`Ready`] and, per input
/// in the order taken, the range of its events in [`Ready::events`] or why
/// the model refused it (a refused input records nothing).
#[derive(Debug)]
#[must_use = "a Batch carries effects the runtime must perform"]
pub struct Batch {
    /// The batch's durable events and their effects.
    pub ready: Ready,
    /// Per input taken: its events' range in `ready.events()`, or its refusal.
    pub outcomes: Vec<Result<Range<usize>, Refusal>>,
    /// What the batch's events touched (ops, rollouts, nodes).
    pub touched: invariants::Touched,
}

/// The controller: its durable log and the state folded from it.
pub struct Controller {
    /// Shared with the [`crate::archive::Archiver`] handles only.
    log: Arc<ControllerLog>,
    state: ControllerState,
    /// Sequence of the last event applied, `None` for an empty log. Kept
    /// here because the log's own accessor can fail (poisoned mutex).
    last_sequence: Option<u64>,
    /// A hot standby's rule check over the events it follows, across
    /// reads ([`Controller::follow`]); `None` on a leader.
    following: Option<invariants::HistoryCheck>,
}

impl Controller {
    /// Opens (or creates) the log in `dir`, verifies it, and rebuilds the
    /// state by replaying every event through `invariants::check_history`.
    ///
    /// Refuses to start, naming the sequence, if the log is corrupt or its
    /// history breaks a rule. Nothing is ever repaired.
    pub fn open(dir: impl AsRef<Path>) -> Result<Controller, ControllerError> {
        Ok(Self::open_with_events(dir)?.0)
    }

    /// [`Controller::open`], also handing back the replayed events (for the
    /// daemon's event feed).
    pub fn open_with_events(
        dir: impl AsRef<Path>,
    ) -> Result<(Controller, Vec<(u64, Event)>), ControllerError> {
        let (log, events) = EventLog::<Event>::open(dir)?;
        let log = log.map_storage(|sled| Box::new(sled) as Box<dyn eventlog::LogStorage>);
        Self::replayed(log, events)
    }

    /// [`Controller::open_with_events`] on any storage (etcd): the chain is
    /// verified and the history checked the same way.
    pub fn open_on_storage(
        storage: Box<dyn eventlog::LogStorage>,
    ) -> Result<(Controller, Vec<(u64, Event)>), ControllerError> {
        let (log, events) = ControllerLog::with_storage(storage)?;
        Self::replayed(log, events)
    }

    /// Opens (or creates) the log in `dir` from its newest usable snapshot
    /// (issue #26): the snapshot's state, then only the entries after it,
    /// each rule-checked as a replay checks it. `annex` decodes the
    /// runtime's part of the snapshot ([`crate::snapshot`]); a snapshot
    /// whose frame, state or annex does not decode is skipped (named in
    /// [`Started::skipped`] and logged) and an older one, or genesis, used.
    pub fn start<A>(
        dir: impl AsRef<Path>,
        annex: impl FnMut(&[u8]) -> Result<A, String>,
    ) -> Result<Started<A>, ControllerError> {
        let opened = EventLog::<Event>::open_from_snapshot(dir, frame_decoder(annex))?;
        Self::started(opened.map_storage(|sled| Box::new(sled) as Box<dyn eventlog::LogStorage>))
    }

    /// [`Controller::start`] on any storage (etcd).
    pub fn start_on_storage<A>(
        storage: Box<dyn eventlog::LogStorage>,
        annex: impl FnMut(&[u8]) -> Result<A, String>,
    ) -> Result<Started<A>, ControllerError> {
        let opened = ControllerLog::with_storage_from_snapshot(storage, frame_decoder(annex))?;
        Self::started(opened)
    }

    fn started<A>(
        opened: eventlog::SnapshotOpen<Event, Box<dyn eventlog::LogStorage>, (ControllerState, A)>,
    ) -> Result<Started<A>, ControllerError> {
        let eventlog::SnapshotOpen {
            log,
            snapshot,
            tail,
            skipped,
        } = opened;
        let Some(snapshot) = snapshot else {
            let (controller, tail) = Self::replayed(log, tail)?;
            return Ok(Started {
                controller,
                tail,
                snapshot: None,
                skipped,
            });
        };
        let (state, annex) = snapshot.state;
        let covers = snapshot.covers;
        let mut check = invariants::HistoryCheck::resume(state, covers as usize);
        for (_, event) in &tail {
            check.push(event).map_err(rule_violated)?;
        }
        let state = check.finish().map_err(rule_violated)?;
        let last_sequence = tail
            .last()
            .map(|(sequence, _)| *sequence)
            .or(covers.checked_sub(1));
        let controller = Controller {
            log: Arc::new(log),
            state,
            last_sequence,
            following: None,
        };
        Ok(Started {
            controller,
            tail,
            snapshot: Some(UsedSnapshot { covers, annex }),
            skipped,
        })
    }

    /// Stores a snapshot of the state after every durable event, with the
    /// runtime's `annex` beside it. Durable when `Ok`. A failure changes
    /// nothing else: appends go on, and the next start replays from an
    /// older snapshot.
    pub fn put_snapshot(&self, annex: &[u8]) -> Result<SnapshotWritten, SnapshotError> {
        let covers = self.last_sequence.map_or(0, |last| last + 1);
        let bytes = crate::snapshot::encode_frame(&self.state, annex)?;
        self.log.put_snapshot(covers, &bytes)?;
        Ok(SnapshotWritten {
            covers,
            bytes: bytes.len(),
        })
    }

    /// Deletes every snapshot but the newest `keep`; returns what it
    /// deleted.
    pub fn prune_snapshots(&self, keep: usize) -> Result<Vec<u64>, LogError> {
        self.log.prune_snapshots(keep)
    }

    fn replayed(
        log: ControllerLog,
        events: Vec<(u64, Event)>,
    ) -> Result<(Controller, Vec<(u64, Event)>), ControllerError> {
        let state =
            invariants::check_history(events.iter().map(|(_, event)| event)).map_err(|err| {
                ControllerError::RuleViolated {
                    // The log returns events densely from sequence 0, but map
                    // through the list rather than assume it.
                    sequence: events
                        .get(err.index)
                        .map_or(err.index as u64, |(sequence, _)| *sequence),
                    violation: err.violation,
                }
            })?;
        let last_sequence = events.last().map(|(sequence, _)| *sequence);
        Ok((
            Controller {
                log: Arc::new(log),
                state,
                last_sequence,
                following: None,
            },
            events,
        ))
    }

    /// Handles one input: the model decides, the log makes the events
    /// durable, then they are applied and their effects collected.
    ///
    /// A refused input returns [`ControllerError::Refused`] and records
    /// nothing. On a log error nothing is applied; the log is poisoned.
    pub fn handle(&mut self, input: Input) -> Result<Ready, ControllerError> {
        let mut queue = VecDeque::from([input]);
        let batch = self.handle_batch(&mut queue)?;
        debug_assert!(queue.is_empty());
        match batch.outcomes.into_iter().next() {
            Some(Err(refusal)) => Err(ControllerError::Refused(refusal)),
            _ => Ok(batch.ready),
        }
    }

    /// Group commit (raft-rs `Ready` style): takes inputs from the front of
    /// `inputs` (at most [`BATCH_INPUTS_MAX`], and no more once the batch
    /// holds [`BATCH_EVENTS_SOFT_MAX`] events), steps each against the state
    /// as the ones before it left it, appends all their events in one
    /// durable batch (one flush), and only then hands out the effects.
    ///
    /// The state advances only once the batch is durable: on a log error
    /// nothing is applied and the log is poisoned. A refused input takes its
    /// place in the outcomes and records nothing; the others are unaffected.
    pub fn handle_batch(&mut self, inputs: &mut VecDeque<Input>) -> Result<Batch, ControllerError> {
        // O(1): the state's collections are persistent (imbl).
        let mut next = self.state.clone();
        let mut events = Vec::new();
        let mut out = Vec::new();
        let mut outcomes = Vec::new();
        let mut all = invariants::Touched::default();
        while outcomes.len() < BATCH_INPUTS_MAX && events.len() < BATCH_EVENTS_SOFT_MAX {
            let Some(input) = inputs.pop_front() else {
                break;
            };
            let mut checked = Checked {
                touched: invariants::Touched::default(),
                acts: invariants::OperatorActs::batch(),
                out: &mut out,
            };
            match step_in_place(&mut next, &input, &mut checked) {
                Err(refusal) => outcomes.push(Err(refusal)),
                Ok(stepped) => {
                    let touched = checked.finish(&next, stepped.len());
                    let start = events.len();
                    events.extend(stepped);
                    all.extend(touched);
                    outcomes.push(Ok(start..events.len()));
                }
            }
        }
        let durable = self.log.append(events)?;
        if let Some((sequence, _)) = durable.get().last() {
            self.last_sequence = Some(*sequence);
        }
        self.state = next;
        Ok(Batch {
            ready: Ready::from_durable(durable, out),
            outcomes,
            touched: all,
        })
    }

    /// A hot standby's step: reads what the leader appended since the last
    /// call (every entry verified as on open: key, checksum, hash chain),
    /// checks each event's rules as a restart does
    /// ([`invariants::HistoryCheck`], the owed-repair exceptions carried
    /// across calls) and folds it into the state. Returns the new events.
    ///
    /// A log error leaves the state as it was (a failed etcd read can be
    /// retried); a rule violation is [`ControllerError::RuleViolated`] and
    /// the follower must stop. Nothing is written.
    pub fn follow(&mut self) -> Result<Vec<(u64, Event)>, ControllerError> {
        let events = self.log.read_new()?;
        let Some((last, _)) = events.last() else {
            return Ok(events);
        };
        let next = self.last_sequence.map_or(0, |sequence| sequence + 1);
        let check = self.following.get_or_insert_with(|| {
            invariants::HistoryCheck::resume(self.state.clone(), next as usize)
        });
        for (_, event) in &events {
            check
                .push(event)
                .map_err(|err| ControllerError::RuleViolated {
                    sequence: err.index as u64,
                    violation: err.violation,
                })?;
        }
        self.state = check.state().clone();
        self.last_sequence = Some(*last);
        Ok(events)
    }

    /// A hot standby whose next entry the leader archived before it read
    /// it ([`LogError::BehindArchive`] from [`Controller::follow`])
    /// catches up as a start would: the newest usable snapshot's state,
    /// then the entries after it, each rule-checked (the check stays open
    /// for the next follows). The state is replaced. Returns what it read.
    pub fn catch_up<A>(
        &mut self,
        annex: impl FnMut(&[u8]) -> Result<A, String>,
    ) -> Result<CaughtUp<A>, ControllerError> {
        let (snapshot, tail, skipped) = self.log.catch_up_from_snapshot(frame_decoder(annex))?;
        let covers = snapshot.covers;
        let (state, annex) = snapshot.state;
        let mut check = invariants::HistoryCheck::resume(state, covers as usize);
        for (_, event) in &tail {
            check.push(event).map_err(rule_violated)?;
        }
        self.state = check.state().clone();
        self.following = Some(check);
        self.last_sequence = tail
            .last()
            .map(|(sequence, _)| *sequence)
            .or(covers.checked_sub(1));
        Ok(CaughtUp {
            covers,
            annex,
            tail,
            skipped,
        })
    }

    /// A hot standby elected leader: swaps the read-only storage for the
    /// fenced one (`storage`, opened under the won leadership), reads to
    /// the tail ([`Controller::follow`]), then takes over from the newest
    /// usable snapshot plus the events after it, checked equal to the
    /// followed state ([`crate::takeover`]). Returns the events read at
    /// the tail and what the takeover started from. From here appends
    /// chain onto the log. Refuses a log whose last batch left a repair
    /// owed, as a restart would.
    pub fn promote(
        &mut self,
        storage: Box<dyn eventlog::LogStorage>,
    ) -> Result<Promoted, ControllerError> {
        // The read-only storage is dropped here; reads and appends go to
        // the fenced one from now on.
        let log = Arc::get_mut(&mut self.log).ok_or(ControllerError::LogShared)?;
        drop(log.swap_storage(storage));
        let tail = self.follow()?;
        if let Some(check) = self.following.take() {
            check
                .finish()
                .map_err(|err| ControllerError::RuleViolated {
                    sequence: err.index as u64,
                    violation: err.violation,
                })?;
        }
        let (state, from) = crate::takeover::from_snapshot(&self.log, &self.state)?;
        if let Some(state) = state {
            self.state = state;
        }
        Ok(Promoted { tail, from })
    }

    /// The current state: the fold of every durable event.
    pub fn state(&self) -> &ControllerState {
        &self.state
    }

    /// Sequence of the last durable event, `None` if the log is empty.
    pub fn last_sequence(&self) -> Option<u64> {
        self.last_sequence
    }

    /// The log's group-commit counters (flushes so far, durable end).
    pub fn commit_stats(&self) -> Result<eventlog::CommitStats, ControllerError> {
        Ok(self.log.commit_stats()?)
    }

    /// Flushes and closes the log, reporting a failed final flush.
    pub fn close(self) -> Result<(), ControllerError> {
        match Arc::try_unwrap(self.log) {
            Ok(log) => log.close()?,
            // An archiving handle outlives this one: flush what is ours.
            Err(shared) => shared.storage().flush().map_err(LogError::from)?,
        }
        Ok(())
    }

    /// A handle that archives this log's history beside the core
    /// ([`crate::archive`]).
    pub fn archiver(&self) -> crate::archive::Archiver {
        crate::archive::Archiver {
            log: Arc::clone(&self.log),
        }
    }
}

/// What [`Controller::catch_up`] read.
pub struct CaughtUp<A> {
    /// The snapshot's `covers`.
    pub covers: u64,
    /// The runtime's part of the snapshot.
    pub annex: A,
    /// The events after it.
    pub tail: Vec<(u64, Event)>,
    /// Newer snapshots skipped, and why.
    pub skipped: Vec<(u64, eventlog::SnapshotSkip)>,
}

/// What [`Controller::promote`] read and started from.
#[derive(Debug)]
pub struct Promoted {
    /// The events the leader appended after the standby's last poll.
    pub tail: Vec<(u64, Event)>,
    /// The snapshot the takeover started from.
    pub from: crate::takeover::TakeoverFrom,
}

/// A controller started by [`Controller::start`]: the events it folded
/// after its snapshot (all of them without one), the snapshot it used,
/// and the snapshots it skipped and why.
pub struct Started<A> {
    /// The controller, its state rebuilt.
    pub controller: Controller,
    /// The events after the snapshot (every event without one).
    pub tail: Vec<(u64, Event)>,
    /// The snapshot used, `None` when the whole log was replayed.
    pub snapshot: Option<UsedSnapshot<A>>,
    /// Snapshots found unusable, newest first, with the reason.
    pub skipped: Vec<(u64, eventlog::SnapshotSkip)>,
}

/// The snapshot a start used.
pub struct UsedSnapshot<A> {
    /// Entries it covers (the tail starts at this sequence).
    pub covers: u64,
    /// The runtime's annex, decoded.
    pub annex: A,
}

/// A snapshot [`Controller::put_snapshot`] stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotWritten {
    /// Entries it covers.
    pub covers: u64,
    /// Its size (state and annex), in bytes.
    pub bytes: usize,
}

/// Why a snapshot could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The state or frame could not be encoded (e.g. over its bound).
    #[error(transparent)]
    Frame(#[from] crate::snapshot::SnapshotFrameError),
    /// The log refused or failed the put.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// The log's decoder for [`Controller::start`]: the frame, the model's
/// state, then the runtime's annex.
fn frame_decoder<A>(
    mut annex: impl FnMut(&[u8]) -> Result<A, String>,
) -> impl FnMut(&[u8]) -> Result<(ControllerState, A), String> {
    move |bytes| {
        let (state, rest) = crate::snapshot::decode_frame(bytes).map_err(|e| e.to_string())?;
        let annex = annex(rest).map_err(|e| format!("snapshot annex: {e}"))?;
        Ok((state, annex))
    }
}

fn rule_violated(err: invariants::HistoryViolation) -> ControllerError {
    ControllerError::RuleViolated {
        sequence: err.index as u64,
        violation: err.violation,
    }
}

/// Watches one input's events as the model applies them to the batch's
/// state: checks each event's rules before it, collects its effects and
/// what it touched after it.
struct Checked<'a> {
    touched: invariants::Touched,
    /// O1 over this input's events: who acted heads them.
    acts: invariants::OperatorActs,
    out: &'a mut Vec<Effect>,
}

impl Fold for Checked<'_> {
    fn before(&mut self, state: &ControllerState, event: &Event) {
        // Kept on in release builds (TIGER_STYLE): a rule broken here is a
        // bug in the model, and acting on it would release effects the
        // rules forbid. docs/performance.md measures what it costs.
        if let Err(violation) = invariants::check_event(state, event) {
            panic!("model produced an event breaking a rule ({event}): {violation}");
        }
        if let Err(violation) = self.acts.check(state, event) {
            panic!("model produced an event breaking a rule ({event}): {violation}");
        }
    }

    fn after(&mut self, state: &ControllerState, event: &Event) {
        self.touched.add(state, event);
        self.out.extend(effects(state, event));
    }
}

impl Checked<'_> {
    /// After the input's last event: the bound the batch size rests on,
    /// and the state rules on what the input touched.
    fn finish(self, state: &ControllerState, events: usize) -> invariants::Touched {
        // TIGER_STYLE: the bound the batch size rests on holds in production.
        assert!(
            events <= EVENTS_PER_INPUT_MAX,
            "one input produced {events} events, over EVENTS_PER_INPUT_MAX {EVENTS_PER_INPUT_MAX}"
        );
        // State rules hold between inputs, not between an input's events (a
        // canary's failed probe is followed by its restore in the same
        // input). Checked on what the input touched: O(log n) per event.
        if let Err(violation) = invariants::check_state_touched(state, &self.touched, None) {
            panic!("state after an input breaks a rule: {violation}");
        }
        self.touched
    }
}

/// The takeover ([`crate::takeover`]) as the driver runs it: a leader and
/// a standby on one log.
#[cfg(test)]
mod takeover_tests {
    use super::Controller;
    use crate::event_log::ControllerError;
    use crate::takeover::*;
    use eventlog::SnapshotSkip;
    use eventlog::{LogStorage, RawEntry, SledStorage, StorageError};
    use model::controller::ControllerState;
    use model::controller::Input;
    use std::sync::{Arc, Mutex};

    /// One sled log shared by a leader and a standby (as etcd is), which
    /// can also say a snapshot write was cut short (as etcd's can).
    #[derive(Clone)]
    struct Shared {
        sled: Arc<SledStorage>,
        torn: Arc<Mutex<Vec<u64>>>,
    }

    impl LogStorage for Shared {
        fn append_batch(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), StorageError> {
            self.sled.append_batch(entries)
        }
        fn flush(&self) -> Result<(), StorageError> {
            self.sled.flush()
        }
        fn read_from(
            &self,
            from: u64,
        ) -> Box<dyn Iterator<Item = Result<RawEntry, StorageError>> + '_> {
            self.sled.read_from(from)
        }
        fn last_sequence(&self) -> Result<Option<u64>, StorageError> {
            self.sled.last_sequence()
        }
        fn put_snapshot(&self, covers: u64, record: &[u8]) -> Result<(), StorageError> {
            self.sled.put_snapshot(covers, record)
        }
        fn snapshot_sequences(&self) -> Result<Vec<u64>, StorageError> {
            self.sled.snapshot_sequences()
        }
        fn incomplete_snapshots(&self) -> Result<Vec<u64>, StorageError> {
            Ok(self.torn.lock().map(|t| t.clone()).unwrap_or_default())
        }
        fn read_snapshot(&self, covers: u64) -> Result<Option<Vec<u8>>, StorageError> {
            self.sled.read_snapshot(covers)
        }
        fn delete_snapshot(&self, covers: u64) -> Result<(), StorageError> {
            if let Ok(mut torn) = self.torn.lock() {
                torn.retain(|c| *c != covers);
            }
            self.sled.delete_snapshot(covers)
        }
        fn live_start(&self) -> Result<eventlog::LiveStart, StorageError> {
            self.sled.live_start()
        }
        fn set_live_start(&self, start: &eventlog::LiveStart) -> Result<(), StorageError> {
            self.sled.set_live_start(start)
        }
        fn delete_below(&self, end: u64) -> Result<u64, StorageError> {
            self.sled.delete_below(end)
        }
    }

    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("fleetweft-takeover-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn shared(dir: &TempDir) -> Shared {
        Shared {
            sled: Arc::new(SledStorage::create_or_open(&dir.0).expect("sled")),
            torn: Arc::default(),
        }
    }

    fn start(storage: &Shared) -> Controller {
        Controller::start_on_storage(Box::new(storage.clone()), |b: &[u8]| {
            Ok::<_, String>(b.to_vec())
        })
        .expect("start")
        .controller
    }

    fn enroll(leader: &mut Controller, from: usize, to: usize) {
        for i in from..to {
            let input = Input::EnrollNode {
                name: format!("edge-{i}"),
                labels: Default::default(),
                public: format!("192.0.2.{}:9000", i % 250 + 1),
            };
            let _ = leader.handle(input).expect("enrolled");
        }
    }

    #[test]
    fn a_standby_takes_over_from_the_newest_snapshot_plus_its_tail_skipping_a_torn_one() {
        let dir = TempDir::new("promote");
        let storage = shared(&dir);
        let mut leader = start(&storage);
        enroll(&mut leader, 0, 10);
        let mut standby = start(&storage);
        enroll(&mut leader, 10, 20);
        let first = leader.put_snapshot(b"").expect("snapshot").covers;
        enroll(&mut leader, 20, 30);
        let second = leader.put_snapshot(b"").expect("snapshot").covers;
        assert_eq!(standby.follow().expect("follows").len(), 20);
        enroll(&mut leader, 30, 35);
        // The leader dies inside its next snapshot write, and its own
        // prune would have removed the older snapshot already.
        let torn = second + 5;
        storage.torn.lock().expect("lock").push(torn);
        let promoted = standby
            .promote(Box::new(storage.clone()))
            .expect("takes over");
        assert_eq!(promoted.tail.len(), 5, "the events after the last poll");
        assert_eq!(
            promoted.from,
            TakeoverFrom {
                snapshot: Some(second),
                tail: 5,
                skipped: vec![(torn, SnapshotSkip::Incomplete)],
            }
        );
        assert!(first < second);
        assert_eq!(standby.state(), leader.state());
        assert_eq!(standby.last_sequence(), leader.last_sequence());
        let pruned = standby.prune_snapshots(1).expect("prunes");
        assert_eq!(pruned, vec![torn, first], "the torn write's parts go too");
    }

    #[test]
    fn a_takeover_refuses_a_followed_state_that_differs_from_the_snapshots_fold() {
        let dir = TempDir::new("diverged");
        let storage = shared(&dir);
        let mut leader = start(&storage);
        enroll(&mut leader, 0, 10);
        let covers = leader.put_snapshot(b"").expect("snapshot").covers;
        enroll(&mut leader, 10, 12);
        let log: crate::driver::ControllerLog =
            eventlog::EventLog::with_storage(Box::new(storage.clone()) as Box<dyn LogStorage>)
                .expect("opens")
                .0;
        let (state, from) = from_snapshot(&log, leader.state()).expect("agrees");
        assert_eq!(state.as_ref(), Some(leader.state()));
        assert_eq!(from.snapshot, Some(covers));
        assert!(matches!(
            from_snapshot(&log, &ControllerState::default()),
            Err(ControllerError::TakeoverDiverged { covers: c, end: 12 }) if c == covers
        ));
    }

    #[test]
    fn a_standby_the_archiving_overtook_catches_up_from_the_newest_snapshot() {
        let dir = TempDir::new("catch-up");
        let archive = TempDir::new("catch-up-archive");
        let storage = shared(&dir);
        let mut leader = start(&storage);
        enroll(&mut leader, 0, 5);
        let mut standby = start(&storage);
        enroll(&mut leader, 5, 30);
        let covers = leader.put_snapshot(b"").expect("snapshot").covers;
        enroll(&mut leader, 30, 33);
        leader
            .archiver()
            .archive(&archive.0, covers, &eventlog::ArchiveConfig::default())
            .expect("archives");
        assert!(matches!(
            standby.follow(),
            Err(ControllerError::Log(eventlog::LogError::BehindArchive { next: 5, first_live }))
                if first_live == covers
        ));
        let caught = standby
            .catch_up(|b: &[u8]| Ok::<_, String>(b.to_vec()))
            .expect("catches up");
        assert_eq!((caught.covers, caught.tail.len()), (covers, 3));
        assert_eq!(standby.state(), leader.state());
        enroll(&mut leader, 33, 35);
        assert_eq!(standby.follow().expect("follows on").len(), 2);
        assert_eq!(standby.state(), leader.state());
        assert_eq!(standby.last_sequence(), leader.last_sequence());
    }
}
