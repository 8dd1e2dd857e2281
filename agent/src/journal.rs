//! The agent's journal: the core's events (`model::agent::AgentEvent`,
//! staging and the recovery table's decisions included) and the attempt
//! id of every restart, in a durable log (the same fsync-before-acknowledge
//! log the controller uses). The agent acts on a record only after
//! `append` returned its `Durable`. Records `Pending`, `Done`, `Failed`
//! and `Stopped` were written by agents before staging was a model state;
//! they still decode and print, and nothing decides on them.

use eventlog::{EventLog, LogError};
use model::agent::{agent_apply, AgentState};
use std::path::Path;

/// The record, its stage and the directory name live in `protocol` (the
/// operator's tools decode journals too); re-exported under their names.
pub use protocol::journal::{Record, Stage, JOURNAL_DIR};

/// Attempts reserved for one op's staging across restarts: the model's.
pub use model::agent::ATTEMPT_BUDGET;

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
    use model::agent::{AgentEvent, AgentStage, StagingStep, ATTEMPT_BUDGET};
    use model::recovery::{Exit, Observed, Position, Reading};
    use model::{Digest, Generation, OpId};

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

    /// A journal holding the chunk records of a chunked fetch (issue #23:
    /// a chunk verified as it landed, the chunks kept after a restart)
    /// reopens to the same state. Today's bundles are one-chunk releases
    /// (`AgentState::release_chunks` 0) and write none of them.
    #[test]
    fn chunk_records_reopen_to_the_same_state() {
        use model::chunks::{ChunkReading, ChunkSet};
        let dir = tempfile::tempdir().expect("dir");
        let mut journal = Journal::open(dir.path()).expect("journal");
        assert_eq!(journal.state.chunk_count(), 1);
        let reading = ChunkReading {
            verified: ChunkSet::NONE.with(0),
            unverified: ChunkSet::NONE.with(1),
            tree: Observed::Absent,
        };
        journal
            .append(vec![
                accepted(),
                Record::Core(AgentEvent::ChunksKept {
                    op: OP,
                    reading,
                    kept: reading.verified,
                }),
                Record::Core(AgentEvent::Recovery {
                    op: OP,
                    reading: Reading {
                        position: Position::BeforeStage,
                        error: Some(model::recovery::ErrorClass::Transient),
                        observed: Some(Observed::PartlyVerified),
                        budget_left: ATTEMPT_BUDGET,
                    },
                    exit: Exit::Retry,
                }),
                Record::Core(AgentEvent::ChunkVerified { op: OP, chunk: 1 }),
            ])
            .expect("append");
        let state = journal.state;
        assert_eq!(state.op.map(|o| o.verified), Some(ChunkSet::all(2)));
        journal.close().expect("close");
        let reopened = Journal::open(dir.path()).expect("reopen");
        assert_eq!(reopened.state, state);
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
