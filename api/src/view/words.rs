//! The API's view of the one wording (issue #22 item 4): every word of a
//! model enum lives in [`model::words`], shared with the event text and the
//! invariants' messages; the API's DTOs, the CLI, the dashboard,
//! `/metrics`, the proofs and `fleetweft log show` take them from here, so
//! "silence" is never also "Silence". Who made an observation is worded by
//! `proof::Origin` (the proof crate's own enum), which the DTOs use.
//!
//! The test below holds the surfaces together: for every variant of every
//! enum, the API's word is the word inside the event text and inside the
//! invariants' messages.

pub use model::controller::words::*;
pub use model::words::*;

/// An operator's action on a rollout: `approve`, `resume`, `pause` (the
/// last word of `POST /api/rollouts/{id}/…` and of the console's forms).
pub fn rollout_action(action: model::controller::RolloutAction) -> &'static str {
    use model::controller::RolloutAction as A;
    match action {
        A::Approve => "approve",
        A::Resume => "resume",
        A::Pause => "pause",
    }
}

/// Every rollout action, in the order the console offers them.
pub const ROLLOUT_ACTIONS: [model::controller::RolloutAction; 3] = [
    model::controller::RolloutAction::Approve,
    model::controller::RolloutAction::Resume,
    model::controller::RolloutAction::Pause,
];

/// An operator's action on an op, as the console offers it: `rollback`,
/// or the resolution's word (`confirm-new`, ...).
pub fn op_action(action: model::controller::OperatorAction) -> &'static str {
    use model::controller::{OperatorAction as A, Resolution};
    match action {
        A::RollBack => "rollback",
        A::ConfirmNew => resolution(Resolution::ConfirmNew),
        A::ConfirmBaseline => resolution(Resolution::ConfirmBaseline),
        A::Abandon => resolution(Resolution::Abandon),
    }
}

/// An operator's action on a node: `retire`, `release`.
pub fn node_action(action: model::controller::NodeAction) -> &'static str {
    use model::controller::NodeAction as A;
    match action {
        A::Retire => "retire",
        A::Release => "release",
    }
}

/// The rollout action named by `word`, if any.
pub fn parse_rollout_action(word: &str) -> Option<model::controller::RolloutAction> {
    ROLLOUT_ACTIONS
        .into_iter()
        .find(|a| rollout_action(*a) == word)
}

#[cfg(test)]
mod tests {
    use super::super::{NodeState, OpState};
    use super::*;
    use model::controller::{OpPhase, Outcome, PauseReason, RolloutStatus, UnknownReason};
    use model::{Decision, OpId};
    use std::collections::BTreeSet;

    /// Every variant of every enum, rendered through this module: each
    /// word is non-empty, distinct within its enum, and the words the API
    /// parses parse back to their variant. The lists are built by
    /// exhaustive matches, so a new variant fails to compile here too.
    /// The console's rollout actions: one word each, parsed back, and
    /// every action `rollout_actions` can offer has one (exhaustive).
    #[test]
    fn every_rollout_action_has_one_word_that_parses_back() {
        use model::controller::RolloutAction as A;
        for a in ROLLOUT_ACTIONS {
            match a {
                A::Approve | A::Resume | A::Pause => {}
            }
            assert_eq!(parse_rollout_action(rollout_action(a)), Some(a));
        }
        let words: BTreeSet<&str> = ROLLOUT_ACTIONS.map(rollout_action).into_iter().collect();
        assert_eq!(words.len(), ROLLOUT_ACTIONS.len());
        assert_eq!(parse_rollout_action("delete"), None);
        use model::controller::{NodeAction as N, OperatorAction as O};
        let ops = [O::RollBack, O::ConfirmNew, O::ConfirmBaseline, O::Abandon];
        let op_words: BTreeSet<&str> = ops.map(op_action).into_iter().collect();
        assert_eq!(op_words.len(), ops.len());
        for o in ops {
            match o {
                O::RollBack => assert_eq!(op_action(o), "rollback"),
                O::ConfirmNew | O::ConfirmBaseline | O::Abandon => {
                    assert!(parse_resolution(op_action(o)).is_some())
                }
            }
        }
        assert_ne!(node_action(N::Retire), node_action(N::Release));
    }

