//! Deployment proof (SPEC §6, §10): five verdicts, their reason codes and the
//! evidence checks behind them. Pure: no IO, no clock; depends on `model`
//! only, so the model checker judges with the very same function the
//! controller serves.
//!
//! # A proof is a readback
//!
//! [`live_node_proof`] judges evidence gathered when the question is asked
//! ([`Fresh`]): the controller's probe of the public route (status, answer,
//! `X-Fleetweft-Release` identity, judged by the probe spec of the release the
//! node should serve) and the agent's readback (re-hash of the installed
//! bundle behind the route and of the app file that is started, process
//! uptime and restart count). Something that could not be read is evidence
//! too: it is shown as "could not read", never replaced by an older value.
//! [`recorded_node_proof`] (`--cached`) judges what was recorded instead:
//! the node's latest recorded observation (`NodeObserved`) when it is newer
//! than the op's settlement, else the op's own evidence. Every check says
//! where its observation came from ([`Origin`]) and, where the log has it,
//! when it was made.
//!
//! # Intent
//!
//! The *intended release* of a node is the release of the latest rollout whose
//! plan includes the node ([`model::controller::ControllerState::intended_rollout`]);
//! the *intended op* is the latest op that rollout granted to the node.
//! [`rollout_proof`] judges every node of one rollout against that rollout.
//!
//! # Evidence items
//!
//! - `artifact digest`: what was read back from disk behind the route:
//!   another digest => [`ReasonCode::DigestMismatch`]; unreadable =>
//!   [`ReasonCode::DigestUnreadable`]; the intended bundle but an altered app
//!   file => [`ReasonCode::AppFileMismatch`] (its observed text names the
//!   release whose signed app the file is, when the agent holds one); the
//!   agent did not answer a readback => could not read,
//!   [`ReasonCode::ReadbackUnavailable`]. Only a recorded proof of an op's
//!   evidence falls back to what the agent's report claims it put in place
//!   (`Switched` claims the op's release; `Restored`, `NotApplied` and
//!   `Refused` the baseline).
//! - `process`: expected `running, at most N restarts` (N =
//!   [`model::evidence::PROCESS_RESTARTS_MAX`]). A restart count above N, or a
//!   dead process behind a route that does not answer => false,
//!   [`ReasonCode::RestartLoop`]; a dead-looking process while the route
//!   answers => false, [`ReasonCode::ProcessUnhealthy`], informational only
//!   (S11: a process's looks are not evidence). Unobserved numbers never turn
//!   a verdict into `partially-verified`.
//! - `health probe` and `route identity`: [`judge_route`], the same function
//!   `fleetweft probe` prints. Pass => true; wrong answer =>
//!   [`ReasonCode::ProbeWrongAnswer`]; an error status from the stamping proxy
//!   => [`ReasonCode::ProbeNon2xx`]; no answer => could not read,
//!   [`ReasonCode::ProbeUnreachable`]; another identity =>
//!   [`ReasonCode::RouteIdentityMismatch`]; no identity although something
//!   answered => could not read, [`ReasonCode::DigestUnreadable`].
//!
//! - `configuration` (issue #24 item 1; live proofs only, when the intended
//!   rollout deploys a configuration or one was read back): the
//!   fingerprint of the intended deployment's configuration against the one
//!   the serving process was started with (read by the agent from that
//!   process's environment). Another one, or none because the route serves
//!   no configured deployment => [`ReasonCode::ConfigurationFingerprintMismatch`];
//!   the environment had none or could not be read => could not read,
//!   [`ReasonCode::ConfigurationUnreadable`]; no readback =>
//!   [`ReasonCode::ReadbackUnavailable`]. A recorded proof has no such row:
//!   the log keeps no configuration readback.
//!
//! "Could not read" (`ok: None`) and "read something else" (`ok: Some(false)`)
//! never share a reason code.
//!
//! # Verdicts, first match wins
//!
//! 1. No rollout includes the node => `unverified` ([`ReasonCode::NotInRollout`]).
//! 2. The intended rollout has not granted the node an op: `stale`
//!    ([`ReasonCode::SupersededOp`]) when the judged observation passed and
//!    the node's confirmed release is not the intended one, else `unverified`
//!    ([`ReasonCode::OpNotGranted`]).
//! 3. The op is UNKNOWN => `unverified` ([`ReasonCode::OpUnknown`]).
//! 4. The op settled `Resolved(Abandon)` => `unverified` ([`ReasonCode::Abandoned`]).
//! 5. The op settled `RolledBack` and kept the observation that caused the
//!    restore ([`model::controller::Op::cause`]): that observation contradicts
//!    the intent => `failed` with its reason, listed as the check `new release
//!    before rollback`, whatever serves now. The op settled `RolledBack`,
//!    `NotApplied` or `Resolved(ConfirmBaseline)` without such a cause, the
//!    confirmed release is not the intended one and the judged observation
//!    passed showing that confirmed release (nothing read contradicts it) =>
//!    `stale` ([`ReasonCode::RolledBack`] or [`ReasonCode::NotApplied`]).
//! 6. No observation => `unverified` ([`ReasonCode::NoEvidence`], or
//!    [`ReasonCode::OpNotSettled`] while the op still holds its slot).
//! 7. An older release serves healthily in the intended one's place (seed
//!    003's `stale`, issue #24 item 1) => `stale`
//!    ([`ReasonCode::OlderReleaseServing`]), the summary naming that release
//!    by version and digest. All of: the op no longer holds its slot; the
//!    agent's live readback found another release behind the route (its
//!    bundle's digest, or [`model::ArtifactRead::AppFileOf`]: the app file
//!    that runs is that release's signed app); the controller holds that
//!    release ([`Fresh::older`]) and the route's answer passes *its* probe
//!    spec; the route answers as the intended release or as it; the node had
//!    it before the intended rollout (the op's baseline, or an earlier
//!    rollout granted the node an op of it or over it); no restart loop. The
//!    checks against the intent stay false. An unknown digest, an altered app
//!    file that is no release's, a wrong answer of the older release, or a
//!    recorded proof (it has no answer judged by the older release's spec)
//!    fall through to rule 8.
//! 8. A counted check other than `configuration` is false => `failed`; its
//!    reason is the route identity mismatch when there is one (a route
//!    answering as another release explains a wrong answer), else the first
//!    false check's.
//! 9. The op is not settled => `unverified` ([`ReasonCode::OpNotSettled`]).
//! 10. The `configuration` check is false (everything else agrees with the
//!     intent) => `stale` ([`ReasonCode::ConfigurationFingerprintMismatch`]):
//!     the intended code serves with an old configuration.
//! 11. The op passed: some check could not be read => `partially-verified`
//!     (the first unreadable check's reason); every check true and the
//!     judged observation proves the intended release serving => `verified`.
//! 12. Anything else => `unverified` ([`ReasonCode::NoEvidence`]).
//!
//! A rollout's verdict is the worst of its nodes' verdicts in the order
//! `failed` < `unverified` < `partially-verified` < `stale` < `verified`
//! ([`Verdict::rank`]); a rollout with no nodes is `unverified`.
//!
//! # What a proof does not prove
//!
//! A live verdict is about the moment of its readback: the route and the
//! agent could change a millisecond later. Periodic re-verification and drift
//! narrow that window; nothing closes it.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use model::controller::{
    observation_confirms, ControllerState, EvidenceSource, NodeObservation, ObservationSource, Op,
    OpPhase, Outcome, Resolution, Rollout,
};
use model::{Digest, NodeId, ProbeVerdict, ReportKind, RolloutId, RouteObservation};
use serde::{Deserialize, Serialize};
use std::fmt;

