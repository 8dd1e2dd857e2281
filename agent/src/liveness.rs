//! How long an agent waits on a controller before giving it up, from what
//! its own link showed (issue #26 item 6, and scenario 13).
//!
//! Two waits matter to a takeover, and both must be short on a LAN (the
//! fleet is back within a second of the election) yet long enough on a
//! lossy, slow link (scenario 13: 30% loss each way, 400 ms round trip),
//! where fixed short timeouts made agents reconnect over and over:
//!
//! - **silence**: how long a session may hear nothing from its controller
//!   before the agent counts it dead ([`silence_limit`]). A keep-alive
//!   ping goes out every [`AGENT_KEEP_ALIVE`]; on a link that loses a
//!   fraction `p` of packets each way, a ping and its acknowledgement both
//!   arrive with chance `(1 - p)²`, so `n` keep-alives in a row all go
//!   unanswered with chance `(1 - (1 - p)²)ⁿ`. The limit is the smallest
//!   `n` that makes this at most [`FALSE_ALARM_ODDS`], times the interval,
//!   plus the round trips the last answer is still travelling, kept within
//!   [`SILENCE_MIN`] .. [`SILENCE_MAX`]. The loss is the agent's own
//!   count of its packets QUIC declared lost, over every session so far,
//!   starting from a prior ([`PRIOR_LOST_PACKETS`] in
//!   [`PRIOR_SENT_PACKETS`]) so a new agent neither trusts a clean link
//!   it has not seen nor distrusts one. On a LAN with no loss that is
//!   [`SILENCE_MIN`] (1.5 s, what the takeover was measured with); at
//!   30% loss and 400 ms, about 9 s.
//! - **a dial's handshake** ([`dial_timeout`]): the configured floor
//!   (`[timing] handshake_timeout_ms`, 500 ms) or [`HANDSHAKE_RTTS`]
//!   round trips of the link as last measured, whichever is longer,
//!   doubled for every dial of that address in a row that timed out, up
//!   to [`DIAL_TIMEOUT_MAX`] (QUIC's idle timeout, the bound a handshake
//!   had before the parallel dial). A dead controller is given up on in
//!   500 ms on a LAN (the dials run at once, so it costs nothing while
//!   another answers), and a live one behind a lossy link is reached
//!   within a few attempts instead of never.
//!
//! QUIC's own idle timeout on an agent's connection is the long
//! [`protocol::quic::IDLE_TIMEOUT`]: the watch here gives up earlier, with
//! a reason that says what it saw.

use protocol::quic::{AGENT_KEEP_ALIVE, IDLE_TIMEOUT};
use std::time::{Duration, Instant};

/// How often a session checks that its controller is still heard: a
/// fraction of [`AGENT_KEEP_ALIVE`], so a dead controller is noticed
/// within this much of [`silence_limit`]. A check reads the connection's
/// counters, nothing goes on the wire.
pub const SILENCE_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// The shortest silence that counts as a dead controller: four keep-alive
/// intervals, the idle timeout the takeover benchmark was measured with
/// (issue #26 item 6: agents back within a 2 s lease + 1 s).
pub const SILENCE_MIN: Duration = Duration::from_millis(1_500);

/// The longest: QUIC's idle timeout on the agent's connection, which would
/// end the connection then anyway.
pub const SILENCE_MAX: Duration = IDLE_TIMEOUT;

/// The chance, accepted for one stretch of silence on a live link, that
/// every keep-alive in it and every answer is lost and the agent
/// reconnects for nothing. A stretch starts about every keep-alive
/// (2.7 per second), so less than one needless reconnect per agent a week
/// on a link that loses 30% of packets each way.
pub const FALSE_ALARM_ODDS: f64 = 1e-6;

/// The prior of the loss estimate: as if this many of the agent's packets
/// were sent before the first session, [`PRIOR_LOST_PACKETS`] of them
/// lost (2%). A new agent on a clean LAN gives a controller 1.9 s of
/// silence, [`SILENCE_MIN`] once it has sent a dozen packets or so
/// unlost (keep-alives alone send 2.7 a second).
pub const PRIOR_SENT_PACKETS: u64 = 50;
/// See [`PRIOR_SENT_PACKETS`].
pub const PRIOR_LOST_PACKETS: u64 = 1;

/// Past this many packets the history is halved, so a link that got
/// better (or worse) shows within hours, not weeks.
pub const HISTORY_PACKETS_MAX: u64 = 100_000;

