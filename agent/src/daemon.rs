//! The agent daemon: the `model::agent` core driven by real effects.
//!
//! The loop is handle → journal (fsync) → act, in that order: a record is
//! durable before the agent does anything on its account. The daemon holds
//! no rule of its own: what a command means is `agent_step`'s to decide.

use crate::config::{AgentConfig, HoldPoint};
use crate::journal::{Journal, Record, Stage};
use crate::probe::{probe, ProbeExpect};
use crate::proxy::{self, Backend, Route};
use crate::recovery::{self, ErrorClass, Exit, Observed};
use crate::staging::{self, Installed, Release, StageError};
use crate::supervisor::{route_process, AppSpec, Instance};
use anyhow::Context;
use ed25519_dalek::VerifyingKey;
use model::agent::{agent_step, AgentEffect, AgentInput, AgentOp, AgentStage};
use model::{Digest, StageRefusal, ToController};
use protocol::frame::{FrameBody, READBACK_INTERVAL_MIN_MS};
use protocol::quic::{AgentConnection, Backoff, ControlSender};
use protocol::tls::ClientIdentity;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How often the supervisor looks at app processes.
pub const SUPERVISE_MS: u64 = 1_000;
/// Upper bound on commands queued from the controller.
pub const INBOX_MAX: usize = 64;

