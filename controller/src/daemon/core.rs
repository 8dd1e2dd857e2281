//! The controller's single owner: one task holds the [`Controller`] and
//! handles every input in turn (agents, operators, deadlines). Effects leave
//! only from a [`crate::driver::Ready`], which exists only once the
//! events behind it are durable (S7).

use super::annex::Derived;
use super::config::ControllerConfig;
use super::fatal::{deposed, is_deposed, Fatal, FatalCell};
pub use super::link_msg::LinkMsg;
use super::readback::ReadBacks;
pub use super::readback::{ReadBack, ReadBackError, ReadBackReply};
use crate::driver::{Batch, Controller, BATCH_INPUTS_MAX};
use model::controller::{ControllerState, Effect, Event, Input, Roster};
use model::{NodeId, OpId, ToAgent};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{broadcast, mpsc, oneshot};

/// Upper bound on queued commands to the core.
pub const CORE_QUEUE_MAX: usize = 1024;
/// Upper bound on queued commands to one agent connection.
pub const LINK_QUEUE_MAX: usize = 256;
/// Events kept in memory for the API's event feed.
pub const EVENTS_IN_MEMORY_MAX: usize = 100_000;

/// Where the outcome of an input goes: its durable events, or the refusal.
pub type InputReply = oneshot::Sender<Result<Vec<(u64, Event)>, model::controller::Refusal>>;

/// Why an input produced no events.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The model refused it; nothing was recorded.
    #[error("{0}")]
    Refused(model::controller::Refusal),
    /// The controller core is gone (stopping, or the log failed).
    #[error("controller core stopped")]
    Stopped,
}

/// What the core is asked to do.
pub enum Command {
    /// Feed an input; the reply gets the durable events or the refusal.
    Input {
        /// The input.
        input: Input,
        /// Where the outcome goes, if anyone waits for it.
        reply: Option<InputReply>,
    },
    /// An authenticated agent connection is up.
    Attach {
        /// Its node.
        node: NodeId,
        /// A unique id of this connection.
        link: u64,
        /// Where commands for it go.
        tx: mpsc::Sender<LinkMsg>,
        /// The connection, closed when a newer one replaces it.
        conn: quinn::Connection,
    },
    /// That connection is gone.
    Detach {
        /// Its node.
        node: NodeId,
        /// Its id (a newer connection is left alone).
        link: u64,
    },
    /// A consistent copy of what the controller knows.
    Snapshot {
        /// Where it goes.
        reply: oneshot::Sender<Snapshot>,
    },
    /// Ask a connected agent for a fresh readback of its route. Answered
    /// at once when it cannot be asked; see [`CoreHandle::read_back`].
    ReadBack {
        /// The node.
        node: NodeId,
        /// Where the readback or why not goes.
        reply: ReadBackReply,
    },
    /// A readback reply arrived on a connection (sent by its reader).
    ReadBackArrived {
        /// The node the connection's certificate names.
        node: NodeId,
        /// The connection's id.
        link: u64,
        /// The request id the reply names.
        request: u64,
        /// What it carries.
        readback: ReadBack,
    },
    /// This controller won the election (a hot standby becoming the
    /// leader): swap in the fenced storage, read to the tail, re-arm the
    /// deadline of every op holding a slot, and lead from now on.
    Promote {
        /// The log's storage opened under the won leadership.
        storage: Box<dyn eventlog::LogStorage>,
        /// Answered once the core leads.
        reply: oneshot::Sender<()>,
    },
    /// Events from a sequence on.
    Events {
        /// First sequence wanted.
        from: u64,
        /// At most this many.
        limit: usize,
        /// Where they go.
        reply: oneshot::Sender<Vec<(u64, Event)>>,
    },
}

pub use api::snapshot::{BatchStats, Snapshot};

/// A handle to send commands to the core.
#[derive(Clone)]
pub struct CoreHandle {
    tx: mpsc::Sender<Command>,
    /// The fleet roster as of the last durable events: the core folds each
    /// roster event into it (no clone per event) before it answers the
    /// input, so a reader sees an enrollment once it was acknowledged.
    roster: Arc<RwLock<Roster>>,
    /// The operators as of the last durable events (issue #28 item 2),
    /// replaced by the state's (an O(1) clone) after a batch that changed
    /// them and before its inputs are answered: a revoked credential is
    /// refused from the next request on.
    operators: Arc<RwLock<model::controller::Operators>>,
    /// Every durable event, as the core acknowledges it (the event stream
    /// and webhooks follow it). Bounded (`[api] stream_buffer_events`): a
    /// receiver that falls further behind sees `Lagged` and reads the log.
    appended: broadcast::Sender<Arc<(u64, Event)>>,
    /// Leader or standby, the folded sequence, where the leader is.
    role: Arc<super::role::RoleCell>,
    /// Where the daemon's fatal error goes ([`super::fatal`]).
    fatal: FatalCell,
}

impl CoreHandle {
    /// Leader or hot standby, how far the state folded the log, and where
    /// the leader is: read without asking the core.
    pub fn role(&self) -> &super::role::RoleCell {
        &self.role
    }

    /// Where whatever the daemon runs reports the error it stops on:
    /// [`super::Daemon::serve`] returns it, `main` exits with its code.
    pub fn fatal(&self) -> &FatalCell {
        &self.fatal
    }

