//! Picking loopback ports for the demo and the tests' fleets.
//!
//! Why not "bind port 0, read it, release it": the kernel hands out port-0
//! binds *and* every outgoing connection's source port from the same
//! ephemeral range (`net.ipv4.ip_local_port_range`). A port released that
//! way can be taken again before the controller or agent binds it: by a
//! QUIC client endpoint, an HTTP client's source port, or an app the agent
//! starts on a port-0 pick. On a busy test run (three demos at once) that
//! happened: an agent or controller died on bind and the fleet never came
//! up. Ports picked *below* the ephemeral range are never handed out by
//! the kernel, so only an explicit bind can take them; picks are random and
//! never repeated within one process, and each is checked free for both TCP
//! and UDP at the time of asking.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;

/// Lowest port handed out (below: well-known and commonly configured ports).
pub const PORT_PICK_LOW: u16 = 20_000;
/// Used when the kernel's ephemeral range cannot be read: Linux's default
/// lower bound.
pub const EPHEMERAL_LOW_DEFAULT: u16 = 32_768;
/// How many random candidates to try before giving up.
pub const PICK_ATTEMPTS_MAX: u32 = 1_000;

/// Ports already handed out by this process: tests run fleets on threads
/// of one process, and two of them must never get the same port.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Errors of [`free_port`].
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// Every candidate was taken.
    #[error("no free loopback port in {low}..{high} after {attempts} attempts")]
    Exhausted {
        /// Lowest candidate.
        low: u16,
        /// One past the highest candidate.
        high: u16,
        /// Candidates tried.
        attempts: u32,
    },
}

/// The lower bound of the kernel's ephemeral port range.
pub fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(EPHEMERAL_LOW_DEFAULT)
}

/// A loopback port, below the ephemeral range, free for both TCP and UDP
/// at the time of asking, and never handed out before by this process.
pub fn free_port() -> Result<u16, PortError> {
    let low = PORT_PICK_LOW;
    // A kernel configured with a low ephemeral range leaves no room below
    // it: pick from above the well-known ports instead of failing.
    let high = ephemeral_low().max(low + 1_000);
    let span = u64::from(high - low);
    let mut random = std::collections::hash_map::RandomState::new().build_hasher();
    random.write_u32(std::process::id());
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    let handed = handed.get_or_insert_with(HashSet::new);
    for attempt in 0..PICK_ATTEMPTS_MAX {
        random.write_u32(attempt);
        let port = low + (random.finish() % span) as u16;
        if handed.contains(&port) {
            continue;
        }
        let tcp = std::net::TcpListener::bind(("127.0.0.1", port));
        let udp = std::net::UdpSocket::bind(("127.0.0.1", port));
        if tcp.is_ok() && udp.is_ok() {
            handed.insert(port);
            return Ok(port);
        }
    }
    Err(PortError::Exhausted {
        low,
        high,
        attempts: PICK_ATTEMPTS_MAX,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_are_below_the_ephemeral_range_distinct_and_bindable() {
        let high = ephemeral_low().max(PORT_PICK_LOW + 1_000);
        let mut seen = HashSet::new();
        for _ in 0..50 {
            let port = free_port().expect("a free port");
            assert!((PORT_PICK_LOW..high).contains(&port), "{port}");
            assert!(seen.insert(port), "port {port} handed out twice");
            // Free for both protocols right after the pick.
            std::net::TcpListener::bind(("127.0.0.1", port)).expect("tcp bind");
            std::net::UdpSocket::bind(("127.0.0.1", port)).expect("udp bind");
        }
    }

    #[test]
    fn a_port_in_use_is_never_picked() {
        // Hold many listeners in the pick range; none may come back.
        let held: Vec<std::net::TcpListener> = (0..200)
            .filter_map(|i| std::net::TcpListener::bind(("127.0.0.1", PORT_PICK_LOW + i)).ok())
            .collect();
        let held_ports: HashSet<u16> = held
            .iter()
            .filter_map(|l| l.local_addr().ok().map(|a| a.port()))
            .collect();
        for _ in 0..50 {
            let port = free_port().expect("a free port");
            assert!(!held_ports.contains(&port), "{port} is held");
        }
    }
}
