//! Decisions: `step(state, input) -> events`. Every rule of SPEC §2 that the
//! controller enforces is decided here, once.

use super::apply::apply;
use super::event::Event;
use super::input::Input;
use super::operators::{self, ActedBy, Actor};
use super::roster::{validate_labels, validate_name, validate_public, Labels, RosterLimit};
use super::state::{
    ControllerState, EvidenceItem, EvidenceSource, Op, OpPhase, OpSummary, Outcome, PauseReason,
    Resolution, Rollout, RolloutStatus, UnknownReason, CLAIM_TEXT_MAX,
};
use super::words;
use crate::config::{ConfigProblem, ConfigRevision, Deploys};
use crate::evidence::{ProbeVerdict, RouteObservation};
use crate::ids::{NodeId, OpId, RolloutId};
use crate::msg::{Decision, ReportKind, StageRefusal, ToController};
use crate::plan::{Plan, PlanError, Policy, FOLLOWERS_PER_EVENT_MAX};
use crate::platform::{ArchMismatch, ArchSet, ReleaseArches, ARCH_MISMATCHES_NAMED_MAX};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Why the controller refused an operator input. Nothing was recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    InvalidPlan(String),
    UnknownRollout(RolloutId),
    UnknownOp(OpId),
    RolloutNotActive(RolloutId),
    AlreadyPaused(RolloutId),
    NotPaused(RolloutId),
    NotAwaitingApproval(RolloutId),
    OpAlreadySettled(OpId),
    /// The observation does not show what the resolution claims.
    ObservationContradictsResolution(OpId),
    /// A claim without an owner, or with a text over [`CLAIM_TEXT_MAX`].
    InvalidClaim(String),
    /// Confirm-baseline on an op whose stored decision is Commit and that
    /// was never restored: the node may still hear the decision (it is
    /// replayed unchanged, S6) and switch, which would silently overturn
    /// the recorded baseline. Appended last so older encodings decode.
    CommitMayStillLand(OpId),
    /// Confirm-new on an op whose restore was requested: the node may still
    /// hear the Restore and put the baseline back, which would silently
    /// overturn the recorded new release. Appended last.
    RestoreMayStillLand(OpId),
    /// Roll back an op with no stored Commit: its node never switched, so
    /// there is nothing to put back (its report settles it; or abandon).
    /// Appended last.
    NothingToRollBack(OpId),
    /// Roll back an op whose node served nothing before it.
    NoBaseline(OpId),
    /// Roll back an op whose restore was already requested.
    AlreadyRestoring(OpId),
    /// An observation of a node arrived sooner than
    /// [`super::state::OBSERVATION_INTERVAL_MIN_MS`] after the last one
    /// recorded: not recorded (the log stays bounded), nothing changes.
    /// `retry_after_ms` is how long to wait. Appended last.
    ObservedTooSoon {
        node: NodeId,
        retry_after_ms: u64,
    },
    /// Release a node that is not quarantined. Appended last.
    NotQuarantined(NodeId),
    /// Revoke a certificate that is already revoked. Appended last.
    AlreadyRevoked(NodeId),
    /// A peer address over [`super::state::PEER_TEXT_MAX`] characters.
    /// Appended last.
    InvalidPeer(NodeId),
    /// Enroll a name that is already enrolled (retired names are never
    /// reused). Appended last.
    NodeNameTaken(String),
    /// No node is enrolled under this name. Appended last.
    UnknownNode(String),
    /// The node is retired. Appended last.
    NodeRetired(String),
    /// Retire a node that holds a live op: settle or resolve it first.
    /// Appended last.
    NodeHasLiveOp {
        name: String,
        op: OpId,
    },
    /// A name, a label or a public route over its limit, or a full
    /// roster. Appended last.
    RosterLimit(super::roster::RosterLimit),
    /// A plan names a retired node. Appended last.
    PlanNodeRetired(NodeId),
    /// Resume a rollout that is over its failure budget (B1). Appended last.
    OverBudget(RolloutId),
    /// A plan selects nodes the release has no tree for (issue #24 item
    /// 5): `nodes` names the first [`crate::platform::ARCH_MISMATCHES_NAMED_MAX`]
    /// of them with their recorded architecture (or that it is not known),
    /// `count` is how many there are. Appended last.
    NoTreeForArch {
        release: ArchSet,
        nodes: Vec<ArchMismatch>,
        count: u32,
    },
    /// A configuration revision over a bound, with a name not allowed, or
    /// not the app's next (issue #24 item 1): the text says which.
    /// Appended last.
    InvalidConfig(String),
    /// A rollout would deploy a configuration revision that is not the
    /// app's latest recorded one with its recorded fingerprint (issue #24
    /// item 1): `latest` is the app's latest revision (0: none). Appended
    /// last.
    ConfigNotLatest {
        app: String,
        revision: u64,
        latest: u64,
    },
    /// An operator's input without an actor, once operators are recorded
    /// (issue #28 item 2); or one the actor may never make
    /// (`controller.toml` may only enroll). Appended last.
    OperatorRequired,
    /// An input no operator makes came with an actor, or an actor's input
    /// inside another. Appended last.
    NotAnOperatorInput,
    /// No operator of this name is recorded. Appended last.
    UnknownOperator(String),
    /// The operator is revoked: its credential is refused. Appended last.
    OperatorRevoked(String),
    /// The credential presented is not the operator's current one (it was
    /// rotated). Appended last.
    CredentialNotCurrent(String),
    /// The operator's role is below the one the input needs. Appended last.
    RoleRequired {
        operator: String,
        needs: super::operators::Role,
        has: super::operators::Role,
    },
    /// An operator of this name is recorded already (revoked names are
    /// never reused). Appended last.
    OperatorNameTaken(String),
    /// An operator name or credential that cannot be recorded, a full
    /// list, or a first operator that is not an admin: the text says which.
    /// Appended last.
    InvalidOperator(String),
    /// Revoking this admin would leave no admin. Appended last.
    LastAdmin(String),
    /// Rotate or revoke an operator that is not recorded. Appended last.
    NoSuchOperator(String),
    /// Rotate or revoke an operator that is revoked already. Appended last.
    OperatorAlreadyRevoked(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::InvalidPlan(why) => write!(f, "invalid plan: {why}"),
            Refusal::UnknownRollout(r) => write!(f, "unknown rollout {r}"),
            Refusal::RolloutNotActive(r) => write!(f, "rollout {r} is not active"),
            Refusal::AlreadyPaused(r) => write!(f, "rollout {r} is already paused"),
            Refusal::NotPaused(r) => write!(f, "rollout {r} is not paused"),
            Refusal::NotAwaitingApproval(r) => write!(
                f,
                "rollout {r} is not waiting for approval (no gate, canary not verified yet, or already approved)"
            ),
            Refusal::NotQuarantined(node) => write!(f, "{node} is not quarantined"),
            Refusal::AlreadyRevoked(node) => {
                write!(f, "that certificate of {node} is already revoked")
            }
            Refusal::InvalidPeer(node) => write!(
                f,
                "a peer address of {node} is longer than {} characters",
                super::state::PEER_TEXT_MAX
            ),
            Refusal::NodeNameTaken(name) => write!(
                f,
                "a node named {name} is already enrolled (names of retired nodes are never reused)"
            ),
            Refusal::UnknownNode(name) => write!(f, "no node named {name} is enrolled"),
            Refusal::NodeRetired(name) => write!(f, "node {name} is retired"),
            Refusal::NodeHasLiveOp { name, op } => write!(
                f,
                "node {name} holds live {op}: settle or resolve it before retiring the node"
            ),
            Refusal::RosterLimit(limit) => write!(f, "{limit}"),
            Refusal::PlanNodeRetired(node) => {
                write!(f, "the plan names {node}, which is retired")
            }
            Refusal::NoTreeForArch {
                release,
                nodes,
                count,
            } => fmt_no_tree(f, *release, nodes, *count),
            Refusal::InvalidConfig(why) => write!(f, "invalid configuration: {why}"),
            Refusal::ConfigNotLatest {
                app,
                revision,
                latest,
            } => write!(
                f,
                "configuration revision {revision} of {app} is not its latest recorded one \
                 (latest: {latest}); set the configuration again, then start the rollout"
            ),
            Refusal::OverBudget(r) => write!(
                f,
                "rollout {r} is over its failure budget (too many failed, or too many UNKNOWN ops): it grants nothing more; settle the UNKNOWN ops, or start a new rollout"
            ),
            Refusal::OperatorRequired
            | Refusal::NotAnOperatorInput
            | Refusal::UnknownOperator(_)
            | Refusal::OperatorRevoked(_)
            | Refusal::CredentialNotCurrent(_)
            | Refusal::RoleRequired { .. }
            | Refusal::OperatorNameTaken(_)
            | Refusal::InvalidOperator(_)
            | Refusal::LastAdmin(_)
            | Refusal::NoSuchOperator(_)
            | Refusal::OperatorAlreadyRevoked(_) => self.fmt_operator_refusal(f),
            Refusal::UnknownOp(_) | Refusal::OpAlreadySettled(_) | Refusal::ObservationContradictsResolution(_) | Refusal::InvalidClaim(_) | Refusal::CommitMayStillLand(_) | Refusal::NothingToRollBack(_) | Refusal::NoBaseline(_) | Refusal::AlreadyRestoring(_) | Refusal::ObservedTooSoon{..} | Refusal::RestoreMayStillLand(_) => self.fmt_op_refusal(f),
        }
    }
}

