//! Agent connections: authenticate (node id from the certificate, never from
//! a message), pipe frames to and from the core, serve bundles.

use super::core::{Command, CoreHandle, LinkMsg, LINK_QUEUE_MAX};
use super::mirrors::{ArtifactsSection, Mirrors, SourcesBook};
use super::rate::MessageBudget;
use super::readback::ReadBack;
use super::release_store::Artifacts;
use model::controller::Input;
use model::NodeId;
use protocol::frame::FrameBody;
use protocol::quic::ControllerEndpoint;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Each node's message budget, shared by its successive connections so a
/// reconnect does not refill it.
type Budgets = Arc<Mutex<HashMap<NodeId, MessageBudget>>>;

/// When a standby last sent each node away ("not the leader"), by the node
/// name its certificate gives.
type Redirects = Arc<Mutex<HashMap<String, Instant>>>;

/// How long a standby remembers that it sent a node away. A node back
/// within this came back because it could not reach the leader it was
/// named (a dead leader whose lease still runs): an agent dials the standby
/// again at once when that happens, so a second is ample, and short
/// enough that an agent restarting in a loop is seldom held.
pub const REDIRECT_MEMORY_MS: u64 = 1_000;

/// The longest a standby holds the connection of a node that came back
/// (see [`REDIRECT_MEMORY_MS`]) waiting to be elected: twice the default
/// lease TTL (5 s), by when a dead leader's lease has run out and a
/// campaign round elected the next. Then it is sent away as before.
pub const STANDBY_HOLD_MS: u64 = 10_000;

/// Most nodes a standby remembers having sent away; past it, the stale
/// ones are forgotten (the memory only ever needs [`REDIRECT_MEMORY_MS`]).
const REDIRECTS_REMEMBERED_MAX: usize = 100_000;

/// This controller's own agents' address as it advertises it (`None` on
/// sled, where it always leads): a standby holding a node keeps holding
/// when the leader key names it (elected, not yet took over).
pub type OwnAdvert = Option<String>;

static LINK_IDS: AtomicU64 = AtomicU64::new(1);

/// Most agent handshakes run at once. Each runs in its own task, so one
/// slow or abandoned handshake (up to `HANDSHAKE_TIMEOUT`) holds up nobody;
/// over the bound, new connections wait in quinn's incoming queue.
pub const HANDSHAKES_IN_FLIGHT_MAX: usize = 256;

/// Accept agents until the endpoint closes.
pub async fn serve(
    endpoint: ControllerEndpoint,
    core: CoreHandle,
    bundles: Arc<Artifacts>,
    me: OwnAdvert,
    mirrors: Arc<Mirrors>,
) {
    let budgets: Budgets = Arc::default();
    let redirects: Redirects = Arc::default();
    let me = Arc::new(me);
    let handshakes = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES_IN_FLIGHT_MAX));
    while let Some(incoming) = endpoint.accept_incoming().await {
        let Ok(permit) = handshakes.clone().acquire_owned().await else {
            return; // the semaphore is never closed
        };
        let core = core.clone();
        let bundles = bundles.clone();
        let budgets = budgets.clone();
        let redirects = redirects.clone();
        let me = me.clone();
        let mirrors = mirrors.clone();
        tokio::spawn(async move {
            // A refusal is logged by `authenticate`.
            let authenticated = protocol::quic::authenticate(incoming).await;
            drop(permit);
            let Ok(link) = authenticated else { return };
            if core.role().role() == super::role::Role::Standby {
                match hold(&link, &core, &redirects, me.as_deref()).await {
                    Hold::Lead => {}
                    Hold::SendAway => return redirect(&link, &core, &redirects).await,
                    Hold::Gone => return,
                }
            }
            handle(link, core, bundles, budgets, mirrors).await;
        });
    }
}

