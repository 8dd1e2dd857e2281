//! The checked world: the controller (durable log folded, plus what a mutant
//! left unflushed), the agents' journals, what each node's route really
//! serves, the network, the fault budget, and ghost records that only the
//! properties read.

use crate::durable_log::DurableLog;
use invariants::Violation;
use model::agent::AgentState;
use model::chunks::ChunkSet;
use model::controller::{apply, ControllerState, Event};
use model::recovery::ChunkReading;
use model::{ArtifactRead, Digest, NodeId, ProbeVerdict, RouteObservation, ToAgent, ToController};
use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// How the app instance behind a node's public route really behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum App {
    /// Answers what the probe spec expects.
    Correct,
    /// Answers, healthy, but wrongly.
    Wrong,
    /// The process is gone.
    Down,
    /// (`swap-old`, after settlement) A healthy old release, the one given,
    /// was swapped in behind the agent: the route's stamping proxy still
    /// identifies as the agent's release, the answer is the old release's
    /// (a wrong answer under the agent's release's probe spec, a pass
    /// under the old release's), and the agent's readback finds the app
    /// file that runs to be the old release's signed app.
    SwappedOld(Digest),
    /// (`foreign-route`, after settlement) A stand-in answers the public
    /// route: the expected answer, identifying as the release given. The
    /// agent's install is untouched.
    Foreign(Digest),
    /// (`old-config`, after settlement) The deployment's code serves,
    /// answering correctly as the deployment, but its process was started
    /// by hand with an older configuration: the agent's readback of the
    /// process's environment finds [`OLD_CONFIG_FINGERPRINT`]. Not a drift
    /// a recorded observation can show (the log keeps no configuration
    /// readback): only a live proof reads it.
    OldConfig,
}

/// The configuration fingerprint an `old-config` process was started with:
/// no revision's the checker records.
pub const OLD_CONFIG_FINGERPRINT: Digest = Digest::repeat(40);

impl App {
    /// A settled node's route no longer serves what its agent installed.
    pub fn drifted(self) -> bool {
        matches!(self, App::SwappedOld(_) | App::Foreign(_))
    }
}

/// What a node's disk really holds of its current op's staged release
/// (the ground truth a re-verification reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Artifact {
    /// Nothing of it.
    Absent,
    /// Whole, and it verifies.
    Good,
    /// A crash cut its write short: something is there, not good.
    Torn,
}

impl Artifact {
    /// What re-reading and re-verifying it from disk observes.
    pub fn observed(self) -> model::recovery::Observed {
        match self {
            Artifact::Absent => model::recovery::Observed::Absent,
            Artifact::Good => model::recovery::Observed::ReVerified,
            Artifact::Torn => model::recovery::Observed::Unknown,
        }
    }
}

/// (`--chunks` 2 or more) How a crash leaves the chunk being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChunkLeft {
    /// Nothing of it written yet.
    Absent,
    /// The write was cut short: fewer bytes than the chunk.
    Partial,
    /// Written whole but not as sent (a crash before its sync): only its
    /// digest tells it from a complete one.
    Torn,
    /// Written and synced, its digest matched, not yet journaled.
    Complete,
}

/// (`--chunks` 2 or more) What a node's chunk store really holds of its
/// current op's release, chunk by chunk (the ground truth a
/// re-verification reads), and ghost counts of what was fetched. Left at
/// its default with one chunk, which keeps those configurations' spaces as
/// they were.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkDisk {
    /// Whole, and their digests match.
    pub complete: ChunkSet,
    /// Cut short by a crash.
    pub partial: ChunkSet,
    /// Written whole but not as sent.
    pub torn: ChunkSet,
    /// Ghost: chunks whose bytes a fetch of this op ever wrote.
    pub written: ChunkSet,
    /// Ghost: fetches of a chunk this op had already written once.
    pub refetched: u8,
    /// Ghost: crashes that cut a fetch of this op short.
    pub cut_short: u8,
}

impl ChunkDisk {
    /// What re-verifying every chunk present, and the tree, reads.
    pub fn reading(&self, tree: Artifact) -> ChunkReading {
        ChunkReading {
            verified: self.complete,
            unverified: self.partial.union(self.torn),
            tree: tree.observed(),
        }
    }

