//! One simulated fleet run: PKI, bundles, the embedded route server, the
//! real controller, N simulated agents, one rollout over all of them, the
//! measurements, and a restart of the controller on the resulting log.

use crate::agent::{self, Faults, Shared, SimNode};
use crate::controller::ControllerSetup;
pub use crate::fleet::{Fleet, PROGRESS_EVERY_MS, ROLLOUT_POLL_MS};
use crate::options::Options;
use crate::report::{self, Report};
use crate::routes::{Routes, SimRelease};
use crate::stats::Stats;
use anyhow::{bail, Context};
use api::client::ApiClient;
use model::Digest;
use protocol::bundle;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A release of the simulated app: its digest and signed bundle bytes.
struct Built {
    digest: Digest,
    bytes: Vec<u8>,
    probe: bundle::ProbeSpec,
}

/// Run the whole simulation and measure it.
pub async fn run(options: &Options) -> anyhow::Result<Report> {
    options.validate().map_err(anyhow::Error::msg)?;
    let dir = work_dir(options.dir.as_deref())?;
    let mut fleet = bring_up(options, &dir).await?;
    let rollout = report::run_rollout(options, &fleet).await?;
    if !rollout.finished {
        // Out of time: stop the agents' retries first, so a controller that
        // fell behind drains its queue and can answer the report's reads.
        stop_agents(&mut fleet);
    }
    let mut report = report::collect(options, &fleet, rollout).await?;
    if options.hold_s > 0 {
        eprintln!(
            "fleetsim: holding the fleet {} s; console at http://127.0.0.1:{}/",
            options.hold_s, fleet.setup.api_port
        );
        tokio::time::sleep(std::time::Duration::from_secs(options.hold_s)).await;
    }
    stop_agents(&mut fleet);
    report.restart = Some(report::restart(&mut fleet).await?);
    // A temporary work directory goes once the run is measured (a failed
    // run keeps it, for its controller log); a given --dir stays.
    if options.dir.is_none() {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            eprintln!("fleetsim: could not remove {}: {e}", dir.display());
        }
    }
    Ok(report)
}

fn stop_agents(fleet: &mut Fleet) {
    for task in &fleet.tasks {
        task.abort();
    }
    fleet.tasks.clear();
}

