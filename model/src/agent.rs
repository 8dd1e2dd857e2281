//! The agent state machine at model granularity: accept, stage (fetch,
//! verify, stage, with the fixed recovery table of [`crate::recovery`]
//! deciding retry, resume or stop), request commit, switch or abort, probe,
//! report; restore on demand. Everything in [`AgentState`] is journaled: it
//! survives a crash. The runtime persists the events of a step before it
//! performs the step's effects; fetching, verifying and staging are effects
//! ([`AgentEffect::StageArtifact`], [`AgentEffect::ObserveStaged`]) whose
//! results come back as inputs.

use crate::chunks::ChunkSet;
use crate::evidence::RouteObservation;
use crate::ids::{Digest, Generation, OpId};
use crate::msg::{Decision, ReportKind, StageRefusal, ToAgent, ToController};
use crate::recovery::{
    self, ChunkReading, ErrorClass, Exit, Observed, Position, Reading, StageFailure,
};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where the agent's current op stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AgentStage {
    /// Staged and verified; a commit request is outstanding.
    AwaitingDecision,
    /// The route changed (or was left as it was); a probe is due.
    Probing(ReportKind),
    /// Probed; the report is sent and re-sent until newer work arrives.
    Reporting(ReportKind, RouteObservation),
    /// Fetching, verifying and staging the op's release (SPEC §5); no
    /// commit request goes out before it is staged. Appended last.
    Staging(StagingStep),
    /// (issue #24 item 2) The Commit arrived for a release that declares a
    /// migration: the data directory was snapshotted and the release's
    /// `migrate` command runs ([`AgentEffect::RunMigration`]); the route
    /// switches only once it succeeded. Journaled before the command
    /// starts, so a restart that finds it knows a migration may have
    /// changed the data, and stops ([`crate::recovery::Row::MigrationInterrupted`]).
    /// Appended last.
    Migrating,
}

/// (issue #24 item 2) A release's declared migration, as its signed
/// manifest says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum MigrationKind {
    /// A roll back after it puts the data's snapshot back with the code.
    Reversible,
    /// A roll back after it is not done by the agent: the op waits for a
    /// person ([`StageRefusal::MigrationIrreversible`]).
    Irreversible,
}

/// Where staging stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum StagingStep {
    /// The recovery table decides next, once the driver has re-verified
    /// the staged artifact from disk ([`AgentEffect::ObserveStaged`]).
    /// `last` is how the latest attempt failed; `None` when nothing failed
    /// or a crash cut it short (a crash is transient).
    Observing {
        position: Position,
        last: Option<StageFailure>,
    },
    /// An attempt is reserved (one unit of budget spent) and runs
    /// ([`AgentEffect::StageArtifact`]).
    Running,
}

/// Attempts reserved for one op's staging across restarts. A retry spends
/// one; a resume, a restart and a stop never do.
pub const ATTEMPT_BUDGET: u8 = 3;

/// The op the agent works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AgentOp {
    pub id: OpId,
    pub generation: Generation,
    pub release: Digest,
    /// What served before this op; put back by a restore.
    pub baseline: Option<Digest>,
    pub stage: AgentStage,
    /// Staging attempts left ([`ATTEMPT_BUDGET`] at the start).
    pub budget_left: u8,
    /// (a release of several chunks) The chunks of the release this
    /// process verified as they landed, or kept after re-verifying them
    /// from disk. Only meaningful while staging: empty in every other
    /// stage, and emptied by a restart (the table re-reads the disk; a
    /// journaled claim is never trusted across a crash).
    pub verified: ChunkSet,
    /// (issue #24 item 2) The migration the op's release declares, as the
    /// driver read it from the verified manifest
    /// ([`AgentEvent::MigrationDeclared`]); `None` for a release without
    /// one, which switches on its Commit as every release did before.
    #[serde(default)]
    pub migration: Option<MigrationKind>,
}

/// The agent's journal.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct AgentState {
    /// The highest generation accepted; older commands are refused (S8).
    pub accepted: Generation,
    /// The release the public route forwards to.
    pub serving: Option<Digest>,
    pub op: Option<AgentOp>,
    /// The highest op id this agent ever took on (accepted, or aborted
    /// unseen). The controller allocates op ids in increasing order, so a
    /// command that would start an op at or below it is a late copy (S8):
    /// without this, a duplicated `Apply` of an op the agent already closed
    /// would start it again and the stored Commit would be replayed to it.
    pub highest_op: Option<OpId>,
    /// How many content chunks a release is fetched in (issue #23: a
    /// release is a tree of chunks; the manifest says how many). 0 and 1
    /// both mean one: a format-1 bundle, staged and re-verified whole,
    /// as every agent did before chunks ([`AgentState::chunk_count`]).
    /// A parameter of the model: the checker gives every release the
    /// same count (`--chunks`).
    pub release_chunks: u8,
}

impl AgentState {
    /// The releases the agent must keep on disk whatever its disk budget
    /// (issue #23 item 6): what the route serves, the current op's
    /// release, and that op's baseline (what a restore puts back; a
    /// rollback needs it whole). Deleting one of them could leave a
    /// restore, the recovery table or the route with nothing to act on;
    /// housekeeping may remove any other release.
    pub fn releases_in_use(&self) -> impl Iterator<Item = Digest> {
        let op = self.op.as_ref();
        [
            self.serving,
            op.map(|o| o.release),
            op.and_then(|o| o.baseline),
        ]
        .into_iter()
        .flatten()
    }

    /// Chunks per release: [`AgentState::release_chunks`], at least one.
    pub fn chunk_count(&self) -> u8 {
        self.release_chunks.max(1)
    }

    /// Whether releases are fetched chunk by chunk (more than one chunk):
    /// the driver reports each chunk as it lands and re-reads them one by
    /// one ([`AgentInput::ChunkFetched`], [`AgentInput::ChunksObserved`]).
    pub fn chunked(&self) -> bool {
        self.chunk_count() > 1
    }
}

/// Inputs to the agent core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AgentInput {
    /// A command from the controller.
    Command(ToAgent),
    /// The public route was probed.
    Probed(RouteObservation),
    /// The driver re-read the current op's staged artifact from disk:
    /// what it found (never the artifact's own claim).
    StageObserved(Observed),
    /// The running attempt fetched, verified and staged the release.
    Staged,
    /// The running attempt failed, classified by the driver.
    StageFailed(StageFailure),
    /// The connection to the controller (re)opened.
    Connected,
    /// The agent process started again; `serving` is what the route actually
    /// serves, reconstructed by looking, not by trusting the journal.
    Restarted { serving: Option<Digest> },
    /// The retry timer fired: re-send what is outstanding.
    Retry,
    /// (a release of several chunks) The running attempt fetched chunk
    /// `0` of the release and its digest matched as it landed.
    ChunkFetched(u8),
    /// (a release of several chunks) The driver re-read the current op's
    /// chunks and tree from disk (the chunked form of `StageObserved`).
    ChunksObserved(ChunkReading),
    /// (issue #24 item 2) The op's release, staged or re-verified, declares
    /// a migration: the driver says so before it answers `Staged` or the
    /// observation that resumes it.
    MigrationDeclared(MigrationKind),
    /// The release's migration ran and exited 0 within its timeout.
    Migrated,
    /// The release's migration failed (or was refused: the data over its
    /// snapshot bound); the driver has already put the data's snapshot
    /// back.
    MigrationFailed,
}