    /// A fetch wrote `chunk` whole and it verified.
    pub fn write(&mut self, chunk: u8) {
        if self.written.has(chunk) {
            self.refetched = self.refetched.saturating_add(1);
        }
        let one = ChunkSet::NONE.with(chunk);
        self.written = self.written.union(one);
        self.complete = self.complete.union(one);
        self.partial = self.partial.without(one);
        self.torn = self.torn.without(one);
    }

    /// A crash left `chunk` as `left`.
    pub fn leave(&mut self, chunk: u8, left: ChunkLeft) {
        let one = ChunkSet::NONE.with(chunk);
        match left {
            ChunkLeft::Absent => return,
            ChunkLeft::Partial => self.partial = self.partial.union(one),
            ChunkLeft::Torn => self.torn = self.torn.union(one),
            ChunkLeft::Complete => self.complete = self.complete.union(one),
        }
        if self.written.has(chunk) {
            self.refetched = self.refetched.saturating_add(1);
        }
        self.written = self.written.union(one);
    }

    /// The driver deletes every chunk present that the agent did not keep
    /// (those that failed re-verification).
    pub fn discard_except(&mut self, kept: ChunkSet) {
        self.partial = self.partial.intersect(kept);
        self.torn = self.torn.intersect(kept);
        self.complete = self.complete.intersect(kept);
    }
}

/// A message in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Msg {
    ToAgent(NodeId, ToAgent),
    ToController(NodeId, ToController),
}

impl Msg {
    /// The node at the far end of the message.
    pub fn node(&self) -> NodeId {
        match self {
            Msg::ToAgent(n, _) | Msg::ToController(n, _) => *n,
        }
    }
}

/// Records that only the properties read; no rule consults them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    pub pauses: u8,
    pub resumes: u8,
    /// Rollouts an operator approved (bit per rollout id).
    pub approved_by_operator: u8,
    /// Ops an operator resolved (bit per op id).
    pub resolved_by_operator: u32,
    /// Ops that were UNKNOWN at some point (bit per op id).
    pub were_unknown: u32,
    /// An op that was UNKNOWN later settled with evidence.
    pub unknown_settled: bool,
    /// An op settled while its rollout was paused.
    pub settled_while_paused: bool,
    /// An op was rolled back with proof.
    pub rolled_back: bool,
    /// Ops an operator ordered rolled back (bit per op id).
    pub rolled_back_by_operator: u32,
    /// An op an operator ordered rolled back settled `RolledBack` (with the
    /// proof S9 asks for).
    pub operator_rollback_proven: bool,
    /// An agent aborted an op whose `Apply` it never received (superseded
    /// while the command was lost), so the op settled without a fetch.
    pub aborted_unseen: bool,
    /// A live proof said `verified` for this node while its route did not
    /// really serve the intended release correctly (P1).
    pub proof_lied: Option<NodeId>,
    /// Rows of the agents' recovery table taken along the path (bit per
    /// `model::recovery::Row` in `Row::ALL` order). Only recorded with
    /// the `stage-error` fault on, which is what makes every row
    /// reachable (it keeps other configurations' spaces as they were).
    pub recovery_rows: u16,
    /// (`controller-failover`) A deposed leader's append was fenced: the
    /// fault reached the point where the fencing matters.
    pub deposed_fenced: bool,
    /// (`snapshot`) A restart rebuilt its state from a snapshot after
    /// archiving had deleted the entries it covers.
    pub restarted_from_snapshot: bool,
    /// (`snapshot`) A restart skipped a snapshot that does not verify.
    pub skipped_torn_snapshot: bool,
    /// (`--chunks` 2 or more) A chunk cut short by a crash was fetched
    /// again.
    pub chunk_refetched: bool,
    /// (`identity-conflict`) Nodes whose identity a second agent holds
    /// (bit per node index), from the conflict until an operator releases
    /// the node: Q1's ground truth.
    pub cloned: u8,
    /// (`--migration`) Ops whose agent journaled a failed migration (bit
    /// per op id).
    pub migration_failed: u32,
    /// (`--migration`) An op whose migration failed settled rolled back
    /// (with the proof S9 asks for).
    pub failed_migration_rolled_back: bool,
}

/// A value shared behind an `Arc` with its hash computed once, when it is
/// made. The checker clones, hashes and compares a whole world for every
/// step it explores, and most steps (deliveries to agents, faults) leave
/// the controller's state as it was: with this, that state costs one
/// pointer copy to clone, one `u64` to hash and (mostly) one comparison of
/// hashes to compare, instead of a walk over every op and node. It is
/// hashed again only when it changes ([`Hashed::new`]).
#[derive(Clone)]
pub struct Hashed<T> {
    value: Arc<T>,
    hash: u64,
    /// A second hash under other keys: with `hash`, 128 bits that
    /// [`Hashed::same_as`] trusts as the value's identity.
    check: u64,
}