impl Refusal {
    /// `Display` for the refusals of an operator action on one op (and of
    /// an observation too soon).
    fn fmt_op_refusal(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::UnknownOp(op) => write!(f, "unknown op {op}"),
            Refusal::OpAlreadySettled(op) => write!(f, "{op} is already settled"),
            Refusal::ObservationContradictsResolution(op) => write!(
                f,
                "the observation for {op} does not show what the resolution claims"
            ),
            Refusal::InvalidClaim(why) => write!(f, "invalid claim: {why}"),
            Refusal::CommitMayStillLand(op) => write!(
                f,
                "{op} has a stored commit decision that its node may still act on (it is replayed unchanged when the node asks again), so the baseline cannot be confirmed: wait for the node and confirm-new once it serves the new release, or abandon"
            ),
            Refusal::NothingToRollBack(op) => write!(
                f,
                "{op} has no stored commit decision, so its node never switched: there is nothing to roll back (its report will settle it, or resolve it with --resolution abandon)"
            ),
            Refusal::NoBaseline(op) => write!(
                f,
                "{op}'s node served nothing before it: there is no baseline to roll back to"
            ),
            Refusal::AlreadyRestoring(op) => {
                write!(f, "{op} is already being rolled back")
            }
            Refusal::ObservedTooSoon {
                node,
                retry_after_ms,
            } => write!(
                f,
                "an observation of {node} was recorded less than {} ms ago (one per node per interval keeps the log bounded): not recorded; try again in {retry_after_ms} ms",
                super::state::OBSERVATION_INTERVAL_MIN_MS
            ),
            Refusal::RestoreMayStillLand(op) => write!(
                f,
                "{op} is being restored: its node may still put the baseline back, so the new release cannot be confirmed: confirm-baseline once the baseline serves, or abandon"
            ),
            // `fmt` routes only these here.
            _ => unreachable!("Refusal::fmt_op_refusal: {self:?}"),
        }
    }
}

impl Refusal {
    /// `Display` for the refusals about who acts (issue #28 item 2).
    fn fmt_operator_refusal(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::OperatorRequired => f.write_str(
                "operators are recorded: this needs an operator's credential (and controller.toml may only enroll nodes)",
            ),
            Refusal::NotAnOperatorInput => {
                f.write_str("this input is not one an operator makes")
            }
            Refusal::UnknownOperator(name) => write!(f, "no operator named {name} is recorded"),
            Refusal::OperatorRevoked(name) => {
                write!(f, "operator {name} is revoked: its credential is refused")
            }
            Refusal::CredentialNotCurrent(name) => write!(
                f,
                "the credential presented is not operator {name}'s current one (it was rotated)"
            ),
            Refusal::RoleRequired {
                operator,
                needs,
                has,
            } => write!(
                f,
                "this needs the {} role; operator {operator} has the {} role",
                words::role(*needs),
                words::role(*has)
            ),
            Refusal::OperatorNameTaken(name) => write!(
                f,
                "an operator named {name} is recorded already (names of revoked operators are never reused)"
            ),
            Refusal::InvalidOperator(why) => write!(f, "invalid operator: {why}"),
            Refusal::LastAdmin(name) => write!(
                f,
                "operator {name} is the last admin: add another admin before revoking it"
            ),
            Refusal::NoSuchOperator(name) => write!(f, "no operator named {name} is recorded"),
            Refusal::OperatorAlreadyRevoked(name) => {
                write!(f, "operator {name} is revoked already")
            }
            // `fmt` routes only these here.
            _ => unreachable!("Refusal::fmt_operator_refusal: {self:?}"),
        }
    }
}

/// `Display` for [`Refusal::NoTreeForArch`].
fn fmt_no_tree(
    f: &mut fmt::Formatter<'_>,
    release: ArchSet,
    nodes: &[ArchMismatch],
    count: u32,
) -> fmt::Result {
    let named: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
    write!(
        f,
        "the release has trees for {release} only; the plan selects {count} node(s) \
         without one: {}",
        named.join(", ")
    )?;
    let more = (count as usize).saturating_sub(nodes.len());
    if more > 0 {
        write!(f, " and {more} more")?;
    }
    Ok(())
}

impl std::error::Error for Refusal {}

impl From<super::roster::RosterLimit> for Refusal {
    fn from(limit: super::roster::RosterLimit) -> Self {
        Refusal::RosterLimit(limit)
    }
}

impl From<PlanError> for Refusal {
    fn from(e: PlanError) -> Self {
        Refusal::InvalidPlan(e.to_string())
    }
}

/// Decide what happens on `input`. Returns the events to append durably and
/// then apply, in order; an empty list means "nothing changes" (repeated
/// timeouts, duplicates). Operator inputs that make no sense are refused.
///
/// Pure: `state` is left as it was. [`step_in_place`] is the same decision
/// on the caller's own copy of the state, without a second one.
pub fn step(state: &ControllerState, input: &Input) -> Result<Vec<Event>, Refusal> {
    // O(1): the state's collections are persistent.
    let mut after = state.clone();
    step_in_place(&mut after, input, &mut ())
}

