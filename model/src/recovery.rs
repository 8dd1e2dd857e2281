//! SPEC §5 / §10 S14 (seed 002): after an interruption, the exit of the
//! agent's staging is chosen by a fixed table over three axes — where it
//! stopped, the error class, and what is observed of the effect — plus the
//! attempt budget left. Missing evidence on any axis means stop. An
//! artifact's own claim of success is never trusted: "re-verified" means its
//! digest was recomputed and its check re-run by the driver.
//!
//! The table is written once, here; `agent_step` calls it and journals the
//! reading and the exit it took ([`crate::agent::AgentEvent::Recovery`]).

use crate::chunks::ChunkSet;
use crate::msg::StageRefusal;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where the interrupted op stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Position {
    /// An attempt was reserved (or none yet), the artifact not recorded as
    /// staged.
    BeforeStage,
    /// The artifact was recorded as staged (the op asked to commit) but the
    /// op did not move on.
    AfterArtifactCommitted,
    /// The op waits for a person: the table already stopped it and only an
    /// operator's decision on the controller moves it on.
    WaitingForPerson,
    /// (issue #24 item 2) The release's `migrate` command was journaled as
    /// started and nothing says how it ended: the agent crashed while it
    /// ran. A migration changes the app's data, an effect outside the
    /// release directory whose outcome no digest can show (seed 002: an
    /// interrupted external effect of unknown outcome). Appended last so
    /// older journals still decode.
    Migrating,
}

/// What kind of error interrupted the stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ErrorClass {
    /// A crash, a timeout, a connection reset: may succeed if tried again.
    Transient,
    /// A bad signature, a digest mismatch, a missing file in the bundle:
    /// will fail the same way again.
    Permanent,
}

/// What is observed now of the stage's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Observed {
    /// Nothing of it exists.
    Absent,
    /// It exists, its digest was recomputed and its check re-run: it is good.
    ReVerified,
    /// Something exists but it could not be shown good or absent.
    Unknown,
    /// (a release of several chunks) Some chunks re-verified, not the
    /// whole: no chunk verified that is not kept, the tree not (yet)
    /// verified as a whole. Chunks that failed re-verification are fetched
    /// again, so nothing is there whose effect is unknown. Appended last so
    /// older journals still decode.
    PartlyVerified,
}

/// The exit the table picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Exit {
    /// Run the stage again (spends one unit of the attempt budget).
    Retry,
    /// Go on to the next stage with the re-verified artifact.
    Resume,
    /// Stop and keep the evidence; a person decides. Never spends budget.
    Stop,
}

/// The rows of the table, in the order they are tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Row {
    /// A person's decision is never made by recovery (S10): stop, whatever
    /// else is known.
    WaitingForPerson,
    /// An axis has no evidence: stop.
    MissingEvidence,
    /// A permanent error fails the same way again: stop.
    Permanent,
    /// Transient, but the effect is there and not shown good: acting again
    /// could apply twice, so stop.
    EffectUnknown,
    /// Transient and the effect is there, re-verified: resume, do not redo.
    ReVerified,
    /// Transient and nothing of the effect exists, budget left: retry.
    Absent,
    /// Transient, nothing exists, but no attempt budget is left: stop.
    BudgetSpent,
    /// Transient and some chunks re-verified, budget left: resume the
    /// fetch from them (an attempt, like a retry: it spends one unit and
    /// fetches only the chunks not kept, then assembles and verifies the
    /// tree). Without budget it is [`Row::BudgetSpent`].
    PartlyVerified,
    /// (issue #24 item 2, seed 002) A migration was interrupted: its effect
    /// on the data is of unknown outcome, and running it again could apply
    /// it twice (a half-done schema change, a counter bumped twice). Stop,
    /// whatever else is known and whatever budget is left; the data's
    /// snapshot stays on disk for the person who decides. Appended last.
    MigrationInterrupted,
}

impl Row {
    /// Every row, in the order the table tries them.
    /// [`Row::PartlyVerified`] is last (bits of the checker's coverage
    /// record follow this order).
    pub const ALL: [Row; 9] = [
        Row::WaitingForPerson,
        Row::MissingEvidence,
        Row::Permanent,
        Row::EffectUnknown,
        Row::ReVerified,
        Row::Absent,
        Row::BudgetSpent,
        Row::PartlyVerified,
        Row::MigrationInterrupted,
    ];