/// Journal records. Each carries the generation of the command it acts on so
/// that S8 can be checked on the journal alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AgentEvent {
    /// A new op was accepted (its generation with it) and staged.
    Accepted {
        op: OpId,
        generation: Generation,
        release: Digest,
    },
    /// The public route now forwards to the op's release.
    Switched { op: OpId, generation: Generation },
    /// The op was aborted; the route is left as it was.
    AbortAccepted { op: OpId, generation: Generation },
    /// An op this agent never received (it was offline when the op was
    /// granted) was aborted before it could be applied: nothing is fetched
    /// or staged, the route is left as it was, and the agent reports what
    /// serves so the controller can settle the op and free its slot.
    /// Appended last so older journal encodings still decode.
    AbortedUnseen {
        op: OpId,
        generation: Generation,
        release: Digest,
    },
    /// The public route forwards to the baseline again.
    Restored { op: OpId, generation: Generation },
    /// The bundle was refused; nothing was installed.
    Refused { op: OpId, reason: StageRefusal },
    /// A probe of the public route was recorded.
    Probed {
        op: OpId,
        observation: RouteObservation,
    },
    /// The agent restarted and observed what serves.
    Restarted { serving: Option<Digest> },
    /// The controller settled the op: nothing is outstanding any more.
    Closed { op: OpId },
    /// The fixed recovery table was read for `op`: what it read and the
    /// exit it took. `Retry` reserves one unit of attempt budget and starts
    /// an attempt (the `pending_stage` checkpoint); `Resume` takes the
    /// re-verified artifact as staged; `Stop` spends nothing and is
    /// followed by `Refused` (unless the op already waits for a person).
    /// Appended last, with the two below, so older journals still decode.
    Recovery {
        op: OpId,
        reading: Reading,
        exit: Exit,
    },
    /// The running attempt fetched, verified and staged the release: the
    /// commit request may go.
    Staged { op: OpId },
    /// The running attempt failed.
    StageFailed { op: OpId, failure: StageFailure },
    /// (a release of several chunks) The running attempt fetched `chunk`
    /// and verified its digest as it landed. Appended last, with the one
    /// below, so older journals still decode.
    ChunkVerified { op: OpId, chunk: u8 },
    /// (a release of several chunks) The table is about to be read: what
    /// re-verifying the op's chunks from disk found (the driver's reading)
    /// and the chunks the agent keeps (only those that re-verified; the
    /// others are fetched again). The `Recovery` that follows decides on
    /// them.
    ChunksKept {
        op: OpId,
        reading: ChunkReading,
        kept: ChunkSet,
    },
    /// (issue #24 item 2) The op's release declares a migration of this
    /// kind. Appended last, with the three below, so older journals still
    /// decode.
    MigrationDeclared { op: OpId, kind: MigrationKind },
    /// The Commit arrived and the migration is about to run: journaled
    /// (fsynced) before the data is touched, so that a crash while it runs
    /// is known after the restart (seed 002: stop, not retry). Carries the
    /// Commit's generation (S8).
    MigrationStarted { op: OpId, generation: Generation },
    /// The migration failed and the data's snapshot is back in place; the
    /// route was never switched.
    MigrationFailed { op: OpId },
    /// A roll back (`Restore`) arrived after an irreversible migration ran:
    /// nothing is restored, the op waits for a person.
    RollbackNeedsPerson { op: OpId, generation: Generation },
}

impl fmt::Display for AgentEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentEvent::Accepted {
                op,
                generation,
                release,
            } => write!(
                f,
                "accepts {op} ({release}, {generation}) and starts staging it"
            ),
            AgentEvent::Switched { op, .. } => write!(f, "switches the route for {op}"),
            AgentEvent::AbortAccepted { op, .. } => write!(f, "aborts {op}, route unchanged"),
            AgentEvent::AbortedUnseen { op, release, .. } => write!(
                f,
                "aborts {op} ({release}) before receiving it: nothing fetched, route unchanged"
            ),
            AgentEvent::Restored { op, .. } => write!(f, "restores the baseline for {op}"),
            AgentEvent::Refused { op, reason } => {
                write!(f, "refuses the bundle of {op}: {reason}")
            }
            AgentEvent::Probed { op, observation } => {
                write!(f, "probes the route for {op}: {observation}")
            }
            AgentEvent::Closed { op } => write!(f, "closes {op}: the controller settled it"),
            AgentEvent::Restarted { serving } => match serving {
                Some(r) => write!(f, "restarts and sees {r} serving"),
                None => write!(f, "restarts and sees nothing serving"),
            },
            AgentEvent::Recovery { op, reading, exit } => {
                write!(f, "recovery table for {op}: {reading} -> {exit}")
            }
            AgentEvent::Staged { op } => {
                write!(f, "staged and verified {op}; asks to commit")
            }
            AgentEvent::StageFailed { op, failure } => {
                write!(f, "staging {op} failed ({failure})")
            }
            AgentEvent::ChunkVerified { op, chunk } => {
                write!(f, "fetched chunk {chunk} of {op}; its digest matched")
            }
            AgentEvent::ChunksKept { op, reading, kept } => {
                write!(
                    f,
                    "re-verified the chunks of {op} ({reading}); keeps {kept}"
                )
            }
            AgentEvent::MigrationDeclared { op, kind } => {
                write!(f, "the release of {op} declares a {kind:?} migration")
            }
            AgentEvent::MigrationStarted { op, .. } => {
                write!(f, "snapshots the data and starts the migration of {op}")
            }
            AgentEvent::MigrationFailed { op } => write!(
                f,
                "the migration of {op} failed; the data's snapshot is back, route unchanged"
            ),
            AgentEvent::RollbackNeedsPerson { op, .. } => write!(
                f,
                "does not roll back {op}: its migration is irreversible, a person decides"
            ),
        }
    }
}

/// What the agent runtime must do once the step's events are journaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AgentEffect {
    Send(ToController),
    /// Probe the public route and feed the result back as `Probed`.
    ProbeRoute,
    /// Re-read the current op's staged artifact from disk (recompute its
    /// digest, re-run its check) and feed back `StageObserved`.
    ObserveStaged,
    /// Fetch, verify and stage the current op's release and feed back
    /// `Staged` or `StageFailed`.
    StageArtifact,
    /// (issue #24 item 2) Snapshot the app's data directory, then run the
    /// release's `migrate` command, and feed back `Migrated` or (with the
    /// snapshot put back) `MigrationFailed`. Asked once per op, right
    /// after [`AgentEvent::MigrationStarted`] is journaled, and never
    /// again: a retry or a reconnection does not re-run it.
    RunMigration,
}

impl AgentEffect {
    /// Whether a driver with no session to the controller carries this
    /// effect out, or drops it: the core decides, since it is the core
    /// that asks again (issue #22 item 2). Probing the route and staging
    /// run offline (a mirror may still serve chunks). Re-reading the
    /// recovery table does not: a retry it decided could not fetch from
    /// the controller yet would spend attempt budget, so the table stays
    /// unread and [`staging_effect`] asks again on `Connected`. A message
    /// has nothing to travel on; the core re-sends what is owed after
    /// `Connected` (the hello, the pending report).
    pub fn runs_offline(self) -> bool {
        match self {
            // A migration needs no controller: it was decided by the
            // stored Commit.
            AgentEffect::ProbeRoute | AgentEffect::StageArtifact | AgentEffect::RunMigration => {
                true
            }
            AgentEffect::ObserveStaged | AgentEffect::Send(_) => false,
        }
    }
}

/// The result of one agent step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentOutput {
    pub events: Vec<AgentEvent>,
    pub effects: Vec<AgentEffect>,
}

/// Decide what the agent does on `input`.
pub fn agent_step(state: &AgentState, input: AgentInput) -> AgentOutput {
    let mut out = AgentOutput::default();
    match input {
        AgentInput::Command(ToAgent::Settled { op, .. }) => {
            // The controller recorded this op's report: stop re-sending it.
            // Touches no route, so no generation fence is needed.
            if state
                .op
                .is_some_and(|o| o.id == op && matches!(o.stage, AgentStage::Reporting(..)))
            {
                out.events.push(AgentEvent::Closed { op });
            }
        }
        AgentInput::Command(cmd) => {
            // S8: a command older than the newest accepted intent is refused
            // and the refusal reported; it never touches the route.
            if cmd.generation() < state.accepted {
                out.effects.push(AgentEffect::Send(ToController::Rejected {
                    op: cmd.op(),
                    generation: cmd.generation(),
                    accepted: state.accepted,
                }));
                return out;
            }
            command(state, cmd, &mut out);
        }
        AgentInput::Probed(observation) => {
            if let Some(op) = state
                .op
                .filter(|o| matches!(o.stage, AgentStage::Probing(_)))
            {
                out.events.push(AgentEvent::Probed {
                    op: op.id,
                    observation,
                });
            }
        }
        AgentInput::StageObserved(_)
        | AgentInput::Staged
        | AgentInput::StageFailed(_)
        | AgentInput::ChunkFetched(_)
        | AgentInput::ChunksObserved(_) => {
            staging_answer(state, input, &mut out);
        }
        AgentInput::MigrationDeclared(kind) => declared(state, kind, &mut out),
        AgentInput::Migrated | AgentInput::MigrationFailed => {
            migration_answer(state, input, &mut out);
        }
        AgentInput::Restarted { serving } => restarted(state, serving, &mut out),
        AgentInput::Connected | AgentInput::Retry => {}
    }
    follow_up(state, input, &mut out);
    out
}