impl<T: Hash> Hashed<T> {
    /// `value` and its hashes.
    pub fn new(value: T) -> Hashed<T> {
        // Fixed keys: the same state hashes the same in every run.
        let hash = ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(&value);
        let check = ahash::RandomState::with_seeds(5, 6, 7, 8).hash_one(&value);
        Hashed {
            value: Arc::new(value),
            hash,
            check,
        }
    }

    /// The hash computed when the value was made.
    pub fn hash_value(&self) -> u64 {
        self.hash
    }

    /// Whether `other` holds the same value: the same allocation, or the
    /// same 128 bits of hash. A collision of two different controller
    /// states on both keyed hashes is about one in 2^64 per pair; the
    /// checker already identifies whole states by a 64-bit fingerprint
    /// (stateright's), so this adds no weaker link. Comparing the states
    /// field by field was a tenth of the checker's time.
    pub fn same_as(&self, other: &Hashed<T>) -> bool {
        Arc::ptr_eq(&self.value, &other.value)
            || (self.hash == other.hash && self.check == other.check)
    }

    /// The value, owned (cloned when shared).
    pub fn to_owned_value(&self) -> T
    where
        T: Clone,
    {
        T::clone(&self.value)
    }
}

impl<T> std::ops::Deref for Hashed<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: Hash + Default> Default for Hashed<T> {
    fn default() -> Hashed<T> {
        Hashed::new(T::default())
    }
}

impl<T> Hash for Hashed<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl<T: PartialEq> PartialEq for Hashed<T> {
    fn eq(&self, other: &Hashed<T>) -> bool {
        self.hash == other.hash
            && (Arc::ptr_eq(&self.value, &other.value) || self.value == other.value)
    }
}

impl<T: Eq> Eq for Hashed<T> {}

impl<T: std::fmt::Debug> std::fmt::Debug for Hashed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}

/// The messages in flight: a set kept as a sorted vector. A world is
/// cloned for every step the checker takes and holds a handful of
/// messages; a vector clones with one allocation where a `BTreeSet`
/// allocates a node, and it hashes and compares the same sequence.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MsgSet(Vec<Msg>);

impl MsgSet {
    /// Add `msg`; false if it was in flight already.
    pub fn insert(&mut self, msg: Msg) -> bool {
        match self.0.binary_search(&msg) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, msg);
                true
            }
        }
    }

    /// Take `msg` out; false if it was not in flight.
    pub fn remove(&mut self, msg: &Msg) -> bool {
        match self.0.binary_search(msg) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether `msg` is in flight.
    pub fn contains(&self, msg: &Msg) -> bool {
        self.0.binary_search(msg).is_ok()
    }

    /// The messages, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Msg> {
        self.0.iter()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drop them all.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Keep those `keep` says.
    pub fn retain(&mut self, keep: impl FnMut(&Msg) -> bool) {
        self.0.retain(keep);
    }
}

impl FromIterator<Msg> for MsgSet {
    fn from_iter<I: IntoIterator<Item = Msg>>(iter: I) -> MsgSet {
        let mut v: Vec<Msg> = iter.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        MsgSet(v)
    }
}