/// A dial's handshake may take this many round trips of the link before
/// the floor is raised: QUIC with mutual TLS needs one, a lost packet
/// costs a probe timeout of about two more.
pub const HANDSHAKE_RTTS: u32 = 4;

/// The longest a dial may take: QUIC's idle timeout, what bounded a
/// handshake before the parallel dial.
pub const DIAL_TIMEOUT_MAX: Duration = IDLE_TIMEOUT;

/// The fraction of packets lost, each way, as estimated from `lost` of
/// `sent` packets and the prior.
pub fn loss_estimate(sent: u64, lost: u64) -> f64 {
    (lost.min(sent) + PRIOR_LOST_PACKETS) as f64 / (sent + PRIOR_SENT_PACKETS) as f64
}

/// How long a session may hear nothing before its controller counts as
/// dead, on a link that loses `loss` of packets each way with round trip
/// `rtt`; see the module documentation.
pub fn silence_limit(loss: f64, rtt: Duration) -> Duration {
    let unanswered = 1.0 - (1.0 - loss.clamp(0.0, 1.0)).powi(2);
    let pings = if unanswered <= 0.0 {
        0.0
    } else if unanswered >= 1.0 {
        f64::INFINITY
    } else {
        (FALSE_ALARM_ODDS.ln() / unanswered.ln()).ceil()
    };
    // The last ping's answer is a round trip away; twice that for jitter.
    let limit = AGENT_KEEP_ALIVE
        .as_secs_f64()
        .mul_add(pings, 2.0 * rtt.as_secs_f64());
    if limit.is_finite() && limit < SILENCE_MAX.as_secs_f64() {
        Duration::from_secs_f64(limit).max(SILENCE_MIN)
    } else {
        SILENCE_MAX
    }
}

/// How long one dial of a controller may take: `floor` or
/// [`HANDSHAKE_RTTS`] round trips of `rtt` (the link as last measured),
/// whichever is longer, doubled for each of `timed_out` dials in a row of
/// that address that timed out, at most [`DIAL_TIMEOUT_MAX`].
pub fn dial_timeout(floor: Duration, rtt: Option<Duration>, timed_out: u32) -> Duration {
    let base = rtt.map_or(floor, |rtt| floor.max(rtt * HANDSHAKE_RTTS));
    base.saturating_mul(1u32 << timed_out.min(16))
        .min(DIAL_TIMEOUT_MAX)
}

/// What an agent has seen of its links, over every session: its packets
/// sent and declared lost, and the latest round trip.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkHistory {
    /// Packets sent (path MTU probes left out: their loss is not loss).
    pub sent: u64,
    /// Of those, packets QUIC declared lost.
    pub lost: u64,
    /// The smoothed round trip of the latest session, if any.
    pub rtt: Option<Duration>,
}

impl LinkHistory {
    fn add(&mut self, sent: u64, lost: u64) {
        self.sent += sent;
        self.lost += lost.min(sent);
        while self.sent > HISTORY_PACKETS_MAX {
            self.sent /= 2;
            self.lost /= 2;
        }
    }
}

/// A session's watch on its controller: when it was last heard, and what
/// the link has lost so far.
#[derive(Debug)]
pub struct Watch {
    conn: quinn::Connection,
    before: LinkHistory,
    heard: u64,
    heard_at: Instant,
}

/// A watch's verdict: the controller is silent past its limit.
#[derive(Debug, Clone, Copy)]
pub struct Silent {
    /// How long nothing came.
    pub silent: Duration,
    /// The limit it was past.
    pub limit: Duration,
    /// The loss estimate the limit came from.
    pub loss: f64,
}

impl std::fmt::Display for Silent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "nothing from the controller for {} ms (the limit at {:.1}% estimated loss is {} ms)",
            self.silent.as_millis(),
            self.loss * 100.0,
            self.limit.as_millis()
        )
    }
}

/// This connection's packets sent (MTU probes left out) and lost.
fn counts(conn: &quinn::Connection) -> (u64, u64, u64) {
    let stats = conn.stats();
    let sent = stats
        .path
        .sent_packets
        .saturating_sub(stats.path.sent_plpmtud_probes);
    (sent, stats.path.lost_packets, stats.udp_rx.datagrams)
}

impl Watch {
    /// Starts watching `conn`, which was just set up, with what the agent
    /// saw of its links before.
    pub fn new(conn: quinn::Connection, before: LinkHistory) -> Watch {
        let heard = conn.stats().udp_rx.datagrams;
        Watch {
            conn,
            before,
            heard,
            heard_at: Instant::now(),
        }
    }

