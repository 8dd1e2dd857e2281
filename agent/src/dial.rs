//! Finding the leading controller among the configured ones (issue #26
//! item 6).
//!
//! A **round** dials every listed controller at once, each dial bounded by
//! `[timing] handshake_timeout_ms`, and hands the daemon one connection at
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
    timeout: Duration,
    running: JoinSet<(usize, Result<AgentConnection, TransportError>)>,
    dials: Vec<Dial>,
    /// Whether an address was dialed a second time this round (once at
    /// most, so a round is bounded).
    redialed: Vec<bool>,
}

impl Dials {
    /// Dials every address of `addrs` at once.
    pub fn start(
        addrs: &[SocketAddr],
        server_name: &str,
        config: quinn::ClientConfig,
        timeout: Duration,
    ) -> Dials {
        let mut dials = Dials {
            addrs: addrs.to_vec(),
            server_name: server_name.to_string(),
            config,
            timeout,
            running: JoinSet::new(),
            dials: addrs.iter().map(|_| Dial::Done).collect(),
            redialed: vec![false; addrs.len()],
        };
        for at in 0..addrs.len() {
            dials.spawn(at);
        }
        dials
    }

    fn spawn(&mut self, at: usize) {
        let (addr, name) = (self.addrs[at], self.server_name.clone());
        let (config, timeout) = (self.config.clone(), self.timeout);
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
        self.dials[at] = match result {
            Ok(conn) => Dial::Ready(conn),
            Err(e) => {
                tracing::warn!(%addr, "cannot reach the controller: {e}");
                Dial::Done
            }
        };
        true
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
