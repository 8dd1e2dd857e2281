//! The checker against the real rules and against every mutant.

use model::NodeId;
use simulations::fleet::settled_release;
use simulations::gallery::check_mutant;
use simulations::mutants::node_proof;
use simulations::run::shortest_path;
use simulations::{
    run, Action, CheckConfig, Fault, Faults, FleetModel, Mutant, RunOptions, Status,
};

fn options() -> RunOptions {
    RunOptions {
        threads: 2,
        progress: false,
        order: Default::default(),
    }
}

fn assert_clean(cfg: &CheckConfig) -> simulations::Report {
    let report = run(cfg, &options());
    assert!(
        report.ok(),
        "real rules must pass {cfg}:\n{}",
        simulations::run::summary(&report)
    );
    report
}

/// The default configuration of `fleetweft-check`: canary + 2 followers,
/// 1 slot, every fault kind that strikes an op under way with a budget of
/// one, operator on, no proofs. Its count is pinned: the settled-node faults
/// and the proof actions must not change what it explores.
#[test]
fn real_rules_pass_the_default_configuration() {
    let cfg = CheckConfig::default();
    assert!(!cfg.proofs_enabled());
    assert!(!cfg.faults.has(Fault::SwapOld) && !cfg.faults.has(Fault::ForeignRoute));
    let report = assert_clean(&cfg);
    assert!(
        !report.properties.iter().any(|p| p.name.starts_with("P1")),
        "no proof property without proofs"
    );
    assert_eq!(report.unique_states, PINNED_DEFAULT_UNIQUE_STATES);
}

/// Pinned like the small configuration below (docs/model.md, Figures).
const PINNED_DEFAULT_UNIQUE_STATES: usize = 1_006_168;

/// Drift after settlement (seed 003) with the proof actions: an old release
/// swapped in behind a settled node's agent, a stand-in answering its route
/// as another release, plus loss (for UNKNOWN, and an operator confirming
/// the baseline of a node a stand-in then answers for as the intended
/// release), two faults along a path. No live proof says verified unless
/// the intended release really serves (P1), and a drifted node is reported
/// drifted.
#[test]
fn real_rules_pass_with_settled_node_faults_and_proofs() {
    let cfg = CheckConfig {
        followers: 1,
        faults: Faults::parse("loss,swap-old,foreign-route").expect("known faults"),
        max_faults: 2,
        ..CheckConfig::default()
    };
    assert!(cfg.proofs_enabled(), "the settled-node faults imply proofs");
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains("PASS       always    P1 proof is a readback"),
        "{summary}"
    );
    assert!(
        summary.contains("FOUND      sometimes drift is seen"),
        "{summary}"
    );
    assert_eq!(report.unique_states, PINNED_PROOFS_UNIQUE_STATES);
}

const PINNED_PROOFS_UNIQUE_STATES: usize = 242_332;

/// The proof the checker asks is not vacuous: on a settled canary the live
/// proof of the real rules says verified while v2 really serves; stale,
/// naming v1, once a healthy v1 is swapped in behind the route (seed 003's
/// `stale`, issue #24 item 1); failed once a stand-in answers the route.
#[test]
fn a_live_proof_verifies_a_settled_node_and_never_a_drifted_one() {
    let model = FleetModel::new(CheckConfig {
        followers: 1,
        faults: Faults::parse("swap-old,foreign-route").expect("known faults"),
        ..CheckConfig::default()
    });
    let canary = NodeId(0);
    // The shortest path to a state where the canary has settled on v2.
    let path = shortest_path(
        &model,
        |_, w| settled_release(&w.controller(), NodeId(0)) != Some(simulations::fleet::V2),
        12,
    )
    .expect("the canary settles");
    let (settled, _) = path.last().expect("a path").clone();
    assert_eq!(
        settled_release(&settled.controller(), canary),
        Some(simulations::fleet::V2)
    );
    let proof_of =
        |w: &simulations::World| node_proof(None, &w.controller(), canary, &model.fresh(w, canary));
    assert_eq!(proof_of(&settled).verdict, proof::Verdict::Verified);
    use proof::ReasonCode as R;
    // The verdict's reason, and every contradicted check's.
    for (fault, verdict, reason, contradicted) in [
        (
            Action::SwapOld(canary),
            proof::Verdict::Stale,
            R::OlderReleaseServing,
            vec![R::AppFileMismatch, R::ProbeWrongAnswer],
        ),
        (
            Action::ForeignRoute(canary),
            proof::Verdict::Failed,
            R::RouteIdentityMismatch,
            vec![R::RouteIdentityMismatch],
        ),
    ] {
        let drifted = model.transition(&settled, fault, &mut None);
        let proof = proof_of(&drifted);
        assert_eq!(
            (proof.verdict, proof.reason),
            (verdict, Some(reason)),
            "{fault:?}: {}",
            proof.summary
        );
        if verdict == proof::Verdict::Stale {
            assert!(
                proof.summary.ends_with("; v1 (v1) serves in its place"),
                "{}",
                proof.summary
            );
        }
        let false_checks: Vec<R> = proof
            .checks
            .iter()
            .filter(|c| c.ok == Some(false))
            .filter_map(|c| c.reason)
            .collect();
        assert_eq!(false_checks, contradicted, "{fault:?}");
        // The recorded evidence still says all is well: that is the mutant.
        let recorded = node_proof(
            Some(Mutant::ProofTrustsRecordedEvidence),
            &drifted.controller(),
            canary,
            &model.fresh(&drifted, canary),
        );
        assert_eq!(recorded.verdict, proof::Verdict::Verified);
        // An observation records the drift.
        let observed = model.transition(&drifted, Action::Observe(canary), &mut None);
        assert!(observed.controller().nodes[&canary].drift().is_some());
    }
}