    /// Whether the controller has been silent past the limit, as of `now`.
    pub fn check(&mut self, now: Instant) -> Result<(), Silent> {
        let (sent, lost, heard) = counts(&self.conn);
        if heard != self.heard {
            self.heard = heard;
            self.heard_at = now;
            return Ok(());
        }
        let mut seen = self.before;
        seen.add(sent, lost);
        let loss = loss_estimate(seen.sent, seen.lost);
        let limit = silence_limit(loss, self.conn.rtt());
        let silent = now.saturating_duration_since(self.heard_at);
        if silent > limit {
            Err(Silent {
                silent,
                limit,
                loss,
            })
        } else {
            Ok(())
        }
    }

    /// What the agent has seen of its links, this session included.
    pub fn history(&self) -> LinkHistory {
        let (sent, lost, _) = counts(&self.conn);
        let mut seen = self.before;
        seen.add(sent, lost);
        seen.rtt = Some(self.conn.rtt());
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_link_gives_a_dead_controller_the_shortest_silence() {
        assert_eq!(silence_limit(0.0, Duration::from_micros(200)), SILENCE_MIN);
        // A minute and more of keep-alives, nothing lost.
        let loss = loss_estimate(1_000, 0);
        assert_eq!(silence_limit(loss, Duration::from_millis(1)), SILENCE_MIN);
    }

    #[test]
    fn a_new_agent_waits_a_little_longer_until_it_has_seen_its_link() {
        let limit = silence_limit(loss_estimate(0, 0), Duration::from_millis(1));
        assert!(
            limit > SILENCE_MIN && limit <= Duration::from_millis(2_000),
            "{limit:?}"
        );
    }

    /// Scenario 13's link: 30% loss each way, 400 ms round trip. Twenty
    /// and more keep-alives in a row unanswered before the controller is
    /// given up; 1.5 s was three or four, and agents reconnected over and
    /// over.
    #[test]
    fn a_lossy_slow_link_waits_out_its_losses() {
        let limit = silence_limit(0.3, Duration::from_millis(400));
        assert!(
            limit >= Duration::from_secs(8) && limit <= SILENCE_MAX,
            "{limit:?}"
        );
        let pings =
            (limit - Duration::from_millis(800)).as_secs_f64() / AGENT_KEEP_ALIVE.as_secs_f64();
        assert!(
            0.51f64.powf(pings.floor()) <= FALSE_ALARM_ODDS * 1.01,
            "{pings}"
        );
        // An estimate from scenario 13's first few seconds is most of it.
        let early = silence_limit(loss_estimate(60, 18), Duration::from_millis(400));
        assert!(early >= Duration::from_secs(5), "{early:?}");
    }

    #[test]
    fn a_link_that_loses_everything_waits_the_longest() {
        assert_eq!(silence_limit(1.0, Duration::ZERO), SILENCE_MAX);
        assert_eq!(silence_limit(0.9, Duration::from_secs(1)), SILENCE_MAX);
    }

    #[test]
    fn a_dial_is_short_on_a_lan_and_grows_while_it_times_out() {
        let floor = Duration::from_millis(500);
        let lan = Some(Duration::from_micros(300));
        assert_eq!(dial_timeout(floor, None, 0), floor);
        assert_eq!(dial_timeout(floor, lan, 0), floor);
        assert_eq!(dial_timeout(floor, lan, 1), floor * 2);
        assert_eq!(dial_timeout(floor, lan, 3), floor * 8);
        assert_eq!(dial_timeout(floor, lan, 5), DIAL_TIMEOUT_MAX);
        assert_eq!(dial_timeout(floor, lan, u32::MAX), DIAL_TIMEOUT_MAX);
        // Scenario 13's 400 ms round trip, measured in the last session.
        let slow = Some(Duration::from_millis(400));
        assert_eq!(dial_timeout(floor, slow, 0), Duration::from_millis(1_600));
        assert_eq!(dial_timeout(floor, slow, 2), Duration::from_millis(6_400));
    }

    #[test]
    fn the_history_forgets_slowly() {
        let mut h = LinkHistory::default();
        h.add(HISTORY_PACKETS_MAX, 10_000);
        h.add(2, 5);
        assert!(h.sent <= HISTORY_PACKETS_MAX);
        assert_eq!(h.lost, 5_001);
        assert!((loss_estimate(h.sent, h.lost) - 0.1).abs() < 0.001);
    }
}
