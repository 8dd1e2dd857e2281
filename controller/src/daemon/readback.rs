//! Fresh readbacks: the controller asks a connected agent, over its control
//! connection, what its public route serves *now* (a fresh probe, the
//! installed bundle and app file re-hashed, process uptime and restarts).
//! A deployment proof is a readback, not a memory of settlement evidence.
//!
//! The core owns a bounded table of requests waiting for their reply. A
//! reply is delivered only to the request it names, and only if it came
//! from the node and connection the request was sent on: a node cannot
//! answer for another. Nothing of a readback is written to the event log.
//!
//! Sans-IO apart from the channels: time is an input, so the table is
//! tested without sleeping.

use super::link_msg::LinkMsg;
use model::{Digest, NodeId, RouteObservation};
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{mpsc, oneshot};

/// How long a readback may take from the caller's request to the agent's
/// reply, in milliseconds. Above the agent's route probe timeout (3000 ms,
/// `agent::probe::PROBE_TIMEOUT_MS`) so that a slow app is reported as the
/// probe's verdict, not as an agent that did not answer.
pub const READBACK_TIMEOUT_MS: u64 = 5_000;

/// Upper bound on readbacks waiting for a reply, over the whole fleet.
pub const READBACKS_PENDING_MAX: usize = 256;

pub use protocol::frame::READBACK_INTERVAL_MIN_MS;

/// A fresh readback of what a node's public route serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadBack {
    /// The agent's probe of its route and its artifact, made when the
    /// request arrived.
    pub observation: RouteObservation,
    /// The release the agent's route points at (its own word); `None` when
    /// it points at nothing.
    pub serving: Option<Digest>,
    /// The controller's wall clock when the reply arrived.
    pub observed_at: SystemTime,
    /// The limits the agent says it applied to the serving instance (its
    /// `Isolation` frame just before the reply, for the release it
    /// serves); `None`: that release declares none.
    pub isolation: Option<String>,
    /// The configuration fingerprint the serving process was started with,
    /// read by the agent from its environment (issue #24 item 1): `None`
    /// when the route serves no configured deployment (no frame came),
    /// `Some(None)` when the process has none or it could not be read.
    pub configuration: Option<Option<model::Digest>>,
}

/// Why no readback was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadBackError {
    /// The node has no live connection to the controller.
    #[error("the agent is not connected")]
    NotConnected,
    /// A readback of this node is already waiting for its reply, the
    /// controller waits for too many readbacks, or the node's connection
    /// has too many messages queued. Nothing was asked.
    #[error("the controller is already waiting for a readback of this agent (or for too many readbacks); try again shortly")]
    Busy,
    /// The node answered a readback less than [`READBACK_INTERVAL_MIN_MS`]
    /// ago; the agent would drop the request. Nothing was asked.
    #[error("the agent answered a readback less than {READBACK_INTERVAL_MIN_MS} ms ago; try again shortly")]
    TooSoon,
    /// The request was sent but no reply came in time.
    #[error("the agent did not answer the readback within {READBACK_TIMEOUT_MS} ms")]
    Timeout,
    /// The connection the request was sent on went away before a reply.
    #[error("the agent disconnected before answering the readback")]
    Disconnected,
    /// The controller's core is not running.
    #[error("the controller core stopped")]
    Stopped,
}

/// Where the outcome of a readback goes.
pub type ReadBackReply = oneshot::Sender<Result<ReadBack, ReadBackError>>;

/// A request sent and not yet answered.
struct Pending {
    node: NodeId,
    link: u64,
    reply: ReadBackReply,
    deadline: Instant,
}

/// The core's table of readbacks waiting for a reply.
#[derive(Default)]
pub struct ReadBacks {
    next_request: u64,
    pending: HashMap<u64, Pending>,
    /// When each node's latest readback reply arrived: the next request is
    /// spaced from it by [`READBACK_INTERVAL_MIN_MS`]. The agent counts the
    /// same interval from when it sent the reply, which is earlier, so a
    /// request this allows is never dropped for coming too soon. At most one
    /// entry per node that ever answered, bounded by the fleet.
    answered_at: HashMap<NodeId, Instant>,
}

impl ReadBacks {
    /// Number of requests waiting for a reply.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Ask `node` for a readback on its live link (`None`: not connected),
    /// or answer `reply` at once with why not. At most one request per node
    /// is in flight: a second caller gets [`ReadBackError::Busy`] rather
    /// than a share of an answer probed before it asked.
    pub fn start(
        &mut self,
        node: NodeId,
        link: Option<(u64, &mpsc::Sender<LinkMsg>)>,
        reply: ReadBackReply,
        now: Instant,
    ) {
        self.expire(now);
        let Some((link, tx)) = link else {
            let _ = reply.send(Err(ReadBackError::NotConnected));
            return;
        };
        if let Err(refusal) = self.admit(node, now) {
            let _ = reply.send(Err(refusal));
            return;
        }
        self.next_request = self.next_request.wrapping_add(1);
        let request = self.next_request;
        // A full link queue is not worth closing the connection for (unlike
        // a command, a readback can simply be asked again).
        if tx.try_send(LinkMsg::ReadBack { request }).is_err() {
            tracing::warn!("{node}: connection queue full; readback not asked");
            let _ = reply.send(Err(ReadBackError::Busy));
            return;
        }
        let deadline = now + Duration::from_millis(READBACK_TIMEOUT_MS);
        self.pending.insert(
            request,
            Pending {
                node,
                link,
                reply,
                deadline,
            },
        );
    }

