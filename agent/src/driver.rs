//! The agent's driver loop, written once: the `model::agent` core driven
//! session by session over a control stream. `fleetweft-agent`
//! (`daemon.rs`) and the fleet simulator's agents (`fleetsim`) both run it;
//! they differ only in what a [`Host`] does: the real journal, staging,
//! app instances and route, or the simulator's memory and shared routes.
//!
//! The loop is handle → journal → act, in that order: the core's events are
//! checked against the agent rules (kept on in release builds, TIGER_STYLE:
//! the agent's state is one op, so checking costs O(1) per event) and made
//! durable by the host before anything is done on their account; then each
//! is enacted, then the core's effects are performed, their results fed
//! back in. Which controller to dial, and what to do between sessions, is
//! the caller's (the daemon finds the leader among several; the simulator
//! has one controller and its faults).

use model::agent::{agent_step, AgentEffect, AgentEvent, AgentInput, AgentState};
use model::{Digest, RouteObservation, ToAgent, ToController};
use protocol::frame::{FrameBody, READBACK_INTERVAL_MIN_MS};
use protocol::quic::{AgentConnection, ControlReceiver, ControlSender};
use std::collections::VecDeque;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::liveness::Watch;

/// Upper bound on frames queued from the controller to one agent.
pub const INBOX_MAX: usize = 64;

/// What a driven agent does with the world: the side the real agent and
/// the simulator do differently. Every method is called from the driver
/// loop only, one at a time.
pub trait Host: Send {
    /// The node's id, for messages.
    fn node(&self) -> &str;

    /// The core's state as the journal holds it.
    fn state(&self) -> &AgentState;

    /// Makes `events` (checked against the agent rules already) durable
    /// and applies them to [`Host::state`], before any is acted on. An
    /// error stops the session: the agent cannot act without a record.
    fn journal(&mut self, events: &[AgentEvent]) -> anyhow::Result<()>;

    /// Whether the agent stops right after `event` was journaled, before
    /// acting on it (the simulator's crash and silence faults): the rest of
    /// the step is dropped and the session ends with [`Ended::Halted`].
    fn halts(&mut self, _event: &AgentEvent) -> bool {
        false
    }

    /// Makes the journaled `event` true in the world (`before`: the state
    /// before its step).
    fn enact(&mut self, before: &AgentState, event: &AgentEvent)
        -> impl Future<Output = ()> + Send;

    /// `AgentEffect::ProbeRoute`, after the step that produced `events`.
    fn probe(&mut self, events: &[AgentEvent]) -> impl Future<Output = RouteObservation> + Send;

    /// `AgentEffect::ObserveStaged` while connected: what is staged of the
    /// current op's release (offline the driver drops it, as
    /// `AgentEffect::runs_offline` says).
    fn observe_staged(&mut self) -> Option<AgentInput>;

    /// `AgentEffect::StageArtifact` while connected, over `conn`.
    fn stage(
        &mut self,
        conn: &quinn::Connection,
    ) -> impl Future<Output = Option<AgentInput>> + Send;

    /// `AgentEffect::RunMigration` (issue #24 item 2): snapshot the app's
    /// data directory, run the release's `migrate` command, and put the
    /// snapshot back if it failed; `Migrated` or `MigrationFailed`. The
    /// default is for a host whose releases never declare a migration (the
    /// simulator's): one it cannot run did not run, and changed nothing.
    fn migrate(&mut self) -> impl Future<Output = AgentInput> + Send {
        std::future::ready(AgentInput::MigrationFailed)
    }

    /// The migration the current op's release declares, read from its
    /// verified manifest once it is staged or re-verified; `None` for a
    /// release without one (and for a host whose releases never declare
    /// one).
    fn migration(&mut self) -> Option<model::agent::MigrationKind> {
        None
    }

    /// What the agent runs on, sent after every `Hello`.
    fn platform(&self) -> model::platform::Platform;