/// [`agent_step`]'s effects once its events are decided: what the state
/// the events lead to owes (the hello, a probe, staging, the migration,
/// the message to re-send).
fn follow_up(state: &AgentState, input: AgentInput, out: &mut AgentOutput) {
    let mut after = *state;
    for event in &out.events {
        agent_apply(&mut after, event);
    }
    if matches!(input, AgentInput::Connected | AgentInput::Restarted { .. }) {
        out.effects.push(AgentEffect::Send(ToController::Hello {
            serving: after.serving,
            generation: after.accepted,
        }));
    }
    // The outstanding work of the state we end in: a probe to run, or a
    // message to (re)send until newer work replaces it.
    let probing = matches!(
        after.op,
        Some(AgentOp {
            stage: AgentStage::Probing(_),
            ..
        })
    );
    let changed = !out.events.is_empty();
    if probing && (changed || matches!(input, AgentInput::Retry)) {
        out.effects.push(AgentEffect::ProbeRoute);
    }
    out.effects.extend(staging_effect(&after, changed, input));
    // The migration runs once, right after its start is journaled.
    if out
        .events
        .iter()
        .any(|e| matches!(e, AgentEvent::MigrationStarted { .. }))
    {
        out.effects.push(AgentEffect::RunMigration);
    }
    if changed || matches!(input, AgentInput::Retry | AgentInput::Connected) {
        out.effects.extend(outbox(&after).map(AgentEffect::Send));
    }
}

fn command(state: &AgentState, cmd: ToAgent, out: &mut AgentOutput) {
    let current = state.op.filter(|o| o.id == cmd.op());
    // Only an op newer than any this agent took on may start (see
    // `AgentState::highest_op`); older ones are late copies.
    let fresh = state.highest_op.is_none_or(|h| cmd.op() > h);
    match (cmd, current) {
        (
            ToAgent::Apply {
                op,
                generation,
                release,
            },
            None,
        ) if fresh => {
            out.events.push(AgentEvent::Accepted {
                op,
                generation,
                release,
            });
        }
        (
            ToAgent::CommitReply {
                op,
                generation,
                decision,
                ..
            },
            Some(AgentOp {
                stage: AgentStage::AwaitingDecision,
                migration,
                ..
            }),
        ) => out.events.push(match (decision, migration) {
            // The data changes before the route does: the migration
            // first, the switch once it succeeded.
            (Decision::Commit, Some(_)) => AgentEvent::MigrationStarted { op, generation },
            (Decision::Commit, None) => AgentEvent::Switched { op, generation },
            (Decision::Abort, _) => AgentEvent::AbortAccepted { op, generation },
        }),
        // An abort may overtake staging (the op was superseded before it
        // asked): nothing was switched, stop staging. A commit is only ever
        // decided on a commit request, which staging has not sent.
        (
            ToAgent::CommitReply {
                op,
                generation,
                decision: Decision::Abort,
                ..
            },
            Some(AgentOp {
                stage: AgentStage::Staging(_),
                ..
            }),
        ) => out
            .events
            .push(AgentEvent::AbortAccepted { op, generation }),
        // The controller aborted an op whose `Apply` never reached this
        // agent (superseded while the node was away). Nothing to fetch: say
        // what serves so the op settles. A commit is never decided for an
        // op the agent did not ask about, so only an abort can arrive here.
        (
            ToAgent::CommitReply {
                op,
                generation,
                release,
                decision: Decision::Abort,
            },
            None,
        ) if fresh => out.events.push(AgentEvent::AbortedUnseen {
            op,
            generation,
            release,
        }),
        (ToAgent::Restore { op, generation }, Some(current)) => {
            restore(&current, op, generation, out);
        }
        // Duplicates and commands for other ops change nothing.
        _ => {}
    }
}

/// The message the agent keeps (re)sending in its current state.
pub fn outbox(state: &AgentState) -> Option<ToController> {
    let op = state.op?;
    match op.stage {
        AgentStage::AwaitingDecision => Some(ToController::CommitRequest { op: op.id }),
        AgentStage::Reporting(kind, observation) => Some(ToController::Report {
            op: op.id,
            kind,
            observation,
        }),
        AgentStage::Probing(_) | AgentStage::Staging(_) | AgentStage::Migrating => None,
    }
}

/// Whether the agent's retry timer has work in `state`: a message to
/// re-send, or staging waiting to be tried again after a transient failure.
pub fn timer_due(state: &AgentState) -> bool {
    outbox(state).is_some()
        || state.op.is_some_and(|o| {
            matches!(
                o.stage,
                AgentStage::Staging(StagingStep::Observing {
                    last: Some(StageFailure::Transient { .. }),
                    ..
                })
            )
        })
}

/// Whether the driver's retry timer needs to wake in `state`: only while
/// an op is held. With none, [`AgentInput::Retry`] decides nothing (no
/// event, no effect: nothing to re-send, probe or stage), so an idle
/// agent's timer stays unarmed (its wake every second cost the fleet
/// simulator about 5% of a core per 10,000 idle agents on the slower
/// machine of `docs/performance.md`). Never narrower than [`timer_due`],
/// which is what the checker fires the timer on.
pub fn retry_wakes(state: &AgentState) -> bool {
    state.op.is_some()
}

/// The agent process started again: note what serves. An op the table
/// stopped waits for a person: a restart reads the table again and it
/// stops again, spending nothing.
fn restarted(state: &AgentState, serving: Option<Digest>, out: &mut AgentOutput) {
    out.events.push(AgentEvent::Restarted { serving });
    if let Some(op) = state.op.filter(|o| waits_for_person(o.stage)) {
        consult(&op, Position::WaitingForPerson, None, None, out);
    } else if let Some(op) = state.op.filter(|o| o.stage == AgentStage::Migrating) {
        // The journal says a migration started and nothing says how it
        // ended: its effect on the data cannot be observed (seed 002).
        consult(&op, Position::Migrating, None, Some(Observed::Unknown), out);
    }
}

/// The driver read the staged release's manifest: it declares a migration.
/// Only while staging (a later answer for an op that left staging changes
/// nothing) and only once per kind.
fn declared(state: &AgentState, kind: MigrationKind, out: &mut AgentOutput) {
    if let Some(op) = state
        .op
        .filter(|o| matches!(o.stage, AgentStage::Staging(_)) && o.migration != Some(kind))
    {
        out.events
            .push(AgentEvent::MigrationDeclared { op: op.id, kind });
    }
}

/// The driver's answer to [`AgentEffect::RunMigration`]: switch the route
/// on success; on failure the data is already back, the route never
/// moved, and the controller is told why.
fn migration_answer(state: &AgentState, input: AgentInput, out: &mut AgentOutput) {
    let Some(op) = state.op.filter(|o| o.stage == AgentStage::Migrating) else {
        return; // a late answer for an op that left the migration
    };
    out.events.push(match input {
        AgentInput::Migrated => AgentEvent::Switched {
            op: op.id,
            generation: op.generation,
        },
        _ => AgentEvent::MigrationFailed { op: op.id },
    });
}

