//! Agent connections: authenticate (node id from the certificate, never from
//! a message), pipe frames to and from the core, serve bundles.

use super::bundles::BundleDir;
use super::core::{Command, CoreHandle, LinkMsg, LINK_QUEUE_MAX};
use super::rate::MessageBudget;
use super::readback::ReadBack;
use model::controller::Input;
use model::NodeId;
use protocol::frame::FrameBody;
use protocol::quic::ControllerEndpoint;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

/// Each node's message budget, shared by its successive connections so a
/// reconnect does not refill it.
type Budgets = Arc<Mutex<HashMap<NodeId, MessageBudget>>>;

static LINK_IDS: AtomicU64 = AtomicU64::new(1);

/// Most agent handshakes run at once. Each runs in its own task, so one
/// slow or abandoned handshake (up to `HANDSHAKE_TIMEOUT`) holds up nobody;
/// over the bound, new connections wait in quinn's incoming queue.
pub const HANDSHAKES_IN_FLIGHT_MAX: usize = 256;

/// Accept agents until the endpoint closes.
pub async fn serve(endpoint: ControllerEndpoint, core: CoreHandle, bundles: Arc<BundleDir>) {
    let budgets: Budgets = Arc::default();
    let handshakes = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES_IN_FLIGHT_MAX));
    while let Some(incoming) = endpoint.accept_incoming().await {
        let Ok(permit) = handshakes.clone().acquire_owned().await else {
            return; // the semaphore is never closed
        };
        let core = core.clone();
        let bundles = bundles.clone();
        let budgets = budgets.clone();
        tokio::spawn(async move {
            // A refusal is logged by `authenticate`.
            let authenticated = protocol::quic::authenticate(incoming).await;
            drop(permit);
            if let Ok(link) = authenticated {
                handle(link, core, bundles, budgets).await;
            }
        });
    }
}

/// How long a standby keeps a connection open after its "not the
/// leader" answer, for the frame to arrive before the close (the agent
/// closes it at once when it reads the answer).
pub const NOT_LEADER_LINGER_MS: u64 = 2_000;

/// QUIC close code of a standby's connection after "not the leader".
const CLOSE_NOT_LEADER: u32 = 6;

/// A hot standby's answer to an agent: wait for its hello, answer
/// [`FrameBody::NotLeader`] naming the leader's agents' address (when
/// known), and close. Nothing of the agent reaches the core.
async fn redirect(link: &protocol::quic::AgentLink, core: &CoreHandle) {
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
    bundles: Arc<BundleDir>,
    budgets: Budgets,
) {
    if core.role().role() == super::role::Role::Standby {
        redirect(&link, &core).await;
        return;
    }
    // Any certificate the fleet CA signed gets this far (the handshake
    // checked the chain and the deny list); only an enrolled node that is
    // not retired is let in.
    let looked_up = {
        let roster = core.roster();
        roster.id(&link.node).map(|n| (n, roster.is_retired(n)))
    };
    let node = match looked_up {
        Some((node, false)) => node,
        Some((_, true)) => {
            tracing::warn!("certificate names {}, which is retired; closing", link.node);
            link.conn.close(3u32.into(), b"node retired");
            return;
        }
        None => {
            tracing::warn!(
                "certificate names {}, which is not enrolled; closing",
                link.node
            );
            link.conn.close(3u32.into(), b"unknown node");
            return;
        }
    };
    let control = match link.control().await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("{}: no control stream: {e}", link.node);
            return;
        }
    };
    tracing::info!("{} connected", link.node);
    let (mut sender, mut receiver) = control.split();
    let (tx, mut rx) = tokio::sync::mpsc::channel(LINK_QUEUE_MAX);
    let id = LINK_IDS.fetch_add(1, Ordering::Relaxed);
    core.send(Command::Attach {
        node,
        link: id,
        tx,
        conn: link.conn.clone(),
    })
    .await;
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let frame = match msg {
                LinkMsg::Command(cmd) => FrameBody::ToAgent(cmd),
                LinkMsg::ReadBack { request } => FrameBody::ReadBackRequest { request },
            };
            if let Err(e) = sender.send(&frame).await {
                tracing::info!("send failed: {e}");
                return;
            }
        }
    });
    let serving = {
        let conn = link.conn.clone();
        let node = link.node.clone();
        tokio::spawn(async move {
            let agent = protocol::quic::AgentLink { node, conn };
            agent.serve_bundles(bundles).await
        })
    };
    read_frames(&mut receiver, &link, node, id, &core, &budgets).await;
    writer.abort();
    serving.abort();
    core.send(Command::Detach { node, link: id }).await;
}

/// Pipe what `link` (connection `id` of `node`) sends to the core until it
/// disconnects, breaks the protocol or exceeds its message budget.
async fn read_frames(
    receiver: &mut protocol::quic::ControlReceiver,
    link: &protocol::quic::AgentLink,
    node: NodeId,
    id: u64,
    core: &CoreHandle,
    budgets: &Budgets,
) {
    loop {
        let frame = match receiver.recv().await {
            Ok(frame) => frame,
            Err(e) => {
                tracing::info!("{} disconnected: {e}", link.node);
                return;
            }
        };
        let command = match frame {
            FrameBody::ToController(msg) => Command::Input {
                input: Input::FromAgent { node, msg },
                reply: None,
            },
            FrameBody::ReadBackReply {
                request,
                observation,
                serving,
            } => Command::ReadBackArrived {
                node,
                link: id,
                request,
                readback: ReadBack {
                    observation,
                    serving,
                    observed_at: SystemTime::now(),
                },
            },
            other => {
                tracing::warn!("{}: unexpected frame {other:?}; closing", link.node);
                link.conn.close(2u32.into(), b"unexpected frame");
                return;
            }
        };
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
        core.send(command).await;
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