mod view;
use view::View;
pub use view::{
    merge_readback, uptime_text as view_uptime_text, Fresh, KnownRelease, Origin, ProofMode,
};

/// One of the five answers of SPEC §6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every evidence item was read and matches the intent.
    Verified,
    /// What could be read matches; something could not be read.
    PartiallyVerified,
    /// Not enough evidence to tell.
    Unverified,
    /// Healthy, but not the intended release or op.
    Stale,
    /// An observation contradicts the intent.
    Failed,
}

impl Verdict {
    /// Position in the "worst first" order used for rollouts: `failed` (0) <
    /// `unverified` < `partially-verified` < `stale` < `verified` (4).
    pub fn rank(self) -> u8 {
        match self {
            Verdict::Failed => 0,
            Verdict::Unverified => 1,
            Verdict::PartiallyVerified => 2,
            Verdict::Stale => 3,
            Verdict::Verified => 4,
        }
    }

    /// The kebab-case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Verified => "verified",
            Verdict::PartiallyVerified => "partially-verified",
            Verdict::Unverified => "unverified",
            Verdict::Stale => "stale",
            Verdict::Failed => "failed",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a check or a verdict is not plainly "ok".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// The route answered as another release (read, and wrong).
    RouteIdentityMismatch,
    /// No release identity could be read (could not read).
    DigestUnreadable,
    /// Another artifact is in place (read, and wrong).
    DigestMismatch,
    /// The installed bundle is the intended one, but the app file started
    /// from it differs from the app inside the bundle (read, and wrong).
    AppFileMismatch,
    /// The supervisor restarted the process more often than its bound
    /// ([`model::evidence::PROCESS_RESTARTS_MAX`]), or the process is down
    /// and the route does not answer.
    RestartLoop,
    /// The process looked dead while the route answered (informational).
    ProcessUnhealthy,
    /// The node's proxy answered with an error status.
    ProbeNon2xx,
    /// The service answered, but not what the probe spec expects.
    ProbeWrongAnswer,
    /// No answer from the public route (could not read).
    ProbeUnreachable,
    /// No observation was recorded for the op.
    NoEvidence,
    /// The op's outcome cannot be told from the evidence.
    OpUnknown,
    /// The op still holds its slot, waiting for settling evidence.
    OpNotSettled,
    /// The intended rollout has not granted this node an op yet.
    OpNotGranted,
    /// The node still serves the release of an older, superseded op.
    SupersededOp,
    /// The op was rolled back to the baseline (or an operator confirmed it).
    RolledBack,
    /// The op was aborted before switching; the baseline stayed.
    NotApplied,
    /// An operator took the node out of the rollout; serving state unknown.
    Abandoned,
    /// No rollout includes this node.
    NotInRollout,
    /// The agent did not answer the readback (not connected, timed out):
    /// the artifact and the process could not be read now.
    ReadbackUnavailable,
    /// A healthy workload of an older release of the node serves where the
    /// intended one should: the readback found that release behind the
    /// route (its bundle, or its signed app as the app file) and the route's
    /// answer passes that release's own probe spec (issue #24 item 1, seed
    /// 003's `stale`).
    OlderReleaseServing,
    /// The process serving the route was started with another configuration
    /// than the intended deployment's (read, and wrong): a hand restart with
    /// the old environment, or an old process still listening (issue #24
    /// item 1). The node is `stale` when nothing else contradicts the intent.
    ConfigurationFingerprintMismatch,
    /// The agent answered, but the configuration fingerprint of the serving
    /// process could not be read (its environment has none, or is
    /// unreadable): could not read.
    ConfigurationUnreadable,
}