    /// Follow the durable events from now on. Subscribe before reading
    /// the log, then drop what was already read: no gap, no duplicate.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<(u64, Event)>> {
        self.appended.subscribe()
    }

    /// The roster as of the last durable events: who is enrolled, under
    /// which name, labels and public route. Hold it briefly, never across
    /// an `.await`.
    pub fn roster(&self) -> RwLockReadGuard<'_, Roster> {
        // A panic while folding cannot leave the roster half-written (each
        // fold is one push or one field), so a poisoned lock is still sound.
        self.roster.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The operators as of the last durable events. Hold it briefly,
    /// never across an `.await`.
    pub fn operators(&self) -> RwLockReadGuard<'_, model::controller::Operators> {
        // Replaced whole under the lock: a poisoned lock is still sound.
        self.operators.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Feed an input and wait for its durable outcome.
    pub async fn input(&self, input: Input) -> Result<Vec<(u64, Event)>, String> {
        self.submit(input).await.map_err(|e| e.to_string())
    }

    /// Feed an input and wait for its durable outcome, the refusal typed.
    pub async fn submit(&self, input: Input) -> Result<Vec<(u64, Event)>, InputError> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Input {
            input,
            reply: Some(reply),
        })
        .await;
        match answer.await {
            Ok(outcome) => outcome.map_err(InputError::Refused),
            Err(_) => Err(InputError::Stopped),
        }
    }

    /// Feed inputs in order without waiting for each outcome before sending
    /// the next (the core handles its queue in order, so their events are
    /// in this order too), then wait for every outcome: a core that commits
    /// queued inputs together can then flush them together.
    pub async fn submit_all(
        &self,
        inputs: impl IntoIterator<Item = Input>,
    ) -> Vec<Result<Vec<(u64, Event)>, InputError>> {
        let mut answers = Vec::new();
        for input in inputs {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Input {
                input,
                reply: Some(reply),
            })
            .await;
            answers.push(answer);
        }
        let mut outcomes = Vec::with_capacity(answers.len());
        for answer in answers {
            outcomes.push(match answer.await {
                Ok(outcome) => outcome.map_err(InputError::Refused),
                Err(_) => Err(InputError::Stopped),
            });
        }
        outcomes
    }

    /// Send a command unless the core's queue is full (for the core's own
    /// follow-up inputs, which must never wait on the queue it drains).
    fn try_send(&self, command: Command) -> bool {
        self.tx.try_send(command).is_ok()
    }

    /// Send a command without waiting for an outcome.
    pub async fn send(&self, command: Command) {
        if self.tx.send(command).await.is_err() {
            tracing::error!("controller core stopped");
        }
    }

    /// A snapshot of the state.
    pub async fn snapshot(&self) -> Option<Snapshot> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Snapshot { reply }).await;
        answer.await.ok()
    }

    /// A fresh readback of `node`'s public route: the agent probes the route
    /// and re-reads the artifact behind it when asked, over its control
    /// connection. Waits at most [`super::readback::READBACK_TIMEOUT_MS`].
    /// Nothing of it is written to the event log.
    pub async fn read_back(&self, node: NodeId) -> Result<ReadBack, ReadBackError> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::ReadBack { node, reply }).await;
        let timeout = Duration::from_millis(super::readback::READBACK_TIMEOUT_MS);
        // Giving up drops `answer`; the core sees the closed reply and
        // forgets the request the next time it looks at its table.
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(ReadBackError::Stopped),
            Err(_) => Err(ReadBackError::Timeout),
        }
    }

    /// Events from `from` on.
    pub async fn events(&self, from: u64, limit: usize) -> Vec<(u64, Event)> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Events { from, limit, reply }).await;
        answer.await.unwrap_or_default()
    }
}

struct Link {
    id: u64,
    tx: mpsc::Sender<LinkMsg>,
    conn: quinn::Connection,
    /// The peer's address, as the handshake saw it.
    peer: std::net::SocketAddr,
    /// The SHA-256 fingerprint of the certificate it presented.
    fingerprint: Option<[u8; 32]>,
}

/// QUIC close code for a connection refused or cut for its identity
/// (revoked certificate, a quarantine being released).
const CLOSE_IDENTITY: u32 = 5;

/// Connections of a quarantined node kept open (muted) at once; beyond it
/// the oldest is closed, so a swarm of copies cannot hold unbounded state.
pub const QUARANTINED_LINKS_MAX: usize = 8;

/// The core's view of connection identities: the conflict watch, the
/// muted connections of quarantined nodes, the deny list the handshake
/// reads, and what each node last presented.
struct Identities {
    watch: model::identity::ConflictWatch,
    /// The monotonic clock the watch is fed from (time is the model's input).
    watch_epoch: Instant,
    muted: HashMap<NodeId, std::collections::VecDeque<Link>>,
    deny: protocol::tls::DenyList,
    presented: imbl::HashMap<NodeId, [u8; 32]>,
    conflicts: u64,
}

impl Identities {
    fn new(deny: protocol::tls::DenyList, state: &ControllerState, conflicts: u64) -> Self {
        // The deny list is rebuilt from the log: a revocation survives a
        // restart.
        for fingerprint in state.revoked_certs.keys() {
            if !deny.insert(fingerprint.0) {
                tracing::error!("deny list full: {} not loaded", fingerprint.to_hex());
            }
        }
        Identities {
            watch: Default::default(),
            watch_epoch: Instant::now(),
            muted: HashMap::new(),
            deny,
            presented: imbl::HashMap::new(),
            conflicts,
        }
    }

    /// Keep `link` of quarantined `node` open but silent: nothing is sent
    /// to it and, since the node is quarantined, nothing it says is
    /// recorded. Keeping it open stops the two agents from replacing each
    /// other (and from reconnecting) while an operator looks.
    fn mute(&mut self, state: &ControllerState, node: NodeId, link: Link) {
        let muted = self.muted.entry(node).or_default();
        tracing::warn!(
            "{} is quarantined (identity conflict): connection from {} kept open, muted",
            state.roster.display_name(node),
            link.peer
        );
        muted.push_back(link);
        while muted.len() > QUARANTINED_LINKS_MAX {
            if let Some(old) = muted.pop_front() {
                old.conn.close(
                    quinn::VarInt::from_u32(CLOSE_IDENTITY),
                    b"quarantined: too many connections",
                );
            }
        }
    }

    fn detach(&mut self, node: NodeId, link: u64) {
        if let Some(muted) = self.muted.get_mut(&node) {
            muted.retain(|l| l.id != link);
        }
    }

    fn peers(&self) -> HashMap<NodeId, Vec<String>> {
        self.muted
            .iter()
            .map(|(n, links)| (*n, links.iter().map(|l| l.peer.to_string()).collect()))
            .collect()
    }
}