/// The driver's answer to a staging effect: the table's decision on an
/// observation, or the outcome of the running attempt.
fn staging_answer(state: &AgentState, input: AgentInput, out: &mut AgentOutput) {
    let Some(op) = state.op else {
        return;
    };
    match (input, op.stage) {
        (
            AgentInput::StageObserved(observed),
            AgentStage::Staging(StagingStep::Observing { position, last }),
        ) => consult(&op, position, last, Some(observed), out),
        (
            AgentInput::ChunksObserved(reading),
            AgentStage::Staging(StagingStep::Observing { position, last }),
        ) => {
            // Keep only what re-verified; the rest is fetched again.
            let kept = reading
                .verified
                .intersect(ChunkSet::all(state.chunk_count()));
            out.events.push(AgentEvent::ChunksKept {
                op: op.id,
                reading,
                kept,
            });
            let observed = recovery::observed_chunks(state.chunk_count(), kept, reading.tree);
            consult(&op, position, last, Some(observed), out);
        }
        // A chunk of this release, not already verified: a duplicate
        // report changes nothing.
        (AgentInput::ChunkFetched(chunk), AgentStage::Staging(StagingStep::Running))
            if chunk < state.chunk_count() && !op.verified.has(chunk) =>
        {
            out.events
                .push(AgentEvent::ChunkVerified { op: op.id, chunk });
        }
        (AgentInput::Staged, AgentStage::Staging(StagingStep::Running)) => {
            out.events.push(staged(state, &op));
        }
        (AgentInput::StageFailed(failure), AgentStage::Staging(StagingStep::Running)) => {
            out.events
                .push(AgentEvent::StageFailed { op: op.id, failure });
        }
        // A late answer for a step the op has left changes nothing.
        _ => {}
    }
}

/// The record of a `Staged` answer: staged, unless the release is
/// chunked and a chunk was never reported verified, which is no evidence
/// that it was (the table then stops on missing evidence). A one-chunk
/// release is verified whole by the attempt that stages it.
fn staged(state: &AgentState, op: &AgentOp) -> AgentEvent {
    let every_chunk = ChunkSet::all(state.chunk_count()).is_subset(op.verified);
    if state.chunked() && !every_chunk {
        AgentEvent::StageFailed {
            op: op.id,
            failure: StageFailure::MissingEvidence,
        }
    } else {
        AgentEvent::Staged { op: op.id }
    }
}

/// An op the table stopped: it reports its refusal until a person decides.
fn waits_for_person(stage: AgentStage) -> bool {
    matches!(
        stage,
        AgentStage::Probing(ReportKind::Refused(_))
            | AgentStage::Reporting(ReportKind::Refused(_), _)
    )
}

/// Read the fixed table for `op` and journal the exit: on a stop, also the
/// refusal the controller is told (none when the op already waits for a
/// person: it was told when the op first stopped).
fn consult(
    op: &AgentOp,
    position: Position,
    last: Option<StageFailure>,
    observed: Option<Observed>,
    out: &mut AgentOutput,
) {
    // Nothing failed yet, or a crash cut the attempt short: transient.
    let error = last.map_or(Some(ErrorClass::Transient), StageFailure::class);
    let reading = Reading {
        position,
        error,
        observed,
        budget_left: op.budget_left,
    };
    let row = reading.row();
    out.events.push(AgentEvent::Recovery {
        op: op.id,
        reading,
        exit: row.exit(),
    });
    if let Some(reason) = recovery::refusal(row, last) {
        out.events.push(AgentEvent::Refused { op: op.id, reason });
    }
}

/// The staging work outstanding in `after`: an observation for the table,
/// or the attempt to run. After a transient failure the table waits for the
/// retry timer (no tight loop); otherwise it reads the disk at once. Both
/// are asked again on (re)connection: a driver that cannot fetch (offline,
/// just restarted) leaves the table unread rather than reserve an attempt
/// it cannot run.
fn staging_effect(after: &AgentState, changed: bool, input: AgentInput) -> Option<AgentEffect> {
    let timer = matches!(input, AgentInput::Retry);
    let connected = matches!(input, AgentInput::Connected);
    // The release's declaration comes with the driver's answer, which
    // follows it: no reason to look or stage again.
    let declared = matches!(input, AgentInput::MigrationDeclared(_));
    match after.op?.stage {
        AgentStage::Staging(StagingStep::Observing { last, .. }) => {
            let waits = matches!(last, Some(StageFailure::Transient { .. }));
            ((changed && !waits && !declared) || timer || connected)
                .then_some(AgentEffect::ObserveStaged)
        }
        AgentStage::Staging(StagingStep::Running) => {
            // A chunk landing is progress of the running attempt, not a
            // reason to start one.
            let progress = matches!(input, AgentInput::ChunkFetched(_)) || declared;
            ((changed && !progress) || timer || connected).then_some(AgentEffect::StageArtifact)
        }
        _ => None,
    }
}

/// Take on a new op (it replaces any op held): its generation becomes
/// accepted, its id the highest taken on, and what serves now its baseline.
fn start_op(
    state: &mut AgentState,
    op: OpId,
    generation: Generation,
    release: Digest,
    stage: AgentStage,
) {
    state.accepted = state.accepted.max(generation);
    state.highest_op = state.highest_op.max(Some(op));
    state.op = Some(AgentOp {
        id: op,
        generation,
        release,
        baseline: state.serving,
        stage,
        budget_left: ATTEMPT_BUDGET,
        verified: ChunkSet::NONE,
        migration: None,
    });
}

/// Fold one journal record into the agent state.
pub fn agent_apply(state: &mut AgentState, event: &AgentEvent) {
    fold(state, event);
    // The verified chunks are staging's record: outside staging there is
    // none (the commit request goes only once every chunk verified).
    if let Some(o) = state.op.as_mut() {
        if !matches!(o.stage, AgentStage::Staging(_)) {
            o.verified = ChunkSet::NONE;
        }
    }
}

fn fold(state: &mut AgentState, event: &AgentEvent) {
    match *event {
        AgentEvent::Accepted {
            op,
            generation,
            release,
        } => start_op(
            state,
            op,
            generation,
            release,
            AgentStage::Staging(StagingStep::Observing {
                position: Position::BeforeStage,
                last: None,
            }),
        ),
        AgentEvent::Switched { op, generation } => fold_switched(state, op, generation),
        AgentEvent::AbortAccepted { op, generation } => fold_abort_accepted(state, op, generation),
        AgentEvent::AbortedUnseen {
            op,
            generation,
            release,
        } => start_op(
            state,
            op,
            generation,
            release,
            AgentStage::Probing(ReportKind::NotApplied),
        ),
        AgentEvent::Restored { op, generation } => fold_restored(state, op, generation),
        AgentEvent::Refused { op, reason } => {
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                // The route was never touched: probe it as it is and report,
                // saying why.
                o.stage = AgentStage::Probing(ReportKind::Refused(reason));
            }
        }
        AgentEvent::Probed { op, observation } => fold_probed(state, op, observation),
        AgentEvent::Closed { op } => {
            if state.op.is_some_and(|o| o.id == op) {
                state.op = None;
            }
        }
        AgentEvent::Restarted { serving } => fold_restarted(state, serving),
        AgentEvent::Recovery { op, exit, .. } => recovered(state, op, exit),
        AgentEvent::Staged { op } => {
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                o.stage = AgentStage::AwaitingDecision;
            }
        }
        AgentEvent::StageFailed { op, failure } => stage_failed(state, op, failure),
        AgentEvent::ChunkVerified { op, chunk } => {
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                o.verified = o.verified.with(chunk);
            }
        }
        AgentEvent::ChunksKept { op, kept, .. } => {
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                o.verified = kept;
            }
        }
        AgentEvent::MigrationDeclared { .. }
        | AgentEvent::MigrationStarted { .. }
        | AgentEvent::MigrationFailed { .. }
        | AgentEvent::RollbackNeedsPerson { .. } => fold_migration(state, event),
    }
}

/// `fold` for the migration's records (issue #24 item 2).
fn fold_migration(state: &mut AgentState, event: &AgentEvent) {
    let (op, stage) = match *event {
        AgentEvent::MigrationDeclared { op, kind } => {
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                o.migration = Some(kind);
            }
            return;
        }
        AgentEvent::MigrationStarted { op, generation } => {
            state.accepted = state.accepted.max(generation);
            (op, AgentStage::Migrating)
        }
        AgentEvent::MigrationFailed { op } => (
            op,
            AgentStage::Probing(ReportKind::Refused(StageRefusal::MigrationFailed)),
        ),
        AgentEvent::RollbackNeedsPerson { op, generation } => {
            state.accepted = state.accepted.max(generation);
            (
                op,
                AgentStage::Probing(ReportKind::Refused(StageRefusal::MigrationIrreversible)),
            )
        }
        _ => return,
    };
    if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
        o.stage = stage;
    }
}

