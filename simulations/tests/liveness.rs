//! Liveness under weak fairness (issue #27 item 2): each liveness mutant is
//! caught by the property it names, with a lasso (a stem, a mark where the
//! loop starts, the loop), and the real rules pass every liveness property
//! in the default configuration.

use simulations::gallery::check_mutant;
use simulations::liveness::Liveness;
use simulations::mutants::Breaks;
use simulations::{run, CheckConfig, LivenessCheck, Mutant, RunOptions, Status};

fn options() -> RunOptions {
    RunOptions {
        threads: 1,
        progress: false,
        order: Default::default(),
    }
}

/// The mutants that break only liveness.
fn liveness_mutants() -> Vec<(Mutant, Liveness)> {
    Mutant::ALL
        .into_iter()
        .filter_map(|m| match m.breaks() {
            Breaks::Liveness(property) => Some((m, property)),
            Breaks::Rule(_) => None,
        })
        .collect()
}

#[test]
fn every_liveness_property_has_a_mutant() {
    let covered: Vec<Liveness> = liveness_mutants().into_iter().map(|(_, p)| p).collect();
    for property in Liveness::ALL {
        assert!(
            covered.contains(&property),
            "{} has no mutant",
            property.name()
        );
    }
}

#[test]
fn each_liveness_mutant_is_caught_with_a_lasso_and_breaks_no_safety_rule() {
    for (mutant, property) in liveness_mutants() {
        let report = check_mutant(mutant);
        let summary = simulations::run::summary(&report);
        // Every safety property held: the mutant breaks only liveness.
        for p in report.properties.iter().filter(|p| p.kind == "always") {
            assert_eq!(
                p.status,
                Status::Pass,
                "{}: {}\n{summary}",
                mutant.name(),
                p.name
            );
        }
        let allowed: Vec<&str> = mutant.also_breaks().iter().map(|b| b.code()).collect();
        for failed in report.failures() {
            let code = failed.rule.as_deref().unwrap_or("?");
            assert!(
                code == property.code() || allowed.contains(&code),
                "{}: unexpected failure {}\n{summary}",
                mutant.name(),
                failed.name
            );
        }
        let broken = report
            .failures()
            .find(|p| p.name == property.name())
            .unwrap_or_else(|| {
                panic!(
                    "{} not caught by {}\n{summary}",
                    mutant.name(),
                    property.name()
                )
            });
        let steps = broken.counterexample.clone().expect("a lasso");
        let mark = steps
            .iter()
            .position(|s| s.starts_with("↻ loop:"))
            .unwrap_or_else(|| panic!("{}: no loop mark in {steps:?}", mutant.name()));
        assert!(
            mark >= 2,
            "{}: a stem of at least one step: {steps:?}",
            mutant.name()
        );
        let verdict = steps.last().expect("a verdict");
        assert!(
            verdict.starts_with(&format!("=> breaks {}", property.name())),
            "{}: {verdict}",
            mutant.name()
        );
        let chart = broken.diagram.as_ref().expect("a chart").mermaid();
        assert!(
            chart.contains("↻ loop:"),
            "{}: the chart marks the loop",
            mutant.name()
        );
    }
}

/// The pause-freezes-accounting loop is a real cycle (not a state where
/// nothing fair changes anything): the agent re-sends its report, the
/// frozen controller ignores it, and so on forever.
#[test]
fn a_frozen_pause_is_caught_with_a_cycle_of_retries() {
    let report = check_mutant(Mutant::PauseFreezesAccounting);
    let broken = report
        .failures()
        .find(|p| p.name == Liveness::NoSlotHeldForever.name())
        .expect("LV3 breaks");
    let steps = broken.counterexample.clone().expect("a lasso");
    let verdict = steps.last().expect("a verdict");
    assert!(verdict.contains("repeat forever"), "{verdict}");
    let mark = steps
        .iter()
        .position(|s| s.starts_with("↻ loop:"))
        .expect("mark");
    let looped = &steps[mark + 1..steps.len() - 1];
    assert!(
        looped.iter().any(|s| s.contains("retries")),
        "the loop has the agent's retry: {looped:?}"
    );
}

/// The real rules, every liveness property, in a small configuration
/// (one follower, loss and an early deadline, an operator).
#[test]
fn real_rules_pass_liveness_with_one_follower() {
    let cfg = CheckConfig {
        followers: 1,
        faults: simulations::Faults::parse("loss,partition,agent-crash,early-timeout")
            .expect("known faults"),
        liveness: LivenessCheck::Only,
        ..CheckConfig::default()
    };
    let report = run(&cfg, &options());
    let summary = simulations::run::summary(&report);
    assert_eq!(report.properties.len(), Liveness::ALL.len(), "{summary}");
    assert!(
        report.properties.iter().all(|p| p.status == Status::Pass),
        "{summary}"
    );
}

/// The default configuration passes every liveness property (the graph
/// of about a million states; about a minute in release).
#[test]
fn real_rules_pass_liveness_in_the_default_configuration() {
    let cfg = CheckConfig {
        liveness: LivenessCheck::Only,
        ..CheckConfig::default()
    };
    let report = run(&cfg, &options());
    let summary = simulations::run::summary(&report);
    assert!(
        report.properties.iter().all(|p| p.status == Status::Pass),
        "{summary}"
    );
    let figures = report.liveness.expect("the liveness graph was explored");
    assert_eq!(figures.states, DEFAULT_LIVENESS_STATES, "{summary}");
}

/// States of the default configuration's liveness graph. Fewer than the
/// safety run's pinned 1,006,168: with liveness on, a lost message breaks
/// its link and the agent redials at once (`FleetModel::reconnect_after_loss`),
/// which leaves fewer distinct worlds after a loss.
const DEFAULT_LIVENESS_STATES: usize = 989_405;