/// Watches the events [`step_in_place`] applies, one at a time: the
/// runtime checks each event's rules before it is applied and collects its
/// effects after. `()` watches nothing.
pub trait Fold {
    /// Called with the state `event` is about to be applied to.
    fn before(&mut self, _state: &ControllerState, _event: &Event) {}
    /// Called with the state `event` led to.
    fn after(&mut self, _state: &ControllerState, _event: &Event) {}
}

impl Fold for () {}

/// [`step`], applying each event to `state` as it is decided and telling
/// `fold` about it. Follow-on work (grants, completion) is decided on the
/// state the events before it led to, so one input yields one atomic batch.
///
/// Deciding on the caller's state rather than on a copy of it matters for
/// cost: a persistent map copies every path a mutation touches while the
/// map is shared, so a private copy per step copied each touched path a
/// second time when the caller applied the same events (issue #11).
///
/// On a refusal `state` is unchanged: every refusal is decided before the
/// first event is applied.
pub fn step_in_place<F: Fold>(
    state: &mut ControllerState,
    input: &Input,
    fold: &mut F,
) -> Result<Vec<Event>, Refusal> {
    let mut events = decide(state, input)?;
    for event in &events {
        fold.before(state, event);
        apply(state, event);
        fold.after(state, event);
    }
    while let Some(event) = next_progress(state) {
        fold.before(state, &event);
        apply(state, &event);
        fold.after(state, &event);
        events.push(event);
    }
    Ok(events)
}

/// The decision for a commit request that has no stored decision yet.
/// Commit only if the op is still unsettled and its generation is current: a
/// superseded op must not switch the route over newer intent (S8).
pub fn decision_for(state: &ControllerState, op: &OpSummary) -> Decision {
    if op.outcome.is_none() && op.generation == state.generation {
        Decision::Commit
    } else {
        Decision::Abort
    }
}

/// Who may make `input` first (issue #28 item 2), then what it does.
fn decide(state: &ControllerState, input: &Input) -> Result<Vec<Event>, Refusal> {
    if let Input::Acting { actor, input } = input {
        return acting(state, actor, input);
    }
    if !state.operators.is_empty() && !super::roles::runs_without_actor(input) {
        return Err(Refusal::OperatorRequired);
    }
    decide_input(state, input)
}

/// `decide` for `Input::Acting`: the actor and its role checked, then the
/// input's events headed by `Acted`. An input that changes nothing records
/// nothing, not even who tried.
fn acting(state: &ControllerState, actor: &Actor, input: &Input) -> Result<Vec<Event>, Refusal> {
    let by = authorize(state, actor, input)?;
    let mut events = decide_input(state, input)?;
    claimed_by_actor(&by, input)?;
    if !events.is_empty() {
        events.insert(0, Event::Acted { by });
    }
    Ok(events)
}

/// Whether `actor` may make `input`: a recorded operator, its credential
/// current, not revoked, with the role [`super::roles::required_role`] names.
fn authorize(state: &ControllerState, actor: &Actor, input: &Input) -> Result<ActedBy, Refusal> {
    let name = match actor {
        Actor::Operator { name, .. } => Some(name.as_str()),
        Actor::ControllerConfig => None,
    };
    let needs = super::roles::required_role(input, name).ok_or(Refusal::NotAnOperatorInput)?;
    let Actor::Operator { name, credential } = actor else {
        return match input {
            Input::EnrollNode { .. } => Ok(ActedBy::ControllerConfig),
            _ => Err(Refusal::OperatorRequired),
        };
    };
    let record = state
        .operators
        .get(name)
        .ok_or_else(|| Refusal::UnknownOperator(name.clone()))?;
    if record.revoked {
        return Err(Refusal::OperatorRevoked(name.clone()));
    }
    if record.credential != *credential {
        return Err(Refusal::CredentialNotCurrent(name.clone()));
    }
    if record.role < needs {
        return Err(Refusal::RoleRequired {
            operator: name.clone(),
            needs,
            has: record.role,
        });
    }
    Ok(ActedBy::Operator(name.clone()))
}

/// A claim is held by the operator who makes it: judged once the claim
/// itself is (an op that does not exist is refused as such first).
fn claimed_by_actor(by: &ActedBy, input: &Input) -> Result<(), Refusal> {
    match (by, input) {
        (ActedBy::Operator(name), Input::Claim { owner, .. }) if owner != name => {
            Err(Refusal::InvalidClaim(format!(
                "a claim is held by the operator who makes it: {name} cannot claim for {owner:?}"
            )))
        }
        _ => Ok(()),
    }
}

/// `decide` for an input once who makes it is settled.
fn decide_input(state: &ControllerState, input: &Input) -> Result<Vec<Event>, Refusal> {
    match input {
        Input::Acting { .. } => Err(Refusal::NotAnOperatorInput),
        Input::AddOperator {
            name,
            role,
            credential,
        } => add_operator(state, name, *role, credential),
        Input::RotateCredential { name, credential } => rotate_credential(state, name, credential),
        Input::RevokeOperator { name } => revoke_operator(state, name),
        Input::StartRollout { plan } => {
            start(state, plan, &Policy::default(), ReleaseArches::Any, None)
        }
        Input::StartStaged {
            plan,
            policy,
            arches,
            deploys,
        } => start(state, plan, policy, *arches, deploys.as_ref()),
        Input::SetConfig { revision } => set_config(state, revision),
        Input::Pause { rollout } => pause(state, *rollout),
        Input::Resume { rollout } => resume(state, *rollout),
        Input::Approve { rollout } => approve(state, *rollout),
        Input::Resolve {
            op,
            observation,
            resolution,
        } => resolve(state, *op, observation, *resolution),
        Input::Claim {
            op,
            owner,
            review_by,
        } => claim(state, *op, owner, review_by),
        Input::FromAgent { node, msg } => Ok(from_agent(state, *node, msg)),
        Input::RouteProbed { node, observation } => Ok(route_probed(state, *node, observation)),
        Input::RollBack { op } => roll_back(state, *op),
        Input::Observe {
            node,
            observation,
            source,
            now_ms,
        } => observe(state, *node, observation, *source, *now_ms),
        Input::IdentityConflict {
            node,
            first_peer,
            second_peer,
        } => identity_conflict(state, *node, first_peer, second_peer),
        Input::ReleaseNode { node } => release_node(state, *node),
        Input::RevokeCert { node, fingerprint } => revoke_cert(state, *node, fingerprint),
        Input::EnrollNode {
            name,
            labels,
            public,
        } => enroll(state, name, labels, public),
        Input::LabelNode { name, set, remove } => label(state, name, set, remove),
        Input::RetireNode { name } => retire(state, name),
        Input::Timeout { op } => Ok(match state.op(*op) {
            // Silence never settles and never frees a slot (S3): it only
            // makes the op UNKNOWN. A second timeout changes nothing.
            Some(o) if o.occupies_slot() && !o.is_unknown() => vec![Event::OpUnknown {
                op: *op,
                reason: UnknownReason::Silence,
            }],
            _ => vec![],
        }),
    }
}