    /// The exit of this row.
    pub fn exit(self) -> Exit {
        match self {
            Row::ReVerified => Exit::Resume,
            Row::Absent | Row::PartlyVerified => Exit::Retry,
            Row::WaitingForPerson
            | Row::MissingEvidence
            | Row::Permanent
            | Row::EffectUnknown
            | Row::BudgetSpent
            | Row::MigrationInterrupted => Exit::Stop,
        }
    }
}

/// The row for a reading. `None` on an axis is missing evidence. The
/// person's wait is tried first: recovery never acts for a person, and
/// nothing else needs to be known to say so. An interrupted migration comes
/// next, for the same reason: its outcome cannot be observed, so no other
/// axis can make acting again safe.
pub fn row(
    position: Option<Position>,
    error: Option<ErrorClass>,
    observed: Option<Observed>,
    budget_left: u8,
) -> Row {
    if position == Some(Position::WaitingForPerson) {
        return Row::WaitingForPerson;
    }
    if position == Some(Position::Migrating) {
        return Row::MigrationInterrupted;
    }
    let (Some(_), Some(error), Some(observed)) = (position, error, observed) else {
        return Row::MissingEvidence;
    };
    match (error, observed) {
        (ErrorClass::Permanent, _) => Row::Permanent,
        (ErrorClass::Transient, Observed::Unknown) => Row::EffectUnknown,
        (ErrorClass::Transient, Observed::ReVerified) => Row::ReVerified,
        (ErrorClass::Transient, Observed::Absent | Observed::PartlyVerified)
            if budget_left == 0 =>
        {
            Row::BudgetSpent
        }
        (ErrorClass::Transient, Observed::Absent) => Row::Absent,
        (ErrorClass::Transient, Observed::PartlyVerified) => Row::PartlyVerified,
    }
}

/// What re-reading an op's chunks and tree from disk found: each chunk
/// present had its digest recomputed. Never the journal's own claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChunkReading {
    /// Chunks present whose digest matched: complete and good.
    pub verified: ChunkSet,
    /// Chunks present that did not verify (partial or torn): fetched again.
    pub unverified: ChunkSet,
    /// The tree assembled in the release directory, re-verified as a
    /// whole: absent, good, or there but not shown good.
    pub tree: Observed,
}

/// "verified {0}, unverified {1}, tree Absent".
impl fmt::Display for ChunkReading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "verified {}, unverified {}, tree {:?}",
            self.verified, self.unverified, self.tree
        )
    }
}

/// The table's observed axis for a release of `count` chunks, from the
/// chunks `kept` (those that re-verified) and the tree re-verified as a
/// whole: re-verified only when every chunk and the tree are; nothing kept
/// and no tree is absent; a tree there but not shown good is unknown (its
/// assembly was cut short); anything else is partly verified (resume the
/// fetch from the chunks kept).
pub fn observed_chunks(count: u8, kept: ChunkSet, tree: Observed) -> Observed {
    let every_chunk = ChunkSet::all(count).is_subset(kept);
    match tree {
        Observed::Unknown => Observed::Unknown,
        Observed::ReVerified if every_chunk => Observed::ReVerified,
        _ if kept.is_empty() && tree == Observed::Absent => Observed::Absent,
        _ => Observed::PartlyVerified,
    }
}

/// The fixed table. `None` on an axis is missing evidence, which means stop.
/// `budget_left` is the attempt budget reserved for the op: a retry needs one.
pub fn exit(
    position: Option<Position>,
    error: Option<ErrorClass>,
    observed: Option<Observed>,
    budget_left: u8,
) -> Exit {
    row(position, error, observed, budget_left).exit()
}

/// What the table read for one decision, journaled with the exit taken so
/// the decision can be judged on the journal alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Reading {
    pub position: Position,
    pub error: Option<ErrorClass>,
    pub observed: Option<Observed>,
    pub budget_left: u8,
}

impl Reading {
    /// The row this reading selects.
    pub fn row(&self) -> Row {
        row(
            Some(self.position),
            self.error,
            self.observed,
            self.budget_left,
        )
    }
}

/// "BeforeStage, Transient, Absent, budget 3" (operators and the scenario
/// harness read these words in the agent's log; "missing" for no evidence).
impl fmt::Display for Reading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let error = self
            .error
            .map_or("missing".to_string(), |e| format!("{e:?}"));
        let observed = self
            .observed
            .map_or("missing".to_string(), |o| format!("{o:?}"));
        write!(
            f,
            "{:?}, {error}, {observed}, budget {}",
            self.position, self.budget_left
        )
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Why an attempt at fetch, verify and stage failed, as the driver
/// classifies it (the table's error axis).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum StageFailure {
    /// May succeed if tried again: a timeout, a broken stream, an IO error;
    /// `bundle_missing` when the controller answered it has no bundle of
    /// this digest (the refusal says so if the budget runs out on it).
    Transient { bundle_missing: bool },
    /// Fails the same way again: bad signature, digest mismatch, format.
    Permanent,
    /// The driver could not tell how it failed: no evidence on the error
    /// axis, so the table stops.
    MissingEvidence,
}

