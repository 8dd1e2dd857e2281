//! The agent's journal: the core's events (`model::agent::AgentEvent`,
//! staging and the recovery table's decisions included) and the attempt
//! id of every restart, in a durable log (the same fsync-before-acknowledge
//! log the controller uses). The agent acts on a record only after
//! `append` returned its `Durable`. Records `Pending`, `Done`, `Failed`
//! and `Stopped` were written by agents before staging was a model state;
//! they still decode and print, and nothing decides on them.

use crate::recovery::ErrorClass;
use eventlog::{EventLog, LogError};
use model::agent::{agent_apply, AgentEvent, AgentState};
use model::{Digest, OpId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// The journal's directory inside the agent's data directory.
pub const JOURNAL_DIR: &str = "journal";

/// Attempts reserved for one op's staging across restarts: the model's.
pub use model::agent::ATTEMPT_BUDGET;

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
    /// The core state (folded `Core` records): everything the agent
    /// decides on, staging and its recovery table included.
    pub state: AgentState,
    /// Attempt ids used so far (across restarts).
    pub attempts: u32,
    /// Records in the journal, durable ones only (what a power cut must
    /// never take back; the power-cut campaign compares it with the count
    /// the agent logged before the cut).
    pub records: u64,
}

impl Journal {
    /// Open (or create) the journal in `dir` and fold it.
    pub fn open(dir: &Path) -> Result<Journal, LogError> {
        let (log, records) = EventLog::open(dir)?;
        let mut journal = Journal {
            log,
            state: AgentState::default(),
            attempts: 0,
            records: records.len() as u64,
        };
        for (_, record) in &records {
            journal.fold(record);
        }
        Ok(journal)
    }

    fn fold(&mut self, record: &Record) {
        match record {
            Record::Core(event) => agent_apply(&mut self.state, event),
            Record::Pending { attempt_id, .. } | Record::Resumed { attempt_id, .. } => {
                self.attempts = self.attempts.max(*attempt_id)
            }
            // Written by agents before staging was a model state: kept
            // readable for forensics, decided on by nothing. An op they
            // left in flight is staging by its `Accepted`, and the table
            // re-reads the disk before it goes on.
            Record::Done { .. } | Record::Stopped { .. } | Record::Failed { .. } => {}
        }
    }

    /// The id the next restart of the current op runs under.
    pub fn next_attempt_id(&self) -> u32 {
        self.attempts.saturating_add(1)
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
            self.records = self.records.saturating_add(1);
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
    use model::agent::{AgentStage, StagingStep, ATTEMPT_BUDGET};
    use model::recovery::{Exit, Observed, Position, Reading};
    use model::Generation;

    const OP: OpId = OpId(7);
    const RELEASE: Digest = Digest([7; 32]);

    fn accepted() -> Record {
        Record::Core(AgentEvent::Accepted {
            op: OP,
            generation: Generation(1),
            release: RELEASE,
        })
    }

    #[test]
    fn the_model_events_reopen_to_the_same_state() {
        let dir = tempfile::tempdir().expect("dir");
        let mut journal = Journal::open(dir.path()).expect("journal");
        journal
            .append(vec![
                accepted(),
                Record::Core(AgentEvent::Recovery {
                    op: OP,
                    reading: Reading {
                        position: Position::BeforeStage,
                        error: Some(model::recovery::ErrorClass::Transient),
                        observed: Some(Observed::Absent),
                        budget_left: ATTEMPT_BUDGET,
                    },
                    exit: Exit::Retry,
                }),
            ])
            .expect("append");
        let state = journal.state;
        let op = state.op.expect("op");
        assert_eq!(op.stage, AgentStage::Staging(StagingStep::Running));
        assert_eq!(op.budget_left, ATTEMPT_BUDGET - 1);
        journal
            .append(vec![Record::Resumed {
                op: OP,
                attempt_id: journal.next_attempt_id(),
            }])
            .expect("append");
        journal.close().expect("close");
        let reopened = Journal::open(dir.path()).expect("reopen");
        assert_eq!(reopened.state, state);
        assert_eq!(reopened.next_attempt_id(), 2);
    }

    #[test]
    fn a_journal_written_before_staging_was_modelled_still_opens() {
        use crate::recovery::ErrorClass;
        let dir = tempfile::tempdir().expect("dir");
        let mut journal = Journal::open(dir.path()).expect("journal");
        journal
            .append(vec![
                accepted(),
                Record::Pending {
                    op: OP,
                    stage: Stage::Fetch,
                    fingerprint: RELEASE,
                    attempt_id: 1,
                    budget_left: 2,
                },
                Record::Done {
                    op: OP,
                    stage: Stage::Fetch,
                },
                Record::Failed {
                    op: OP,
                    stage: Stage::Verify,
                    class: ErrorClass::Permanent,
                    bundle_missing: false,
                    reason: "x".into(),
                },
            ])
            .expect("append");
        journal.close().expect("close");
        let reopened = Journal::open(dir.path()).expect("reopen");
        // The op is staging, waiting for the table, which re-reads the disk.
        assert_eq!(
            reopened.state.op.map(|o| o.stage),
            Some(AgentStage::Staging(StagingStep::Observing {
                position: Position::BeforeStage,
                last: None,
            }))
        );
        assert_eq!(reopened.next_attempt_id(), 2);
    }

    /// Older journals decode: the variants that existed before staging was
    /// a model state keep their encoding (the new ones are appended last).
    #[test]
    fn records_written_by_older_agents_keep_their_bytes() {
        let golden: [(Record, &[u8]); 4] = [
            (Record::Core(AgentEvent::Closed { op: OP }), &[0, 8, 7]),
            (
                Record::Core(AgentEvent::Refused {
                    op: OP,
                    reason: model::StageRefusal::EffectUnknown,
                }),
                &[0, 5, 7, 3],
            ),
            (
                Record::Resumed {
                    op: OP,
                    attempt_id: 2,
                },
                &[5, 7, 2],
            ),
            (
                Record::Failed {
                    op: OP,
                    stage: Stage::Fetch,
                    class: crate::recovery::ErrorClass::Permanent,
                    bundle_missing: true,
                    reason: "x".into(),
                },
                &[4, 7, 0, 1, 1, 1, b'x'],
            ),
        ];
        for (record, bytes) in golden {
            let encoded = eventlog::encode_payload(&record).expect("encode");
            assert_eq!(encoded, bytes, "{record}");
            let decoded: Record = eventlog::decode_payload(bytes).expect("decode");
            assert_eq!(decoded, record);
        }
        // The new events come after the nine older ones.
        let staged =
            eventlog::encode_payload(&Record::Core(AgentEvent::Staged { op: OP })).expect("encode");
        assert_eq!(staged, [0, 10, 7]);
    }
}
