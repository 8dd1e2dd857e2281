//! An agent dials every listed controller at once (issue #26 item 6): one
//! listed first that never answers (a black hole: a UDP socket that reads
//! nothing and sends nothing back, like a dead host) must not hold it.
//!
//! Before, the agent dialed its addresses one at a time and a handshake to
//! a black hole waited out QUIC's 10 s idle timeout before the next
//! address was tried. Now the dials run together, each bounded by
//! `[timing] handshake_timeout_ms`, and the agent is connected to the live
//! controller in well under a second on loopback. No etcd: a sled
//! controller leads on its own.

use crate::binaries::{agent_binary, fleetweft};
use api::client::ApiClient;
use demo::NODES;
use protocol::bundle;
use std::time::{Duration, Instant};

/// The bound the agent must meet: far below the 10 s a handshake to the
/// black hole used to hold it, with room for a loaded CI machine.
const CONNECTED_WITHIN: Duration = Duration::from_secs(4);
/// How long the controller may take to answer its API at all, and the
/// agent to start.
const STEP: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_an_agent_skips_a_black_holed_controller() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).expect("logs dir");
    let names: Vec<String> = NODES.iter().map(|s| s.to_string()).collect();
    let pki = protocol::pki::init_fleet(&dir.join("pki"), &names, "localhost").expect("pki");
    let token = protocol::pki::load_operator_token(&pki.operator_token()).expect("token");
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).expect("keys dir");
    let (_, verifying) = bundle::keygen();
    bundle::save_verifying_key(&keys.join("bundle-signing.pub"), &verifying).expect("pubkey");
    let port = || demo::ports::free_port().expect("free port");
    let (quic_port, api_port) = (port(), port());
    let public_ports: Vec<u16> = NODES.iter().map(|_| port()).collect();
    demo::write_controller_config(dir, &pki, quic_port, api_port, &public_ports, None)
        .expect("controller config");
    let args = [
        "controller".to_string(),
        "--config".to_string(),
        dir.join("controller.toml").display().to_string(),
    ];
    let _controller = demo::spawn(&fleetweft(), &args, &dir.join("logs/controller.log"))
        .expect("start the controller");
    let api = ApiClient::new(format!("http://127.0.0.1:{api_port}"), Some(token));
    let deadline = Instant::now() + STEP;
    while api.fleet_view().await.is_err() {
        assert!(Instant::now() < deadline, "the controller never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Bound and never read: QUIC's Initial packets vanish, no ICMP answer.
    let black_hole = std::net::UdpSocket::bind("127.0.0.1:0").expect("a black hole");
    let hole = black_hole.local_addr().expect("its address");
    let node = NODES[0];
    let config = demo::write_agent_config(dir, &pki, node, quic_port, public_ports[0], None)
        .expect("agent config");
    let text = std::fs::read_to_string(&config).expect("read agent config");
    let text = text.replace(
        &format!("addr = \"127.0.0.1:{quic_port}\""),
        &format!("addrs = [\"{hole}\", \"127.0.0.1:{quic_port}\"]"),
    );
    assert!(text.contains("addrs = ["), "the agent lists both: {text}");
    std::fs::write(&config, text).expect("write agent config");
    let args = ["--config".to_string(), config.display().to_string()];
    let _agent = demo::spawn(
        &agent_binary(),
        &args,
        &dir.join(format!("logs/{node}.log")),
    )
    .expect("start the agent");
    let deadline = Instant::now() + STEP;
    loop {
        let connected = api
            .fleet_view()
            .await
            .is_ok_and(|v| v.nodes.iter().any(|n| n.name == node && n.connected));
        if connected {
            break;
        }
        assert!(Instant::now() < deadline, "{node} never connected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Timed in the agent's own log, from the end of its start (journal
    // opened, route reconstructed) to its session with the live controller,
    // so a slow start on a loaded machine does not count.
    let log = std::fs::read_to_string(dir.join(format!("logs/{node}.log"))).expect("agent log");
    let at = |needle: &str| {
        let line = log
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in {node}'s log:\n{log}"));
        seconds_of_day(line).unwrap_or_else(|| panic!("no timestamp on {line:?}"))
    };
    let ready = at("reconstructed what serves");
    let connected = at(&format!(
        "connected to the controller addr=127.0.0.1:{quic_port}"
    ));
    let took = Duration::from_secs_f64((connected - ready).rem_euclid(86_400.0));
    assert!(
        took < CONNECTED_WITHIN,
        "{node} reached the live controller {took:?} after its start (the black hole \
         listed first held it); its log:\n{log}"
    );
    eprintln!(
        "black hole listed first: {node} connected to the controller {} ms after its start",
        took.as_millis()
    );
    drop(black_hole);
}

/// `2026-12-05T19:46:12.632767Z ...` (tracing's UTC timestamp) -> seconds
/// since midnight.
fn seconds_of_day(line: &str) -> Option<f64> {
    let time = line.get(11..)?.split('Z').next()?;
    let mut parts = time.split(':');
    let hours: f64 = parts.next()?.parse().ok()?;
    let minutes: f64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    Some(hours * 3_600.0 + minutes * 60.0 + seconds)
}
