//! The controller's state. It is nothing but the fold of the durable event log
//! ([`super::apply`]); a restart rebuilds it exactly by replaying events.

use crate::evidence::RouteObservation;
use crate::ids::{Digest, Generation, NodeId, OpId, RolloutId};
use crate::msg::{Decision, ReportKind};
use crate::plan::{Plan, Policy};
use imbl::{OrdMap, OrdSet, Vector};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Why a rollout is paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PauseReason {
    /// An operator asked for it.
    Operator,
    /// A node's functional probe got a wrong answer or no answer (S11).
    ProbeFailed { op: OpId },
    /// More follower ops failed than the policy's `max_failed` (B1); `op`
    /// is the one that went over. Appended last.
    FailureBudget { op: OpId },
    /// `max_unknown` ops of the rollout are UNKNOWN at once (B1).
    /// Appended last.
    UnknownBudget,
}

/// Where a rollout stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RolloutStatus {
    /// Granting (unless paused) and accounting.
    Active,
    /// A newer rollout bumped the generation; no more grants, but its ops
    /// still hold their slots until evidence settles them.
    Superseded,
    /// Every node of the plan is verified on the release.
    Completed,
    /// Nothing more can happen in it, yet not every node passed: its
    /// canary's op settled without passing, or every node of the plan has a
    /// settled op and some did not pass (abandoned, not applied, rolled
    /// back). No more grants; start a new rollout to try again. A paused
    /// rollout never ends on its own: its pause waits for an operator.
    Ended,
}

/// One rollout and its progress. Besides what events say, it keeps the
/// indexes `apply` maintains so that no decision scans the rollout's ops or
/// plan: node → op, the occupied-slot count, the next follower, and the
/// settled counts. `invariants::check_state` recounts them from the ops.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Rollout {
    pub id: RolloutId,
    /// Shared: a plan names up to [`crate::plan::FOLLOWERS_MAX`] nodes and
    /// never changes, so updating a rollout's counters must not copy it.
    pub plan: Arc<Plan>,
    /// The generation this rollout's commands carry.
    pub generation: Generation,
    pub status: RolloutStatus,
    /// `Some` while paused: no grants (S5), accounting continues.
    pub paused: Option<PauseReason>,
    /// The approval gate after the canary was passed by an operator.
    pub approved: bool,
    /// Ops granted by this rollout, in grant order.
    pub ops: Vector<OpId>,
    /// Index: the op this rollout granted to each node (at most one, S2).
    pub op_by_node: OrdMap<NodeId, OpId>,
    /// Index: ops of this rollout holding a slot (UNKNOWN included, S1).
    pub occupied: u32,
    /// Index: followers granted so far; followers are granted strictly in
    /// plan order, so this is also the position of the next one.
    pub followers_granted: u32,
    /// Index: ops of this rollout settled, and those settled not passing.
    pub settled: u32,
    pub settled_not_passed: u32,
    /// Its settled ops (but each node's latest) moved to the archive once
    /// nothing more can happen in it.
    pub archived: bool,
    /// Waves and failure budgets (`RolloutPolicySet`); default: one wave,
    /// no budget.
    pub policy: Arc<Policy>,
    /// Index: ops of this rollout whose restore was requested (failed).
    pub failed: u32,
    /// Index: ops of this rollout UNKNOWN now (holding their slots).
    pub unknown: u32,
    /// Approvals given between waves (the canary gate is `approved`).
    pub wave_approvals: u32,
    /// More than [`ROLLOUTS_REMEMBERED`] rollouts were archived after it:
    /// its archived ops were forgotten and `ops` and `op_by_node` keep only
    /// its ops still hot (each its node's latest). Its counts stay.
    #[serde(default)]
    pub forgotten: bool,
    /// The architectures its release has trees for (`RolloutArchesSet`);
    /// `Any` for an architecture-independent release.
    #[serde(default)]
    pub arches: crate::platform::ReleaseArches,
    /// The configuration its deployment carries (`RolloutConfigured`);
    /// `None` when the plan's release is the code alone.
    #[serde(default)]
    pub deploys: Option<crate::config::Deploys>,
}

impl Rollout {
    /// The op this rollout granted to `node`, if any.
    pub fn op_for(&self, node: NodeId) -> Option<OpId> {
        self.op_by_node.get(&node).copied()
    }