/// `fold` for `Switched`.
fn fold_switched(state: &mut AgentState, op: OpId, generation: Generation) {
    state.accepted = state.accepted.max(generation);
    if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
        o.stage = AgentStage::Probing(ReportKind::Switched);
        state.serving = Some(o.release);
    }
}

/// `fold` for `AbortAccepted`.
fn fold_abort_accepted(state: &mut AgentState, op: OpId, generation: Generation) {
    state.accepted = state.accepted.max(generation);
    if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
        o.stage = AgentStage::Probing(ReportKind::NotApplied);
    }
}

/// `fold` for `Restored`.
fn fold_restored(state: &mut AgentState, op: OpId, generation: Generation) {
    state.accepted = state.accepted.max(generation);
    if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
        o.stage = AgentStage::Probing(ReportKind::Restored);
        state.serving = o.baseline;
    }
}

/// `fold` for `Probed`.
fn fold_probed(state: &mut AgentState, op: OpId, observation: RouteObservation) {
    if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
        if let AgentStage::Probing(kind) = o.stage {
            o.stage = AgentStage::Reporting(kind, observation);
        }
    }
}

/// `fold` for `Restarted`.
fn fold_restarted(state: &mut AgentState, serving: Option<Digest>) {
    state.serving = serving;
    // What serves may have changed while the agent was down: any
    // earlier probe is stale, so probe again before reporting. A
    // staged artifact is never trusted across a crash: the table
    // decides again on a fresh look at the disk.
    if let Some(o) = state.op.as_mut() {
        o.verified = ChunkSet::NONE;
        o.stage = match o.stage {
            AgentStage::Reporting(kind, _) => AgentStage::Probing(kind),
            AgentStage::Staging(StagingStep::Running) => observing(Position::BeforeStage),
            AgentStage::AwaitingDecision => observing(Position::AfterArtifactCommitted),
            other => other,
        };
    }
}

/// `fold` for `Recovery`.
fn recovered(state: &mut AgentState, op: OpId, exit: Exit) {
    if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
        match exit {
            Exit::Retry => {
                o.budget_left = o.budget_left.saturating_sub(1);
                o.stage = AgentStage::Staging(StagingStep::Running);
            }
            Exit::Resume => o.stage = AgentStage::AwaitingDecision,
            // The `Refused` that follows moves the op on.
            Exit::Stop => {}
        }
    }
}

/// `fold` for `StageFailed`.
fn stage_failed(state: &mut AgentState, op: OpId, failure: StageFailure) {
    if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
        o.stage = AgentStage::Staging(StagingStep::Observing {
            position: Position::BeforeStage,
            last: Some(failure),
        });
    }
}

/// `command` for `Restore` of the op in hand.
fn restore(current: &AgentOp, op: OpId, generation: Generation, out: &mut AgentOutput) {
    // Restore only what this op changed; re-restoring after a failed
    // restore probe is a legitimate retry. A restore that arrives
    // while the agent still waits for the decision (an operator
    // rolled back an op whose commit reply never arrived) finds
    // nothing switched: the route still serves the baseline, and
    // `Restored` leaves the op there, probes and reports, so the
    // stored Commit, if it arrives later, finds no op waiting for it.
    let restorable = matches!(
        current.stage,
        AgentStage::AwaitingDecision
            | AgentStage::Staging(_)
            | AgentStage::Probing(ReportKind::Switched)
            | AgentStage::Reporting(ReportKind::Switched, _)
            | AgentStage::Reporting(ReportKind::Restored, _)
    ) || migration_stopped(current.stage);
    if !restorable {
        return;
    }
    // (issue #24 item 2) After an irreversible migration ran (or may have
    // run), putting the old data back is a person's decision.
    if current.migration == Some(MigrationKind::Irreversible)
        && migration_may_have_run(current.stage)
    {
        out.events
            .push(AgentEvent::RollbackNeedsPerson { op, generation });
    } else {
        out.events.push(AgentEvent::Restored { op, generation });
    }
}

/// An op stopped by its migration (failed, or interrupted by a crash): a
/// roll back puts the data's snapshot back with the code.
fn migration_stopped(stage: AgentStage) -> bool {
    matches!(
        stage,
        AgentStage::Probing(ReportKind::Refused(
            StageRefusal::MigrationFailed | StageRefusal::MigrationInterrupted
        )) | AgentStage::Reporting(
            ReportKind::Refused(StageRefusal::MigrationFailed | StageRefusal::MigrationInterrupted),
            _
        )
    )
}

/// Whether the op's migration ran to its end or may have (switched after
/// it, or interrupted by a crash). A failed one had its snapshot put back
/// already; one that never started changed nothing; a restore already
/// done (re-restoring after a failed restore probe) is one a person or a
/// reversible migration allowed.
fn migration_may_have_run(stage: AgentStage) -> bool {
    matches!(
        stage,
        AgentStage::Probing(ReportKind::Switched)
            | AgentStage::Reporting(ReportKind::Switched, _)
            | AgentStage::Probing(ReportKind::Refused(StageRefusal::MigrationInterrupted))
            | AgentStage::Reporting(ReportKind::Refused(StageRefusal::MigrationInterrupted), _)
    )
}

