//! What the checker explores: the plan's shape, which faults the environment
//! may inject and how many, what the operator may do, and which mutant (if
//! any) replaces a real rule.

use crate::mutants::Mutant;
use model::agent::MigrationKind;
use std::fmt;

/// A kind of fault the environment may inject. Each injection spends one unit
/// of the shared budget `max_faults`, which keeps the state space finite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// Drop a message in flight.
    Loss,
    /// Deliver a message and keep a copy in flight.
    Dup,
    /// Cut a node off (both directions) until it heals.
    Partition,
    /// SIGKILL an agent and start it again: journal survives, connections and
    /// the app process do not (its supervisor restarts the app).
    AgentCrash,
    /// SIGKILL the controller and start it again: only durable events survive,
    /// every connection drops and agents reconnect.
    ControllerCrash,
    /// A switched release answers wrongly while its process looks healthy.
    WrongAnswer,
    /// A restored baseline's process dies right after the restore.
    AppCrash,
    /// After settlement (seed 003): a healthy old release is swapped in
    /// behind the agent. The route's stamping proxy still identifies as the
    /// agent's release, but the answer is the old release's, and the agent's
    /// readback finds the app file that runs altered.
    SwapOld,
    /// After settlement (seed 003): the route answers as another release. A
    /// stand-in behind the public route gives the expected answer with
    /// another release's identity; the agent's own install is untouched.
    ForeignRoute,
    /// An agent's staging attempt fails: transient (the controller has no
    /// such bundle), permanent (the bundle fails verification) or of a
    /// class the agent cannot tell. With `agent-crash` it drives every row
    /// of the recovery table (SPEC §5, S14); not in the default set.
    StageError,
    /// An op's deadline fires early, while an answer to or from its node is
    /// still on its way (a slow link, a clock that jumps). Deadlines that
    /// fire when due or late (after the op settled: the runtime cancels
    /// that timer, but a late one must change nothing) are not faults and
    /// cost nothing; see
    /// `FleetModel::enabled_deadlines`.
    EarlyTimeout,
    /// (issue #14) A standby takes over from the durable log while the old
    /// leader lives on, deposed: messages it sent are still in flight, and
    /// agents' messages may still reach it. Its next append is fenced (the
    /// etcd transaction compares the leader key with its lease), so it
    /// releases nothing and stops acting. Not in the default set.
    ControllerFailover,
    /// (issue #26) The log as a restart reads it: the controller may write
    /// a snapshot of its durable state between batches (at most
    /// [`crate::durable_log::SNAPSHOTS_MAX`] along a path, free), archiving
    /// may delete the entries the newest verified snapshot covers (free),
    /// and a crash may tear a snapshot write (the fault: it spends a unit
    /// of the budget, and the controller restarts). Every restart rebuilds
    /// its state from the newest snapshot that verifies and the events
    /// after it (D1). Not in the default set.
    Snapshot,
    /// (issue #22 item 2) A second agent presents a node's certificate:
    /// the two replace each other's connection until the controller's
    /// watch (`model::identity::ConflictWatch`, whose counting its unit
    /// tests cover) says conflict, and the driver feeds
    /// `Input::IdentityConflict`. The checker feeds that input at any
    /// moment, once per unit of budget; an operator may release the node
    /// afterwards (having revoked the copy). Q1 is then also checked
    /// against this ground truth: no command leaves for a node while two
    /// agents hold its identity. Not in the default set.
    IdentityConflict,
    /// (issue #24 item 2, with `--migration`) The release's migration
    /// fails (non-zero exit, timeout, data over its snapshot bound): the
    /// agent puts the data back and reports it; the controller restores
    /// and pauses. Not in the default set.
    MigrationError,
    /// (issue #24 item 1, with `--config`) After settlement: the app of a
    /// node serving a configured deployment is restarted by hand with an
    /// older configuration. Code, answer and identity stay the
    /// deployment's; only the environment the process was started with
    /// (its configuration fingerprint, which the agent's readback reads
    /// back) differs. Not in the default set.
    OldConfig,
}

