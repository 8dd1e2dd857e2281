//! The scenario network: one namespace per host, each joined by a veth pair
//! to a bridge that lives in a namespace of its own, plus an "operator" veth
//! from the root namespace (where the harness and the operator's CLI run).
//!
//! Faults are made where a real network makes them: a link taken down on
//! the bridge (both ways), nftables rules in the bridge's forward path (one
//! way, random loss). This kernel has no `sch_netem`
//! (`CONFIG_NET_SCH_NETEM` is not set), so delay is added by a userspace
//! UDP relay on the QUIC path instead (see `relay.rs`).

use anyhow::{bail, Context};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every namespace and root-namespace link the harness makes starts with
/// this, so leftovers can be found (and never confused with the host's).
pub const PREFIX: &str = "fwsc";

/// The operator's port on the bridge (its peer is `fwsc-op` in the root
/// namespace, where the harness and the CLI run).
pub const OPERATOR_PORT: &str = "v-op";
/// The scenario subnet (a /24 unlikely to collide with a host's own).
pub const SUBNET: &str = "10.213.77";
/// The operator's address (root namespace).
pub const OPERATOR_IP: &str = "10.213.77.254";
/// How long any one `ip`/`nft` command may take.
pub const COMMAND_TIMEOUT_MS: u64 = 10_000;

/// Which way a one-way cut drops packets.
#[derive(Clone, Copy, Debug)]
pub enum Direction {
    /// Packets towards the host are dropped (e.g. controller → node).
    Inbound,
}

/// One host of the scenario network.
#[derive(Clone, Debug)]
pub struct Host {
    /// Short name: `ctl`, `a`, `b`, `c`, `x`.
    pub name: String,
    /// Its network namespace.
    pub ns: String,
    /// Its address on the scenario subnet.
    pub ip: String,
    /// The bridge-side end of its veth pair (in the bridge namespace).
    pub port: String,
}

/// The scenario network; [`Net::teardown`] removes all of it.
pub struct Net {
    /// The bridge namespace.
    pub bridge_ns: String,
    /// The hosts, in creation order.
    pub hosts: Vec<Host>,
    /// Whether the teardown already ran.
    torn_down: bool,
}

/// Run a command with a deadline; its output is returned, a failure names
/// the command and what it printed.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let deadline = Instant::now() + Duration::from_millis(COMMAND_TIMEOUT_MS);
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "`{program} {}` took over {COMMAND_TIMEOUT_MS} ms",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> anyhow::Result<String> {
    run("ip", args)
}

/// Feed an nftables script to `nft -f -` inside `ns`.
fn nft(ns: &str, script: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nft")?;
    child
        .stdin
        .take()
        .context("nft stdin")?
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "nft in {ns} failed: {}\nscript:\n{script}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The etcd server binary (Debian's `etcd-server`, see scripts/etcd.sh):
/// a tool [`preflight`] installs, run in the controller hosts' namespaces
/// by [`crate::fleet`].
pub const ETCD_EXE: &str = "etcd";

/// Install what the harness needs (iproute2, nftables, and with
/// `need_etcd` the etcd server of the HA scenarios) when missing, and
/// check that namespaces can be made at all: fails with a clear reason
/// otherwise (not root, no netns support).
pub fn preflight(need_etcd: bool) -> anyhow::Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("the scenarios need root (network namespaces, veth, nftables); run as root");
    }
    let mut missing = Vec::new();
    for (tool, package) in [
        ("ip", "iproute2"),
        ("nft", "nftables"),
        ("python3", "python3"),
    ] {
        if run("sh", &["-c", &format!("command -v {tool}")]).is_err() {
            missing.push(package);
        }
    }
    if !missing.is_empty() {
        eprintln!("installing {}", missing.join(" "));
        run("apt-get", &["update", "-qq"]).context("apt-get update")?;
        let mut args = vec!["install", "-y", "-qq"];
        args.extend(missing.iter().copied());
        run("apt-get", &args).context("installing the scenario tools")?;
    }
    // Debian's etcd-server through the one installer, which leaves the
    // package's system etcd neither running nor enabled at boot.
    if need_etcd && run("sh", &["-c", &format!("command -v {ETCD_EXE}")]).is_err() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/etcd.sh");
        eprintln!("installing etcd-server ({script} install etcd)");
        run("bash", &[script, "install", "etcd"]).context("installing etcd")?;
    }
    let probe = format!("{PREFIX}-probe");
    let _ = ip(&["netns", "del", &probe]);
    ip(&["netns", "add", &probe]).context(
        "cannot create a network namespace (`ip netns add`): the scenarios need root and netns support",
    )?;
    ip(&["netns", "del", &probe])?;
    Ok(())
}