/// How long a standby keeps a connection open after its "not the
/// leader" answer, for the frame to arrive before the close (the agent
/// closes it at once when it reads the answer).
pub const NOT_LEADER_LINGER_MS: u64 = 2_000;

/// QUIC close code of a standby's connection after "not the leader".
const CLOSE_NOT_LEADER: u32 = 6;

/// What a standby does with an agent's new connection.
#[derive(Debug, PartialEq, Eq)]
enum Hold {
    /// It leads now: serve the agent as the leader (nothing of it was read
    /// while this controller was a standby).
    Lead,
    /// Answer "not the leader" ([`redirect`]).
    SendAway,
    /// The agent went away while held.
    Gone,
}

/// A standby's choice for `link`: a node sent away less than
/// [`REDIRECT_MEMORY_MS`] ago could not reach the leader it was named, so
/// its connection is held, unread, until this controller leads (the agent
/// is then served at once, instead of polling the standby until its
/// election), another controller is named leader, the agent leaves, or
/// [`STANDBY_HOLD_MS`] passes. Any other node is sent away at once.
async fn hold(
    link: &protocol::quic::AgentLink,
    core: &CoreHandle,
    redirects: &Redirects,
    me: Option<&str>,
) -> Hold {
    if !sent_away_lately(redirects, &link.node, Instant::now()) {
        return Hold::SendAway;
    }
    let role = core.role();
    let named_at_start = role.leader().map(|advert| advert.agents);
    tracing::info!(
        "{} is back after being sent away: holding it until this standby leads",
        link.node
    );
    let deadline = tokio::time::Instant::now() + Duration::from_millis(STANDBY_HOLD_MS);
    loop {
        // Created before the cell is read, so a change in between wakes it.
        let changed = role.changed();
        if role.role() == super::role::Role::Leader {
            return Hold::Lead;
        }
        let named = role.leader().map(|advert| advert.agents);
        if named.is_some() && named != named_at_start && named.as_deref() != me {
            return Hold::SendAway;
        }
        tokio::select! {
            _ = changed => {}
            _ = link.conn.closed() => return Hold::Gone,
            _ = tokio::time::sleep_until(deadline) => return Hold::SendAway,
        }
    }
}

/// Whether `node` was sent away less than [`REDIRECT_MEMORY_MS`] before
/// `now`.
fn sent_away_lately(redirects: &Redirects, node: &str, now: Instant) -> bool {
    // A poisoned lock only means another link task panicked mid-update.
    let redirects = redirects.lock().unwrap_or_else(|e| e.into_inner());
    redirects.get(node).is_some_and(|at| {
        now.saturating_duration_since(*at) < Duration::from_millis(REDIRECT_MEMORY_MS)
    })
}

/// Remembers that `node` is sent away at `now`; forgets the stale ones
/// once more than [`REDIRECTS_REMEMBERED_MAX`] are kept.
fn remember_sent_away(redirects: &Redirects, node: &str, now: Instant) {
    let mut redirects = redirects.lock().unwrap_or_else(|e| e.into_inner());
    if redirects.len() >= REDIRECTS_REMEMBERED_MAX {
        let memory = Duration::from_millis(REDIRECT_MEMORY_MS);
        redirects.retain(|_, at| now.saturating_duration_since(*at) < memory);
    }
    redirects.insert(node.to_string(), now);
}