/// How often a hot standby reads what the leader appended. A bounded poll,
/// not an etcd watch: each read is the same verified, snapshot-consistent
/// range scan a restart does, from the next sequence, so a missed or
/// compacted watch revision can never leave a gap or a duplicate; when
/// nothing is new it costs one small range request. The standby's view
/// lags the leader's log by at most this (plus the read).
pub const FOLLOW_POLL_MS: u64 = 200;

/// Start the core task over an opened controller.
/// `deny` is the list the QUIC handshake refuses; the core fills it from
/// the log at start and as revocations become durable. A core started as
/// [`Role::Standby`](super::role::Role) follows the log read-only (every
/// [`FOLLOW_POLL_MS`]) and takes no input until [`Command::Promote`].
pub fn spawn(
    started: crate::driver::Started<Derived>,
    cfg: ControllerConfig,
    allow_faults: bool,
    deny: protocol::tls::DenyList,
    role: super::role::Role,
) -> CoreHandle {
    let (tx, rx) = mpsc::channel(CORE_QUEUE_MAX);
    let (appended, _) = broadcast::channel(cfg.api.stream_buffer_events);
    let cell = super::role::RoleCell::new(role);
    cell.set_log_sequence(started.controller.last_sequence());
    let handle = CoreHandle {
        tx: tx.clone(),
        roster: Arc::new(RwLock::new(started.controller.state().roster.clone())),
        operators: Arc::new(RwLock::new(started.controller.state().operators.clone())),
        appended,
        role: Arc::new(cell),
        fatal: FatalCell::default(),
    };
    let crate::driver::Started {
        controller,
        tail,
        snapshot,
        ..
    } = started;
    let covers = snapshot.as_ref().map_or(0, |s| s.covers);
    let derived = Derived::rebuild(snapshot.map(|s| s.annex), &tail, controller.state());
    let identities = Identities::new(deny, controller.state(), derived.identity_conflicts);
    let history = super::annex::feed(tail, EVENTS_IN_MEMORY_MAX);
    let mut times = crate::archive::SnapshotTimes::default();
    if covers > 0 {
        // Snapshots record no time: the loaded one counts as written now,
        // which only errs towards keeping more (`crate::archive`).
        times.record(covers, SystemTime::now());
    }
    let start = Start {
        history,
        derived,
        snapshots: SnapshotClock::new(&cfg.log, covers),
        archive: ArchivePolicy {
            dir: cfg.log.archive_dir.clone(),
            retention: crate::archive::Retention {
                keep_events: cfg.log.keep_events,
                keep_days: cfg.log.keep_days,
            },
            times,
            quota: cfg.storage.quota_bytes(),
        },
    };
    let core = Core::new(
        controller,
        start,
        &cfg,
        allow_faults,
        handle.clone(),
        identities,
    );
    tokio::spawn(run(core, rx));
    handle
}

/// What the core task owns besides the controller: connections, deadlines
/// and the runtime-only indexes the API reads.
struct Core {
    controller: Controller,
    /// The latest events, dense by sequence, for the API's event feed.
    history: VecDeque<(u64, Event)>,
    drop_commit_reply: Option<String>,
    links: HashMap<NodeId, Link>,
    /// The nodes in `links`, kept sorted and cheap to share with snapshots.
    connected: imbl::OrdSet<NodeId>,
    readbacks: ReadBacks,
    unknown_since: imbl::OrdMap<OpId, SystemTime>,
    op_durations: api::view::durations::OpDurations,
    log_index: api::report::LogIndex,
    ids: Identities,
    /// The model's op deadlines; `clock` is the monotonic zero of the
    /// `now_ms` this driver hands them.
    timers: model::controller::Timers,
    clock: Instant,
    me: CoreHandle,
    stats: BatchStats,
    ahead: super::ahead::AheadOfLog,
    snapshots: SnapshotClock,
    archive: ArchivePolicy,
    /// The leader's housekeeping thread (none on a standby).
    housekeeping: Option<super::housekeeping::Housekeeping>,
}

/// `[log] archive_dir`, `keep_events`, `keep_days`, and when the
/// snapshots were written (`crate::archive`); the storage's quota.
struct ArchivePolicy {
    dir: Option<std::path::PathBuf>,
    retention: crate::archive::Retention,
    times: crate::archive::SnapshotTimes,
    quota: Option<u64>,
}

/// What the core starts from besides the controller: the event feed's
/// newest events and what it derived from the history.
struct Start {
    history: VecDeque<(u64, Event)>,
    derived: Derived,
    snapshots: SnapshotClock,
    archive: ArchivePolicy,
}

async fn run(mut core: Core, mut rx: mpsc::Receiver<Command>) {
    let mut queued: VecDeque<(Input, Option<InputReply>)> = VecDeque::new();
    let mut follow = tokio::time::interval(Duration::from_millis(FOLLOW_POLL_MS));
    follow.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // One timer for every deadline (quinn-proto style): sleep until
        // the earliest, or until a command arrives.
        let wake = core.timers.poll_timeout().map(|ms| core.at(ms));
        let standby = core.is_standby();
        let command = tokio::select! {
            biased;
            command = rx.recv() => match command {
                Some(command) => command,
                None => break,
            },
            _ = sleep_until(wake), if wake.is_some() => {
                core.expire(&mut queued);
                core.handle_inputs(&mut queued);
                continue;
            }
            _ = follow.tick(), if standby => {
                core.follow();
                continue;
            }
        };
        let mut held = match command {
            Command::Input { input, reply } => {
                queued.push_back((input, reply));
                None
            }
            other => Some(other),
        };
        // Group commit: take every input already queued behind it (up to
        // one batch), so they share one flush. A command of another kind
        // waits until the inputs before it are handled: order is kept.
        while held.is_none() && queued.len() < BATCH_INPUTS_MAX {
            match rx.try_recv() {
                Ok(Command::Input { input, reply }) => queued.push_back((input, reply)),
                Ok(other) => held = Some(other),
                Err(_) => break,
            }
        }
        core.expire(&mut queued);
        core.handle_inputs(&mut queued);
        if let Some(command) = held {
            core.command(command);
        }
    }
    if let Err(e) = tokio::task::block_in_place(|| core.controller.close()) {
        tracing::error!("closing the event log: {e}");
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
    }
}

