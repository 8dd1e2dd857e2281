//! What operators read, built from one [`Snapshot`]: the DTOs of rollouts,
//! ops and nodes, the summary behind `/api/status`, and the paged, filtered
//! reads behind `/api/nodes` and `/api/ops`. The API, the CLI and the
//! dashboard share these words and shapes; none of them imports another.
//!
//! Cost: a page walks the imbl maps from its cursor (O(log n) to find it,
//! O(log n) per item after), never the fleet. A filter that the state has
//! no index for (labels, most node states, op states outside a rollout)
//! scans from the cursor, at most [`PAGE_SCAN_MAX`] entries per page; a
//! page that ran out of budget returns fewer items and a `next` cursor, so
//! a client simply follows `next` until it is `null`.

use crate::view::snapshot::Snapshot;
use model::controller::{
    ControllerState, Labels, Op, OpPhase, OpSummary, Outcome, Rollout, RolloutStatus,
};
use model::{Digest, NodeId, OpId, RolloutId};
use serde::{Deserialize, Serialize};

pub mod ahead;
pub mod config;
pub mod describe;
pub mod durations;
pub mod error;
pub mod releases;
pub mod report;
pub mod snapshot;
pub mod storage;
pub mod waves;
pub mod wire;
pub mod words;

pub use describe::describe;
pub use error::{ErrorBody, QueryError};
pub use releases::{ReleaseDto, ReleaseList, ReleaseUseDto, RemoveReply};
pub use wire::*;

/// Items in a page when the request gives no `limit`.
pub const PAGE_LIMIT_DEFAULT: usize = 100;
/// The most items one page holds: a larger `limit` is refused (400).
pub const PAGE_LIMIT_MAX: usize = 1_000;
/// The most entries one page examines when a filter has to scan: bounds
/// the cost of a request whatever the fleet size. Ten full pages' worth.
pub const PAGE_SCAN_MAX: usize = 10 * PAGE_LIMIT_MAX;
/// Rollouts `/api/status` lists (the latest ones); older ones are read one
/// at a time from `/api/rollouts/{id}` or all from `/api/rollouts`.
pub const STATUS_ROLLOUTS_MAX: usize = 20;
/// UNKNOWN ops `/api/status` lists (the oldest first); the rest are paged
/// from `/api/ops?state=unknown`.
pub const STATUS_UNKNOWN_OPS_MAX: usize = 100;
/// Label filters one node query may carry.
pub const LABEL_FILTERS_MAX: usize = model::controller::roster::LABELS_PER_NODE_MAX;

// A page never holds more than it may examine.
const _: () = assert!(PAGE_LIMIT_DEFAULT <= PAGE_LIMIT_MAX);
const _: () = assert!(PAGE_LIMIT_MAX <= PAGE_SCAN_MAX);

/// One rollout as operators see it.
#[derive(Serialize, Deserialize, Debug, Clone, utoipa::ToSchema)]
pub struct RolloutDto {
    /// `r0`, `r1`, ...
    pub id: String,
    /// Release digest (hex).
    pub release: String,
    /// `active`, `paused`, `waiting-approval`, `superseded`, `completed`, `ended`.
    pub status: String,
    /// Why it is paused, if it is.
    pub paused_reason: Option<String>,
    /// Occupied slots (UNKNOWN ops count).
    pub slots_occupied: usize,
    /// The slot budget.
    pub slots_max: u16,
    /// Canary node.
    pub canary: String,
    /// Followers in plan order: only on `GET /api/rollouts/{id}` (a plan
    /// may name the whole fleet); lists and the status carry the counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub followers: Option<Vec<String>>,
    /// Fleet generation its commands carry.
    pub generation: u64,
    /// Its progress, from the rollout's own indexes (no scan of ops).
    pub counts: RolloutCounts,
}

/// A rollout's progress, read from the indexes `apply` keeps.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, utoipa::ToSchema)]
pub struct RolloutCounts {
    /// Nodes in the plan: the canary and the followers.
    pub plan_nodes: usize,
    /// Ops it granted (its ops are paged by `/api/ops?rollout=ID`).
    pub granted: usize,
    /// Followers granted so far (plan order).
    pub followers_granted: u32,
    /// Ops holding a slot, UNKNOWN included.
    pub occupied: u32,
    /// Ops UNKNOWN now (they hold their slots).
    pub unknown: u32,
    /// Ops settled with evidence.
    pub settled: u32,
    /// Settled ops that passed (verified, or confirmed new by an operator).
    pub passed: u32,
    /// Settled ops that did not pass.
    pub settled_not_passed: u32,
    /// Ops whose restore was requested (counted against `max_failed`).
    pub failed: u32,
    /// Waves after the canary (at least one).
    pub waves: u32,
    /// The wave of the latest follower granted; 0 while only the canary is.
    pub current_wave: u32,
}

/// One op as operators see it.
#[derive(Serialize, Deserialize, Debug, Clone, utoipa::ToSchema)]
pub struct OpDto {
    /// `op0`, ...
    pub id: String,
    /// Its rollout.
    pub rollout: String,
    /// Its node.
    pub node: String,
    /// Target release (hex).
    pub release: String,
    /// Generation.
    pub generation: u64,
    /// `granted`, `decided`, `restoring`, `settled`.
    pub phase: String,
    /// How it settled, if it did.
    pub outcome: Option<String>,
    /// The stored commit decision.
    pub decision: Option<String>,
    /// Why it is UNKNOWN, if it is.
    pub unknown: Option<String>,
    /// Whether it still holds a slot.
    pub holds_slot: bool,
    /// Its one state word ([`OpState`]): what `/api/ops?state=` matches.
    #[serde(default)]
    pub state: String,
    /// Archived: settled, its rollout finished, only its summary is hot
    /// (the whole op stays in the log).
    #[serde(default)]
    pub archived: bool,
    /// Where the agent's chunks of the release came from, as it reported
    /// when it staged (format-2 releases; issue #23 item 5): mirrors by
    /// index and host, then the controller. Empty when nothing was
    /// reported (a format-1 bundle, nothing fetched, or a controller
    /// restarted since: the report is kept in memory only). Telemetry,
    /// never part of the proof.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceDto>,
}

/// One source of an op's chunks.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, utoipa::ToSchema)]
pub struct SourceDto {
    /// `mirror[I] HOST[:PORT]` or `controller`.
    pub source: String,
    /// Chunks it served that verified.
    pub chunks: u64,
    /// Bytes of those chunks.
    pub bytes: u64,
    /// Chunks asked of it that failed (wrong bytes, truncated, too long,
    /// stalled, refused); each came from the next source.
    pub failures: u64,
}

/// One node as operators see it.
#[derive(Serialize, Deserialize, Debug, Clone, utoipa::ToSchema)]
pub struct NodeDto {
    /// Node id.
    pub name: String,
    /// Has a live connection.
    pub connected: bool,
    /// Release last proven by settling evidence (hex).
    pub confirmed: Option<String>,
    /// Release the agent last claimed serves for the node's current op
    /// (hex): its latest report on that op or a hello said since the op
    /// was granted; `None` when it said neither (never an older claim).
    pub reported_serving: Option<String>,
    /// Its unsettled op.
    pub live_op: Option<String>,
    /// Its latest observation contradicts its confirmed release.
    pub drifted: bool,
    /// The latest observation recorded of it (`NodeObserved`), if any.
    pub observed: Option<ObservedDto>,
    /// Set while the node is quarantined after an identity conflict: the
    /// two peer addresses that presented its certificate.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>, min_items = 2, max_items = 2)]
    pub quarantined: Option<[String; 2]>,
    /// Its labels (matched by `select`).
    #[serde(default)]
    #[schema(value_type = HashMap<String, String>)]
    pub labels: Labels,
    /// Its public route, probed by the controller.
    #[serde(default)]
    pub public: String,
    /// Retired: nothing is granted to it and its agent is refused.
    #[serde(default)]
    pub retired: bool,
    /// Its one state word ([`NodeState`]): what `/api/nodes?state=` matches.
    #[serde(default)]
    pub state: String,
    /// Its `arch` label: the CPU architecture its agent said it runs on
    /// (`x86_64`, `aarch64`, `other`); `None` until its agent said.
    #[serde(default)]
    pub arch: Option<String>,
    /// The operating system its agent said it runs on; `None` until said.
    #[serde(default)]
    pub os: Option<String>,
}