/// A hot standby's answer to an agent: wait for its hello, answer
/// [`FrameBody::NotLeader`] naming the leader's agents' address (when
/// known), and close. Nothing of the agent reaches the core.
async fn redirect(link: &protocol::quic::AgentLink, core: &CoreHandle, redirects: &Redirects) {
    let control = match link.control().await {
        Ok(c) => c,
        Err(e) => {
            tracing::info!("{}: no control stream: {e}", link.node);
            return;
        }
    };
    let (mut sender, mut receiver) = control.split();
    // The hello is the agent's first frame; whatever it says, it is not
    // recorded: only the leader records.
    if let Err(e) = receiver.recv().await {
        tracing::info!("{} disconnected before its hello: {e}", link.node);
        return;
    }
    let leader = core.role().leader().map(|advert| advert.agents);
    remember_sent_away(redirects, &link.node, Instant::now());
    tracing::info!(
        "{} said hello to a standby: not the leader, try {}",
        link.node,
        leader.as_deref().unwrap_or("(no leader known)")
    );
    if sender.send(&FrameBody::NotLeader { leader }).await.is_ok() {
        let linger = std::time::Duration::from_millis(NOT_LEADER_LINGER_MS);
        let _ = tokio::time::timeout(linger, link.conn.closed()).await;
    }
    link.conn.close(CLOSE_NOT_LEADER.into(), b"not the leader");
}

async fn handle(
    link: protocol::quic::AgentLink,
    core: CoreHandle,
    bundles: Arc<Artifacts>,
    budgets: Budgets,
    mirrors: Arc<Mirrors>,
) {
    let Some(node) = admitted(&link, &core) else {
        return;
    };
    let control = match link.control().await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("{}: no control stream: {e}", link.node);
            return;
        }
    };
    tracing::info!("{} connected", link.node);
    let (sender, mut receiver) = control.split();
    let (tx, rx) = tokio::sync::mpsc::channel(LINK_QUEUE_MAX);
    let id = LINK_IDS.fetch_add(1, Ordering::Relaxed);
    core.send(Command::Attach {
        node,
        link: id,
        tx,
        conn: link.conn.clone(),
    })
    .await;
    let writer = spawn_writer(sender, rx, core.clone(), mirrors.clone(), node);
    let serving = {
        let conn = link.conn.clone();
        let node = link.node.clone();
        tokio::spawn(async move {
            let agent = protocol::quic::AgentLink { node, conn };
            agent.serve_streams(bundles.clone(), bundles).await
        })
    };
    let sources = &mirrors.sources;
    read_frames(&mut receiver, &link, (node, id), &core, &budgets, sources).await;
    writer.abort();
    serving.abort();
    core.send(Command::Detach { node, link: id }).await;
}

/// The enrolled, unretired node `link`'s certificate names; `None`, with
/// the connection closed, for any other.
fn admitted(link: &protocol::quic::AgentLink, core: &CoreHandle) -> Option<NodeId> {
    // Any certificate the fleet CA signed gets this far (the handshake
    // checked the chain and the deny list); only an enrolled node that is
    // not retired is let in.
    let looked_up = {
        let roster = core.roster();
        roster.id(&link.node).map(|n| (n, roster.is_retired(n)))
    };
    match looked_up {
        Some((node, false)) => Some(node),
        Some((_, true)) => {
            tracing::warn!("certificate names {}, which is retired; closing", link.node);
            link.conn.close(3u32.into(), b"node retired");
            None
        }
        None => {
            tracing::warn!(
                "certificate names {}, which is not enrolled; closing",
                link.node
            );
            link.conn.close(3u32.into(), b"unknown node");
            None
        }
    }
}

/// The task that writes `node`'s queued messages to its control stream,
/// each grant preceded by the node's mirrors.
fn spawn_writer(
    mut sender: protocol::quic::ControlSender,
    mut rx: tokio::sync::mpsc::Receiver<LinkMsg>,
    core: CoreHandle,
    mirrors: Arc<Mirrors>,
    node: NodeId,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            // The node's mirrors go just before each grant: computed now,
            // since its labels may have changed since it connected.
            if let LinkMsg::Command(model::ToAgent::Apply { release, .. }) = &msg {
                if let Some(frame) = mirrors_frame(&core, &mirrors.config, node, *release) {
                    if let Err(e) = sender.send(&frame).await {
                        tracing::info!("send failed: {e}");
                        return;
                    }
                }
            }
            let frame = match msg {
                LinkMsg::Command(cmd) => FrameBody::ToAgent(cmd),
                LinkMsg::ReadBack { request } => FrameBody::ReadBackRequest { request },
            };
            if let Err(e) = sender.send(&frame).await {
                tracing::info!("send failed: {e}");
                return;
            }
        }
    })
}

