//! Inputs to the controller core. Time is an input too: the runtime turns an
//! op's deadline into [`Input::Timeout`]; the core never reads a clock.

use super::state::{ObservationSource, Resolution};
use crate::evidence::RouteObservation;
use crate::ids::{Digest, NodeId, OpId, RolloutId};
use crate::msg::ToController;
use crate::plan::{Plan, Policy};
use serde::{Deserialize, Serialize};

/// Everything that can happen to the controller.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Input {
    /// Operator: start a rollout (supersedes the active one, if any).
    StartRollout { plan: Plan },
    /// Operator: start a rollout in waves and with failure budgets, of a
    /// release that runs on `arches` (the runtime reads them from the
    /// release's manifest; a plan selecting a node outside them is
    /// refused, `step::check_arches`).
    StartStaged {
        plan: Plan,
        policy: Policy,
        arches: crate::platform::ReleaseArches,
        /// The configuration the plan's release (then a deployment digest)
        /// carries (issue #24 item 1): must be the app's latest recorded
        /// revision (`step::check_deploys`).
        deploys: Option<crate::config::Deploys>,
    },
    /// Operator: record a configuration revision of an app (issue #24
    /// item 1); the runtime seals secrets and fingerprints it first.
    SetConfig {
        revision: crate::config::ConfigRevision,
    },
    /// Operator: stop new grants.
    Pause { rollout: RolloutId },
    /// Operator: allow grants again.
    Resume { rollout: RolloutId },
    /// Operator: pass the approval gate after the canary.
    Approve { rollout: RolloutId },
    /// Operator: settle an op by hand. Must carry an observation.
    Resolve {
        op: OpId,
        observation: RouteObservation,
        resolution: Resolution,
    },
    /// Operator: take ownership of an unresolved op, promising to look at it
    /// again by `review_by`. Recorded durably; settles nothing.
    Claim {
        op: OpId,
        owner: String,
        review_by: String,
    },
    /// A message from an agent; `node` comes from its certificate.
    FromAgent { node: NodeId, msg: ToController },
    /// The controller probed `node`'s public route.
    RouteProbed {
        node: NodeId,
        observation: RouteObservation,
    },
    /// `op`'s deadline passed without settling evidence.
    Timeout { op: OpId },
    /// An operator orders an op rolled back: its node is told to put the
    /// baseline back, and the op settles `RolledBack` only when a serving
    /// probe proves the baseline (S9). Allowed while the op holds its slot
    /// with a stored Commit and a baseline; the rollout is paused.
    RollBack { op: OpId },
    /// A fresh observation of `node` made at the controller's wall-clock
    /// `now_ms` (a readback, a controller probe or an operator's look). On a
    /// node with a live op it is evidence for that op, as a controller probe
    /// is; otherwise it is recorded as the node's latest observation, at
    /// most one per [`super::OBSERVATION_INTERVAL_MIN_MS`].
    Observe {
        node: NodeId,
        observation: RouteObservation,
        source: ObservationSource,
        now_ms: u64,
    },
    /// The runtime saw two live connections present `node`'s identity
    /// (connections replacing each other within its window): quarantine
    /// the node. A node already quarantined records nothing more.
    IdentityConflict {
        node: NodeId,
        first_peer: String,
        second_peer: String,
    },
    /// Operator: release a quarantined node (after revoking the copied
    /// certificate, or finding the conflict harmless).
    ReleaseNode { node: NodeId },
    /// Operator: revoke the certificate with this SHA-256 fingerprint,
    /// presented by or issued for `node`.
    RevokeCert { node: NodeId, fingerprint: Digest },
    /// Operator: enroll a node under a fresh name; it takes the next
    /// [`NodeId`] (enrollment order).
    EnrollNode {
        name: String,
        labels: super::roster::Labels,
        public: String,
    },
    /// Operator: set the labels in `set` and drop the keys in `remove`
    /// (drops first) on an enrolled, not retired node.
    LabelNode {
        name: String,
        set: super::roster::Labels,
        remove: std::collections::BTreeSet<String>,
    },
    /// Operator: retire a node; refused while it holds a live op.
    RetireNode { name: String },
    /// An operator's input, with who makes it (issue #28 item 2): `step`
    /// checks the actor and its role ([`super::roles::required_role`])
    /// and records `Acted` ahead of the input's events. Appended last.
    Acting {
        actor: super::operators::Actor,
        input: Box<Input>,
    },
    /// Admin: record an operator with its role and the SHA-256 of the
    /// credential the runtime issued it. The first operator recorded comes
    /// without an actor and must be an admin (the bootstrap). Appended last.
    AddOperator {
        name: String,
        role: super::operators::Role,
        credential: Digest,
    },
    /// An operator's credential replaced (by the operator itself, or an
    /// admin): the old one is refused from then on. Appended last.
    RotateCredential { name: String, credential: Digest },
    /// Admin: revoke an operator: its credential is refused from then on;
    /// the name is never reused. Appended last.
    RevokeOperator { name: String },
}