/// A recorded observation of a node.
#[derive(Serialize, Deserialize, Debug, Clone, utoipa::ToSchema)]
pub struct ObservedDto {
    /// What was seen, like `pass from 27ec…`.
    pub result: String,
    /// Who looked: `agent readback`, `controller probe` or `operator`.
    pub source: String,
    /// When, in ms since the Unix epoch (controller clock).
    pub at_ms: u64,
    /// The observation itself (the model's encoding).
    #[schema(value_type = Object)]
    pub observation: model::RouteObservation,
}

/// One page of a list: its items, the cursor of the next page (`None` at
/// the end) and, when it is cheap to know, how many items match in all.
#[derive(Serialize, Deserialize, Debug, Clone, utoipa::ToSchema)]
pub struct Page<T> {
    /// The items, in list order.
    pub items: Vec<T>,
    /// Pass as `after` to get the next page; `None`: nothing more.
    pub next: Option<String>,
    /// Items matching the filters in the whole list, when an index knows
    /// it without a scan; omitted otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<usize>,
}

/// Node counts of the fleet, each from an index (no scan).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, utoipa::ToSchema)]
pub struct NodeCounts {
    /// Ever enrolled, retired ones included.
    pub enrolled: usize,
    /// With a live connection now.
    pub connected: usize,
    /// Retired.
    pub retired: usize,
    /// Quarantined after an identity conflict.
    pub quarantined: usize,
}

/// Op counts over every op granted, summed from the rollouts' indexes.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, utoipa::ToSchema)]
pub struct OpCounts {
    /// Every op ever granted (hot, archived and forgotten).
    pub granted: usize,
    /// Archived ops (settled, their rollout finished).
    pub archived: usize,
    /// Forgotten ops: settled in a rollout older than the last
    /// `ROLLOUTS_REMEMBERED` archived; only the log has them.
    #[serde(default)]
    pub forgotten: u64,
    /// Holding a slot (UNKNOWN included).
    pub holding_slot: usize,
    /// UNKNOWN now.
    pub unknown: usize,
    /// Settled with evidence.
    pub settled: usize,
    /// Settled and passed.
    pub passed: usize,
    /// Settled without passing.
    pub settled_not_passed: usize,
    /// Restore requested (failed) at some point.
    pub failed: usize,
}

/// Where the full lists are: the status is a summary.
#[derive(Serialize, Deserialize, Debug, Clone, utoipa::ToSchema)]
pub struct StatusLinks {
    /// Paged nodes.
    pub nodes: String,
    /// Paged ops.
    pub ops: String,
    /// Every rollout.
    pub rollouts: String,
    /// The handover report.
    pub unresolved: String,
}

impl Default for StatusLinks {
    fn default() -> StatusLinks {
        StatusLinks {
            nodes: "/api/nodes?limit=100".into(),
            ops: "/api/ops?limit=100".into(),
            rollouts: "/api/rollouts".into(),
            unresolved: "/api/unresolved".into(),
        }
    }
}

/// `/api/status`: a summary whose size does not grow with the fleet.
#[derive(Serialize, Deserialize, Debug, Clone, utoipa::ToSchema)]
pub struct StatusDto {
    /// Last durable log sequence.
    pub last_sequence: Option<u64>,
    /// Fleet generation.
    pub generation: u64,
    /// The rollout still granting, if any.
    pub active: Option<RolloutDto>,
    /// The latest [`STATUS_ROLLOUTS_MAX`] rollouts, oldest first.
    pub rollouts: Vec<RolloutDto>,
    /// Rollouts ever started.
    pub rollouts_total: usize,
    /// Node counts.
    pub nodes: NodeCounts,
    /// Op counts.
    pub ops: OpCounts,
    /// Entries of the handover report: ops holding a slot plus rollouts
    /// waiting for an operator.
    pub unresolved: usize,
    /// The first [`STATUS_UNKNOWN_OPS_MAX`] UNKNOWN ops, in op order.
    pub unknown_ops: Vec<OpDto>,
    /// Where the paged lists are.
    #[serde(default)]
    pub links: StatusLinks,
    /// Nodes whose agent reported a higher generation than the log has
    /// reached: the log is behind the fleet (an older backup restored?).
    #[serde(default)]
    pub nodes_ahead_of_log: usize,
    /// The first [`ahead::STATUS_AHEAD_OF_LOG_MAX`] of them, in node order,
    /// each with its warning.
    #[serde(default)]
    pub ahead_of_log: Vec<ahead::AheadOfLogDto>,
    /// `leader`, or `standby`: this answer is a hot standby's view of the
    /// leader's log, as of `log_sequence`.
    #[serde(default)]
    pub role: crate::role::Role,
    /// The last log sequence this controller's state folded (the same as
    /// `last_sequence`): on a standby, how far it has caught up.
    #[serde(default)]
    pub log_sequence: Option<u64>,
    /// The leader's API URL, as the leader advertises it (on the leader,
    /// its own); `None` on sled or while no leader is known.
    #[serde(default)]
    pub leader: Option<String>,
    /// The event log's database against its quota, with the warning at
    /// [`storage::WARN_PERCENT`]; `None` until first measured.
    #[serde(default)]
    pub storage: Option<storage::StorageDto>,
}

/// A node's one state, by precedence: `retired`, `quarantined`, `unknown`
/// (its live op is UNKNOWN), `live` (it has a live op), `drifted`, `idle`.
/// The words the API filters on and the CLI and dashboard show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    /// No live op, nothing contradicts its confirmed release.
    Idle,
    /// It holds a live op whose outcome is not UNKNOWN.
    Live,
    /// Its live op is UNKNOWN.
    Unknown,
    /// Its latest observation contradicts its confirmed release.
    Drifted,
    /// Held after an identity conflict.
    Quarantined,
    /// Retired from the fleet.
    Retired,
}

impl NodeState {
    /// Every state, in the order the words are listed.
    pub const ALL: [NodeState; 6] = [
        NodeState::Idle,
        NodeState::Live,
        NodeState::Unknown,
        NodeState::Drifted,
        NodeState::Quarantined,
        NodeState::Retired,
    ];

    /// Its word.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Idle => "idle",
            NodeState::Live => "live",
            NodeState::Unknown => "unknown",
            NodeState::Drifted => "drifted",
            NodeState::Quarantined => "quarantined",
            NodeState::Retired => "retired",
        }
    }

    /// The state named by `word`, if any.
    pub fn parse(word: &str) -> Option<NodeState> {
        NodeState::ALL.into_iter().find(|s| s.as_str() == word)
    }

    /// The state of `node` in `state`.
    pub fn of(state: &ControllerState, node: NodeId) -> NodeState {
        let record = state.nodes.get(&node);
        let live = record.and_then(|r| r.live_op).and_then(|o| state.op(o));
        if state.roster.is_retired(node) {
            NodeState::Retired
        } else if state.is_quarantined(node) {
            NodeState::Quarantined
        } else if live.is_some_and(|o| o.is_unknown()) {
            NodeState::Unknown
        } else if live.is_some() {
            NodeState::Live
        } else if record.is_some_and(|r| r.drift().is_some()) {
            NodeState::Drifted
        } else {
            NodeState::Idle
        }
    }
}

