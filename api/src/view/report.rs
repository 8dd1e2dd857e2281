//! The handover report (SPEC §7), computed from controller state alone,
//! the log index behind its "since when", and the date format it prints.
//! Pure: no IO, no clock. The verdicts of SPEC §6 live in the `proof`
//! crate.

use crate::view::words;
use model::controller::{
    operator_actions, rollout_actions, Budget, ControllerState, Event, Op, OpPhase, OperatorAction,
    PauseReason, Rollout, RolloutAction, RolloutStatus, UnknownReason,
};
use model::{Decision, NodeId, OpId, RolloutId};
use proof::{observation_str, Origin};
use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch by the controller's clock (0 before it).
pub fn epoch_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One entry of the handover report (SPEC §7): a slot-holding op, a rollout
/// waiting for an operator, or a drifted node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unresolved {
    /// The node holding the op (the canary for a rollout-level entry).
    pub node: String,
    /// The op, like `"op3"`; `"-"` for a rollout waiting for an operator.
    pub op: String,
    /// The rollout, like `"r0"`.
    pub rollout: String,
    /// Hex digest of the op's (or rollout's) release.
    pub release: String,
    /// The generation the op (or rollout) carries.
    pub generation: u64,
    /// Where it stands: `granted`, `decided (commit)`, `decided (abort)`,
    /// `restoring`, `waiting for approval`, `paused (operator)`,
    /// `paused (probe of opN failed)` (`model::words::paused`).
    pub phase: String,
    /// Why the op is UNKNOWN: `silence`, `restore-unproven`, `contradictory`.
    pub unknown_reason: Option<String>,
    /// Hex digest of the node's last confirmed release.
    pub last_confirmed_release: Option<String>,
    /// The latest observation recorded for the op, like `"pass from v2"`.
    pub last_serving_result: Option<String>,
    /// What evidence would settle it.
    pub missing_evidence: Vec<String>,
    /// Who owns it: the operator who claimed the op (`fleetweft claim`), else
    /// `None`, shown as `"unowned"` ([`Unresolved::owner_or_unowned`]).
    /// A waiting rollout entry (op `"-"`) is never owned.
    pub owner: Option<String>,
    /// When its owner promised to review it next, from the claim.
    pub review_by: Option<String>,
    /// What the operator can do.
    pub options: Vec<String>,
    /// The command that checks the node's real state, e.g.
    /// `fleetweft probe node-a`.
    pub check_command: String,
    /// The event log entry this entry dates from: an UNKNOWN op's latest
    /// `OpUnknown`, else the op's grant; a waiting rollout's pause, or its
    /// canary's settlement for an approval gate. `None` when the log index
    /// given to [`unresolved`] does not know it.
    #[serde(default)]
    pub since_sequence: Option<u64>,
    /// The same in words, like `UNKNOWN since log entry 29 (granted at 26)`.
    #[serde(default)]
    pub since: String,
}

/// Where in the event log each unresolved thing started, so the handover
/// report can say "since when" (SPEC §7). The model has no clock and no
/// sequence numbers, so the runtime builds this from the log as it replays
/// and appends it ([`LogIndex::record`]) and keeps only what is unsettled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogIndex {
    /// Unsettled op -> sequence of its grant.
    pub granted: imbl::HashMap<OpId, u64>,
    /// Unsettled op -> sequence of its latest `OpUnknown`.
    pub unknown: imbl::HashMap<OpId, u64>,
    /// Rollout -> sequence of the latest event that can make it wait for an
    /// operator: a pause, or its canary's settlement (approval gate).
    pub waiting: imbl::HashMap<RolloutId, u64>,
    /// Quarantined node -> sequence of its `NodeQuarantined`.
    pub quarantined: imbl::HashMap<NodeId, u64>,
    /// Node -> sequence of its latest `OpGranted` (one entry per node).
    pub node_granted: imbl::HashMap<NodeId, u64>,
    /// Node -> sequence of its latest `NodeHello` (one entry per node): a
    /// hello's claim is current only if it is newer than the node's op.
    pub hello: imbl::HashMap<NodeId, u64>,
    /// Node -> sequence of the latest `ReportRecorded` of its agent.
    pub reported: imbl::HashMap<NodeId, u64>,
}

