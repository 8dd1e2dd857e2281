//! One simulated agent: the real `model::agent` core (`agent_step`, the
//! agent rules checked on every event, `agent_apply`), driven the way
//! `agent/src/daemon.rs` drives it, over the real QUIC protocol with the
//! node's own certificate. The app is simulated: staging fetches the real
//! bundle from the controller but installs nothing, a switch takes a drawn
//! latency and points the node's route (in [`crate::routes`]) at the new
//! release, a probe reads that route. Faults: a silent node drops its
//! connection once granted and stays away; a crashing node dies once
//! switched (after the journal, before the route moved) and restarts.

use crate::options::Latency;
use crate::routes::Routes;
use crate::stats::Stats;
use anyhow::Context;
use model::agent::{agent_apply, agent_step, AgentEffect, AgentEvent, AgentInput, AgentState};
use model::recovery::{Observed, StageFailure};
use model::{Digest, OpId, ToAgent, ToController};
use protocol::frame::FrameBody;
use protocol::quic::{AgentConnection, Backoff, ControlSender, TransportError};
use protocol::tls::ClientIdentity;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Semaphore};

/// Upper bound on frames queued from the controller to one agent.
pub const INBOX_MAX: usize = 64;
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
    /// The connection broke.
    Lost,
    /// The node went silent (fault).
    Silent,
    /// The node crashed (fault).
    Crashed,
}

/// What the control-stream reader hands the session loop.
enum Inbound {
    Command(ToAgent),
    ReadBack { request: u64 },
}

struct Agent {
    node: SimNode,
    shared: Arc<Shared>,
    /// The journal: survives crashes.
    journal: AgentState,
    /// What is staged "on disk": survives crashes.
    staged: Option<Digest>,
    conn: Option<quinn::Connection>,
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
    let mut agent = Agent {
        node,
        shared,
        journal: AgentState {
            serving: initial,
            ..AgentState::default()
        },
        staged: initial,
        conn: None,
        ending: None,
        silenced: false,
        crashed: false,
        asked: None,
        switched_at: Instant::now(),
        rng,
    };
    agent.restart().await;
    agent.forever().await;
}

impl Agent {
    /// The agent (re)starts: the route is brought back to what the
    /// journal says serves (the real agent's reconstruct), then the core
    /// is told what actually serves.
    async fn restart(&mut self) {
        let serving = self.journal.serving.filter(|d| self.staged == Some(*d));
        self.shared.routes.switch(self.node.index, serving);
        let serving = self.shared.routes.serving(self.node.index);
        if let Err(e) = self.feed(AgentInput::Restarted { serving }, None).await {
            tracing::warn!(node = %self.node.name, "restart: {e:#}");
        }
    }

    async fn forever(&mut self) {
        let mut backoff = Backoff::for_node(&self.node.name, BACKOFF_BASE_MS, BACKOFF_MAX_MS);
        loop {
            let connected = self.connect().await;
            let end = match connected {
                Ok(conn) => {
                    backoff.reset();
                    self.shared.stats.connected.fetch_add(1, Ordering::Relaxed);
                    let end = self.session(conn).await;
                    self.shared.stats.connected.fetch_sub(1, Ordering::Relaxed);
                    self.conn = None;
                    end
                }
                Err(e) => {
                    tracing::debug!(node = %self.node.name, "cannot reach the controller: {e:#}");
                    self.shared
                        .stats
                        .connect_failures
                        .fetch_add(1, Ordering::Relaxed);
                    End::Lost
                }
            };
            match end {
                End::Lost => tokio::time::sleep(backoff.next_delay()).await,
                End::Silent => tokio::time::sleep(self.shared.silent_for).await,
                End::Crashed => {
                    tokio::time::sleep(self.shared.crash_restart).await;
                    self.restart().await;
                }
            }
        }
    }

    async fn connect(&self) -> anyhow::Result<AgentConnection> {
        let identity =
            ClientIdentity::from_pem_files(&self.shared.ca, &self.node.cert, &self.node.key)
                .context("loading the node's TLS identity")?;
        // Bounded: 10,000 handshakes at once would time each other out.
        let _permit = self
            .shared
            .handshakes
            .acquire()
            .await
            .context("handshake semaphore closed")?;
        let started = Instant::now();
        let conn =
            AgentConnection::connect(self.shared.controller, &self.shared.server_name, identity)
                .await?;
        self.shared.stats.handshake(started.elapsed());
        Ok(conn)
    }