    /// Whether a request to `node` may be sent at `now`.
    fn admit(&self, node: NodeId, now: Instant) -> Result<(), ReadBackError> {
        if self.pending.len() >= READBACKS_PENDING_MAX
            || self.pending.values().any(|p| p.node == node)
        {
            return Err(ReadBackError::Busy);
        }
        let spacing = Duration::from_millis(READBACK_INTERVAL_MIN_MS);
        match self.answered_at.get(&node) {
            Some(at) if now.saturating_duration_since(*at) < spacing => Err(ReadBackError::TooSoon),
            _ => Ok(()),
        }
    }

    /// A reply to `request` arrived from `node` on `link`. Delivered only if
    /// that request is waiting and was sent to this node on this link;
    /// anything else is logged and dropped (never an error that ends the
    /// link: a late reply after a timeout is normal).
    pub fn answer(
        &mut self,
        node: NodeId,
        link: u64,
        request: u64,
        readback: ReadBack,
        now: Instant,
    ) {
        self.expire(now);
        // The agent answered, matched or not: it counts for the spacing.
        self.answered_at.insert(node, now);
        match self.pending.get(&request) {
            Some(p) if p.node == node && p.link == link => {
                if let Some(p) = self.pending.remove(&request) {
                    let _ = p.reply.send(Ok(readback));
                }
            }
            Some(p) => tracing::warn!(
                "{node} answered readback {request}, which was asked of {} on link {}: dropped",
                p.node,
                p.link
            ),
            None => tracing::info!(
                "{node} answered readback {request}, which nobody waits for (late or unknown): dropped"
            ),
        }
    }

