//! The properties the checker verifies: one `always` per rule S1–S11 (and,
//! with proofs on, P1: proof is a readback) and a few `sometimes`
//! reachability properties standing in for liveness (stateright's
//! `eventually` is unsound on cycles and has no fairness).

use crate::config::Fault;
use crate::fleet::{Action, FleetModel};
use crate::world::{App, World};
use invariants::Rule;
use model::controller::{OpPhase, Outcome, RolloutStatus};
use model::recovery::Row;
use model::NodeId;
use stateright::{Model, Property};

fn holds(world: &World, rule: Rule) -> bool {
    world.violation.as_ref().is_none_or(|v| v.rule != rule)
}

/// S11 against the ground truth: the controller never counts a canary as
/// verified while that canary's route serves the release wrongly.
pub fn canary_truth_agrees(world: &World) -> bool {
    let ctrl = world.controller();
    ctrl.ops.values().all(|op| {
        let index = op.node.0 as usize;
        !(op.is_canary
            && op.phase == OpPhase::Settled(Outcome::Verified)
            && world.agents[index].serving == Some(op.release)
            && world.apps[index] == App::Wrong)
    })
}

/// S10 against the ghost record of what the operator actually did.
pub fn human_waits_hold(world: &World) -> bool {
    let ghost = &world.ghost;
    invariants::s10_human_waits_survive(
        &world.controller(),
        &|r| ghost.approved_by_operator & (1 << r.0) != 0,
        &|op| ghost.resolved_by_operator & (1 << op.0) != 0,
    )
    .is_ok()
}

/// P1 against the ground truth: no live proof said `verified` while the
/// node's route did not really serve the intended release correctly.
pub fn proofs_tell_the_truth(world: &World) -> bool {
    world.ghost.proof_lied.is_none()
}

/// A node whose route drifted (swapped or foreign) is reported drifted by
/// the controller's record of it.
pub fn drift_seen(world: &World) -> bool {
    let ctrl = world.controller();
    world.apps.iter().enumerate().any(|(index, app)| {
        app.drifted()
            && ctrl
                .nodes
                .get(&NodeId(index as u32))
                .is_some_and(|r| r.drift().is_some())
    })
}

/// The property name that stands for each rule.
pub fn property_name(rule: Rule) -> &'static str {
    match rule {
        Rule::S1 => "S1 slot bound",
        Rule::S2 => "S2 one live op per node",
        Rule::S3 => "S3 evidence releases a slot",
        Rule::S4 => "S4 canary first",
        Rule::S5 => "S5 pause stops grants, not accounting",
        Rule::S6 => "S6 stable decisions",
        Rule::S7 => "S7 persist before reply",
        Rule::S8 => "S8 no stale apply",
        Rule::S9 => "S9 restore needs proof",
        Rule::S10 => "S10 human waits survive",
        Rule::S11 => "S11 wrong answer stops",
        Rule::S14 => "S14 agent recovery",
        Rule::ProofIsReadback => "P1 proof is a readback",
        Rule::NamesWhatExists => "W1 events name what exists",
        Rule::EndsWhenNothingLeft => "L1 a rollout with nothing left ends",
        Rule::QuarantineSilences => "Q1 quarantine silences",
        Rule::RosterHolds => "R1 the roster holds",
        Rule::FailureBudget => "B1 failure budgets",
        Rule::RestartRebuildsTheFold => "D1 a restart rebuilds the fold",
        Rule::DeadlineForEveryWait => "T1 a deadline for every wait",
        Rule::ArchHasATree => "A1 a release runs where it has a tree",
        Rule::DeploysRecordedConfig => "C1 a rollout deploys the configuration the log recorded",
        Rule::OperatorHasTheRole => "O1 an operator acts within its role",
    }
}

/// The rule a property name stands for.
pub fn rule_of(name: &str) -> Option<Rule> {
    Rule::ALL.into_iter().find(|r| property_name(*r) == name)
}