impl Core {
    fn new(
        controller: Controller,
        start: Start,
        cfg: &ControllerConfig,
        allow_faults: bool,
        me: CoreHandle,
        ids: Identities,
    ) -> Core {
        let Start {
            history,
            derived,
            snapshots,
            archive,
        } = start;
        warn_ahead(&derived.ahead, controller.state());
        let mut core = Core {
            drop_commit_reply: fault_release(cfg, allow_faults),
            links: HashMap::new(),
            connected: imbl::OrdSet::new(),
            readbacks: ReadBacks::default(),
            unknown_since: imbl::OrdMap::new(),
            op_durations: Default::default(),
            log_index: derived.log_index,
            ids,
            timers: model::controller::Timers::new(cfg.timing.op_timeout_ms),
            clock: Instant::now(),
            me,
            stats: BatchStats::default(),
            ahead: derived.ahead,
            controller,
            history,
            snapshots,
            archive,
            housekeeping: None,
        };
        // An op already UNKNOWN counts from the start; an op holding a
        // slot has no grant time this process saw.
        core.op_durations.undate_all(core.controller.state());
        let now = SystemTime::now();
        for op in core.controller.state().ops.values() {
            if op.is_unknown() {
                core.unknown_since.insert(op.id, now);
            }
        }
        if !core.is_standby() {
            core.arm_all();
            core.start_housekeeping();
        }
        core
    }

    /// The leader's housekeeping thread: archiving after snapshots, the
    /// storage's size. Started when leading (a standby's log handle must
    /// stay unshared until it takes over).
    fn start_housekeeping(&mut self) {
        if self.housekeeping.is_none() {
            self.housekeeping = Some(super::housekeeping::Housekeeping::start(
                self.controller.archiver(),
                self.archive.dir.clone(),
                self.archive.quota,
                self.me.fatal().clone(),
            ));
        }
    }

    /// Whether this core is a hot standby (it follows, takes no input).
    fn is_standby(&self) -> bool {
        self.me.role.role() == super::role::Role::Standby
    }

    /// A restart (or a takeover) re-arms deadlines as the model says
    /// ([`model::controller::Timers::rearm`]).
    fn arm_all(&mut self) {
        let now_ms = self.now_ms();
        let state = self.controller.state();
        self.timers.rearm(state, now_ms);
        // T1 on every op, once per start.
        let timers = &self.timers;
        let armed = invariants::t1_deadlines_armed(state, state.ops.keys().copied(), |op| {
            timers.is_armed(op)
        });
        if let Err(violation) = armed {
            panic!("deadlines after a restart break a rule: {violation}");
        }
    }

    /// Milliseconds on this driver's monotonic clock: the model's `now_ms`.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The instant of `ms` on this driver's monotonic clock.
    fn at(&self, ms: u64) -> Instant {
        self.clock + Duration::from_millis(ms)
    }

    /// A standby's poll: fold what the leader appended since the last one
    /// (verified and rule-checked by [`Controller::follow`]). A failed
    /// read is retried at the next poll; a log that fails verification or
    /// breaks a rule stops the daemon, as it would refuse it at a restart.
    fn follow(&mut self) {
        match tokio::task::block_in_place(|| self.controller.follow()) {
            Ok(events) => self.fold_durable(&events, None),
            Err(crate::driver::ControllerError::Log(eventlog::LogError::BehindArchive {
                next,
                first_live,
            })) => self.catch_up(next, first_live),
            Err(crate::driver::ControllerError::Log(eventlog::LogError::Storage(e))) => {
                tracing::warn!("standby: reading the leader's log failed, retrying: {e}");
            }
            Err(e) => {
                tracing::error!("standby: the leader's log is refused, stopping: {e}");
                self.me.fatal().stop(Fatal::LogFailed(format!(
                    "the leader's log is refused: {e}"
                )));
            }
        }
    }

    /// A standby the leader's archiving overtook (`next` below
    /// `first_live`): catch up from the newest snapshot plus the tail, as
    /// a start would, and rebuild what the core derives from the history
    /// (the event feed restarts at the tail). A log refused stops the
    /// daemon as a start would refuse it.
    fn catch_up(&mut self, next: u64, first_live: u64) {
        let caught = tokio::task::block_in_place(|| self.controller.catch_up(Derived::decode));
        let caught = match caught {
            Ok(caught) => caught,
            Err(crate::driver::ControllerError::Log(eventlog::LogError::Storage(e))) => {
                tracing::warn!("standby: catching up from a snapshot failed, retrying: {e}");
                return;
            }
            Err(e) => {
                tracing::error!(
                    "standby: catching up from a snapshot, the log is refused, stopping: {e}"
                );
                self.me.fatal().stop(Fatal::LogFailed(format!(
                    "catching up from a snapshot, the log is refused: {e}"
                )));
            }
        };
        let state = self.controller.state();
        let derived = Derived::rebuild(Some(caught.annex), &caught.tail, state);
        self.log_index = derived.log_index;
        self.ahead = derived.ahead;
        self.ids.conflicts = derived.identity_conflicts;
        if let Ok(mut roster) = self.me.roster.write() {
            *roster = state.roster.clone();
        }
        if let Ok(mut operators) = self.me.operators.write() {
            *operators = state.operators.clone();
        }
        let now = SystemTime::now();
        for op in state.ops.values().filter(|op| op.is_unknown()) {
            self.unknown_since.entry(op.id).or_insert(now);
        }
        self.op_durations.undate_all(state);
        self.me
            .role
            .set_log_sequence(self.controller.last_sequence());
        tracing::warn!(
            next,
            first_live,
            covers = caught.covers,
            tail = caught.tail.len(),
            "standby: the leader archived the entries from {next} before this standby read them; caught up from the snapshot of the first {} entries plus the {} event(s) after it",
            caught.covers,
            caught.tail.len()
        );
        self.history = super::annex::feed(caught.tail, EVENTS_IN_MEMORY_MAX);
    }