    /// Not active and no op holding a slot: no event can change its ops.
    pub fn finished(&self) -> bool {
        self.status != RolloutStatus::Active && self.occupied == 0
    }

    /// Over its failure budget (B1): more failed ops than `max_failed`, or
    /// `max_unknown` ops UNKNOWN at once. No follower is granted then.
    pub fn over_budget(&self) -> bool {
        self.budget_spent().is_some()
    }

    /// Which budget is spent, if any: failures first (a spent failure
    /// budget needs a new rollout), then UNKNOWN (it frees up as those ops
    /// settle).
    pub fn budget_spent(&self) -> Option<Budget> {
        if self.policy.max_failed.is_some_and(|m| self.failed > m) {
            Some(Budget::Failures)
        } else if self.policy.max_unknown.is_some_and(|m| self.unknown >= m) {
            Some(Budget::Unknown)
        } else {
            None
        }
    }

    /// The wave its latest granted follower is in (0 before any).
    pub fn current_wave(&self) -> u32 {
        self.policy.current_wave(self.followers_granted)
    }

    /// The wave (from 2) the next follower would open and the approvals it
    /// still needs, when the next follower is the first of a later wave.
    pub fn next_wave_gate(&self) -> Option<(u32, bool)> {
        let wave = self.policy.wave_opened_by(self.followers_granted)?;
        let unapproved = self.policy.approval_between_waves && self.wave_approvals < wave - 1;
        Some((wave, unapproved))
    }
}

/// A rollout's budgets (B1): past either, no follower is granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Budget {
    /// More ops failed than `max_failed`.
    Failures,
    /// `max_unknown` ops are UNKNOWN at once.
    Unknown,
}

/// Why an op's outcome cannot be told from the evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum UnknownReason {
    /// No answer within the deadline: contact or a reply was lost.
    Silence,
    /// A restore was reported but no serving probe proved the baseline.
    RestoreUnproven,
    /// A report contradicts what the op's phase allows.
    Contradictory,
}

/// How an op settled. Every variant is backed by recorded evidence (S3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// A probe proved the new release serving the expected answer.
    Verified,
    /// A probe after the restore proved the baseline serving (S9).
    RolledBack,
    /// The op was aborted before switching and a probe proved the baseline.
    NotApplied,
    /// An operator recorded an observation and a decision.
    Resolved(Resolution),
}

/// An operator's decision when resolving an op by hand. It must be backed by
/// the observation recorded with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Resolution {
    /// The observation shows the new release serving correctly.
    ConfirmNew,
    /// The observation shows the baseline serving correctly.
    ConfirmBaseline,
    /// The operator takes the node out of the rollout; its serving state is
    /// recorded as unknown.
    Abandon,
}

/// Where an op stands on the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum OpPhase {
    /// Apply sent; no commit decision yet.
    Granted,
    /// A commit decision is stored (see [`Op::decision`]).
    Decided,
    /// The probe failed; the baseline was asked back and must be proven.
    Restoring,
    /// Evidence settled the op; its slot is free.
    Settled(Outcome),
}

/// One evidence item recorded against an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EvidenceSource {
    /// A report from the node's agent.
    Agent(ReportKind),
    /// The controller probed the node's public route itself.
    ControllerProbe,
    /// An operator typed or fetched an observation while resolving.
    Operator,
}

/// One observation and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EvidenceItem {
    pub source: EvidenceSource,
    pub observation: RouteObservation,
    /// True when recorded after the op's restore was requested. Only such
    /// evidence can prove a rollback (S9).
    pub after_restore: bool,
}