impl ReasonCode {
    /// Every reason code, for tests and documentation.
    pub const ALL: [ReasonCode; 22] = [
        ReasonCode::RouteIdentityMismatch,
        ReasonCode::DigestUnreadable,
        ReasonCode::DigestMismatch,
        ReasonCode::AppFileMismatch,
        ReasonCode::RestartLoop,
        ReasonCode::ProcessUnhealthy,
        ReasonCode::ProbeNon2xx,
        ReasonCode::ProbeWrongAnswer,
        ReasonCode::ProbeUnreachable,
        ReasonCode::NoEvidence,
        ReasonCode::OpUnknown,
        ReasonCode::OpNotSettled,
        ReasonCode::OpNotGranted,
        ReasonCode::SupersededOp,
        ReasonCode::RolledBack,
        ReasonCode::NotApplied,
        ReasonCode::Abandoned,
        ReasonCode::NotInRollout,
        ReasonCode::ReadbackUnavailable,
        ReasonCode::OlderReleaseServing,
        ReasonCode::ConfigurationFingerprintMismatch,
        ReasonCode::ConfigurationUnreadable,
    ];

    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonCode::RouteIdentityMismatch => "route_identity_mismatch",
            ReasonCode::DigestUnreadable => "digest_unreadable",
            ReasonCode::DigestMismatch => "digest_mismatch",
            ReasonCode::AppFileMismatch => "app_file_mismatch",
            ReasonCode::RestartLoop => "restart_loop",
            ReasonCode::ProcessUnhealthy => "process_unhealthy",
            ReasonCode::ProbeNon2xx => "probe_non2xx",
            ReasonCode::ProbeWrongAnswer => "probe_wrong_answer",
            ReasonCode::ProbeUnreachable => "probe_unreachable",
            ReasonCode::NoEvidence => "no_evidence",
            ReasonCode::OpUnknown => "op_unknown",
            ReasonCode::OpNotSettled => "op_not_settled",
            ReasonCode::OpNotGranted => "op_not_granted",
            ReasonCode::SupersededOp => "superseded_op",
            ReasonCode::RolledBack => "rolled_back",
            ReasonCode::NotApplied => "not_applied",
            ReasonCode::Abandoned => "abandoned",
            ReasonCode::NotInRollout => "not_in_rollout",
            ReasonCode::ReadbackUnavailable => "readback_unavailable",
            ReasonCode::OlderReleaseServing => "older_release_serving",
            ReasonCode::ConfigurationFingerprintMismatch => "configuration_fingerprint_mismatch",
            ReasonCode::ConfigurationUnreadable => "configuration_unreadable",
        }
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one look at a route says against the release it should answer as:
/// the verdict of `fleetweft probe` and the `health probe` and `route
/// identity` checks of a proof, from this one function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RouteJudgement {
    /// The expected answer, identifying as the expected release.
    Pass,
    /// The expected answer, identifying as another release.
    WrongIdentity,
    /// The expected answer with no identity: not evidence.
    NoIdentity,
    /// The service answered, but not what the probe spec expects.
    WrongAnswer,
    /// The stamping proxy answered with an error status.
    Non2xx,
    /// Nothing answered.
    Unreachable,
}