    #[test]
    fn every_variant_has_one_distinct_word() {
        fn distinct(words: Vec<String>) {
            let set: BTreeSet<&String> = words.iter().collect();
            assert_eq!(set.len(), words.len(), "{words:?}");
            assert!(words.iter().all(|w| !w.is_empty()), "{words:?}");
        }
        let op = OpId(3);
        let outcomes: Vec<Outcome> = [Outcome::Verified, Outcome::RolledBack, Outcome::NotApplied]
            .into_iter()
            .chain(RESOLUTIONS.map(Outcome::Resolved))
            .collect();
        for o in &outcomes {
            // Exhaustive: a new outcome must be listed above.
            match o {
                Outcome::Verified | Outcome::RolledBack | Outcome::NotApplied => {}
                Outcome::Resolved(_) => {}
            }
        }
        distinct(outcomes.iter().map(|o| outcome(*o).into_owned()).collect());
        let phases: Vec<OpPhase> = [OpPhase::Granted, OpPhase::Decided, OpPhase::Restoring]
            .into_iter()
            .chain([OpPhase::Settled(Outcome::Verified)])
            .collect();
        distinct(phases.iter().map(|p| op_phase(*p).to_string()).collect());
        for d in [Decision::Commit, Decision::Abort] {
            assert_eq!(
                op_phase_with_decision(OpPhase::Decided, Some(d)),
                format!("decided ({})", decision(d))
            );
        }
        distinct(RESOLUTIONS.iter().map(|r| resolution(*r).into()).collect());
        for r in RESOLUTIONS {
            assert_eq!(parse_resolution(resolution(r)), Some(r));
        }
        distinct(VERDICTS.iter().map(|v| verdict(*v).into()).collect());
        for v in VERDICTS {
            assert_eq!(parse_verdict(verdict(v)), Some(v));
        }
        let reasons = [
            UnknownReason::Silence,
            UnknownReason::RestoreUnproven,
            UnknownReason::Contradictory,
        ];
        distinct(reasons.iter().map(|r| unknown_reason(*r).into()).collect());
        for r in reasons {
            assert!(unknown_reason_sentence(r).starts_with(unknown_reason(r)));
        }
        let statuses = [
            RolloutStatus::Active,
            RolloutStatus::Superseded,
            RolloutStatus::Completed,
            RolloutStatus::Ended,
        ];
        distinct(statuses.iter().map(|s| rollout_status(*s).into()).collect());
        let pauses = [
            PauseReason::Operator,
            PauseReason::ProbeFailed { op },
            PauseReason::FailureBudget { op },
            PauseReason::UnknownBudget,
        ];
        distinct(pauses.iter().map(|p| pause_reason(*p)).collect());
        distinct(
            [Decision::Commit, Decision::Abort]
                .iter()
                .map(|d| decision(*d).into())
                .collect(),
        );
        distinct(NodeState::ALL.iter().map(|s| s.as_str().into()).collect());
        for s in NodeState::ALL {
            assert_eq!(NodeState::parse(s.as_str()), Some(s));
        }
        distinct(OpState::ALL.iter().map(|s| s.as_str().into()).collect());
        // The op state of a settled op is its outcome's word (a resolved
        // one reads `resolved`, its resolution is in `outcome`).
        for o in [Outcome::Verified, Outcome::RolledBack, Outcome::NotApplied] {
            assert_eq!(OpState::of_outcome(o).as_str(), outcome(o));
        }
    }

    /// Every variant of each enum, in a list built by an exhaustive match
    /// (a new variant fails to compile here until it is listed).
    fn all_outcomes() -> Vec<Outcome> {
        let outcomes: Vec<Outcome> = [Outcome::Verified, Outcome::RolledBack, Outcome::NotApplied]
            .into_iter()
            .chain(RESOLUTIONS.map(Outcome::Resolved))
            .collect();
        for o in &outcomes {
            match o {
                Outcome::Verified | Outcome::RolledBack | Outcome::NotApplied => {}
                Outcome::Resolved(_) => {}
            }
        }
        outcomes
    }

    fn all_pauses() -> [PauseReason; 4] {
        let op = OpId(3);
        let all = [
            PauseReason::Operator,
            PauseReason::ProbeFailed { op },
            PauseReason::FailureBudget { op },
            PauseReason::UnknownBudget,
        ];
        for p in all {
            match p {
                PauseReason::Operator | PauseReason::UnknownBudget => {}
                PauseReason::ProbeFailed { .. } | PauseReason::FailureBudget { .. } => {}
            }
        }
        all
    }