/// `decide` for `Input::Pause`.
fn pause(state: &ControllerState, rollout: RolloutId) -> Result<Vec<Event>, Refusal> {
    let r = active(state, rollout)?;
    if r.paused.is_some() {
        return Err(Refusal::AlreadyPaused(rollout));
    }
    Ok(vec![Event::RolloutPaused {
        rollout,
        reason: PauseReason::Operator,
    }])
}

/// `decide` for `Input::Resume`.
fn resume(state: &ControllerState, rollout: RolloutId) -> Result<Vec<Event>, Refusal> {
    let r = active(state, rollout)?;
    if r.paused.is_none() {
        return Err(Refusal::NotPaused(rollout));
    }
    // B1: a rollout over its budget grants nothing, so resuming it
    // would change nothing (the UNKNOWN budget frees up as those
    // ops settle; a spent failure budget needs a new rollout).
    if r.over_budget() {
        return Err(Refusal::OverBudget(rollout));
    }
    Ok(vec![Event::RolloutResumed { rollout }])
}

/// `decide` for `Input::Approve`.
fn approve(state: &ControllerState, rollout: RolloutId) -> Result<Vec<Event>, Refusal> {
    active(state, rollout)?;
    if !state.awaiting_approval(rollout) {
        return Err(Refusal::NotAwaitingApproval(rollout));
    }
    Ok(vec![Event::RolloutApproved { rollout }])
}

/// `decide` for `Input::Resolve`.
fn resolve(
    state: &ControllerState,
    op: OpId,
    observation: &RouteObservation,
    resolution: Resolution,
) -> Result<Vec<Event>, Refusal> {
    let o = unsettled(state, op)?;
    // A baseline seen now is not a baseline kept: while a Commit is
    // stored and nothing shows the node acted on it (or on a
    // restore), the node's next commit request gets that Commit and
    // switches (S8: a late command must not contradict what the
    // controller recorded). A roll back ordered before the Commit
    // landed does not change that until the agent reports.
    if resolution == Resolution::ConfirmBaseline && o.commit_may_still_land() {
        return Err(Refusal::CommitMayStillLand(op));
    }
    // Symmetrically, a restore in flight may still put the baseline
    // back under a record that says the new release serves.
    if resolution == Resolution::ConfirmNew && o.phase == OpPhase::Restoring {
        return Err(Refusal::RestoreMayStillLand(op));
    }
    let backed = match resolution {
        Resolution::ConfirmNew => observation.proves_serving(o.release),
        Resolution::ConfirmBaseline => o.baseline.is_some_and(|b| observation.proves_serving(b)),
        Resolution::Abandon => true,
    };
    if !backed {
        return Err(Refusal::ObservationContradictsResolution(op));
    }
    Ok(vec![
        Event::OperatorObserved {
            op,
            observation: *observation,
        },
        Event::OpSettled {
            op,
            outcome: Outcome::Resolved(resolution),
        },
    ])
}

/// `decide` for `Input::Claim`.
fn claim(
    state: &ControllerState,
    op: OpId,
    owner: &str,
    review_by: &str,
) -> Result<Vec<Event>, Refusal> {
    unsettled(state, op)?;
    if owner.trim().is_empty() {
        return Err(Refusal::InvalidClaim("the owner is empty".into()));
    }
    for (field, text) in [("owner", owner), ("review_by", review_by)] {
        if text.chars().count() > CLAIM_TEXT_MAX {
            return Err(Refusal::InvalidClaim(format!(
                "{field} is longer than {CLAIM_TEXT_MAX} characters"
            )));
        }
    }
    Ok(vec![Event::OpClaimed {
        op,
        owner: owner.to_owned(),
        review_by: review_by.to_owned(),
    }])
}

/// `decide` for `Input::ReleaseNode`.
fn release_node(state: &ControllerState, node: NodeId) -> Result<Vec<Event>, Refusal> {
    if !state.is_quarantined(node) {
        return Err(Refusal::NotQuarantined(node));
    }
    Ok(vec![Event::NodeReleased { node }])
}

/// `decide` for `Input::RevokeCert`.
fn revoke_cert(
    state: &ControllerState,
    node: NodeId,
    fingerprint: &crate::ids::Digest,
) -> Result<Vec<Event>, Refusal> {
    if state.revoked_certs.contains_key(fingerprint) {
        return Err(Refusal::AlreadyRevoked(node));
    }
    Ok(vec![Event::CertRevoked {
        node,
        fingerprint: *fingerprint,
    }])
}

/// Start a rollout: supersede the active one (aborting its undecided ops),
/// then record the plan and, when not the default, its policy.
fn start(
    state: &ControllerState,
    plan: &Plan,
    policy: &Policy,
    arches: ReleaseArches,
    deploys: Option<&Deploys>,
) -> Result<Vec<Event>, Refusal> {
    plan.validate()?;
    policy.validate(plan)?;
    if let Some(node) = plan.nodes().find(|n| state.roster.is_retired(*n)) {
        return Err(Refusal::PlanNodeRetired(node));
    }
    check_arches(state, plan, arches)?;
    if let Some(deploys) = deploys {
        check_deploys(state, deploys)?;
    }
    let rollout = RolloutId(state.rollouts.len() as u32);
    let mut events = Vec::new();
    if let Some(active) = state.active_rollout() {
        events.push(Event::RolloutSuperseded {
            rollout: active.id,
            by: rollout,
        });
        // Its ops that have no decision yet can only ever be
        // aborted (their generation is about to be superseded):
        // decide that now, durably, so the stored abort is what a
        // node hears, on reconnect too, instead of an `Apply` that
        // would fetch and stage a release that can never run.
        // Deciding early is the decision a commit request would get
        // (S6 replays it unchanged); the op keeps its slot until
        // the node's report settles it (S3).
        events.extend(
            active
                .ops
                .iter()
                .filter_map(|id| state.op(*id))
                .filter(|o| o.phase == OpPhase::Granted && o.decision.is_none())
                .map(|o| Event::CommitDecided {
                    op: o.id,
                    decision: Decision::Abort,
                }),
        );
    }
    // One log entry stays bounded: a plan over FOLLOWERS_PER_EVENT_MAX
    // followers goes on in RolloutFollowersAdded entries, before its policy
    // (which is checked against the whole plan) and before any grant.
    let mut chunks = plan.followers.chunks(FOLLOWERS_PER_EVENT_MAX);
    events.push(Event::RolloutStarted {
        rollout,
        plan: Plan {
            release: plan.release,
            canary: plan.canary,
            followers: chunks.next().unwrap_or_default().to_vec(),
            slots_max: plan.slots_max,
            approval_after_canary: plan.approval_after_canary,
        },
        generation: crate::ids::Generation(state.generation.0 + 1),
    });
    events.extend(chunks.map(|chunk| Event::RolloutFollowersAdded {
        rollout,
        followers: chunk.to_vec(),
    }));
    if *policy != Policy::default() {
        events.push(Event::RolloutPolicySet {
            rollout,
            policy: policy.clone(),
        });
    }
    if let ReleaseArches::Only(arches) = arches {
        events.push(Event::RolloutArchesSet { rollout, arches });
    }
    if let Some(deploys) = deploys {
        let deploys = deploys.clone();
        events.push(Event::RolloutConfigured { rollout, deploys });
    }
    Ok(events)
}