    /// A frame to send before `msg`, if any (the real agent's chunk
    /// sources go before its commit request or report).
    fn before_send(&mut self, _msg: &ToController) -> Option<FrameBody> {
        None
    }

    /// A command arrived (before the core sees it): for logs and counters.
    fn on_command(&mut self, _cmd: &ToAgent) {}

    /// The mirrors for the chunks of `release` (sent before its grant).
    fn on_mirrors(&mut self, _release: Digest, _mirrors: Vec<String>) {}

    /// A readback: the route probed now, and the release it forwards to.
    /// Changes nothing: no journal record, no input to the core.
    fn read_back(&mut self) -> impl Future<Output = (RouteObservation, Option<Digest>)> + Send;

    /// The limits applied to the instance the route forwards to, worded
    /// for the proof's process row, with its release: `None` when that
    /// release declares none (issue #24 item 4). Sent before a readback's
    /// reply.
    fn isolation(&mut self) -> Option<(Digest, String)> {
        None
    }

    /// The configuration the process behind the route was started with,
    /// when the route serves a deployment (issue #24 item 1): the
    /// deployment, and the fingerprint read back from that process's own
    /// environment (`None`: absent or unreadable). Sent as
    /// [`FrameBody::ConfigurationRead`] just before a readback's reply;
    /// `None` (nothing sent) for a plain release, and for a host whose
    /// releases never carry a configuration (the simulator's).
    fn configuration(&mut self) -> impl Future<Output = Option<(Digest, Option<Digest>)>> + Send {
        std::future::ready(None)
    }

    /// The retry timer's period: how often `AgentInput::Retry` re-sends
    /// what is outstanding and re-reads the recovery table.
    fn retry_every(&self) -> Duration;

    /// How often [`Host::supervise`] runs during a session; `None`: never
    /// (no timer is armed, which at 100,000 simulated agents matters).
    fn supervise_every(&self) -> Option<Duration> {
        None
    }

    /// Periodic care of what the host runs (the real agent's app
    /// processes).
    fn supervise(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// How a session ended without an error.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// A hot standby answered: "not the leader", and where it says the
    /// leader is (`HOST:PORT`), if it knows.
    Redirected {
        /// The leader's agents' address as the standby read it.
        leader: Option<String>,
    },
    /// [`Host::halts`] stopped the agent.
    Halted,
}

/// Whether a step ran to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Flow {
    /// Every event enacted and every effect performed.
    Done,
    /// [`Host::halts`] stopped it after journaling.
    Halted,
}

/// What the control-stream reader hands the session loop.
#[derive(Debug)]
enum Inbound {
    /// A command for the core.
    Command(ToAgent),
    /// A readback request: answered from a fresh probe, outside the core.
    ReadBack {
        /// The controller's request id, echoed in the reply.
        request: u64,
    },
    /// The node's mirrors for the chunks of `release` (sent just before
    /// its grant): transport, kept outside the core.
    Mirrors {
        /// The release the list is for.
        release: Digest,
        /// Base URLs, tried in order.
        mirrors: Vec<String>,
    },
    /// A hot standby answered the hello: "not the leader, try this".
    NotLeader {
        /// The leader's agents' address as the standby read it.
        leader: Option<String>,
    },
}

/// A [`Host`] and the connection of its session, if one is up.
pub struct Driver<H> {
    /// What the loop drives.
    pub host: H,
    conn: Option<quinn::Connection>,
}

impl<H: Host> Driver<H> {
    /// A driver of `host`, offline.
    pub fn new(host: H) -> Driver<H> {
        Driver { host, conn: None }
    }

    /// Tells the core the agent (re)started with `serving` actually
    /// behind the route (what the host brought back from its journal).
    pub async fn restarted(&mut self, serving: Option<Digest>) -> anyhow::Result<Flow> {
        self.feed(AgentInput::Restarted { serving }, None).await
    }