impl StageFailure {
    /// The table's error axis.
    pub fn class(self) -> Option<ErrorClass> {
        match self {
            StageFailure::Transient { .. } => Some(ErrorClass::Transient),
            StageFailure::Permanent => Some(ErrorClass::Permanent),
            StageFailure::MissingEvidence => None,
        }
    }
}

impl fmt::Display for StageFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StageFailure::Transient {
                bundle_missing: true,
            } => "transient: the controller has no such bundle",
            StageFailure::Transient {
                bundle_missing: false,
            } => "transient",
            StageFailure::Permanent => "permanent",
            StageFailure::MissingEvidence => "of an unknown class",
        })
    }
}

/// What the controller is told when the table stops at `row` after the
/// latest failure `last`; `None` for a person's wait, which was already
/// reported when the op first stopped.
pub fn refusal(row: Row, last: Option<StageFailure>) -> Option<StageRefusal> {
    match row {
        Row::WaitingForPerson | Row::ReVerified | Row::Absent | Row::PartlyVerified => None,
        Row::Permanent => Some(StageRefusal::BundleRejected),
        Row::MissingEvidence | Row::EffectUnknown => Some(StageRefusal::EffectUnknown),
        Row::MigrationInterrupted => Some(StageRefusal::MigrationInterrupted),
        Row::BudgetSpent => Some(
            if last
                == Some(StageFailure::Transient {
                    bundle_missing: true,
                })
            {
                StageRefusal::BundleUnavailable
            } else {
                StageRefusal::AttemptBudgetSpent
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POSITIONS: [Position; 4] = [
        Position::BeforeStage,
        Position::AfterArtifactCommitted,
        Position::WaitingForPerson,
        Position::Migrating,
    ];
    const ERRORS: [ErrorClass; 2] = [ErrorClass::Transient, ErrorClass::Permanent];
    const OBSERVED: [Observed; 4] = [
        Observed::Absent,
        Observed::ReVerified,
        Observed::Unknown,
        Observed::PartlyVerified,
    ];

    #[test]
    fn missing_evidence_on_any_axis_stops() {
        for p in POSITIONS {
            for e in ERRORS {
                for o in OBSERVED {
                    assert_eq!(exit(None, Some(e), Some(o), 3), Exit::Stop);
                    assert_eq!(exit(Some(p), None, Some(o), 3), Exit::Stop);
                    assert_eq!(exit(Some(p), Some(e), None, 3), Exit::Stop);
                }
            }
        }
        assert_eq!(
            row(Some(Position::BeforeStage), None, Some(Observed::Absent), 3),
            Row::MissingEvidence
        );
    }

    #[test]
    fn the_table() {
        use ErrorClass::*;
        use Observed::*;
        use Position::*;
        let rows = [
            (BeforeStage, Transient, Absent, Exit::Retry),
            (BeforeStage, Transient, ReVerified, Exit::Resume),
            (BeforeStage, Transient, Unknown, Exit::Stop),
            (AfterArtifactCommitted, Transient, Absent, Exit::Retry),
            (AfterArtifactCommitted, Transient, ReVerified, Exit::Resume),
            (AfterArtifactCommitted, Transient, Unknown, Exit::Stop),
            (BeforeStage, Permanent, Absent, Exit::Stop),
            (AfterArtifactCommitted, Permanent, ReVerified, Exit::Stop),
            (WaitingForPerson, Transient, ReVerified, Exit::Stop),
            (WaitingForPerson, Transient, Absent, Exit::Stop),
            (BeforeStage, Transient, PartlyVerified, Exit::Retry),
            (BeforeStage, Permanent, PartlyVerified, Exit::Stop),
            (WaitingForPerson, Transient, PartlyVerified, Exit::Stop),
        ];
        for (p, e, o, expected) in rows {
            assert_eq!(
                exit(Some(p), Some(e), Some(o), 3),
                expected,
                "{p:?} {e:?} {o:?}"
            );
        }
        // A person's wait stops even with nothing else known.
        assert_eq!(
            row(Some(WaitingForPerson), None, None, 0),
            Row::WaitingForPerson
        );
    }

    #[test]
    fn a_retry_needs_budget_and_a_stop_never_spends_it() {
        let before = Some(Position::BeforeStage);
        let transient = Some(ErrorClass::Transient);
        assert_eq!(
            row(before, transient, Some(Observed::Absent), 0),
            Row::BudgetSpent
        );
        assert_eq!(
            exit(before, transient, Some(Observed::Absent), 1),
            Exit::Retry
        );
        // Resume and stop do not depend on budget.
        assert_eq!(
            exit(before, transient, Some(Observed::ReVerified), 0),
            Exit::Resume
        );
    }

    #[test]
    fn every_stop_but_a_persons_wait_tells_the_controller_why() {
        for r in Row::ALL {
            let told = refusal(r, None);
            assert_eq!(
                told.is_some(),
                r.exit() == Exit::Stop && r != Row::WaitingForPerson,
                "{r:?}"
            );
        }
        let missing = Some(StageFailure::Transient {
            bundle_missing: true,
        });
        assert_eq!(
            refusal(Row::BudgetSpent, missing),
            Some(StageRefusal::BundleUnavailable)
        );
        assert_eq!(
            refusal(Row::BudgetSpent, None),
            Some(StageRefusal::AttemptBudgetSpent)
        );
    }

    #[test]
    fn a_chunk_set_resumes_from_verified_chunks_and_asks_only_when_whole() {
        use Observed::*;
        let none = ChunkSet::NONE;
        let first = none.with(0);
        let both = ChunkSet::all(2);
        for (kept, tree, observed) in [
            (none, Absent, Absent),
            (first, Absent, PartlyVerified),
            // Every chunk verified, the tree not assembled yet: assemble.
            (both, Absent, PartlyVerified),
            (both, ReVerified, ReVerified),
            // A tree that verifies with a chunk missing is not the whole.
            (first, ReVerified, PartlyVerified),
            (both, Unknown, Unknown),
            (none, Unknown, Unknown),
        ] {
            assert_eq!(observed_chunks(2, kept, tree), observed, "{kept} {tree:?}");
        }
        let before = Some(Position::BeforeStage);
        let transient = Some(ErrorClass::Transient);
        assert_eq!(
            row(before, transient, Some(PartlyVerified), 2),
            Row::PartlyVerified
        );
        assert_eq!(
            row(before, transient, Some(PartlyVerified), 0),
            Row::BudgetSpent
        );
    }

    /// Seed 002: an interrupted external effect of unknown outcome means
    /// stop, not retry. Whatever the other axes say (a crash is transient,
    /// the disk may look fine, budget may be left) and with evidence
    /// missing, an interrupted migration stops, spends nothing and tells
    /// the controller why.
    #[test]
    fn an_interrupted_migration_stops_whatever_else_is_read() {
        let migrating = Some(Position::Migrating);
        for budget in [0, 1, 3] {
            for error in [
                None,
                Some(ErrorClass::Transient),
                Some(ErrorClass::Permanent),
            ] {
                for observed in [None].into_iter().chain(OBSERVED.map(Some)) {
                    let r = row(migrating, error, observed, budget);
                    assert_eq!(
                        r,
                        Row::MigrationInterrupted,
                        "{error:?} {observed:?} {budget}"
                    );
                    assert_eq!(r.exit(), Exit::Stop);
                }
            }
        }
        assert_eq!(
            refusal(Row::MigrationInterrupted, None),
            Some(StageRefusal::MigrationInterrupted)
        );
        // A person's wait still comes first: a stopped migration that
        // waits for a person is that person's, not the table's again.
        assert_eq!(
            row(Some(Position::WaitingForPerson), None, None, 3),
            Row::WaitingForPerson
        );
        // The row is last in the table's order (the checker's coverage
        // bits follow it) and is the only one a migrating position reaches.
        assert_eq!(Row::ALL.last(), Some(&Row::MigrationInterrupted));
        for p in POSITIONS {
            let r = row(
                Some(p),
                Some(ErrorClass::Transient),
                Some(Observed::Absent),
                3,
            );
            assert_eq!(
                r == Row::MigrationInterrupted,
                p == Position::Migrating,
                "{p:?}"
            );
        }
    }

    #[test]
    fn a_reading_prints_as_the_log_reads_it() {
        let reading = Reading {
            position: Position::BeforeStage,
            error: Some(ErrorClass::Permanent),
            observed: Some(Observed::Absent),
            budget_left: 2,
        };
        assert_eq!(
            reading.to_string(),
            "BeforeStage, Permanent, Absent, budget 2"
        );
        assert_eq!(reading.row(), Row::Permanent);
    }
}