impl RouteJudgement {
    /// The operator's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteJudgement::Pass => "pass",
            RouteJudgement::WrongIdentity => "wrong identity",
            RouteJudgement::NoIdentity => "no identity",
            RouteJudgement::WrongAnswer => "wrong answer",
            RouteJudgement::Non2xx => "error status",
            RouteJudgement::Unreachable => "unreachable",
        }
    }

    /// Only a pass proves the release serving.
    pub fn passed(self) -> bool {
        self == RouteJudgement::Pass
    }
}

/// Judge one observation of a route against `expected`, the release it
/// should answer as (SPEC §6: a 200 from the wrong release is not evidence).
pub fn judge_route(o: &RouteObservation, expected: Digest) -> RouteJudgement {
    match (o.verdict, o.identity) {
        (ProbeVerdict::Pass, Some(d)) if d == expected => RouteJudgement::Pass,
        (ProbeVerdict::Pass, Some(_)) => RouteJudgement::WrongIdentity,
        (ProbeVerdict::Pass, None) => RouteJudgement::NoIdentity,
        (ProbeVerdict::WrongAnswer, _) => RouteJudgement::WrongAnswer,
        (ProbeVerdict::Unreachable, Some(_)) => RouteJudgement::Non2xx,
        (ProbeVerdict::Unreachable, None) => RouteJudgement::Unreachable,
    }
}

/// One evidence item: what was expected, what was observed, where and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceCheck {
    /// `"artifact digest"`, `"process"`, `"health probe"`, `"route identity"`,
    /// `"configuration"` or `"new release before rollback"`.
    pub item: String,
    /// What the intent requires, if it can be said.
    pub expected: Option<String>,
    /// What was read, if anything.
    pub observed: Option<String>,
    /// `Some(true)` matches, `Some(false)` contradicts, `None` could not read.
    pub ok: Option<bool>,
    /// Why it is not plainly ok.
    pub reason: Option<ReasonCode>,
    /// Where the observation came from.
    pub origin: Origin,
    /// When it was observed, in milliseconds since the Unix epoch by the
    /// controller's clock; `None` when the log does not say (evidence
    /// recorded with an op carries no time).
    pub observed_at_ms: Option<u64>,
}

/// The proof for one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeProof {
    /// The node's name.
    pub node: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The verdict's main reason; `None` when verified.
    pub reason: Option<ReasonCode>,
    /// Hex digest of the intended release, if any rollout includes the node.
    pub intended_release: Option<String>,
    /// The intended op, like `"op3"`.
    pub op: Option<String>,
    /// Read back now, or taken from what was recorded.
    pub mode: ProofMode,
    /// The evidence items.
    pub checks: Vec<EvidenceCheck>,
    /// The node's recorded observation contradicts its confirmed release.
    pub drifted: bool,
    /// One line for humans.
    pub summary: String,
}

/// The proof for one rollout: the worst of its nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutProof {
    /// The rollout, like `"r0"`.
    pub rollout: String,
    /// The worst node verdict (see [`Verdict::rank`]).
    pub verdict: Verdict,
    /// Every node of the plan, canary first.
    pub nodes: Vec<NodeProof>,
}

/// The proof for `node` judged on `fresh`, evidence read back now.
pub fn live_node_proof(
    state: &ControllerState,
    node: NodeId,
    name: &str,
    fresh: &Fresh,
) -> NodeProof {
    let view = View::live(fresh);
    match state.intended_rollout(node) {
        Some(r) => proof_in(state, r, node, name, ProofMode::Live, Some(view)),
        None => not_in_rollout(state, node, name, ProofMode::Live),
    }
}