impl LogIndex {
    /// Note `event`, durable at `sequence`. `state` is the controller state
    /// after it (op facts such as rollout and canary never change).
    pub fn record(&mut self, sequence: u64, event: &Event, state: &ControllerState) {
        match event {
            Event::OpGranted { op, node, .. } => {
                self.granted.insert(*op, sequence);
                self.node_granted.insert(*node, sequence);
            }
            Event::NodeHello { node, .. } => {
                self.hello.insert(*node, sequence);
            }
            Event::ReportRecorded { op, .. } => {
                if let Some(o) = state.op_summary(*op) {
                    self.reported.insert(o.node, sequence);
                }
            }
            Event::OpUnknown { op, .. } => {
                self.unknown.insert(*op, sequence);
            }
            Event::OpSettled { op, .. } => {
                self.granted.remove(op);
                self.unknown.remove(op);
                // A settlement that opens an approval gate (after the
                // canary, or between waves) dates the wait; the model says
                // whether it did. A paused rollout keeps dating from its
                // pause.
                let gate = state.op(*op).map(|o| o.rollout).filter(|r| {
                    state.awaiting_approval(*r)
                        && state.rollout(*r).is_some_and(|r| r.paused.is_none())
                });
                if let Some(rollout) = gate {
                    self.waiting.insert(rollout, sequence);
                }
            }
            Event::RolloutPaused { rollout, .. } => {
                self.waiting.insert(*rollout, sequence);
            }
            Event::RolloutSuperseded { rollout, .. } | Event::RolloutCompleted { rollout } => {
                self.waiting.remove(rollout);
            }
            Event::NodeQuarantined { node, .. } => {
                self.quarantined.insert(*node, sequence);
            }
            Event::NodeReleased { node } => {
                self.quarantined.remove(node);
            }
            _ => {}
        }
    }
}

impl Unresolved {
    /// The owner, or `"unowned"`.
    pub fn owner_or_unowned(&self) -> &str {
        self.owner.as_deref().unwrap_or("unowned")
    }
}

/// What would settle `op`, most specific first: the answer its UNKNOWN
/// reason lacks, the report its phase waits for, and a route observation.
fn missing_evidence(op: &Op, baseline: &str) -> Vec<String> {
    let mut missing: Vec<String> = migration_wait(op).into_iter().collect();
    match op.unknown {
        Some(UnknownReason::Silence) => {
            missing.push("any answer from the node: it was silent past the deadline".into())
        }
        // The restoring phase below names the same missing probe: one
        // line, not two near-duplicates.
        Some(UnknownReason::RestoreUnproven) if op.phase == OpPhase::Restoring => {}
        Some(UnknownReason::RestoreUnproven) => missing.push(format!(
            "a serving probe after the restore proving the baseline {baseline}"
        )),
        Some(UnknownReason::Contradictory) => missing.push(
            "an observation consistent with the op's phase: the last report contradicted it".into(),
        ),
        None => {}
    }
    match (op.phase, op.decision) {
        (OpPhase::Granted, _) => {
            missing.push("the agent's commit request (the node has not asked to switch yet)".into())
        }
        (OpPhase::Decided, Some(Decision::Abort)) => missing.push(format!(
            "the agent's not-applied report with a probe proving the baseline {baseline}"
        )),
        (OpPhase::Decided, _) => missing.push(format!(
            "the agent's switch report with a probe answering as {}",
            op.release
        )),
        (OpPhase::Restoring, _) => missing.push(format!(
            "a probe after the restore proving the baseline {baseline} serving"
        )),
        (OpPhase::Settled(_), _) => {}
    }
    missing.push(format!(
        "a route observation (release identity and functional probe) proving {} or the baseline {baseline} serving",
        op.release
    ));
    missing
}

/// (issue #24 item 2) What a person must decide when the op's agent
/// stopped on its release's migration, from the agent's latest report:
/// `None` for any other op.
pub fn migration_wait(op: &Op) -> Option<String> {
    use model::controller::EvidenceSource;
    use model::{ReportKind, StageRefusal};
    let kind = op.evidence.iter().rev().find_map(|e| match e.source {
        EvidenceSource::Agent(kind) => Some(kind),
        _ => None,
    })?;
    match kind {
        ReportKind::Refused(StageRefusal::MigrationIrreversible) => Some(
            "a person's decision: the release's migration is irreversible, so the agent does not put the old data back on its own (resolve with what the node serves, or restore the data by hand first)"
                .into(),
        ),
        ReportKind::Refused(StageRefusal::MigrationInterrupted) => Some(format!(
            "a person's decision: the agent crashed while the migration ran, so its effect on the data is unknown and it was not run again (roll back puts the data's snapshot back with the baseline {})",
            op.baseline.map_or_else(|| "nothing".to_string(), |b| b.to_string())
        )),
        _ => None,
    }
}