    /// Elected: read to the tail on the fenced storage, fold it, re-arm
    /// every slot-holding op's deadline, then lead. Stored decisions are
    /// replayed by the model when agents say hello, never re-decided.
    fn promote(&mut self, storage: Box<dyn eventlog::LogStorage>) {
        let promoted = match tokio::task::block_in_place(|| self.controller.promote(storage)) {
            Ok(promoted) => promoted,
            Err(e) if is_deposed(&e) => deposed(self.me.fatal(), &e.to_string()),
            Err(e) => {
                tracing::error!("taking over: the log is refused, stopping: {e}");
                self.me.fatal().stop(Fatal::LogFailed(format!(
                    "taking over, the log is refused: {e}"
                )));
            }
        };
        let tail = promoted.tail;
        self.fold_durable(&tail, None);
        self.arm_all();
        self.start_housekeeping();
        self.me.role.set_leader();
        let from = &promoted.from;
        let skipped: Vec<u64> = from.skipped.iter().map(|(covers, _)| *covers).collect();
        tracing::info!(
            tail = tail.len(),
            last_sequence = ?self.controller.last_sequence(),
            deadlines = self.timers.len(),
            snapshot = ?from.snapshot,
            snapshot_tail = from.tail,
            skipped_snapshots = ?skipped,
            "took over as leader from {}",
            takeover_text(from)
        );
    }

    /// Feed every due deadline as a `Timeout` input, ahead of what is queued
    /// (the deadline passed before those inputs are handled).
    fn expire(&mut self, queued: &mut VecDeque<(Input, Option<InputReply>)>) {
        let now_ms = self.now_ms();
        for input in self.timers.handle_timeout(now_ms).into_iter().rev() {
            queued.push_front((input, None));
        }
    }

    /// Handle every queued input, one durable batch at a time. A standby
    /// takes none: it cannot append (the API answers writes with a 503
    /// before they get here, and agents are sent to the leader), so what
    /// reaches it is dropped, its waiter told the core cannot serve it.
    fn handle_inputs(&mut self, queued: &mut VecDeque<(Input, Option<InputReply>)>) {
        if self.is_standby() && !queued.is_empty() {
            tracing::warn!(
                "standby: {} input(s) dropped (only the leader appends)",
                queued.len()
            );
            queued.clear();
            return;
        }
        while !queued.is_empty() {
            let (mut inputs, mut replies): (VecDeque<Input>, VecDeque<Option<InputReply>>) =
                std::mem::take(queued).into_iter().unzip();
            let outcome = tokio::task::block_in_place(|| self.controller.handle_batch(&mut inputs));
            let batch = match outcome {
                Ok(batch) => batch,
                Err(e) if is_deposed(&e) => deposed(self.me.fatal(), &e.to_string()),
                Err(e) => {
                    // The log failed: nothing may be acknowledged any more.
                    tracing::error!("event log failure, stopping: {e}");
                    self.me
                        .fatal()
                        .stop(Fatal::LogFailed(format!("event log failure: {e}")));
                }
            };
            // Another part of the daemon stopped it meanwhile (the lease
            // watch found the leadership lost): release nothing more.
            self.me.fatal().hold_if_stopped();
            // What the batch did not take goes back, in order.
            let taken: Vec<_> = replies.drain(..batch.outcomes.len()).collect();
            *queued = inputs.into_iter().zip(replies).collect();
            self.after_batch(batch, taken);
        }
    }

    /// Release a durable batch's effects, fold its events into the runtime's
    /// indexes, then answer each input.
    fn after_batch(&mut self, batch: Batch, replies: Vec<Option<InputReply>>) {
        let (events, effects) = batch.ready.into_parts();
        self.stats.batches += u64::from(!events.is_empty());
        self.stats.inputs += replies.len() as u64;
        self.stats.events += events.len() as u64;
        fold_roster(&self.me.roster, &events);
        mirror_operators(&self.me.operators, &events, self.controller.state());
        let roster = &self.controller.state().roster;
        for (sequence, event) in &events {
            tracing::info!(sequence, "{}", describe(roster, event));
        }
        let now_ms = self.now_ms();
        self.timers.handle_effects(now_ms, &effects);
        // T1, kept on in release (TIGER_STYLE): every op the batch touched
        // that waits on its node has a deadline, and no settled op has one.
        // O(touched · log n).
        let timers = &self.timers;
        let armed = invariants::t1_deadlines_armed(
            self.controller.state(),
            batch.touched.ops.iter().copied(),
            |op| timers.is_armed(op),
        );
        if let Err(violation) = armed {
            panic!("deadlines after a batch break a rule: {violation}");
        }
        for effect in effects {
            if let Effect::Send { to, msg } = effect {
                self.send(to, msg);
            }
        }
        self.fold_durable(&events, Some(&batch.touched));
        for (reply, outcome) in replies.into_iter().zip(batch.outcomes) {
            if let Some(reply) = reply {
                let _ = reply.send(outcome.map(|range| events[range].to_vec()));
            }
        }
        if !events.is_empty() {
            self.maybe_snapshot();
        }
    }

    /// A leader's snapshot, when [`SnapshotClock`] says one is due: the
    /// state after the last durable batch (between inputs, so no repair is
    /// owed) and the core's derived indexes. Taken after the batch's
    /// replies: it delays the next batch, never an answer. A failure is
    /// logged and costs only restart time (the next start uses an older
    /// snapshot); it is not retried before the next one is due.
    fn maybe_snapshot(&mut self) {
        let end = self.controller.last_sequence().map_or(0, |last| last + 1);
        let now = Instant::now();
        if !self.snapshots.due(end, now) {
            return;
        }
        self.snapshots.taken(end, now);
        let derived = Derived {
            log_index: self.log_index.clone(),
            ahead: self.ahead.clone(),
            identity_conflicts: self.ids.conflicts,
        };
        let written = derived
            .encode()
            .map_err(|e| e.to_string())
            .and_then(|annex| {
                let controller = &self.controller;
                tokio::task::block_in_place(|| controller.put_snapshot(&annex)).map_err(|e| match e
                {
                    crate::driver::SnapshotError::Log(e) if e.is_fencing() => {
                        deposed(self.me.fatal(), &e.to_string())
                    }
                    other => other.to_string(),
                })
            });
        match written {
            Ok(written) => {
                tracing::info!(
                    covers = written.covers,
                    bytes = written.bytes,
                    elapsed_ms = now.elapsed().as_millis() as u64,
                    "snapshot written: a start folds only the events after the first {}",
                    written.covers
                );
                let keep = self.snapshots.keep;
                let pruned = tokio::task::block_in_place(|| self.controller.prune_snapshots(keep));
                if let Err(e) = pruned {
                    tracing::warn!("deleting old snapshots failed (retried after the next): {e}");
                }
                self.after_snapshot(written.covers);
            }
            Err(e) => tracing::warn!(
                "snapshot at entry {end} failed, the next start folds from an older one: {e}"
            ),
        }
    }