    fn all_report_kinds() -> [model::ReportKind; 4] {
        use model::ReportKind as K;
        let all = [
            K::Switched,
            K::Restored,
            K::NotApplied,
            K::Refused(model::StageRefusal::BundleRejected),
        ];
        for k in all {
            match k {
                K::Switched | K::Restored | K::NotApplied | K::Refused(_) => {}
            }
        }
        all
    }

    const DECISIONS: [Decision; 2] = [Decision::Commit, Decision::Abort];
    const UNKNOWN_REASONS: [UnknownReason; 3] = [
        UnknownReason::Silence,
        UnknownReason::RestoreUnproven,
        UnknownReason::Contradictory,
    ];
    const SOURCES: [model::controller::ObservationSource; 3] = [
        model::controller::ObservationSource::ReadBack,
        model::controller::ObservationSource::ControllerProbe,
        model::controller::ObservationSource::Operator,
    ];

    /// `text` (a surface's rendering of `value`) carries `word`, and not
    /// the variant's `Debug` name (the code's spelling, which no surface
    /// shows an operator).
    fn says(surface: &str, text: &str, word: &str, value: &dyn std::fmt::Debug) {
        assert!(
            text.contains(word),
            "{surface} words {value:?} differently from the API: {text:?} lacks {word:?}"
        );
        let code = format!("{value:?}");
        let name = code.split([' ', '(']).next().unwrap_or(&code);
        assert!(
            !text.contains(name),
            "{surface} words {value:?} by its code name {name:?}: {text:?}"
        );
    }

    /// One wording (issue #22 item 4): for every variant of every enum an
    /// operator reads, the word the API carries (these functions) is the
    /// word inside the event text (`Event`'s `Display`, what `log show`,
    /// the API's `text` and the proofs print) and inside the invariants'
    /// violation messages, both their word functions and real violations
    /// of S3, S5 and S6. Fails if any surface words a value its own way.
    #[test]
    fn every_surface_words_a_value_alike() {
        use invariants::words as inv;
        use model::controller::{Event, ObservationSource};
        use model::{NodeId, RolloutId, RouteObservation};
        let op = OpId(3);
        let v2 = model::Digest::repeat(2);
        for o in all_outcomes() {
            let w = outcome(o);
            says(
                "event text",
                &Event::OpSettled { op, outcome: o }.to_string(),
                &w,
                &o,
            );
            assert_eq!(inv::outcome(o), w, "invariants' outcome of {o:?}");
            says(
                "invariants' phase",
                &inv::phase(OpPhase::Settled(o)),
                &w,
                &o,
            );
            assert!(inv::phase(OpPhase::Settled(o)).starts_with(SETTLED));
        }
        for p in [OpPhase::Granted, OpPhase::Decided, OpPhase::Restoring] {
            assert_eq!(inv::phase(p), op_phase(p), "invariants' phase of {p:?}");
        }
        for d in DECISIONS {
            let w = decision(d);
            says(
                "event text",
                &Event::CommitDecided { op, decision: d }.to_string(),
                w,
                &d,
            );
            says(
                "event text",
                &Event::CommitReplayed { op, decision: d }.to_string(),
                w,
                &d,
            );
            assert_eq!(inv::decision(d), w);
            assert_eq!(inv::stored_decision(Some(d)), w);
            says(
                "handover phase",
                &op_phase_with_decision(OpPhase::Decided, Some(d)),
                w,
                &d,
            );
        }
        assert_eq!(inv::stored_decision(None), NO_DECISION);
        for r in UNKNOWN_REASONS {
            let w = unknown_reason(r);
            says(
                "event text",
                &Event::OpUnknown { op, reason: r }.to_string(),
                w,
                &r,
            );
            assert!(unknown_reason_sentence(r).starts_with(w));
        }
        for p in all_pauses() {
            let rollout = RolloutId(0);
            let text = Event::RolloutPaused { rollout, reason: p }.to_string();
            assert!(text.ends_with(&paused(p)), "event text of {p:?}: {text:?}");
            assert!(paused(p).contains(&pause_reason(p)));
            assert_eq!(inv::pause(p), paused(p), "invariants' pause of {p:?}");
        }
        let ended = Event::RolloutEnded {
            rollout: RolloutId(0),
            not_passed: 1,
        };
        let texts = [
            (
                RolloutStatus::Superseded,
                Event::RolloutSuperseded {
                    rollout: RolloutId(0),
                    by: RolloutId(1),
                },
            ),
            (
                RolloutStatus::Completed,
                Event::RolloutCompleted {
                    rollout: RolloutId(0),
                },
            ),
            (RolloutStatus::Ended, ended),
        ];
        for (s, event) in texts {
            says("event text", &event.to_string(), rollout_status(s), &s);
        }
        for s in [
            RolloutStatus::Active,
            RolloutStatus::Superseded,
            RolloutStatus::Completed,
            RolloutStatus::Ended,
        ] {
            assert_eq!(inv::status(s), rollout_status(s));
        }
        for v in VERDICTS {
            let observation = RouteObservation::new(v, Some(v2), true);
            let text = Event::ProbeRecorded { op, observation }.to_string();
            says("event text", &text, verdict(v), &v);
            let proof = proof::observation_str(&observation);
            assert!(proof.contains(verdict(v)), "proof's {v:?}: {proof:?}");
        }
        for k in all_report_kinds() {
            let observation = RouteObservation::passing(v2);
            let text = Event::ReportRecorded {
                op,
                kind: k,
                observation,
            }
            .to_string();
            says("event text", &text, report_kind(k), &k);
        }
        for s in SOURCES {
            match s {
                ObservationSource::ReadBack | ObservationSource::ControllerProbe => {}
                ObservationSource::Operator => {}
            }
            let observation = RouteObservation::passing(v2);
            let event = Event::NodeObserved {
                node: NodeId(0),
                observation,
                source: s,
                at_ms: 1,
            };
            says("event text", &event.to_string(), observation_source(s), &s);
        }
        let hello = Event::NodeHello {
            node: NodeId(0),
            serving: None,
            generation: model::Generation(0),
        };
        assert!(hello.to_string().contains(NO_RELEASE), "{hello}");
        assert_eq!(inv::release(None), NO_RELEASE);
        violations_say_the_api_words();
    }