impl Fault {
    /// Every fault, in CLI order.
    pub const ALL: [Fault; 16] = [
        Fault::Loss,
        Fault::Dup,
        Fault::Partition,
        Fault::AgentCrash,
        Fault::ControllerCrash,
        Fault::WrongAnswer,
        Fault::AppCrash,
        Fault::SwapOld,
        Fault::ForeignRoute,
        Fault::StageError,
        Fault::EarlyTimeout,
        Fault::ControllerFailover,
        Fault::Snapshot,
        Fault::IdentityConflict,
        Fault::MigrationError,
        Fault::OldConfig,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Loss => "loss",
            Fault::Dup => "dup",
            Fault::Partition => "partition",
            Fault::AgentCrash => "agent-crash",
            Fault::ControllerCrash => "controller-crash",
            Fault::WrongAnswer => "wrong-answer",
            Fault::AppCrash => "app-crash",
            Fault::SwapOld => "swap-old",
            Fault::ForeignRoute => "foreign-route",
            Fault::StageError => "stage-error",
            Fault::EarlyTimeout => "early-timeout",
            Fault::ControllerFailover => "controller-failover",
            Fault::Snapshot => "snapshot",
            Fault::IdentityConflict => "identity-conflict",
            Fault::MigrationError => "migration-error",
            Fault::OldConfig => "old-config",
        }
    }

    /// Strikes a settled node (no live op, a confirmed release) rather than
    /// an op under way. Such faults are what a live proof and drift are
    /// for, so they come with the proof actions
    /// ([`CheckConfig::proofs_enabled`]) and are not in the default set.
    pub fn after_settlement(self) -> bool {
        matches!(
            self,
            Fault::SwapOld | Fault::ForeignRoute | Fault::OldConfig
        )
    }

    /// Parse a CLI name.
    pub fn parse(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Faults(u16);

impl Faults {
    /// Every fault kind, the settled-node ones included.
    pub fn all() -> Self {
        Fault::ALL.into_iter().fold(Faults(0), |s, f| s.with(f))
    }
    /// The faults of the default configuration: every kind that strikes
    /// while an op is under way, none of those that strike a settled node
    /// ([`Fault::after_settlement`]; they come by name, `--faults
    /// ...,swap-old,foreign-route`), and none of `stage-error`,
    /// `controller-failover` and `snapshot` (by name too: each has its own
    /// configuration in the tests, and this keeps the default
    /// configuration's space as it was).
    pub fn default_set() -> Self {
        Fault::ALL
            .into_iter()
            .filter(|f| {
                !f.after_settlement()
                    && !matches!(
                        f,
                        Fault::StageError
                            | Fault::ControllerFailover
                            | Fault::Snapshot
                            | Fault::IdentityConflict
                            | Fault::MigrationError
                    )
            })
            .fold(Faults(0), |s, f| s.with(f))
    }
    /// No fault enabled.
    pub fn none() -> Self {
        Faults(0)
    }
    /// This set plus `fault`.
    pub fn with(self, fault: Fault) -> Self {
        Faults(self.0 | fault.bit())
    }
    /// Whether `fault` is enabled.
    pub fn has(self, fault: Fault) -> bool {
        self.0 & fault.bit() != 0
    }
    /// Whether a fault that strikes a settled node is enabled.
    pub fn any_after_settlement(self) -> bool {
        Fault::ALL
            .into_iter()
            .any(|f| f.after_settlement() && self.has(f))
    }
    /// Parse `loss,dup,...`; the error names the unknown fault.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut set = Faults::none();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let fault = Fault::parse(name).ok_or_else(|| {
                let known: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                format!("unknown fault '{name}' (known: {})", known.join(", "))
            })?;
            set = set.with(fault);
        }
        Ok(set)
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Fault::ALL
            .iter()
            .filter(|x| self.has(**x))
            .map(|x| x.name())
            .collect();
        if names.is_empty() {
            write!(f, "none")
        } else {
            write!(f, "{}", names.join(","))
        }
    }
}