    /// After a snapshot covering `covers` entries: with `[log]
    /// archive_dir`, hands what may now be archived to the housekeeping
    /// thread (`crate::archive::archive_upto`).
    fn after_snapshot(&mut self, covers: u64) {
        let now = SystemTime::now();
        let a = &mut self.archive;
        a.times.record(covers, now);
        if a.dir.is_none() {
            return;
        }
        let upto = crate::archive::archive_upto(covers, covers, a.retention, &a.times, now);
        if a.retention.keep_days != 0 {
            let window = Duration::from_secs(a.retention.keep_days.saturating_mul(86_400));
            if let Some(cutoff) = now.checked_sub(window) {
                a.times.forget_before(cutoff);
            }
        }
        if upto > 0 {
            if let Some(h) = &self.housekeeping {
                h.archive(upto);
            }
        }
    }

    /// Fold durable events (a leader's batch, or what a standby read)
    /// into the runtime's indexes: op tracking, the log index, identities,
    /// the event feed and stream, the folded sequence. `touched` is what
    /// the batch touched; a standby's reads pass none and the events' own
    /// ops are tracked.
    fn fold_durable(&mut self, events: &[(u64, Event)], touched: Option<&invariants::Touched>) {
        if events.is_empty() {
            return;
        }
        match touched {
            Some(touched) => self.track_ops(touched),
            None => {
                let mut own = invariants::Touched::default();
                for (_, event) in events {
                    own.add(self.controller.state(), event);
                }
                self.track_ops(&own);
            }
        }
        if self.is_standby() {
            fold_roster(&self.me.roster, events);
            mirror_operators(&self.me.operators, events, self.controller.state());
        }
        if events
            .iter()
            .any(|(_, e)| matches!(e, Event::RolloutStarted { .. }))
        {
            // A new rollout may have made the state forget an old one.
            self.op_durations.forget_rollouts(self.controller.state());
        }
        for (sequence, event) in events {
            self.log_index
                .record(*sequence, event, self.controller.state());
            identity_event(
                self.controller.state(),
                event,
                &mut self.links,
                &mut self.ids,
            );
            self.resync_connected(event);
            self.note_ahead(event);
        }
        self.ahead.caught_up(self.controller.state().generation);
        // O(1) per event (one clone, whoever follows), none when nobody does.
        if self.me.appended.receiver_count() > 0 {
            for event in events {
                let _ = self.me.appended.send(Arc::new(event.clone()));
            }
        }
        self.me
            .role
            .set_log_sequence(self.controller.last_sequence());
        self.history.extend(events.iter().cloned());
        trim(&mut self.history);
    }

    /// After an identity event closed connections, drop their nodes from
    /// `connected`: only the event's node, except for a revocation (rare),
    /// which may close any connection that presented the certificate.
    fn resync_connected(&mut self, event: &Event) {
        match event {
            Event::NodeQuarantined { node, .. }
            | Event::NodeRetired { node }
            | Event::NodeReleased { node }
                if !self.links.contains_key(node) =>
            {
                self.connected.remove(node);
            }
            Event::CertRevoked { .. } => {
                self.connected = self.links.keys().copied().collect();
            }
            _ => {}
        }
    }

    /// Fold a durable event into the nodes ahead of the log, and say so
    /// loudly the first time a node reports a generation (not per message).
    fn note_ahead(&mut self, event: &Event) {
        let state = self.controller.state();
        if let Event::NodeRetired { node } = event {
            self.ahead.forget(*node);
        }
        if let Some((node, reported)) = self.ahead.record(event, state.generation) {
            let name = state.roster.display_name(node);
            tracing::warn!(
                "{}",
                super::view::ahead::sentence(&name, reported.0, state.generation.0)
            );
        }
    }

    /// Send `msg` to `to`'s connection, if it has one.
    fn send(&mut self, to: NodeId, msg: ToAgent) {
        let roster = &self.controller.state().roster;
        if matches!(msg, ToAgent::CommitReply { .. }) && self.drop_commit_reply.is_some() {
            let release = self
                .controller
                .state()
                .op_summary(msg.op())
                .map(|o| o.release.to_hex());
            if self.drop_commit_reply == release {
                self.drop_commit_reply = None;
                tracing::warn!(
                    "FAULT INJECTION: dropping the commit reply for {} to {} (the decision is durable)",
                    msg.op(),
                    roster.display_name(to)
                );
                return;
            }
        }
        let Some(link) = self.links.get(&to) else {
            tracing::debug!(
                "{} is not connected; it gets the command when it says hello",
                roster.display_name(to)
            );
            return;
        };
        if link.tx.try_send(LinkMsg::Command(msg)).is_err() {
            // Dropping a command silently would leave the op waiting for an
            // unrelated reconnect. Close the link instead: the agent
            // reconnects, says hello, and gets its live op's command again.
            tracing::warn!(
                "{} is not keeping up: closing its connection so it resyncs on reconnect",
                roster.display_name(to)
            );
            link.conn.close(
                quinn::VarInt::from_u32(1),
                b"controller queue full: reconnect to resync",
            );
            self.links.remove(&to);
            self.connected.remove(&to);
        }
    }

