//! One simulated agent: the real agent's driver loop (`agent::driver`,
//! the one `fleetweft-agent` runs: the `model::agent` core, the agent rules
//! checked on every event, handle → journal → act) over the real QUIC
//! protocol with the node's own certificate. The app is simulated: staging
//! fetches the real bundle from the controller but installs nothing, a
//! switch takes a drawn latency and points the node's route (in
//! [`crate::routes`]) at the new release, a probe reads that route.
//! Faults: a silent node drops its connection once granted and stays away;
//! a crashing node dies once switched (after the journal, before the route
//! moved) and restarts.
//!
//! The agents share QUIC endpoints ([`AGENTS_PER_ENDPOINT_MAX`] each), one
//! UDP socket per endpoint: a socket each stopped a run at the open-files
//! limit (19,985 agents under a hard limit of 20,000). Each connection
//! still carries its node's own certificate (`Endpoint::connect_with`).

use crate::options::Latency;
use crate::routes::Routes;
use crate::stats::Stats;
use ::agent::driver::{self, Driver, Flow, Host};
use anyhow::Context;
use model::agent::{agent_apply, AgentEvent, AgentInput, AgentState};
use model::recovery::{Observed, StageFailure};
use model::{Digest, OpId, ToAgent, ToController};
use protocol::frame::FrameBody;
use protocol::quic::{AgentConnection, Backoff, TransportError};
use protocol::tls::ClientIdentity;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Most simulated agents on one QUIC endpoint (one UDP socket, one
/// endpoint driver task): 100,000 agents take 100 sockets, far under the
/// open-files limit, and no one endpoint's receive buffer carries more
/// than a thousand connections' keep-alives.
pub const AGENTS_PER_ENDPOINT_MAX: usize = 1_000;

/// Reconnect backoff of the simulated agents (the real agent's defaults).
pub const BACKOFF_BASE_MS: u64 = 200;
/// The longest reconnect backoff.
pub const BACKOFF_MAX_MS: u64 = 5_000;

/// What a node does wrong, if anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Faults {
    /// Its new release answers wrongly (in [`Routes`]).
    pub wrong: bool,
    /// Goes silent once granted.
    pub silent: bool,
    /// Crashes once switched, then restarts.
    pub crash: bool,
}

/// What every simulated agent shares.
pub struct Shared {
    /// The controller's QUIC address.
    pub controller: SocketAddr,
    /// The name its certificate is checked for.
    pub server_name: String,
    /// The fleet CA.
    pub ca: PathBuf,
    /// Handshakes in flight at once.
    pub handshakes: Semaphore,
    /// Every node's route.
    pub routes: Arc<Routes>,
    /// Counters for progress and the report.
    pub stats: Stats,
    /// The retry timer.
    pub retry: Duration,
    /// Switch latency.
    pub switch: Latency,
    /// How long a silent node stays away.
    pub silent_for: Duration,
    /// How long a crashed node takes to come back.
    pub crash_restart: Duration,
    /// Seed of the latency draws.
    pub seed: u64,
    /// The agents' QUIC endpoints: agent `i` dials on
    /// `endpoints[i % endpoints.len()]`.
    pub endpoints: Vec<quinn::Endpoint>,
}

impl Shared {
    /// The endpoint agent `index` dials on.
    ///
    /// Round robin, not blocks of consecutive agents: agents connect in
    /// index order, so with blocks every handshake in flight shared one
    /// endpoint (one socket, one driver task) while the others idled; the
    /// 100,000-agent run stalled on one endpoint at a time.
    /// `endpoints_for` made at least one per AGENTS_PER_ENDPOINT_MAX agents.
    pub fn endpoint(&self, index: usize) -> &quinn::Endpoint {
        assert!(
            !self.endpoints.is_empty(),
            "endpoints_for makes at least one"
        );
        &self.endpoints[index % self.endpoints.len()]
    }
}