/// Generations only matter with a superseding rollout; the approval gate only
/// with an operator who approves. Both together with duplicates and loss are
/// 7.7M states (3 1/2 minutes on a loaded 2-core machine, half of this
/// file's time): that run is ignored here and run by hand,
/// `cargo test --release -p simulations --test checker -- --ignored approval_gate_and_supersede`
/// (or `fleetweft-check --followers 1 --approval --supersede --faults dup,loss`).
/// CI runs the two halves below.
#[test]
#[ignore = "7.7M states, minutes; CI runs the two halves below"]
fn real_rules_pass_with_approval_gate_and_supersede() {
    assert_clean(&CheckConfig {
        followers: 1,
        approval: true,
        supersede: true,
        faults: Faults::parse("dup,loss").expect("known faults"),
        ..CheckConfig::default()
    });
}

/// A superseding rollout under loss (silence, UNKNOWN ops of the old
/// generation, 33 s). Late duplicated commands of the old generation are
/// the ignored run's above (1.55M states with `--faults dup` alone, 82 s)
/// and the generation mutants' (`every_mutant_is_caught_with_the_rule_it_breaks`).
#[test]
fn real_rules_pass_with_supersede_under_loss() {
    let report = assert_clean(&CheckConfig {
        followers: 1,
        supersede: true,
        faults: Faults::parse("loss").expect("known faults"),
        ..CheckConfig::default()
    });
    assert_eq!(report.unique_states, PINNED_SUPERSEDE_LOSS_UNIQUE_STATES);
}

const PINNED_SUPERSEDE_LOSS_UNIQUE_STATES: usize = 959_538;

/// The approval gate with every operator input offered, under duplicates
/// and loss.
#[test]
fn real_rules_pass_with_an_approval_gate_under_dup_and_loss() {
    let report = assert_clean(&CheckConfig {
        followers: 1,
        approval: true,
        faults: Faults::parse("dup,loss").expect("known faults"),
        ..CheckConfig::default()
    });
    assert_eq!(report.unique_states, PINNED_APPROVAL_DUP_LOSS_UNIQUE_STATES);
}

const PINNED_APPROVAL_DUP_LOSS_UNIQUE_STATES: usize = 7_188;

/// The operator's roll back of an op (`--rollback`), with every
/// fault kind: the roll back may be ordered before the stored Commit ever
/// reached the node, so nothing but the agent's own restore report may
/// settle the op as rolled back until the node is past that Commit (S8,
/// S9). Without that guard the checker finds the node switching after the
/// op was recorded as back on the baseline.
#[test]
fn real_rules_pass_with_operator_rollback() {
    let report = assert_clean(&CheckConfig {
        followers: 1,
        rollback: true,
        ..CheckConfig::default()
    });
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains("FOUND      sometimes operator's roll back proven"),
        "{summary}"
    );
}

#[test]
fn real_rules_pass_with_two_slots() {
    assert_clean(&CheckConfig {
        followers: 2,
        slots: 2,
        faults: Faults::parse("loss,wrong-answer,controller-crash").expect("known faults"),
        ..CheckConfig::default()
    });
}

/// Pinned so that model drift shows up in review: if this number changes,
/// the model's behaviour changed. Update it deliberately, with docs/model.md.
#[test]
fn unique_state_count_of_a_small_configuration_is_pinned() {
    let cfg = CheckConfig {
        followers: 1,
        faults: Faults::none(),
        max_faults: 0,
        ..CheckConfig::default()
    };
    let report = run(&cfg, &options());
    // Without faults nothing is ever silent, so no op goes UNKNOWN: only
    // safety is asserted here, plus the count.
    assert_eq!(
        report.failures().count(),
        0,
        "{}",
        simulations::run::summary(&report)
    );
    assert_eq!(report.unique_states, PINNED_SMALL_UNIQUE_STATES);
}

const PINNED_SMALL_UNIQUE_STATES: usize = 514;

/// Waves (one per follower) under a failure budget of 0, with a wrong
/// answer and the operator: the rules hold, and the count is pinned.
#[test]
fn real_rules_pass_with_waves_and_a_failure_budget() {
    let cfg = CheckConfig {
        waves: true,
        slots: 2,
        faults: Faults::none().with(simulations::config::Fault::WrongAnswer),
        ..CheckConfig::default()
    };
    let report = assert_safe(&cfg);
    assert_eq!(report.unique_states, PINNED_WAVES_UNIQUE_STATES);
}

