//! A UDP relay that delays every datagram, both ways: the stand-in for
//! `tc netem delay` on a kernel without `sch_netem`. It runs inside the
//! controller's namespace (`fleetweft-scenarios relay ...`); agents are
//! pointed at it instead of the controller's QUIC port.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;

/// Largest datagram relayed (QUIC's are at most ~1500 on this link).
pub const DATAGRAM_BYTES_MAX: usize = 65_535;
/// Upper bound on distinct clients (one upstream socket each).
pub const CLIENTS_MAX: usize = 64;

/// Relay datagrams between clients of `listen` and `upstream`, each one
/// delayed by `delay_ms`, forever.
pub async fn run(listen: SocketAddr, upstream: SocketAddr, delay_ms: u64) -> anyhow::Result<()> {
    let front = Arc::new(UdpSocket::bind(listen).await?);
    let delay = Duration::from_millis(delay_ms);
    let mut clients: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
    let mut buf = vec![0u8; DATAGRAM_BYTES_MAX];
    eprintln!("relay {listen} -> {upstream}, {delay_ms} ms each way");
    loop {
        let (len, client) = front.recv_from(&mut buf).await?;
        let back = match clients.get(&client) {
            Some(sock) => sock.clone(),
            None => {
                if clients.len() >= CLIENTS_MAX {
                    // Forget the oldest-looking entry rather than grow without bound.
                    clients.clear();
                }
                let bind: SocketAddr = if upstream.is_ipv4() {
                    "0.0.0.0:0".parse()?
                } else {
                    "[::]:0".parse()?
                };
                let sock = Arc::new(UdpSocket::bind(bind).await?);
                sock.connect(upstream).await?;
                clients.insert(client, sock.clone());
                // Upstream -> client, delayed.
                let (sock2, front2) = (sock.clone(), front.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; DATAGRAM_BYTES_MAX];
                    while let Ok(len) = sock2.recv(&mut buf).await {
                        let data = buf[..len].to_vec();
                        let front3 = front2.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(delay).await;
                            let _ = front3.send_to(&data, client).await;
                        });
                    }
                });
                sock
            }
        };
        let data = buf[..len].to_vec();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = back.send(&data).await;
        });
    }
}