/// Client endpoints (no default configuration: every connection brings its
/// node's own) on loopback for `agents` simulated agents.
pub fn endpoints_for(agents: usize) -> anyhow::Result<Vec<quinn::Endpoint>> {
    let count = agents.div_ceil(AGENTS_PER_ENDPOINT_MAX).max(1);
    (0..count)
        .map(|_| {
            let local = SocketAddr::from(([127, 0, 0, 1], 0));
            // Its receive buffer raised as the controller's is: a
            // thousand connections' keep-alives arrive on it.
            protocol::quic::endpoint_on(local, None)
                .with_context(|| format!("binding a QUIC client endpoint on {local}"))
        })
        .collect()
}

/// One node of the simulated fleet.
#[derive(Clone, Debug)]
pub struct SimNode {
    /// Its position (its route, its latency stream).
    pub index: usize,
    /// Its node id (certificate SAN).
    pub name: String,
    /// Its certificate and key.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// What it does wrong.
    pub faults: Faults,
    /// What it says it runs on, after every `Hello`.
    pub platform: model::platform::Platform,
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The connection broke (or a standby sent the node away).
    Lost,
    /// The node went silent (fault).
    Silent,
    /// The node crashed (fault).
    Crashed,
}

/// The simulated node: the driver loop's [`Host`] (`agent::driver`, the
/// loop `fleetweft-agent` runs). Its journal and staged release are
/// memory that survives its crashes; its route is in [`Routes`].
struct Node {
    node: SimNode,
    shared: Arc<Shared>,
    /// The journal: survives crashes.
    journal: AgentState,
    /// What is staged "on disk": survives crashes.
    staged: Option<Digest>,
    /// A fault that ends the session once the current step is journaled.
    ending: Option<End>,
    /// Each fault strikes once per run.
    silenced: bool,
    crashed: bool,
    /// The commit request outstanding, and when it first went out.
    asked: Option<(OpId, Instant)>,
    switched_at: Instant,
    rng: u64,
}

/// Run node `node` until the task is aborted.
pub async fn run(node: SimNode, shared: Arc<Shared>, initial: Option<Digest>) {
    let rng = splitmix(shared.seed ^ (node.index as u64).wrapping_mul(0x9e37_79b9));
    let mut driver = Driver::new(Node {
        node,
        shared,
        journal: AgentState {
            serving: initial,
            ..AgentState::default()
        },
        staged: initial,
        ending: None,
        silenced: false,
        crashed: false,
        asked: None,
        switched_at: Instant::now(),
        rng,
    });
    restart(&mut driver).await;
    forever(&mut driver).await;
}

/// The node (re)starts: the route is brought back to what the journal
/// says serves (the real agent's reconstruct), then the core is told what
/// actually serves.
async fn restart(driver: &mut Driver<Node>) {
    let node = &mut driver.host;
    let serving = node.journal.serving.filter(|d| node.staged == Some(*d));
    node.shared.routes.switch(node.node.index, serving);
    let serving = node.shared.routes.serving(node.node.index);
    match driver.restarted(serving).await {
        Ok(Flow::Done) => {}
        // No fault strikes on a restart (they strike on `Accepted` and
        // `Switched`): nothing to end.
        Ok(Flow::Halted) => driver.host.ending = None,
        Err(e) => tracing::warn!(node = %driver.host.node.name, "restart: {e:#}"),
    }
}

/// Connect, run a session of the driver loop, and wait as the way it
/// ended says, forever.
async fn forever(driver: &mut Driver<Node>) {
    let name = driver.host.node.name.clone();
    let shared = driver.host.shared.clone();
    let mut backoff = Backoff::for_node(&name, BACKOFF_BASE_MS, BACKOFF_MAX_MS);
    loop {
        let end = match connect(&driver.host).await {
            Ok(conn) => {
                backoff.reset();
                shared.stats.connected.fetch_add(1, Ordering::Relaxed);
                let connection = conn.connection().clone();
                let ended = driver.session(conn, None).await;
                shared.stats.connected.fetch_sub(1, Ordering::Relaxed);
                // Shared endpoint: the connection is closed now, not when
                // the endpoint goes.
                connection.close(0u32.into(), b"simulated agent leaves");
                match ended {
                    Ok(driver::Ended::Halted) => driver.host.ending.take().unwrap_or(End::Lost),
                    Ok(driver::Ended::Redirected { .. }) => End::Lost,
                    Err(e) => {
                        tracing::debug!(node = %name, "session ended: {e:#}");
                        End::Lost
                    }
                }
            }
            Err(e) => {
                tracing::debug!(node = %name, "cannot reach the controller: {e:#}");
                shared
                    .stats
                    .connect_failures
                    .fetch_add(1, Ordering::Relaxed);
                End::Lost
            }
        };
        match end {
            End::Lost => tokio::time::sleep(backoff.next_delay()).await,
            End::Silent => tokio::time::sleep(shared.silent_for).await,
            End::Crashed => {
                tokio::time::sleep(shared.crash_restart).await;
                restart(driver).await;
            }
        }
    }
}