/// The proof for `node` judged on recorded evidence (`--cached`): its latest
/// recorded observation when newer than the op's settlement, else the op's.
pub fn recorded_node_proof(state: &ControllerState, node: NodeId, name: &str) -> NodeProof {
    match state.intended_rollout(node) {
        Some(r) => proof_in(state, r, node, name, ProofMode::Recorded, None),
        None => not_in_rollout(state, node, name, ProofMode::Recorded),
    }
}

/// The proof for every node of `rollout`, each judged against this rollout's
/// release, on fresh evidence where `fresh` has it for the node and on what
/// was recorded otherwise. `None` if the rollout does not exist.
pub fn rollout_proof(
    state: &ControllerState,
    rollout: RolloutId,
    names: &dyn Fn(NodeId) -> String,
    fresh: &dyn Fn(NodeId) -> Option<Fresh>,
) -> Option<RolloutProof> {
    let r = state.rollout(rollout)?;
    let nodes: Vec<NodeProof> = r
        .plan
        .nodes()
        .map(|n| match fresh(n) {
            Some(f) => proof_in(
                state,
                r,
                n,
                &names(n),
                ProofMode::Live,
                Some(View::live(&f)),
            ),
            None => proof_in(state, r, n, &names(n), ProofMode::Recorded, None),
        })
        .collect();
    let verdict = nodes
        .iter()
        .map(|p| p.verdict)
        .min_by_key(|v| v.rank())
        .unwrap_or(Verdict::Unverified);
    Some(RolloutProof {
        rollout: r.id.to_string(),
        verdict,
        nodes,
    })
}

fn not_in_rollout(state: &ControllerState, node: NodeId, name: &str, mode: ProofMode) -> NodeProof {
    NodeProof {
        node: name.to_string(),
        verdict: Verdict::Unverified,
        reason: Some(ReasonCode::NotInRollout),
        intended_release: None,
        op: None,
        mode,
        checks: Vec::new(),
        drifted: drifted(state, node),
        summary: format!("{name}: no rollout includes this node"),
    }
}

fn drifted(state: &ControllerState, node: NodeId) -> bool {
    state.nodes.get(&node).is_some_and(|n| n.drift().is_some())
}

/// The node's recorded observation, when it is the newest thing known of the
/// node (it is cleared when an op of the node settles).
fn node_observation(state: &ControllerState, node: NodeId) -> Option<&NodeObservation> {
    state
        .nodes
        .get(&node)
        .filter(|n| n.live_op.is_none())
        .and_then(|n| n.observed.as_ref())
}

fn proof_in(
    state: &ControllerState,
    r: &Rollout,
    node: NodeId,
    name: &str,
    mode: ProofMode,
    live: Option<View>,
) -> NodeProof {
    let intended = r.plan.release;
    let op = r
        .ops
        .iter()
        .rev()
        .filter_map(|id| state.op(*id))
        .find(|op| op.node == node);
    let confirmed = state.nodes.get(&node).and_then(|n| n.confirmed);
    let recorded = node_observation(state, node).map(View::observed);
    let (verdict, reason, checks, older) = match op {
        Some(op) => of_op(state, r, op, confirmed, live.or(recorded)),
        None => {
            let (verdict, reason, checks) =
                not_granted(state, r, node, confirmed, live.or(recorded));
            (verdict, reason, checks, None)
        }
    };
    let op_name = op.map(|o| o.id.to_string());
    let mut summary = summarize(name, verdict, reason, intended, op_name.as_deref(), &checks);
    // Which release serves instead, by digest and version (seed 003).
    if let Some(o) = older {
        summary.push_str(&format!(
            "; {} ({}) serves in its place",
            o.version, o.release
        ));
    }
    if let Some(why) = refused(op) {
        summary.push_str(&format!("; the agent refused the release: {why}"));
    }
    NodeProof {
        node: name.to_string(),
        verdict,
        reason,
        intended_release: Some(intended.to_hex()),
        op: op_name,
        mode,
        checks,
        drifted: drifted(state, node),
        summary,
    }
}

