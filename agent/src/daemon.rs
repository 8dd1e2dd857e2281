//! The agent daemon: the `model::agent` core driven by real effects.
//!
//! The loop is handle → journal (fsync) → act, in that order: a record is
//! durable before the agent does anything on its account. The daemon holds
//! no rule of its own: what a command means is `agent_step`'s to decide.

use crate::config::{AgentConfig, HoldPoint};
use crate::journal::{Journal, Record, Stage, ATTEMPT_BUDGET};
use crate::probe::{probe, ProbeExpect};
use crate::proxy::{self, Backend, Route};
use crate::recovery::{self, ErrorClass, Exit, Observed, Position};
use crate::staging::{self, Release, StageError};
use crate::supervisor::{route_process, AppSpec, Instance};
use anyhow::Context;
use ed25519_dalek::VerifyingKey;
use model::agent::{agent_step, AgentEffect, AgentInput, AgentOp, AgentStage};
use model::{Digest, StageRefusal, ToController};
use protocol::frame::FrameBody;
use protocol::quic::{AgentConnection, Backoff, ControlSender};
use protocol::tls::ClientIdentity;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// How often the supervisor looks at app processes.
pub const SUPERVISE_MS: u64 = 1_000;
/// Upper bound on commands queued from the controller.
pub const INBOX_MAX: usize = 64;

/// The running agent.
pub struct Agent {
    cfg: AgentConfig,
    allow_faults: bool,
    key: VerifyingKey,
    journal: Journal,
    releases: HashMap<Digest, Release>,
    instances: HashMap<Digest, Instance>,
    route: Route,
    conn: Option<quinn::Connection>,
    /// Whether the configured fault hold already happened (once per process).
    held: bool,
    /// Whether the last failed fetch was the controller saying it has no
    /// such bundle: names the refusal when the budget runs out. In memory
    /// only; after a restart a spent budget is reported without it.
    last_fetch_missing: bool,
}

impl Agent {
    /// Open the journal, bring up the public route, and reconstruct what
    /// actually serves before anything is reported.
    pub async fn start(cfg: AgentConfig, allow_faults: bool) -> anyhow::Result<Agent> {
        if allow_faults && cfg.faults.any() {
            tracing::warn!("FAULT INJECTION ENABLED on {}: {:?}", cfg.node, cfg.faults);
        } else if cfg.faults.any() {
            tracing::warn!(
                "[faults] present but ignored: start with --allow-fault-injection to use it"
            );
        }
        let key = protocol::bundle::load_verifying_key(&cfg.bundles.pubkey).with_context(|| {
            format!("loading bundle public key {}", cfg.bundles.pubkey.display())
        })?;
        let journal_dir = cfg.data_dir.join("journal");
        let journal = Journal::open(&journal_dir)
            .with_context(|| format!("opening the journal in {}", journal_dir.display()))?;
        let public = std::net::SocketAddr::new(cfg.public_ip, cfg.public_port);
        let listener = tokio::net::TcpListener::bind(public)
            .await
            .with_context(|| format!("binding the public route {public}"))?;
        let route = Route::default();
        tokio::spawn(proxy::serve(listener, route.clone()));
        let mut agent = Agent {
            cfg,
            allow_faults,
            key,
            journal,
            releases: HashMap::new(),
            instances: HashMap::new(),
            route,
            conn: None,
            held: false,
            last_fetch_missing: false,
        };
        agent.reconstruct().await?;
        Ok(agent)
    }

    /// Bring back what the journal says the route serves, then tell the core
    /// what the route *actually* forwards to.
    async fn reconstruct(&mut self) -> anyhow::Result<()> {
        if let Some(serving) = self.journal.state.serving {
            match self.ready(serving).await {
                Ok(backend) => self.route.switch(Some(backend)),
                Err(e) => tracing::warn!("cannot bring back {serving}: {e}"),
            }
        }
        let serving = self.route.current().map(|b| b.release);
        let (observation, _) = self.probe_route().await;
        tracing::info!(node = %self.cfg.node, ?serving, %observation, "reconstructed what serves");
        self.feed(AgentInput::Restarted { serving }, None).await
    }

