//! The controller's configuration (`runtime::daemon::config::ControllerConfig::parse`):
//! any text an operator writes. Parsing never panics, and an accepted config
//! answers the lookups the daemon makes of it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runtime::daemon::config::ControllerConfig;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    // The daemon reads the file with `read_to_string`: not UTF-8 never parses.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cfg) = ControllerConfig::parse(Path::new("controller.toml"), text) else {
        return;
    };
    assert!(!cfg.nodes.is_empty(), "an accepted config has nodes");
    for node in &cfg.nodes {
        let id = cfg
            .node_id(&node.name)
            .expect("a configured node has an id");
        assert_eq!(cfg.node_name(id), node.name);
    }
});