/// The handover report: every op that holds a slot (UNKNOWN, or waiting:
/// granted, decided and not yet settled, restoring) in op order, then every
/// active rollout that waits for an operator (approval gate after a passed
/// canary, or paused), as an entry with op `"-"`. All unsettled ops are
/// listed, even one that already has a report: until evidence settles it, it
/// holds a slot and someone must know.
pub fn unresolved(
    state: &ControllerState,
    names: &dyn Fn(NodeId) -> String,
    index: &LogIndex,
) -> Vec<Unresolved> {
    let mut out = Vec::new();
    for op in state.ops.values().filter(|o| o.occupies_slot()) {
        let name = names(op.node);
        let phase = words::op_phase_with_decision(op.phase, op.decision);
        let baseline = op
            .baseline
            .map_or_else(|| "nothing".to_string(), |b| b.to_string());
        let missing = missing_evidence(op, &baseline);
        out.push(Unresolved {
            node: name.clone(),
            op: op.id.to_string(),
            rollout: op.rollout.to_string(),
            release: op.release.to_hex(),
            generation: op.generation.0,
            phase,
            unknown_reason: op.unknown.map(|u| words::unknown_reason(u).to_string()),
            last_confirmed_release: confirmed(state, op.node),
            last_serving_result: op.evidence.last().map(|e| observation_str(&e.observation)),
            missing_evidence: missing,
            owner: op.claim.as_ref().map(|c| c.owner.clone()),
            review_by: op.claim.as_ref().map(|c| c.review_by.clone()),
            options: op_options(state, op, &name, &baseline),
            check_command: format!("fleetweft probe {name}"),
            since_sequence: index
                .unknown
                .get(&op.id)
                .filter(|_| op.is_unknown())
                .or(index.granted.get(&op.id))
                .copied(),
            since: op_since(op, index),
        });
    }
    out.extend(
        state
            .rollouts
            .iter()
            .filter_map(|r| rollout_entry(state, r, names, index)),
    );
    out.extend(drifted(state, names));
    out.extend(quarantined(state, names, index));
    out
}

/// An active rollout that waits for an operator (an approval gate, or a
/// pause) as a report entry; `None` for any other rollout.
fn rollout_entry(
    state: &ControllerState,
    r: &Rollout,
    names: &dyn Fn(NodeId) -> String,
    index: &LogIndex,
) -> Option<Unresolved> {
    if r.status != RolloutStatus::Active {
        return None;
    }
    let gate = state.awaiting_approval(r.id);
    let phase = match (gate, r.paused) {
        (true, _) => "waiting for approval".to_string(),
        (false, Some(reason)) => words::paused(reason),
        (false, None) => return None,
    };
    let (missing, first) = rollout_next_step(state, r);
    let canary = names(r.plan.canary);
    Some(Unresolved {
        node: canary.clone(),
        op: "-".into(),
        rollout: r.id.to_string(),
        release: r.plan.release.to_hex(),
        generation: r.generation.0,
        phase,
        unknown_reason: None,
        last_confirmed_release: confirmed(state, r.plan.canary),
        last_serving_result: state
            .rollout_op_for(r.id, r.plan.canary)
            .and_then(|o| o.evidence.last())
            .map(|e| observation_str(&e.observation)),
        missing_evidence: vec![missing],
        owner: None,
        review_by: None,
        options: vec![
            first,
            format!("keep paused: leave {} as it is", r.id),
            format!(
                "roll back: start a rollout of the previous release over {}'s nodes: fleetweft rollout start --bundle PREVIOUS.bundle --canary {canary} --followers ... --slots K",
                r.id
            ),
            explore_option(r.id),
        ],
        check_command: format!("fleetweft probe {canary}"),
        since_sequence: index.waiting.get(&r.id).copied(),
        since: match index.waiting.get(&r.id) {
            Some(seq) if gate => format!("waiting for approval since log entry {seq}"),
            Some(seq) => format!("paused since log entry {seq}"),
            None => "not in the log index".to_string(),
        },
    })
}