const PINNED_WAVES_UNIQUE_STATES: usize = 13_434;

/// Every safety property held (reachability is not asked: without faults
/// no op goes UNKNOWN, so "UNKNOWN op settles" is not found).
fn assert_safe(cfg: &CheckConfig) -> simulations::Report {
    let report = run(cfg, &options());
    assert_eq!(
        report.failures().count(),
        0,
        "{cfg}:\n{}",
        simulations::run::summary(&report)
    );
    report
}

// The quick_* tests are small configurations that `scripts/mutants.sh
// --sample` runs for every mutant (seconds each); the larger ones above and
// below run in the full suite.

/// A gated plan where the operator offers every command in every state:
/// approvals before the canary passed and twice, pauses of a paused
/// rollout, resolutions of settled ops. The controller refuses them and
/// nothing changes; the approval it accepts comes after the canary.
#[test]
fn quick_real_rules_pass_a_gated_plan_with_every_operator_input_offered() {
    let report = assert_safe(&CheckConfig {
        followers: 1,
        approval: true,
        faults: Faults::none(),
        max_faults: 0,
        ..CheckConfig::default()
    });
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains("FOUND      sometimes rollout completes"),
        "{summary}"
    );
}

/// One follower, a lost message or an early deadline (one fault along a
/// path), a canary that may answer wrongly, and every deadline firing late
/// after its op settled: UNKNOWN ops settle with evidence, and nothing a
/// late deadline does changes a settled op.
#[test]
fn quick_real_rules_pass_one_follower_with_early_and_late_deadlines() {
    assert_clean(&CheckConfig {
        followers: 1,
        faults: Faults::parse("loss,wrong-answer,early-timeout").expect("known faults"),
        max_faults: 1,
        ..CheckConfig::default()
    });
}

/// The rule-level mutants of the surviving cargo-mutants of issue 12 whose
/// counterexamples are short, each caught with its rule (the full list
/// runs in `every_mutant_is_caught_with_the_rule_it_breaks`).
#[test]
fn quick_mutants_of_late_and_early_inputs_are_caught() {
    for mutant in [
        Mutant::TimeoutUnknowsSettledOp,
        Mutant::ProbeFailurePausesAgain,
        Mutant::ApproveWithoutGate,
    ] {
        let report = check_mutant(mutant);
        let failed: Vec<&str> = report
            .failures()
            .filter_map(|p| p.rule.as_deref())
            .collect();
        assert_eq!(failed, vec![mutant.breaks().code()], "{}", mutant.name());
    }
}

#[test]
fn every_mutant_is_caught_with_the_rule_it_breaks() {
    for mutant in Mutant::ALL {
        let report = check_mutant(mutant);
        let failed: Vec<&str> = report
            .failures()
            .filter_map(|p| p.rule.as_deref())
            .collect();
        let allowed: Vec<&str> = mutant.also_breaks().iter().map(|r| r.code()).collect();
        let expected: Vec<&str> = failed
            .iter()
            .copied()
            .filter(|code| *code == mutant.breaks().code() || allowed.contains(code))
            .collect();
        assert!(
            failed.contains(&mutant.breaks().code()) && failed == expected,
            "mutant {} must break {} (and at most {allowed:?}):\n{}",
            mutant.name(),
            mutant.breaks(),
            simulations::run::summary(&report)
        );
        let cex = report
            .failures()
            .find(|p| p.rule.as_deref() == Some(mutant.breaks().code()))
            .and_then(|p| p.counterexample.clone())
            .expect("a failure carries its counterexample");
        let broken = format!("=> breaks {}", mutant.breaks());
        assert!(
            cex.last().is_some_and(|l| l.starts_with(&broken)),
            "{}: {cex:?}",
            mutant.name()
        );
        assert!(report.properties.iter().any(|p| p.status == Status::Fail));
    }
}

/// The new mutant is caught by P1 with the shortest story: the canary
/// settles, an old release is swapped in behind it, and the proof answered
/// from the evidence recorded at settlement says verified.
#[test]
fn proof_trusting_recorded_evidence_is_caught_by_p1() {
    let report = check_mutant(Mutant::ProofTrustsRecordedEvidence);
    let failed: Vec<&str> = report.failures().map(|p| p.name.as_str()).collect();
    assert_eq!(failed, vec!["P1 proof is a readback"]);
    let cex = report
        .failures()
        .next()
        .and_then(|p| p.counterexample.clone())
        .expect("a counterexample");
    // 0. initial, 1-5 the canary settles, 6 the swap, 7 the proof, verdict.
    assert_eq!(cex.len(), 9, "{cex:#?}");
    assert!(cex[6].starts_with("6. a healthy v1 is SWAPPED IN behind node-a"));
    assert!(cex[7].contains("proof (recorded): node-a: verified for v2"));
}