/// The verdict on `op`, the intended rollout `r`'s op of its node, judged
/// on `view` (else the op's own evidence); with the older release serving
/// in the intended one's place when that is the verdict's reason.
fn of_op(
    state: &ControllerState,
    r: &Rollout,
    op: &Op,
    confirmed: Option<Digest>,
    view: Option<View>,
) -> (
    Verdict,
    Option<ReasonCode>,
    Vec<EvidenceCheck>,
    Option<KnownRelease>,
) {
    let intended = r.plan.release;
    let view = view.or_else(|| View::of_op(op));
    let fingerprint = r.deploys.as_ref().map(|d| d.fingerprint);
    let mut checks = view
        .as_ref()
        .map_or_else(Vec::new, |v| v.checks(intended, fingerprint));
    let cause = rollback_cause(op, intended);
    checks.extend(cause.clone());
    let older = view.as_ref().and_then(|v| older_serving(state, r, op, v));
    let judged = Judged {
        view: view.as_ref(),
        checks: &checks,
        cause,
        older,
    };
    let (verdict, reason) = judge(op, intended, confirmed, judged);
    let older = older
        .filter(|_| reason == Some(ReasonCode::OlderReleaseServing))
        .cloned();
    (verdict, reason, checks, older)
}

/// The verdict on `node`, which the intended rollout `r` has not granted an
/// op yet: judged on what serves (`view`, else as last recorded of the
/// node's latest older op).
fn not_granted(
    state: &ControllerState,
    r: &Rollout,
    node: NodeId,
    confirmed: Option<Digest>,
    view: Option<View>,
) -> (Verdict, Option<ReasonCode>, Vec<EvidenceCheck>) {
    let intended = r.plan.release;
    let view = view.or_else(|| {
        state
            .ops
            .values()
            .rev()
            .find(|o| {
                o.node == node
                    && state
                        .rollout(o.rollout)
                        .is_some_and(|or| or.generation < r.generation)
            })
            .and_then(View::of_op)
    });
    let fingerprint = r.deploys.as_ref().map(|d| d.fingerprint);
    let checks = view
        .as_ref()
        .map_or_else(Vec::new, |v| v.checks(intended, fingerprint));
    let healthy = view
        .as_ref()
        .is_some_and(|v| v.obs.verdict == ProbeVerdict::Pass);
    let (verdict, reason) = if healthy && confirmed != Some(intended) {
        (Verdict::Stale, ReasonCode::SupersededOp)
    } else {
        (Verdict::Unverified, ReasonCode::OpNotGranted)
    };
    (verdict, Some(reason), checks)
}

/// Why the node never applied its op's release, in the agent's words
/// (SPEC §5, §8).
fn refused(op: Option<&Op>) -> Option<model::StageRefusal> {
    op?.evidence.iter().rev().find_map(|e| match e.source {
        EvidenceSource::Agent(ReportKind::Refused(why)) => Some(why),
        _ => None,
    })
}

/// The older release a live readback found serving in the intended one's
/// place, when the proof may call the node `stale` for it (issue #24 item
/// 1): the agent read it back behind the route (its bundle, or its signed
/// app as the app file that runs), the node had it before rollout `r`
/// ([`had_before`]), its answer passes its own probe spec, and the route
/// answers as the intended release (the stamping proxy over a swapped app
/// file) or as that release. An unknown digest, an altered app file that is
/// no release's, or a wrong answer of the older release is none of this.
fn older_serving<'v>(
    state: &ControllerState,
    r: &Rollout,
    op: &Op,
    view: &'v View,
) -> Option<&'v KnownRelease> {
    let older = view.older.as_ref()?;
    let intended = r.plan.release;
    let named = view.read_back()?.other_release(intended) == Some(older.release);
    let answers_as = view
        .obs
        .identity
        .is_some_and(|id| id == intended || id == older.release);
    (named
        && answers_as
        && older.answer == ProbeVerdict::Pass
        && had_before(state, r, op, older.release))
    .then_some(older)
}

/// Whether the node of `op` (the intended rollout `r`'s op) had `release`
/// before `r`: `op` was granted over it (its baseline), or an earlier
/// rollout granted the node an op of it or over it. The state keeps every
/// rollout; of an archived op only its release is known.
fn had_before(state: &ControllerState, r: &Rollout, op: &Op, release: Digest) -> bool {
    if release == r.plan.release {
        return false;
    }
    op.baseline == Some(release)
        || state
            .rollouts
            .iter()
            .filter(|x| x.generation < r.generation)
            .filter_map(|x| x.op_by_node.get(&op.node).map(|id| (x, *id)))
            .any(|(x, id)| {
                x.plan.release == release
                    || state.op(id).is_some_and(|o| o.baseline == Some(release))
            })
}

