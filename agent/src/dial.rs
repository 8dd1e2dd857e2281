//! Finding the leading controller among the configured ones (issue #26
//! item 6).
//!
//! A **round** dials every listed controller at once, each dial bounded by
//! its own timeout (`liveness::dial_timeout`: `[timing]
//! handshake_timeout_ms` on a LAN, longer on a slow link or after that
//! address timed out), and hands the daemon one connection at
//! a time for a session: the controller a standby named when it is there,
//! else the first one up. The leader keeps the session; a standby answers
//! "not the leader" and the daemon asks for the next. A dead or
//! black-holed address costs nothing while another answers, and at most
//! the handshake timeout otherwise. Dropping the round cancels the dials
//! still running and closes the connections not used.
//!
//! A standby that sent the agent away remembers it for a second
//! (`controller::daemon::links::REDIRECT_MEMORY_MS`): when the leader it
//! named is not up, the agent dials that standby again at once
//! ([`Dials::redial`]) and the standby holds the connection, unread, until
//! it is elected and serves it as the leader. So the agents are back within
//! milliseconds of the takeover instead of polling the standby, and each
//! agent dials it about twice per takeover, not once per backoff step.

use protocol::quic::{AgentConnection, TransportError};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::task::JoinSet;

/// Where one address stands in a round.
#[derive(Debug)]
enum Dial {
    /// Its dial is running.
    Pending,
    /// Up, not used yet.
    Ready(AgentConnection),
    /// Its dial failed or timed out, or its connection was handed out.
    Done,
}

/// One round of dials to every listed controller.
pub struct Dials {
    addrs: Vec<SocketAddr>,
    server_name: String,
    config: quinn::ClientConfig,
    timeouts: Vec<Duration>,
    running: JoinSet<(usize, Result<AgentConnection, TransportError>)>,
    dials: Vec<Dial>,
    /// Whether an address was dialed a second time this round (once at
    /// most, so a round is bounded).
    redialed: Vec<bool>,
    /// How each address's latest dial ended, once it did.
    ended: Vec<Option<Ended>>,
}

/// How a dial ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The controller answered.
    Up,
    /// Nothing within the dial's timeout.
    TimedOut,
    /// Refused or failed otherwise (no route, a refused certificate).
    Failed,
}

impl Dials {
    /// Dials every address of `addrs` at once, each within its own of
    /// `timeouts` (one per address).
    pub fn start(
        addrs: &[SocketAddr],
        server_name: &str,
        config: quinn::ClientConfig,
        timeouts: Vec<Duration>,
    ) -> Dials {
        assert_eq!(addrs.len(), timeouts.len(), "one timeout per address");
        let mut dials = Dials {
            addrs: addrs.to_vec(),
            server_name: server_name.to_string(),
            config,
            timeouts,
            running: JoinSet::new(),
            dials: addrs.iter().map(|_| Dial::Done).collect(),
            redialed: vec![false; addrs.len()],
            ended: vec![None; addrs.len()],
        };
        for at in 0..addrs.len() {
            dials.spawn(at);
        }
        dials
    }

    fn spawn(&mut self, at: usize) {
        let (addr, name) = (self.addrs[at], self.server_name.clone());
        let (config, timeout) = (self.config.clone(), self.timeouts[at]);
        self.dials[at] = Dial::Pending;
        self.running.spawn(async move {
            (
                at,
                AgentConnection::dial(addr, &name, config, timeout).await,
            )
        });
    }

    /// Dials `at` again, once per round: a standby that just sent this
    /// agent away holds the new connection until it leads. Whatever `at`
    /// had up and unused is dropped.
    pub fn redial(&mut self, at: usize) {
        if at < self.addrs.len() && !self.redialed[at] {
            self.redialed[at] = true;
            self.spawn(at);
        }
    }

    /// Whether `at` is up and not used yet.
    pub fn is_ready(&self, at: usize) -> bool {
        matches!(self.dials.get(at), Some(Dial::Ready(_)))
    }

    /// The connection to `at`, once its dial ends; `None` when it failed or
    /// was already used.
    pub async fn take(&mut self, at: usize) -> Option<AgentConnection> {
        while matches!(self.dials.get(at), Some(Dial::Pending)) {
            if !self.settle_next().await {
                break;
            }
        }
        self.take_ready(at)
    }

    /// The first address up (in list order when several are), waiting for
    /// the next dial to end while none is; `None` once every dial ended
    /// and every connection was used: the round is over.
    pub async fn take_any(&mut self) -> Option<(usize, AgentConnection)> {
        loop {
            if let Some(at) = (0..self.dials.len()).find(|&at| self.is_ready(at)) {
                return self.take_ready(at).map(|conn| (at, conn));
            }
            if !self.settle_next().await {
                return None;
            }
        }
    }

    fn take_ready(&mut self, at: usize) -> Option<AgentConnection> {
        match std::mem::replace(self.dials.get_mut(at)?, Dial::Done) {
            Dial::Ready(conn) => Some(conn),
            other => {
                self.dials[at] = other;
                None
            }
        }
    }

    /// Waits for the next dial to end and records it; false when none runs.
    async fn settle_next(&mut self) -> bool {
        let Some(joined) = self.running.join_next().await else {
            return false;
        };
        // A dial task only ends by returning (the set is never aborted
        // while in use): a join error is a panic, and that dial counts as
        // failed.
        let Ok((at, result)) = joined else {
            return true;
        };
        let addr = self.addrs[at];
        let (dial, ended) = match result {
            Ok(conn) => (Dial::Ready(conn), Ended::Up),
            Err(e) => {
                tracing::warn!(%addr, "cannot reach the controller: {e}");
                let ended = match e {
                    TransportError::HandshakeTimeout(_) => Ended::TimedOut,
                    _ => Ended::Failed,
                };
                (Dial::Done, ended)
            }
        };
        self.dials[at] = dial;
        self.ended[at] = Some(ended);
        true
    }

    /// How each address's latest dial this round ended (`None`: it was
    /// still running when the round ended).
    pub fn ended(&self) -> &[Option<Ended>] {
        &self.ended
    }
}

/// Where to go after the standby at `at` answered "not the leader, try
/// `hint`": the hinted address when it is one of `addrs` and another
/// controller (`None` otherwise, then the first up). A hint outside
/// `addrs` is not followed: the list is what the operator configured and
/// vetted (the leader key that the hint comes from is writable by anyone
/// with etcd access, and an advertised bind address such as
/// `0.0.0.0:7443` reaches nothing), and it holds the leader too.
pub fn hinted(addrs: &[SocketAddr], at: usize, hint: Option<&str>) -> Option<usize> {
    hint.and_then(|h| h.parse::<SocketAddr>().ok())
        .and_then(|h| addrs.iter().position(|a| *a == h))
        .filter(|&h| h != at)
}