/// Issue 12.4: the checker exercises every row of the agent's recovery
/// table (SPEC §5, S14). A crash while staging (before, during or after
/// the artifact's write, or after staging) reaches retry, resume, stop on
/// an unknown effect and, crashing again after that stop, a person's
/// wait; a failing attempt (`stage-error`) reaches stop on a permanent
/// error, on missing evidence and, three transient failures in a row, on
/// a spent budget. Each row is a `sometimes` property that must be found,
/// and S14 holds throughout.
#[test]
fn the_agent_crash_fault_covers_the_recovery_table() {
    let cfg = CheckConfig {
        followers: 0,
        faults: Faults::parse("agent-crash,stage-error").expect("known faults"),
        max_faults: 3,
        operator: false,
        ..CheckConfig::default()
    };
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    // Resuming a fetch from some chunks needs a release of several
    // (`a_crash_at_every_point_of_a_chunked_fetch_resumes_from_verified_chunks`).
    // An interrupted migration needs a release with one
    // (`a_crash_while_a_migration_runs_stops_and_is_never_run_again`).
    let one_chunk = model::recovery::Row::ALL.into_iter().filter(|r| {
        !matches!(
            r,
            model::recovery::Row::PartlyVerified | model::recovery::Row::MigrationInterrupted
        )
    });
    for row in one_chunk {
        let name = simulations::properties::recovery_row_name(row);
        assert!(
            summary.contains(&format!("FOUND      sometimes {name}")),
            "{row:?} never taken:\n{summary}"
        );
    }
    assert!(
        summary.contains("PASS       always    S14 agent recovery"),
        "{summary}"
    );
    assert_eq!(report.unique_states, PINNED_RECOVERY_UNIQUE_STATES);
}

const PINNED_RECOVERY_UNIQUE_STATES: usize = 1_203;

/// Issue 23.3: the configuration above with a release of three chunks
/// (`--chunks 3`). The fetch runs one chunk per step, and the agent may be
/// SIGKILLed before any write, in the middle of a chunk's write (leaving
/// it partial, torn, or complete but not journaled) and around the tree's
/// assembly, up to three times along a path, resumed fetches included. A
/// restart re-verifies every chunk present, keeps those that verify and
/// fetches only the others: every row of the table is taken (resuming the
/// fetch from re-verified chunks among them), a chunk cut short is fetched
/// again, and S14 holds, with its chunk rules (only re-verified chunks
/// kept, a verified chunk never fetched again, nothing staged or resumed
/// to a commit request before every chunk verified) and the bound on a
/// resume (at most one chunk fetched again per crash).
#[test]
fn a_crash_at_every_point_of_a_chunked_fetch_resumes_from_verified_chunks() {
    let cfg = CheckConfig {
        followers: 0,
        faults: Faults::parse("agent-crash,stage-error").expect("known faults"),
        max_faults: 3,
        operator: false,
        chunks: 3,
        ..CheckConfig::default()
    };
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    let chunked_rows = model::recovery::Row::ALL
        .into_iter()
        .filter(|r| *r != model::recovery::Row::MigrationInterrupted);
    for row in chunked_rows {
        let name = simulations::properties::recovery_row_name(row);
        assert!(
            summary.contains(&format!("FOUND      sometimes {name}")),
            "{row:?} never taken:\n{summary}"
        );
    }
    for found in [
        "FOUND      sometimes a chunk cut short by a crash is fetched again",
        "PASS       always    S14 agent recovery",
    ] {
        assert!(summary.contains(found), "{found}:\n{summary}");
    }
    assert_eq!(report.unique_states, PINNED_CHUNKS_UNIQUE_STATES);
}

const PINNED_CHUNKS_UNIQUE_STATES: usize = 11_667;

/// Issue #24 item 2: every release declares a migration
/// (`--migration`). The canary's agent may be SIGKILLed while it runs
/// (after its start was journaled) and the migration may fail: a restart
/// stops on the table's `MigrationInterrupted` row, never running it
/// again (S14), and a failed one is rolled back with proof (the
/// controller restores and pauses, a serving probe of the baseline
/// settles it). Reversible and irreversible alike; an operator may roll
/// back (the irreversible one then waits for a person).
#[test]
fn a_crash_while_a_migration_runs_stops_and_is_never_run_again() {
    use model::agent::MigrationKind;
    for (kind, pinned) in [
        (MigrationKind::Reversible, PINNED_MIGRATION_UNIQUE_STATES),
        (
            MigrationKind::Irreversible,
            PINNED_IRREVERSIBLE_UNIQUE_STATES,
        ),
    ] {
        let cfg = CheckConfig {
            followers: 1,
            faults: Faults::parse("agent-crash,migration-error").expect("known faults"),
            max_faults: 2,
            rollback: true,
            migration: Some(kind),
            ..CheckConfig::default()
        };
        let report = assert_clean(&cfg);
        let summary = simulations::run::summary(&report);
        for found in [
            "FOUND      sometimes recovery table: stop on an interrupted migration",
            "FOUND      sometimes a failed migration is rolled back with proof",
            "PASS       always    S14 agent recovery",
        ] {
            assert!(summary.contains(found), "{kind:?} {found}:\n{summary}");
        }
        assert_eq!(report.unique_states, pinned, "{kind:?}");
    }
}

