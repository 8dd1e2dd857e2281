//! Controller events: the only way controller state changes. Each is appended
//! to the durable log before it is applied, and nothing it reveals leaves the
//! controller before that (S7).

use super::state::{ObservationSource, Outcome, PauseReason, RolloutStatus, UnknownReason};
use super::words;
use crate::evidence::RouteObservation;
use crate::ids::{Digest, Generation, NodeId, OpId, RolloutId};
use crate::msg::{Decision, ReportKind};
use crate::plan::{Plan, Policy};
use crate::platform::Platform;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Something that happened to the controller's state.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Event {
    /// A rollout started and the fleet generation moved to `generation`.
    RolloutStarted {
        rollout: RolloutId,
        plan: Plan,
        generation: Generation,
    },
    /// A newer rollout replaced this one; its ops keep their slots.
    RolloutSuperseded {
        rollout: RolloutId,
        by: RolloutId,
    },
    RolloutPaused {
        rollout: RolloutId,
        reason: PauseReason,
    },
    RolloutResumed {
        rollout: RolloutId,
    },
    /// An operator passed the approval gate after the canary.
    RolloutApproved {
        rollout: RolloutId,
    },
    RolloutCompleted {
        rollout: RolloutId,
    },
    /// A slot was granted: `node` moves to `release` under `generation`.
    OpGranted {
        op: OpId,
        rollout: RolloutId,
        node: NodeId,
        release: Digest,
        generation: Generation,
        baseline: Option<Digest>,
        is_canary: bool,
    },
    /// The first answer to a commit request, stored before it is sent.
    CommitDecided {
        op: OpId,
        decision: Decision,
    },
    /// A retry of the commit request was answered with the stored decision.
    CommitReplayed {
        op: OpId,
        decision: Decision,
    },
    /// Evidence: an agent's report of a probe of its public route.
    ReportRecorded {
        op: OpId,
        kind: ReportKind,
        observation: RouteObservation,
    },
    /// Evidence: the controller probed the node's public route itself.
    ProbeRecorded {
        op: OpId,
        observation: RouteObservation,
    },
    /// The baseline was asked back after a failed or wrong probe.
    RestoreRequested {
        op: OpId,
    },
    /// The op's outcome cannot be told from the evidence; it keeps its slot.
    OpUnknown {
        op: OpId,
        reason: UnknownReason,
    },
    /// Evidence settled the op; its slot is free.
    OpSettled {
        op: OpId,
        outcome: Outcome,
    },
    /// An operator resolved an op with an observation (evidence) of their own.
    OperatorObserved {
        op: OpId,
        observation: RouteObservation,
    },
    /// An operator took ownership of an unsettled op. Changes no rule.
    OpClaimed {
        op: OpId,
        owner: String,
        review_by: String,
    },
    /// An agent (re)connected and said what it serves. A claim only.
    NodeHello {
        node: NodeId,
        serving: Option<Digest>,
        generation: Generation,
    },
    /// A report or commit request about the node's own op that is already
    /// settled: kept for the record, changes nothing (S8).
    LateReportIgnored {
        node: NodeId,
        op: OpId,
    },
    /// An agent refused a command of an older generation (S8).
    StaleCommandRejected {
        node: NodeId,
        op: OpId,
        generation: Generation,
        accepted: Generation,
    },
    /// A node spoke about an op that is not its own (`owner` is the node the
    /// op belongs to) or that does not exist (`owner` is `None`): kept for
    /// the audit trail, answered with nothing, changes nothing (SPEC §8: a
    /// node cannot speak for another). Appended last so older logs decode.
    ForeignMessageIgnored {
        node: NodeId,
        op: OpId,
        owner: Option<NodeId>,
    },
    /// An operator ordered the op rolled back (the `RestoreRequested` that
    /// follows in the same batch does the work): kept so the log says who
    /// asked. Changes nothing by itself. Appended last so older logs decode.
    RollBackOrdered {
        op: OpId,
    },
    /// A fresh observation of a node with no live op (a readback, a
    /// controller probe, an operator's look), at the controller's wall-clock
    /// `at_ms`. Changes no op: it is the node's latest observation, which
    /// may show the node drifted from its confirmed release. Appended last
    /// so older logs decode.
    NodeObserved {
        node: NodeId,
        observation: RouteObservation,
        source: ObservationSource,
        at_ms: u64,
    },
    /// Nothing more can happen in the rollout, yet not every node of its
    /// plan passed (see [`super::RolloutStatus::Ended`]). Appended last so
    /// older encodings decode.
    RolloutEnded {
        rollout: RolloutId,
        /// How many nodes of the plan have an op that did not pass.
        not_passed: u32,
    },
    /// Two live connections presented `node`'s identity, from these two
    /// peer addresses: nothing is sent to the node and nothing it says is
    /// recorded until an operator releases it; its op keeps its slot.
    /// Appended last so older logs decode.
    NodeQuarantined {
        node: NodeId,
        first_peer: String,
        second_peer: String,
    },
    /// An operator released a quarantined node. Appended last.
    NodeReleased {
        node: NodeId,
    },
    /// An operator revoked the certificate with this SHA-256 fingerprint,
    /// presented by (or issued for) `node`: the handshake refuses it from
    /// now on, across restarts. Appended last.
    CertRevoked {
        node: NodeId,
        fingerprint: Digest,
    },
    /// A node joined the fleet under `name`; `node` is its enrollment
    /// order. Appended last so older logs decode.
    NodeEnrolled {
        node: NodeId,
        name: String,
        labels: super::roster::Labels,
        public: String,
    },
    /// A node's labels are now `labels` (the whole set). Appended last.
    NodeLabeled {
        node: NodeId,
        labels: super::roster::Labels,
    },
    /// A node left the fleet: nothing is granted to it and its agent is
    /// refused; its id and name are never reused. Appended last.
    NodeRetired {
        node: NodeId,
    },
    /// The rollout's waves and failure budgets, recorded right after its
    /// `RolloutStarted` in the same batch when they are not the default.
    /// Appended last.
    RolloutPolicySet {
        rollout: RolloutId,
        policy: Policy,
    },
    /// More followers of the plan just started, in plan order after the
    /// ones recorded before: a plan over
    /// [`crate::plan::FOLLOWERS_PER_EVENT_MAX`] followers is recorded in
    /// several entries of the same batch, right after its `RolloutStarted`
    /// and before its policy or any grant, so one entry stays bounded.
    /// Appended last.
    RolloutFollowersAdded {
        rollout: RolloutId,
        followers: Vec<NodeId>,
    },
    /// A report or commit request about an op the state forgot (settled in
    /// a rollout older than the last
    /// [`super::state::ROLLOUTS_REMEMBERED`] archived; its node was granted
    /// newer work since). Its owner and decision live only in the log now,
    /// so it is acknowledged (the agent stops re-sending a report) and never
    /// decided again (S6). Changes nothing. Appended last.
    ForgottenOpIgnored {
        node: NodeId,
        op: OpId,
    },
    /// An agent said what it runs on (issue #24 item 5): recorded only when
    /// it differs from what the node's record holds, so a reconnection
    /// adds nothing. The node's `arch` label; a plan over a node whose
    /// architecture a release has no tree for is refused. Appended last.
    NodePlatform {
        node: NodeId,
        platform: Platform,
    },
    /// The architectures the rollout's release has trees for (issue #24
    /// item 5), recorded right after its `RolloutStarted` (and policy) in
    /// the same batch when the release is not architecture-independent:
    /// no op of the rollout is granted to a node the set does not admit.
    /// Appended last.
    RolloutArchesSet {
        rollout: RolloutId,
        arches: crate::platform::ArchSet,
    },
    /// A configuration revision of an app (issue #24 item 1): its values
    /// (secrets sealed), files and fingerprint. The app's next revision;
    /// rollouts started after it deploy it. Appended last.
    ConfigSet {
        revision: crate::config::ConfigRevision,
    },
    /// What the rollout's deployment carries besides the code (issue #24
    /// item 1), recorded right after its `RolloutStarted` (policy and
    /// arches) in the same batch when the app has a configuration: the
    /// plan's release is the deployment's digest. Appended last.
    RolloutConfigured {
        rollout: RolloutId,
        deploys: crate::config::Deploys,
    },
    /// Who made the input whose events follow in this batch (issue #28
    /// item 2): the first event of every batch an operator's input led to.
    /// Changes no state. Appended last.
    Acted {
        by: super::operators::ActedBy,
    },
    /// An operator recorded, with its role and the SHA-256 of its
    /// credential. Appended last.
    OperatorAdded {
        name: String,
        role: super::operators::Role,
        credential: Digest,
    },
    /// An operator's credential replaced by the one with this SHA-256.
    /// Appended last.
    CredentialRotated {
        name: String,
        credential: Digest,
    },
    /// An operator revoked: its credential is refused from here on.
    /// Appended last.
    OperatorRevoked {
        name: String,
    },
}