/// Upper bound on followers the checker accepts: beyond this the space is
/// too large for a 2-core machine and node bitmasks would overflow.
pub const FOLLOWERS_MAX: u8 = 4;
/// Upper bound on the fault budget.
pub const FAULTS_MAX: u8 = 4;
/// Upper bound on `--chunks`: each chunk adds four crash points to a
/// fetch, and three chunks already show every story (first, middle, last).
pub const CHUNKS_MAX: u8 = 4;

/// Whether a run checks the liveness properties under weak fairness
/// ([`crate::liveness`]): they need an exploration of their own, which
/// keeps the whole graph, so they are opt-in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LivenessCheck {
    /// Safety and reachability only (stateright's checker).
    #[default]
    Off,
    /// Also the liveness properties, once every safety property held.
    WithSafety,
    /// Only the liveness properties (for measuring them alone).
    Only,
}

/// One configuration of the checked system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CheckConfig {
    /// Followers after the canary.
    pub followers: u8,
    /// The plan's `slots_max`.
    pub slots: u8,
    /// Which faults the environment may inject.
    pub faults: Faults,
    /// How many faults in total along one path.
    pub max_faults: u8,
    /// The plan asks for an operator's approval after the canary.
    pub approval: bool,
    /// The operator may pause, resume and resolve UNKNOWN ops.
    pub operator: bool,
    /// The operator may start a second rollout (v3) that supersedes the
    /// first: this is what makes generations matter.
    pub supersede: bool,
    /// The operator may order an op with a stored Commit rolled
    /// back (once per path). Off by default: it multiplies the state space
    /// about tenfold (every UNKNOWN state branches into a restore), so it
    /// has its own configuration in the tests.
    pub rollback: bool,
    /// An operator may ask a live proof of a settled node and a verifier may
    /// record an observation of it (SPEC §10, proof is a readback). Implied
    /// by the settled-node faults ([`CheckConfig::proofs_enabled`]). Off by
    /// default, which keeps the default configuration's space as it was.
    pub proofs: bool,
    /// The first rollout goes in waves under a failure budget: one wave
    /// per follower, `max_failed` 0 (the first failed follower spends the
    /// budget and pauses the rollout for good, B1). Off by default.
    pub waves: bool,
    /// With `waves`: followers per wave (the last wave takes the rest).
    /// 1, the default, is one wave per follower; a larger wave holds
    /// interchangeable nodes ([`CheckConfig::symmetry`]).
    pub wave_size: u8,
    /// Symmetry reduction over the followers of one wave
    /// ([`crate::symmetry`]): states that differ only by which of a wave's
    /// followers is which are explored once. Opt-in; needs `waves`, slots
    /// for a whole wave, no supersede and no roster
    /// ([`CheckConfig::symmetry_refusal`]). Explored depth first.
    pub symmetry: bool,
    /// The nodes are enrolled by name at the start (`NodeEnrolled`, R1)
    /// and the operator may retire one of them along a path (refused while
    /// it holds a live op). Off by default: the other configurations'
    /// nodes are never enrolled, which the model allows, and keep their
    /// spaces as they were.
    pub roster: bool,
    /// Content chunks per release (issue #23 item 3). 1, the default, is
    /// a format-1 bundle staged and re-verified whole, exactly as before
    /// chunks (every configuration's space is as it was). With 2 or more
    /// the agent fetches the release chunk by chunk, journals each as it
    /// verifies, and `agent-crash` may strike at every point of the fetch
    /// (before, in the middle of and after each chunk's write, and around
    /// the tree's assembly); a restart re-verifies every chunk present.
    pub chunks: u8,
    /// (issue #24 item 5) A mixed fleet: the canary says it runs on
    /// aarch64, the followers on x86_64, and the operator starts a
    /// release with a tree for each; a start of a release built for
    /// x86_64 only is offered too, which the real rules refuse before
    /// anything is granted (A1). Off by default: the other
    /// configurations' nodes never say what they run on.
    pub arches: bool,
    /// (issue #24 item 2) Every release declares a migration of this kind:
    /// the agent journals its start, runs it after the Commit and before
    /// the switch, and `agent-crash` may strike while it runs (the
    /// recovery table's `MigrationInterrupted` row: stop, not retry);
    /// `migration-error` makes it fail. `None`, the default, keeps every
    /// other configuration's space as it was.
    pub migration: Option<MigrationKind>,
    /// (issue #24 item 1) A configuration rollout: the operator may record
    /// the app's configuration revision (once along a path), and the
    /// start deploys the baseline's code with it (a deployment digest of
    /// its own, v2, over v1's code: code unchanged, configuration new),
    /// through the same canary, faults and proof; a start before the
    /// revision is recorded is refused (C1). Off by default: the other
    /// configurations' spaces are as they were.
    pub config: bool,
    /// (issue #28 item 2) Named operators: an admin is bootstrapped and
    /// makes every operator input (`Input::Acting`), and a viewer tries
    /// to approve every rollout, which the real rules refuse (O1). Off by
    /// default: the other configurations' spaces are as they were.
    pub operators: bool,
    /// A named deviation of the real rules, or `None` for the real rules.
    pub mutant: Option<Mutant>,
    /// Whether the liveness properties under weak fairness are checked.
    pub liveness: LivenessCheck,
}