/// An op's one state: `unknown` (UNKNOWN, holding its slot), its phase
/// while unsettled (`granted`, `decided`, `restoring`), else its outcome
/// (`verified`, `rolled-back`, `not-applied`, `resolved`). A filter may
/// also name `settled` (any outcome) or `holding-slot` (any unsettled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpState {
    /// UNKNOWN now, holding its slot.
    Unknown,
    /// Apply sent, no commit decision yet.
    Granted,
    /// A commit decision is stored.
    Decided,
    /// The baseline was asked back and must be proven.
    Restoring,
    /// Settled: the new release proven serving.
    Verified,
    /// Settled: the baseline proven serving after a restore.
    RolledBack,
    /// Settled: aborted before the switch, baseline proven.
    NotApplied,
    /// Settled by an operator with an observation.
    Resolved,
}

impl OpState {
    /// Every state, in the order the words are listed.
    pub const ALL: [OpState; 8] = [
        OpState::Unknown,
        OpState::Granted,
        OpState::Decided,
        OpState::Restoring,
        OpState::Verified,
        OpState::RolledBack,
        OpState::NotApplied,
        OpState::Resolved,
    ];

    /// Its word.
    pub fn as_str(self) -> &'static str {
        match self {
            OpState::Unknown => "unknown",
            OpState::Granted => words::op_phase(OpPhase::Granted),
            OpState::Decided => words::op_phase(OpPhase::Decided),
            OpState::Restoring => words::op_phase(OpPhase::Restoring),
            OpState::Verified => words::outcome_kind(Outcome::Verified),
            OpState::RolledBack => words::outcome_kind(Outcome::RolledBack),
            OpState::NotApplied => words::outcome_kind(Outcome::NotApplied),
            OpState::Resolved => words::RESOLVED,
        }
    }

    /// The state of a settled op by its outcome.
    fn of_outcome(outcome: Outcome) -> OpState {
        match outcome {
            Outcome::Verified => OpState::Verified,
            Outcome::RolledBack => OpState::RolledBack,
            Outcome::NotApplied => OpState::NotApplied,
            Outcome::Resolved(_) => OpState::Resolved,
        }
    }

    /// The state of a hot op.
    pub fn of(op: &Op) -> OpState {
        match op.phase {
            _ if op.is_unknown() => OpState::Unknown,
            OpPhase::Granted => OpState::Granted,
            OpPhase::Decided => OpState::Decided,
            OpPhase::Restoring => OpState::Restoring,
            OpPhase::Settled(outcome) => OpState::of_outcome(outcome),
        }
    }

    /// Settled with evidence.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            OpState::Verified | OpState::RolledBack | OpState::NotApplied | OpState::Resolved
        )
    }
}

/// What `/api/ops?state=` matches: one state, or a group of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpFilter {
    /// Exactly this state.
    Is(OpState),
    /// Any outcome.
    Settled,
    /// Any unsettled state (UNKNOWN included).
    HoldingSlot,
}

impl OpFilter {
    /// The words a filter may be, for error messages and docs.
    pub fn words() -> String {
        let mut words: Vec<&str> = OpState::ALL.iter().map(|s| s.as_str()).collect();
        words.extend(["settled", "holding-slot"]);
        words.join(", ")
    }

    /// The filter named by `word`, if any.
    pub fn parse(word: &str) -> Option<OpFilter> {
        match word {
            "settled" => Some(OpFilter::Settled),
            "holding-slot" => Some(OpFilter::HoldingSlot),
            _ => OpState::ALL
                .into_iter()
                .find(|s| s.as_str() == word)
                .map(OpFilter::Is),
        }
    }

    /// Whether an op in `state` matches.
    pub fn matches(self, state: OpState) -> bool {
        match self {
            OpFilter::Is(s) => s == state,
            OpFilter::Settled => state.is_settled(),
            OpFilter::HoldingSlot => !state.is_settled(),
        }
    }
}

/// The words of every node state, for error messages and docs.
pub fn node_state_words() -> String {
    let words: Vec<&str> = NodeState::ALL.iter().map(|s| s.as_str()).collect();
    words.join(", ")
}

/// The rollout a rollout event names (`RolloutStarted`, `RolloutPaused`,
/// `OpGranted`, ...); `None` for op-only and node events.
pub fn event_rollout(event: &model::controller::Event) -> Option<RolloutId> {
    use model::controller::Event as E;
    match event {
        E::RolloutStarted { rollout, .. }
        | E::RolloutSuperseded { rollout, .. }
        | E::RolloutPaused { rollout, .. }
        | E::RolloutResumed { rollout }
        | E::RolloutApproved { rollout }
        | E::RolloutCompleted { rollout }
        | E::OpGranted { rollout, .. }
        | E::RolloutEnded { rollout, .. }
        | E::RolloutPolicySet { rollout, .. }
        | E::RolloutArchesSet { rollout, .. }
        | E::RolloutFollowersAdded { rollout, .. } => Some(*rollout),
        _ => None,
    }
}

/// The op an op event is about; `None` for rollout-only and node events.
pub fn event_op(event: &model::controller::Event) -> Option<OpId> {
    use model::controller::Event as E;
    match event {
        E::OpGranted { op, .. }
        | E::CommitDecided { op, .. }
        | E::CommitReplayed { op, .. }
        | E::ReportRecorded { op, .. }
        | E::ProbeRecorded { op, .. }
        | E::RestoreRequested { op }
        | E::OpUnknown { op, .. }
        | E::OpSettled { op, .. }
        | E::OperatorObserved { op, .. }
        | E::OpClaimed { op, .. }
        | E::LateReportIgnored { op, .. }
        | E::StaleCommandRejected { op, .. }
        | E::ForeignMessageIgnored { op, .. }
        | E::ForgottenOpIgnored { op, .. }
        | E::RollBackOrdered { op } => Some(*op),
        _ => None,
    }
}

/// The rollout an operator names as `r0`, `r1`, ...
pub fn parse_rollout_id(text: &str) -> Option<RolloutId> {
    text.strip_prefix('r')?.parse().ok().map(RolloutId)
}

/// The op an operator names as `op0`, `op1`, ...
pub fn parse_op_id(text: &str) -> Option<OpId> {
    text.strip_prefix("op")?.parse().ok().map(OpId)
}

/// How a rollout's events end a watch: `Some(true)` once it completed,
/// `Some(false)` when it paused, ended without every node passing, or was
/// superseded; `None` while it goes on (`fleetweft watch --rollout`).
pub fn rollout_outcome(event: &model::controller::Event, rollout: RolloutId) -> Option<bool> {
    use model::controller::Event as E;
    match event {
        E::RolloutCompleted { rollout: r } if *r == rollout => Some(true),
        E::RolloutPaused { rollout: r, .. }
        | E::RolloutEnded { rollout: r, .. }
        | E::RolloutSuperseded { rollout: r, .. }
            if *r == rollout =>
        {
            Some(false)
        }
        _ => None,
    }
}

