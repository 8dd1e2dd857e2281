//! The agent's journal: every core event and every stage checkpoint, in a
//! durable log (the same fsync-before-acknowledge log the controller uses).
//! The agent acts on a record only after `append` returned its `Durable`.

use crate::recovery::{ErrorClass, Position};
use eventlog::{EventLog, LogError};
use model::agent::{agent_apply, AgentEvent, AgentState};
use model::{Digest, OpId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// The journal's directory inside the agent's data directory.
pub const JOURNAL_DIR: &str = "journal";

/// Attempts reserved for one op's stages (fetch, verify, stage) across
/// restarts. A retry (a new fetch checkpoint) spends one; a resume, a
/// restart and a stop never do.
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
    /// Attempts spent on the current op (fetch checkpoints written).
    pub spent: u8,
    /// How the stage of the latest checkpoint failed, if it did.
    pub failure: Option<Record>,
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
            failure: None,
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
                    self.failure = None;
                }
                agent_apply(&mut self.state, event);
            }
            Record::Pending {
                attempt_id, stage, ..
            } => {
                self.attempts = self.attempts.max(*attempt_id);
                // One attempt runs fetch, verify and stage; only its first
                // checkpoint reserves budget.
                if *stage == Stage::Fetch {
                    self.spent = self.spent.saturating_add(1);
                }
                self.pending = Some(record.clone());
                self.failure = None;
            }
            Record::Done { stage, .. } => self.done.push(*stage),
            Record::Stopped { .. } => self.pending = Some(record.clone()),
            Record::Failed { .. } => self.failure = Some(record.clone()),
            Record::Resumed { attempt_id, .. } => self.attempts = self.attempts.max(*attempt_id),
        }
    }

    /// The id the next attempt (or restart) of the current op runs under.
    pub fn next_attempt_id(&self) -> u32 {
        self.attempts.saturating_add(1)
    }

    /// Budget left for retries of the current op.
    pub fn budget_left(&self) -> u8 {
        ATTEMPT_BUDGET.saturating_sub(self.spent)
    }

    /// The recovery table's "where it stopped" axis for op `op` working on
    /// `release`. `None` (missing evidence, so stop) when the latest
    /// checkpoint belongs to another op or to other input: resuming work
    /// that was started on something else would be a guess.
    pub fn position(&self, op: OpId, release: Digest) -> Option<Position> {
        let checkpoint_matches = match &self.pending {
            // Nothing started yet: before the first stage.
            None => true,
            Some(Record::Pending {
                op: p, fingerprint, ..
            }) => *p == op && *fingerprint == release,
            Some(_) => false,
        };
        if !checkpoint_matches {
            None
        } else if self.done.contains(&Stage::Stage) {
            Some(Position::AfterArtifactCommitted)
        } else {
            Some(Position::BeforeStage)
        }
    }

    /// The recovery table's "error class" axis: how the latest checkpoint's
    /// stage failed; a checkpoint with no recorded outcome was cut short by
    /// a crash, and a crash is transient (SPEC §5: "a crash, a timeout").
    /// Before any checkpoint nothing has failed: running the first stage is
    /// a retry of nothing.
    pub fn error_class(&self) -> ErrorClass {
        match &self.failure {
            Some(Record::Failed { class, .. }) => *class,
            _ => ErrorClass::Transient,
        }
    }

    /// Whether the latest failure was the controller having no such bundle.
    pub fn bundle_missing(&self) -> bool {
        matches!(
            self.failure,
            Some(Record::Failed {
                bundle_missing: true,
                ..
            })
        )
    }

    /// Why the latest stage failed, if it did.
    pub fn failure_reason(&self) -> Option<String> {
        match &self.failure {
            Some(Record::Failed { reason, .. }) => Some(reason.clone()),
            _ => None,
        }
    }

    /// The stage of the latest checkpoint.
    pub fn checkpoint_stage(&self) -> Option<Stage> {
        match &self.pending {
            Some(Record::Pending { stage, .. } | Record::Stopped { stage, .. }) => Some(*stage),
            _ => None,
        }
    }

    /// The stop recorded for op `op`, if the table already stopped it.
    pub fn stopped(&self, op: OpId) -> Option<model::StageRefusal> {
        match &self.pending {
            Some(Record::Stopped {
                op: id, refusal, ..
            }) if *id == op => Some(*refusal),
            _ => None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use model::Generation;

    const OP: OpId = OpId(7);
    const RELEASE: Digest = Digest([7; 32]);

    fn accepted(dir: &Path) -> Journal {
        let mut journal = Journal::open(dir).expect("journal");
        journal
            .append(vec![Record::Core(AgentEvent::Accepted {
                op: OP,
                generation: Generation(1),
                release: RELEASE,
            })])
            .expect("append");
        journal
    }

    fn pending(stage: Stage, attempt_id: u32, fingerprint: Digest) -> Record {
        Record::Pending {
            op: OP,
            stage,
            fingerprint,
            attempt_id,
            budget_left: 0,
        }
    }

    fn failed(stage: Stage, class: ErrorClass) -> Record {
        Record::Failed {
            op: OP,
            stage,
            class,
            bundle_missing: false,
            reason: "x".into(),
        }
    }

    #[test]
    fn a_fresh_op_is_before_its_first_stage_with_nothing_failed() {
        let dir = tempfile::tempdir().expect("dir");
        let journal = accepted(dir.path());
        assert_eq!(journal.position(OP, RELEASE), Some(Position::BeforeStage));
        assert_eq!(journal.error_class(), ErrorClass::Transient);
        assert_eq!(journal.budget_left(), ATTEMPT_BUDGET);
    }

    #[test]
    fn one_attempt_spends_one_unit_whatever_its_checkpoints() {
        let dir = tempfile::tempdir().expect("dir");
        let mut journal = accepted(dir.path());
        journal
            .append(vec![
                pending(Stage::Fetch, 1, RELEASE),
                Record::Done {
                    op: OP,
                    stage: Stage::Fetch,
                },
                pending(Stage::Verify, 1, RELEASE),
                Record::Done {
                    op: OP,
                    stage: Stage::Verify,
                },
                pending(Stage::Stage, 1, RELEASE),
            ])
            .expect("append");
        assert_eq!(journal.budget_left(), ATTEMPT_BUDGET - 1);
        // A restart is a new attempt id and spends nothing.
        journal
            .append(vec![Record::Resumed {
                op: OP,
                attempt_id: journal.next_attempt_id(),
            }])
            .expect("append");
        assert_eq!(journal.attempts, 2);
        assert_eq!(journal.budget_left(), ATTEMPT_BUDGET - 1);
        // Cut short by the crash: transient, before the artifact committed.
        assert_eq!(journal.error_class(), ErrorClass::Transient);
        assert_eq!(journal.position(OP, RELEASE), Some(Position::BeforeStage));
        journal
            .append(vec![Record::Done {
                op: OP,
                stage: Stage::Stage,
            }])
            .expect("append");
        assert_eq!(
            journal.position(OP, RELEASE),
            Some(Position::AfterArtifactCommitted)
        );
    }

    #[test]
    fn the_class_is_the_latest_failure_and_a_new_checkpoint_clears_it() {
        let dir = tempfile::tempdir().expect("dir");
        let mut journal = accepted(dir.path());
        journal
            .append(vec![
                pending(Stage::Verify, 1, RELEASE),
                failed(Stage::Verify, ErrorClass::Permanent),
            ])
            .expect("append");
        assert_eq!(journal.error_class(), ErrorClass::Permanent);
        assert_eq!(journal.failure_reason().as_deref(), Some("x"));
        journal
            .append(vec![pending(Stage::Fetch, 2, RELEASE)])
            .expect("append");
        assert_eq!(journal.error_class(), ErrorClass::Transient);
        // The journal is the evidence: reopened, it says the same.
        journal
            .append(vec![failed(Stage::Fetch, ErrorClass::Permanent)])
            .expect("append");
        journal.close().expect("close");
        let reopened = Journal::open(dir.path()).expect("reopen");
        assert_eq!(reopened.error_class(), ErrorClass::Permanent);
        assert_eq!(reopened.budget_left(), ATTEMPT_BUDGET - 1);
        assert_eq!(reopened.attempts, 2);
    }

    #[test]
    fn a_checkpoint_for_other_input_is_missing_evidence() {
        let dir = tempfile::tempdir().expect("dir");
        let mut journal = accepted(dir.path());
        journal
            .append(vec![pending(Stage::Fetch, 1, Digest([9; 32]))])
            .expect("append");
        assert_eq!(journal.position(OP, RELEASE), None);
        assert_eq!(journal.position(OpId(8), Digest([9; 32])), None);
        // And the table stops on it.
        assert_eq!(
            crate::recovery::exit(
                journal.position(OP, RELEASE),
                Some(journal.error_class()),
                Some(crate::recovery::Observed::Absent),
                journal.budget_left()
            ),
            crate::recovery::Exit::Stop
        );
    }

    #[test]
    fn a_new_op_starts_with_a_fresh_budget_and_no_failure() {
        let dir = tempfile::tempdir().expect("dir");
        let mut journal = accepted(dir.path());
        journal
            .append(vec![
                pending(Stage::Fetch, 1, RELEASE),
                failed(Stage::Fetch, ErrorClass::Permanent),
                Record::Core(AgentEvent::Accepted {
                    op: OpId(8),
                    generation: Generation(2),
                    release: Digest([8; 32]),
                }),
            ])
            .expect("append");
        assert_eq!(journal.budget_left(), ATTEMPT_BUDGET);
        assert_eq!(journal.error_class(), ErrorClass::Transient);
        assert_eq!(
            journal.position(OpId(8), Digest([8; 32])),
            Some(Position::BeforeStage)
        );
        // Attempt ids keep growing across ops.
        assert_eq!(journal.next_attempt_id(), 2);
    }
}
