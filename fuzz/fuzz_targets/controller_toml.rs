//! The controller's configuration (`controller::daemon::config::ControllerConfig::parse`):
//! any text an operator writes. Parsing never panics, and the bootstrap of
//! an accepted config enrolls every `[[nodes]]` entry: the model accepts
//! each name, label set and route, in file order, at ids 0, 1, ...
#![no_main]

use controller::daemon::config::ControllerConfig;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    // The daemon reads the file with `read_to_string`: not UTF-8 never parses.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cfg) = ControllerConfig::parse(Path::new("controller.toml"), text) else {
        return;
    };
    let mut state = model::controller::ControllerState::default();
    for (i, node) in cfg.nodes.iter().enumerate() {
        let input = model::controller::Input::EnrollNode {
            name: node.name.clone(),
            labels: node.labels.clone(),
            public: node.public.to_string(),
        };
        let events = model::controller::step(&state, &input).expect("an accepted entry enrolls");
        for event in &events {
            model::controller::apply(&mut state, event);
        }
        assert_eq!(state.roster.id(&node.name), Some(model::NodeId(i as u32)));
    }
});