/// One log event in the operator's words.
pub fn event_dto(
    roster: &model::controller::roster::Roster,
    sequence: u64,
    event: model::controller::Event,
) -> EventDto {
    EventDto {
        sequence,
        text: describe(roster, &event),
        event,
    }
}

fn hex(d: Digest) -> String {
    d.to_hex()
}

/// How a rollout's status reads: `completed`, `superseded`, `ended`,
/// `paused`, `waiting-approval` or `active`.
///
/// A rollout whose ops still hold slots never reads `completed` (the model
/// completes one only once every op settled; should a state ever say
/// otherwise, the word does not claim more than the evidence): it reads
/// `active`, which it still is for its operators.
pub fn rollout_status_word(s: &ControllerState, r: &Rollout) -> &'static str {
    match (r.status, r.paused) {
        (RolloutStatus::Completed, _) if r.occupied > 0 => {
            words::rollout_status(RolloutStatus::Active)
        }
        (RolloutStatus::Active, Some(_)) => words::PAUSED,
        (RolloutStatus::Active, None) if s.awaiting_approval(r.id) => words::WAITING_APPROVAL,
        (status, _) => words::rollout_status(status),
    }
}

/// A rollout's counts, from its indexes: O(log waves), no scan of ops.
pub fn rollout_counts(r: &Rollout) -> RolloutCounts {
    let granted = r.followers_granted;
    RolloutCounts {
        plan_nodes: 1 + r.plan.followers.len(),
        granted: r.ops.len(),
        followers_granted: granted,
        occupied: r.occupied,
        unknown: r.unknown,
        settled: r.settled,
        passed: r.settled - r.settled_not_passed,
        settled_not_passed: r.settled_not_passed,
        failed: r.failed,
        waves: r.policy.waves(),
        current_wave: r.current_wave(),
    }
}

/// One rollout; `with_followers` names the plan's followers (O(plan)).
pub fn rollout_dto(s: &ControllerState, r: &Rollout, with_followers: bool) -> RolloutDto {
    let name = |n: NodeId| s.roster.display_name(n);
    RolloutDto {
        id: r.id.to_string(),
        release: hex(r.plan.release),
        status: rollout_status_word(s, r).to_string(),
        paused_reason: r.paused.map(words::pause_reason),
        slots_occupied: r.occupied as usize,
        slots_max: r.plan.slots_max,
        canary: name(r.plan.canary),
        followers: with_followers.then(|| r.plan.followers.iter().map(|n| name(*n)).collect()),
        generation: r.generation.0,
        counts: rollout_counts(r),
    }
}

/// Every rollout, oldest first, without their follower lists.
pub fn rollout_dtos(s: &ControllerState) -> Vec<RolloutDto> {
    s.rollouts
        .iter()
        .map(|r| rollout_dto(s, r, false))
        .collect()
}

fn outcome_text(outcome: Option<Outcome>) -> Option<String> {
    outcome.map(|o| words::outcome(o).into_owned())
}

/// A hot op.
pub fn op_dto(s: &ControllerState, o: &Op) -> OpDto {
    OpDto {
        id: o.id.to_string(),
        rollout: o.rollout.to_string(),
        node: s.roster.display_name(o.node),
        release: hex(o.release),
        generation: o.generation.0,
        phase: words::op_phase(o.phase).to_string(),
        outcome: outcome_text(o.summary().outcome),
        decision: o.decision.map(|d| words::decision(d).to_string()),
        unknown: o.unknown.map(|u| words::unknown_reason(u).to_string()),
        holds_slot: o.occupies_slot(),
        state: OpState::of(o).as_str().to_string(),
        archived: false,
        sources: Vec::new(),
    }
}

/// An archived op, from its summary (it is settled: only settled ops are
/// archived).
pub fn archived_op_dto(s: &ControllerState, o: &OpSummary) -> OpDto {
    OpDto {
        id: o.id.to_string(),
        rollout: o.rollout.to_string(),
        node: s.roster.display_name(o.node),
        release: hex(o.release),
        generation: o.generation.0,
        phase: words::SETTLED.to_string(),
        outcome: outcome_text(o.outcome),
        decision: o.decision.map(|d| words::decision(d).to_string()),
        unknown: None,
        holds_slot: false,
        state: o
            .outcome
            .map_or(OpState::Granted, OpState::of_outcome)
            .as_str()
            .to_string(),
        archived: true,
        sources: Vec::new(),
    }
}

/// Op `id`, hot or archived, with its state; `None` if never granted.
fn op_entry(s: &ControllerState, id: OpId) -> Option<(OpState, OpDto)> {
    if let Some(o) = s.op(id) {
        return Some((OpState::of(o), op_dto(s, o)));
    }
    let a = s.archive.get(&id)?;
    let dto = archived_op_dto(s, a);
    let state = a.outcome.map_or(OpState::Granted, OpState::of_outcome);
    Some((state, dto))
}

/// The one state of op `id`, hot or archived; `None` if the state has no
/// entry for it (never granted, or forgotten).
pub fn op_state(s: &ControllerState, id: OpId) -> Option<OpState> {
    if let Some(o) = s.op(id) {
        return Some(OpState::of(o));
    }
    let a = s.archive.get(&id)?;
    Some(a.outcome.map_or(OpState::Granted, OpState::of_outcome))
}

/// Why op `id` has no entry: forgotten by the state (settled in a rollout
/// older than the last [`model::controller::ROLLOUTS_REMEMBERED`]
/// archived; its events stay in the log), or never granted.
pub fn op_missing(s: &ControllerState, id: OpId) -> String {
    if s.op_forgotten(id) {
        format!(
            "no op {id} in the state: it settled in a rollout older than the last {} archived, so the state forgot it; its events stay in the log (fleetweft log show)",
            model::controller::ROLLOUTS_REMEMBERED
        )
    } else {
        format!("no op {id}: never granted")
    }
}

/// `GET /api/ops/{op}`: one op, hot or archived.
pub fn one_op(s: &ControllerState, id: OpId) -> Option<OpDto> {
    op_entry(s, id).map(|(_, dto)| dto)
}

/// One node.
pub fn node_dto(snap: &Snapshot, id: NodeId) -> Option<NodeDto> {
    let s = &snap.state;
    let entry = s.roster.get(id)?;
    let record = s.nodes.get(&id).cloned().unwrap_or_default();
    Some(NodeDto {
        name: entry.name.clone(),
        labels: entry.labels.clone(),
        public: entry.public.clone(),
        retired: entry.retired,
        connected: is_connected(&snap.connected, id),
        confirmed: record.confirmed.map(hex),
        reported_serving: reported_claim(snap, id, &record).map(hex),
        live_op: record.live_op.map(|o| o.to_string()),
        drifted: record.drift().is_some(),
        quarantined: s
            .quarantined
            .get(&id)
            .map(|q| [q.first_peer.clone(), q.second_peer.clone()]),
        observed: record.observed.map(|seen| ObservedDto {
            result: proof::observation_str(&seen.observation),
            source: proof::Origin::of_observation(seen.source)
                .as_str()
                .to_string(),
            at_ms: seen.at_ms,
            observation: seen.observation,
        }),
        state: NodeState::of(s, id).as_str().to_string(),
        arch: record.platform.map(|p| p.arch.name().to_string()),
        os: record.platform.map(|p| p.os.name().to_string()),
    })
}