/// What the control-stream reader hands the session loop.
#[derive(Debug)]
enum Inbound {
    /// A command for the core.
    Command(model::ToAgent),
    /// A readback request: answered from a fresh probe, outside the core.
    ReadBack {
        /// The controller's request id, echoed in the reply.
        request: u64,
    },
}

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
        let journal_dir = cfg.data_dir.join(crate::journal::JOURNAL_DIR);
        let mut journal = Journal::open(&journal_dir)
            .with_context(|| format!("opening the journal in {}", journal_dir.display()))?;
        // A restart is a new attempt of the op that was live, never a new op.
        if let Some(op) = journal.state.op {
            if !matches!(op.stage, AgentStage::Reporting(..)) {
                let attempt_id = journal.next_attempt_id();
                journal.append(vec![Record::Resumed {
                    op: op.id,
                    attempt_id,
                }])?;
                tracing::info!(
                    "restarted with {} live: resuming as attempt {attempt_id}",
                    op.id
                );
            }
        }
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
                let inbound = match rx.recv().await {
                    Ok(FrameBody::ToAgent(cmd)) => Inbound::Command(cmd),
                    Ok(FrameBody::ReadBackRequest { request }) => Inbound::ReadBack { request },
                    Ok(other) => {
                        tracing::warn!("unexpected frame on the control stream: {other:?}");
                        return;
                    }
                    Err(e) => {
                        tracing::info!("control stream closed: {e}");
                        return;
                    }
                };
                if inbox_tx.send(inbound).await.is_err() {
                    return;
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
        inbox: &mut tokio::sync::mpsc::Receiver<Inbound>,
    ) -> anyhow::Result<()> {
        self.feed(AgentInput::Connected, Some(tx)).await?;
        let mut retry = tokio::time::interval(Duration::from_millis(self.cfg.timing.retry_ms));
        let mut supervise = tokio::time::interval(Duration::from_millis(SUPERVISE_MS));
        // When the latest readback was answered, for READBACK_INTERVAL_MIN_MS.
        let mut answered_at: Option<Instant> = None;
        loop {
            tokio::select! {
                inbound = inbox.recv() => match inbound {
                    Some(Inbound::Command(cmd)) => {
                        tracing::info!(?cmd, "command");
                        self.feed(AgentInput::Command(cmd), Some(tx)).await?;
                    }
                    Some(Inbound::ReadBack { request }) => {
                        if readback_due(answered_at, Instant::now()) {
                            self.read_back(request, tx).await?;
                            answered_at = Some(Instant::now());
                        } else {
                            // Re-sending the previous observation would show a
                            // stale value as current: the controller times out
                            // and says the agent did not answer instead.
                            tracing::warn!(
                                request,
                                "readback asked for less than {READBACK_INTERVAL_MIN_MS} ms after the last one: dropped"
                            );
                        }
                    }
                    None => anyhow::bail!("connection to the controller lost"),
                },
                _ = retry.tick() => self.feed(AgentInput::Retry, Some(tx)).await?,
                _ = supervise.tick() => self.supervise().await,
            }
        }
    }

    /// Answer a readback: probe the route and re-read its artifact now. A
    /// readback changes nothing: no journal record, no input to the core.
    async fn read_back(&mut self, request: u64, tx: &mut ControlSender) -> anyhow::Result<()> {
        let serving = self.route.current().map(|b| b.release);
        let (observation, _) = self.probe_route().await;
        tracing::info!(request, ?serving, %observation, artifact = ?observation.artifact, "readback");
        tx.send(&FrameBody::ReadBackReply {
            request,
            observation,
            serving,
        })
        .await
        .context("sending a readback to the controller")
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
    /// `pending_stage` checkpoint before each stage, each failure journaled
    /// with its error class, and the fixed recovery table (SPEC §5)
    /// deciding what happens before every attempt and after a permanent
    /// failure.
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
        if let Some(refusal) = self.journal.stopped(op.id) {
            return Ok(Staged::Refused(refusal));
        }
        match self.consult_table(&op)? {
            Table::Resumed => return Ok(Staged::Yes),
            Table::Stopped(refusal) => return Ok(Staged::Refused(refusal)),
            Table::Retry => {}
        }
        let Some(conn) = self.conn.clone() else {
            return Ok(Staged::NotYet);
        };
        let attempt_id = self.journal.next_attempt_id();
        self.checkpoint(&op, Stage::Fetch, attempt_id)?;
        self.hold(HoldPoint::Fetch).await;
        let bytes = match protocol::quic::fetch_bundle(&conn, op.release).await {
            Ok(bytes) => bytes,
            Err(e) => {
                // The network and the controller's store can both get
                // better: transient, retried while the budget lasts.
                let missing = matches!(e, protocol::quic::TransportError::BundleMissing(_));
                return self.failed(&op, Stage::Fetch, ErrorClass::Transient, missing, e);
            }
        };
        self.done(&op, Stage::Fetch)?;
        self.checkpoint(&op, Stage::Verify, attempt_id)?;
        self.hold(HoldPoint::Verify).await;
        if let Err(e) = staging::verify(&self.key, op.release, &bytes) {
            return self.failed(&op, Stage::Verify, class_of(&e), false, e);
        }
        self.done(&op, Stage::Verify)?;
        self.checkpoint(&op, Stage::Stage, attempt_id)?;
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
                self.done(&op, Stage::Stage)?;
                Ok(Staged::Yes)
            }
            Err(e) => self.failed(&op, Stage::Stage, class_of(&e), false, e),
        }
    }

    /// The fixed table over what the journal and the disk show now: where
    /// the op stopped, how its latest stage failed, and what is observed of
    /// the staged release (re-read and re-verified, never trusted).
    fn consult_table(&mut self, op: &AgentOp) -> anyhow::Result<Table> {
        let position = self.journal.position(op.id, op.release);
        let error = self.journal.error_class();
        let installed = staging::observe(&self.cfg.data_dir, &self.key, op.release);
        let observed = match &installed {
            Installed::ReVerified(_) => Observed::ReVerified,
            Installed::Absent => Observed::Absent,
            Installed::Unknown(_) => Observed::Unknown,
        };
        let budget_left = self.journal.budget_left();
        let exit = recovery::exit(position, Some(error), Some(observed), budget_left);
        // Operators (and the scenario harness) read which row was taken.
        tracing::info!(
            op = %op.id,
            attempt = self.journal.attempts,
            "recovery table: {position:?}, {error:?}, {observed:?}, budget {budget_left} -> {exit:?}"
        );
        match exit {
            Exit::Retry => Ok(Table::Retry),
            Exit::Resume => {
                if let Installed::ReVerified(release) = installed {
                    self.releases.insert(op.release, *release);
                }
                self.done(op, Stage::Stage)?;
                Ok(Table::Resumed)
            }
            Exit::Stop => {
                let (refusal, reason) = match (&installed, position) {
                    _ if error == ErrorClass::Permanent => (
                        StageRefusal::BundleRejected,
                        self.journal.failure_reason().unwrap_or_default(),
                    ),
                    (_, None) => (
                        StageRefusal::EffectUnknown,
                        "the latest checkpoint names another op or other input".to_string(),
                    ),
                    (Installed::Unknown(e), _) => (StageRefusal::EffectUnknown, e.to_string()),
                    _ if self.journal.bundle_missing() => (
                        StageRefusal::BundleUnavailable,
                        self.journal.failure_reason().unwrap_or_default(),
                    ),
                    _ => (
                        StageRefusal::AttemptBudgetSpent,
                        self.journal.failure_reason().unwrap_or_default(),
                    ),
                };
                let stage = self.journal.checkpoint_stage().unwrap_or(Stage::Fetch);
                self.refuse(op, stage, refusal, reason)?;
                Ok(Table::Stopped(refusal))
            }
        }
    }

    /// `pending_stage`: durably, before the stage runs.
    fn checkpoint(&mut self, op: &AgentOp, stage: Stage, attempt_id: u32) -> anyhow::Result<()> {
        let budget_left = if stage == Stage::Fetch {
            self.journal.budget_left().saturating_sub(1)
        } else {
            self.journal.budget_left()
        };
        self.journal.append(vec![Record::Pending {
            op: op.id,
            stage,
            fingerprint: op.release,
            attempt_id,
            budget_left,
        }])?;
        Ok(())
    }

    /// The stage's artifact is committed.
    fn done(&mut self, op: &AgentOp, stage: Stage) -> anyhow::Result<()> {
        self.journal
            .append(vec![Record::Done { op: op.id, stage }])?;
        Ok(())
    }

    /// Journal how a stage failed. A permanent error goes straight to the
    /// table (which stops); a transient one is tried again on the next tick
    /// if the table, with the budget left, says retry.
    fn failed(
        &mut self,
        op: &AgentOp,
        stage: Stage,
        class: ErrorClass,
        bundle_missing: bool,
        error: impl std::fmt::Display,
    ) -> anyhow::Result<Staged> {
        let reason = error.to_string();
        tracing::warn!(op = %op.id, ?stage, ?class, "stage failed: {reason}");
        self.journal.append(vec![Record::Failed {
            op: op.id,
            stage,
            class,
            bundle_missing,
            reason,
        }])?;
        if class == ErrorClass::Transient {
            return Ok(Staged::NotYet);
        }
        match self.consult_table(op)? {
            Table::Stopped(refusal) => Ok(Staged::Refused(refusal)),
            // The table never goes on after a permanent error; were it to,
            // waiting for the next tick is the safe answer.
            Table::Retry | Table::Resumed => Ok(Staged::NotYet),
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
    ) -> anyhow::Result<()> {
        tracing::warn!(op = %op.id, ?stage, "stopping: {refusal}: {reason}");
        self.journal.append(vec![Record::Stopped {
            op: op.id,
            stage,
            refusal,
            reason,
        }])?;
        Ok(())
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
                expect_json: None,
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

/// Whether a readback may be answered at `now`, the latest one having been
/// answered at `answered_at`: at most one per [`READBACK_INTERVAL_MIN_MS`],
/// counted from the end of the previous answer so the session loop always
/// gets time for commands between two probes.
fn readback_due(answered_at: Option<Instant>, now: Instant) -> bool {
    match answered_at {
        None => true,
        Some(at) => {
            now.saturating_duration_since(at) >= Duration::from_millis(READBACK_INTERVAL_MIN_MS)
        }
    }
}

/// The error class of a staging error (SPEC §5's second axis).
fn class_of(error: &StageError) -> ErrorClass {
    if error.permanent() {
        ErrorClass::Permanent
    } else {
        ErrorClass::Transient
    }
}

/// What the recovery table decided before an attempt.
enum Table {
    /// Run the stages (again).
    Retry,
    /// The staged release was re-verified: go on without redoing it.
    Resumed,
    /// Stopped for good (journaled), and why.
    Stopped(StageRefusal),
}

/// Whether the current op's release is staged.
enum Staged {
    Yes,
    NotYet,
    /// Stopped for good, and why (told to the controller).
    Refused(StageRefusal),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readbacks_are_spaced_by_the_minimum_interval() {
        let t0 = Instant::now();
        let interval = Duration::from_millis(READBACK_INTERVAL_MIN_MS);
        assert!(readback_due(None, t0), "the first readback is answered");
        assert!(!readback_due(Some(t0), t0));
        assert!(!readback_due(
            Some(t0),
            t0 + interval - Duration::from_millis(1)
        ));
        assert!(readback_due(Some(t0), t0 + interval));
        // A clock reading before the last answer is never "due".
        assert!(!readback_due(Some(t0 + interval), t0));
    }
}