/// The event text (`fleetweft log show`, the API's `text`, the proofs and
/// the counterexample gallery): one sentence per event, every enum in it
/// worded by [`crate::words`], like the API and the invariants' messages.
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::RolloutStarted { .. }
            | Event::RolloutSuperseded { .. }
            | Event::RolloutPaused { .. }
            | Event::RolloutResumed { .. }
            | Event::RolloutApproved { .. }
            | Event::RolloutCompleted { .. }
            | Event::RolloutEnded { .. }
            | Event::RolloutPolicySet { .. }
            | Event::RolloutFollowersAdded { .. }
            | Event::RolloutArchesSet { .. }
            | Event::RolloutConfigured { .. } => rollout_text(self, f),
            Event::ConfigSet { revision } => config_text(f, revision),
            Event::OpGranted { .. }
            | Event::CommitDecided { .. }
            | Event::CommitReplayed { .. }
            | Event::ReportRecorded { .. }
            | Event::ProbeRecorded { .. }
            | Event::RestoreRequested { .. }
            | Event::OpUnknown { .. }
            | Event::OpSettled { .. }
            | Event::OperatorObserved { .. }
            | Event::OpClaimed { .. }
            | Event::RollBackOrdered { .. } => op_text(self, f),
            Event::NodeHello { .. }
            | Event::LateReportIgnored { .. }
            | Event::StaleCommandRejected { .. }
            | Event::ForeignMessageIgnored { .. }
            | Event::ForgottenOpIgnored { .. }
            | Event::NodeObserved { .. } => node_message_text(self, f),
            Event::NodeQuarantined { .. }
            | Event::NodeReleased { .. }
            | Event::CertRevoked { .. }
            | Event::NodeEnrolled { .. }
            | Event::NodeLabeled { .. }
            | Event::NodeRetired { .. }
            | Event::NodePlatform { .. } => roster_text(self, f),
            Event::Acted { .. }
            | Event::OperatorAdded { .. }
            | Event::CredentialRotated { .. }
            | Event::OperatorRevoked { .. } => operator_text(self, f),
        }
    }
}