/// A rollout deploys the app's latest recorded configuration revision,
/// with the fingerprint the log recorded for it (issue #24 item 1): what
/// the agent is told to run is what the log says was set.
pub fn check_deploys(state: &ControllerState, deploys: &Deploys) -> Result<(), Refusal> {
    let head = state.configs.get(&deploys.app);
    let latest = head.map_or(0, |h| h.revision);
    let recorded = head
        .is_some_and(|h| h.revision == deploys.revision && h.fingerprint == deploys.fingerprint);
    if recorded {
        Ok(())
    } else {
        Err(Refusal::ConfigNotLatest {
            app: deploys.app.clone(),
            revision: deploys.revision,
            latest,
        })
    }
}

/// Record a configuration revision: within its bounds, with allowed
/// names, and the app's next revision (1 for its first), so two operators
/// setting at once cannot both write "revision 2".
fn set_config(state: &ControllerState, revision: &ConfigRevision) -> Result<Vec<Event>, Refusal> {
    revision
        .check()
        .map_err(|p| Refusal::InvalidConfig(p.to_string()))?;
    let next = state
        .configs
        .get(&revision.app)
        .map_or(1, |h| h.revision + 1);
    if revision.revision != next {
        let problem = ConfigProblem::NotNext {
            app: revision.app.clone(),
            given: revision.revision,
            next,
        };
        return Err(Refusal::InvalidConfig(problem.to_string()));
    }
    if next == 1 && state.configs.len() >= crate::config::CONFIG_APPS_MAX {
        return Err(Refusal::InvalidConfig(
            ConfigProblem::TooManyApps.to_string(),
        ));
    }
    Ok(vec![Event::ConfigSet {
        revision: revision.clone(),
    }])
}

/// Every node `plan` selects must be one `arches` admits (issue #24 item
/// 5), before anything is recorded or granted: a node whose recorded
/// architecture the release has no tree for, or whose architecture is not
/// known yet, is refused by name ([`ReleaseArches::admits`]). An
/// architecture-independent release admits every node.
pub fn check_arches(
    state: &ControllerState,
    plan: &Plan,
    arches: ReleaseArches,
) -> Result<(), Refusal> {
    let ReleaseArches::Only(release) = arches else {
        return Ok(());
    };
    let mut nodes = Vec::new();
    let mut count: u32 = 0;
    for node in plan.nodes() {
        let arch = state
            .nodes
            .get(&node)
            .and_then(|r| r.platform)
            .map(|p| p.arch);
        if arches.admits(arch) {
            continue;
        }
        count += 1;
        if nodes.len() < ARCH_MISMATCHES_NAMED_MAX {
            nodes.push(ArchMismatch {
                name: state.roster.display_name(node),
                arch,
            });
        }
    }
    if count == 0 {
        return Ok(());
    }
    Err(Refusal::NoTreeForArch {
        release,
        nodes,
        count,
    })
}

/// An identity conflict quarantines the node once: however long the two
/// agents fight, a node already quarantined records nothing more (the log
/// stays bounded at one `NodeQuarantined` per conflict).
fn identity_conflict(
    state: &ControllerState,
    node: NodeId,
    first_peer: &str,
    second_peer: &str,
) -> Result<Vec<Event>, Refusal> {
    let limit = super::state::PEER_TEXT_MAX;
    if first_peer.chars().count() > limit || second_peer.chars().count() > limit {
        return Err(Refusal::InvalidPeer(node));
    }
    if state.is_quarantined(node) {
        return Ok(vec![]);
    }
    Ok(vec![Event::NodeQuarantined {
        node,
        first_peer: first_peer.to_string(),
        second_peer: second_peer.to_string(),
    }])
}

/// The op an operator input names, if it still holds a slot: a settled op
/// (hot or archived) is refused as settled, an op never granted as unknown.
fn unsettled(state: &ControllerState, id: OpId) -> Result<&Op, Refusal> {
    match state.op(id) {
        Some(o) if o.occupies_slot() => Ok(o),
        Some(_) => Err(Refusal::OpAlreadySettled(id)),
        // Archived or forgotten: settled in a finished rollout.
        None if id < state.next_op_id() => Err(Refusal::OpAlreadySettled(id)),
        None => Err(Refusal::UnknownOp(id)),
    }
}

fn active(state: &ControllerState, id: RolloutId) -> Result<&super::state::Rollout, Refusal> {
    let r = state.rollout(id).ok_or(Refusal::UnknownRollout(id))?;
    if r.status != RolloutStatus::Active {
        return Err(Refusal::RolloutNotActive(id));
    }
    Ok(r)
}

/// The node's own unsettled op with this id, or `None` when the message is
/// late (op settled) or foreign (op of another node: a node cannot speak for
/// another, S8).
/// Why a message about `op` from `node` changes nothing: the op is the
/// node's own but settled (late), or it is another node's or unknown
/// (foreign). The two are told apart in the log because the second is what
/// an impostor or a confused node looks like.
fn ignored(state: &ControllerState, node: NodeId, op: OpId) -> Event {
    if state.op_forgotten(op) {
        return Event::ForgottenOpIgnored { node, op };
    }
    match state.op_summary(op) {
        Some(o) if o.node == node => Event::LateReportIgnored { node, op },
        Some(o) => Event::ForeignMessageIgnored {
            node,
            op,
            owner: Some(o.node),
        },
        None => Event::ForeignMessageIgnored {
            node,
            op,
            owner: None,
        },
    }
}

fn own_live_op(state: &ControllerState, node: NodeId, op: OpId) -> Option<&Op> {
    state.op(op).filter(|o| o.node == node && o.occupies_slot())
}

fn from_agent(state: &ControllerState, node: NodeId, msg: &ToController) -> Vec<Event> {
    // Two agents hold a quarantined node's identity: what "it" says may
    // come from either, so it is no evidence and is not recorded (which
    // also keeps the log from growing while they fight). Its op keeps its
    // slot; silence makes it UNKNOWN, never done or failed.
    if state.is_quarantined(node) {
        return vec![];
    }
    match *msg {
        ToController::Hello {
            serving,
            generation,
        } => vec![Event::NodeHello {
            node,
            serving,
            generation,
        }],
        ToController::Platform { platform } => state
            .nodes
            .get(&node)
            .and_then(|r| r.platform)
            .ne(&Some(platform))
            .then_some(Event::NodePlatform { node, platform })
            .into_iter()
            .collect(),
        ToController::CommitRequest { op } => match state.op_summary(op) {
            Some(o) if o.node == node => match o.decision {
                // S6: a stored decision is replayed, never re-decided.
                Some(decision) => vec![Event::CommitReplayed { op, decision }],
                None => vec![Event::CommitDecided {
                    op,
                    decision: decision_for(state, &o),
                }],
            },
            _ => vec![ignored(state, node, op)],
        },
        ToController::Report {
            op,
            kind,
            observation,
        } => match own_live_op(state, node, op) {
            None => vec![ignored(state, node, op)],
            Some(o) => {
                let judged = judge_report(state, o, kind, &observation);
                let item = EvidenceItem {
                    source: EvidenceSource::Agent(kind),
                    observation,
                    after_restore: o.phase == OpPhase::Restoring,
                };
                // An agent re-sends its report until newer work arrives. A
                // copy that says what the op's latest evidence already says
                // and changes no judgement is not logged again: the state
                // would not change, and an op waiting for a person would
                // otherwise add one fsynced entry per retry for as long as
                // it waits (found in the runtime: one entry a second).
                if judged.is_empty() && o.evidence.last() == Some(&item) {
                    return vec![];
                }
                let mut events = vec![Event::ReportRecorded {
                    op,
                    kind,
                    observation,
                }];
                events.extend(judged);
                events
            }
        },
        ToController::Rejected {
            op,
            generation,
            accepted,
        } => vec![Event::StaleCommandRejected {
            node,
            op,
            generation,
            accepted,
        }],
    }
}