impl<'a> IntoIterator for &'a MsgSet {
    type Item = &'a Msg;
    type IntoIter = std::slice::Iter<'a, Msg>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// One state of the checked system.
// `==` is written out (below) only to compare in a cheaper order; it is
// field for field what the derive would be, so it agrees with this `Hash`.
#[allow(clippy::derived_hash_with_manual_eq)]
#[derive(Clone, Debug, Eq, Hash)]
pub struct World {
    /// The controller state folded from the durable log: the fold of every
    /// durable event from genesis, the ground truth a restart must rebuild.
    pub durable: Hashed<ControllerState>,
    /// (`snapshot`) The log as a restart reads it: entries not archived and
    /// snapshots. `None` without that fault (a restart starts from
    /// `durable`), which keeps the other configurations' spaces as they
    /// were.
    pub log: Option<DurableLog>,
    /// (`controller-failover`) The deposed leader's own state after a
    /// standby took over, while it still lives: it decides on what it knew,
    /// and under the real rules its next append is fenced and it stops
    /// (`None` again). Always `None` without that fault.
    pub deposed: Option<Box<ControllerState>>,
    /// Events applied but not yet flushed. Always empty under the real rules,
    /// which flush before anything leaves; only `reply-before-persist` uses it.
    pub unflushed: Vec<Event>,
    /// Each agent's journal, by node index.
    pub agents: Vec<Hashed<AgentState>>,
    /// What each node's route really serves, by node index.
    pub apps: Vec<App>,
    /// What each node's disk really holds of its current op's release
    /// (with `--chunks` 2 or more: of the tree assembled from its chunks).
    pub artifacts: Vec<Artifact>,
    /// (`--chunks` 2 or more) Each node's chunk store, by node index.
    pub chunks: Vec<ChunkDisk>,
    /// Messages in flight (a set: identical copies are one message).
    pub net: MsgSet,
    /// Partitioned nodes, one bit per node index.
    pub partitioned: u8,
    pub faults_used: u8,
    /// Observations recorded so far along the path (`Observe`): the logical
    /// clock of the controller's `now_ms`, and bounded by
    /// [`crate::fleet::OBSERVATIONS_MAX`]. Always 0 without proofs.
    pub observations: u8,
    pub ghost: Ghost,
    /// The first rule broken along the path to this state, if any.
    pub violation: Option<Violation>,
    /// With symmetry reduction on, (followers, wave size): what
    /// [`crate::symmetry::representative_of`] permutes. A constant of the
    /// run (stateright's representative is a plain `fn` of the state);
    /// `None` otherwise.
    pub symmetry: Option<(u8, u8)>,
}

/// Field by field like a derived `==`, but the cheap fields first and the
/// controller states last: the checker compares every step's result with
/// the state it came from (a step that changes nothing is no transition),
/// and most steps (deliveries to agents, faults) change the messages or
/// an agent and leave the controller as it was, which a derived `==`
/// would compare whole first. The destructuring names every field, so a
/// new one cannot be forgotten here.
impl PartialEq for World {
    fn eq(&self, other: &World) -> bool {
        let World {
            durable,
            log,
            deposed,
            unflushed,
            agents,
            apps,
            artifacts,
            chunks,
            net,
            partitioned,
            faults_used,
            observations,
            ghost,
            violation,
            symmetry,
        } = self;
        *partitioned == other.partitioned
            && *faults_used == other.faults_used
            && *observations == other.observations
            && *symmetry == other.symmetry
            && net.len() == other.net.len()
            && unflushed.len() == other.unflushed.len()
            && *ghost == other.ghost
            && *agents == other.agents
            && *apps == other.apps
            && *artifacts == other.artifacts
            && *chunks == other.chunks
            && *net == other.net
            && *violation == other.violation
            && *unflushed == other.unflushed
            && *durable == other.durable
            && *deposed == other.deposed
            && *log == other.log
    }
}

impl World {
    /// The controller as it decides now: durable state plus unflushed events.
    pub fn controller(&self) -> Cow<'_, ControllerState> {
        if self.unflushed.is_empty() {
            Cow::Borrowed(&self.durable)
        } else {
            let mut state = self.durable.to_owned_value();
            for event in &self.unflushed {
                apply(&mut state, event);
            }
            Cow::Owned(state)
        }
    }

    /// Whether `node` is cut off.
    pub fn is_partitioned(&self, node: NodeId) -> bool {
        self.partitioned & (1 << node.0) != 0
    }