/// The text of a rollout's event.
fn rollout_text(event: &Event, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match event {
        Event::RolloutStarted {
            rollout,
            plan,
            generation,
        } => started_text(f, *rollout, plan, *generation),
        Event::RolloutSuperseded { rollout, by } => {
            let word = words::rollout_status(RolloutStatus::Superseded);
            write!(f, "rollout {rollout} {word} by {by}")
        }
        Event::RolloutPaused { rollout, reason } => {
            write!(f, "rollout {rollout} {}", words::paused(*reason))
        }
        Event::RolloutResumed { rollout } => write!(f, "rollout {rollout} resumed"),
        Event::RolloutApproved { rollout } => {
            write!(f, "rollout {rollout} approved after canary")
        }
        Event::RolloutCompleted { rollout } => {
            let word = words::rollout_status(RolloutStatus::Completed);
            write!(f, "rollout {rollout} {word}")
        }
        Event::RolloutEnded {
            rollout,
            not_passed,
        } => write!(
            f,
            "rollout {rollout} {}: nothing more can happen, {not_passed} node(s) did not pass",
            words::rollout_status(RolloutStatus::Ended)
        ),
        Event::RolloutPolicySet { rollout, policy } => policy_text(f, *rollout, policy),
        Event::RolloutFollowersAdded { rollout, followers } => {
            write!(
                f,
                "rollout {rollout}'s plan goes on: {}",
                some_names(followers)
            )
        }
        Event::RolloutArchesSet { rollout, arches } => {
            write!(f, "rollout {rollout}'s release has trees for {arches} only")
        }
        Event::RolloutConfigured { rollout, deploys } => write!(
            f,
            "rollout {rollout} deploys code {} with configuration {} revision {} ({})",
            deploys.code, deploys.app, deploys.revision, deploys.fingerprint
        ),
        other => unreachable!("not a rollout's event: {other:?}"),
    }
}