fn work_dir(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match given {
        Some(d) => d.to_path_buf(),
        None => std::env::temp_dir().join(format!("fleetweft-fleetsim-{}", std::process::id())),
    };
    if dir.exists() && std::fs::read_dir(&dir)?.next().is_some() {
        bail!("{} is not empty; give an empty or new --dir", dir.display());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// The `fleetweft` binary: given, or next to this one.
fn controller_exe(options: &Options) -> anyhow::Result<PathBuf> {
    let exe = match &options.controller_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("locating this binary")?
            .with_file_name("fleetweft"),
    };
    if !exe.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p runtime --bin fleetweft` or give --controller-bin",
            exe.display()
        );
    }
    Ok(exe)
}

/// Sign v1 (what every node serves at the start) and v2 (rolled out).
fn build_releases(dir: &Path) -> anyhow::Result<(PathBuf, Vec<Built>)> {
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys)?;
    let (signing, verifying) = bundle::keygen();
    let pubkey = keys.join("bundle-signing.pub");
    bundle::save_verifying_key(&pubkey, &verifying)?;
    let mut built = Vec::new();
    for version in ["v1", "v2"] {
        let bytes = demo::sign_hello(&signing, version)?;
        let verified = bundle::verify(&verifying, &bytes)?;
        built.push(Built {
            digest: bundle::bundle_digest(&bytes),
            probe: verified.manifest.probe,
            bytes,
        });
    }
    Ok((pubkey, built))
}

/// Which followers misbehave: exact counts (rounded percentages of the
/// followers), disjoint, picked by the seed. The canary never does, so a
/// run measures the fleet rather than stopping at the first node.
pub fn assign_faults(nodes: usize, options: &Options) -> Vec<Faults> {
    let followers = nodes - 1;
    let count = |p: f64| ((p / 100.0) * followers as f64).round() as usize;
    let mut order: Vec<usize> = (1..nodes).collect();
    order.sort_by_key(|i| agent::splitmix(options.seed ^ *i as u64));
    let mut faults = vec![Faults::default(); nodes];
    let (wrong, silent, crash) = (
        count(options.wrong),
        count(options.silent),
        count(options.crash),
    );
    for (k, &i) in order.iter().enumerate() {
        if k < wrong {
            faults[i].wrong = true;
        } else if k < wrong + silent {
            faults[i].silent = true;
        } else if k < wrong + silent + crash {
            faults[i].crash = true;
        }
    }
    faults
}

/// The one embedded route server, bound on every loopback address: v1
/// serving everywhere, v2 answering wrongly on the `wrong` nodes.
async fn route_server(
    built: &[Built],
    faults: &[Faults],
) -> anyhow::Result<(Arc<Routes>, tokio::net::TcpListener)> {
    let route_port = demo::ports::free_port()?;
    // One listener for every route: 127.10.x.y all reach 0.0.0.0 (loopback).
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", route_port))
        .await
        .with_context(|| format!("binding the route server on 0.0.0.0:{route_port}"))?;
    let releases = built
        .iter()
        .map(|b| SimRelease {
            digest: b.digest,
            probe: b.probe.clone(),
        })
        .collect();
    let wrong = faults.iter().map(|f| f.wrong).collect();
    let routes = Routes::new(
        route_port,
        releases,
        built[0].digest,
        wrong,
        built[1].digest,
    );
    Ok((Arc::new(routes), listener))
}

/// What every simulated agent shares.
fn shared_state(
    options: &Options,
    setup: &ControllerSetup,
    pki: &protocol::pki::FleetPki,
    routes: Arc<Routes>,
) -> anyhow::Result<Shared> {
    Ok(Shared {
        controller: std::net::SocketAddr::from(([127, 0, 0, 1], setup.quic_port)),
        server_name: crate::pki::CONTROLLER_HOST.to_string(),
        ca: pki.ca_cert(),
        handshakes: tokio::sync::Semaphore::new(options.connect_concurrency),
        routes,
        stats: Stats::default(),
        retry: Duration::from_millis(options.retry_ms),
        switch: options.switch_ms,
        silent_for: Duration::from_secs(options.silent_s),
        crash_restart: Duration::from_millis(options.crash_restart_ms),
        seed: options.seed,
        endpoints: agent::endpoints_for(options.agents as usize)?,
    })
}

async fn bring_up(options: &Options, dir: &Path) -> anyhow::Result<Fleet> {
    let exe = controller_exe(options)?;
    let n = options.agents as usize;
    let names: Vec<String> = (0..n).map(crate::pki::node_name).collect();
    eprintln!(
        "fleetsim: PKI for {n} nodes in {}",
        options.pki_dir.display()
    );
    let (pki, pki_timing) = crate::pki::ensure(&options.pki_dir, &names)?;
    eprintln!(
        "fleetsim: PKI ready ({} generated in {:.2} s, {} reused)",
        pki_timing.generated, pki_timing.seconds, pki_timing.reused
    );
    let token = protocol::pki::load_operator_token(&pki.operator_token())?;
    let (pubkey, built) = build_releases(dir)?;
    let faults = assign_faults(n, options);
    let (routes, listener) = route_server(&built, &faults).await?;
    tokio::spawn(routes.clone().serve(listener));
    let setup = ControllerSetup {
        exe,
        dir: dir.to_path_buf(),
        quic_port: demo::ports::free_port()?,
        api_port: demo::ports::free_port()?,
    };
    let publics: Vec<_> = (0..n).map(|i| routes.public(i)).collect();
    setup.write_config(&pki, &pubkey, &names, &publics, options.op_timeout_ms)?;
    let api = ApiClient::new(format!("http://127.0.0.1:{}", setup.api_port), Some(token));
    let (controller, up) = setup.start(&api, "controller.log").await?;
    eprintln!(
        "fleetsim: controller up in {:.2} s (pid {})",
        up.as_secs_f64(),
        controller.pid
    );
    let before = crate::procfs::sample(controller.pid)?;
    for b in &built {
        let _: serde_json::Value = api
            .post_bytes("/api/bundles", b.bytes.clone())
            .await
            .context("uploading a bundle")?;
    }
    let shared = Arc::new(shared_state(options, &setup, &pki, routes)?);
    let mut fleet = Fleet {
        api,
        pid: controller.pid,
        controller: Some(controller),
        setup,
        shared,
        tasks: Vec::new(),
        names,
        faults,
        target: built[1].digest,
        rss_before_kib: before.rss_kib,
        cpu_before_s: 0.0,
        connect_s: 0.0,
        pki: pki_timing,
    };
    connect_all(options, &mut fleet, &pki, built[0].digest).await?;
    Ok(fleet)
}

/// Start every agent and wait until the controller counts all connected.
async fn connect_all(
    options: &Options,
    fleet: &mut Fleet,
    pki: &protocol::pki::FleetPki,
    initial: Digest,
) -> anyhow::Result<()> {
    let started = Instant::now();
    for (index, name) in fleet.names.iter().enumerate() {
        let node = SimNode {
            index,
            name: name.clone(),
            cert: pki.node_cert(name),
            key: pki.node_key(name),
            faults: fleet.faults[index],
            platform: options.platform(index),
        };
        let shared = fleet.shared.clone();
        fleet
            .tasks
            .push(tokio::spawn(agent::run(node, shared, Some(initial))));
    }
    let n = fleet.names.len();
    let deadline = started + Duration::from_secs(options.timeout_s);
    loop {
        let metrics = fleet.api.get_text("/metrics").await.unwrap_or_default();
        let seen = report::metric(&metrics, "fleetweft_agents_connected").unwrap_or(0.0) as usize;
        eprintln!(
            "fleetsim: [{:>6.1} s] connected {seen}/{n} (controller), {}/{n} (agents)",
            started.elapsed().as_secs_f64(),
            Stats::get(&fleet.shared.stats.connected)
        );
        if seen == n {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "only {seen} of {n} agents connected within {} s",
                options.timeout_s
            );
        }
        tokio::time::sleep(Duration::from_millis(PROGRESS_EVERY_MS)).await;
    }
    fleet.connect_s = started.elapsed().as_secs_f64();
    fleet.cpu_before_s = crate::procfs::sample(fleet.pid)?.cpu_s;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn faults_are_exact_disjoint_and_spare_the_canary() {
        let options = Options::parse_from([
            "fleetweft-fleetsim",
            "--wrong",
            "2%",
            "--silent",
            "2",
            "--crash",
            "1%",
        ]);
        let faults = assign_faults(1001, &options);
        let count = |f: fn(&Faults) -> bool| faults.iter().filter(|x| f(x)).count();
        assert_eq!(count(|f| f.wrong), 20);
        assert_eq!(count(|f| f.silent), 20);
        assert_eq!(count(|f| f.crash), 10);
        assert_eq!(faults[0], Faults::default(), "the canary misbehaves");
        let both = faults
            .iter()
            .filter(|f| [f.wrong, f.silent, f.crash].iter().filter(|b| **b).count() > 1)
            .count();
        assert_eq!(both, 0, "a node got two faults");
        assert_eq!(assign_faults(1001, &options), faults, "not replayable");
    }
}