/// A connection to the controller with the node's own certificate, on
/// the endpoint it shares with [`AGENTS_PER_ENDPOINT_MAX`] - 1 others.
async fn connect(node: &Node) -> anyhow::Result<AgentConnection> {
    let shared = &node.shared;
    // Bounded: 10,000 handshakes at once would time each other out.
    let _permit = shared
        .handshakes
        .acquire()
        .await
        .context("handshake semaphore closed")?;
    // Read under the permit: 100,000 client configurations waiting for
    // a permit would only hold memory.
    let identity = ClientIdentity::from_pem_files(&shared.ca, &node.node.cert, &node.node.key)
        .context("loading the node's TLS identity")?;
    let config = sim_client_config(&identity)?;
    let endpoint = shared.endpoint(node.node.index);
    let started = Instant::now();
    let conn =
        AgentConnection::connect_on(endpoint, shared.controller, &shared.server_name, config)
            .await?;
    shared.stats.handshake(started.elapsed());
    Ok(conn)
}

/// A simulated agent's QUIC client configuration: the node's own
/// certificate (mutual TLS), and no keep-alive of its own. The
/// controller's keep-alives (`protocol::quic::KEEP_ALIVE`) keep the
/// connection up, answered by acknowledgements; a simulated agent watches
/// no liveness, and one process's 100,000 agents pinging as a real agent
/// does (every 375 ms) would add 266,000 packets a second to the two cores
/// this runs on.
fn sim_client_config(identity: &ClientIdentity) -> anyhow::Result<quinn::ClientConfig> {
    let mut config = protocol::quic::quinn_client_config(identity)
        .context("the node's QUIC client configuration")?;
    let mut transport = quinn::TransportConfig::default();
    transport
        .keep_alive_interval(None)
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(protocol::quic::IDLE_TIMEOUT)
                .context("the idle timeout")?,
        ))
        .max_concurrent_bidi_streams(protocol::quic::STREAMS_BIDI_MAX.into())
        .max_concurrent_uni_streams(0u32.into());
    config.transport_config(Arc::new(transport));
    Ok(config)
}

impl Host for Node {
    fn node(&self) -> &str {
        &self.node.name
    }

    fn state(&self) -> &AgentState {
        &self.journal
    }

    fn journal(&mut self, events: &[AgentEvent]) -> anyhow::Result<()> {
        for event in events {
            agent_apply(&mut self.journal, event);
        }
        Ok(())
    }

    /// A fault strikes right after the step that triggers it is journaled.
    fn halts(&mut self, event: &AgentEvent) -> bool {
        let stats = &self.shared.stats;
        match event {
            AgentEvent::Accepted { .. } if self.node.faults.silent && !self.silenced => {
                self.silenced = true;
                stats.silences.fetch_add(1, Ordering::Relaxed);
                self.ending = Some(End::Silent);
                true
            }
            AgentEvent::Switched { .. } if self.node.faults.crash && !self.crashed => {
                self.crashed = true;
                stats.crashes.fetch_add(1, Ordering::Relaxed);
                self.ending = Some(End::Crashed);
                true
            }
            _ => false,
        }
    }

