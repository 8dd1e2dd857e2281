//! The console's logged-in sessions (issue #28 item 3), kept in the
//! controller's memory: a random 256-bit id (the cookie's value) and a
//! random CSRF token per session, at most [`SESSIONS_MAX`], each for
//! [`SESSION_TTL_MS`]. Apart from the console's pages
//! (`console::session`) so that the handlers' shared state
//! (`state::Api`) can hold them without depending on a surface.

use model::controller::Actor;
use rand_core::{OsRng, RngCore};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sessions open at once; a login beyond it closes the oldest.
pub const SESSIONS_MAX: usize = 64;
/// How long a session lasts after its login (8 hours, a working day).
pub const SESSION_TTL_MS: u64 = 8 * 3600 * 1000;
/// The session cookie's name.
pub const SESSION_COOKIE: &str = "fleetweft_session";
/// Bytes of randomness in a session id and in a CSRF token.
const SECRET_BYTES: usize = 32;

/// One open session.
struct Session {
    /// The token every form of this session carries.
    csrf: String,
    /// Who logged in, with the digest of the credential they gave: every
    /// action of the session is stepped as theirs, so the model refuses it
    /// once that credential is rotated or revoked.
    actor: Actor,
    /// When it ends.
    expires: Instant,
}

/// The console's open sessions, by id.
#[derive(Clone, Default)]
pub struct Sessions(Arc<Mutex<HashMap<String, Session>>>);

/// A request's session: its id and its forms' CSRF token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    /// The session id (the cookie's value).
    pub id: String,
    /// The token the session's forms carry.
    pub csrf: String,
    /// Who logged in ([`Actor::Operator`]).
    pub actor: Actor,
}

fn random_hex() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Equal without an early exit, so timing does not leak a prefix.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Sessions {
    /// Open a session at `now`: closes expired ones and, at the bound, the
    /// one that ends first.
    pub fn open(&self, now: Instant, actor: Actor) -> Current {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, s| s.expires > now);
        if map.len() >= SESSIONS_MAX {
            let first = map
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(id, _)| id.clone());
            if let Some(id) = first {
                map.remove(&id);
            }
        }
        let current = Current {
            id: random_hex(),
            csrf: random_hex(),
            actor,
        };
        let expires = now + Duration::from_millis(SESSION_TTL_MS);
        map.insert(
            current.id.clone(),
            Session {
                csrf: current.csrf.clone(),
                actor: current.actor.clone(),
                expires,
            },
        );
        assert!(map.len() <= SESSIONS_MAX, "sessions over their bound");
        current
    }

    /// The open session `id`, at `now`.
    pub fn get(&self, id: &str, now: Instant) -> Option<Current> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(id).filter(|s| s.expires > now).map(|s| Current {
            id: id.to_string(),
            csrf: s.csrf.clone(),
            actor: s.actor.clone(),
        })
    }

    /// Close session `id`.
    pub fn close(&self, id: &str) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_bounded_expire_and_close() {
        let sessions = Sessions::default();
        let t0 = Instant::now();
        let actor = || Actor::Operator {
            name: "ada".into(),
            credential: model::Digest::repeat(1),
        };
        let first = sessions.open(t0, actor());
        assert_eq!(sessions.get(&first.id, t0), Some(first.clone()));
        assert_ne!(first.id, first.csrf);
        let later = t0 + Duration::from_millis(SESSION_TTL_MS);
        assert_eq!(sessions.get(&first.id, later), None, "expired");
        let opened: Vec<Current> = (0..SESSIONS_MAX)
            .map(|i| sessions.open(t0 + Duration::from_millis(i as u64 + 1), actor()))
            .collect();
        assert_eq!(sessions.get(&first.id, t0), None, "the oldest made room");
        assert!(sessions.get(&opened[0].id, t0).is_some());
        sessions.close(&opened[0].id);
        assert_eq!(sessions.get(&opened[0].id, t0), None);
    }
}
