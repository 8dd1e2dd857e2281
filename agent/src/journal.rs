//! The agent's journal: every core event and every stage checkpoint, in a
//! durable log (the same fsync-before-acknowledge log the controller uses).
//! The agent acts on a record only after `append` returned its `Durable`.

use eventlog::{EventLog, LogError};
use model::agent::{agent_apply, AgentEvent, AgentState};
use model::{Digest, OpId};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Attempts reserved for one op's stages (fetch, verify, stage) across
/// restarts. A retry spends one; a stop never does.
pub const ATTEMPT_BUDGET: u8 = 3;

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
}

/// The journal and the state folded from it.
pub struct Journal {
    log: EventLog<Record>,
    /// The core state (folded `Core` records).
    pub state: AgentState,
    /// The latest checkpoint of the current op, if any.
    pub pending: Option<Record>,
    /// Stages recorded done for the current op.
    pub done: Vec<Stage>,
    /// Attempt ids used so far (across restarts).
    pub attempts: u32,
    /// Attempts spent on the current op (pending checkpoints written).
    pub spent: u8,
}

impl Journal {
    /// Open (or create) the journal in `dir` and fold it.
    pub fn open(dir: &Path) -> Result<Journal, LogError> {
        let (log, records) = EventLog::open(dir)?;
        let mut journal = Journal {
            log,
            state: AgentState::default(),
            pending: None,
            done: Vec::new(),
            attempts: 0,
            spent: 0,
        };
        for (_, record) in &records {
            journal.fold(record);
        }
        Ok(journal)
    }

    fn fold(&mut self, record: &Record) {
        match record {
            Record::Core(event) => {
                // A new op (accepted, or aborted before it was received)
                // starts with a fresh attempt budget and no checkpoints.
                if let AgentEvent::Accepted { .. } | AgentEvent::AbortedUnseen { .. } = event {
                    self.pending = None;
                    self.done.clear();
                    self.spent = 0;
                }
                agent_apply(&mut self.state, event);
            }
            Record::Pending { attempt_id, .. } => {
                self.attempts = self.attempts.max(*attempt_id);
                self.spent = self.spent.saturating_add(1);
                self.pending = Some(record.clone());
            }
            Record::Done { stage, .. } => self.done.push(*stage),
            Record::Stopped { .. } => self.pending = Some(record.clone()),
        }
    }

    /// Append records durably (fsync), then fold them. Nothing the caller
    /// does on their account may happen before this returns Ok.
    pub fn append(&mut self, records: Vec<Record>) -> Result<(), LogError> {
        if records.is_empty() {
            return Ok(());
        }
        let durable = self.log.append(records)?;
        for (_, record) in durable.get() {
            self.fold(record);
        }
        Ok(())
    }

    /// Flush and close.
    pub fn close(self) -> Result<(), LogError> {
        self.log.close()
    }
}