/// The `sometimes` property that stands for a row of the recovery table.
pub fn recovery_row_name(row: Row) -> &'static str {
    match row {
        Row::WaitingForPerson => "recovery table: stop, waiting for a person",
        Row::MissingEvidence => "recovery table: stop on missing evidence",
        Row::Permanent => "recovery table: stop on a permanent error",
        Row::EffectUnknown => "recovery table: stop on an unknown effect",
        Row::ReVerified => "recovery table: resume on a re-verified artifact",
        Row::Absent => "recovery table: retry, nothing on disk",
        Row::BudgetSpent => "recovery table: stop, attempt budget spent",
        Row::PartlyVerified => "recovery table: resume the fetch from re-verified chunks",
        Row::MigrationInterrupted => "recovery table: stop on an interrupted migration",
    }
}

/// One `sometimes` per row of the recovery table: each row is taken on
/// some path (with `stage-error`, which records the rows taken). `rows`
/// picks which.
fn recovery_row_properties(rows: impl Fn(Row) -> bool) -> Vec<Property<FleetModel>> {
    // `Property` takes a plain fn, so one per row, by index into Row::ALL.
    fn taken<const I: usize>(_: &FleetModel, w: &World) -> bool {
        w.ghost.recovery_rows & (1 << I) != 0
    }
    let conditions: [fn(&FleetModel, &World) -> bool; 9] = [
        taken::<0>, taken::<1>, taken::<2>, taken::<3>, taken::<4>, taken::<5>, taken::<6>,
        taken::<7>, taken::<8>,
    ];
    Row::ALL
        .into_iter()
        .zip(conditions)
        .filter(|(row, _)| rows(*row))
        .map(|(row, condition)| {
            Property::<FleetModel>::sometimes(recovery_row_name(row), condition)
        })
        .collect()
}

/// With `--chunks` 2 or more: the stories of a resumed fetch. A crash
/// mid-fetch resumes from the chunks that re-verified, a chunk cut short
/// is fetched again (at most one per crash: S14, recorded as chunks are
/// fetched), and the rows a crash alone reaches are taken.
fn chunk_properties(stage_error: bool) -> Vec<Property<FleetModel>> {
    let mut props = vec![Property::<FleetModel>::sometimes(
        "a chunk cut short by a crash is fetched again",
        |_, w| w.ghost.chunk_refetched,
    )];
    if !stage_error {
        props.extend(recovery_row_properties(|row| {
            matches!(
                row,
                Row::PartlyVerified | Row::ReVerified | Row::Absent | Row::EffectUnknown
            )
        }));
    }
    props
}

/// With `--migration` (issue #24 item 2): the stories a migration is
/// for. A crash while it runs stops (the table's row, unless `stage-error`
/// already asks every row); a failed one is restored with proof.
fn migration_properties(model: &FleetModel, stage_error: bool) -> Vec<Property<FleetModel>> {
    let mut props = Vec::new();
    if model.cfg.faults.has(Fault::AgentCrash) && !stage_error {
        props.extend(recovery_row_properties(|row| {
            row == Row::MigrationInterrupted
        }));
    }
    if model.cfg.faults.has(Fault::MigrationError) {
        props.push(Property::<FleetModel>::sometimes(
            "a failed migration is rolled back with proof",
            |_, w| w.ghost.failed_migration_rolled_back,
        ));
    }
    props
}

/// With `snapshot`: D1 in every state (recorded by the transitions, which
/// rebuild the state from the log whenever it changes and at every
/// restart), and the stories it is for: a restart from a snapshot after
/// archiving, and one that skips a torn snapshot.
fn snapshot_properties() -> Vec<Property<FleetModel>> {
    vec![
        Property::<FleetModel>::always(property_name(Rule::RestartRebuildsTheFold), |_, w| {
            holds(w, Rule::RestartRebuildsTheFold)
        }),
        Property::<FleetModel>::sometimes("restart from a snapshot after archiving", |_, w| {
            w.ghost.restarted_from_snapshot
        }),
        Property::<FleetModel>::sometimes("restart skips a torn snapshot", |_, w| {
            w.ghost.skipped_torn_snapshot
        }),
    ]
}