    /// Makes a journaled event true in the simulated world.
    async fn enact(&mut self, before: &AgentState, event: &AgentEvent) {
        let routes = &self.shared.routes;
        match *event {
            AgentEvent::Switched { op, .. } => {
                let Some(current) = self.journal.op.filter(|o| o.id == op) else {
                    return;
                };
                let uniform = (next(&mut self.rng) >> 11) as f64 / (1u64 << 53) as f64;
                let latency = self.shared.switch.draw_ms(uniform);
                tokio::time::sleep(Duration::from_millis(latency)).await;
                routes.switch(self.node.index, Some(current.release));
                self.switched_at = Instant::now();
                self.shared.stats.switches.fetch_add(1, Ordering::Relaxed);
            }
            AgentEvent::Restored { op, .. } => {
                let baseline = before.op.filter(|o| o.id == op).and_then(|o| o.baseline);
                routes.switch(self.node.index, baseline);
            }
            AgentEvent::Closed { .. } => {
                self.shared.stats.closed.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    async fn probe(&mut self, _events: &[AgentEvent]) -> model::RouteObservation {
        self.observe_route()
    }

    fn observe_staged(&mut self) -> Option<AgentInput> {
        let op = self.journal.op.map(|o| o.release);
        Some(AgentInput::StageObserved(match (op, self.staged) {
            (Some(want), Some(have)) if want == have => Observed::ReVerified,
            _ => Observed::Absent,
        }))
    }

    /// Fetches the op's bundle over the real bundle stream
    /// (digest-checked); "installing" it is remembering it staged.
    async fn stage(&mut self, conn: &quinn::Connection) -> Option<AgentInput> {
        let op = self.journal.op?;
        match protocol::quic::fetch_bundle(conn, op.release).await {
            Ok(_) => {
                self.staged = Some(op.release);
                self.shared.stats.fetches.fetch_add(1, Ordering::Relaxed);
                Some(AgentInput::Staged)
            }
            Err(e) => {
                tracing::debug!(node = %self.node.name, "fetch failed: {e}");
                Some(AgentInput::StageFailed(fetch_failure(&e)))
            }
        }
    }

    fn platform(&self) -> model::platform::Platform {
        self.node.platform
    }

    /// Notes when the commit request first went out, for its latency.
    fn before_send(&mut self, msg: &ToController) -> Option<FrameBody> {
        if let ToController::CommitRequest { op } = *msg {
            if self.asked.is_none_or(|(asked, _)| asked != op) {
                self.asked = Some((op, Instant::now()));
            }
        }
        None
    }

    /// A commit reply for the outstanding request: its latency.
    fn on_command(&mut self, cmd: &ToAgent) {
        if let (ToAgent::CommitReply { op, .. }, Some((asked, at))) = (cmd, self.asked) {
            if *op == asked {
                self.shared.stats.commit_latency(at.elapsed());
                self.asked = None;
            }
        }
        match cmd {
            ToAgent::Apply { .. } => self.shared.stats.applies.fetch_add(1, Ordering::Relaxed),
            ToAgent::Restore { .. } => self.shared.stats.restores.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
    }

    async fn read_back(&mut self) -> (model::RouteObservation, Option<Digest>) {
        let observation = self.observe_route();
        (observation, self.shared.routes.serving(self.node.index))
    }

    fn retry_every(&self) -> Duration {
        self.shared.retry
    }
}

impl Node {
    fn observe_route(&self) -> model::RouteObservation {
        let uptime = self.switched_at.elapsed().as_millis() as u64;
        self.shared.routes.observe(self.node.index, uptime)
    }
}

/// The class of a failed fetch, as the real agent classifies it
/// (`agent/src/daemon.rs` `fetch_failure`): the network and the store can
/// get better, an answer outside the protocol is no evidence.
fn fetch_failure(error: &TransportError) -> StageFailure {
    match error {
        TransportError::BadFrame(_) | TransportError::UnexpectedFrame { .. } => {
            StageFailure::MissingEvidence
        }
        TransportError::BundleMissing(_) => StageFailure::Transient {
            bundle_missing: true,
        },
        _ => StageFailure::Transient {
            bundle_missing: false,
        },
    }
}

/// SplitMix64: a seeded stream, so runs replay (no randomness crate).
pub fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn next(state: &mut u64) -> u64 {
    *state = splitmix(*state);
    *state
}