    /// Real violations, not only the invariants' word functions: S3 on an
    /// op settled twice names both outcomes, S5 on a grant in a paused or
    /// finished rollout names the pause or the status, S6 on a second
    /// decision names both decisions, each in the API's words.
    fn violations_say_the_api_words() {
        use model::controller::{apply, Event};
        use model::RolloutId;
        let fleet = super::super::fixture::fleet(3, 1, 0, 0).state;
        let rollout = RolloutId(0);
        let settled = OpId(0); // the canary, verified
        for o in all_outcomes() {
            let event = Event::OpSettled {
                op: settled,
                outcome: o,
            };
            let v =
                invariants::s3_evidence_releases_slot(&fleet, &event).expect_err("settled twice");
            says("S3's message", &v.detail, &outcome(o), &o);
            assert!(v.detail.contains(&*outcome(Outcome::Verified)), "{v}");
        }
        let grant = fleet
            .ops
            .values()
            .find(|o| o.id != settled)
            .expect("a follower's op");
        let granted = Event::OpGranted {
            op: OpId(9),
            rollout,
            node: grant.node,
            release: grant.release,
            generation: grant.generation,
            baseline: grant.baseline,
            is_canary: false,
        };
        for p in all_pauses() {
            let mut state = fleet.clone();
            apply(&mut state, &Event::RolloutPaused { rollout, reason: p });
            let v = invariants::s5_pause_stops_grants(&state, &granted).expect_err("paused");
            assert!(
                v.detail.ends_with(&paused(p)),
                "S5's message for {p:?}: {v}"
            );
        }
        for (s, event) in [
            (
                RolloutStatus::Completed,
                Event::RolloutCompleted { rollout },
            ),
            (
                RolloutStatus::Ended,
                Event::RolloutEnded {
                    rollout,
                    not_passed: 1,
                },
            ),
        ] {
            let mut state = fleet.clone();
            apply(&mut state, &event);
            let v = invariants::s5_pause_stops_grants(&state, &granted).expect_err("finished");
            says("S5's message", &v.detail, rollout_status(s), &s);
        }
        let stored = grant.id;
        let mut state = fleet.clone();
        apply(
            &mut state,
            &Event::CommitDecided {
                op: stored,
                decision: Decision::Abort,
            },
        );
        for d in DECISIONS {
            let event = Event::CommitDecided {
                op: stored,
                decision: d,
            };
            let v = invariants::s6_stable_decisions(&state, &event).expect_err("decided twice");
            says("S6's message", &v.detail, decision(d), &d);
        }
    }
}