/// What a waiting rollout misses and the operator's first option, from
/// what the model would accept now (`rollout_actions`) and which budget
/// is spent, never from the pause's reason alone: a rollout paused by an
/// operator whose UNKNOWN budget filled meanwhile cannot be resumed.
fn rollout_next_step(state: &ControllerState, r: &Rollout) -> (String, String) {
    let actions = rollout_actions(state, r.id);
    let id = r.id;
    if actions.contains(&RolloutAction::Approve) {
        let gate = match r.next_wave_gate() {
            Some((wave, _)) if r.approved => format!("before wave {wave}"),
            _ => "after the verified canary".to_string(),
        };
        return (
            format!("an operator's approval {gate}"),
            format!("approve: let {id} grant its followers"),
        );
    }
    if actions.contains(&RolloutAction::Resume) {
        let missing = match r.paused {
            Some(PauseReason::ProbeFailed { op }) => {
                format!("an operator's decision after the failed probe of {op}")
            }
            _ => "an operator's decision to resume".to_string(),
        };
        return (missing, format!("resume: let {id} grant again"));
    }
    match r.budget_spent() {
        Some(Budget::Failures) => (
            "a new rollout: this one's failure budget is spent".to_string(),
            format!("start a new rollout to go on from where {id} stopped"),
        ),
        Some(Budget::Unknown) => (
            "evidence settling the UNKNOWN ops listed here".to_string(),
            format!("resolve the UNKNOWN ops, then resume {id}"),
        ),
        None => (
            "an operator's decision".to_string(),
            format!("keep paused: leave {id} as it is"),
        ),
    }
}

/// Every quarantined node as work: the two peer addresses that presented
/// its identity, and what the operator does about it.
fn quarantined(
    state: &ControllerState,
    names: &dyn Fn(NodeId) -> String,
    index: &LogIndex,
) -> Vec<Unresolved> {
    state
        .quarantined
        .iter()
        .map(|(node, q)| {
            let name = names(*node);
            let since = index.quarantined.get(node).copied();
            Unresolved {
                node: name.clone(),
                op: state.nodes.get(node).and_then(|r| r.live_op).map_or_else(|| "-".into(), |op| op.to_string()),
                rollout: "-".into(),
                release: String::new(),
                generation: state.generation.0,
                phase: format!(
                    "quarantined: identity conflict, two live connections from {} and {}",
                    q.first_peer, q.second_peer
                ),
                unknown_reason: None,
                last_confirmed_release: confirmed(state, *node),
                last_serving_result: None,
                missing_evidence: vec![format!(
                    "an operator's decision: which agent at {} or {} is the real {name}",
                    q.first_peer, q.second_peer
                )],
                owner: None,
                review_by: None,
                options: vec![
                    format!("revoke the copied certificate: fleetweft node revoke-cert {name}"),
                    format!("issue a new one: fleetweft pki issue {name} --dir PKI --force, install it on the real node, restart its agent"),
                    format!("release: fleetweft node release {name}"),
                ],
                check_command: format!("fleetweft probe {name}"),
                since_sequence: since,
                since: since.map_or_else(
                    || "not in the log index".to_string(),
                    |seq| format!("quarantined since log entry {seq}"),
                ),
            }
        })
        .collect()
}

/// Every drifted node as work (SPEC §10): what was seen, since when, and
/// the commands that verify and fix it. Its op stays settled as it was.
fn drifted(state: &ControllerState, names: &dyn Fn(NodeId) -> String) -> Vec<Unresolved> {
    state
        .drifted
        .iter()
        .filter_map(|node| {
            let record = state.nodes.get(node)?;
            Some((*node, record, record.drift()?))
        })
        .map(|(node, record, seen)| {
            let name = names(node);
            let confirmed = record.confirmed.map(|d| d.to_hex()).unwrap_or_default();
            let short = confirmed.get(..12).unwrap_or(&confirmed).to_string();
            let rollout = state.intended_rollout(node);
            Unresolved {
                node: name.clone(),
                op: "-".into(),
                rollout: rollout.map_or_else(|| "-".into(), |r| r.id.to_string()),
                release: confirmed.clone(),
                generation: rollout.map_or(0, |r| r.generation.0),
                phase: "drifted".into(),
                unknown_reason: None,
                last_confirmed_release: record.confirmed.map(|d| d.to_hex()),
                last_serving_result: Some(observation_str(&seen.observation)),
                missing_evidence: vec![format!(
                    "an observation showing {short} serving again (the route answering as it, the artifact read back as it)"
                )],
                owner: None,
                review_by: None,
                options: vec![
                    format!("verify: fleetweft proof {name} (reads the node back now)"),
                    format!("record what serves now: fleetweft proof {name} --record"),
                    format!("fix: put {short} back on {name} by starting a rollout of it over {name}: fleetweft rollout start --bundle THAT.bundle --canary {name} --slots 1"),
                ],
                check_command: format!("fleetweft proof {name}"),
                since_sequence: None,
                since: format!(
                    "drifted since an observation at {} ({})",
                    format_epoch_ms(seen.at_ms),
                    Origin::of_observation(seen.source).as_str()
                ),
            }
        })
        .collect()
}