/// Namespaces, and links in the root namespace, that carry [`PREFIX`].
pub fn leftovers() -> Vec<String> {
    let mut found = Vec::new();
    if let Ok(list) = ip(&["netns", "list"]) {
        for line in list.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if name.starts_with(PREFIX) {
                found.push(format!("namespace {name}"));
            }
        }
    }
    if let Ok(list) = ip(&["-o", "link", "show"]) {
        for line in list.lines() {
            // "7: fwsc-op@if6: <...>"
            let name = line.split(':').nth(1).unwrap_or("").trim();
            let name = name.split('@').next().unwrap_or("");
            if name.starts_with(PREFIX) {
                found.push(format!("link {name}"));
            }
        }
    }
    found
}

/// Remove whatever [`leftovers`] finds (after a harness that was killed).
pub fn remove_leftovers() {
    for item in leftovers() {
        if let Some(ns) = item.strip_prefix("namespace ") {
            let _ = ip(&["netns", "del", ns]);
        } else if let Some(link) = item.strip_prefix("link ") {
            let _ = ip(&["link", "del", link]);
        }
    }
}

impl Net {
    /// Make the bridge namespace, one namespace per `(name, last octet)`,
    /// and the operator's veth in the root namespace.
    pub fn create(hosts: &[(&str, u8)]) -> anyhow::Result<Net> {
        let bridge_ns = format!("{PREFIX}-br");
        let mut net = Net {
            bridge_ns: bridge_ns.clone(),
            hosts: Vec::new(),
            torn_down: false,
        };
        // From here on, a failure still tears down what was made (Drop).
        ip(&["netns", "add", &bridge_ns])?;
        ip(&["-n", &bridge_ns, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &bridge_ns, "link", "set", "br0", "up"])?;
        ip(&["-n", &bridge_ns, "link", "set", "lo", "up"])?;
        for (name, octet) in hosts {
            let ns = format!("{PREFIX}-{name}");
            let port = format!("v-{name}");
            let addr = format!("{SUBNET}.{octet}");
            ip(&["netns", "add", &ns])?;
            // Known before it is configured, so a failure below still
            // removes it.
            net.hosts.push(Host {
                name: name.to_string(),
                ns: ns.clone(),
                ip: addr.clone(),
                port: port.clone(),
            });
            ip(&[
                "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", &port,
                "netns", &bridge_ns,
            ])?;
            ip(&[
                "-n", &bridge_ns, "link", "set", &port, "master", "br0", "up",
            ])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        let op_link = format!("{PREFIX}-op");
        ip(&[
            "link",
            "add",
            &op_link,
            "type",
            "veth",
            "peer",
            "name",
            OPERATOR_PORT,
            "netns",
            &bridge_ns,
        ])?;
        ip(&[
            "-n",
            &bridge_ns,
            "link",
            "set",
            OPERATOR_PORT,
            "master",
            "br0",
            "up",
        ])?;
        ip(&["addr", "add", &format!("{OPERATOR_IP}/24"), "dev", &op_link])?;
        ip(&["link", "set", &op_link, "up"])?;
        Ok(net)
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> anyhow::Result<&Host> {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .with_context(|| format!("no host {name} in this scenario"))
    }

    /// Take `host`'s link down at the bridge: nothing passes either way.
    pub fn cut(&self, host: &str) -> anyhow::Result<()> {
        let h = self.host(host)?;
        ip(&["-n", &self.bridge_ns, "link", "set", &h.port, "down"])?;
        Ok(())
    }

    /// Bring `host`'s link back up.
    pub fn heal(&self, host: &str) -> anyhow::Result<()> {
        let h = self.host(host)?;
        ip(&["-n", &self.bridge_ns, "link", "set", &h.port, "up"])?;
        Ok(())
    }

    fn one_way_table(host: &Host, direction: Direction) -> String {
        let way = match direction {
            Direction::Inbound => "in",
        };
        format!("cut_{}_{way}", host.name)
    }

    /// Drop every packet one way on `host`'s link (in the bridge).
    pub fn cut_one_way(&self, host: &str, direction: Direction) -> anyhow::Result<()> {
        let h = self.host(host)?;
        let table = Self::one_way_table(h, direction);
        let matcher = match direction {
            Direction::Inbound => format!("oifname \"{}\"", h.port),
        };
        nft(
            &self.bridge_ns,
            &format!(
                "table bridge {table} {{\n chain forward {{\n  type filter hook forward priority 0; policy accept;\n  {matcher} drop\n }}\n}}\n"
            ),
        )
    }

    /// Undo [`Net::cut_one_way`].
    pub fn heal_one_way(&self, host: &str, direction: Direction) -> anyhow::Result<()> {
        let h = self.host(host)?;
        let table = Self::one_way_table(h, direction);
        nft(&self.bridge_ns, &format!("delete table bridge {table}\n"))
    }

    /// Cut `host` from each of `others`, both ways, in the bridge: every
    /// other path (to the operator, to the remaining hosts) still works.
    pub fn partition(&self, host: &str, others: &[&str]) -> anyhow::Result<()> {
        let h = self.host(host)?;
        let ports = others
            .iter()
            .map(|o| self.host(o).map(|o| format!("\"{}\"", o.port)))
            .collect::<anyhow::Result<Vec<_>>>()?
            .join(", ");
        nft(
            &self.bridge_ns,
            &format!(
                "table bridge part_{} {{\n chain forward {{\n  type filter hook forward priority 0; policy accept;\n  iifname \"{}\" oifname {{ {ports} }} drop\n  iifname {{ {ports} }} oifname \"{}\" drop\n }}\n}}\n",
                h.name, h.port, h.port
            ),
        )
    }

    /// Undo [`Net::partition`].
    pub fn heal_partition(&self, host: &str) -> anyhow::Result<()> {
        let h = self.host(host)?;
        nft(
            &self.bridge_ns,
            &format!("delete table bridge part_{}\n", h.name),
        )
    }

    /// Drop `percent` of the packets between fleet hosts (controller and
    /// nodes), at random: every such packet crosses the bridge exactly once.
    ///
    /// The operator's port ([`OPERATOR_PORT`]) is exempt. It carries the
    /// harness's own measurements and writes (CLI calls, route checks), and
    /// loss there tests TCP's retransmission against the CLI's 10 s limit,
    /// not Fleetweft: a CI run failed exactly so, on a `rollout start` whose
    /// bundle upload timed out. An operator's non-idempotent write cannot be
    /// retried blindly, so the harness would have to guess; instead the
    /// operator is on a clean management path, like a real operator on a
    /// different network than the edge links.
    pub fn lose(&self, percent: u8) -> anyhow::Result<()> {
        assert!(percent <= 100, "a percentage");
        nft(
            &self.bridge_ns,
            &format!(
                "table bridge loss {{\n chain forward {{\n  type filter hook forward priority 0; policy accept;\n  iifname \"{OPERATOR_PORT}\" accept\n  oifname \"{OPERATOR_PORT}\" accept\n  numgen random mod 100 < {percent} drop\n }}\n}}\n"
            ),
        )
    }

    /// Remove everything: namespaces (their veth ends go with them) and the
    /// operator's link. Safe to call twice.
    pub fn teardown(&mut self) -> anyhow::Result<()> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        let mut errors = Vec::new();
        for h in &self.hosts {
            if let Err(e) = ip(&["netns", "del", &h.ns]) {
                errors.push(e.to_string());
            }
        }
        let _ = ip(&["link", "del", &format!("{PREFIX}-op")]);
        if let Err(e) = ip(&["netns", "del", &self.bridge_ns]) {
            errors.push(e.to_string());
        }
        if !errors.is_empty() {
            bail!("teardown: {}", errors.join("; "));
        }
        Ok(())
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("network teardown failed: {e:#}");
        }
    }
}