/// An operation: node N moves to release R under generation G.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Op {
    pub id: OpId,
    pub rollout: RolloutId,
    pub node: NodeId,
    pub generation: Generation,
    pub release: Digest,
    /// What the node served when the op was granted; restored on failure.
    pub baseline: Option<Digest>,
    pub is_canary: bool,
    pub phase: OpPhase,
    /// The stored commit decision, replayed unchanged on every retry (S6).
    pub decision: Option<Decision>,
    /// Set while the outcome cannot be told from the evidence.
    pub unknown: Option<UnknownReason>,
    /// The latest evidence recorded for this op (most recent last, bounded).
    pub evidence: Vec<EvidenceItem>,
    /// A probe of this op ever saw a wrong answer or no answer after the
    /// switch. Kept so S11 can be checked after the fact.
    pub failed_probe_seen: bool,
    /// The operator who took ownership of this op, if any.
    #[serde(default)]
    pub claim: Option<Claim>,
    /// The node is past its commit decision: its agent reported a switch or
    /// a restore, or an observation showed the route serving the new
    /// release. Until then a stored Commit may still reach the node and
    /// switch it, so nothing may settle the op as "the baseline serves"
    /// but the agent's own restore report (see [`Op::commit_may_still_land`]).
    #[serde(default)]
    pub commit_acted_on: bool,
    /// The observation that made the op restore its baseline (the first
    /// wrong answer, the restart loop, the unreachable route): kept apart
    /// from the bounded [`Op::evidence`] window, so a proof can still name
    /// the cause after later evidence pushed it out. `None` when the restore
    /// was ordered without a failed observation (an operator's roll back
    /// of a passing release) or never requested.
    #[serde(default)]
    pub cause: Option<EvidenceItem>,
}

/// What is kept of a settled op once its rollout finished and a newer op
/// of its node exists (or the rollout's archive ran): enough to answer a
/// late commit request with the stored decision (S6) and to tell a late
/// message's owner. The whole op stays in the event log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OpSummary {
    pub id: OpId,
    pub rollout: RolloutId,
    pub node: NodeId,
    pub generation: Generation,
    pub release: Digest,
    pub decision: Option<Decision>,
    /// `None` while the op holds a slot (only for a summary of a hot op).
    pub outcome: Option<Outcome>,
}

/// An operator's ownership of an unsettled op.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Claim {
    /// Who owns it.
    pub owner: String,
    /// When they promised to look again (free text, e.g. RFC 3339).
    pub review_by: String,
}

/// How many archived rollouts keep their ops' summaries in
/// [`ControllerState::archive`]. When one more is archived, the oldest is
/// *forgotten*: its archived ops leave the state (they stay whole in the
/// event log and its archive), so the state, a snapshot and a restart are
/// bounded by the fleet and this count, not by history. A message about a
/// forgotten op is acknowledged and never decided again
/// ([`super::Event::ForgottenOpIgnored`]): its node was granted newer work
/// since, which supersedes whatever the agent still holds of it.
pub const ROLLOUTS_REMEMBERED: usize = 8;

/// Upper bound on a claim's owner and review-by texts.
pub const CLAIM_TEXT_MAX: usize = 128;

/// How many evidence items an op keeps. Older ones are dropped from state
/// (they stay in the event log); the rules only need the latest.
pub const OP_EVIDENCE_MAX: usize = 3;

impl Op {
    /// Occupies a slot: granted and not yet settled by evidence (S1, S3).
    pub fn occupies_slot(&self) -> bool {
        !matches!(self.phase, OpPhase::Settled(_))
    }

    /// UNKNOWN (S2): the outcome cannot be told from the evidence, and the
    /// op holds its slot until evidence settles it. The one definition
    /// every surface (API, dashboard, report, proof, daemon) asks; `apply`
    /// clears `unknown` when an op settles, so a settled op is never
    /// UNKNOWN.
    pub fn is_unknown(&self) -> bool {
        self.unknown.is_some() && self.occupies_slot()
    }

    /// A Commit is stored and nothing shows the node acted on it (or on a
    /// restore): the node may still hear the Commit (replayed unchanged,
    /// S6) and switch. A baseline seen now is then not a baseline kept.
    pub fn commit_may_still_land(&self) -> bool {
        self.decision == Some(crate::msg::Decision::Commit) && !self.commit_acted_on
    }

    /// The compact record kept of this op once it is archived.
    pub fn summary(&self) -> OpSummary {
        OpSummary {
            id: self.id,
            rollout: self.rollout,
            node: self.node,
            generation: self.generation,
            release: self.release,
            decision: self.decision,
            outcome: match self.phase {
                OpPhase::Settled(outcome) => Some(outcome),
                _ => None,
            },
        }
    }

    /// Passed the canary gate: verified, or confirmed by an operator with an
    /// observation that showed the new release serving.
    pub fn passed(&self) -> bool {
        matches!(
            self.phase,
            OpPhase::Settled(Outcome::Verified)
                | OpPhase::Settled(Outcome::Resolved(Resolution::ConfirmNew))
        )
    }
}