/// The [`FrameBody::Mirrors`] for `node`'s grant of `release`; `None`
/// when the node has no mirrors (nothing is sent, so an agent that does
/// not know the frame is not disturbed while no mirror is configured).
fn mirrors_frame(
    core: &CoreHandle,
    mirrors: &ArtifactsSection,
    node: NodeId,
    release: model::Digest,
) -> Option<FrameBody> {
    let list = {
        let roster = core.roster();
        let labels = roster
            .get(node)
            .map(|e| e.labels.clone())
            .unwrap_or_default();
        mirrors.mirrors_for(&labels)
    };
    (!list.is_empty()).then_some(FrameBody::Mirrors {
        release,
        mirrors: list,
    })
}

/// Pipe what `link` (connection `id` of `node`) sends to the core until it
/// disconnects, breaks the protocol or exceeds its message budget.
async fn read_frames(
    receiver: &mut protocol::quic::ControlReceiver,
    link: &protocol::quic::AgentLink,
    (node, id): (NodeId, u64),
    core: &CoreHandle,
    budgets: &Budgets,
    sources: &SourcesBook,
) {
    // The limits the agent said it applied and the configuration the
    // serving process runs with, until the readback reply that follows.
    let mut announced = Announced::default();
    loop {
        let frame = match receiver.recv().await {
            Ok(frame) => frame,
            Err(e) => {
                tracing::info!("{} disconnected: {e}", link.node);
                return;
            }
        };
        let next = classify(frame, (node, id), &mut announced);
        if let Next::Unexpected(other) = next {
            tracing::warn!("{}: unexpected frame {other:?}; closing", link.node);
            link.conn.close(2u32.into(), b"unexpected frame");
            return;
        }
        if !admit(budgets, node) {
            // Every agent message is a durable log append, every readback
            // reply work for the core: a node over its budget is cut off
            // (it may reconnect) instead of growing the log or flooding
            // the core. Nothing of this message is logged in the event log.
            tracing::warn!(
                "{} exceeds {} messages/s (burst {}); closing its connection",
                link.node,
                super::rate::AGENT_MESSAGES_PER_S_MAX,
                super::rate::AGENT_MESSAGES_BURST_MAX
            );
            link.conn.close(4u32.into(), b"message rate exceeded");
            return;
        }
        match next {
            Next::Command(command) => core.send(command).await,
            // Telemetry, not commands: counted against the budget like any
            // message, kept beside the op or for the next readback, never
            // logged as events.
            Next::Isolation(release, applied) => announced.isolation = Some((release, applied)),
            Next::Configuration(deployment, fingerprint) => {
                announced.configuration = Some((deployment, fingerprint));
            }
            Next::Sources(op, release, tallies) => {
                tracing::info!(
                    "{}: chunks of {release} for {op} came from {tallies:?}",
                    link.node
                );
                sources.record(op, node, tallies);
            }
            Next::Unexpected(_) => unreachable!("closed above"),
        }
    }
}

/// What an agent announced for its next readback reply.
#[derive(Default)]
struct Announced {
    /// The limits applied to the instance of a release.
    isolation: Option<(model::Digest, String)>,
    /// The configuration fingerprint a deployment's serving process runs
    /// with (`None` inside: it has none, or it could not be read).
    configuration: Option<(model::Digest, Option<model::Digest>)>,
}

/// What one frame from an agent asks of its link.
enum Next {
    /// A command for the core.
    Command(Command),
    /// The limits applied to the instance of a release, for the next
    /// readback reply.
    Isolation(model::Digest, String),
    /// The configuration fingerprint the serving process of a deployment
    /// was started with, for the next readback reply.
    Configuration(model::Digest, Option<model::Digest>),
    /// Where the chunks of a staged release came from.
    Sources(
        model::OpId,
        model::Digest,
        Vec<protocol::frame::SourceTally>,
    ),
    /// A frame an agent never sends: the link is closed.
    Unexpected(FrameBody),
}

