//! The agent's configuration (`agent::config::AgentConfig::parse`): any text
//! an operator writes. Parsing never panics, and an accepted config holds
//! what the parser promises (a valid node id, a non-zero port).
#![no_main]

use agent::config::AgentConfig;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    // The agent reads the file with `read_to_string`: not UTF-8 never parses.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cfg) = AgentConfig::parse(Path::new("agent.toml"), text) else {
        return;
    };
    assert!(protocol::pki::validate_node_id(&cfg.node).is_ok());
    assert_ne!(cfg.public_port, 0);
});