    /// One session on `conn`: `Connected` into the core, then commands,
    /// readbacks and retries until the connection ends, a standby sends
    /// the agent away or the host halts. `watch`, when given, ends the
    /// session once the controller stays silent too long (`liveness.rs`).
    pub async fn session(
        &mut self,
        conn: AgentConnection,
        mut watch: Option<&mut Watch>,
    ) -> anyhow::Result<Ended> {
        let (_endpoint, connection, control) = conn.into_parts();
        let (mut tx, rx) = control.split();
        let (inbox_tx, mut inbox) = tokio::sync::mpsc::channel(INBOX_MAX);
        let reader = tokio::spawn(read_control(rx, inbox_tx));
        self.conn = Some(connection);
        let result = self.session_loop(&mut tx, &mut inbox, &mut watch).await;
        reader.abort();
        self.conn = None;
        result
    }

    async fn session_loop(
        &mut self,
        tx: &mut ControlSender,
        inbox: &mut tokio::sync::mpsc::Receiver<Inbound>,
        watch: &mut Option<&mut Watch>,
    ) -> anyhow::Result<Ended> {
        if self.feed(AgentInput::Connected, Some(tx)).await? == Flow::Halted {
            return Ok(Ended::Halted);
        }
        let mut retry = first_tick_after(self.host.retry_every());
        let mut listen = watch
            .as_ref()
            .map(|_| first_tick_after(crate::liveness::SILENCE_CHECK_INTERVAL));
        let mut supervise = self.host.supervise_every().map(first_tick_after);
        // When the latest readback answer began, for READBACK_INTERVAL_MIN_MS.
        let mut answered_at: Option<Instant> = None;
        // The retry timer is armed only while the core holds an op (a
        // retry without one decides nothing); armed again, its first tick
        // is a whole period away, as after `Connected`.
        let mut retry_armed = model::agent::retry_wakes(self.host.state());
        loop {
            let armed = model::agent::retry_wakes(self.host.state());
            if armed && !retry_armed {
                retry.reset();
            }
            retry_armed = armed;
            tokio::select! {
                inbound = inbox.recv() => {
                    let Some(inbound) = inbound else {
                        anyhow::bail!("connection to the controller lost");
                    };
                    if let Some(ended) = self.inbound(inbound, tx, &mut answered_at).await? {
                        return Ok(ended);
                    }
                }
                _ = retry.tick(), if retry_armed => {
                    if self.feed(AgentInput::Retry, Some(tx)).await? == Flow::Halted {
                        return Ok(Ended::Halted);
                    }
                }
                _ = tick(&mut supervise) => self.host.supervise().await,
                _ = tick(&mut listen) => {
                    if let Some(watch) = watch.as_deref_mut() {
                        if let Err(silent) = watch.check(Instant::now()) {
                            anyhow::bail!("the controller is gone: {silent}");
                        }
                    }
                }
            }
        }
    }