/// What an agent's report means for its op.
fn judge_report(
    state: &ControllerState,
    op: &Op,
    kind: ReportKind,
    observation: &RouteObservation,
) -> Vec<Event> {
    let id = op.id;
    match (kind, op.phase, op.decision) {
        (ReportKind::Switched, OpPhase::Decided, Some(Decision::Commit)) => {
            if observation.proves_serving(op.release) {
                vec![Event::OpSettled {
                    op: id,
                    outcome: Outcome::Verified,
                }]
            } else {
                // S11: judged by what the service answers, not by whether the
                // process runs. Restore the baseline and stop the rollout.
                restore_and_pause(state, op)
            }
        }
        (ReportKind::Restored, OpPhase::Restoring, _) => {
            match op.baseline {
                // S9: only a serving probe of the baseline proves a rollback.
                Some(b) if observation.proves_serving(b) => vec![Event::OpSettled {
                    op: id,
                    outcome: Outcome::RolledBack,
                }],
                _ => unknown(op, UnknownReason::RestoreUnproven),
            }
        }
        // Not switched: aborted, or the agent refused to stage the bundle.
        (ReportKind::NotApplied | ReportKind::Refused(_), _, None | Some(Decision::Abort)) => {
            match op.baseline {
                Some(b) if observation.proves_serving(b) => vec![Event::OpSettled {
                    op: id,
                    outcome: Outcome::NotApplied,
                }],
                _ => unknown(op, UnknownReason::RestoreUnproven),
            }
        }
        // (issue #24 item 2) The release's migration failed after the
        // Commit: the agent put the data back and never moved the route.
        // A failed release, like a wrong answer: restore (the agent's
        // restore of data and route is idempotent) and stop the rollout;
        // only a serving probe of the baseline settles it (S9).
        (
            ReportKind::Refused(StageRefusal::MigrationFailed),
            OpPhase::Decided,
            Some(Decision::Commit),
        ) => restore_and_pause(state, op),
        // A switch report while restoring is a late echo: recorded, no more;
        // so is a migration's refusal re-sent while the restore runs.
        (ReportKind::Switched, OpPhase::Restoring, _)
        | (
            ReportKind::Refused(StageRefusal::MigrationFailed | StageRefusal::MigrationInterrupted),
            OpPhase::Restoring,
            _,
        ) => vec![],
        // Anything else contradicts what the op's phase allows.
        _ => unknown(op, UnknownReason::Contradictory),
    }
}

fn route_probed(
    state: &ControllerState,
    node: NodeId,
    observation: &RouteObservation,
) -> Vec<Event> {
    let Some(op) = state
        .nodes
        .get(&node)
        .and_then(|n| n.live_op)
        .and_then(|id| state.op(id))
    else {
        return vec![];
    };
    let mut events = vec![Event::ProbeRecorded {
        op: op.id,
        observation: *observation,
    }];
    let proves_baseline = op.baseline.is_some_and(|b| observation.proves_serving(b));
    match (op.phase, op.decision) {
        (OpPhase::Decided, Some(Decision::Commit)) => {
            if observation.proves_serving(op.release) {
                events.push(Event::OpSettled {
                    op: op.id,
                    outcome: Outcome::Verified,
                });
            } else if observation.identity == Some(op.release)
                && observation.verdict != ProbeVerdict::Pass
            {
                events.extend(restore_and_pause(state, op));
            }
        }
        // Only once the node is past its Commit: a restore ordered before
        // the Commit landed is proven by the agent's own restore report.
        (OpPhase::Restoring, _) if proves_baseline && !op.commit_may_still_land() => {
            events.push(Event::OpSettled {
                op: op.id,
                outcome: Outcome::RolledBack,
            })
        }
        (OpPhase::Decided, Some(Decision::Abort)) if proves_baseline => {
            events.push(Event::OpSettled {
                op: op.id,
                outcome: Outcome::NotApplied,
            })
        }
        _ => {}
    }
    events
}

/// A fresh observation of a node. With a live op it is that op's evidence,
/// exactly as the controller's own probe (the model has one meaning for a
/// look at a route). Without one it is recorded as the node's latest
/// observation, at most one per node per `OBSERVATION_INTERVAL_MIN_MS`
/// (a clock that went backwards counts as too soon): drift is judged on it
/// by [`super::state::NodeRecord::drift`], and no op changes.
fn observe(
    state: &ControllerState,
    node: NodeId,
    observation: &RouteObservation,
    source: super::state::ObservationSource,
    now_ms: u64,
) -> Result<Vec<Event>, Refusal> {
    let record = state.nodes.get(&node);
    if record.is_some_and(|r| r.live_op.is_some()) {
        return Ok(route_probed(state, node, observation));
    }
    let last_ms = record.and_then(|r| r.observed).map(|seen| seen.at_ms);
    if let Some(last_ms) = last_ms {
        let next_ms = last_ms.saturating_add(super::state::OBSERVATION_INTERVAL_MIN_MS);
        if now_ms < next_ms {
            return Err(Refusal::ObservedTooSoon {
                node,
                retry_after_ms: next_ms - now_ms.max(last_ms),
            });
        }
    }
    Ok(vec![Event::NodeObserved {
        node,
        observation: *observation,
        source,
        at_ms: now_ms,
    }])
}

/// The operator's roll back: the same restore a failed canary probe asks
/// for (and the same proof needed to settle it, S9), recorded as ordered by
/// the operator. Only an op whose node may have switched (a stored Commit)
/// and that has a baseline can be rolled back.
fn roll_back(state: &ControllerState, id: OpId) -> Result<Vec<Event>, Refusal> {
    let op = unsettled(state, id)?;
    if op.phase == OpPhase::Restoring {
        return Err(Refusal::AlreadyRestoring(id));
    }
    if op.decision != Some(Decision::Commit) {
        return Err(Refusal::NothingToRollBack(id));
    }
    if op.baseline.is_none() {
        return Err(Refusal::NoBaseline(id));
    }
    let mut events = vec![
        Event::RollBackOrdered { op: id },
        Event::RestoreRequested { op: id },
    ];
    // Backing a release out of one node and granting it to the next would
    // contradict each other: no grants until the operator resumes.
    if let Some(r) = state.rollout(op.rollout) {
        if r.status == RolloutStatus::Active && r.paused.is_none() {
            events.push(Event::RolloutPaused {
                rollout: r.id,
                reason: PauseReason::Operator,
            });
        }
    }
    Ok(events)
}