/// `a_crash_while_a_migration_runs_stops_and_is_never_run_again`'s spaces.
const PINNED_MIGRATION_UNIQUE_STATES: usize = 510_612;
const PINNED_IRREVERSIBLE_UNIQUE_STATES: usize = 645_294;

/// The migration mutant is caught by S14 with the shortest story: the
/// canary's agent is SIGKILLed while the migration runs, and its restart
/// starts the migration again.
#[test]
fn retrying_an_interrupted_migration_is_caught_by_s14() {
    let report = check_mutant(Mutant::RetryInterruptedMigration);
    let failed: Vec<&str> = report.failures().map(|p| p.name.as_str()).collect();
    assert_eq!(failed, vec!["S14 agent recovery"]);
    let cex = report
        .failures()
        .next()
        .and_then(|p| p.counterexample.clone())
        .expect("a counterexample");
    assert!(
        cex.iter()
            .any(|step| step.contains("SIGKILLed while the migration runs")),
        "{cex:#?}"
    );
    assert!(
        cex.last().is_some_and(
            |v| v.contains("started the migration of op0 again after it was interrupted")
        ),
        "{cex:#?}"
    );
}

/// The chunk mutant is caught by S14 with the shortest story: the canary's
/// agent is SIGKILLed in the middle of its first chunk's write, and on
/// restart keeps the partial chunk as if it had verified.
#[test]
fn resume_trusting_an_unverified_chunk_is_caught_by_s14() {
    let report = check_mutant(Mutant::ResumeTrustsUnverifiedChunk);
    let failed: Vec<&str> = report.failures().map(|p| p.name.as_str()).collect();
    assert_eq!(failed, vec!["S14 agent recovery"]);
    let cex = report
        .failures()
        .next()
        .and_then(|p| p.counterexample.clone())
        .expect("a counterexample");
    // 0. initial, 1 start, 2 apply, 3 the crash mid-write, verdict.
    assert_eq!(cex.len(), 5, "{cex:#?}");
    assert!(cex[3].contains("left PARTIAL"), "{cex:#?}");
    assert!(
        cex[4].ends_with("the agent kept chunks {0} of op0 that did not re-verify (verified {}, unverified {0}, tree Absent)"),
        "{cex:#?}"
    );
}

/// Enrolled nodes and an operator who may retire one (R1): a retirement
/// is refused while the node's op holds a slot, a rollout whose follower
/// was retired before its grant waits (nothing is granted to it), and the
/// rules hold with a lost message or a wrong answer along a path.
#[test]
fn quick_real_rules_pass_with_a_roster_and_a_retirement() {
    let cfg = CheckConfig {
        followers: 1,
        roster: true,
        faults: Faults::parse("loss,wrong-answer").expect("known faults"),
        ..CheckConfig::default()
    };
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains("PASS       always    R1 the roster holds"),
        "{summary}"
    );
    assert_eq!(report.unique_states, PINNED_ROSTER_UNIQUE_STATES);
}

const PINNED_ROSTER_UNIQUE_STATES: usize = 14_980;
/// `quick_real_rules_pass_with_an_identity_conflict`'s space.
const PINNED_IDENTITY_CONFLICT_UNIQUE_STATES: usize = 10_612;
/// `quick_real_rules_pass_with_a_mixed_fleet`'s space.
const PINNED_MIXED_FLEET_UNIQUE_STATES: usize = 5_402;
/// `quick_real_rules_pass_with_a_configuration_rollout`'s space.
const PINNED_CONFIG_UNIQUE_STATES: usize = 12_852;

/// The R1 mutant is caught with the shortest story: the canary is
/// granted, and the operator retires it while its op holds the slot.
#[test]
fn retiring_a_node_holding_an_op_is_caught_by_r1() {
    let report = check_mutant(Mutant::RetireHoldingOp);
    let failed: Vec<&str> = report.failures().map(|p| p.name.as_str()).collect();
    assert_eq!(failed, vec!["R1 the roster holds"]);
    let cex = report
        .failures()
        .next()
        .and_then(|p| p.counterexample.clone())
        .expect("a counterexample");
    assert!(
        cex.iter().any(|l| l.contains("operator retires node-a")),
        "{cex:#?}"
    );
}

/// A waves configuration whose first wave holds two interchangeable
/// followers (node-b, node-c; slots for both), a wrong answer, the
/// operator.
fn symmetric_waves(symmetry: bool) -> CheckConfig {
    CheckConfig {
        waves: true,
        wave_size: 2,
        slots: 2,
        faults: Faults::none().with(Fault::WrongAnswer),
        symmetry,
        ..CheckConfig::default()
    }
}