/// What `node`'s agent last claimed serves, for the node's current op:
/// the newer of its latest report on that op (a switch claims the op's
/// release; a restore, an abort or a refusal the baseline) and a hello
/// said since the op was granted; nothing when it said neither. A node
/// that never had an op: its latest hello. Never a claim from before its
/// current op (a hello said before the op moved the route is stale).
fn reported_claim(
    snap: &Snapshot,
    node: NodeId,
    record: &model::controller::NodeRecord,
) -> Option<Digest> {
    let Some(op) = record
        .last_op
        .or(record.live_op)
        .and_then(|o| snap.state.op(o))
    else {
        return record.reported_serving;
    };
    let index = &snap.log_index;
    let granted = index.node_granted.get(&node);
    let hello = index.hello.get(&node).filter(|h| Some(*h) > granted);
    let report = op.evidence.iter().rev().find_map(|e| match e.source {
        model::controller::EvidenceSource::Agent(kind) => Some(match kind {
            model::ReportKind::Switched => Some(op.release),
            _ => op.baseline,
        }),
        _ => None,
    });
    match (hello, report) {
        (Some(h), Some(claim)) => {
            if index.reported.get(&node).is_some_and(|r| r > h) {
                claim
            } else {
                record.reported_serving
            }
        }
        (Some(_), None) => record.reported_serving,
        (None, Some(claim)) => claim,
        (None, None) => None,
    }
}

/// Whether `node` has a live connection: O(log n) in the core's set.
pub fn is_connected(connected: &imbl::OrdSet<NodeId>, node: NodeId) -> bool {
    connected.contains(&node)
}

/// What `/api/nodes` filters on.
#[derive(Clone, Debug, Default)]
pub struct NodeQuery {
    /// Every pair must be among the node's labels.
    pub labels: Labels,
    /// The node's state must be this one.
    pub state: Option<NodeState>,
    /// Items in the page (1..=[`PAGE_LIMIT_MAX`]).
    pub limit: usize,
    /// Start after this node (enrollment order).
    pub after: Option<NodeId>,
    /// A label key was given two values: all must hold, so no node
    /// matches (an empty page, not an error: the query is well formed).
    pub contradictory: bool,
}

/// A page of nodes in enrollment order. Quarantined nodes are read from
/// their own index; other filters scan from the cursor, at most
/// [`PAGE_SCAN_MAX`] nodes, and then return `next` so the client goes on.
/// `total` is given only without filters (the roster's length).
pub fn node_page(snap: &Snapshot, q: &NodeQuery) -> Page<NodeDto> {
    assert!(
        q.limit >= 1 && q.limit <= PAGE_LIMIT_MAX,
        "limit checked by the caller"
    );
    let s = &snap.state;
    if q.contradictory {
        return Page {
            items: Vec::new(),
            next: None,
            total: None,
        };
    }
    let start = q.after.map_or(0, |a| a.0 as usize + 1);
    let matches = |id: NodeId| {
        let labels_hold = q.labels.is_empty()
            || s.roster
                .get(id)
                .is_some_and(|e| q.labels.iter().all(|(k, v)| e.labels.get(k) == Some(v)));
        labels_hold && q.state.is_none_or(|st| NodeState::of(s, id) == st)
    };
    let candidates: Box<dyn Iterator<Item = NodeId>> = match q.state {
        // The quarantine map is small and ordered: walk it, not the fleet.
        Some(NodeState::Quarantined) => Box::new(
            s.quarantined
                .range(NodeId(start as u32)..)
                .map(|(id, _)| *id),
        ),
        _ => Box::new((start..s.roster.len()).map(|i| NodeId(i as u32))),
    };
    let (items, next) = paged(candidates, q.limit, matches, |id| node_dto(snap, id));
    let filtered = !q.labels.is_empty() || q.state.is_some();
    Page {
        items,
        next: next.map(|id| s.roster.display_name(id)),
        total: (!filtered).then(|| s.roster.len()),
    }
}

/// What `/api/ops` filters on.
#[derive(Clone, Debug, Default)]
pub struct OpQuery {
    /// Only this rollout's ops.
    pub rollout: Option<RolloutId>,
    /// Only ops in this state.
    pub state: Option<OpFilter>,
    /// Items in the page (1..=[`PAGE_LIMIT_MAX`]).
    pub limit: usize,
    /// Start after this op id.
    pub after: Option<OpId>,
}

/// A page of ops, hot and archived, in op order. With a rollout, its own
/// op list (`Rollout::ops`, grant order = op order) is walked from the
/// cursor by binary search; without, the hot and the archived maps are
/// merged from the cursor. A state filter scans at most [`PAGE_SCAN_MAX`]
/// ops per page and returns `next` to go on. `total` is given only when an
/// index knows it: without a state filter.
pub fn op_page(s: &ControllerState, q: &OpQuery) -> Page<OpDto> {
    assert!(
        q.limit >= 1 && q.limit <= PAGE_LIMIT_MAX,
        "limit checked by the caller"
    );
    let start = q.after.map_or(0, |a| a.0.saturating_add(1));
    let (candidates, total): (Box<dyn Iterator<Item = OpId>>, usize) = match q.rollout {
        Some(r) => {
            let Some(r) = s.rollout(r) else {
                return Page {
                    items: Vec::new(),
                    next: None,
                    total: Some(0),
                };
            };
            let from = match r.ops.binary_search(&OpId(start)) {
                Ok(i) | Err(i) => i,
            };
            let ids = r.ops.clone();
            (
                Box::new((from..ids.len()).filter_map(move |i| ids.get(i).copied())),
                r.ops.len(),
            )
        }
        None => (Box::new(merged_ids(s, OpId(start))), s.ops_granted()),
    };
    let mut found = Vec::new();
    let matches = |id: OpId| match op_entry(s, id) {
        Some((state, _)) => q.state.is_none_or(|f| f.matches(state)),
        None => false,
    };
    let (ids, next) = paged(candidates, q.limit, matches, Some);
    for id in ids {
        if let Some((_, dto)) = op_entry(s, id) {
            found.push(dto);
        }
    }
    Page {
        items: found,
        next: next.map(|id| id.to_string()),
        total: q.state.is_none().then_some(total),
    }
}

/// Op ids from `start` on, hot and archived merged in id order (the two
/// maps hold disjoint ids).
fn merged_ids(s: &ControllerState, start: OpId) -> impl Iterator<Item = OpId> + '_ {
    let mut hot = s.ops.range(start..).map(|(id, _)| *id).peekable();
    let mut cold = s.archive.range(start..).map(|(id, _)| *id).peekable();
    std::iter::from_fn(move || match (hot.peek(), cold.peek()) {
        (Some(h), Some(c)) if h < c => hot.next(),
        (Some(_), Some(_)) => cold.next(),
        (Some(_), None) => hot.next(),
        (None, _) => cold.next(),
    })
}

/// Walk `candidates` in order, keeping up to `limit` that match (mapped
/// by `to_item`) and examining at most [`PAGE_SCAN_MAX`]. The cursor of
/// the next page is the last candidate examined, unless the candidates
/// ran out.
fn paged<K: Copy, T>(
    candidates: impl Iterator<Item = K>,
    limit: usize,
    matches: impl Fn(K) -> bool,
    to_item: impl Fn(K) -> Option<T>,
) -> (Vec<T>, Option<K>) {
    let mut items = Vec::new();
    let mut candidates = candidates.peekable();
    let mut last = None;
    for (examined, key) in candidates.by_ref().enumerate() {
        last = Some(key);
        if matches(key) {
            if let Some(item) = to_item(key) {
                items.push(item);
            }
        }
        if items.len() == limit || examined + 1 == PAGE_SCAN_MAX {
            break;
        }
    }
    assert!(items.len() <= limit);
    let more = candidates.peek().is_some();
    (items, last.filter(|_| more))
}