    /// The ops a batch touched: note when each became UNKNOWN (or stopped
    /// being).
    /// O(touched · log n): never a walk over every op.
    fn track_ops(&mut self, touched: &invariants::Touched) {
        let now = SystemTime::now();
        let clock = Instant::now();
        for op in &touched.ops {
            self.op_durations
                .touched(self.controller.state(), *op, clock);
            let hot = self.controller.state().op(*op);
            if hot.is_some_and(|o| o.is_unknown()) {
                self.unknown_since.entry(*op).or_insert(now);
            } else {
                self.unknown_since.remove(op);
            }
        }
    }

    /// Every command that is not an input.
    fn command(&mut self, command: Command) {
        match command {
            Command::Input { input, reply } => {
                let mut queued = VecDeque::from([(input, reply)]);
                self.handle_inputs(&mut queued);
            }
            Command::Attach {
                node,
                link,
                tx,
                conn,
            } => self.attach(node, link, tx, conn),
            Command::Detach { node, link } => {
                if self.links.get(&node).is_some_and(|l| l.id == link) {
                    self.links.remove(&node);
                    self.connected.remove(&node);
                }
                self.ids.detach(node, link);
                self.readbacks.disconnected(node, link, Instant::now());
            }
            Command::ReadBack { node, reply } => {
                let link = self.links.get(&node).map(|l| (l.id, &l.tx));
                self.readbacks.start(node, link, reply, Instant::now());
            }
            Command::ReadBackArrived {
                node,
                link,
                request,
                readback,
            } => self
                .readbacks
                .answer(node, link, request, readback, Instant::now()),
            Command::Snapshot { reply } => {
                let _ = reply.send(self.snapshot());
            }
            Command::Events { from, limit, reply } => {
                let _ = reply.send(self.events(from, limit));
            }
            Command::Promote { storage, reply } => {
                self.promote(storage);
                let _ = reply.send(());
            }
        }
    }

    fn attach(
        &mut self,
        node: NodeId,
        id: u64,
        tx: mpsc::Sender<LinkMsg>,
        conn: quinn::Connection,
    ) {
        let link = Link {
            id,
            peer: conn.remote_address(),
            fingerprint: protocol::quic::peer_fingerprint(&conn),
            tx,
            conn,
        };
        let state = self.controller.state();
        // The link task looked the name up before a retirement may have
        // become durable: check again here, where events fold.
        if state.roster.is_retired(node) {
            link.conn
                .close(quinn::VarInt::from_u32(CLOSE_IDENTITY), b"node retired");
            return;
        }
        if let Some(fingerprint) = link.fingerprint {
            self.ids.presented.insert(node, fingerprint);
        }
        if state.is_quarantined(node) {
            self.ids.mute(state, node, link);
            return;
        }
        let peer = link.peer;
        self.connected.insert(node);
        if let Some(old) = self.links.insert(node, link) {
            // A second connection for the same node replaces the first.
            old.conn
                .close(0u32.into(), b"replaced by a newer connection");
            self.readbacks.disconnected(node, old.id, Instant::now());
            let now_ms =
                u64::try_from(self.ids.watch_epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
            if self.ids.watch.replaced(node, now_ms) {
                let name = state.roster.display_name(node);
                report_conflict(&name, &self.me, node, old.peer, peer);
            }
        }
    }

    /// A consistent copy of what the core knows: every collection in it is
    /// persistent, so this shares structure instead of copying the fleet.
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: self.controller.state().clone(),
            last_sequence: self.controller.last_sequence(),
            connected: self.connected.clone(),
            unknown_since: self.unknown_since.clone(),
            op_durations: self.op_durations.clone(),
            log_index: self.log_index.clone(),
            identity_conflicts: self.ids.conflicts,
            presented: self.ids.presented.clone(),
            quarantined_peers: self.ids.peers(),
            batches: self.stats,
            deadlines_armed: self.timers.len(),
            ahead_of_log: self.ahead.nodes().clone(),
            role: self.me.role.role(),
            leader: self.me.role.leader(),
            storage: self.housekeeping.as_ref().and_then(|h| h.storage()),
        }
    }

    /// Up to `limit` events from sequence `from` on: the history is dense,
    /// so the first one is found by offset, not by a scan.
    fn events(&self, from: u64, limit: usize) -> Vec<(u64, Event)> {
        let first = self.history.front().map_or(from, |(s, _)| *s);
        let skip = usize::try_from(from.saturating_sub(first)).unwrap_or(usize::MAX);
        self.history
            .iter()
            .skip(skip)
            .take(limit)
            .cloned()
            .collect()
    }
}

/// Says once, loudly, at start, each node ahead of the log (its latest
/// hellos and refusals against the generation reached at the log's end,
/// [`Derived::rebuild`]).
fn warn_ahead(ahead: &super::ahead::AheadOfLog, state: &ControllerState) {
    for (node, reported) in ahead.nodes() {
        tracing::warn!(
            "{}",
            super::view::ahead::sentence(
                &state.roster.display_name(*node),
                reported.0,
                state.generation.0
            )
        );
    }
}

/// Where a takeover started from, for its log line.
fn takeover_text(from: &crate::takeover::TakeoverFrom) -> String {
    match from.snapshot {
        Some(covers) => format!(
            "the snapshot of the first {covers} entries plus the {} event(s) after it (equal to the followed state)",
            from.tail
        ),
        None => "the followed state (no usable snapshot)".into(),
    }
}

/// When the leader writes its next snapshot (`[log]`, [`LogSection`]).
///
/// [`LogSection`]: super::config::LogSection
struct SnapshotClock {
    every_events: u64,
    every: Option<Duration>,
    keep: usize,
    /// Entries the last snapshot (written, tried or loaded) covers.
    covers: u64,
    /// When it was written or tried (or the start).
    at: Instant,
}

impl SnapshotClock {
    fn new(cfg: &super::config::LogSection, covers: u64) -> Self {
        SnapshotClock {
            every_events: cfg.snapshot_every_events,
            every: (cfg.snapshot_every_s != 0).then(|| Duration::from_secs(cfg.snapshot_every_s)),
            keep: cfg.snapshots_keep,
            covers,
            at: Instant::now(),
        }
    }