/// Symmetry reduction over a wave's followers (issue #11): the real rules
/// pass both ways with the same verdicts, both counts are pinned, and the
/// reduced count is smaller. It is also exactly the number of orbits of
/// the worlds reachable without it: no orbit is lost, none is added.
#[test]
fn symmetry_over_a_wave_reduces_the_space_and_loses_no_orbit() {
    let full = assert_safe(&symmetric_waves(false));
    let reduced = assert_safe(&symmetric_waves(true));
    let verdicts = |r: &simulations::Report| -> Vec<(String, Status)> {
        r.properties
            .iter()
            .map(|p| (p.name.clone(), p.status.clone()))
            .collect()
    };
    assert_eq!(verdicts(&full), verdicts(&reduced));
    assert_eq!(full.unique_states, PINNED_WAVE_OF_TWO_UNIQUE_STATES);
    assert_eq!(reduced.unique_states, PINNED_WAVE_OF_TWO_SYMMETRIC_STATES);
    assert!(reduced.unique_states < full.unique_states);
    let model = FleetModel::new(symmetric_waves(true));
    let (worlds, orbits) = simulations::symmetry::reachable_orbits(&model);
    assert_eq!(worlds, full.unique_states);
    assert_eq!(orbits, reduced.unique_states);
}

const PINNED_WAVE_OF_TWO_UNIQUE_STATES: usize = 23_640;
const PINNED_WAVE_OF_TWO_SYMMETRIC_STATES: usize = 12_104;

/// The rules `cfg` finds broken, checked without and with symmetry
/// reduction: they must be the same.
fn broken_both_ways(cfg: &CheckConfig) -> Vec<String> {
    let rules = |cfg: &CheckConfig| -> Vec<String> {
        run(cfg, &options())
            .failures()
            .filter_map(|p| p.rule.clone())
            .collect()
    };
    let without = rules(&CheckConfig {
        symmetry: false,
        ..cfg.clone()
    });
    let with = rules(&CheckConfig {
        symmetry: true,
        ..cfg.clone()
    });
    assert_eq!(without, with, "{cfg}");
    without
}

/// Every mutant checked in the symmetric waves configuration (tuned for
/// it) breaks the same rules without and with the reduction; mutants
/// whose tuning needs a second rollout or a roster (no symmetry there)
/// are left out. The two waves mutants are caught both ways with their
/// rule, `wave-before-settled` with a second wave (node-d) to open early.
/// About 3 minutes: every mutant the configuration does not catch is
/// explored in full, twice. Not in CI (its 30-minute budget); CI runs
/// [`the_waves_mutants_stay_caught_with_symmetry`]. Run it with
/// `cargo test --release -p simulations --test checker -- --ignored`.
#[test]
#[ignore = "3 minutes; CI runs the waves mutants only"]
fn mutants_caught_in_a_symmetric_wave_stay_caught_with_symmetry() {
    let mut caught = Vec::new();
    for mutant in Mutant::ALL {
        let mut cfg = symmetric_waves(false);
        cfg.mutant = Some(mutant);
        mutant.tune(&mut cfg);
        cfg.slots = cfg.slots.max(cfg.wave_size);
        if cfg.supersede || cfg.roster || cfg.faults.has(Fault::Snapshot) {
            continue;
        }
        if broken_both_ways(&cfg) == vec![mutant.breaks().code().to_string()] {
            caught.push(mutant.name());
        }
    }
    assert!(caught.contains(&"budget-ignored"), "{caught:?}");
    eprintln!("caught both ways: {caught:?}");
    let two_waves = CheckConfig {
        followers: 3,
        mutant: Some(Mutant::WaveBeforeSettled),
        ..symmetric_waves(false)
    };
    assert_eq!(broken_both_ways(&two_waves), vec!["S4".to_string()]);
}

/// The two waves mutants break the same rule with and without the
/// reduction (the small version of the test above, for CI).
#[test]
fn the_waves_mutants_stay_caught_with_symmetry() {
    let mut budget = symmetric_waves(false);
    budget.mutant = Some(Mutant::BudgetIgnored);
    Mutant::BudgetIgnored.tune(&mut budget);
    budget.slots = budget.slots.max(budget.wave_size);
    assert_eq!(broken_both_ways(&budget), vec!["B1".to_string()]);
    let two_waves = CheckConfig {
        followers: 3,
        mutant: Some(Mutant::WaveBeforeSettled),
        ..symmetric_waves(false)
    };
    assert_eq!(broken_both_ways(&two_waves), vec!["S4".to_string()]);
}

/// The symmetry is real: every renaming of a wave's followers of every
/// world reachable without reduction is reachable too (breadth first,
/// the first one that is not is shown with its path). A rule that starts
/// telling a wave's followers apart breaks this test before it makes the
/// reduction unsound.
#[test]
fn renamings_of_reachable_worlds_are_reachable() {
    let model = FleetModel::new(symmetric_waves(true));
    if let Some((path, world, renamed)) = simulations::symmetry::first_asymmetry(&model) {
        panic!("renaming not reachable after {path:#?}\n{world:#?}\nrenamed: {renamed:#?}");
    }
}