    /// One frame from the controller; `Some` when it ends the session.
    async fn inbound(
        &mut self,
        inbound: Inbound,
        tx: &mut ControlSender,
        answered_at: &mut Option<Instant>,
    ) -> anyhow::Result<Option<Ended>> {
        match inbound {
            Inbound::NotLeader { leader } => return Ok(Some(Ended::Redirected { leader })),
            Inbound::Mirrors { release, mirrors } => self.host.on_mirrors(release, mirrors),
            Inbound::Command(cmd) => {
                self.host.on_command(&cmd);
                if self.feed(AgentInput::Command(cmd), Some(tx)).await? == Flow::Halted {
                    return Ok(Some(Ended::Halted));
                }
            }
            Inbound::ReadBack { request } => {
                let asked = Instant::now();
                if readback_due(*answered_at, asked) {
                    // Counted from when the answer began, not when it was
                    // sent: the controller counts its spacing from when the
                    // reply arrived, which is always later, so a request it
                    // spaces correctly is never dropped here even when this
                    // task is descheduled between sending and recording.
                    *answered_at = Some(asked);
                    self.answer_readback(request, tx).await?;
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
        }
        Ok(None)
    }

    /// A readback's answer: the route probed now, then the applied limits
    /// and the configuration read back (each when there is one), then the
    /// reply, in that order on the control stream.
    async fn answer_readback(
        &mut self,
        request: u64,
        tx: &mut ControlSender,
    ) -> anyhow::Result<()> {
        let (observation, serving) = self.host.read_back().await;
        if let Some((release, applied)) = self.host.isolation() {
            let applied = protocol::frame::isolation_text(&applied);
            tx.send(&FrameBody::Isolation { release, applied })
                .await
                .map_err(|e| {
                    anyhow::Error::new(e).context("sending the applied limits to the controller")
                })?;
        }
        if let Some((deployment, fingerprint)) = self.host.configuration().await {
            tx.send(&FrameBody::ConfigurationRead {
                deployment,
                fingerprint,
            })
            .await
            .map_err(|e| {
                anyhow::Error::new(e).context("sending the configuration read to the controller")
            })?;
        }
        tx.send(&FrameBody::ReadBackReply {
            request,
            observation,
            serving,
        })
        .await
        .map_err(|e| anyhow::Error::new(e).context("sending a readback to the controller"))
    }

    /// One input through the core: check and journal its events, act on
    /// them, then perform its effects, whose results are fed back in.
    pub async fn feed(
        &mut self,
        input: AgentInput,
        mut tx: Option<&mut ControlSender>,
    ) -> anyhow::Result<Flow> {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let before = *self.host.state();
            let out = agent_step(&before, input);
            // An event that breaks a rule must never reach the journal or
            // the route: checked on a copy before the host journals it.
            let mut state = before;
            for event in &out.events {
                if let Err(v) = invariants::check_agent_event(&state, event) {
                    panic!("agent core broke a rule on {}: {v}", self.host.node());
                }
                model::agent::agent_apply(&mut state, event);
            }
            self.host.journal(&out.events)?;
            for event in &out.events {
                if self.host.halts(event) {
                    return Ok(Flow::Halted);
                }
                self.host.enact(&before, event).await;
            }
            for effect in out.effects {
                queue.extend(self.perform(effect, &out.events, tx.as_deref_mut()).await?);
            }
        }
        Ok(Flow::Done)
    }

    /// One effect of the core; a result that goes back in, if any.
    async fn perform(
        &mut self,
        effect: AgentEffect,
        events: &[AgentEvent],
        tx: Option<&mut ControlSender>,
    ) -> anyhow::Result<Vec<AgentInput>> {
        let answer = match effect {
            AgentEffect::ProbeRoute => Some(AgentInput::Probed(self.host.probe(events).await)),
            // Offline (just restarted, before the first session) the core
            // says what still runs (`runs_offline`); it asks again for the
            // rest on `Connected`.
            effect if self.conn.is_none() && !effect.runs_offline() => None,
            AgentEffect::ObserveStaged => {
                let observed = self.host.observe_staged();
                return Ok(self.declared(observed));
            }
            AgentEffect::RunMigration => Some(self.host.migrate().await),
            AgentEffect::StageArtifact => match self.conn.clone() {
                Some(conn) => {
                    let staged = self.host.stage(&conn).await;
                    return Ok(self.declared(staged));
                }
                // The manifest comes from the controller: the reserved
                // attempt waits, and the core asks again on `Connected`.
                None => None,
            },
            // The core emits a commit request only once the release is
            // staged: nothing to hold back here.
            AgentEffect::Send(msg) => {
                if let Some(tx) = tx {
                    self.send(tx, msg).await?;
                }
                None
            }
        };
        Ok(answer.into_iter().collect())
    }

    /// A staging answer, preceded by the migration the release declares
    /// when it says the release is there whole (staged, or re-verified):
    /// the core journals the declaration before the answer moves the op
    /// on (issue #24 item 2).
    fn declared(&mut self, answer: Option<AgentInput>) -> Vec<AgentInput> {
        let whole = matches!(
            answer,
            Some(
                AgentInput::Staged
                    | AgentInput::StageObserved(model::recovery::Observed::ReVerified)
            )
        );
        let kind = if whole { self.host.migration() } else { None };
        kind.map(AgentInput::MigrationDeclared)
            .into_iter()
            .chain(answer)
            .collect()
    }

    async fn send(&mut self, tx: &mut ControlSender, msg: ToController) -> anyhow::Result<()> {
        use anyhow::Context;
        if let Some(first) = self.host.before_send(&msg) {
            tx.send(&first)
                .await
                .context("sending the chunk sources to the controller")?;
        }
        tx.send(&FrameBody::ToController(msg))
            .await
            .context("sending to the controller")?;
        // What it runs on goes with every Hello (its own message: Hello's
        // encoding is pinned).
        if matches!(msg, ToController::Hello { .. }) {
            let platform = self.host.platform();
            tx.send(&FrameBody::ToController(ToController::Platform {
                platform,
            }))
            .await
            .context("sending the platform to the controller")?;
        }
        Ok(())
    }
}

/// Reads the control stream into the session loop's inbox until it ends,
/// an unexpected frame arrives or the loop is gone.
async fn read_control(mut rx: ControlReceiver, inbox: tokio::sync::mpsc::Sender<Inbound>) {
    loop {
        let inbound = match rx.recv().await {
            Ok(FrameBody::ToAgent(cmd)) => Inbound::Command(cmd),
            Ok(FrameBody::ReadBackRequest { request }) => Inbound::ReadBack { request },
            Ok(FrameBody::NotLeader { leader }) => Inbound::NotLeader { leader },
            Ok(FrameBody::Mirrors { release, mirrors }) => Inbound::Mirrors { release, mirrors },
            Ok(other) => {
                tracing::warn!("unexpected frame on the control stream: {other:?}");
                return;
            }
            Err(e) => {
                tracing::info!("control stream closed: {e}");
                return;
            }
        };
        if inbox.send(inbound).await.is_err() {
            return;
        }
    }
}

/// The next tick of `timer`; never, without one.
async fn tick(timer: &mut Option<tokio::time::Interval>) {
    match timer {
        Some(timer) => {
            timer.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// A timer whose first tick comes one `period` from now, then every
/// `period` (`tokio::time::interval` ticks at once). `Connected` has just
/// done what a tick would: a tick at once re-read the recovery table right
/// after every (re)connection, so a transient failure on the first attempt
/// after a restart was retried without waiting, its table line logged
/// twice and a second unit of budget spent in the same instant. Ticks
/// missed while a step ran are not made up in a burst (`Delay`): each
/// would only re-read the same table.
pub fn first_tick_after(period: Duration) -> tokio::time::Interval {
    let period = period.max(Duration::from_millis(1));
    let mut timer = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    timer
}

/// Whether a readback may be answered at `now`, the latest answer having
/// begun at `answered_at`: at most one per [`READBACK_INTERVAL_MIN_MS`].
/// Counted from the start of the previous answer, which always precedes the
/// controller's receipt of it (its own spacing's origin), so the two sides
/// never disagree; commands share the same inbox in order, so they are not
/// starved between two probes.
pub fn readback_due(answered_at: Option<Instant>, now: Instant) -> bool {
    match answered_at {
        None => true,
        Some(at) => {
            now.saturating_duration_since(at) >= Duration::from_millis(READBACK_INTERVAL_MIN_MS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The session's timers wait a whole period before their first tick:
    /// the retry right after `Connected` would read the table again.
    #[tokio::test]
    async fn the_retry_timer_waits_a_period_before_its_first_tick() {
        let period = Duration::from_millis(300);
        let started = tokio::time::Instant::now();
        let mut timer = first_tick_after(period);
        let early = tokio::time::timeout(period / 2, timer.tick()).await;
        assert!(early.is_err(), "ticked at once");
        timer.tick().await;
        assert!(started.elapsed() >= period);
    }

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