/// Who observed a node outside of any op (SPEC §10: proof is a readback).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObservationSource {
    /// The controller probed the public route and the agent answered a
    /// readback (artifact re-hash, process uptime and restarts).
    ReadBack,
    /// The controller probed the public route; the agent did not answer the
    /// readback, so the artifact and the process were not observed.
    ControllerProbe,
    /// An operator recorded what they saw.
    Operator,
}

/// A recorded observation of a node, with the controller's wall-clock time
/// it was made at (time is an input: the runtime supplies it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeObservation {
    pub observation: RouteObservation,
    pub source: ObservationSource,
    /// Milliseconds since the Unix epoch, by the controller's clock.
    pub at_ms: u64,
}

/// The least time between two recorded observations of one node, in
/// milliseconds: the bound that keeps readers, verifiers and operators from
/// flooding the log (at most 6 `NodeObserved` per node per minute).
pub const OBSERVATION_INTERVAL_MIN_MS: u64 = 10_000;

/// What the controller knows of a node.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeRecord {
    /// What the agent last said it serves (a claim, from Hello).
    pub reported_serving: Option<Digest>,
    /// The release last proven serving by evidence that settled an op.
    pub confirmed: Option<Digest>,
    /// The node's unsettled op, if any (S2).
    pub live_op: Option<OpId>,
    /// The node's latest op, settled or not: it stays whole in the hot
    /// state (a proof judges the node by it) when its rollout is archived.
    #[serde(default)]
    pub last_op: Option<OpId>,
    /// The latest observation recorded since the node's last op settled
    /// (`NodeObserved`); cleared when an op of the node settles, whose own
    /// evidence is newer.
    #[serde(default)]
    pub observed: Option<NodeObservation>,
    /// What the agent last said it runs on (`NodePlatform`); `None` until
    /// it says (an agent older than issue #24 item 5 never does). Two
    /// bytes: the node's `arch` label.
    #[serde(default)]
    pub platform: Option<crate::platform::Platform>,
}

impl NodeRecord {
    /// The recorded observation that contradicts the node's confirmed
    /// release, if any: the node is *drifted*. Only a node with no live op
    /// and a confirmed release can drift (a live op's evidence is judged by
    /// the op). Contradicts = does not prove the confirmed release serving
    /// (another identity, no identity, a wrong answer, no answer), or reads
    /// back another artifact or an altered app file. History is not
    /// rewritten: the op that confirmed the release stays settled as it was.
    pub fn drift(&self) -> Option<&NodeObservation> {
        if self.live_op.is_some() {
            return None;
        }
        let confirmed = self.confirmed?;
        let seen = self.observed.as_ref()?;
        (!observation_confirms(&seen.observation, confirmed)).then_some(seen)
    }

    /// What the next op granted to this node restores on failure: what was
    /// last proven serving. A drifted node's baseline is what was observed
    /// serving (a passing route's identity), or nothing when the observation
    /// proves nothing serving; never the old claim.
    pub fn baseline(&self) -> Option<Digest> {
        match self.drift() {
            Some(seen) if seen.observation.verdict == crate::ProbeVerdict::Pass => {
                seen.observation.identity
            }
            Some(_) => None,
            None => self.confirmed.or(self.reported_serving),
        }
    }
}

/// Whether `o` shows `release` serving and nothing read back contradicts
/// it (an artifact that is not read counts as no contradiction).
pub fn observation_confirms(o: &RouteObservation, release: Digest) -> bool {
    let artifact_agrees = match o.artifact {
        None | Some(crate::ArtifactRead::Unreadable) => true,
        Some(crate::ArtifactRead::Digest(d)) => d == release,
        Some(crate::ArtifactRead::AppFileAltered(_) | crate::ArtifactRead::AppFileOf { .. }) => {
            false
        }
    };
    o.proves_serving(release) && artifact_agrees
}

/// Why a node is quarantined: two live connections presented its identity
/// (an identity conflict), from these two peer addresses.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Quarantine {
    /// The peer address of the connection that was replaced.
    pub first_peer: String,
    /// The peer address of the connection that replaced it.
    pub second_peer: String,
}