    async fn session(&mut self, conn: AgentConnection) -> End {
        // The endpoint owns the UDP socket: kept until the session ends.
        let (_endpoint, connection, control) = conn.into_parts();
        let (mut tx, mut rx) = control.split();
        let (inbox_tx, mut inbox) = mpsc::channel(INBOX_MAX);
        let reader = tokio::spawn(async move {
            loop {
                let inbound = match rx.recv().await {
                    Ok(FrameBody::ToAgent(cmd)) => Inbound::Command(cmd),
                    Ok(FrameBody::ReadBackRequest { request }) => Inbound::ReadBack { request },
                    Ok(_) | Err(_) => return,
                };
                if inbox_tx.send(inbound).await.is_err() {
                    return;
                }
            }
        });
        self.conn = Some(connection.clone());
        let end = match self.session_loop(&mut tx, &mut inbox).await {
            Ok(end) => end,
            Err(e) => {
                tracing::debug!(node = %self.node.name, "session ended: {e:#}");
                End::Lost
            }
        };
        reader.abort();
        connection.close(0u32.into(), b"simulated agent leaves");
        end
    }

    async fn session_loop(
        &mut self,
        tx: &mut ControlSender,
        inbox: &mut mpsc::Receiver<Inbound>,
    ) -> anyhow::Result<End> {
        self.feed(AgentInput::Connected, Some(tx)).await?;
        let mut retry = tokio::time::interval(self.shared.retry);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if let Some(end) = self.ending.take() {
                return Ok(end);
            }
            tokio::select! {
                inbound = inbox.recv() => match inbound {
                    Some(Inbound::Command(cmd)) => {
                        self.note_reply(&cmd);
                        self.feed(AgentInput::Command(cmd), Some(tx)).await?;
                    }
                    Some(Inbound::ReadBack { request }) => {
                        let observation = self.probe();
                        let serving = self.shared.routes.serving(self.node.index);
                        tx.send(&FrameBody::ReadBackReply { request, observation, serving })
                            .await
                            .context("sending a readback")?;
                    }
                    None => return Ok(End::Lost),
                },
                _ = retry.tick() => self.feed(AgentInput::Retry, Some(tx)).await?,
            }
        }
    }

    /// A commit reply for the outstanding request: its latency.
    fn note_reply(&mut self, cmd: &ToAgent) {
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

    /// One input through the core: check and journal its events, act on
    /// them, then perform its effects (results feed back in). A fault
    /// strikes right after the step that triggers it is journaled.
    async fn feed(
        &mut self,
        input: AgentInput,
        mut tx: Option<&mut ControlSender>,
    ) -> anyhow::Result<()> {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let out = agent_step(&self.journal, input);
            let before = self.journal;
            for event in &out.events {
                // Kept on (TIGER_STYLE), as in the real agent: an event that
                // breaks a rule must never reach the journal or the route.
                if let Err(v) = invariants::check_agent_event(&self.journal, event) {
                    panic!("agent core broke a rule on {}: {v}", self.node.name);
                }
                agent_apply(&mut self.journal, event);
            }
            for event in &out.events {
                if self.strikes(event) {
                    return Ok(());
                }
                self.enact(&before, event).await;
            }
            for effect in out.effects {
                queue.extend(self.perform(effect, tx.as_deref_mut()).await?);
            }
        }
        Ok(())
    }

    /// Whether a fault strikes on `event` (journaled already).
    fn strikes(&mut self, event: &AgentEvent) -> bool {
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

    /// Make a journaled event true in the simulated world.
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

    async fn perform(
        &mut self,
        effect: AgentEffect,
        tx: Option<&mut ControlSender>,
    ) -> anyhow::Result<Option<AgentInput>> {
        Ok(match effect {
            AgentEffect::ProbeRoute => Some(AgentInput::Probed(self.probe())),
            AgentEffect::ObserveStaged if self.conn.is_some() => {
                let op = self.journal.op.map(|o| o.release);
                Some(AgentInput::StageObserved(match (op, self.staged) {
                    (Some(want), Some(have)) if want == have => Observed::ReVerified,
                    _ => Observed::Absent,
                }))
            }
            // Offline the table stays unread (see the real agent).
            AgentEffect::ObserveStaged => None,
            AgentEffect::StageArtifact => self.stage().await,
            AgentEffect::Send(msg) => {
                if let ToController::CommitRequest { op } = msg {
                    if self.asked.is_none_or(|(asked, _)| asked != op) {
                        self.asked = Some((op, Instant::now()));
                    }
                }
                if let Some(tx) = tx {
                    tx.send(&FrameBody::ToController(msg))
                        .await
                        .context("sending to the controller")?;
                    // What it runs on goes with every Hello, as the real
                    // agent sends it.
                    if matches!(msg, ToController::Hello { .. }) {
                        let platform = self.node.platform;
                        tx.send(&FrameBody::ToController(ToController::Platform {
                            platform,
                        }))
                        .await
                        .context("sending the platform to the controller")?;
                    }
                }
                None
            }
        })
    }

    /// Fetch the op's bundle over the real bundle stream (digest-checked);
    /// "installing" it is remembering it staged.
    async fn stage(&mut self) -> Option<AgentInput> {
        let op = self.journal.op?;
        let conn = self.conn.clone()?;
        match protocol::quic::fetch_bundle(&conn, op.release).await {
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

    fn probe(&self) -> model::RouteObservation {
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