/// What [`judge`] weighs besides the op and the releases.
struct Judged<'a> {
    /// The evidence judged, if any.
    view: Option<&'a View>,
    /// Its checks (with the rollback cause, if any).
    checks: &'a [EvidenceCheck],
    /// Why the op was rolled back, when a failed observation caused it.
    cause: Option<EvidenceCheck>,
    /// An older release of the node serving in the intended one's place
    /// ([`older_serving`]).
    older: Option<&'a KnownRelease>,
}

fn judge(
    op: &Op,
    intended: Digest,
    confirmed: Option<Digest>,
    judged: Judged,
) -> (Verdict, Option<ReasonCode>) {
    use ReasonCode as R;
    let Judged {
        view,
        checks,
        cause,
        older,
    } = judged;
    let last = view.map(|v| v.obs);
    if op.is_unknown() {
        return (Verdict::Unverified, Some(R::OpUnknown));
    }
    if let Some(verdict) = by_outcome(op, (intended, confirmed), last, cause) {
        return verdict;
    }
    let Some(last) = last else {
        let reason = if op.occupies_slot() {
            R::OpNotSettled
        } else {
            R::NoEvidence
        };
        return (Verdict::Unverified, Some(reason));
    };
    // Seed 003's stale: what serves is a healthy workload of a release the
    // node had before, read back and answering as that release. Its checks
    // against the intent stay false; the verdict says what they add up to.
    if older.is_some() && settled_and_not_looping(op, checks) {
        return (Verdict::Stale, Some(R::OlderReleaseServing));
    }
    let contradictions = || {
        checks
            .iter()
            .filter(|c| counts(c) && c.ok == Some(false) && !old_configuration(c))
    };
    if let Some(first) = contradictions().next() {
        let reason = contradictions()
            .find(|c| c.reason == Some(R::RouteIdentityMismatch))
            .unwrap_or(first)
            .reason;
        return (Verdict::Failed, reason);
    }
    if op.occupies_slot() {
        return (Verdict::Unverified, Some(R::OpNotSettled));
    }
    // The intended code serves, healthy, but its process runs with another
    // configuration: the old intent is what serves (rule 9).
    if checks.iter().any(old_configuration) {
        return (Verdict::Stale, Some(R::ConfigurationFingerprintMismatch));
    }
    if op.passed() {
        match checks.iter().find(|c| counts(c) && c.ok.is_none()) {
            Some(c) => return (Verdict::PartiallyVerified, c.reason),
            None if last.proves_serving(intended) => return (Verdict::Verified, None),
            None => {}
        }
    }
    (Verdict::Unverified, Some(R::NoEvidence))
}

/// Rules 4 and 5: the verdict an op's outcome decides whatever else was
/// read (`last`, the judged observation), if it decides one.
fn by_outcome(
    op: &Op,
    (intended, confirmed): (Digest, Option<Digest>),
    last: Option<RouteObservation>,
    cause: Option<EvidenceCheck>,
) -> Option<(Verdict, Option<ReasonCode>)> {
    use ReasonCode as R;
    let passed = last.is_some_and(|o| o.verdict == ProbeVerdict::Pass);
    match op.phase {
        OpPhase::Settled(Outcome::Resolved(Resolution::Abandon)) => {
            Some((Verdict::Unverified, Some(R::Abandoned)))
        }
        // The cause survives: what made the release roll back contradicts
        // the intent, whatever serves now.
        OpPhase::Settled(Outcome::RolledBack) if cause.is_some() => {
            Some((Verdict::Failed, cause.and_then(|c| c.reason)))
        }
        // Stale only when what is seen is the release the node's record
        // says serves: a route answering as anything else there (a
        // stand-in answering as the intended release over the baseline's
        // disk) is a contradiction, judged by the caller.
        OpPhase::Settled(
            o @ (Outcome::RolledBack
            | Outcome::NotApplied
            | Outcome::Resolved(Resolution::ConfirmBaseline)),
        ) if confirmed != Some(intended)
            && passed
            && confirmed
                .zip(last)
                .is_some_and(|(c, o)| observation_confirms(&o, c)) =>
        {
            let reason = if o == Outcome::NotApplied {
                R::NotApplied
            } else {
                R::RolledBack
            };
            Some((Verdict::Stale, Some(reason)))
        }
        _ => None,
    }
}