/// Longest peer address text a quarantine records (an IPv6 socket address
/// with a zone fits well within it).
pub const PEER_TEXT_MAX: usize = 128;

/// The controller's whole state. Every collection is persistent (imbl):
/// a clone is O(1) and shares structure, an update is O(log n), so `step`
/// can decide follow-on progress on a copy and readers can hold a snapshot
/// while the core moves on. No decision walks the history: settled ops of
/// finished rollouts move to [`ControllerState::archive`], and those of
/// rollouts older than the last [`ROLLOUTS_REMEMBERED`] leave it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ControllerState {
    /// The current fleet generation; bumped by every rollout start.
    pub generation: Generation,
    /// All rollouts, indexed by `RolloutId`. Each behind its own `Arc`: a
    /// copy-on-write of the vector's chunk then copies up to 64 pointers,
    /// not up to 64 whole rollouts (with their op vectors), so the cost of
    /// touching the active rollout does not grow with the rollouts before it.
    pub rollouts: Vector<Arc<Rollout>>,
    /// The hot ops: every op of a rollout not finished, and each node's
    /// latest op.
    pub ops: OrdMap<OpId, Op>,
    /// The other settled ops of the last [`ROLLOUTS_REMEMBERED`] archived
    /// rollouts, compacted (they stay whole in the log).
    pub archive: OrdMap<OpId, OpSummary>,
    /// Archived rollouts whose ops are still in `archive` (at most
    /// [`ROLLOUTS_REMEMBERED`]). A set, so the oldest started is forgotten
    /// first whatever order they finished in: two histories that archived
    /// the same rollouts give the same state (the checker merges them).
    #[serde(default)]
    pub remembered: OrdSet<RolloutId>,
    /// How many ops were forgotten: granted, settled, in neither `ops` nor
    /// `archive` (`ops + archive + forgotten_ops == next_op`).
    #[serde(default)]
    pub forgotten_ops: u64,
    /// The id the next granted op takes.
    pub next_op: OpId,
    /// Index: the rollout still granting, if any (at most one).
    pub active: Option<RolloutId>,
    /// Index: per node, the latest rollout whose plan includes it.
    pub intended: OrdMap<NodeId, RolloutId>,
    pub nodes: OrdMap<NodeId, NodeRecord>,
    /// Nodes held after an identity conflict: nothing is sent to them and
    /// nothing they say is recorded until an operator releases them.
    #[serde(default)]
    pub quarantined: OrdMap<NodeId, Quarantine>,
    /// Revoked certificates (SHA-256 fingerprint of the DER) and the node
    /// each was revoked for: the handshake refuses them.
    #[serde(default)]
    pub revoked_certs: OrdMap<Digest, NodeId>,
    /// The enrolled nodes: names, labels, public routes, retirements.
    /// Empty in a log written before enrollment existed.
    #[serde(default)]
    pub roster: super::roster::Roster,
    /// Index: the nodes whose [`NodeRecord::drift`] is some, kept by
    /// `apply` for the node each event touches, so counting and listing
    /// drifted nodes never walks the fleet.
    #[serde(default)]
    pub drifted: OrdSet<NodeId>,
    /// Per app, its latest configuration revision (`ConfigSet`), whole
    /// (secrets sealed): what a rollout deploys and what the controller
    /// hands agents, kept with the state so a start from a snapshot has
    /// it without reading the log's head. At most
    /// [`crate::config::CONFIG_APPS_MAX`] apps of at most
    /// [`crate::config::CONFIG_BYTES_MAX`] each; older revisions stay in
    /// the log only.
    #[serde(default)]
    pub configs: OrdMap<String, Arc<crate::config::ConfigRevision>>,
    /// The operators, their roles and the digests of their credentials
    /// (issue #28 item 2). Empty in a log written before operators existed.
    #[serde(default)]
    pub operators: super::operators::Operators,
}

