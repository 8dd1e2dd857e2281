//! The checker against the real rules and against every mutant.

use simulations::gallery::check_mutant;
use simulations::{run, CheckConfig, Faults, Mutant, RunOptions, Status};

fn options() -> RunOptions {
    RunOptions {
        threads: 2,
        progress: false,
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
/// 1 slot, every fault kind with a budget of one, operator on.
#[test]
fn real_rules_pass_the_default_configuration() {
    let report = assert_clean(&CheckConfig::default());
    assert!(
        report.unique_states > 100_000,
        "explored too little: {}",
        report.unique_states
    );
}

/// Generations only matter with a superseding rollout; the approval gate only
/// with an operator who approves.
#[test]
fn real_rules_pass_with_approval_gate_and_supersede() {
    // The full fault set with supersede is ~9M states (minutes); duplicates
    // (late commands of the old generation) and loss (silence, UNKNOWN) are
    // the faults that matter for generations and keep this near 20 s.
    assert_clean(&CheckConfig {
        followers: 1,
        approval: true,
        supersede: true,
        faults: Faults::parse("dup,loss").expect("known faults"),
        ..CheckConfig::default()
    });
}

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

const PINNED_SMALL_UNIQUE_STATES: usize = 1_060;

#[test]
fn every_mutant_is_caught_with_the_rule_it_breaks() {
    for mutant in Mutant::ALL {
        let report = check_mutant(mutant);
        let failed: Vec<&str> = report
            .failures()
            .filter_map(|p| p.rule.as_deref())
            .collect();
        assert_eq!(
            failed,
            vec![mutant.breaks().code()],
            "mutant {} must break exactly {}:\n{}",
            mutant.name(),
            mutant.breaks(),
            simulations::run::summary(&report)
        );
        let cex = report
            .failures()
            .next()
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