/// The properties of every configuration: each safety rule, and the two
/// outcomes every run must reach.
fn base_properties() -> Vec<Property<FleetModel>> {
    vec![
        Property::<FleetModel>::always(property_name(Rule::S1), |_, w| holds(w, Rule::S1)),
        Property::<FleetModel>::always(property_name(Rule::S2), |_, w| holds(w, Rule::S2)),
        Property::<FleetModel>::always(property_name(Rule::S3), |_, w| holds(w, Rule::S3)),
        Property::<FleetModel>::always(property_name(Rule::S4), |_, w| holds(w, Rule::S4)),
        Property::<FleetModel>::always(property_name(Rule::S5), |_, w| holds(w, Rule::S5)),
        Property::<FleetModel>::always(property_name(Rule::S6), |_, w| holds(w, Rule::S6)),
        Property::<FleetModel>::always(property_name(Rule::S7), |_, w| holds(w, Rule::S7)),
        Property::<FleetModel>::always(property_name(Rule::S8), |_, w| holds(w, Rule::S8)),
        Property::<FleetModel>::always(property_name(Rule::S9), |_, w| holds(w, Rule::S9)),
        Property::<FleetModel>::always(property_name(Rule::S10), |_, w| {
            holds(w, Rule::S10) && human_waits_hold(w)
        }),
        Property::<FleetModel>::always(property_name(Rule::S11), |_, w| {
            holds(w, Rule::S11) && canary_truth_agrees(w)
        }),
        Property::<FleetModel>::always(property_name(Rule::S14), |_, w| holds(w, Rule::S14)),
        Property::<FleetModel>::always(property_name(Rule::NamesWhatExists), |_, w| {
            holds(w, Rule::NamesWhatExists)
        }),
        Property::<FleetModel>::always(property_name(Rule::EndsWhenNothingLeft), |_, w| {
            holds(w, Rule::EndsWhenNothingLeft)
        }),
        // No simulated input quarantines a node (the default configuration's
        // state count is unchanged), so this holds trivially there; it
        // fails the moment a run that does quarantine breaks Q1.
        Property::<FleetModel>::always(property_name(Rule::QuarantineSilences), |_, w| {
            holds(w, Rule::QuarantineSilences)
        }),
        // Only a configuration with waves has a budget to break.
        Property::<FleetModel>::always(property_name(Rule::FailureBudget), |_, w| {
            holds(w, Rule::FailureBudget)
        }),
        // Only a configuration with the roster on enrolls and retires.
        Property::<FleetModel>::always(property_name(Rule::RosterHolds), |_, w| {
            holds(w, Rule::RosterHolds)
        }),
        // Checked on every batch (its arm and cancel effects) and at every
        // restart (what the re-armed deadlines cover).
        Property::<FleetModel>::always(property_name(Rule::DeadlineForEveryWait), |_, w| {
            holds(w, Rule::DeadlineForEveryWait)
        }),
        // Only a configuration with `arches` declares platforms and starts
        // per-architecture releases.
        Property::<FleetModel>::always(property_name(Rule::ArchHasATree), |_, w| {
            holds(w, Rule::ArchHasATree)
        }),
        // Only a configuration with `config` records configuration
        // revisions and starts rollouts that deploy one.
        Property::<FleetModel>::always(property_name(Rule::DeploysRecordedConfig), |_, w| {
            holds(w, Rule::DeploysRecordedConfig)
        }),
        // Only a configuration with `operators` records operators.
        Property::<FleetModel>::always(property_name(Rule::OperatorHasTheRole), |_, w| {
            holds(w, Rule::OperatorHasTheRole)
        }),
        Property::<FleetModel>::sometimes("rollout completes", |_, w| {
            w.controller()
                .rollouts
                .front()
                .is_some_and(|r| r.status == RolloutStatus::Completed)
        }),
        Property::<FleetModel>::sometimes("UNKNOWN op settles with evidence", |_, w| {
            w.ghost.unknown_settled
        }),
    ]
}

