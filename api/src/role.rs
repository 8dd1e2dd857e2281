//! Which part this controller plays on an etcd log (issue #14): the
//! **leader** (it appends) or a **hot standby** (it follows the leader's
//! log read-only and serves reads), how far its state has folded the log,
//! and where the leader is, as the leader advertises it in the leader key.
//!
//! The core writes the cell; the API (headers on every answer, `/api/status`,
//! the 503 of a write), the dashboard and the agents' endpoint read it.
//! A controller on sled is always the leader.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Response header on every API answer: `leader` or `standby`.
pub const ROLE_HEADER: &str = "fleetweft-role";
/// Response header on every API answer: the last log sequence this
/// controller's state folded (absent for an empty log).
pub const SEQUENCE_HEADER: &str = "fleetweft-log-sequence";
/// Response header on a standby's answers: the leader's API URL, when a
/// leader is known.
pub const LEADER_HEADER: &str = "fleetweft-leader";

/// The part a controller plays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// It holds the leadership and appends to the log (the only role on
    /// sled; what an older controller's status means).
    #[default]
    Leader,
    /// It follows the leader's log read-only: its answers are a standby's
    /// view, as of its `log_sequence`; writes go to the leader.
    Standby,
}

impl Role {
    /// `leader` or `standby`, the header's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Standby => "standby",
        }
    }
}

/// Where a leader can be reached, as it wrote it into the leader key's
/// value: `controller agents=HOST:PORT api=URL`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Advert {
    /// The leader's API base URL (`http://HOST:PORT`).
    pub api: String,
    /// The leader's agents' endpoint (`HOST:PORT`, QUIC).
    pub agents: String,
}

/// The first word of an advert, so a value that is not one is told apart.
const ADVERT_TAG: &str = "controller";

impl Advert {
    /// The leader key's value for this advert.
    pub fn encode(&self) -> String {
        format!("{ADVERT_TAG} agents={} api={}", self.agents, self.api)
    }

    /// Reads a leader key's value; `None` when it is not an advert (a
    /// controller of an older build, another tool): the leader is then
    /// unknown, never guessed.
    pub fn parse(value: &str) -> Option<Advert> {
        let mut words = value.split_whitespace();
        if words.next() != Some(ADVERT_TAG) {
            return None;
        }
        let (mut api, mut agents) = (None, None);
        for word in words {
            match word.split_once('=') {
                Some(("api", v)) if !v.is_empty() => api = Some(v.to_string()),
                Some(("agents", v)) if !v.is_empty() => agents = Some(v.to_string()),
                _ => {}
            }
        }
        Some(Advert {
            api: api?,
            agents: agents?,
        })
    }
}

/// The role, the folded sequence and the leader's advert, shared between
/// the core (which writes them) and every surface (which reads them).
#[derive(Debug)]
pub struct RoleCell {
    standby: AtomicBool,
    /// One past the last folded sequence (0: an empty log).
    next_sequence: AtomicU64,
    leader: RwLock<Option<Advert>>,
    /// Woken when the role or the leader's advert changes: a standby
    /// holding an agent's connection waits on it (`daemon::links`).
    changes: Notify,
}

impl RoleCell {
    /// A cell starting in `role`, nothing folded, no leader known.
    pub fn new(role: Role) -> Self {
        RoleCell {
            standby: AtomicBool::new(role == Role::Standby),
            next_sequence: AtomicU64::new(0),
            leader: RwLock::new(None),
            changes: Notify::new(),
        }
    }

    /// A future that completes at the next change of the role or of the
    /// leader's advert after this call (create it before reading the cell,
    /// so a change in between is not missed).
    pub fn changed(&self) -> Notified<'_> {
        self.changes.notified()
    }

    /// The role now.
    pub fn role(&self) -> Role {
        if self.standby.load(Ordering::Acquire) {
            Role::Standby
        } else {
            Role::Leader
        }
    }

    /// This controller was elected: it leads from now on (never back: a
    /// deposed leader exits).
    pub fn set_leader(&self) {
        self.standby.store(false, Ordering::Release);
        self.changes.notify_waiters();
    }

    /// The last sequence the state folded, `None` for an empty log.
    pub fn log_sequence(&self) -> Option<u64> {
        self.next_sequence.load(Ordering::Acquire).checked_sub(1)
    }

    /// The state folded the log up to `last` (monotonic).
    pub fn set_log_sequence(&self, last: Option<u64>) {
        let next = last.map_or(0, |sequence| sequence.saturating_add(1));
        self.next_sequence.fetch_max(next, Ordering::AcqRel);
    }

    /// The leader's advert as last read (a standby's), `None` if unknown.
    pub fn leader(&self) -> Option<Advert> {
        // A poisoned lock still holds a whole value (one assignment).
        self.leader
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records where the leader is (`None`: nobody leads, or unknown).
    /// Returns whether it changed.
    pub fn set_leader_advert(&self, advert: Option<Advert>) -> bool {
        let mut held = self.leader.write().unwrap_or_else(|p| p.into_inner());
        let changed = *held != advert;
        *held = advert;
        drop(held);
        if changed {
            self.changes.notify_waiters();
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adverts_round_trip_and_foreign_values_are_unknown() {
        let advert = Advert {
            api: "http://10.0.0.1:7800".into(),
            agents: "10.0.0.1:7443".into(),
        };
        assert_eq!(Advert::parse(&advert.encode()), Some(advert));
        assert_eq!(Advert::parse("controller quic=1.2.3.4:5"), None);
        assert_eq!(Advert::parse("someone else agents=a api=b"), None);
        assert_eq!(Advert::parse(""), None);
    }

    #[test]
    fn the_cell_moves_forward_only() {
        let cell = RoleCell::new(Role::Standby);
        assert_eq!(cell.role(), Role::Standby);
        assert_eq!(cell.log_sequence(), None);
        cell.set_log_sequence(Some(7));
        cell.set_log_sequence(Some(3));
        assert_eq!(cell.log_sequence(), Some(7));
        cell.set_leader();
        assert_eq!(cell.role(), Role::Leader);
        assert!(
            !cell.set_leader_advert(None),
            "nothing known, nothing changed"
        );
        let advert = Advert {
            api: "http://a".into(),
            agents: "a:1".into(),
        };
        assert!(cell.set_leader_advert(Some(advert.clone())));
        assert!(!cell.set_leader_advert(Some(advert.clone())));
        assert_eq!(cell.leader(), Some(advert));
    }
}
