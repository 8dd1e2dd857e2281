//! The simulated fleet's PKI, cached in a directory so repeated runs reuse
//! it: a fresh directory gets the whole PKI from `protocol::pki::init_fleet`
//! (one rcgen P-256 key and certificate per node); an existing one gets
//! only the node certificates it lacks (`protocol::pki::issue_node`).

use anyhow::Context;
use protocol::pki::FleetPki;
use std::path::Path;
use std::time::Instant;

/// The controller host name in the controller's certificate.
pub const CONTROLLER_HOST: &str = "localhost";

/// What preparing the PKI took.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PkiTiming {
    /// Node certificates generated in this run (0: all reused).
    pub generated: usize,
    /// Node certificates reused from the cache.
    pub reused: usize,
    /// Seconds spent generating.
    pub seconds: f64,
}

/// The name of simulated node `index`.
pub fn node_name(index: usize) -> String {
    format!("sim-{index:05}")
}

/// A PKI in `dir` with a certificate for every one of `names`.
pub fn ensure(dir: &Path, names: &[String]) -> anyhow::Result<(FleetPki, PkiTiming)> {
    let started = Instant::now();
    let pki = FleetPki {
        dir: dir.to_path_buf(),
        nodes: names.to_vec(),
    };
    if !pki.ca_cert().exists() {
        let made = protocol::pki::init_fleet(dir, names, CONTROLLER_HOST)
            .with_context(|| format!("creating the PKI in {}", dir.display()))?;
        let timing = PkiTiming {
            generated: names.len(),
            reused: 0,
            seconds: started.elapsed().as_secs_f64(),
        };
        return Ok((made, timing));
    }
    // A node with half a pair gets a new pair from `issue_node` (which
    // replaces); the ones with neither file are issued in one batch (the
    // CA read once, one directory sync: this PKI is a cache).
    let mut generated = 0;
    let mut lacking = Vec::new();
    for name in names {
        match (pki.node_cert(name).exists(), pki.node_key(name).exists()) {
            (true, true) => continue,
            (false, false) => lacking.push(name.clone()),
            _ => {
                protocol::pki::issue_node(dir, name, true)
                    .with_context(|| format!("issuing {name} in {}", dir.display()))?;
            }
        }
        generated += 1;
    }
    protocol::pki::issue_nodes_unsynced(dir, &lacking)
        .with_context(|| format!("issuing {} nodes in {}", lacking.len(), dir.display()))?;
    let timing = PkiTiming {
        generated,
        reused: names.len() - generated,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok((pki, timing))
}