impl Default for CheckConfig {
    /// The default configuration of `fleetweft-check` with no arguments.
    fn default() -> Self {
        CheckConfig {
            followers: 2,
            slots: 1,
            faults: Faults::default_set(),
            max_faults: 1,
            approval: false,
            operator: true,
            supersede: false,
            rollback: false,
            proofs: false,
            waves: false,
            wave_size: 1,
            symmetry: false,
            roster: false,
            chunks: 1,
            arches: false,
            migration: None,
            config: false,
            operators: false,
            mutant: None,
            liveness: LivenessCheck::Off,
        }
    }
}

impl CheckConfig {
    /// Whether the proof actions (`Prove`, `Observe`) and their properties
    /// are on: asked for, or implied by a fault that strikes a settled node
    /// (a drift nobody looks for is not worth exploring).
    pub fn proofs_enabled(&self) -> bool {
        self.proofs || self.faults.any_after_settlement()
    }

    /// Why symmetry reduction would be unsound here, if it would. A wave's
    /// followers are interchangeable only when the wave is granted whole,
    /// in one batch (then plan order only picks which op id each gets):
    /// waves on, slots for a whole wave, and no second rollout (whose
    /// plan has no waves) or roster (whose names tell nodes apart).
    pub fn symmetry_refusal(&self) -> Option<String> {
        if !self.waves {
            return Some("symmetry needs --waves (followers of one wave)".to_string());
        }
        if self.wave_size < 2 {
            return Some("symmetry needs --wave-size 2 or more".to_string());
        }
        if self.slots < self.wave_size {
            return Some(format!(
                "symmetry needs slots for a whole wave: slots {} < wave size {}",
                self.slots, self.wave_size
            ));
        }
        if self.supersede || self.roster {
            return Some("symmetry does not support --supersede or --roster".to_string());
        }
        // The log's events name nodes and ops, and the renaming does not
        // rename them.
        if self.faults.has(Fault::Snapshot) {
            return Some("symmetry does not support the snapshot fault".to_string());
        }
        None
    }