/// A controller wall-clock time (ms since the Unix epoch) as RFC 3339 UTC,
/// like `2026-12-01T08:21:24.123Z`.
pub fn format_epoch_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{:03}Z",
        ms % 1000
    )
}

/// What an operator can do about an unsettled op, each with its exact
/// command: only what the controller would accept now, asked of the model
/// (`operator_actions`), never restated here.
fn op_options(state: &ControllerState, op: &Op, name: &str, baseline: &str) -> Vec<String> {
    let id = op.id;
    let allowed = operator_actions(state, id);
    let resolutions: Vec<&str> = [
        (OperatorAction::ConfirmBaseline, "confirm-baseline"),
        (OperatorAction::ConfirmNew, "confirm-new"),
        (OperatorAction::Abandon, "abandon"),
    ]
    .into_iter()
    .filter(|(action, _)| allowed.contains(action))
    .map(|(_, word)| word)
    .collect();
    // All three: one command with the choice; fewer: each command.
    let commands = if resolutions.len() == 3 {
        format!(
            "fleetweft resolve {id} --resolution {} --probe",
            resolutions.join("|")
        )
    } else {
        resolutions
            .iter()
            .map(|r| format!("fleetweft resolve {id} --resolution {r} --probe"))
            .collect::<Vec<_>>()
            .join("; or ")
    };
    let resolve = format!(
        "resolve with an observation: {commands} (the probe must show what the resolution claims; {})",
        match (op.phase == OpPhase::Restoring, op.commit_may_still_land()) {
            (true, true) => "the stored commit and the restore may both still land",
            (true, false) => "confirm-new is refused while the restore may still land",
            (false, true) => "confirm-baseline is refused while the stored commit may still land",
            (false, false) => "each resolution needs an observation backing it",
        }
    );
    let roll_back = if allowed.contains(&OperatorAction::RollBack) {
        format!(
            "roll back: fleetweft rollback {id} ({name} puts back the baseline {baseline}; settles rolled-back only when a probe proves it; pauses the rollout)"
        )
    } else if op.phase == OpPhase::Restoring {
        format!(
            "roll back: already ordered; {id} settles rolled-back once a probe shows {name} serving the baseline {baseline}: fleetweft probe {name}"
        )
    } else if op.baseline.is_none() {
        format!("roll back: not possible, {name} served nothing before {id}")
    } else {
        format!(
            "roll back: nothing to put back, {name} never got a commit for {id} (it keeps serving the baseline {baseline}); resolve below"
        )
    };
    let mut options = vec![
        format!("keep paused: leave {id} holding its slot and wait for {name}"),
        roll_back,
        resolve,
    ];
    if op.is_unknown() && state.active == Some(op.rollout) {
        options.push(explore_option(op.rollout));
    }
    options
}

/// The option "explore from here" of a paused or waiting rollout and of
/// an UNKNOWN op: the model checker from the live state (issue #27 item
/// 3), which tells each rule a path from here can break.
fn explore_option(rollout: RolloutId) -> String {
    format!(
        "explore from here: what can still go wrong, every interleaving of faults and operator inputs from the current state: GET /api/rollouts/{rollout}/explore (or fleetweft-check --from-log DATA on a copy of the log)"
    )
}

/// "Since when" for an unsettled op, in words.
fn op_since(op: &Op, index: &LogIndex) -> String {
    let granted = index.granted.get(&op.id);
    match (op.unknown.and(index.unknown.get(&op.id)), granted) {
        (Some(u), Some(g)) => format!("UNKNOWN since log entry {u} (granted at {g})"),
        (Some(u), None) => format!("UNKNOWN since log entry {u}"),
        (None, Some(g)) => format!("granted at log entry {g}"),
        (None, None) => "not in the log index".to_string(),
    }
}