impl ControllerState {
    /// The nodes whose drift the record shows, by walking every node:
    /// what [`ControllerState::drifted`] must equal (tests and checks).
    pub fn drifted_by_scan(&self) -> OrdSet<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, record)| record.drift().is_some())
            .map(|(node, _)| *node)
            .collect()
    }

    /// The op with this id, if it is in the hot state (see
    /// [`ControllerState::op_summary`] for archived ones too).
    pub fn op(&self, id: OpId) -> Option<&Op> {
        self.ops.get(&id)
    }

    /// What is known of op `id`, hot or archived; `None` if never granted.
    pub fn op_summary(&self, id: OpId) -> Option<OpSummary> {
        self.op(id)
            .map(Op::summary)
            .or_else(|| self.archive.get(&id).copied())
    }

    /// Op `id` was granted but its summary was forgotten (see
    /// [`ROLLOUTS_REMEMBERED`]): neither hot nor archived.
    pub fn op_forgotten(&self, id: OpId) -> bool {
        id < self.next_op && !self.ops.contains_key(&id) && !self.archive.contains_key(&id)
    }

    /// Every op ever granted: hot, archived and forgotten.
    pub fn ops_granted(&self) -> usize {
        self.next_op.0 as usize
    }

    /// The rollout with this id, if it exists.
    pub fn rollout(&self, id: RolloutId) -> Option<&Rollout> {
        self.rollouts.get(id.0 as usize).map(|r| &**r)
    }

    /// The rollout that is still granting, if any (at most one).
    pub fn active_rollout(&self) -> Option<&Rollout> {
        self.rollout(self.active?)
    }

    /// Slots occupied by a rollout: its ops not yet settled, UNKNOWN included.
    pub fn slots_occupied(&self, rollout: RolloutId) -> usize {
        self.rollout(rollout).map_or(0, |r| r.occupied as usize)
    }

    /// The op a rollout granted to `node`, if it is hot. A rollout's op is
    /// archived only once the rollout finished and its node has a newer op.
    pub fn rollout_op_for(&self, rollout: RolloutId, node: NodeId) -> Option<&Op> {
        self.op(self.rollout(rollout)?.op_for(node)?)
    }

    /// The latest rollout whose plan includes `node`: what is intended for
    /// it (a proof judges the node against this rollout's release).
    pub fn intended_rollout(&self, node: NodeId) -> Option<&Rollout> {
        self.rollout(*self.intended.get(&node)?)
    }

    /// The rollout is active, its plan has an approval gate after the
    /// canary, the canary passed and no operator approved yet: the one state
    /// in which `Input::Approve` is accepted.
    pub fn awaiting_approval(&self, rollout: RolloutId) -> bool {
        self.rollout(rollout).is_some_and(|r| {
            let canary_passed = self
                .rollout_op_for(r.id, r.plan.canary)
                .is_some_and(Op::passed);
            let canary_gate = r.plan.approval_after_canary && !r.approved;
            // Between waves: every op of the waves before settled.
            let wave_gate =
                r.occupied == 0 && r.next_wave_gate().is_some_and(|(_, unapproved)| unapproved);
            r.status == RolloutStatus::Active && canary_passed && (canary_gate || wave_gate)
        })
    }

    /// The release a look at `node`'s route is judged as (whose probe spec
    /// applies), and the other release that may legitimately answer
    /// instead. While the node has a live op either of the op's releases
    /// can serve: the baseline before the switch, after an abort and while
    /// restoring, the new release otherwise. Without one: what was last
    /// proven there, else the release of the rollout intended for it.
    pub fn releases_to_judge(&self, node: NodeId) -> (Option<Digest>, Option<Digest>) {
        let record = self.nodes.get(&node);
        match record.and_then(|r| r.live_op).and_then(|op| self.op(op)) {
            Some(o) => {
                let before_switch = matches!(o.phase, OpPhase::Granted | OpPhase::Restoring)
                    || o.decision == Some(Decision::Abort);
                match (before_switch, o.baseline) {
                    (true, Some(b)) => (Some(b), Some(o.release)),
                    (_, b) => (Some(o.release), b),
                }
            }
            None => (
                record
                    .and_then(|r| r.confirmed)
                    .or_else(|| self.intended_rollout(node).map(|r| r.plan.release)),
                None,
            ),
        }
    }

    /// Whether `node` is quarantined (an identity conflict no operator
    /// released yet).
    pub fn is_quarantined(&self, node: NodeId) -> bool {
        self.quarantined.contains_key(&node)
    }

    /// The next op id the controller will allocate.
    pub fn next_op_id(&self) -> OpId {
        self.next_op
    }
}