    /// What a probe of `node`'s public route observes right now.
    ///
    /// The process uptime, restart count and artifact read-back stay `None`
    /// in every state: the rules never read them (S11), and varying them
    /// would only multiply the explored states (the pinned counts in
    /// `docs/model.md` depend on it). Only the agent's readback of a settled
    /// node ([`World::readback`], with proofs on) adds the artifact.
    pub fn observe(&self, node: NodeId) -> RouteObservation {
        let serving = self.agents[node.0 as usize].serving;
        match (serving, self.apps[node.0 as usize]) {
            (Some(release), App::Correct | App::OldConfig) => RouteObservation::passing(release),
            (Some(release), App::Wrong) => RouteObservation {
                verdict: ProbeVerdict::WrongAnswer,
                identity: Some(release),
                process_healthy: true,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
            // The proxy stamps the agent's release on the old release's answer.
            (Some(release), App::SwappedOld(_)) => RouteObservation {
                verdict: ProbeVerdict::WrongAnswer,
                identity: Some(release),
                process_healthy: true,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
            // The stand-in gives the expected answer as another release.
            (Some(_), App::Foreign(other)) => RouteObservation {
                verdict: ProbeVerdict::Pass,
                identity: Some(other),
                process_healthy: true,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
            (_, App::Down) | (None, _) => RouteObservation {
                verdict: ProbeVerdict::Unreachable,
                identity: None,
                process_healthy: false,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
        }
    }

    /// What `node`'s agent reads back when asked (a live proof, an
    /// observation): the route as it sees it, plus its re-hash of what is
    /// installed behind the route — the release it serves, with the app
    /// file of the old release it holds when that one was swapped in. The
    /// process numbers stay `None`, as in [`World::observe`], to keep the
    /// space small.
    pub fn readback(&self, node: NodeId) -> RouteObservation {
        let index = node.0 as usize;
        let artifact = self.agents[index]
            .serving
            .map(|installed| match self.apps[index] {
                App::SwappedOld(release) => ArtifactRead::AppFileOf { installed, release },
                _ => ArtifactRead::Digest(installed),
            });
        RouteObservation {
            artifact,
            ..self.observe(node)
        }
    }

    /// The configuration fingerprint the process serving `node`'s route was
    /// started with, as the agent reads it back: the one the deployment it
    /// serves was recorded with (the model's agents always start a
    /// deployment with its own configuration); `None` when what serves is
    /// no configured deployment.
    pub fn configuration_read(&self, node: NodeId) -> Option<Option<Digest>> {
        let deployed = self.deployed_configuration(node)?;
        match self.apps[node.0 as usize] {
            App::OldConfig => Some(Some(OLD_CONFIG_FINGERPRINT)),
            _ => Some(deployed),
        }
    }

    /// The configuration fingerprint the deployment `node` serves was
    /// recorded with: what its process runs with unless restarted by hand
    /// (`old-config`); `None` when what serves is no configured deployment.
    pub fn deployed_configuration(&self, node: NodeId) -> Option<Option<Digest>> {
        let serving = self.agents[node.0 as usize].serving?;
        self.durable
            .rollouts
            .iter()
            .filter(|r| r.plan.release == serving)
            .find_map(|r| r.deploys.as_ref())
            .map(|d| Some(d.fingerprint))
    }

    /// What `node`'s route answers judged by `release`'s own probe spec:
    /// a pass when what really answers is `release`, correctly (its own
    /// app, or its app swapped in behind another); what the route answers
    /// otherwise (a wrong answer for another release's answer).
    pub fn answer_as(&self, node: NodeId, release: Digest) -> ProbeVerdict {
        let index = node.0 as usize;
        match (self.agents[index].serving, self.apps[index]) {
            (_, App::SwappedOld(old)) if old == release => ProbeVerdict::Pass,
            (Some(serving), App::Correct | App::OldConfig) if serving == release => {
                ProbeVerdict::Pass
            }
            (_, App::Down) | (None, _) => ProbeVerdict::Unreachable,
            _ => ProbeVerdict::WrongAnswer,
        }
    }

    /// Whether `node`'s route really serves `release` correctly now.
    pub fn truly_serves(&self, node: NodeId, release: Digest) -> bool {
        let index = node.0 as usize;
        self.agents[index].serving == Some(release) && self.apps[index] == App::Correct
    }

    /// What `node`'s route really serves now, in domain words.
    pub fn truth(&self, node: NodeId) -> String {
        let index = node.0 as usize;
        let Some(serving) = self.agents[index].serving else {
            return format!("nothing serves on {node}");
        };
        match self.apps[index] {
            App::Correct => format!("{node} serves {serving}"),
            App::Wrong => format!("{node}'s {serving} answers wrongly"),
            App::Down => format!("{node}'s app is down"),
            App::SwappedOld(old) => format!(
                "{node}'s route gives {old}'s answer stamped as {serving} (an old release swapped in behind the agent)"
            ),
            App::Foreign(other) => {
                format!("a stand-in answers {node}'s route as {other}, not its {serving}")
            }
            App::OldConfig => format!(
                "{node}'s {serving} runs with an old configuration (its app restarted by hand)"
            ),
        }
    }

    /// Keep the first violation only: the path to it is the counterexample.
    pub fn record(&mut self, result: Result<(), Violation>) {
        if let (None, Err(v)) = (&self.violation, result) {
            self.violation = Some(v);
        }
    }
}
