//! SPEC §5: after a crash, the exit of an interrupted stage is chosen by a
//! fixed table over three axes — where it stopped, the error class, and what
//! is observed of the effect. Missing evidence on any axis means stop. An
//! artifact's own claim of success is never trusted: "re-verified" means its
//! digest was recomputed and its check re-run.

use serde::{Deserialize, Serialize};

/// Where the interrupted op stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Position {
    /// A `pending_stage` checkpoint exists, the stage did not record done.
    BeforeStage,
    /// The stage recorded its artifact as committed (file written, route
    /// switched) but the op did not move on.
    AfterArtifactCommitted,
    /// The op waits for a person (approval, operator resolution).
    WaitingForPerson,
}

/// What kind of error interrupted the stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorClass {
    /// A crash, a timeout, a connection reset: may succeed if tried again.
    Transient,
    /// A bad signature, a digest mismatch, a missing file in the bundle:
    /// will fail the same way again.
    Permanent,
}

/// What is observed now of the stage's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Observed {
    /// Nothing of it exists.
    Absent,
    /// It exists, its digest was recomputed and its check re-run: it is good.
    ReVerified,
    /// Something exists but it could not be shown good or absent.
    Unknown,
}

/// The exit the table picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Exit {
    /// Run the stage again (spends one unit of the attempt budget).
    Retry,
    /// Go on to the next stage with the re-verified artifact.
    Resume,
    /// Stop and keep the evidence; a person decides. Never spends budget.
    Stop,
}

/// The fixed table. `None` on an axis is missing evidence, which means stop.
/// `budget_left` is the attempt budget reserved for the op: a retry needs one.
pub fn exit(
    position: Option<Position>,
    error: Option<ErrorClass>,
    observed: Option<Observed>,
    budget_left: u8,
) -> Exit {
    use ErrorClass::*;
    use Observed::*;
    use Position::*;
    let (Some(position), Some(error), Some(observed)) = (position, error, observed) else {
        return Exit::Stop;
    };
    let exit = match (position, error, observed) {
        // A person's decision is never made by recovery (S10).
        (WaitingForPerson, _, _) => Exit::Stop,
        // Permanent errors fail the same way again.
        (_, Permanent, _) => Exit::Stop,
        // Unknown effect: acting again could apply twice.
        (_, Transient, Unknown) => Exit::Stop,
        // The effect is there and re-verified: go on, do not redo it.
        (BeforeStage | AfterArtifactCommitted, Transient, ReVerified) => Exit::Resume,
        // Nothing of the effect exists: doing it again cannot double it.
        (BeforeStage | AfterArtifactCommitted, Transient, Absent) => Exit::Retry,
    };
    if exit == Exit::Retry && budget_left == 0 {
        Exit::Stop
    } else {
        exit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POSITIONS: [Position; 3] = [
        Position::BeforeStage,
        Position::AfterArtifactCommitted,
        Position::WaitingForPerson,
    ];
    const ERRORS: [ErrorClass; 2] = [ErrorClass::Transient, ErrorClass::Permanent];
    const OBSERVED: [Observed; 3] = [Observed::Absent, Observed::ReVerified, Observed::Unknown];

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
        ];
        for (p, e, o, expected) in rows {
            assert_eq!(
                exit(Some(p), Some(e), Some(o), 3),
                expected,
                "{p:?} {e:?} {o:?}"
            );
        }
    }

    #[test]
    fn a_retry_needs_budget_and_a_stop_never_spends_it() {
        assert_eq!(
            exit(
                Some(Position::BeforeStage),
                Some(ErrorClass::Transient),
                Some(Observed::Absent),
                0
            ),
            Exit::Stop
        );
        // Resume and stop do not depend on budget.
        assert_eq!(
            exit(
                Some(Position::BeforeStage),
                Some(ErrorClass::Transient),
                Some(Observed::ReVerified),
                0
            ),
            Exit::Resume
        );
    }
}
