//! The agent state machine at model granularity: accept (fetch, verify,
//! stage), request commit, switch or abort, probe, report; restore on demand.
//! Everything in [`AgentState`] is journaled: it survives a crash. The runtime
//! persists the events of a step before it performs the step's effects.

use crate::evidence::RouteObservation;
use crate::ids::{Digest, Generation, OpId};
use crate::msg::{Decision, ReportKind, StageRefusal, ToAgent, ToController};
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
}

/// The op the agent works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AgentOp {
    pub id: OpId,
    pub generation: Generation,
    pub release: Digest,
    /// What served before this op; put back by a restore.
    pub baseline: Option<Digest>,
    pub stage: AgentStage,
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
}

/// Inputs to the agent core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AgentInput {
    /// A command from the controller.
    Command(ToAgent),
    /// The public route was probed.
    Probed(RouteObservation),
    /// Verifying or staging the bundle of the current op failed permanently.
    StageRefused(StageRefusal),
    /// The connection to the controller (re)opened.
    Connected,
    /// The agent process started again; `serving` is what the route actually
    /// serves, reconstructed by looking, not by trusting the journal.
    Restarted { serving: Option<Digest> },
    /// The retry timer fired: re-send what is outstanding.
    Retry,
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
                "accepts {op} ({release}, {generation}), stages it and asks to commit"
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
        }
    }
}

/// What the agent runtime must do once the step's events are journaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AgentEffect {
    Send(ToController),
    /// Probe the public route and feed the result back as `Probed`.
    ProbeRoute,
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
        AgentInput::StageRefused(reason) => {
            if let Some(op) = state.op.filter(|o| o.stage == AgentStage::AwaitingDecision) {
                out.events.push(AgentEvent::Refused { op: op.id, reason });
            }
        }
        AgentInput::Restarted { serving } => {
            out.events.push(AgentEvent::Restarted { serving });
        }
        AgentInput::Connected | AgentInput::Retry => {}
    }
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
    if changed || matches!(input, AgentInput::Retry | AgentInput::Connected) {
        out.effects.extend(outbox(&after).map(AgentEffect::Send));
    }
    out
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
                ..
            }),
        ) => out.events.push(match decision {
            Decision::Commit => AgentEvent::Switched { op, generation },
            Decision::Abort => AgentEvent::AbortAccepted { op, generation },
        }),
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
                    | AgentStage::Probing(ReportKind::Switched)
                    | AgentStage::Reporting(ReportKind::Switched, _)
                    | AgentStage::Reporting(ReportKind::Restored, _)
            );
            if restorable {
                out.events.push(AgentEvent::Restored { op, generation });
            }
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
        AgentStage::Probing(_) => None,
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
    });
}

/// Fold one journal record into the agent state.
pub fn agent_apply(state: &mut AgentState, event: &AgentEvent) {
    match *event {
        AgentEvent::Accepted {
            op,
            generation,
            release,
        } => start_op(state, op, generation, release, AgentStage::AwaitingDecision),
        AgentEvent::Switched { op, generation } => {
            state.accepted = state.accepted.max(generation);
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                o.stage = AgentStage::Probing(ReportKind::Switched);
                state.serving = Some(o.release);
            }
        }
        AgentEvent::AbortAccepted { op, generation } => {
            state.accepted = state.accepted.max(generation);
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                o.stage = AgentStage::Probing(ReportKind::NotApplied);
            }
        }
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
        AgentEvent::Restored { op, generation } => {
            state.accepted = state.accepted.max(generation);
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                o.stage = AgentStage::Probing(ReportKind::Restored);
                state.serving = o.baseline;
            }
        }
        AgentEvent::Refused { op, reason } => {
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                // The route was never touched: probe it as it is and report,
                // saying why.
                o.stage = AgentStage::Probing(ReportKind::Refused(reason));
            }
        }
        AgentEvent::Probed { op, observation } => {
            if let Some(o) = state.op.as_mut().filter(|o| o.id == op) {
                if let AgentStage::Probing(kind) = o.stage {
                    o.stage = AgentStage::Reporting(kind, observation);
                }
            }
        }
        AgentEvent::Closed { op } => {
            if state.op.is_some_and(|o| o.id == op) {
                state.op = None;
            }
        }
        AgentEvent::Restarted { serving } => {
            state.serving = serving;
            // What serves may have changed while the agent was down: any
            // earlier probe is stale, so probe again before reporting.
            if let Some(o) = state.op.as_mut() {
                if let AgentStage::Reporting(kind, _) = o.stage {
                    o.stage = AgentStage::Probing(kind);
                }
            }
        }
    }
}
