//! What the core hands one agent connection's writer ([`super::links`]):
//! the core's commands and the readbacks it asks for ([`super::readback`]).

use model::ToAgent;

/// What the core hands one agent connection's writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkMsg {
    /// A command of the controller core for the agent.
    Command(ToAgent),
    /// Ask the agent for a fresh readback of its route.
    ReadBack {
        /// The id the reply must name.
        request: u64,
    },
}