/// `controller-failover` (issue #14): a standby takes over from the
/// durable log while the deposed leader still hears from the agents and its
/// messages are still in flight, plus a duplicated or lost message along a
/// path. Under the real rules the deposed leader's first append is fenced
/// (found, so the fault reaches the point where fencing matters), nothing
/// it decided after the takeover reaches the log, and every rule holds.
#[test]
fn quick_real_rules_pass_with_controller_failover() {
    let cfg = CheckConfig {
        followers: 1,
        faults: Faults::parse("controller-failover,dup,loss").expect("known faults"),
        max_faults: 2,
        // With the operator the space is 2.8 million states (233 s here);
        // `fleetweft-check --followers 1 --faults controller-failover,dup
        // --max-faults 2` runs it, clean.
        operator: false,
        ..CheckConfig::default()
    };
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains("FOUND      sometimes deposed leader's append fenced"),
        "{summary}"
    );
    assert!(
        summary.contains("FOUND      sometimes rollout completes"),
        "{summary}"
    );
    assert_eq!(report.unique_states, PINNED_FAILOVER_UNIQUE_STATES);
}

const PINNED_FAILOVER_UNIQUE_STATES: usize = 121_425;

/// `unfenced-append` is caught by S6 with the shortest story: the canary
/// asks for its commit decision, a standby takes over and decides it, and
/// the deposed leader, hearing the same request, decides again on what it
/// knew; its append lands beside the stored decision.
#[test]
fn an_unfenced_deposed_leader_is_caught_by_s6() {
    let report = check_mutant(Mutant::UnfencedAppend);
    let failed: Vec<&str> = report.failures().map(|p| p.name.as_str()).collect();
    // S8 too: in the same breadth-first block the deposed leader records a
    // late report on an op the new leader settled (`Mutant::also_breaks`).
    assert_eq!(failed, vec!["S6 stable decisions", "S8 no stale apply"]);
    let cex = report
        .failures()
        .next()
        .and_then(|p| p.counterexample.clone())
        .expect("a counterexample");
    assert!(cex.iter().any(|l| l.contains("TAKES OVER")), "{cex:#?}");
    assert!(cex.iter().any(|l| l.contains("DEPOSED leader")), "{cex:#?}");
}

/// The snapshot configuration (issue #26 item 4): one node, no operator,
/// the log as a restart reads it (`snapshot`: snapshots written between
/// batches, a write torn by a crash, archiving of what the newest snapshot
/// that verifies covers) and plain controller crashes, two faults along a
/// path. Every restart rebuilds its state from the newest snapshot that
/// verifies plus the events after it, and D1 holds in every state: what a
/// restart would rebuild is the fold of every durable event. Both stories
/// are reached: a restart from a snapshot after archiving deleted the
/// entries it covers, and one that skips a torn snapshot. Safety only:
/// nothing is lost, so no op goes UNKNOWN.
#[test]
fn quick_real_rules_pass_with_snapshots_torn_writes_and_archiving() {
    let report = assert_safe(&snapshot_config());
    let summary = simulations::run::summary(&report);
    for line in [
        "PASS       always    D1 a restart rebuilds the fold",
        "FOUND      sometimes restart from a snapshot after archiving",
        "FOUND      sometimes restart skips a torn snapshot",
    ] {
        assert!(summary.contains(line), "{summary}");
    }
    assert_eq!(report.unique_states, PINNED_SNAPSHOT_UNIQUE_STATES);
}

const PINNED_SNAPSHOT_UNIQUE_STATES: usize = 94_363;

fn snapshot_config() -> CheckConfig {
    CheckConfig {
        followers: 0,
        operator: false,
        faults: Faults::parse("snapshot,controller-crash").expect("known faults"),
        max_faults: 2,
        ..CheckConfig::default()
    }
}

/// The two snapshot mutants are caught by D1 with the shortest stories:
/// a restart that loads the torn snapshot it crashed writing (one step),
/// and archiving up to a torn snapshot, after which no start is possible
/// (two steps).
#[test]
fn quick_snapshot_mutants_are_caught_by_d1() {
    for (mutant, steps, last_step) in [
        (Mutant::LoadUnverifiedSnapshot, 1, "TORN"),
        (
            Mutant::ArchivePastSnapshot,
            2,
            "archiving DELETES log entries 0..1",
        ),
    ] {
        let report = check_mutant(mutant);
        let failed: Vec<&str> = report.failures().map(|p| p.name.as_str()).collect();
        assert_eq!(
            failed,
            vec!["D1 a restart rebuilds the fold"],
            "{}",
            mutant.name()
        );
        let cex = report
            .failures()
            .next()
            .and_then(|p| p.counterexample.clone())
            .expect("a counterexample");
        // 0. the initial state, the steps, then the rule broken.
        assert_eq!(cex.len(), steps + 2, "{}: {cex:#?}", mutant.name());
        assert!(
            cex[steps].contains(last_step),
            "{}: {cex:#?}",
            mutant.name()
        );
    }
}