/// `configuration hello revision 2 (ab12…): 3 key(s), 1 secret(s), 1
/// file(s)`: never a value (a secret's is sealed; a plain one may be long).
fn config_text(
    f: &mut fmt::Formatter<'_>,
    revision: &crate::config::ConfigRevision,
) -> fmt::Result {
    let secrets = revision
        .env
        .iter()
        .filter(|(_, v)| matches!(v, crate::config::LoggedValue::Sealed { .. }))
        .count();
    write!(
        f,
        "configuration {} revision {} ({}): {} key(s), {secrets} secret(s), {} file(s)",
        revision.app,
        revision.revision,
        revision.fingerprint,
        revision.env.len(),
        revision.files.len()
    )
}

/// Followers a rollout's start (or a part of its plan) names in its
/// text; the rest are counted. The text is a log line
/// and a line of the event stream: at 100,000 nodes the whole plan was one
/// line of 1.2 MB, over what log collectors take in a line (journald's
/// default is 48 KiB). The plan is whole in the event and on
/// `GET /api/rollouts/{id}`.
pub const FOLLOWERS_SHOWN_MAX: usize = 8;

/// `rollout r0 starts: v2 on canary node0 then node1, slots 1, g1`; past
/// [`FOLLOWERS_SHOWN_MAX`] followers, the first ones and `and 92 more`.
fn started_text(
    f: &mut fmt::Formatter<'_>,
    rollout: RolloutId,
    plan: &Plan,
    generation: Generation,
) -> fmt::Result {
    write!(
        f,
        "rollout {rollout} starts: {} on canary {}",
        plan.release, plan.canary
    )?;
    if !plan.followers.is_empty() {
        write!(f, " then {}", some_names(&plan.followers))?;
    }
    write!(f, ", slots {}, {generation}", plan.slots_max)?;
    if plan.approval_after_canary {
        write!(f, ", approval after canary")?;
    }
    Ok(())
}

/// `rollout r0: 2 waves, at most 1 failed, pause at 1 unknown`.
fn policy_text(f: &mut fmt::Formatter<'_>, rollout: RolloutId, policy: &Policy) -> fmt::Result {
    write!(f, "rollout {rollout}: {} waves", policy.waves())?;
    if let Some(m) = policy.max_failed {
        write!(f, ", at most {m} failed")?;
    }
    if let Some(m) = policy.max_unknown {
        write!(f, ", pause at {m} unknown")?;
    }
    Ok(())
}

/// The text of an op's event.
fn op_text(event: &Event, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match event {
        Event::OpGranted {
            op,
            rollout,
            node,
            release,
            generation,
            ..
        } => write!(
            f,
            "grant {op} ({rollout}): {node} -> {release}, {generation}"
        ),
        Event::CommitDecided { op, decision } => {
            write!(
                f,
                "decide {op}: {} (stored)",
                crate::words::decision(*decision)
            )
        }
        Event::CommitReplayed { op, decision } => write!(
            f,
            "replay stored decision for {op}: {}",
            crate::words::decision(*decision)
        ),
        Event::ReportRecorded {
            op,
            kind,
            observation,
        } => write!(f, "record report for {op} ({kind}): {observation}"),
        Event::ProbeRecorded { op, observation } => {
            write!(f, "record controller probe for {op}: {observation}")
        }
        Event::RestoreRequested { op } => write!(f, "request restore of baseline for {op}"),
        Event::OpUnknown { op, reason } => write!(
            f,
            "{op} is UNKNOWN ({}), slot held",
            words::unknown_reason(*reason)
        ),
        Event::OpSettled { op, outcome } => {
            write!(f, "{op} settled: {}, slot freed", words::outcome(*outcome))
        }
        Event::OperatorObserved { op, observation } => {
            write!(f, "operator observation for {op}: {observation}")
        }
        Event::OpClaimed {
            op,
            owner,
            review_by,
        } => write!(f, "{op} claimed by {owner}, review by {review_by}"),
        Event::RollBackOrdered { op } => write!(f, "operator orders {op} rolled back"),
        other => unreachable!("not an op's event: {other:?}"),
    }
}