    /// The wave ends of the first rollout's policy: cumulative follower
    /// counts, `wave_size` apart, the last at `followers`.
    pub fn wave_ends(&self) -> Vec<u32> {
        let size = u32::from(self.wave_size.max(1));
        let followers = u32::from(self.followers);
        let mut ends: Vec<u32> = (1..=followers.div_ceil(size)).map(|w| w * size).collect();
        if let Some(last) = ends.last_mut() {
            *last = (*last).min(followers);
        }
        ends
    }
}

impl fmt::Display for CheckConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "canary + {} followers, slots {}, faults {} (max {}), approval gate {}, operator {}, supersede {}{}{}{}{}{}{}{}{}, mutant {}",
            self.followers,
            self.slots,
            self.faults,
            self.max_faults,
            if self.approval { "on" } else { "off" },
            match (self.operator, self.rollback) {
                (true, true) => "on (with roll back)",
                (true, false) => "on",
                (false, _) => "off",
            },
            if self.supersede { "on" } else { "off" },
            // Only said when on, so the configurations that existed before
            // the proof actions read as they did.
            if self.proofs_enabled() {
                ", proofs on"
            } else {
                ""
            },
            match (self.waves, self.wave_size) {
                (false, _) => String::new(),
                (true, 0 | 1) => ", waves on (one per follower, max failed 0)".to_string(),
                (true, size) => format!(", waves on ({size} followers per wave, max failed 0)"),
            },
            if self.symmetry {
                ", symmetry over a wave's followers"
            } else {
                ""
            },
            if self.roster {
                ", roster on (enrolled, one retirement)"
            } else {
                ""
            },
            if self.chunks > 1 {
                format!(", {} chunks per release", self.chunks)
            } else {
                String::new()
            },
            if self.arches {
                ", architectures on (canary aarch64, followers x86_64)"
            } else {
                ""
            },
            self.migration_and_operators(),
            match self.liveness {
                LivenessCheck::Off => "",
                LivenessCheck::WithSafety => ", liveness under weak fairness",
                LivenessCheck::Only => ", liveness under weak fairness only",
            },
            self.mutant.map_or("none", |m| m.name()),
        )
    }
}

impl CheckConfig {
    /// The migration and operators parts of the configuration's text,
    /// said only when on.
    fn migration_and_operators(&self) -> String {
        let migration = match self.migration {
            None => "",
            Some(MigrationKind::Reversible) => ", a reversible migration per release",
            Some(MigrationKind::Irreversible) => ", an irreversible migration per release",
        };
        let operators = if self.operators {
            ", operators on (an admin acts, a viewer tries to approve)"
        } else {
            ""
        };
        format!("{migration}{operators}")
    }
}