fn confirmed(state: &ControllerState, node: NodeId) -> Option<String> {
    state
        .nodes
        .get(&node)
        .and_then(|n| n.confirmed)
        .map(|d| d.to_hex())
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::controller::{apply, Event, Outcome};
    use model::{Digest, Generation, OpId, Plan, ProbeVerdict, ReportKind, RouteObservation};

    const V1: Digest = Digest::repeat(1);
    const V2: Digest = Digest::repeat(2);
    const A: NodeId = NodeId(0);
    const B: NodeId = NodeId(1);

    fn name(n: NodeId) -> String {
        n.to_string()
    }

    fn obs(
        verdict: ProbeVerdict,
        identity: Option<Digest>,
        process_healthy: bool,
    ) -> RouteObservation {
        RouteObservation::new(verdict, identity, process_healthy)
    }

    /// Builds a state by folding events, like a log replay; the log index
    /// records each event at its position (sequence = 1-based index).
    struct S(ControllerState, LogIndex, u64);

    impl S {
        fn new() -> Self {
            S(ControllerState::default(), LogIndex::default(), 0)
        }
        fn ev(mut self, e: Event) -> Self {
            apply(&mut self.0, &e);
            self.2 += 1;
            self.1.record(self.2, &e, &self.0);
            self
        }
        fn start(
            self,
            rollout: u32,
            release: Digest,
            followers: Vec<NodeId>,
            approval: bool,
        ) -> Self {
            self.ev(Event::RolloutStarted {
                rollout: RolloutId(rollout),
                plan: Plan {
                    release,
                    canary: A,
                    followers,
                    slots_max: 1,
                    approval_after_canary: approval,
                },
                generation: Generation(rollout as u64 + 1),
            })
        }
        fn grant(self, op: u32, rollout: u32, node: NodeId, release: Digest) -> Self {
            self.ev(Event::OpGranted {
                op: OpId(op),
                rollout: RolloutId(rollout),
                node,
                release,
                generation: Generation(rollout as u64 + 1),
                baseline: Some(V1),
                is_canary: node == A,
            })
        }
        fn decide(self, op: u32, decision: Decision) -> Self {
            self.ev(Event::CommitDecided {
                op: OpId(op),
                decision,
            })
        }
        fn report(self, op: u32, kind: ReportKind, observation: RouteObservation) -> Self {
            self.ev(Event::ReportRecorded {
                op: OpId(op),
                kind,
                observation,
            })
        }
        fn settle(self, op: u32, outcome: Outcome) -> Self {
            self.ev(Event::OpSettled {
                op: OpId(op),
                outcome,
            })
        }
        fn switched(self, op: u32, observation: RouteObservation) -> Self {
            self.decide(op, Decision::Commit)
                .report(op, ReportKind::Switched, observation)
        }
    }

    fn canary_switched(observation: RouteObservation) -> S {
        S::new()
            .start(0, V2, vec![], false)
            .grant(0, 0, A, V2)
            .switched(0, observation)
    }

    fn verified() -> S {
        canary_switched(RouteObservation::passing(V2)).settle(0, Outcome::Verified)
    }

    #[test]
    fn unknown_op_is_handed_over_with_what_is_missing() {
        let s = canary_switched(obs(ProbeVerdict::Unreachable, None, true)).ev(Event::OpUnknown {
            op: OpId(0),
            reason: UnknownReason::Silence,
        });
        let list = unresolved(&s.0, &name, &s.1);
        assert_eq!(list.len(), 1, "{list:#?}");
        let u = &list[0];
        assert_eq!(u.node, "node-a");
        assert_eq!(u.op, "op0");
        assert_eq!(u.rollout, "r0");
        assert_eq!(u.release, V2.to_hex());
        assert_eq!(u.generation, 1);
        assert_eq!(u.phase, "decided (commit)");
        assert_eq!(u.unknown_reason.as_deref(), Some("silence"));
        assert_eq!(u.last_confirmed_release, None);
        assert_eq!(
            u.last_serving_result.as_deref(),
            Some("unreachable, no identity")
        );
        assert!(u.missing_evidence.iter().any(|m| m.contains("silent")));
        assert!(u
            .missing_evidence
            .iter()
            .any(|m| m.contains("proving v2 or the baseline v1")));
        assert_eq!(u.owner, None);
        assert_eq!(u.owner_or_unowned(), "unowned");
        assert_eq!(u.review_by, None);
        for option in ["keep paused", "roll back", "resolve with an observation"] {
            assert!(u.options.iter().any(|o| o.starts_with(option)), "{option}");
        }
        // The node reported its switch, so the stored Commit has landed and
        // can switch nothing more: every resolution is on offer.
        assert!(
            u.options[2].contains("--resolution confirm-baseline|confirm-new|abandon --probe"),
            "{}",
            u.options[2]
        );
        // A Commit stored but never shown to land (the reply was lost):
        // confirm-baseline is not offered (it would be refused), the exact
        // commands for the others are.
        let silent = S::new()
            .start(0, V2, vec![], false)
            .grant(0, 0, A, V2)
            .decide(0, Decision::Commit)
            .ev(Event::OpUnknown {
                op: OpId(0),
                reason: UnknownReason::Silence,
            });
        let resolve = &unresolved(&silent.0, &name, &silent.1)[0].options[2];
        assert!(
            resolve.contains("fleetweft resolve op0 --resolution confirm-new --probe")
                && resolve.contains("fleetweft resolve op0 --resolution abandon --probe")
                && !resolve.contains("--resolution confirm-baseline"),
            "{resolve}"
        );
        // A Commit is stored and v1 was the baseline: one exact command.
        assert!(
            u.options[1].starts_with("roll back: fleetweft rollback op0 ("),
            "{}",
            u.options[1]
        );
        assert_eq!(u.check_command, "fleetweft probe node-a");
        // Since when: the OpUnknown is the last event folded.
        assert_eq!(u.since_sequence, Some(s.2));
        assert!(
            u.since
                .starts_with(&format!("UNKNOWN since log entry {} (granted at ", s.2)),
            "{}",
            u.since
        );
    }

    #[test]
    fn waiting_ops_are_handed_over_by_phase() {
        let granted = S::new().start(0, V2, vec![], false).grant(0, 0, A, V2);
        let u = &unresolved(&granted.0, &name, &granted.1)[0];
        assert_eq!(u.phase, "granted");
        assert_eq!(
            (u.since_sequence, u.since.as_str()),
            (Some(2), "granted at log entry 2")
        );
        assert!(u.options[2].contains("--resolution confirm-baseline|confirm-new|abandon --probe"));
        // No commit: nothing switched, so no rollback command is offered.
        assert!(
            u.options[1].starts_with("roll back: nothing to put back")
                && !u.options[1].contains("fleetweft rollback"),
            "{}",
            u.options[1]
        );
        assert!(u.missing_evidence[0].contains("commit request"));
        assert_eq!(u.unknown_reason, None);

        let restoring = canary_switched(obs(ProbeVerdict::WrongAnswer, Some(V2), true))
            .ev(Event::RestoreRequested { op: OpId(0) })
            .ev(Event::OpUnknown {
                op: OpId(0),
                reason: UnknownReason::RestoreUnproven,
            });
        let list = unresolved(&restoring.0, &name, &restoring.1);
        let u = &list[0];
        assert_eq!(u.phase, "restoring");
        assert!(
            u.options[1].starts_with("roll back: already ordered"),
            "{}",
            u.options[1]
        );
        // The switch was reported: the Commit landed; confirm-new would be
        // refused while the restore may still land.
        assert!(
            u.options[2].contains("--resolution confirm-baseline --probe")
                && !u.options[2].contains("--resolution confirm-new --probe"),
            "{}",
            u.options[2]
        );
        assert_eq!(u.unknown_reason.as_deref(), Some("restore-unproven"));
        // Each missing item once: the restore probe is named by one line.
        let restore_lines = u
            .missing_evidence
            .iter()
            .filter(|m| m.contains("after the restore"))
            .count();
        assert_eq!(restore_lines, 1, "{:?}", u.missing_evidence);
        assert_eq!(
            u.last_serving_result.as_deref(),
            Some("wrong-answer from v2")
        );

        let aborting = S::new()
            .start(0, V2, vec![], false)
            .grant(0, 0, A, V2)
            .decide(0, Decision::Abort);
        assert_eq!(
            unresolved(&aborting.0, &name, &aborting.1)[0].phase,
            "decided (abort)"
        );

        // Settled ops are not listed.
        assert!(unresolved(&verified().0, &name, &verified().1).is_empty());
    }

    #[test]
    fn rollout_waiting_for_approval_is_listed() {
        let s = S::new()
            .start(0, V2, vec![B], true)
            .grant(0, 0, A, V2)
            .switched(0, RouteObservation::passing(V2))
            .settle(0, Outcome::Verified)
            .ev(Event::RolloutPaused {
                rollout: RolloutId(0),
                reason: PauseReason::Operator,
            });
        let list = unresolved(&s.0, &name, &s.1);
        assert_eq!(list.len(), 1, "{list:#?}");
        let u = &list[0];
        assert_eq!((u.op.as_str(), u.rollout.as_str()), ("-", "r0"));
        assert_eq!(u.phase, "waiting for approval");
        assert_eq!(u.node, "node-a");
        assert_eq!(u.last_confirmed_release, Some(V2.to_hex()));
        assert!(u.options[0].starts_with("approve"));
        assert_eq!(u.owner_or_unowned(), "unowned");
        assert_eq!(u.check_command, "fleetweft probe node-a");

        // Approved: nothing left to hand over except the pause.
        let s = s.ev(Event::RolloutApproved {
            rollout: RolloutId(0),
        });
        let list = unresolved(&s.0, &name, &s.1);
        assert_eq!(list[0].phase, "paused (operator)");
    }

    /// Paused by an operator, then its UNKNOWN budget filled: the model
    /// refuses a resume, so the report does not offer one (it did when it
    /// read the pause's reason alone).
    #[test]
    fn a_rollout_over_its_unknown_budget_is_not_offered_a_resume() {
        let s = S::new()
            .start(0, V2, vec![B], false)
            .ev(Event::RolloutPolicySet {
                rollout: RolloutId(0),
                policy: model::plan::Policy {
                    max_unknown: Some(1),
                    ..Default::default()
                },
            })
            .grant(0, 0, A, V2)
            .ev(Event::RolloutPaused {
                rollout: RolloutId(0),
                reason: PauseReason::Operator,
            })
            .ev(Event::OpUnknown {
                op: OpId(0),
                reason: UnknownReason::Silence,
            });
        let list = unresolved(&s.0, &name, &s.1);
        let entry = list.iter().find(|u| u.op == "-").expect("the rollout");
        assert_eq!(entry.phase, "paused (operator)");
        assert_eq!(entry.options[0], "resolve the UNKNOWN ops, then resume r0");
        assert_eq!(
            entry.missing_evidence,
            vec!["evidence settling the UNKNOWN ops listed here".to_string()]
        );
    }

    #[test]
    fn rollout_paused_by_a_failed_probe_is_listed() {
        let s = canary_switched(obs(ProbeVerdict::WrongAnswer, Some(V2), true))
            .ev(Event::RolloutPaused {
                rollout: RolloutId(0),
                reason: PauseReason::ProbeFailed { op: OpId(0) },
            })
            .ev(Event::RestoreRequested { op: OpId(0) })
            .report(0, ReportKind::Restored, RouteObservation::passing(V1))
            .settle(0, Outcome::RolledBack);
        let list = unresolved(&s.0, &name, &s.1);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].phase, "paused (probe of op0 failed)");
        // Dates from the pause, not from the later settlement.
        let paused_at = s.1.waiting[&RolloutId(0)];
        assert_eq!(list[0].since_sequence, Some(paused_at));
        assert!(paused_at < s.2, "the pause precedes the settlement");
        assert_eq!(list[0].since, format!("paused since log entry {paused_at}"));
        assert_eq!(list[0].last_confirmed_release, Some(V1.to_hex()));
    }

    /// (issue #24 item 2) An op whose agent stopped on its migration says
    /// in the handover report that it waits for a person, and why: a roll
    /// back after an irreversible migration, a crash while one ran.
    #[test]
    fn an_op_stopped_by_its_migration_says_it_waits_for_a_person() {
        use model::StageRefusal;
        let refused = |reason| {
            S::new()
                .start(0, V2, vec![], false)
                .grant(0, 0, A, V2)
                .decide(0, Decision::Commit)
                .report(
                    0,
                    ReportKind::Refused(reason),
                    RouteObservation::passing(V1),
                )
        };
        let s = refused(StageRefusal::MigrationInterrupted);
        let list = unresolved(&s.0, &name, &s.1);
        assert_eq!(list.len(), 1, "{list:#?}");
        let first = &list[0].missing_evidence[0];
        assert!(first.starts_with("a person's decision"), "{first}");
        assert!(first.contains("crashed while the migration ran"), "{first}");
        let s = refused(StageRefusal::MigrationIrreversible);
        let first = &unresolved(&s.0, &name, &s.1)[0].missing_evidence[0];
        assert!(first.contains("irreversible"), "{first}");
        // Any other op says nothing of the kind.
        let s = canary_switched(obs(ProbeVerdict::Unreachable, None, true));
        let list = unresolved(&s.0, &name, &s.1);
        assert!(list[0]
            .missing_evidence
            .iter()
            .all(|m| !m.contains("a person's decision")));
    }
}