/// (issue #22 item 2) A second agent holds a node's identity at any moment
/// of a rollout, a lost message along another path: the controller
/// quarantines the node, sends it nothing until an operator releases it
/// (Q1 against the ground truth of the clone), and the other rules hold
/// while its op waits. The count is pinned.
#[test]
fn quick_real_rules_pass_with_an_identity_conflict() {
    let cfg = CheckConfig {
        followers: 1,
        faults: Faults::parse("loss,identity-conflict").expect("known faults"),
        ..CheckConfig::default()
    };
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains("PASS       always    Q1 quarantine silences"),
        "{summary}"
    );
    assert_eq!(report.unique_states, PINNED_IDENTITY_CONFLICT_UNIQUE_STATES);
}

/// A configuration rollout (issue #24 item 1): the operator records the
/// app's revision, and the start deploys v1's code with it as v2 (code
/// unchanged, configuration new): refused before the revision is
/// recorded, then rolled out like any release under a lost message, a
/// wrong answer and an agent crash; C1 holds and the rollout completes.
/// The count is pinned.
#[test]
fn quick_real_rules_pass_with_a_configuration_rollout() {
    let cfg = CheckConfig {
        followers: 1,
        config: true,
        faults: Faults::parse("loss,wrong-answer,agent-crash").expect("known faults"),
        ..CheckConfig::default()
    };
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains(
            "PASS       always    C1 a rollout deploys the configuration the log recorded"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("FOUND      sometimes rollout completes"),
        "{summary}"
    );
    assert_eq!(report.unique_states, PINNED_CONFIG_UNIQUE_STATES);
}

/// (issue #24 item 1) After a configuration rollout, a node's app is
/// restarted by hand with an old configuration: the real proof never says
/// `verified` for it (P1), under a lost message, a wrong answer and an
/// agent crash. The count is pinned.
#[test]
fn quick_real_rules_pass_with_an_app_restarted_with_an_old_configuration() {
    let cfg = CheckConfig {
        followers: 1,
        config: true,
        faults: Faults::parse("loss,wrong-answer,agent-crash,old-config").expect("known faults"),
        ..CheckConfig::default()
    };
    assert!(cfg.proofs_enabled(), "old-config brings the proofs along");
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains("PASS       always    P1 proof is a readback"),
        "{summary}"
    );
    assert_eq!(report.unique_states, PINNED_OLD_CONFIG_UNIQUE_STATES);
}

/// `quick_real_rules_pass_with_an_app_restarted_with_an_old_configuration`'s
/// space.
const PINNED_OLD_CONFIG_UNIQUE_STATES: usize = 77_969;

/// (issue #28 item 2) Named operators: the admin makes every operator
/// input and a viewer tries to approve every rollout, with a gate to pass;
/// O1 holds under a lost message or a wrong answer, and the rollout still
/// completes (the admin approves). The count is pinned: the viewer's
/// refused attempts add no state.
#[test]
fn quick_real_rules_pass_with_named_operators() {
    let cfg = CheckConfig {
        followers: 1,
        approval: true,
        operators: true,
        faults: Faults::parse("loss,wrong-answer").expect("known faults"),
        ..CheckConfig::default()
    };
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains("PASS       always    O1 an operator acts within its role"),
        "{summary}"
    );
    assert!(
        summary.contains("FOUND      sometimes rollout completes"),
        "{summary}"
    );
    let without = assert_clean(&CheckConfig {
        operators: false,
        ..cfg
    });
    assert_eq!(
        report.unique_states, without.unique_states,
        "who acts changes no state: the same space as without operators"
    );
    assert_eq!(report.unique_states, PINNED_OPERATORS_UNIQUE_STATES);
}

/// `quick_real_rules_pass_with_named_operators`'s space.
const PINNED_OPERATORS_UNIQUE_STATES: usize = 5_624;

/// (issue #24 item 5) A mixed fleet: the canary runs on aarch64, the
/// follower on x86_64. A release with a tree for each rolls out; one built
/// for x86_64 only is refused before anything is granted, and A1 holds
/// under a lost message or a wrong answer. The count is pinned.
#[test]
fn quick_real_rules_pass_with_a_mixed_fleet() {
    let cfg = CheckConfig {
        followers: 1,
        arches: true,
        faults: Faults::parse("loss,wrong-answer").expect("known faults"),
        ..CheckConfig::default()
    };
    let report = assert_clean(&cfg);
    let summary = simulations::run::summary(&report);
    assert!(
        summary.contains("PASS       always    A1 a release runs where it has a tree"),
        "{summary}"
    );
    assert!(
        summary.contains("FOUND      sometimes rollout completes"),
        "{summary}"
    );
    assert_eq!(report.unique_states, PINNED_MIXED_FLEET_UNIQUE_STATES);
}