/// What each mutant needs of the configuration: the checker's side of a
/// mutant, kept with the configuration it tunes (the mutant itself, in
/// [`crate::mutants`], only deviates from the rules).
impl Mutant {
    /// Adjust a configuration so the mutant's deviation can matter: the
    /// smallest configuration where the rule can break.
    pub fn tune(self, cfg: &mut CheckConfig) {
        match self {
            // Deadlines, retries and sends happen on every path: nothing to add.
            Mutant::ReleaseOnTimeout | Mutant::RedecideOnRetry | Mutant::ReplyBeforePersist => {}
            Mutant::SkipGenerationCheck => {
                cfg.supersede = true;
                cfg.faults = cfg.faults.with(Fault::Dup);
            }
            Mutant::GrantWhilePaused => cfg.operator = true,
            Mutant::RestoreWithoutProbe | Mutant::CanaryTrustsProcess => {
                cfg.faults = cfg.faults.with(Fault::WrongAnswer);
            }
            Mutant::TrustRestoreClaim => {
                cfg.faults = cfg.faults.with(Fault::WrongAnswer).with(Fault::AppCrash);
                cfg.max_faults = cfg.max_faults.max(2);
            }
            Mutant::RecoveryAutoApproves => {
                cfg.approval = true;
                cfg.faults = cfg.faults.with(Fault::ControllerCrash);
            }
            Mutant::FollowerBeforeCanary => cfg.slots = cfg.slots.max(2),
            Mutant::ConfirmBaselineDespiteCommit => cfg.operator = true,
            Mutant::UnknownFreesSlot => {
                cfg.faults = cfg.faults.with(Fault::Partition);
            }
            Mutant::GrantOverLiveOp => cfg.supersede = true,
            Mutant::RollbackProvenBeforeCommitLands => {
                cfg.operator = true;
                cfg.rollback = true;
            }
            Mutant::AgentForgetsClosedOps => {
                cfg.operator = true;
                cfg.faults = cfg.faults.with(Fault::Dup);
            }
            // A release swapped out from under a settled node, and an
            // operator asking for proof.
            Mutant::ProofTrustsRecordedEvidence => {
                cfg.proofs = true;
                cfg.faults = cfg.faults.with(Fault::SwapOld);
            }
            // The operator abandons an op (the default configuration's
            // operator does).
            Mutant::RolloutNeverEnds => cfg.operator = true,
            // A crash while staging is in the default fault set.
            Mutant::ResumeWithoutReverify => {}
            Mutant::RetryPermanentError => cfg.faults = cfg.faults.with(Fault::StageError),
            // Late deadlines fire in every configuration.
            Mutant::TimeoutUnknowsSettledOp => {}
            // A late acknowledgement for an op the node closed reaches it
            // while it reports the op of a superseding rollout.
            Mutant::AgentClosesOnAnyAck => cfg.supersede = true,
            // The operator pauses, then the canary answers wrongly.
            Mutant::ProbeFailurePausesAgain => {
                cfg.operator = true;
                cfg.faults = cfg.faults.with(Fault::WrongAnswer);
            }
            // Approve is offered in every state, gated plan or not.
            Mutant::ApproveWithoutGate => {}
            // A gate, an admin who acts and a viewer who tries to approve.
            Mutant::ViewerMayApprove => {
                cfg.operators = true;
                cfg.approval = true;
            }
            // Two waves, and room in the slots for the second one.
            Mutant::WaveBeforeSettled => {
                cfg.waves = true;
                cfg.slots = cfg.slots.max(2);
            }
            // A follower fails once (a budget of 0), then the operator
            // resumes.
            Mutant::BudgetIgnored => {
                cfg.waves = true;
                cfg.operator = true;
                cfg.faults = cfg.faults.with(Fault::WrongAnswer);
            }
            // Enrolled nodes, and an operator who may retire one.
            Mutant::RetireHoldingOp => {
                cfg.roster = true;
                cfg.operator = true;
            }
            // A release of two chunks; a crash mid-fetch (in the default
            // set) leaves the second one torn.
            Mutant::ResumeTrustsUnverifiedChunk => {
                cfg.chunks = cfg.chunks.max(2);
                cfg.faults = cfg.faults.with(Fault::AgentCrash);
            }
            // Their own, narrower fault set (and liveness), and the mutants
            // of deadlines, identity conflicts and architectures: a new
            // mutant lands here and fails its test until it is tuned.
            _ => self.tune_narrowed(cfg),
        }
    }

    /// The mutants of deadlines, identity conflicts and architectures.
    fn of_deadlines_identity_arches(self) -> bool {
        matches!(
            self,
            Mutant::IgnoreIdentityConflict
                | Mutant::StartIgnoresArch
                | Mutant::StartIgnoresConfig
                | Mutant::ConfigReadFromDocument
                | Mutant::SettleKeepsDeadline
                | Mutant::RearmSkipsDecided
        )
    }