    /// Connect, serve the session, back off, forever.
    pub async fn run(mut self) -> anyhow::Result<()> {
        let mut backoff = Backoff::for_node(
            &self.cfg.node,
            self.cfg.timing.backoff_base_ms,
            self.cfg.timing.backoff_max_ms,
        );
        loop {
            let identity = ClientIdentity::from_pem_files(
                &self.cfg.tls.ca,
                &self.cfg.tls.cert,
                &self.cfg.tls.key,
            )
            .context("loading the node's TLS identity")?;
            match AgentConnection::connect(
                self.cfg.controller.addr,
                &self.cfg.controller.server_name,
                identity,
            )
            .await
            {
                Ok(conn) => {
                    backoff.reset();
                    tracing::info!("connected to the controller");
                    if let Err(e) = self.session(conn).await {
                        tracing::warn!("session ended: {e:#}");
                    }
                    self.conn = None;
                }
                Err(e) => tracing::warn!("cannot reach the controller: {e}"),
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    async fn session(&mut self, conn: AgentConnection) -> anyhow::Result<()> {
        let (_endpoint, connection, control) = conn.into_parts();
        let (mut tx, mut rx) = control.split();
        let (inbox_tx, mut inbox) = tokio::sync::mpsc::channel(INBOX_MAX);
        let reader = tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(FrameBody::ToAgent(cmd)) => {
                        if inbox_tx.send(cmd).await.is_err() {
                            return;
                        }
                    }
                    Ok(other) => {
                        tracing::warn!("unexpected frame on the control stream: {other:?}");
                        return;
                    }
                    Err(e) => {
                        tracing::info!("control stream closed: {e}");
                        return;
                    }
                }
            }
        });
        self.conn = Some(connection);
        let result = self.session_loop(&mut tx, &mut inbox).await;
        reader.abort();
        result
    }

    async fn session_loop(
        &mut self,
        tx: &mut ControlSender,
        inbox: &mut tokio::sync::mpsc::Receiver<model::ToAgent>,
    ) -> anyhow::Result<()> {
        self.feed(AgentInput::Connected, Some(tx)).await?;
        let mut retry = tokio::time::interval(Duration::from_millis(self.cfg.timing.retry_ms));
        let mut supervise = tokio::time::interval(Duration::from_millis(SUPERVISE_MS));
        loop {
            tokio::select! {
                cmd = inbox.recv() => match cmd {
                    Some(cmd) => {
                        tracing::info!(?cmd, "command");
                        self.feed(AgentInput::Command(cmd), Some(tx)).await?;
                    }
                    None => anyhow::bail!("connection to the controller lost"),
                },
                _ = retry.tick() => self.feed(AgentInput::Retry, Some(tx)).await?,
                _ = supervise.tick() => self.supervise().await,
            }
        }
    }

    /// One input through the core: journal its events, act on them, then
    /// perform its effects. Probes feed their result back in.
    async fn feed(
        &mut self,
        input: AgentInput,
        mut tx: Option<&mut ControlSender>,
    ) -> anyhow::Result<()> {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let out = agent_step(&self.journal.state, input);
            if cfg!(debug_assertions) {
                let mut state = self.journal.state;
                for event in &out.events {
                    if let Err(v) = invariants::check_agent_event(&state, event) {
                        panic!("agent core broke a rule: {v}");
                    }
                    model::agent::agent_apply(&mut state, event);
                }
            }
            let before = self.journal.state;
            self.journal
                .append(out.events.iter().copied().map(Record::Core).collect())
                .context("journal append (fatal: cannot act without a durable record)")?;
            for event in &out.events {
                tracing::info!(node = %self.cfg.node, "{event}");
                self.enact(&before, event).await;
            }
            for effect in out.effects {
                match effect {
                    AgentEffect::ProbeRoute => {
                        let restoring = out
                            .events
                            .iter()
                            .any(|e| matches!(e, model::agent::AgentEvent::Restored { .. }));
                        let switching = out
                            .events
                            .iter()
                            .any(|e| matches!(e, model::agent::AgentEvent::Switched { .. }));
                        if restoring {
                            self.hold(HoldPoint::RestoreProbe).await;
                        } else if switching {
                            self.hold(HoldPoint::Probe).await;
                        }
                        let (observation, answer) = self.probe_route().await;
                        tracing::info!(%observation, ?answer, "route probe");
                        queue.push_back(AgentInput::Probed(observation));
                    }
                    AgentEffect::Send(msg) => {
                        if let ToController::CommitRequest { .. } = msg {
                            // Ask to commit only what is fetched, verified and staged.
                            match self.ensure_staged().await? {
                                Staged::Yes => {}
                                Staged::NotYet => continue,
                                Staged::Refused(refusal) => {
                                    queue.push_back(AgentInput::StageRefused(refusal));
                                    continue;
                                }
                            }
                        }
                        if let Some(tx) = tx.as_deref_mut() {
                            tx.send(&FrameBody::ToController(msg))
                                .await
                                .context("sending to the controller")?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Make a journaled event true in the world.
    async fn enact(&mut self, before: &model::agent::AgentState, event: &model::agent::AgentEvent) {
        use model::agent::AgentEvent;
        match *event {
            AgentEvent::Switched { op, .. } => {
                let Some(current) = self.journal.state.op.filter(|o| o.id == op) else {
                    return;
                };
                self.hold(HoldPoint::Switch).await;
                match self.ready(current.release).await {
                    Ok(backend) => {
                        // Probe the new instance directly before users see it;
                        // the route probe after the switch is the evidence.
                        if let Some(release) = self.releases.get(&current.release) {
                            let process = self
                                .instances
                                .get_mut(&current.release)
                                .map(Instance::sample);
                            let (direct, _) =
                                probe(backend.port, &release.probe_expect(), process).await;
                            tracing::info!(%direct, "direct probe of the new instance");
                        }
                        self.route.switch(Some(backend));
                    }
                    Err(e) => {
                        tracing::warn!("cannot start {}: {e:#}", current.release);
                        self.route.switch(None);
                    }
                }
            }
            AgentEvent::Restored { op, .. } => {
                let baseline = before.op.filter(|o| o.id == op).and_then(|o| o.baseline);
                match baseline {
                    Some(b) => match self.ready(b).await {
                        Ok(backend) => self.route.switch(Some(backend)),
                        Err(e) => {
                            tracing::warn!("cannot restore {b}: {e:#}");
                            self.route.switch(None);
                        }
                    },
                    None => self.route.switch(None),
                }
            }
            _ => {}
        }
    }

    /// A running instance of `release` (verified from disk if needed).
    async fn ready(&mut self, release: Digest) -> anyhow::Result<Backend> {
        if !self.releases.contains_key(&release) {
            let loaded = staging::load(&self.cfg.data_dir, &self.key, release)?;
            self.releases.insert(release, loaded);
        }
        let spec = {
            let r = &self.releases[&release];
            let mut env = Vec::new();
            if self.allow_faults && self.cfg.faults.answer_wrongly.contains(&release.to_hex()) {
                env.push(("HELLO_ANSWER_WRONGLY".to_string(), "1".to_string()));
            }
            if self.allow_faults && self.cfg.faults.crash_on_start.contains(&release.to_hex()) {
                env.push(("HELLO_CRASH_ON_START".to_string(), "1".to_string()));
            }
            AppSpec {
                release,
                dir: r.dir.clone(),
                run: r.manifest.run.clone(),
                env,
            }
        };
        let mut dead = None;
        if let Some(instance) = self.instances.get_mut(&release) {
            if instance.keep_alive().await {
                return Ok(Backend {
                    port: instance.port,
                    release,
                });
            }
            dead = self.instances.remove(&release);
        }
        let mut instance = Instance::start(spec).await?;
        if let Some(dead) = &dead {
            instance.carry_restarts_from(dead);
        }
        let backend = Backend {
            port: instance.port,
            release,
        };
        self.instances.insert(release, instance);
        Ok(backend)
    }

    /// Fetch, verify and stage the current op's release, with a
    /// `pending_stage` checkpoint before each stage and the fixed recovery
    /// table deciding what an interrupted stage does.
    async fn ensure_staged(&mut self) -> anyhow::Result<Staged> {
        let Some(op) = self.journal.state.op else {
            return Ok(Staged::NotYet);
        };
        if op.stage != AgentStage::AwaitingDecision {
            return Ok(Staged::Yes);
        }
        if self.releases.contains_key(&op.release) && self.journal.done.contains(&Stage::Stage) {
            return Ok(Staged::Yes);
        }
        if let Some(Record::Stopped {
            op: id, refusal, ..
        }) = self.journal.pending
        {
            if id == op.id {
                return Ok(Staged::Refused(refusal));
            }
        }
        // What is observed of the effect now: re-verify, never trust.
        let observed = match staging::load(&self.cfg.data_dir, &self.key, op.release) {
            Ok(release) => {
                self.releases.insert(op.release, release);
                Observed::ReVerified
            }
            Err(StageError::Io { .. }) => Observed::Absent,
            Err(e) => {
                return self.refuse(
                    &op,
                    Stage::Verify,
                    StageRefusal::BundleRejected,
                    e.to_string(),
                );
            }
        };
        // Where it stopped: the stage's artifact was recorded committed, or
        // only its pending checkpoint (or nothing) exists.
        let position = if self.journal.done.contains(&Stage::Stage) {
            Position::AfterArtifactCommitted
        } else {
            Position::BeforeStage
        };
        let budget_left = ATTEMPT_BUDGET.saturating_sub(self.journal.spent);
        let exit = recovery::exit(
            Some(position),
            Some(ErrorClass::Transient),
            Some(observed),
            budget_left,
        );
        // Operators (and the scenario harness) read which row was taken.
        tracing::info!(
            op = %op.id,
            "recovery table: {position:?}, transient, {observed:?}, budget {budget_left} -> {exit:?}"
        );
        match exit {
            Exit::Resume => {
                self.journal.append(vec![Record::Done {
                    op: op.id,
                    stage: Stage::Stage,
                }])?;
                return Ok(Staged::Yes);
            }
            Exit::Stop => {
                // The table stops on a spent budget or an effect it could
                // not show good or absent.
                let refusal = if budget_left == 0 && self.last_fetch_missing {
                    StageRefusal::BundleUnavailable
                } else if budget_left == 0 {
                    StageRefusal::AttemptBudgetSpent
                } else {
                    StageRefusal::EffectUnknown
                };
                return self.refuse(&op, Stage::Fetch, refusal, refusal.to_string());
            }
            Exit::Retry => {}
        }
        let Some(conn) = self.conn.clone() else {
            return Ok(Staged::NotYet);
        };
        self.journal.attempts += 1;
        self.journal.append(vec![Record::Pending {
            op: op.id,
            stage: Stage::Fetch,
            fingerprint: op.release,
            attempt_id: self.journal.attempts,
            budget_left: budget_left.saturating_sub(1),
        }])?;
        self.hold(HoldPoint::Fetch).await;
        let bytes = match protocol::quic::fetch_bundle(&conn, op.release).await {
            Ok(bytes) => bytes,
            Err(e) => {
                self.last_fetch_missing =
                    matches!(e, protocol::quic::TransportError::BundleMissing(_));
                tracing::warn!(
                    "fetching {} failed (transient, will retry): {e}",
                    op.release
                );
                return Ok(Staged::NotYet);
            }
        };
        self.journal.append(vec![Record::Done {
            op: op.id,
            stage: Stage::Fetch,
        }])?;
        self.hold(HoldPoint::Verify).await;
        match staging::install(&self.cfg.data_dir, &self.key, op.release, &bytes) {
            Ok(release) => {
                tracing::info!(
                    "staged {} ({} {})",
                    op.release,
                    release.manifest.name,
                    release.manifest.version
                );
                self.releases.insert(op.release, release);
                self.hold(HoldPoint::Stage).await;
                self.journal.append(vec![
                    Record::Done {
                        op: op.id,
                        stage: Stage::Verify,
                    },
                    Record::Done {
                        op: op.id,
                        stage: Stage::Stage,
                    },
                ])?;
                Ok(Staged::Yes)
            }
            Err(e) if e.permanent() => self.refuse(
                &op,
                Stage::Verify,
                StageRefusal::BundleRejected,
                e.to_string(),
            ),
            Err(e) => {
                tracing::warn!("staging failed (transient): {e}");
                Ok(Staged::NotYet)
            }
        }
    }

    /// Stop the op for good: journal why (durably, before anything is
    /// reported), then refuse it.
    fn refuse(
        &mut self,
        op: &AgentOp,
        stage: Stage,
        refusal: StageRefusal,
        reason: String,
    ) -> anyhow::Result<Staged> {
        tracing::warn!(op = %op.id, ?stage, "stopping: {refusal}: {reason}");
        self.journal.append(vec![Record::Stopped {
            op: op.id,
            stage,
            refusal,
            reason,
        }])?;
        Ok(Staged::Refused(refusal))
    }

    /// Fault injection: stop here once for `hold_ms` if configured, so a
    /// test can SIGKILL the agent inside this stage.
    async fn hold(&mut self, point: HoldPoint) {
        if !self.allow_faults || self.held || self.cfg.faults.hold_at != Some(point) {
            return;
        }
        self.held = true;
        tracing::warn!(
            "FAULT INJECTION: holding at {point} for {} ms",
            self.cfg.faults.hold_ms
        );
        tokio::time::sleep(Duration::from_millis(self.cfg.faults.hold_ms)).await;
    }

    async fn probe_route(&mut self) -> (model::RouteObservation, crate::probe::ProbeAnswer) {
        let current = self.route.current();
        let expect = current
            .and_then(|b| self.releases.get(&b.release))
            .map(Release::probe_expect)
            .unwrap_or(ProbeExpect {
                path: "/".into(),
                expect_status: 200,
                expect_body: String::new(),
            });
        let process = route_process(current, &mut self.instances);
        let (mut observation, answer) = probe(self.cfg.public_port, &expect, process).await;
        // The artifact behind the route, re-read from disk: a proof compares
        // it with the intended release instead of trusting the report.
        observation.artifact =
            current.map(|b| staging::read_back(&self.cfg.data_dir, &self.key, b.release));
        (observation, answer)
    }

    async fn supervise(&mut self) {
        for instance in self.instances.values_mut() {
            if !instance.keep_alive().await {
                tracing::warn!(release = %instance.spec.release, "app instance is down");
            }
        }
    }
}

/// Whether the current op's release is staged.
enum Staged {
    Yes,
    NotYet,
    /// Stopped for good, and why (told to the controller).
    Refused(StageRefusal),
}