/// Sorts one frame of connection `id` of `node`; a readback reply takes
/// the limits announced just before it when they are for the release it
/// serves.
fn classify(frame: FrameBody, (node, id): (NodeId, u64), announced: &mut Announced) -> Next {
    match frame {
        FrameBody::ToController(msg) => Next::Command(Command::Input {
            input: Input::FromAgent { node, msg },
            reply: None,
        }),
        FrameBody::ReadBackReply {
            request,
            observation,
            serving,
        } => Next::Command(Command::ReadBackArrived {
            node,
            link: id,
            request,
            readback: ReadBack {
                observation,
                serving,
                observed_at: SystemTime::now(),
                isolation: announced
                    .isolation
                    .take()
                    .filter(|(release, _)| Some(*release) == serving)
                    .map(|(_, applied)| applied),
                configuration: announced
                    .configuration
                    .take()
                    .filter(|(deployment, _)| Some(*deployment) == serving)
                    .map(|(_, fingerprint)| fingerprint),
            },
        }),
        FrameBody::Isolation { release, applied }
            if applied.len() <= protocol::frame::ISOLATION_TEXT_BYTES_MAX =>
        {
            Next::Isolation(release, applied)
        }
        FrameBody::ConfigurationRead {
            deployment,
            fingerprint,
        } => Next::Configuration(deployment, fingerprint),
        FrameBody::FetchSources {
            op,
            release,
            sources,
        } if sources.len() <= protocol::frame::MIRRORS_MAX + 1 => {
            Next::Sources(op, release, sources)
        }
        other => Next::Unexpected(other),
    }
}

/// Whether `node` may send one more message now; takes from its budget.
fn admit(budgets: &Budgets, node: NodeId) -> bool {
    let now = Instant::now();
    // A poisoned lock only means another link task panicked
    // mid-update; the budgets are still meaningful.
    let mut budgets = budgets.lock().unwrap_or_else(|e| e.into_inner());
    budgets
        .entry(node)
        .or_insert_with(|| MessageBudget::new(now))
        .admit(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node sent away is held on its next connection only within
    /// `REDIRECT_MEMORY_MS`; another node, or the same one later, is not.
    #[test]
    fn a_standby_remembers_a_redirect_for_a_second_only() {
        let redirects: Redirects = Arc::default();
        let t0 = Instant::now();
        assert!(!sent_away_lately(&redirects, "node-a", t0));
        remember_sent_away(&redirects, "node-a", t0);
        let memory = Duration::from_millis(REDIRECT_MEMORY_MS);
        assert!(sent_away_lately(&redirects, "node-a", t0));
        assert!(sent_away_lately(
            &redirects,
            "node-a",
            t0 + memory - Duration::from_millis(1)
        ));
        assert!(!sent_away_lately(&redirects, "node-a", t0 + memory));
        assert!(!sent_away_lately(&redirects, "node-b", t0));
    }

    /// Past `REDIRECTS_REMEMBERED_MAX` the stale entries are dropped, so
    /// the memory stays bounded however many nodes were ever sent away.
    #[test]
    fn the_redirect_memory_is_bounded() {
        let redirects: Redirects = Arc::default();
        let t0 = Instant::now();
        for i in 0..REDIRECTS_REMEMBERED_MAX {
            remember_sent_away(&redirects, &format!("n{i}"), t0);
        }
        let later = t0 + Duration::from_millis(REDIRECT_MEMORY_MS);
        remember_sent_away(&redirects, "fresh", later);
        let kept = redirects.lock().expect("lock").len();
        assert_eq!(kept, 1, "only the fresh entry is kept");
    }
}