/// Node counts, each from an index.
pub fn node_counts(snap: &Snapshot) -> NodeCounts {
    let s = &snap.state;
    NodeCounts {
        enrolled: s.roster.len(),
        connected: snap.connected.len(),
        retired: s.roster.retired_count(),
        quarantined: s.quarantined.len(),
    }
}

/// Op counts summed over the rollouts' indexes: O(rollouts), no scan.
pub fn op_counts(s: &ControllerState) -> OpCounts {
    let mut c = OpCounts {
        granted: s.ops_granted(),
        archived: s.archive.len(),
        forgotten: s.forgotten_ops,
        ..OpCounts::default()
    };
    for r in s.rollouts.iter() {
        c.holding_slot += r.occupied as usize;
        c.unknown += r.unknown as usize;
        c.settled += r.settled as usize;
        c.passed += (r.settled - r.settled_not_passed) as usize;
        c.settled_not_passed += r.settled_not_passed as usize;
        c.failed += r.failed as usize;
    }
    c
}

/// Entries of the handover report ([`handover_report`]), counted from
/// indexes, never by walking ops or nodes: every op holding a slot, every
/// active rollout waiting for an operator (paused, or at an approval
/// gate), every drifted node, every quarantined node and every node ahead
/// of the log. `/api/status`, the dashboard and `fleetweft status` show
/// this number; a test holds it equal to the report's length.
pub fn unresolved_count(snap: &Snapshot) -> usize {
    let s = &snap.state;
    let rollouts: usize = s
        .rollouts
        .iter()
        .map(|r| {
            let waiting = r.status == RolloutStatus::Active
                && (r.paused.is_some() || s.awaiting_approval(r.id));
            r.occupied as usize + usize::from(waiting)
        })
        .sum();
    rollouts + s.drifted.len() + s.quarantined.len() + ahead::count(snap)
}

/// The first `max` UNKNOWN ops in op order. UNKNOWN ops are hot and hold
/// a slot; the walk over the hot ops stops once `max` are found, and is
/// skipped when the rollouts' indexes say none is UNKNOWN.
pub fn unknown_ops(s: &ControllerState, max: usize) -> Vec<OpDto> {
    if s.rollouts.iter().all(|r| r.unknown == 0) {
        return Vec::new();
    }
    s.ops
        .values()
        .filter(|o| OpState::of(o) == OpState::Unknown)
        .take(max)
        .map(|o| op_dto(s, o))
        .collect()
}

/// The `/api/status` summary.
pub fn status_dto(snap: &Snapshot) -> StatusDto {
    let s = &snap.state;
    let skip = s.rollouts.len().saturating_sub(STATUS_ROLLOUTS_MAX);
    StatusDto {
        last_sequence: snap.last_sequence,
        generation: s.generation.0,
        active: s.active_rollout().map(|r| rollout_dto(s, r, false)),
        rollouts: s
            .rollouts
            .iter()
            .skip(skip)
            .map(|r| rollout_dto(s, r, false))
            .collect(),
        rollouts_total: s.rollouts.len(),
        nodes: node_counts(snap),
        ops: op_counts(s),
        unresolved: unresolved_count(snap),
        unknown_ops: unknown_ops(s, STATUS_UNKNOWN_OPS_MAX),
        links: StatusLinks::default(),
        nodes_ahead_of_log: ahead::count(snap),
        ahead_of_log: ahead::dtos(snap, ahead::STATUS_AHEAD_OF_LOG_MAX),
        role: snap.role,
        log_sequence: snap.last_sequence,
        leader: snap.leader.as_ref().map(|advert| advert.api.clone()),
        storage: storage::dto(snap.storage),
    }
}

/// The handover report (`/api/unresolved`, the dashboard): every node
/// ahead of the log first (it puts everything else in doubt), then what
/// `crate::proof::unresolved` finds in the state.
pub fn handover_report(snap: &Snapshot) -> Vec<crate::view::report::Unresolved> {
    let names = |n: NodeId| snap.state.roster.display_name(n);
    let mut report = ahead::unresolved(snap);
    report.extend(crate::view::report::unresolved(
        &snap.state,
        &names,
        &snap.log_index,
    ));
    report
}

/// A query string's `limit`: absent is [`PAGE_LIMIT_DEFAULT`].
fn parse_limit(text: Option<&str>) -> Result<usize, String> {
    let Some(text) = text else {
        return Ok(PAGE_LIMIT_DEFAULT);
    };
    match text.parse::<usize>() {
        Ok(n) if (1..=PAGE_LIMIT_MAX).contains(&n) => Ok(n),
        _ => Err(format!(
            "parameter `limit`: {text:?} is not a whole number from 1 to {PAGE_LIMIT_MAX}"
        )),
    }
}

/// The single value of each parameter in `pairs`, refusing a parameter not
/// in `allowed` and a repeated one (but `repeatable`).
fn single_values<'a>(
    pairs: &'a [(String, String)],
    allowed: &[&str],
    repeatable: &str,
) -> Result<std::collections::BTreeMap<&'a str, &'a str>, String> {
    let mut out = std::collections::BTreeMap::new();
    for (k, v) in pairs {
        if !allowed.contains(&k.as_str()) {
            return Err(format!(
                "parameter `{k}`: unknown, expected one of {}",
                allowed.join(", ")
            ));
        }
        if k != repeatable && out.insert(k.as_str(), v.as_str()).is_some() {
            return Err(format!("parameter `{k}`: given more than once"));
        }
    }
    Ok(out)
}

/// Parses `/api/nodes`'s query: `label=k=v` (repeatable, all must hold),
/// `state=WORD`, `limit=N`, `after=NAME` (an enrolled node's name).
pub fn parse_node_query(
    s: &ControllerState,
    pairs: &[(String, String)],
) -> Result<NodeQuery, QueryError> {
    let one = single_values(pairs, &["label", "state", "limit", "after"], "label")?;
    // The document's `maxItems` counts the parameters as given, repeats
    // included (schemathesis sent 19 with 16 distinct keys): checked
    // before they collapse into a map.
    let given = pairs.iter().filter(|(k, _)| k == "label").count();
    if given > LABEL_FILTERS_MAX {
        return Err(QueryError::BadRequest(format!(
            "parameter `label`: {given} labels exceed the limit of {LABEL_FILTERS_MAX}"
        )));
    }
    let mut labels = Labels::new();
    let mut contradictory = false;
    for (_, pair) in pairs.iter().filter(|(k, _)| k == "label") {
        let Some((k, v)) = pair
            .split_once('=')
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        else {
            return Err(QueryError::BadRequest(format!(
                "parameter `label`: {pair:?} is not KEY=VALUE"
            )));
        };
        if labels
            .insert(k.to_string(), v.to_string())
            .is_some_and(|old| old != v)
        {
            contradictory = true;
        }
    }
    if labels.len() > LABEL_FILTERS_MAX {
        return Err(QueryError::BadRequest(format!(
            "parameter `label`: {} labels exceed the limit of {LABEL_FILTERS_MAX}",
            labels.len()
        )));
    }
    let state = match one.get("state") {
        None => None,
        Some(word) => Some(NodeState::parse(word).ok_or_else(|| {
            format!(
                "parameter `state`: {word:?} is not a node state, expected one of {}",
                node_state_words()
            )
        })?),
    };
    let after = match one.get("after") {
        None => None,
        Some(name) => Some(
            s.roster
                .id(name)
                // A cursor naming no node names nothing: 404.
                .ok_or_else(|| {
                    QueryError::NotFound(format!("parameter `after`: no node {name} is enrolled"))
                })?,
        ),
    };
    Ok(NodeQuery {
        contradictory,
        labels,
        state,
        limit: parse_limit(one.get("limit").copied())?,
        after,
    })
}