/// Rule 7's last conditions: the op no longer holds its slot (while it
/// does, its own evidence settles it) and no check found a restart loop (a
/// looping process is no healthy workload).
fn settled_and_not_looping(op: &Op, checks: &[EvidenceCheck]) -> bool {
    !op.occupies_slot()
        && !checks
            .iter()
            .any(|c| c.ok == Some(false) && c.reason == Some(ReasonCode::RestartLoop))
}

/// Whether a check found the serving process started with another
/// configuration than the intended one: stale, not failed, when it is the
/// only contradiction.
fn old_configuration(check: &EvidenceCheck) -> bool {
    check.ok == Some(false) && check.reason == Some(ReasonCode::ConfigurationFingerprintMismatch)
}

/// Whether a check takes part in the verdict: all do except a dead-looking
/// process while the route answers (S11: a process's looks are not evidence).
fn counts(check: &EvidenceCheck) -> bool {
    check.reason != Some(ReasonCode::ProcessUnhealthy)
}

/// Why the intended release was rolled back: the observation the op kept as
/// the cause of its restore, as a failed check. `None` for an op that was
/// not rolled back, or whose restore had no failed observation behind it
/// (an operator's roll back of a passing release).
fn rollback_cause(op: &Op, intended: Digest) -> Option<EvidenceCheck> {
    use ReasonCode as R;
    if op.phase != OpPhase::Settled(Outcome::RolledBack) {
        return None;
    }
    let item = op.cause?;
    let failed = item.observation;
    let looping = failed
        .process_restarts
        .is_some_and(|n| n > model::evidence::PROCESS_RESTARTS_MAX)
        || (!failed.process_healthy && failed.verdict == ProbeVerdict::Unreachable);
    let reason = match (looping, judge_route(&failed, intended)) {
        (true, _) => R::RestartLoop,
        (false, RouteJudgement::WrongAnswer) => R::ProbeWrongAnswer,
        (false, RouteJudgement::Non2xx) => R::ProbeNon2xx,
        (false, RouteJudgement::Unreachable) => R::ProbeUnreachable,
        (false, RouteJudgement::NoIdentity) => R::DigestUnreadable,
        (false, RouteJudgement::WrongIdentity | RouteJudgement::Pass) => R::RouteIdentityMismatch,
    };
    Some(EvidenceCheck {
        item: "new release before rollback".into(),
        expected: Some(format!("pass from {}", intended.to_hex())),
        observed: Some(observation_str(&failed)),
        ok: Some(false),
        reason: Some(reason),
        origin: Origin::of_evidence(item.source),
        observed_at_ms: None,
    })
}

/// A route observation in words, like `pass from 27ec…` or `unreachable, no
/// identity, process down`.
pub fn observation_str(o: &RouteObservation) -> String {
    let mut s = o.to_string();
    if !o.process_healthy {
        s.push_str(", process down");
    }
    s
}

/// What one observation saw of the process, like `running, up 12 s, 0
/// restarts` (the CLI's `probe`).
pub fn observation_process_text(o: &RouteObservation) -> String {
    let numbers = (o.process_uptime_ms.is_some() || o.process_restarts.is_some()).then_some(*o);
    view::process_text(o.process_healthy, numbers, false)
}

fn summarize(
    name: &str,
    verdict: Verdict,
    reason: Option<ReasonCode>,
    intended: Digest,
    op: Option<&str>,
    checks: &[EvidenceCheck],
) -> String {
    let mut s = format!("{name}: {verdict} for {intended}");
    if let Some(op) = op {
        s.push_str(&format!(" ({op})"));
    }
    if let Some(reason) = reason {
        s.push_str(&format!(", {reason}"));
    }
    let unreadable: Vec<&str> = checks
        .iter()
        .filter(|c| c.ok.is_none())
        .map(|c| c.item.as_str())
        .collect();
    if !unreadable.is_empty() {
        s.push_str(&format!("; could not read: {}", unreadable.join(", ")));
    }
    s
}

impl Origin {
    fn of_evidence(source: EvidenceSource) -> Origin {
        match source {
            EvidenceSource::Agent(_) => Origin::AgentReport,
            EvidenceSource::ControllerProbe => Origin::ControllerProbe,
            EvidenceSource::Operator => Origin::Operator,
        }
    }

    /// Who made a recorded node observation, in the proof's words.
    pub fn of_observation(source: ObservationSource) -> Origin {
        match source {
            ObservationSource::ReadBack => Origin::AgentReadBack,
            ObservationSource::ControllerProbe => Origin::ControllerProbe,
            ObservationSource::Operator => Origin::Operator,
        }
    }
}

#[cfg(test)]
mod tests;