/// Staging waiting for the table, nothing failed (a crash is transient).
fn observing(position: Position) -> AgentStage {
    AgentStage::Staging(StagingStep::Observing {
        position,
        last: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::Row;

    const OP: OpId = OpId(0);
    const V1: Digest = Digest::repeat(1);
    const V2: Digest = Digest::repeat(2);

    /// Feed `input`, fold the events, return the effects.
    fn feed(state: &mut AgentState, input: AgentInput) -> AgentOutput {
        let out = agent_step(state, input);
        for event in &out.events {
            agent_apply(state, event);
        }
        out
    }

    fn accepted() -> AgentState {
        let mut state = AgentState {
            serving: Some(V1),
            ..AgentState::default()
        };
        let out = feed(
            &mut state,
            AgentInput::Command(ToAgent::Apply {
                op: OP,
                generation: Generation(1),
                release: V2,
            }),
        );
        assert_eq!(out.effects, vec![AgentEffect::ObserveStaged]);
        state
    }

    /// Housekeeping keeps what serves, the op's release and its
    /// baseline: an accepted op keeps V1 (serving and baseline) and V2.
    #[test]
    fn releases_in_use_are_serving_the_op_release_and_its_baseline() {
        let idle = AgentState {
            serving: Some(V1),
            ..AgentState::default()
        };
        assert_eq!(idle.releases_in_use().collect::<Vec<_>>(), vec![V1]);
        let mut state = accepted();
        assert_eq!(
            state.releases_in_use().collect::<Vec<_>>(),
            vec![V1, V2, V1]
        );
        // The route moved to V2 mid-op: the baseline V1 is still needed
        // for a restore.
        state.serving = Some(V2);
        let in_use: std::collections::BTreeSet<_> = state.releases_in_use().collect();
        assert_eq!(in_use, [V1, V2].into());
        assert!(AgentState::default().releases_in_use().next().is_none());
    }

    fn rows(out: &AgentOutput) -> Vec<Row> {
        out.events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Recovery { reading, .. } => Some(reading.row()),
                _ => None,
            })
            .collect()
    }

    fn commit_request(out: &AgentOutput) -> bool {
        out.effects
            .contains(&AgentEffect::Send(ToController::CommitRequest { op: OP }))
    }

    #[test]
    fn the_commit_request_goes_only_after_staged() {
        let mut state = accepted();
        let out = feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        assert_eq!(rows(&out), vec![Row::Absent]);
        assert_eq!(out.effects, vec![AgentEffect::StageArtifact]);
        assert_eq!(state.op.map(|o| o.budget_left), Some(ATTEMPT_BUDGET - 1));
        // Retries and reconnections while staging ask for no commit.
        for input in [AgentInput::Retry, AgentInput::Connected] {
            assert!(!commit_request(&feed(&mut state, input)));
        }
        let out = feed(&mut state, AgentInput::Staged);
        assert!(commit_request(&out), "{out:?}");
        assert_eq!(
            state.op.map(|o| o.stage),
            Some(AgentStage::AwaitingDecision)
        );
    }

    /// A running attempt whose answer was lost (the driver died with it,
    /// or the answer never came) is asked again by the retry timer and by a
    /// reconnection: without it the op would stage forever, which only a
    /// liveness check could see. A chunk landing starts no new attempt.
    #[test]
    fn a_retry_timer_while_staging_re_issues_the_stage() {
        let mut state = accepted();
        let out = feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        assert_eq!(out.effects, vec![AgentEffect::StageArtifact]);
        for input in [AgentInput::Retry, AgentInput::Connected] {
            let out = feed(&mut state, input);
            assert!(out.events.is_empty(), "{input:?}: {out:?}");
            assert!(
                out.effects.contains(&AgentEffect::StageArtifact),
                "{input:?}: {out:?}"
            );
            // Asking again spends no budget: only the table's retry does.
            assert_eq!(state.op.map(|o| o.budget_left), Some(ATTEMPT_BUDGET - 1));
        }
        // Observing with nothing failed: the timer asks for the disk again.
        let mut state = accepted();
        let out = feed(&mut state, AgentInput::Retry);
        assert_eq!(out.effects, vec![AgentEffect::ObserveStaged]);
    }

    /// An abort may overtake staging (the op was superseded before the
    /// agent asked to commit): the agent stops staging, changes nothing on
    /// the route and reports the op not applied; no timer stages it again.
    #[test]
    fn an_abort_that_overtakes_staging_stops_it() {
        let abort = AgentInput::Command(ToAgent::CommitReply {
            op: OP,
            generation: Generation(1),
            release: V2,
            decision: Decision::Abort,
        });
        for running in [false, true] {
            let mut state = accepted();
            if running {
                feed(&mut state, AgentInput::StageObserved(Observed::Absent));
            }
            let out = feed(&mut state, abort);
            assert_eq!(
                out.events,
                vec![AgentEvent::AbortAccepted {
                    op: OP,
                    generation: Generation(1)
                }],
                "running {running}"
            );
            assert_eq!(
                state.op.map(|o| o.stage),
                Some(AgentStage::Probing(ReportKind::NotApplied))
            );
            assert_eq!(state.serving, Some(V1), "route unchanged");
            for input in [AgentInput::Retry, AgentInput::Connected, AgentInput::Staged] {
                let out = feed(&mut state, input);
                assert!(
                    !out.effects.iter().any(|e| matches!(
                        e,
                        AgentEffect::StageArtifact | AgentEffect::ObserveStaged
                    )),
                    "running {running}, {input:?}: {out:?}"
                );
                assert!(!commit_request(&out), "{input:?}: {out:?}");
            }
        }
    }

    #[test]
    fn a_restart_mid_staging_resumes_only_on_a_reverified_artifact() {
        for (observed, row, stage) in [
            (
                Observed::ReVerified,
                Row::ReVerified,
                AgentStage::AwaitingDecision,
            ),
            (
                Observed::Absent,
                Row::Absent,
                AgentStage::Staging(StagingStep::Running),
            ),
            (
                Observed::Unknown,
                Row::EffectUnknown,
                AgentStage::Probing(ReportKind::Refused(StageRefusal::EffectUnknown)),
            ),
        ] {
            let mut state = accepted();
            feed(&mut state, AgentInput::StageObserved(Observed::Absent));
            let out = feed(&mut state, AgentInput::Restarted { serving: Some(V1) });
            assert!(out.effects.contains(&AgentEffect::ObserveStaged));
            assert!(!commit_request(&out));
            let out = feed(&mut state, AgentInput::StageObserved(observed));
            assert_eq!(rows(&out), vec![row]);
            let op = state.op.expect("op");
            assert_eq!(op.stage, stage, "{observed:?}");
            // Only the retry spends a unit: the first attempt spent one.
            let spent = if row == Row::Absent { 2 } else { 1 };
            assert_eq!(op.budget_left, ATTEMPT_BUDGET - spent, "{observed:?}");
        }
    }

    #[test]
    fn a_restart_after_staging_re_verifies_before_asking_again() {
        let mut state = accepted();
        feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        feed(&mut state, AgentInput::Staged);
        let out = feed(&mut state, AgentInput::Restarted { serving: Some(V1) });
        assert!(!commit_request(&out), "{out:?}");
        // A driver that left the table unread (offline: the core says it
        // does not run then) is asked again.
        assert!(!AgentEffect::ObserveStaged.runs_offline());
        let out = feed(&mut state, AgentInput::Connected);
        assert!(out.effects.contains(&AgentEffect::ObserveStaged), "{out:?}");
        let out = feed(&mut state, AgentInput::StageObserved(Observed::ReVerified));
        assert!(commit_request(&out));
        let reading = match out.events[0] {
            AgentEvent::Recovery { reading, .. } => reading,
            other => panic!("{other:?}"),
        };
        assert_eq!(reading.position, Position::AfterArtifactCommitted);
    }

    #[test]
    fn a_permanent_error_stops_at_once_and_spends_nothing() {
        let mut state = accepted();
        feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        let out = feed(&mut state, AgentInput::StageFailed(StageFailure::Permanent));
        // The table reads the disk at once after a permanent failure.
        assert_eq!(out.effects, vec![AgentEffect::ObserveStaged]);
        let out = feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        assert_eq!(rows(&out), vec![Row::Permanent]);
        let op = state.op.expect("op");
        assert_eq!(op.budget_left, ATTEMPT_BUDGET - 1);
        assert_eq!(
            op.stage,
            AgentStage::Probing(ReportKind::Refused(StageRefusal::BundleRejected))
        );
        // Restarted, the stopped op waits for a person: stop again, free.
        let out = feed(&mut state, AgentInput::Restarted { serving: Some(V1) });
        assert_eq!(rows(&out), vec![Row::WaitingForPerson]);
        assert_eq!(state.op.map(|o| o.budget_left), Some(ATTEMPT_BUDGET - 1));
    }

    /// Every input a walk may feed: two ops, both decisions, probes that
    /// pass and fail, staging answers of every kind, restarts, the timer.
    fn walk_inputs() -> Vec<AgentInput> {
        let op1 = OpId(1);
        let mut inputs = vec![
            AgentInput::Connected,
            AgentInput::Retry,
            AgentInput::Staged,
            AgentInput::Migrated,
            AgentInput::MigrationFailed,
            AgentInput::ChunkFetched(0),
            AgentInput::MigrationDeclared(MigrationKind::Reversible),
            AgentInput::Restarted { serving: Some(V1) },
            AgentInput::Probed(RouteObservation::passing(V2)),
            AgentInput::Probed(RouteObservation::new(
                crate::evidence::ProbeVerdict::Unreachable,
                None,
                false,
            )),
        ];
        for observed in [Observed::Absent, Observed::ReVerified, Observed::Unknown] {
            inputs.push(AgentInput::StageObserved(observed));
        }
        for failure in [
            StageFailure::Transient {
                bundle_missing: false,
            },
            StageFailure::Permanent,
            StageFailure::MissingEvidence,
        ] {
            inputs.push(AgentInput::StageFailed(failure));
        }
        for (op, generation) in [(OP, Generation(1)), (op1, Generation(2))] {
            inputs.push(AgentInput::Command(ToAgent::Apply {
                op,
                generation,
                release: V2,
            }));
            for decision in [Decision::Commit, Decision::Abort] {
                inputs.push(AgentInput::Command(ToAgent::CommitReply {
                    op,
                    generation,
                    release: V2,
                    decision,
                }));
            }
            inputs.push(AgentInput::Command(ToAgent::Restore { op, generation }));
            inputs.push(AgentInput::Command(ToAgent::Settled { op, generation }));
        }
        inputs
    }

    /// An agent without an op leaves its retry timer unarmed: before it
    /// took one on, and once the controller settled it.
    #[test]
    fn an_idle_agent_s_retry_timer_sleeps() {
        assert!(!retry_wakes(&AgentState::default()));
        let mut state = accepted();
        assert!(retry_wakes(&state), "an op is held");
        // Reported (a settle closes only a reported op).
        if let Some(op) = state.op.as_mut() {
            op.stage = AgentStage::Reporting(ReportKind::NotApplied, RouteObservation::passing(V1));
        }
        assert!(retry_wakes(&state), "a report to re-send");
        feed(
            &mut state,
            AgentInput::Command(ToAgent::Settled {
                op: OP,
                generation: Generation(1),
            }),
        );
        assert_eq!(state.op, None, "settled and closed");
        assert!(!retry_wakes(&state), "{state:?}");
    }

    proptest::proptest! {
        /// On every state a walk reaches: where [`retry_wakes`] is false the
        /// timer would decide nothing, so the driver may leave it unarmed,
        /// and it is never false where [`timer_due`] (the checker's timer)
        /// is true.
        #[test]
        fn the_retry_timer_sleeps_only_where_a_retry_decides_nothing(
            walk in proptest::collection::vec(proptest::sample::select(walk_inputs()), 0..40)
        ) {
            let mut state = AgentState { serving: Some(V1), ..AgentState::default() };
            for input in walk {
                proptest::prop_assert!(!timer_due(&state) || retry_wakes(&state), "{state:?}");
                if !retry_wakes(&state) {
                    let out = agent_step(&state, AgentInput::Retry);
                    proptest::prop_assert!(
                        out.events.is_empty() && out.effects.is_empty(),
                        "a retry in {state:?} decided {out:?}"
                    );
                }
                feed(&mut state, input);
            }
        }
    }

    #[test]
    fn transient_failures_retry_on_the_timer_until_the_budget_is_spent() {
        let mut state = accepted();
        let missing = StageFailure::Transient {
            bundle_missing: true,
        };
        feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        for left in (0..ATTEMPT_BUDGET).rev() {
            let out = feed(&mut state, AgentInput::StageFailed(missing));
            assert!(out.effects.is_empty(), "waits for the timer: {out:?}");
            assert!(timer_due(&state));
            let out = feed(&mut state, AgentInput::Retry);
            assert_eq!(out.effects, vec![AgentEffect::ObserveStaged]);
            let out = feed(&mut state, AgentInput::StageObserved(Observed::Absent));
            let expected = if left == 0 {
                Row::BudgetSpent
            } else {
                Row::Absent
            };
            assert_eq!(rows(&out), vec![expected]);
            assert_eq!(
                state.op.map(|o| o.budget_left),
                Some(left.saturating_sub(1))
            );
        }
        assert_eq!(
            state.op.map(|o| o.stage),
            Some(AgentStage::Probing(ReportKind::Refused(
                StageRefusal::BundleUnavailable
            )))
        );
    }

    /// Three chunks, the first reading done (nothing on disk): an attempt
    /// runs.
    fn chunked_running() -> AgentState {
        let mut state = AgentState {
            release_chunks: 3,
            ..accepted()
        };
        let nothing = ChunkReading {
            verified: ChunkSet::NONE,
            unverified: ChunkSet::NONE,
            tree: Observed::Absent,
        };
        let out = feed(&mut state, AgentInput::ChunksObserved(nothing));
        assert_eq!(rows(&out), vec![Row::Absent]);
        assert_eq!(out.effects, vec![AgentEffect::StageArtifact]);
        state
    }

    fn verified(state: &AgentState) -> ChunkSet {
        state.op.map_or(ChunkSet::NONE, |o| o.verified)
    }

    #[test]
    fn a_chunked_fetch_asks_to_commit_only_once_every_chunk_verified() {
        let mut state = chunked_running();
        for chunk in 0..3 {
            let out = feed(&mut state, AgentInput::ChunkFetched(chunk));
            // Progress of the running attempt: no new attempt, no request.
            assert!(out.effects.is_empty(), "{out:?}");
            // A duplicate report changes nothing.
            assert!(feed(&mut state, AgentInput::ChunkFetched(chunk))
                .events
                .is_empty());
        }
        assert_eq!(verified(&state), ChunkSet::all(3));
        // A chunk the release does not have is no progress.
        assert!(feed(&mut state, AgentInput::ChunkFetched(3))
            .events
            .is_empty());
        let out = feed(&mut state, AgentInput::Staged);
        assert!(commit_request(&out), "{out:?}");
        // Outside staging the op holds no chunk record.
        assert_eq!(verified(&state), ChunkSet::NONE);
    }

    #[test]
    fn a_restart_mid_fetch_resumes_from_the_chunks_that_re_verify() {
        let mut state = chunked_running();
        feed(&mut state, AgentInput::ChunkFetched(0));
        feed(&mut state, AgentInput::ChunkFetched(1));
        let out = feed(&mut state, AgentInput::Restarted { serving: Some(V1) });
        assert!(out.effects.contains(&AgentEffect::ObserveStaged));
        // The journal's list is not trusted across the crash.
        assert_eq!(verified(&state), ChunkSet::NONE);
        // Chunk 0 re-verifies; chunk 1 is torn on disk; chunk 2 absent.
        let reading = ChunkReading {
            verified: ChunkSet::NONE.with(0),
            unverified: ChunkSet::NONE.with(1),
            tree: Observed::Absent,
        };
        let out = feed(&mut state, AgentInput::ChunksObserved(reading));
        assert_eq!(
            out.events[0],
            AgentEvent::ChunksKept {
                op: OP,
                reading,
                kept: ChunkSet::NONE.with(0),
            }
        );
        assert_eq!(rows(&out), vec![Row::PartlyVerified]);
        assert_eq!(out.effects, vec![AgentEffect::StageArtifact]);
        let op = state.op.expect("op");
        assert_eq!(op.stage, AgentStage::Staging(StagingStep::Running));
        assert_eq!(op.verified, ChunkSet::NONE.with(0));
        // A resumed fetch is an attempt: the first one spent a unit too.
        assert_eq!(op.budget_left, ATTEMPT_BUDGET - 2);
        // Staged with chunks never reported verified is no evidence.
        let out = feed(&mut state, AgentInput::Staged);
        assert!(!commit_request(&out));
        assert_eq!(
            out.events,
            vec![AgentEvent::StageFailed {
                op: OP,
                failure: StageFailure::MissingEvidence
            }]
        );
    }

    #[test]
    fn a_chunked_fetch_whose_tree_is_there_but_bad_stops() {
        let mut state = chunked_running();
        feed(&mut state, AgentInput::Restarted { serving: Some(V1) });
        let reading = ChunkReading {
            verified: ChunkSet::all(3),
            unverified: ChunkSet::NONE,
            tree: Observed::Unknown,
        };
        let out = feed(&mut state, AgentInput::ChunksObserved(reading));
        assert_eq!(rows(&out), vec![Row::EffectUnknown]);
        // Every chunk and the tree re-verified: resume to the request.
        let mut state = chunked_running();
        feed(&mut state, AgentInput::Restarted { serving: Some(V1) });
        let whole = ChunkReading {
            tree: Observed::ReVerified,
            ..reading
        };
        let out = feed(&mut state, AgentInput::ChunksObserved(whole));
        assert_eq!(rows(&out), vec![Row::ReVerified]);
        assert!(commit_request(&out));
    }

    #[test]
    fn a_failure_of_unknown_class_is_missing_evidence() {
        let mut state = accepted();
        feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        feed(
            &mut state,
            AgentInput::StageFailed(StageFailure::MissingEvidence),
        );
        let out = feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        assert_eq!(rows(&out), vec![Row::MissingEvidence]);
    }
    fn commit() -> AgentInput {
        AgentInput::Command(ToAgent::CommitReply {
            op: OP,
            generation: Generation(1),
            release: V2,
            decision: Decision::Commit,
        })
    }

    /// Staged, with a migration of `kind` declared, awaiting the decision.
    fn staged_with(kind: MigrationKind) -> AgentState {
        let mut state = accepted();
        feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        let out = feed(&mut state, AgentInput::MigrationDeclared(kind));
        assert_eq!(
            out.events,
            vec![AgentEvent::MigrationDeclared { op: OP, kind }]
        );
        // The declaration is no new attempt.
        assert!(
            !out.effects.contains(&AgentEffect::StageArtifact),
            "{out:?}"
        );
        let out = feed(&mut state, AgentInput::Staged);
        assert!(commit_request(&out));
        state
    }

    /// Staged with a migration, the Commit delivered: the migration runs.
    fn migrating(kind: MigrationKind) -> AgentState {
        let mut state = staged_with(kind);
        let out = feed(&mut state, commit());
        assert_eq!(
            out.events,
            vec![AgentEvent::MigrationStarted {
                op: OP,
                generation: Generation(1)
            }]
        );
        assert_eq!(out.effects, vec![AgentEffect::RunMigration]);
        assert_eq!(state.op.map(|o| o.stage), Some(AgentStage::Migrating));
        assert_eq!(state.serving, Some(V1), "the route waits for the migration");
        state
    }

    /// The start is journaled before the command runs (the effect follows
    /// the event), asked once, and never again: not by the retry timer, a
    /// reconnection or a duplicated Commit.
    #[test]
    fn a_migration_runs_once_after_its_start_is_journaled() {
        let mut state = migrating(MigrationKind::Reversible);
        for input in [AgentInput::Retry, AgentInput::Connected, commit()] {
            let out = feed(&mut state, input);
            assert!(out.events.is_empty(), "{input:?}: {out:?}");
            assert!(
                !out.effects.contains(&AgentEffect::RunMigration),
                "{input:?}"
            );
        }
        assert!(AgentEffect::RunMigration.runs_offline());
        let out = feed(&mut state, AgentInput::Migrated);
        assert_eq!(
            out.events,
            vec![AgentEvent::Switched {
                op: OP,
                generation: Generation(1)
            }]
        );
        assert!(out.effects.contains(&AgentEffect::ProbeRoute));
        assert_eq!(state.serving, Some(V2));
        // A late second answer changes nothing.
        assert!(feed(&mut state, AgentInput::MigrationFailed)
            .events
            .is_empty());
    }

    /// Seed 002: a crash while the migration runs is an interrupted
    /// external effect of unknown outcome. The restart stops on the
    /// table's row for it, spends no budget, never runs the migration
    /// again, and tells the controller why; a second restart finds a
    /// person's wait.
    #[test]
    fn a_crash_during_a_migration_stops_and_never_runs_it_again() {
        let mut state = migrating(MigrationKind::Reversible);
        let budget = state.op.map(|o| o.budget_left);
        let out = feed(&mut state, AgentInput::Restarted { serving: Some(V1) });
        assert_eq!(rows(&out), vec![Row::MigrationInterrupted]);
        assert!(out.events.contains(&AgentEvent::Refused {
            op: OP,
            reason: StageRefusal::MigrationInterrupted
        }));
        assert!(!out.effects.contains(&AgentEffect::RunMigration), "{out:?}");
        assert_eq!(state.op.map(|o| o.budget_left), budget);
        assert_eq!(
            state.op.map(|o| o.stage),
            Some(AgentStage::Probing(ReportKind::Refused(
                StageRefusal::MigrationInterrupted
            )))
        );
        for input in [
            AgentInput::Retry,
            AgentInput::Connected,
            commit(),
            AgentInput::Restarted { serving: Some(V1) },
        ] {
            let out = feed(&mut state, input);
            assert!(
                !out.effects.contains(&AgentEffect::RunMigration),
                "{input:?}"
            );
            assert!(
                !rows(&out).contains(&Row::MigrationInterrupted),
                "{input:?}"
            );
        }
        // A person's roll back puts the data's snapshot back with the code.
        let restore = AgentInput::Command(ToAgent::Restore {
            op: OP,
            generation: Generation(1),
        });
        let out = feed(&mut state, restore);
        assert_eq!(
            out.events,
            vec![AgentEvent::Restored {
                op: OP,
                generation: Generation(1)
            }]
        );
    }

    /// A failed migration leaves the route alone and says why; the
    /// controller's restore is then carried out (the data is already back:
    /// the driver's restore is idempotent).
    #[test]
    fn a_failed_migration_is_refused_and_a_restore_follows() {
        let mut state = migrating(MigrationKind::Irreversible);
        let out = feed(&mut state, AgentInput::MigrationFailed);
        assert_eq!(out.events, vec![AgentEvent::MigrationFailed { op: OP }]);
        assert!(out.effects.contains(&AgentEffect::ProbeRoute));
        assert_eq!(state.serving, Some(V1));
        let restore = AgentInput::Command(ToAgent::Restore {
            op: OP,
            generation: Generation(1),
        });
        // Irreversible or not: a failed migration's data is already back.
        let out = feed(&mut state, restore);
        assert_eq!(
            out.events,
            vec![AgentEvent::Restored {
                op: OP,
                generation: Generation(1)
            }]
        );
    }

    /// After an irreversible migration, a roll back is not the agent's to
    /// do: the op waits for a person and says so; after a reversible one
    /// it is restored (code and data).
    #[test]
    fn a_rollback_after_an_irreversible_migration_waits_for_a_person() {
        let restore = AgentInput::Command(ToAgent::Restore {
            op: OP,
            generation: Generation(1),
        });
        let mut state = migrating(MigrationKind::Irreversible);
        feed(&mut state, AgentInput::Migrated);
        let out = feed(&mut state, restore);
        assert_eq!(
            out.events,
            vec![AgentEvent::RollbackNeedsPerson {
                op: OP,
                generation: Generation(1)
            }]
        );
        assert_eq!(state.serving, Some(V2), "nothing restored");
        assert_eq!(
            state.op.map(|o| o.stage),
            Some(AgentStage::Probing(ReportKind::Refused(
                StageRefusal::MigrationIrreversible
            )))
        );
        assert!(!ReportKind::Refused(StageRefusal::MigrationIrreversible).left_route_alone());
        // Asked again, still a person's: nothing more is journaled.
        assert!(feed(&mut state, restore).events.is_empty());
        let out = feed(&mut state, AgentInput::Restarted { serving: Some(V2) });
        assert_eq!(rows(&out), vec![Row::WaitingForPerson]);

        let mut state = migrating(MigrationKind::Reversible);
        feed(&mut state, AgentInput::Migrated);
        let out = feed(&mut state, restore);
        assert_eq!(
            out.events,
            vec![AgentEvent::Restored {
                op: OP,
                generation: Generation(1)
            }]
        );
        assert_eq!(state.serving, Some(V1));
    }

    /// The declaration comes just before the driver's answer: it asks
    /// for no second look at the disk and no new attempt, and a restart
    /// that resumes on the re-verified release keeps it (it is journaled).
    #[test]
    fn a_declaration_asks_for_nothing_and_survives_a_restart() {
        let mut state = accepted();
        let out = feed(
            &mut state,
            AgentInput::MigrationDeclared(MigrationKind::Reversible),
        );
        assert_eq!(out.events.len(), 1);
        assert!(out.effects.is_empty(), "{out:?}");
        // Declared again: nothing new.
        let again = feed(
            &mut state,
            AgentInput::MigrationDeclared(MigrationKind::Reversible),
        );
        assert!(again.events.is_empty() && again.effects.is_empty());
        let out = feed(&mut state, AgentInput::StageObserved(Observed::ReVerified));
        assert!(commit_request(&out));
        feed(&mut state, AgentInput::Restarted { serving: Some(V1) });
        feed(&mut state, AgentInput::StageObserved(Observed::ReVerified));
        assert_eq!(
            state.op.and_then(|o| o.migration),
            Some(MigrationKind::Reversible)
        );
        let out = feed(&mut state, commit());
        assert!(out.effects.contains(&AgentEffect::RunMigration), "{out:?}");
    }

    /// A release without a migration switches on its Commit as before; a
    /// declaration outside staging changes nothing.
    #[test]
    fn without_a_migration_the_commit_switches_at_once() {
        let mut state = accepted();
        feed(&mut state, AgentInput::StageObserved(Observed::Absent));
        feed(&mut state, AgentInput::Staged);
        assert!(feed(
            &mut state,
            AgentInput::MigrationDeclared(MigrationKind::Reversible)
        )
        .events
        .is_empty());
        let out = feed(&mut state, commit());
        assert_eq!(
            out.events,
            vec![AgentEvent::Switched {
                op: OP,
                generation: Generation(1)
            }]
        );
        assert!(!out.effects.contains(&AgentEffect::RunMigration));
    }
}