    /// [`Mutant::tune`] for the mutants of deadlines, identity conflicts and
    /// architectures (issues #22 item 2 and #24 item 5).
    fn tune_deadlines_identity_arches(self, cfg: &mut CheckConfig) {
        match self {
            // A conflict the controller ignores, then a command to the node.
            Mutant::IgnoreIdentityConflict => {
                cfg.faults = cfg.faults.with(Fault::IdentityConflict);
            }
            // The narrow release's start: the canary has no tree in it.
            Mutant::StartIgnoresArch => cfg.arches = true,
            // A start before the revision is recorded.
            Mutant::StartIgnoresConfig => cfg.config = true,
            // A configuration rollout, then a node's app restarted by hand
            // with an old configuration (it brings the proofs along).
            Mutant::ConfigReadFromDocument => {
                cfg.config = true;
                cfg.faults = cfg.faults.with(Fault::OldConfig);
            }
            // Every path settles ops: the first settle keeps its deadline.
            Mutant::SettleKeepsDeadline => {}
            // A restart while an op is decided and waits on its report.
            Mutant::RearmSkipsDecided => cfg.faults = cfg.faults.with(Fault::ControllerCrash),
            _ => unreachable!("Mutant::tune_deadlines_identity_arches: {}", self.name()),
        }
    }

    /// [`Mutant::tune`] for the mutants that replace the fault set (a
    /// failover, a torn snapshot, the liveness mutants' smallest spaces).
    fn tune_narrowed(self, cfg: &mut CheckConfig) {
        match self {
            // A standby takes over while the old leader still hears from
            // the agents. The deposed leader's stale view breaks S8 in most
            // stories (it logs a follower's op it never granted as foreign,
            // or commits an op an operator resolved after the takeover):
            // `an_unfenced_deposed_leader_is_caught_by_s6` checks
            // that. Without an operator, and a duplicated commit request
            // reaching both leaders, the shortest story is the double
            // decision the fence is for: S6 (and S8, `also_breaks`).
            Mutant::UnfencedAppend => {
                cfg.operator = false;
                cfg.faults = Faults::none()
                    .with(Fault::ControllerFailover)
                    .with(Fault::Dup);
                cfg.max_faults = cfg.max_faults.max(2);
            }
            // A snapshot write torn by a crash; the log alone, as the
            // snapshot configuration in the tests has it (the shortest
            // stories need no other fault).
            Mutant::LoadUnverifiedSnapshot | Mutant::ArchivePastSnapshot => {
                cfg.followers = 0;
                cfg.operator = false;
                cfg.faults = Faults::none().with(Fault::Snapshot);
            }
            // Liveness mutants: the liveness properties on, in the
            // smallest space that shows the loop (the graph is kept whole).
            // A pause, an op settling while paused, a resume: one
            // follower, no fault.
            Mutant::ResumeGrantsNothing => {
                cfg.liveness = LivenessCheck::WithSafety;
                cfg.followers = cfg.followers.min(1);
                cfg.operator = true;
                cfg.faults = Faults::none();
            }
            // A transient staging failure leaves the op waiting for the
            // timer.
            Mutant::StagingRetryNeverReissued => {
                cfg.liveness = LivenessCheck::WithSafety;
                cfg.followers = 0;
                cfg.operator = false;
                cfg.faults = Faults::none().with(Fault::StageError);
            }
            // (issue #24 item 2) A release with a migration, and the
            // canary's agent SIGKILLed while it runs: the restart must
            // stop. The canary alone, no operator: the shortest story.
            Mutant::RetryInterruptedMigration => {
                cfg.migration = Some(MigrationKind::Reversible);
                cfg.followers = 0;
                cfg.operator = false;
                cfg.faults = Faults::none().with(Fault::AgentCrash);
            }
            // An operator pauses while the canary's op is live.
            Mutant::PauseFreezesAccounting => {
                cfg.liveness = LivenessCheck::WithSafety;
                cfg.followers = 0;
                cfg.operator = true;
                cfg.faults = Faults::none();
            }
            // `tune` routes only these here.
            m if m.of_deadlines_identity_arches() => self.tune_deadlines_identity_arches(cfg),
            _ => unreachable!("Mutant::tune_narrowed: {}", self.name()),
        }
    }
}