    /// Whether a snapshot of a log of `end` entries is due at `now`.
    fn due(&self, end: u64, now: Instant) -> bool {
        let since = end.saturating_sub(self.covers);
        let by_count = self.every_events != 0 && since >= self.every_events;
        let by_time = self
            .every
            .is_some_and(|every| since > 0 && now.saturating_duration_since(self.at) >= every);
        by_count || by_time
    }

    fn taken(&mut self, end: u64, now: Instant) {
        self.covers = end;
        self.at = now;
    }
}

/// Keep the in-memory history at most [`EVENTS_IN_MEMORY_MAX`] events.
fn trim(history: &mut VecDeque<(u64, Event)>) {
    let excess = history.len().saturating_sub(EVENTS_IN_MEMORY_MAX);
    history.drain(..excess);
}

/// The release whose first commit reply the fault injection drops, if on.
fn fault_release(cfg: &ControllerConfig, allow_faults: bool) -> Option<String> {
    match (&cfg.faults.drop_first_commit_reply_for, allow_faults) {
        (Some(release), true) => {
            tracing::warn!(
                "FAULT INJECTION ENABLED: the first commit reply for release {release} will be dropped"
            );
            Some(release.clone())
        }
        (Some(_), false) => {
            tracing::warn!(
                "[faults] present but ignored: start with --allow-fault-injection to use it"
            );
            None
        }
        (None, _) => None,
    }
}

/// Feed the conflict the watch found. The core never waits on its own
/// queue; if it is full the next replacement reports again.
fn report_conflict(
    name: &str,
    me: &CoreHandle,
    node: NodeId,
    first: std::net::SocketAddr,
    second: std::net::SocketAddr,
) {
    tracing::warn!(
        "identity conflict: two live connections present {name}'s certificate ({first} and {second})"
    );
    let input = Input::IdentityConflict {
        node,
        first_peer: first.to_string(),
        second_peer: second.to_string(),
    };
    if !me.try_send(Command::Input { input, reply: None }) {
        tracing::warn!(
            "core queue full: the identity conflict is reported again on the next replacement"
        );
    }
}

/// What a durable identity event changes in the connections: a quarantine
/// mutes the node's live connection, a release closes every connection of
/// the node (each agent reconnects, and a revoked certificate is refused
/// at the handshake), a revocation denies the certificate and closes the
/// connections that presented it.
fn identity_event(
    state: &ControllerState,
    event: &Event,
    links: &mut HashMap<NodeId, Link>,
    ids: &mut Identities,
) {
    match event {
        Event::NodeQuarantined { node, .. } => {
            ids.conflicts += 1;
            if let Some(link) = links.remove(node) {
                ids.mute(state, *node, link);
            }
        }
        Event::NodeRetired { node } => {
            // A retired node's agent is refused from now on: cut what it
            // has open (it is refused again when it reconnects).
            let muted = ids.muted.remove(node).unwrap_or_default();
            for link in muted.into_iter().chain(links.remove(node)) {
                tracing::warn!(
                    "closing {}'s connection from {}: the node is retired",
                    state.roster.display_name(*node),
                    link.peer
                );
                link.conn
                    .close(quinn::VarInt::from_u32(CLOSE_IDENTITY), b"node retired");
            }
        }
        Event::NodeReleased { node } => {
            ids.watch.forget(*node);
            let released = ids.muted.remove(node).unwrap_or_default();
            for link in released.into_iter().chain(links.remove(node)) {
                link.conn.close(
                    quinn::VarInt::from_u32(CLOSE_IDENTITY),
                    b"quarantine released: reconnect",
                );
            }
        }
        Event::CertRevoked { fingerprint, .. } => {
            if !ids.deny.insert(fingerprint.0) {
                tracing::error!(
                    "deny list full ({} entries): {} not denied at the handshake",
                    protocol::tls::DENY_LIST_ENTRIES_MAX,
                    fingerprint.to_hex()
                );
            }
            let revoked = |l: &Link| l.fingerprint == Some(fingerprint.0);
            let close = |l: &Link| {
                tracing::warn!(
                    "closing {}'s connection: its certificate is revoked",
                    l.peer
                );
                l.conn.close(
                    quinn::VarInt::from_u32(CLOSE_IDENTITY),
                    b"certificate revoked",
                );
            };
            links.retain(|_, l| {
                let keep = !revoked(l);
                if !keep {
                    close(l);
                }
                keep
            });
            for muted in ids.muted.values_mut() {
                muted.retain(|l| {
                    let keep = !revoked(l);
                    if !keep {
                        close(l);
                    }
                    keep
                });
            }
        }
        _ => {}
    }
}

/// After a durable batch that changed the operators, the state's
/// operators replace the shared ones (an O(1) clone of persistent maps).
fn mirror_operators(
    shared: &RwLock<model::controller::Operators>,
    events: &[(u64, Event)],
    state: &model::controller::ControllerState,
) {
    let changes = |e: &Event| {
        matches!(
            e,
            Event::OperatorAdded { .. }
                | Event::CredentialRotated { .. }
                | Event::OperatorRevoked { .. }
        )
    };
    if events.iter().any(|(_, e)| changes(e)) {
        *shared.write().unwrap_or_else(|p| p.into_inner()) = state.operators.clone();
    }
}

/// Fold the roster events of a durable batch into the shared roster.
fn fold_roster(roster: &RwLock<Roster>, events: &[(u64, Event)]) {
    let is_roster = |e: &Event| {
        matches!(
            e,
            Event::NodeEnrolled { .. } | Event::NodeLabeled { .. } | Event::NodeRetired { .. }
        )
    };
    if !events.iter().any(|(_, e)| is_roster(e)) {
        return;
    }
    let mut roster = roster.write().unwrap_or_else(|p| p.into_inner());
    for (_, event) in events {
        roster.fold(event);
    }
}

/// Events in domain words with node names: the view layer's, in `api`.
pub use api::view::describe::describe;
