//! The agent journal's record: what `fleetweft-agent` appends to its
//! journal and `fleetweft log verify|show --journal` decodes. Here, not in
//! the agent, so the operator's tools read a journal without linking the
//! agent. Records `Pending`, `Done`, `Failed` and `Stopped` were written by
//! agents before staging was a model state; they still decode and print.

use model::agent::AgentEvent;
use model::recovery::ErrorClass;
use model::{Digest, OpId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The journal's directory inside the agent's data directory.
pub const JOURNAL_DIR: &str = "journal";

/// A fine-grained stage of an op on the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    Fetch,
    Verify,
    Stage,
    Switch,
    Probe,
}

/// One journal record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// An event of the agent core (`model::agent`).
    Core(AgentEvent),
    /// `pending_stage`: written before a stage runs.
    Pending {
        op: OpId,
        stage: Stage,
        /// What the stage works on (the release digest): a resumed stage
        /// must see the same input or stop.
        fingerprint: Digest,
        /// A new attempt id after every restart within the same op.
        attempt_id: u32,
        /// Budget left after reserving this attempt.
        budget_left: u8,
    },
    /// The stage's artifact is committed.
    Done { op: OpId, stage: Stage },
    /// The fixed table said stop: the evidence is kept, never overwritten.
    Stopped {
        op: OpId,
        stage: Stage,
        /// What the controller is told (in the not-applied report).
        refusal: model::StageRefusal,
        /// The details, for the agent's own log and journal.
        reason: String,
    },
    /// The stage of the latest checkpoint ended with an error: the error
    /// class axis of the recovery table reads it (a checkpoint with no
    /// outcome was interrupted by a crash, which is transient).
    Failed {
        op: OpId,
        stage: Stage,
        class: ErrorClass,
        /// The controller answered that it has no bundle of this digest
        /// (the refusal says so if the budget runs out on it).
        bundle_missing: bool,
        reason: String,
    },
    /// The agent process started again with this op live: a restart is a
    /// new attempt of the same op, never a new op. Spends no budget.
    Resumed { op: OpId, attempt_id: u32 },
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Fetch => "fetch",
            Stage::Verify => "verify",
            Stage::Stage => "stage",
            Stage::Switch => "switch",
            Stage::Probe => "probe",
        })
    }
}

/// A record in domain words, as `fleetweft log show --journal` prints it.
impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Record::Core(event) => write!(f, "{event}"),
            Record::Pending {
                op,
                stage,
                fingerprint,
                attempt_id,
                budget_left,
            } => write!(
                f,
                "{op}: {stage} starts (attempt {attempt_id}, input {fingerprint}, \
                 budget left {budget_left})"
            ),
            Record::Done { op, stage } => write!(f, "{op}: {stage} done"),
            Record::Stopped {
                op,
                stage,
                refusal,
                reason,
            } => write!(f, "{op}: stopped for good at {stage}: {refusal} ({reason})"),
            Record::Failed {
                op,
                stage,
                class,
                bundle_missing,
                reason,
            } => {
                let class = match class {
                    ErrorClass::Transient => "transient",
                    ErrorClass::Permanent => "permanent",
                };
                write!(f, "{op}: {stage} failed ({class}")?;
                if *bundle_missing {
                    write!(f, ", the controller has no such bundle")?;
                }
                write!(f, "): {reason}")
            }
            Record::Resumed { op, attempt_id } => {
                write!(f, "{op}: resumed after a restart as attempt {attempt_id}")
            }
        }
    }
}