/// A failed probe: restore the baseline, and pause the rollout unless the
/// op is a follower within the failure budget (B1). A canary always pauses
/// (S11); without a budget the first failure pauses, as a plan alone does.
fn restore_and_pause(state: &ControllerState, op: &Op) -> Vec<Event> {
    let mut events = vec![Event::RestoreRequested { op: op.id }];
    if let Some(r) = state.rollout(op.rollout) {
        if r.status == RolloutStatus::Active && r.paused.is_none() {
            let reason = match r.policy.max_failed {
                _ if op.is_canary => Some(PauseReason::ProbeFailed { op: op.id }),
                None => Some(PauseReason::ProbeFailed { op: op.id }),
                // This restore makes `failed` one more.
                Some(max) if r.failed + 1 > max => Some(PauseReason::FailureBudget { op: op.id }),
                Some(_) => None,
            };
            if let Some(reason) = reason {
                events.push(Event::RolloutPaused {
                    rollout: r.id,
                    reason,
                });
            }
        }
    }
    events
}

fn unknown(op: &Op, reason: UnknownReason) -> Vec<Event> {
    if op.unknown == Some(reason) {
        vec![]
    } else {
        vec![Event::OpUnknown { op: op.id, reason }]
    }
}

/// Something an operator can do about an unsettled op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum OperatorAction {
    /// `Input::RollBack`.
    RollBack,
    /// `Input::Resolve` with `Resolution::ConfirmNew`, given an observation
    /// that shows the new release serving.
    ConfirmNew,
    /// `Input::Resolve` with `Resolution::ConfirmBaseline`, given an
    /// observation that shows the baseline serving.
    ConfirmBaseline,
    /// `Input::Resolve` with `Resolution::Abandon`.
    Abandon,
}

/// What `step` would accept about `op` now, found by asking it (with the
/// observation each resolution needs), so no surface restates a refusal.
pub fn operator_actions(state: &ControllerState, op: OpId) -> Vec<OperatorAction> {
    let Some(o) = state.op(op) else {
        return Vec::new();
    };
    let resolve = |resolution, release: Option<crate::ids::Digest>| Input::Resolve {
        op,
        observation: release.map_or(
            RouteObservation::new(ProbeVerdict::Unreachable, None, false),
            RouteObservation::passing,
        ),
        resolution,
    };
    let candidates = [
        (OperatorAction::RollBack, Input::RollBack { op }),
        (
            OperatorAction::ConfirmNew,
            resolve(Resolution::ConfirmNew, Some(o.release)),
        ),
        (
            OperatorAction::ConfirmBaseline,
            resolve(Resolution::ConfirmBaseline, o.baseline),
        ),
        (OperatorAction::Abandon, resolve(Resolution::Abandon, None)),
    ];
    candidates
        .into_iter()
        .filter(|(_, input)| decide_input(state, input).is_ok())
        .map(|(action, _)| action)
        .collect()
}

/// Something an operator can do about a rollout as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RolloutAction {
    /// `Input::Approve`: open the approval gate it waits at.
    Approve,
    /// `Input::Resume`: grant again after a pause.
    Resume,
    /// `Input::Pause`: stop granting, keep accounting.
    Pause,
}

/// What `step` would accept about `rollout` now, found by asking it, so no
/// surface restates when a rollout can be approved, resumed or paused.
pub fn rollout_actions(state: &ControllerState, rollout: RolloutId) -> Vec<RolloutAction> {
    [
        (RolloutAction::Approve, Input::Approve { rollout }),
        (RolloutAction::Resume, Input::Resume { rollout }),
        (RolloutAction::Pause, Input::Pause { rollout }),
    ]
    .into_iter()
    .filter(|(_, input)| decide_input(state, input).is_ok())
    .map(|(action, _)| action)
    .collect()
}

/// Something an operator can do about an enrolled node as a member of the
/// fleet (labels and probes are always offered; the model judges them
/// when they come).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NodeAction {
    /// `Input::RetireNode`: refused while the node holds a live op.
    Retire,
    /// `Input::ReleaseNode`: lift a quarantine.
    Release,
}

/// What `step` would accept about `node` now, found by asking it, so no
/// surface restates when a node can be retired or released.
pub fn node_actions(state: &ControllerState, node: NodeId) -> Vec<NodeAction> {
    let Some(name) = state.roster.name(node) else {
        return Vec::new();
    };
    [
        (
            NodeAction::Retire,
            Input::RetireNode {
                name: name.to_string(),
            },
        ),
        (NodeAction::Release, Input::ReleaseNode { node }),
    ]
    .into_iter()
    .filter(|(_, input)| decide_input(state, input).is_ok())
    .map(|(action, _)| action)
    .collect()
}

/// Grants and completion that the current state allows, as events. Called at
/// the end of every step so the state never sits with work it could do.
pub fn progress(state: &ControllerState) -> Vec<Event> {
    let mut events = Vec::new();
    let mut after = state.clone();
    while let Some(event) = next_progress(&after) {
        apply(&mut after, &event);
        events.push(event);
    }
    events
}

fn next_progress(state: &ControllerState) -> Option<Event> {
    let r = state.active_rollout()?;
    match settled_count(state, r) {
        Some(0) => return Some(Event::RolloutCompleted { rollout: r.id }),
        // A paused rollout waits for its operator, never ends on its own.
        Some(not_passed) if r.paused.is_none() => {
            return Some(Event::RolloutEnded {
                rollout: r.id,
                not_passed,
            })
        }
        _ => {}
    }
    // B1: as many UNKNOWN ops as the budget allows is a signal (a
    // partition, say): stop and let a person look. UNKNOWN is not failed.
    if r.paused.is_none() && r.policy.max_unknown.is_some_and(|m| r.unknown >= m) {
        return Some(Event::RolloutPaused {
            rollout: r.id,
            reason: PauseReason::UnknownBudget,
        });
    }
    // S5: pause stops grants. S1: UNKNOWN ops count as occupied. B1: nothing
    // is granted over the budget.
    if r.paused.is_some() || r.occupied >= u32::from(r.plan.slots_max) || r.over_budget() {
        return None;
    }
    // S4: the canary first, and nothing else until it passed (and, where the
    // plan says so, an operator approved).
    match state.rollout_op_for(r.id, r.plan.canary) {
        None => return grant(state, r.id, r.plan.canary, true),
        Some(op) if !op.passed() => return None,
        Some(_) => {}
    }
    if r.plan.approval_after_canary && !r.approved {
        return None;
    }
    // Followers strictly in plan order: the first one without an op is next
    // (a follower gets an op only by being next, so the count is its place).
    let next = *r.plan.followers.get(r.followers_granted as usize)?;
    debug_assert!(r.op_for(next).is_none(), "the next follower has no op yet");
    // S4 across waves: a later wave opens only once every op of the waves
    // before it settled and, where the policy says so, an operator approved.
    if let Some((_, unapproved)) = r.next_wave_gate() {
        if r.occupied > 0 || unapproved {
            return None;
        }
    }
    grant(state, r.id, next, false)
}