/// Every property of `model`'s configuration.
///
/// The state rules (S1, S2, S4, S11's controller part, L1) are checked
/// where the controller's state changes, on the state each batch leads to
/// (`FleetModel::controller_events`), and on the initial world; a broken
/// one is the world's recorded violation, which these properties read. So
/// they are not computed again for every state the search visits, most of
/// which the controller's state did not change into (issue #27 item 4).
pub fn properties(model: &FleetModel) -> Vec<Property<FleetModel>> {
    let mut props = base_properties();
    if model.cfg.operator {
        props.push(Property::<FleetModel>::sometimes(
            "paused rollout lets a decided op settle",
            |_, w| w.ghost.settled_while_paused,
        ));
    }
    if model.cfg.operator && model.cfg.rollback {
        props.push(Property::<FleetModel>::sometimes(
            "operator's roll back proven",
            |_, w| w.ghost.operator_rollback_proven,
        ));
    }
    if model.cfg.supersede {
        props.push(Property::<FleetModel>::sometimes(
            "superseded op aborted before its node received it",
            |_, w| w.ghost.aborted_unseen,
        ));
    }
    if model.cfg.faults.has(Fault::WrongAnswer) {
        props.push(Property::<FleetModel>::sometimes(
            "wrong answer rolled back with proof",
            |_, w| w.ghost.rolled_back,
        ));
    }
    if model.cfg.faults.has(Fault::ControllerFailover) {
        props.push(Property::<FleetModel>::sometimes(
            "deposed leader's append fenced",
            |_, w| w.ghost.deposed_fenced,
        ));
    }
    let stage_error = model.cfg.faults.has(Fault::StageError);
    let migration = model.cfg.migration.is_some();
    if stage_error {
        // Partly verified needs a release of several chunks; an
        // interrupted migration, a release with one.
        let chunked = model.cfg.chunks > 1;
        props.extend(recovery_row_properties(|row| match row {
            Row::PartlyVerified => chunked,
            Row::MigrationInterrupted => migration && model.cfg.faults.has(Fault::AgentCrash),
            _ => true,
        }));
    }
    if migration {
        props.extend(migration_properties(model, stage_error));
    }
    if model.cfg.chunks > 1 && model.cfg.faults.has(Fault::AgentCrash) {
        props.extend(chunk_properties(stage_error));
    }
    if model.cfg.faults.has(Fault::Snapshot) {
        props.extend(snapshot_properties());
    }
    if model.cfg.proofs_enabled() {
        props.push(Property::<FleetModel>::always(
            property_name(Rule::ProofIsReadback),
            |_, w| proofs_tell_the_truth(w),
        ));
        // Only a swapped release or a stand-in is a drift a recorded
        // observation shows; an old configuration is read by a live proof
        // alone.
        if model.cfg.faults.has(Fault::SwapOld) || model.cfg.faults.has(Fault::ForeignRoute) {
            props.push(Property::<FleetModel>::sometimes(
                "drift is seen",
                |_, w| drift_seen(w),
            ));
        }
        // P1 is not vacuous: the hand restart is reached.
        if model.cfg.faults.has(Fault::OldConfig) {
            props.push(Property::<FleetModel>::sometimes(
                "an app runs with an old configuration",
                |_, w| w.apps.contains(&crate::world::App::OldConfig),
            ));
        }
    }
    props
}

impl Model for FleetModel {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        vec![self.initial()]
    }

    fn actions(&self, state: &World, actions: &mut Vec<Action>) {
        self.enabled(state, actions);
    }

    fn next_state(&self, state: &World, action: Action) -> Option<World> {
        let next = self.transition(state, action, &mut None);
        // A step that changes nothing is no transition (keeps the graph small).
        (next != *state).then_some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties(self)
    }

    fn format_action(&self, action: &Action) -> String {
        format!("{action:?}")
    }

    fn format_step(&self, state: &World, action: Action) -> Option<String> {
        let mut told = Some(Vec::new());
        self.transition(state, action, &mut told);
        let mut lines = vec![self.describe(state, &action)];
        lines.extend(told.into_iter().flatten().filter_map(|t| match t {
            crate::fleet::Told::Line { text, .. } => Some(text),
            _ => None,
        }));
        Some(lines.join("\n"))
    }
}
