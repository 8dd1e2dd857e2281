//! A per-node bound on agent messages. Every message an agent sends becomes
//! at least one fsynced log append (a late report, a hello, a message about
//! someone else's op are all recorded), so an authenticated but misbehaving
//! node could otherwise grow the log as fast as it can send. A well-behaved
//! agent sends a hello per connection and re-sends its outstanding message
//! once per retry interval (1 s by default): a few messages a second.
//!
//! Sans-IO: time is an input, so the bucket is tested without sleeping.

use std::time::{Duration, Instant};

/// Messages a node may send per second, sustained.
pub const AGENT_MESSAGES_PER_S_MAX: u32 = 20;
/// Messages a node may send in one burst (a reconnect re-sends a hello and
/// its outstanding message at once).
pub const AGENT_MESSAGES_BURST_MAX: u32 = 50;

/// A token bucket: `AGENT_MESSAGES_BURST_MAX` tokens, refilled at
/// `AGENT_MESSAGES_PER_S_MAX` per second; a message takes one.
#[derive(Clone, Debug)]
pub struct MessageBudget {
    /// Tokens available, in thousandths (integer arithmetic, no drift).
    tokens_milli: u64,
    last: Instant,
}

impl MessageBudget {
    /// A full bucket at `now`.
    pub fn new(now: Instant) -> Self {
        MessageBudget {
            tokens_milli: u64::from(AGENT_MESSAGES_BURST_MAX) * 1000,
            last: now,
        }
    }

    /// Whether one more message at `now` is within the bound; takes a token
    /// when it is. A `now` earlier than the last call refills nothing.
    pub fn admit(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last);
        self.last = self.last.max(now);
        let refill = refill_milli(elapsed);
        let cap = u64::from(AGENT_MESSAGES_BURST_MAX) * 1000;
        self.tokens_milli = self.tokens_milli.saturating_add(refill).min(cap);
        if self.tokens_milli >= 1000 {
            self.tokens_milli -= 1000;
            true
        } else {
            false
        }
    }
}

/// Thousandths of a token earned over `elapsed`.
fn refill_milli(elapsed: Duration) -> u64 {
    // rate tokens/s = rate milli-tokens/ms.
    let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    ms.saturating_mul(u64::from(AGENT_MESSAGES_PER_S_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_admitted_then_the_sustained_rate() {
        let t0 = Instant::now();
        let mut budget = MessageBudget::new(t0);
        for i in 0..AGENT_MESSAGES_BURST_MAX {
            assert!(budget.admit(t0), "message {i} of the burst");
        }
        assert!(!budget.admit(t0), "the burst is spent");
        // One second later: exactly the sustained rate again.
        let t1 = t0 + Duration::from_secs(1);
        for i in 0..AGENT_MESSAGES_PER_S_MAX {
            assert!(budget.admit(t1), "message {i} after a second");
        }
        assert!(!budget.admit(t1));
        // A long silence refills to the burst, never beyond.
        let t2 = t1 + Duration::from_secs(3600);
        let admitted = (0..1000).filter(|_| budget.admit(t2)).count();
        assert_eq!(admitted, AGENT_MESSAGES_BURST_MAX as usize);
    }

    #[test]
    fn a_well_behaved_agent_is_never_refused() {
        // A hello plus one re-sent message every 100 ms (10x the default
        // retry rate) for ten minutes.
        let t0 = Instant::now();
        let mut budget = MessageBudget::new(t0);
        assert!(budget.admit(t0));
        for tick in 1..=6000u64 {
            assert!(budget.admit(t0 + Duration::from_millis(tick * 100)));
        }
    }
}
