//! What left a process before the cut, read from outside the lazy mounts:
//! the agents' logs (on the ordinary disk) name every command they received
//! and how many journal records were durable when they acted; the
//! harness's own API replies name every write it had acknowledged.

use model::controller::Event;
use model::Decision;

/// A command an agent received: the controller had sent it, so what it
/// rests on must be in the controller's log after any cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// `Apply { op }`: the grant of `op`.
    Apply {
        /// The op's number.
        op: u32,
    },
    /// `CommitReply { op, decision }`: the stored decision.
    Commit {
        /// The op's number.
        op: u32,
        /// The decision the agent acted on.
        decision: Decision,
    },
    /// `Restore { op }`: the controller ordered a restore.
    Restore {
        /// The op's number.
        op: u32,
    },
    /// `Settled { op }`: the op settled.
    Settled {
        /// The op's number.
        op: u32,
    },
}

impl Received {
    /// True when `event` is the durable fact this command rests on.
    pub fn rests_on(&self, event: &Event) -> bool {
        match (self, event) {
            (Received::Apply { op }, Event::OpGranted { op: o, .. }) => o.0 == *op,
            (Received::Commit { op, decision }, Event::CommitDecided { op: o, decision: d }) => {
                o.0 == *op && d == decision
            }
            (Received::Restore { op }, Event::RestoreRequested { op: o, .. }) => o.0 == *op,
            (Received::Settled { op }, Event::OpSettled { op: o, .. }) => o.0 == *op,
            _ => false,
        }
    }
}

/// What one agent's log (one start) shows it received and journaled.
#[derive(Debug, Default)]
pub struct AgentWitness {
    /// Commands received, in order.
    pub received: Vec<Received>,
    /// The most journal records the agent said were durable.
    pub journal_records: u64,
}

/// Reads an agent's log text.
pub fn read_agent_log(text: &str) -> AgentWitness {
    let mut witness = AgentWitness::default();
    for line in text.lines() {
        if let Some(at) = line.find("cmd=") {
            if let Some(received) = parse_command(&line[at + 4..]) {
                witness.received.push(received);
            }
        }
        if let Some(n) = field_u64(line, "journal_records=") {
            witness.journal_records = witness.journal_records.max(n);
        }
    }
    witness
}

/// `CommitReply { op: OpId(3), generation: .., release: .., decision: Commit }`.
fn parse_command(text: &str) -> Option<Received> {
    let op = field_u64(text, "op: OpId(")? as u32;
    if text.starts_with("Apply {") {
        Some(Received::Apply { op })
    } else if text.starts_with("CommitReply {") {
        let at = text.find("decision: ")? + "decision: ".len();
        let decision = if text[at..].starts_with("Commit") {
            Decision::Commit
        } else if text[at..].starts_with("Abort") {
            Decision::Abort
        } else {
            return None;
        };
        Some(Received::Commit { op, decision })
    } else if text.starts_with("Restore {") {
        Some(Received::Restore { op })
    } else if text.starts_with("Settled {") {
        Some(Received::Settled { op })
    } else {
        None
    }
}

/// The decimal number right after `key` in `text`.
fn field_u64(text: &str, key: &str) -> Option<u64> {
    let at = text.find(key)? + key.len();
    let digits: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// A write the controller's API acknowledged: the events it said it
/// recorded, each at its sequence, in domain words.
#[derive(Clone, Debug)]
pub struct AckedWrite {
    /// What the harness asked (for messages).
    pub what: String,
    /// `(sequence, text)` of each event the reply named.
    pub events: Vec<(u64, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_journal_counts_are_read_from_an_agent_log() {
        let log = "\
2026-12-05T12:00:00Z  INFO agent::daemon: command cmd=Apply { op: OpId(7), generation: Generation(2), release: 0a0b }
2026-12-05T12:00:00Z  INFO agent::daemon: op7: accepted node=node-a journal_records=12
2026-12-05T12:00:01Z  INFO agent::daemon: command cmd=CommitReply { op: OpId(7), generation: Generation(2), release: 0a0b, decision: Abort }
2026-12-05T12:00:01Z  INFO agent::daemon: op7: switched node=node-a journal_records=14
2026-12-05T12:00:02Z  INFO agent::daemon: command cmd=Settled { op: OpId(7), generation: Generation(2) }
";
        let w = read_agent_log(log);
        assert_eq!(
            w.received,
            vec![
                Received::Apply { op: 7 },
                Received::Commit {
                    op: 7,
                    decision: Decision::Abort
                },
                Received::Settled { op: 7 },
            ]
        );
        assert_eq!(w.journal_records, 14);
    }
}