    /// `link` of `node` is gone (or replaced): its requests can no longer be
    /// answered.
    pub fn disconnected(&mut self, node: NodeId, link: u64, now: Instant) {
        self.expire(now);
        let gone: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.node == node && p.link == link)
            .map(|(request, _)| *request)
            .collect();
        for request in gone {
            if let Some(p) = self.pending.remove(&request) {
                let _ = p.reply.send(Err(ReadBackError::Disconnected));
            }
        }
    }

    /// Forget requests whose caller gave up; fail those past their deadline
    /// with [`ReadBackError::Timeout`] (a caller that did not bound its own
    /// wait still gets an answer once the core next looks at the table).
    pub fn expire(&mut self, now: Instant) {
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.reply.is_closed() || now >= p.deadline)
            .map(|(request, _)| *request)
            .collect();
        for request in expired {
            if let Some(p) = self.pending.remove(&request) {
                let _ = p.reply.send(Err(ReadBackError::Timeout));
            }
        }
        let spacing = Duration::from_millis(READBACK_INTERVAL_MIN_MS);
        self.answered_at
            .retain(|_, at| now.saturating_duration_since(*at) < spacing);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: NodeId = NodeId(0);
    const B: NodeId = NodeId(1);

    fn readback() -> ReadBack {
        ReadBack {
            observation: RouteObservation::passing(Digest::repeat(1)),
            serving: Some(Digest::repeat(1)),
            observed_at: SystemTime::UNIX_EPOCH,
            isolation: None,
            configuration: None,
        }
    }

    type Answer = oneshot::Receiver<Result<ReadBack, ReadBackError>>;

    /// Ask `node` on `link`; the request id sent on the link and the answer.
    fn ask(
        table: &mut ReadBacks,
        node: NodeId,
        link: u64,
        tx: &mpsc::Sender<LinkMsg>,
        rx: &mut mpsc::Receiver<LinkMsg>,
        now: Instant,
    ) -> (Option<u64>, Answer) {
        let (reply, answer) = oneshot::channel();
        table.start(node, Some((link, tx)), reply, now);
        let request = match rx.try_recv() {
            Ok(LinkMsg::ReadBack { request }) => Some(request),
            _ => None,
        };
        (request, answer)
    }

    #[test]
    fn a_reply_reaches_only_the_request_of_its_node_and_link() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut table = ReadBacks::default();
        let t0 = Instant::now();
        let (request, mut answer) = ask(&mut table, A, 1, &tx, &mut rx, t0);
        let request = request.expect("a request was sent on the link");

        // Another node naming A's request, A on another link, A naming an
        // unknown request: all dropped, A's request still waits.
        table.answer(B, 1, request, readback(), t0);
        table.answer(A, 2, request, readback(), t0);
        table.answer(A, 1, request + 1, readback(), t0);
        assert!(answer.try_recv().is_err(), "nothing delivered yet");
        assert_eq!(table.pending(), 1);

        table.answer(A, 1, request, readback(), t0);
        assert_eq!(answer.try_recv().expect("delivered"), Ok(readback()));
        assert_eq!(table.pending(), 0);
        // The same reply again is unmatched and dropped.
        table.answer(A, 1, request, readback(), t0);
        assert_eq!(table.pending(), 0);
    }

    #[test]
    fn not_connected_busy_and_too_soon_ask_nothing() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut table = ReadBacks::default();
        let t0 = Instant::now();
        let (reply, mut answer) = oneshot::channel();
        table.start(A, None, reply, t0);
        assert_eq!(answer.try_recv(), Ok(Err(ReadBackError::NotConnected)));

        let (first, _waiting) = ask(&mut table, A, 1, &tx, &mut rx, t0);
        let (second, mut answer) = ask(&mut table, A, 1, &tx, &mut rx, t0);
        assert!(first.is_some());
        assert_eq!(second, None, "one request per node in flight");
        assert_eq!(answer.try_recv(), Ok(Err(ReadBackError::Busy)));

        let first = first.expect("sent");
        table.answer(A, 1, first, readback(), t0);
        let soon = t0 + Duration::from_millis(READBACK_INTERVAL_MIN_MS - 1);
        let (third, mut answer) = ask(&mut table, A, 1, &tx, &mut rx, soon);
        assert_eq!(third, None, "the agent would drop it");
        assert_eq!(answer.try_recv(), Ok(Err(ReadBackError::TooSoon)));
        let later = t0 + Duration::from_millis(READBACK_INTERVAL_MIN_MS);
        let (fourth, _answer) = ask(&mut table, A, 1, &tx, &mut rx, later);
        assert!(fourth.is_some());
    }

    #[test]
    fn the_table_is_bounded() {
        let (tx, mut rx) = mpsc::channel(READBACKS_PENDING_MAX + 1);
        let mut table = ReadBacks::default();
        let t0 = Instant::now();
        let mut waiting = Vec::new();
        for n in 0..READBACKS_PENDING_MAX {
            let node = NodeId(u32::try_from(n).expect("small"));
            let (request, answer) = ask(&mut table, node, 1, &tx, &mut rx, t0);
            assert!(request.is_some());
            waiting.push(answer);
        }
        let (request, mut answer) = ask(&mut table, NodeId(u32::MAX), 1, &tx, &mut rx, t0);
        assert_eq!(request, None);
        assert_eq!(answer.try_recv(), Ok(Err(ReadBackError::Busy)));
        assert_eq!(table.pending(), READBACKS_PENDING_MAX);
    }

    #[test]
    fn a_full_link_queue_is_busy_not_a_pending_request() {
        let (tx, mut rx) = mpsc::channel(1);
        tx.try_send(LinkMsg::ReadBack { request: 0 })
            .expect("fill the queue");
        let mut table = ReadBacks::default();
        let (reply, mut answer) = oneshot::channel();
        table.start(A, Some((1, &tx)), reply, Instant::now());
        assert_eq!(answer.try_recv(), Ok(Err(ReadBackError::Busy)));
        assert_eq!(table.pending(), 0);
        let _ = rx.try_recv();
    }

    #[test]
    fn timeouts_and_disconnects_fail_the_waiting_requests() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut table = ReadBacks::default();
        let t0 = Instant::now();
        let (_, mut slow) = ask(&mut table, A, 1, &tx, &mut rx, t0);
        let (_, mut cut) = ask(&mut table, B, 7, &tx, &mut rx, t0);

        table.expire(t0 + Duration::from_millis(READBACK_TIMEOUT_MS - 1));
        assert_eq!(table.pending(), 2, "not yet due");
        // Another link of B going away leaves B's request alone.
        table.disconnected(B, 8, t0);
        table.disconnected(B, 7, t0);
        assert_eq!(cut.try_recv(), Ok(Err(ReadBackError::Disconnected)));
        table.expire(t0 + Duration::from_millis(READBACK_TIMEOUT_MS));
        assert_eq!(slow.try_recv(), Ok(Err(ReadBackError::Timeout)));
        assert_eq!(table.pending(), 0);
    }

    #[test]
    fn a_caller_that_gave_up_frees_its_slot() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut table = ReadBacks::default();
        let t0 = Instant::now();
        let (request, answer) = ask(&mut table, A, 1, &tx, &mut rx, t0);
        drop(answer);
        let (again, _answer) = ask(&mut table, A, 1, &tx, &mut rx, t0);
        assert!(again.is_some(), "the abandoned request no longer blocks A");
        assert_ne!(again, request);
    }
}