/// Whether nothing more can happen in rollout `r`, and if so how many
/// nodes of its plan did not pass (0: the rollout is complete). Nothing more
/// can happen once every node of the plan has a settled op of `r`, or once
/// `r`'s canary op settled without passing (S4: no follower can follow it).
fn settled_count(state: &ControllerState, r: &Rollout) -> Option<u32> {
    let canary = state.rollout_op_for(r.id, r.plan.canary)?;
    if canary.occupies_slot() {
        return None;
    }
    if !canary.passed() {
        return Some(1);
    }
    // Each node of the plan gets at most one op of the rollout, so the
    // settled count reaching the plan's size means every node has one.
    let plan_nodes = 1 + r.plan.followers.len();
    (r.settled as usize == plan_nodes).then_some(r.settled_not_passed)
}

fn grant(
    state: &ControllerState,
    rollout: RolloutId,
    node: NodeId,
    is_canary: bool,
) -> Option<Event> {
    let r = state.rollout(rollout)?;
    let record = state.nodes.get(&node).cloned().unwrap_or_default();
    // S2: never a second unsettled op on a node (maybe from an older
    // rollout). Q1: nothing is granted to a quarantined node; the rollout
    // waits for an operator.
    // R1: nothing is granted to a retired node either.
    if record.live_op.is_some() || state.is_quarantined(node) || state.roster.is_retired(node) {
        return None;
    }
    // A1: nothing is granted to a node the release has no tree for (its
    // architecture changed since the start checked it); the rollout waits,
    // as for a retired node.
    if !r.arches.admits(record.platform.map(|p| p.arch)) {
        return None;
    }
    // A drifted node's baseline is what was observed there, never the old
    // claim (SPEC §10, proof is a readback).
    Some(Event::OpGranted {
        op: state.next_op_id(),
        rollout,
        node,
        release: r.plan.release,
        generation: r.generation,
        baseline: record.baseline(),
        is_canary,
    })
}

/// Decide `Input::EnrollNode`: a valid, fresh name takes the next id.
fn enroll(
    state: &ControllerState,
    name: &str,
    labels: &Labels,
    public: &str,
) -> Result<Vec<Event>, Refusal> {
    validate_name(name)?;
    validate_labels(labels)?;
    validate_public(public)?;
    let roster = &state.roster;
    if roster.id(name).is_some() {
        return Err(Refusal::NodeNameTaken(name.to_string()));
    }
    if roster.len() >= crate::plan::NODES_MAX {
        return Err(RosterLimit::RosterFull.into());
    }
    Ok(vec![Event::NodeEnrolled {
        node: roster.next_id(),
        name: name.to_string(),
        labels: labels.clone(),
        public: public.to_string(),
    }])
}

/// The enrolled, not retired node called `name`.
fn active_node(state: &ControllerState, name: &str) -> Result<NodeId, Refusal> {
    let node = state
        .roster
        .id(name)
        .ok_or_else(|| Refusal::UnknownNode(name.to_string()))?;
    if state.roster.is_retired(node) {
        return Err(Refusal::NodeRetired(name.to_string()));
    }
    Ok(node)
}

/// Decide `Input::LabelNode`: the event carries the whole new label set.
fn label(
    state: &ControllerState,
    name: &str,
    set: &Labels,
    remove: &BTreeSet<String>,
) -> Result<Vec<Event>, Refusal> {
    let node = active_node(state, name)?;
    let mut labels = state
        .roster
        .get(node)
        .map(|e| e.labels.clone())
        .unwrap_or_default();
    for key in remove {
        labels.remove(key);
    }
    labels.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
    validate_labels(&labels)?;
    // Nothing changes: nothing to record.
    if state.roster.get(node).is_some_and(|e| e.labels == labels) {
        return Ok(vec![]);
    }
    Ok(vec![Event::NodeLabeled { node, labels }])
}

/// Decide `Input::RetireNode`: refused while the node holds a live op.
fn retire(state: &ControllerState, name: &str) -> Result<Vec<Event>, Refusal> {
    let node = active_node(state, name)?;
    // A live op holds a slot until evidence settles it (S3); retiring its
    // node would leave it unsettleable. Settle or resolve it first.
    if let Some(op) = state.nodes.get(&node).and_then(|r| r.live_op) {
        return Err(Refusal::NodeHasLiveOp {
            name: name.to_string(),
            op,
        });
    }
    Ok(vec![Event::NodeRetired { node }])
}

/// `decide` for `Input::AddOperator`.
fn add_operator(
    state: &ControllerState,
    name: &str,
    role: operators::Role,
    credential: &crate::ids::Digest,
) -> Result<Vec<Event>, Refusal> {
    if let Some(why) = operators::invalid_name(name) {
        return Err(Refusal::InvalidOperator(why));
    }
    if state.operators.get(name).is_some() {
        return Err(Refusal::OperatorNameTaken(name.to_string()));
    }
    if state.operators.len() >= operators::OPERATORS_MAX {
        return Err(Refusal::InvalidOperator(format!(
            "{} operators are recorded, the most there can be",
            operators::OPERATORS_MAX
        )));
    }
    if state.operators.is_empty() && role != operators::Role::Admin {
        return Err(Refusal::InvalidOperator(
            "the first operator recorded must be an admin".to_string(),
        ));
    }
    fresh_credential(state, credential)?;
    Ok(vec![Event::OperatorAdded {
        name: name.to_string(),
        role,
        credential: *credential,
    }])
}

/// A credential digest no operator holds now (the index maps one digest to
/// one operator).
fn fresh_credential(
    state: &ControllerState,
    credential: &crate::ids::Digest,
) -> Result<(), Refusal> {
    match state.operators.by_credential(credential) {
        None => Ok(()),
        Some((holder, _)) => Err(Refusal::InvalidOperator(format!(
            "that credential is operator {holder}'s already"
        ))),
    }
}

/// The operator of this name, not revoked: the one an admin (or the
/// operator itself) rotates or revokes.
fn live_operator<'a>(
    state: &'a ControllerState,
    name: &str,
) -> Result<&'a operators::OperatorRecord, Refusal> {
    match state.operators.get(name) {
        None => Err(Refusal::NoSuchOperator(name.to_string())),
        Some(record) if record.revoked => Err(Refusal::OperatorAlreadyRevoked(name.to_string())),
        Some(record) => Ok(record),
    }
}

/// `decide` for `Input::RotateCredential`.
fn rotate_credential(
    state: &ControllerState,
    name: &str,
    credential: &crate::ids::Digest,
) -> Result<Vec<Event>, Refusal> {
    live_operator(state, name)?;
    fresh_credential(state, credential)?;
    Ok(vec![Event::CredentialRotated {
        name: name.to_string(),
        credential: *credential,
    }])
}

/// `decide` for `Input::RevokeOperator`: never the last admin, so the
/// fleet always keeps someone who can manage operators.
fn revoke_operator(state: &ControllerState, name: &str) -> Result<Vec<Event>, Refusal> {
    let record = live_operator(state, name)?;
    if record.role == operators::Role::Admin && state.operators.active_admins() <= 1 {
        return Err(Refusal::LastAdmin(name.to_string()));
    }
    Ok(vec![Event::OperatorRevoked {
        name: name.to_string(),
    }])
}