/// Parses `/api/ops`'s query: `rollout=rN`, `state=WORD`, `limit=N`,
/// `after=opN`.
pub fn parse_op_query(
    s: &ControllerState,
    pairs: &[(String, String)],
) -> Result<OpQuery, QueryError> {
    let one = single_values(pairs, &["rollout", "state", "limit", "after"], "")?;
    let rollout = match one.get("rollout") {
        None => None,
        Some(text) => {
            let id = text
                .strip_prefix('r')
                .and_then(|n| n.parse().ok())
                .map(RolloutId)
                .filter(|id| s.rollout(*id).is_some())
                .ok_or_else(|| {
                    QueryError::NotFound(format!(
                        "parameter `rollout`: no rollout {text} (ids look like r0)"
                    ))
                })?;
            Some(id)
        }
    };
    let state = match one.get("state") {
        None => None,
        Some(word) => Some(OpFilter::parse(word).ok_or_else(|| {
            format!(
                "parameter `state`: {word:?} is not an op state, expected one of {}",
                OpFilter::words()
            )
        })?),
    };
    let after = match one.get("after") {
        None => None,
        Some(text) => Some(
            text.strip_prefix("op")
                .and_then(|n| n.parse().ok())
                .map(OpId)
                .ok_or_else(|| {
                    format!("parameter `after`: {text:?} is not an op id such as op0")
                })?,
        ),
    };
    Ok(OpQuery {
        rollout,
        state,
        limit: parse_limit(one.get("limit").copied())?,
        after,
    })
}

/// Fleets built on the pure model for the read tests (here and in the
/// controller's dashboard tests): enrolled nodes, a rollout over them, some
/// ops settled.
///
/// Compiled in every build, not behind a feature: a feature only a
/// dev-dependency turns on gives `api` (and every crate above it) one
/// build for `cargo test` and another for `cargo build --bins`, and each
/// switch between them rebuilt the controller, the CLI and the demo.
#[doc(hidden)]
pub mod fixture {
    use crate::view::snapshot::Snapshot;
    use model::controller::{ControllerState, Input, Labels};
    use model::{NodeId, OpId};
    use testkit::accept;
    use testkit::fixtures::{enroll, hello, plan, verify, V1};

    /// `nodes` enrolled nodes (`n0`, `n1`, ...; `region=eu` for even ids,
    /// `us` for odd), all serving v1 and connected; a v2 rollout over all
    /// of them with `slots` slots, its canary verified, then the first
    /// `verified` followers' ops verified and the next `silent` ones timed
    /// out (UNKNOWN).
    pub fn fleet(nodes: u32, slots: u16, verified: u32, silent: u32) -> Snapshot {
        let mut state = ControllerState::default();
        for n in 0..nodes {
            let region = if n % 2 == 0 { "eu" } else { "us" };
            let labels = Labels::from([("region".to_string(), region.to_string())]);
            accept(&mut state, enroll(&format!("n{n}"), labels));
            accept(&mut state, hello(NodeId(n), Some(V1)));
        }
        let plan = plan(nodes, slots, false);
        accept(&mut state, Input::StartRollout { plan });
        verify(&mut state, 0);
        for op in 1..=verified {
            verify(&mut state, op);
        }
        for op in verified + 1..=verified + silent {
            accept(&mut state, Input::Timeout { op: OpId(op) });
        }
        Snapshot {
            state,
            last_sequence: Some(1),
            connected: (0..nodes).map(NodeId).collect(),
            unknown_since: Default::default(),
            op_durations: Default::default(),
            log_index: Default::default(),
            identity_conflicts: 0,
            presented: Default::default(),
            quarantined_peers: Default::default(),
            batches: Default::default(),
            deadlines_armed: 0,
            ahead_of_log: Default::default(),
            role: Default::default(),
            leader: None,
            storage: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::fleet;
    use super::*;

    /// The count `/api/status`, the dashboard and `fleetweft status` show
    /// is the handover report's length, with every kind of entry present:
    /// an UNKNOWN op, an op holding a slot, a paused rollout, a drifted
    /// node, a quarantined node and a node ahead of the log.
    #[test]
    fn the_unresolved_count_is_the_number_of_report_entries() {
        use model::controller::{Input, ObservationSource};
        use model::{Digest, Generation, NodeId, RolloutId, RouteObservation};
        let mut snap = fleet(8, 2, 2, 1);
        let state = &mut snap.state;
        let observe = Input::Observe {
            node: NodeId(1),
            observation: RouteObservation::passing(Digest::repeat(1)),
            source: ObservationSource::Operator,
            now_ms: 1_000,
        };
        testkit::accept(state, observe);
        assert!(state.drifted.contains(&NodeId(1)), "node 1 drifted");
        let conflict = Input::IdentityConflict {
            node: NodeId(2),
            first_peer: "10.0.0.1:1".into(),
            second_peer: "10.0.0.2:2".into(),
        };
        testkit::accept(state, conflict);
        testkit::accept(
            state,
            Input::Pause {
                rollout: RolloutId(0),
            },
        );
        snap.ahead_of_log.insert(NodeId(7), Generation(9));
        let report = handover_report(&snap);
        let phases: Vec<&str> = report.iter().map(|u| u.phase.as_str()).collect();
        for kind in ["drifted", "quarantined", "paused (operator)"] {
            assert!(
                phases.iter().any(|p| p.starts_with(kind)),
                "{kind}: {phases:?}"
            );
        }
        assert!(
            report.iter().any(|u| u.unknown_reason.is_some()),
            "{phases:?}"
        );
        assert_eq!(unresolved_count(&snap), report.len(), "{phases:?}");
        assert_eq!(status_dto(&snap).unresolved, report.len());
    }

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Every node page is bounded by its limit, and following `next` from
    /// page to page visits every node once, in enrollment order.
    #[test]
    fn node_pages_are_bounded_and_cover_the_fleet_once() {
        let snap = fleet(2_500, 50, 10, 0);
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut query = vec![("limit", "1000")];
            if let Some(a) = &after {
                query.push(("after", a));
            }
            let q = parse_node_query(&snap.state, &pairs(&query)).expect("query");
            let page = node_page(&snap, &q);
            assert!(page.items.len() <= 1000);
            assert_eq!(page.total, Some(2_500));
            seen.extend(page.items.into_iter().map(|n| n.name));
            after = page.next;
            if after.is_none() {
                break;
            }
        }
        let expected: Vec<String> = (0..2_500).map(|n| format!("n{n}")).collect();
        assert_eq!(seen, expected);
    }

    /// Label and state filters select exactly the matching nodes; a label
    /// scan stops at the scan budget and hands back a cursor.
    #[test]
    fn node_filters_match_and_scans_are_budgeted() {
        let snap = fleet(PAGE_SCAN_MAX as u32 + 500, 20, 5, 3);
        let q = parse_node_query(
            &snap.state,
            &pairs(&[("label", "region=us"), ("limit", "1000")]),
        )
        .expect("query");
        let page = node_page(&snap, &q);
        assert_eq!(page.items.len(), 1000);
        assert!(page.items.iter().all(|n| n.labels["region"] == "us"));
        assert_eq!(page.total, None, "a filtered count would need a scan");
        // No node has label tier=edge: the scan stops at the budget.
        let q = parse_node_query(&snap.state, &pairs(&[("label", "tier=edge")])).expect("query");
        let page = node_page(&snap, &q);
        assert!(page.items.is_empty());
        let cursor = page.next.expect("the budget ran out before the end");
        assert_eq!(cursor, format!("n{}", PAGE_SCAN_MAX - 1));
        // The UNKNOWN nodes are the three timed-out followers' nodes.
        let q = parse_node_query(&snap.state, &pairs(&[("state", "unknown")])).expect("query");
        let names: Vec<String> = node_page(&snap, &q)
            .items
            .into_iter()
            .map(|n| n.name)
            .collect();
        assert_eq!(names, ["n6", "n7", "n8"]);
    }

    /// Op pages: a rollout's ops by its own index, a state filter, the
    /// cursor, and `GET /api/ops/{op}` for one op.
    #[test]
    fn op_pages_filter_by_rollout_and_state() {
        let snap = fleet(200, 20, 10, 4);
        let s = &snap.state;
        let q = parse_op_query(s, &pairs(&[("rollout", "r0"), ("limit", "5")])).expect("query");
        let page = op_page(s, &q);
        let ids: Vec<&str> = page.items.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, ["op0", "op1", "op2", "op3", "op4"]);
        assert_eq!(page.next.as_deref(), Some("op4"));
        assert_eq!(page.total, Some(s.rollout(RolloutId(0)).unwrap().ops.len()));
        let q = parse_op_query(
            s,
            &pairs(&[("rollout", "r0"), ("after", "op4"), ("limit", "2")]),
        )
        .expect("query");
        let ids: Vec<String> = op_page(s, &q).items.into_iter().map(|o| o.id).collect();
        assert_eq!(ids, ["op5", "op6"]);
        let q = parse_op_query(s, &pairs(&[("state", "unknown")])).expect("query");
        let ids: Vec<String> = op_page(s, &q).items.into_iter().map(|o| o.id).collect();
        assert_eq!(ids, ["op11", "op12", "op13", "op14"]);
        let q = parse_op_query(s, &pairs(&[("state", "verified")])).expect("query");
        assert_eq!(
            op_page(s, &q).items.len(),
            11,
            "the canary and 10 followers"
        );
        assert_eq!(one_op(s, OpId(3)).expect("op3").state, "verified");
        assert!(one_op(s, OpId(9_999)).is_none());
    }