/// The text of what a node said or what was seen of it.
fn node_message_text(event: &Event, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match event {
        Event::NodeHello {
            node,
            serving,
            generation,
        } => write!(
            f,
            "{node} connected, serving {}, accepted {generation}",
            crate::words::release(*serving)
        ),
        Event::LateReportIgnored { node, op } => {
            write!(f, "late report from {node} for {op} ignored")
        }
        Event::StaleCommandRejected {
            node,
            op,
            generation,
            accepted,
        } => write!(
            f,
            "{node} rejected a command for {op} at {generation} (accepted {accepted})"
        ),
        Event::ForeignMessageIgnored { node, op, owner } => foreign_text(f, *node, *op, *owner),
        Event::ForgottenOpIgnored { node, op } => write!(
            f,
            "{node} spoke about {op}, settled long ago and forgotten by the state: acknowledged, ignored"
        ),
        Event::NodeObserved {
            node,
            observation,
            source,
            at_ms,
        } => write!(
            f,
            "{node} observed ({}, at {at_ms} ms): {observation}",
            words::observation_source(*source)
        ),
        other => unreachable!("not a node's message: {other:?}"),
    }
}

/// A node spoke about an op not its own (`owner`) or about no op at all.
fn foreign_text(
    f: &mut fmt::Formatter<'_>,
    node: NodeId,
    op: OpId,
    owner: Option<NodeId>,
) -> fmt::Result {
    match owner {
        Some(owner) => write!(
            f,
            "{node} spoke about {owner}'s op {op}: ignored (a node cannot speak for another)"
        ),
        None => write!(f, "{node} spoke about an unknown op {op}: ignored"),
    }
}

/// The text of a change to the roster (who is in the fleet, and how).
fn roster_text(event: &Event, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match event {
        Event::NodeQuarantined {
            node,
            first_peer,
            second_peer,
        } => write!(
            f,
            "{node} QUARANTINED: identity conflict, two live connections from {first_peer} and {second_peer}; nothing is sent to it until an operator releases it"
        ),
        Event::NodeReleased { node } => {
            write!(f, "{node} released from quarantine by an operator")
        }
        Event::CertRevoked { node, fingerprint } => write!(
            f,
            "certificate {} of {node} revoked",
            fingerprint.to_hex()
        ),
        Event::NodeEnrolled {
            node,
            name,
            labels,
            public,
        } => write!(
            f,
            "{node} enrolled as {name:?}, labels [{}], public route {public}",
            label_text(labels)
        ),
        Event::NodeLabeled { node, labels } => {
            write!(f, "{node} labels now [{}]", label_text(labels))
        }
        Event::NodeRetired { node } => {
            write!(f, "{node} retired: nothing more is granted to it")
        }
        Event::NodePlatform { node, platform } => {
            write!(f, "{node} runs on {platform}")
        }
        other => unreachable!("not a roster event: {other:?}"),
    }
}

/// `node1, node2`.
fn names(nodes: &[NodeId]) -> String {
    let names: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
    names.join(", ")
}

/// The first [`FOLLOWERS_SHOWN_MAX`] of `nodes`, then how many more.
fn some_names(nodes: &[NodeId]) -> String {
    let shown = nodes.len().min(FOLLOWERS_SHOWN_MAX);
    let more = nodes.len() - shown;
    let first = names(&nodes[..shown]);
    if more == 0 {
        first
    } else {
        format!("{first} and {more} more")
    }
}

/// `k=v,k2=v2`, in key order.
fn label_text(labels: &super::roster::Labels) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

/// The text of an operator's event. A credential shows as the first 8
/// bytes of its digest: enough to tell two apart, never the secret.
fn operator_text(event: &Event, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let short = |d: &Digest| -> String { d.0[..8].iter().map(|b| format!("{b:02x}")).collect() };
    match event {
        Event::Acted { by } => write!(f, "by {by}:"),
        Event::OperatorAdded {
            name,
            role,
            credential,
        } => write!(
            f,
            "operator {name} added as {}, credential sha256 {}…",
            words::role(*role),
            short(credential)
        ),
        Event::CredentialRotated { name, credential } => write!(
            f,
            "operator {name}'s credential rotated, now sha256 {}…",
            short(credential)
        ),
        Event::OperatorRevoked { name } => {
            write!(f, "operator {name} revoked: its credential is refused")
        }
        _ => unreachable!("operator_text is called for operator events only"),
    }
}