    /// Archived ops are paged too, merged with the hot ones in op order.
    #[test]
    fn archived_ops_are_listed_in_order_with_the_hot_ones() {
        let mut snap = fleet(4, 4, 3, 0);
        // A second rollout over the same nodes archives the first one's ops
        // once it completed and its nodes got newer ops.
        let plan = model::Plan {
            release: model::Digest::repeat(3),
            canary: NodeId(0),
            followers: vec![NodeId(1), NodeId(2), NodeId(3)],
            slots_max: 4,
            approval_after_canary: false,
        };
        let input = model::controller::Input::StartRollout { plan };
        for e in model::controller::step(&snap.state, &input).expect("start") {
            model::controller::apply(&mut snap.state, &e);
        }
        let s = &snap.state;
        let q = parse_op_query(s, &pairs(&[])).expect("query");
        let page = op_page(s, &q);
        let ids: Vec<String> = page.items.iter().map(|o| o.id.clone()).collect();
        let expected: Vec<String> = (0..s.ops_granted()).map(|i| format!("op{i}")).collect();
        assert_eq!(ids, expected);
        assert_eq!(page.total, Some(s.ops_granted()));
        assert!(!s.archive.is_empty(), "r0's settled ops were archived");
        assert!(page.items.iter().any(|o| o.archived));
    }

    /// Bad parameters are refused naming the parameter.
    #[test]
    fn bad_parameters_are_named() {
        let snap = fleet(3, 1, 0, 0);
        let s = &snap.state;
        let refused = |q: &[(&str, &str)], nodes: bool| {
            let p = pairs(q);
            if nodes {
                parse_node_query(s, &p).expect_err("refused").to_string()
            } else {
                parse_op_query(s, &p).expect_err("refused").to_string()
            }
        };
        assert!(refused(&[("limit", "0")], true).starts_with("parameter `limit`"));
        assert!(refused(&[("limit", "1001")], false).starts_with("parameter `limit`"));
        assert!(refused(&[("limit", "x")], true).starts_with("parameter `limit`"));
        assert!(refused(&[("state", "happy")], true).starts_with("parameter `state`"));
        assert!(refused(&[("state", "happy")], false).starts_with("parameter `state`"));
        assert!(refused(&[("label", "region")], true).starts_with("parameter `label`"));
        assert!(refused(&[("after", "nobody")], true).starts_with("parameter `after`"));
        assert!(refused(&[("after", "7")], false).starts_with("parameter `after`"));
        assert!(refused(&[("rollout", "r9")], false).starts_with("parameter `rollout`"));
        assert!(refused(&[("colour", "red")], false).starts_with("parameter `colour`"));
        assert!(refused(&[("limit", "1"), ("limit", "2")], true).contains("more than once"));
        // The document's maxItems counts repeats: 17 filters on one key
        // are refused though they name one label.
        let repeated = vec![("label", "k=v"); LABEL_FILTERS_MAX + 1];
        assert!(refused(&repeated, true).contains("exceed the limit"));
        // A key with two values is well formed and matches no node.
        let q = parse_node_query(s, &pairs(&[("label", "region=eu"), ("label", "region=us")]))
            .expect("query");
        assert!(node_page(&snap, &q).items.is_empty());
    }

    /// The summary's counts come from indexes and agree with a recount;
    /// its lists are bounded.
    #[test]
    fn the_status_summary_agrees_with_a_recount() {
        let snap = fleet(300, 200, 20, STATUS_UNKNOWN_OPS_MAX as u32 + 10);
        let s = &snap.state;
        let st = status_dto(&snap);
        let hot_unknown = s
            .ops
            .values()
            .filter(|o| OpState::of(o) == OpState::Unknown)
            .count();
        assert_eq!(st.ops.unknown, hot_unknown);
        assert_eq!(st.ops.unknown, STATUS_UNKNOWN_OPS_MAX + 10);
        assert_eq!(st.unknown_ops.len(), STATUS_UNKNOWN_OPS_MAX);
        let holding = s.ops.values().filter(|o| o.occupies_slot()).count();
        assert_eq!(st.ops.holding_slot, holding);
        let names = |n: NodeId| s.roster.display_name(n);
        let report = crate::view::report::unresolved(s, &names, &snap.log_index);
        assert_eq!(st.unresolved, report.len());
        assert_eq!(st.nodes.enrolled, 300);
        assert_eq!(st.nodes.connected, 300);
        let active = st.active.expect("active rollout");
        assert_eq!(active.counts.plan_nodes, 300);
        assert_eq!(active.counts.passed, 21, "the canary and 20 followers");
        assert_eq!(active.counts.current_wave, 1);
        assert!(active.followers.is_none(), "the summary names no followers");
    }

    /// The current wave follows the followers granted.
    #[test]
    fn the_current_wave_is_the_latest_granted_followers() {
        let snap = fleet(20, 4, 0, 0);
        let mut r = snap.state.rollout(RolloutId(0)).expect("r0").clone();
        r.policy = std::sync::Arc::new(model::plan::Policy {
            wave_ends: vec![2, 10, 19],
            ..Default::default()
        });
        for (granted, wave) in [(0, 0), (1, 1), (2, 1), (3, 2), (10, 2), (11, 3), (19, 3)] {
            r.followers_granted = granted;
            assert_eq!(rollout_counts(&r).current_wave, wave, "{granted} granted");
        }
    }
}
