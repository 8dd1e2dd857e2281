//! `fleetweft quickstart DIR --nodes a,b,c`: the files of a loopback fleet
//! (PKI, bundle-signing keys, `controller.toml`, one agent config per node,
//! the sample app) and the exact commands that start it and roll the sample
//! app out as v1 and v2.
//!
//! [`FleetLayout`] is the one builder of those files: `fleetweft demo` and
//! the tests write their configs through it too, so what a new user gets is
//! what the demo runs.

use protocol::bundle;
use protocol::pki::{self, FleetPki};
use std::path::{Path, PathBuf};

/// The controller API port when `--api-port` is not given (the CLI's
/// default `--controller` URL points here).
pub const DEFAULT_API_PORT: u16 = 7800;
/// The controller's QUIC port (agents connect here) by default.
pub const DEFAULT_QUIC_PORT: u16 = 7801;
/// The first node's public route port by default; node i gets base + i.
pub const DEFAULT_BASE_PUBLIC_PORT: u16 = 8081;
/// The op timeout the demo and the quickstart fleet use: short enough that
/// a stuck op on loopback shows within a minute.
pub const LOOPBACK_OP_TIMEOUT_MS: u64 = 15_000;
/// The name the sample app's bundles are signed under.
pub const SAMPLE_APP_NAME: &str = "hello";

/// Why the quickstart files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum QuickstartError {
    /// DIR exists and holds something: never write over a fleet.
    #[error("{0} is not empty; give an empty or new directory")]
    NotEmpty(PathBuf),
    /// No node names, a bad one or a repeated one.
    #[error("bad --nodes: {0}")]
    BadNodes(String),
    /// A public port would pass 65535 or land on the API or QUIC port.
    #[error("bad ports: {0}")]
    BadPorts(String),
    /// Creating the PKI failed.
    #[error("creating the PKI: {0}")]
    Pki(#[from] pki::PkiError),
    /// Writing the signing keys failed.
    #[error("writing the bundle-signing keys: {0}")]
    Keys(#[from] bundle::BundleError),
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> QuickstartError + '_ {
    move |source| QuickstartError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a loopback fleet's files live and which ports it uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetLayout {
    /// The fleet's directory (configs, `pki/`, `keys/`, data dirs).
    pub dir: PathBuf,
    /// Node names, in enrollment order.
    pub nodes: Vec<String>,
    /// The controller's QUIC port on 127.0.0.1.
    pub quic_port: u16,
    /// The controller's API port on 127.0.0.1.
    pub api_port: u16,
    /// Each node's public route port on 127.0.0.1, in `nodes` order.
    pub public_ports: Vec<u16>,
}

impl FleetLayout {
    /// The PKI directory.
    pub fn pki_dir(&self) -> PathBuf {
        self.dir.join("pki")
    }
    /// The bundle-signing secret key.
    pub fn signing_key(&self) -> PathBuf {
        self.dir.join("keys/bundle-signing.key")
    }
    /// The bundle-signing public key the controller and agents check with.
    pub fn verifying_key(&self) -> PathBuf {
        self.dir.join("keys/bundle-signing.pub")
    }
    /// `controller.toml`.
    pub fn controller_config(&self) -> PathBuf {
        self.dir.join("controller.toml")
    }
    /// `agent-<node>.toml`.
    pub fn agent_config(&self, node: &str) -> PathBuf {
        self.dir.join(format!("agent-{node}.toml"))
    }
    /// The copy of the sample app the printed sign commands use.
    pub fn sample_app(&self) -> PathBuf {
        self.dir.join("hello/app.py")
    }
    /// The controller API's URL.
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.api_port)
    }

    /// Create the PKI and the bundle-signing keys; the signing key is
    /// returned for callers that sign bundles themselves (the demo).
    pub fn write_pki_and_keys(
        &self,
    ) -> Result<(FleetPki, ed25519_dalek::SigningKey), QuickstartError> {
        let pki = pki::init_fleet(&self.pki_dir(), &self.nodes, "localhost")?;
        let keys = self.dir.join("keys");
        std::fs::create_dir_all(&keys).map_err(io_err(&keys))?;
        let (signing, verifying) = bundle::keygen();
        bundle::save_signing_key(&self.signing_key(), &signing)?;
        bundle::save_verifying_key(&self.verifying_key(), &verifying)?;
        Ok((pki, signing))
    }

    /// The text of `controller.toml`; `drop_reply_for` fills the demo's
    /// `[faults]` section (honoured only with `--allow-fault-injection`).
    pub fn controller_toml(&self, pki: &FleetPki, drop_reply_for: Option<model::Digest>) -> String {
        let data = self.dir.join("controller-data");
        self.controller_toml_with(pki, &data, self.quic_port, self.api_port, drop_reply_for)
    }

    /// A controller's config with its own data directory and ports: the
    /// single controller's and each controller of an HA fleet's.
    fn controller_toml_with(
        &self,
        pki: &FleetPki,
        data_dir: &Path,
        quic_port: u16,
        api_port: u16,
        drop_reply_for: Option<model::Digest>,
    ) -> String {
        let mut text = format!(
            "data_dir = {:?}\nlisten = \"127.0.0.1:{}\"\n\n[api]\nlisten = \"127.0.0.1:{}\"\n\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\noperator_token = {:?}\n\n[bundles]\npubkey = {:?}\n\n[timing]\nop_timeout_ms = {LOOPBACK_OP_TIMEOUT_MS}\n",
            data_dir.display().to_string(),
            quic_port,
            api_port,
            pki.ca_cert().display().to_string(),
            pki.controller_cert().display().to_string(),
            pki.controller_key().display().to_string(),
            pki.operator_token().display().to_string(),
            self.verifying_key().display().to_string(),
        );
        if let Some(release) = drop_reply_for {
            text.push_str(&format!(
                "\n[faults]\ndrop_first_commit_reply_for = \"{}\"\n",
                release.to_hex()
            ));
        }
        for (node, port) in self.nodes.iter().zip(&self.public_ports) {
            text.push_str(&format!(
                "\n[[nodes]]\nname = \"{node}\"\npublic = \"127.0.0.1:{port}\"\n"
            ));
        }
        text
    }

    /// `controller-<name>.toml`, one controller of an HA fleet.
    pub fn ha_controller_config(&self, name: &str) -> PathBuf {
        self.dir.join(format!("controller-{name}.toml"))
    }

    /// `controller-<name>-data`, one HA controller's data directory (its
    /// bundles, webhook cursor; the log is in etcd).
    pub fn ha_controller_data(&self, name: &str) -> PathBuf {
        self.dir.join(format!("controller-{name}-data"))
    }

    /// The text of one HA controller's config: the single controller's,
    /// on its own data directory and ports, with `[storage]` on `log`.
    pub fn ha_controller_toml(
        &self,
        pki: &FleetPki,
        controller: &HaController,
        log: &EtcdLog,
        drop_reply_for: Option<model::Digest>,
    ) -> String {
        let data = self.ha_controller_data(&controller.name);
        let mut text = self.controller_toml_with(
            pki,
            &data,
            controller.quic_port,
            controller.api_port,
            drop_reply_for,
        );
        let endpoints: Vec<String> = log.endpoints.iter().map(|e| format!("{e:?}")).collect();
        text.push_str(&format!(
            "\n[storage]\nbackend = \"etcd\"\nendpoints = [{}]\nprefix = {:?}\nlease_ttl_ms = {}\n",
            endpoints.join(", "),
            log.prefix,
            log.lease_ttl_ms
        ));
        text
    }

    /// Write `controller-<name>.toml` and return its path.
    pub fn write_ha_controller_config(
        &self,
        pki: &FleetPki,
        controller: &HaController,
        log: &EtcdLog,
        drop_reply_for: Option<model::Digest>,
    ) -> Result<PathBuf, QuickstartError> {
        let path = self.ha_controller_config(&controller.name);
        let text = self.ha_controller_toml(pki, controller, log, drop_reply_for);
        std::fs::write(&path, text).map_err(io_err(&path))?;
        Ok(path)
    }

    /// Write `controller.toml` and return its path.
    pub fn write_controller_config(
        &self,
        pki: &FleetPki,
        drop_reply_for: Option<model::Digest>,
    ) -> Result<PathBuf, QuickstartError> {
        let path = self.controller_config();
        std::fs::write(&path, self.controller_toml(pki, drop_reply_for)).map_err(io_err(&path))?;
        Ok(path)
    }

    /// The text of `node`'s agent config (public port `public_port`);
    /// `answer_wrongly` fills the demo's `[faults]` section.
    pub fn agent_toml(
        &self,
        pki: &FleetPki,
        node: &str,
        public_port: u16,
        answer_wrongly: Option<model::Digest>,
    ) -> String {
        let controller = format!("addr = \"127.0.0.1:{}\"", self.quic_port);
        self.agent_toml_with(pki, node, public_port, &controller, answer_wrongly)
    }

    /// The text of `node`'s agent config in an HA fleet: `[controller]
    /// addrs` lists every controller's QUIC port, in `controllers` order.
    pub fn ha_agent_toml(
        &self,
        pki: &FleetPki,
        node: &str,
        public_port: u16,
        controllers: &[HaController],
    ) -> String {
        let addrs: Vec<String> = controllers
            .iter()
            .map(|c| format!("\"127.0.0.1:{}\"", c.quic_port))
            .collect();
        let controller = format!("addrs = [{}]", addrs.join(", "));
        self.agent_toml_with(pki, node, public_port, &controller, None)
    }

    fn agent_toml_with(
        &self,
        pki: &FleetPki,
        node: &str,
        public_port: u16,
        controller: &str,
        answer_wrongly: Option<model::Digest>,
    ) -> String {
        let mut text = format!(
            "node = \"{node}\"\ndata_dir = {:?}\npublic_port = {public_port}\n\n[controller]\n{controller}\nserver_name = \"localhost\"\n\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n\n[bundles]\npubkey = {:?}\n",
            self.dir.join(format!("{node}-data")).display().to_string(),
            pki.ca_cert().display().to_string(),
            pki.node_cert(node).display().to_string(),
            pki.node_key(node).display().to_string(),
            self.verifying_key().display().to_string(),
        );
        if let Some(release) = answer_wrongly {
            text.push_str(&format!(
                "\n[faults]\nanswer_wrongly = [\"{}\"]\n",
                release.to_hex()
            ));
        }
        text
    }

    /// Write `agent-<node>.toml` and return its path.
    pub fn write_agent_config(
        &self,
        pki: &FleetPki,
        node: &str,
        public_port: u16,
        answer_wrongly: Option<model::Digest>,
    ) -> Result<PathBuf, QuickstartError> {
        let path = self.agent_config(node);
        let text = self.agent_toml(pki, node, public_port, answer_wrongly);
        std::fs::write(&path, text).map_err(io_err(&path))?;
        Ok(path)
    }
}

/// One controller of an HA loopback fleet: several controllers share one
/// log in etcd; one leads, the others are hot standbys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaController {
    /// Its name in file names (`controller-<name>.toml`) and narration.
    pub name: String,
    /// Its QUIC port on 127.0.0.1 (agents connect here).
    pub quic_port: u16,
    /// Its API port on 127.0.0.1.
    pub api_port: u16,
}

impl HaController {
    /// Its API's URL.
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.api_port)
    }
}

/// Where an HA loopback fleet's log lives: `[storage]` of every controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdLog {
    /// etcd client endpoints, `127.0.0.1:PORT`.
    pub endpoints: Vec<String>,
    /// The log's key prefix.
    pub prefix: String,
    /// The leadership lease TTL: a takeover waits about this long.
    pub lease_ttl_ms: u64,
}

/// Options of `fleetweft quickstart`.
#[derive(Clone, Debug)]
pub struct QuickstartOptions {
    /// The directory to write (new or empty).
    pub dir: PathBuf,
    /// Node names (1-63 of a-z, 0-9, '-').
    pub nodes: Vec<String>,
    /// The controller API port.
    pub api_port: u16,
    /// The controller QUIC port.
    pub quic_port: u16,
    /// The first node's public port; node i gets `base_public_port + i`.
    pub base_public_port: u16,
}

/// Check the options and lay the fleet out, writing nothing.
pub fn plan(options: &QuickstartOptions) -> Result<FleetLayout, QuickstartError> {
    if options.nodes.is_empty() {
        return Err(QuickstartError::BadNodes("give at least one node".into()));
    }
    for (i, node) in options.nodes.iter().enumerate() {
        pki::validate_node_id(node).map_err(|e| QuickstartError::BadNodes(e.to_string()))?;
        if options.nodes[..i].contains(node) {
            return Err(QuickstartError::BadNodes(format!(
                "{node:?} is given twice"
            )));
        }
    }
    let mut public_ports = Vec::with_capacity(options.nodes.len());
    for i in 0..options.nodes.len() {
        let port = u16::try_from(i)
            .ok()
            .and_then(|i| options.base_public_port.checked_add(i))
            .filter(|p| *p != 0)
            .ok_or_else(|| {
                QuickstartError::BadPorts(format!(
                    "{} nodes from public port {} pass 65535",
                    options.nodes.len(),
                    options.base_public_port
                ))
            })?;
        if port == options.api_port || port == options.quic_port {
            return Err(QuickstartError::BadPorts(format!(
                "public port {port} of {} is also the API or QUIC port",
                options.nodes[i]
            )));
        }
        public_ports.push(port);
    }
    if options.api_port == options.quic_port {
        return Err(QuickstartError::BadPorts(format!(
            "the API and QUIC ports are both {}",
            options.api_port
        )));
    }
    Ok(FleetLayout {
        dir: options.dir.clone(),
        nodes: options.nodes.clone(),
        quic_port: options.quic_port,
        api_port: options.api_port,
        public_ports,
    })
}

/// Write every file of the fleet into `options.dir` (refused unless it is
/// new or empty) and return the layout.
pub fn write(options: &QuickstartOptions) -> Result<FleetLayout, QuickstartError> {
    let layout = plan(options)?;
    let dir = &layout.dir;
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(QuickstartError::NotEmpty(dir.clone()));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        Err(e) => return Err(io_err(dir)(e)),
    }
    let (pki, _signing) = layout.write_pki_and_keys()?;
    layout.write_controller_config(&pki, None)?;
    for (node, port) in layout.nodes.iter().zip(&layout.public_ports) {
        layout.write_agent_config(&pki, node, *port, None)?;
    }
    let app = layout.sample_app();
    let app_dir = layout.dir.join("hello");
    std::fs::create_dir_all(&app_dir).map_err(io_err(&app_dir))?;
    std::fs::write(&app, crate::HELLO_APP).map_err(io_err(&app))?;
    Ok(layout)
}

/// `text` quoted for a POSIX shell when it needs it.
pub fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-:=,@+".contains(&b));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn command_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The printed steps: each is a heading and the command lines under it.
pub fn steps(layout: &FleetLayout, fleetweft: &Path, agent: &Path) -> Vec<(String, Vec<String>)> {
    let s = |p: &Path| p.display().to_string();
    let fw = s(fleetweft);
    let mut steps = vec![(
        format!(
            "Start the controller (API {}, agents connect to 127.0.0.1:{}):",
            layout.api_url(),
            layout.quic_port
        ),
        vec![command_line(&[
            fw.clone(),
            "controller".into(),
            "--config".into(),
            s(&layout.controller_config()),
        ])],
    )];
    steps.push((
        "Start each agent (one terminal, or one service, each):".into(),
        layout
            .nodes
            .iter()
            .map(|n| command_line(&[s(agent), "--config".into(), s(&layout.agent_config(n))]))
            .collect(),
    ));
    let sign = |version: &str| {
        command_line(&[
            fw.clone(),
            "bundle".into(),
            "sign".into(),
            "--key".into(),
            s(&layout.signing_key()),
            "--app".into(),
            s(&layout.sample_app()),
            "--name".into(),
            SAMPLE_APP_NAME.into(),
            "--version".into(),
            version.into(),
            "--probe-path".into(),
            "/hello".into(),
            "--expect-status".into(),
            "200".into(),
            "--expect-body".into(),
            format!("hello from {version}"),
            "--out".into(),
            s(&bundle_path(layout, version)),
        ])
    };
    steps.push((
        "Sign the sample app as v1 and as v2 (it answers the bundle's version):".into(),
        vec![sign("v1"), sign("v2")],
    ));
    for version in ["v1", "v2"] {
        steps.push((
            format!("Roll out {version} (canary first), then watch it complete:"),
            vec![rollout_line(layout, &fw, version), status_line(layout, &fw)],
        ));
    }
    steps
}

/// Where the printed sign command writes `version`'s bundle.
pub fn bundle_path(layout: &FleetLayout, version: &str) -> PathBuf {
    layout.dir.join(format!("hello-{version}.bundle"))
}

fn rollout_line(layout: &FleetLayout, fw: &str, version: &str) -> String {
    let mut words = vec![
        fw.to_string(),
        "rollout".into(),
        "start".into(),
        "--bundle".into(),
        bundle_path(layout, version).display().to_string(),
        "--slots".into(),
        "1".into(),
        "--canary".into(),
        layout.nodes[0].clone(),
    ];
    if layout.nodes.len() > 1 {
        words.push("--followers".into());
        words.push(layout.nodes[1..].join(","));
    }
    words.extend([
        "--controller".into(),
        layout.api_url(),
        "--pki".into(),
        layout.pki_dir().display().to_string(),
    ]);
    command_line(&words)
}

fn status_line(layout: &FleetLayout, fw: &str) -> String {
    command_line(&[
        fw.to_string(),
        "status".into(),
        "--controller".into(),
        layout.api_url(),
    ])
}

/// The whole text `fleetweft quickstart` prints: what was written, then
/// numbered steps whose command lines start with `$ `.
pub fn instructions(layout: &FleetLayout, fleetweft: &Path, agent: &Path) -> String {
    let mut out = format!(
        "Wrote a {}-node loopback fleet to {}:\n  pki/ (CA, certificates, operator-token), keys/ (bundle signing), controller.toml,\n  {}, hello/app.py (the sample app)\n",
        layout.nodes.len(),
        layout.dir.display(),
        layout
            .nodes
            .iter()
            .map(|n| format!("agent-{n}.toml"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (i, (heading, lines)) in steps(layout, fleetweft, agent).iter().enumerate() {
        out.push_str(&format!("\n{}. {heading}\n", i + 1));
        for line in lines {
            out.push_str(&format!("   $ {line}\n"));
        }
    }
    let routes: Vec<String> = layout
        .nodes
        .iter()
        .zip(&layout.public_ports)
        .map(|(n, p)| format!("{n} http://127.0.0.1:{p}/hello"))
        .collect();
    out.push_str(&format!(
        "\nWhat users get, per node: {}\n",
        routes.join(", ")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(dir: &Path, nodes: &[&str]) -> QuickstartOptions {
        QuickstartOptions {
            dir: dir.to_path_buf(),
            nodes: nodes.iter().map(|s| s.to_string()).collect(),
            api_port: DEFAULT_API_PORT,
            quic_port: DEFAULT_QUIC_PORT,
            base_public_port: DEFAULT_BASE_PUBLIC_PORT,
        }
    }

    /// Bad names, repeats, overlapping or overflowing ports are refused
    /// before anything is written.
    #[test]
    fn bad_options_are_refused_before_writing() {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("fleet");
        for nodes in [&[][..], &["Node_A"][..], &["a", "a"][..]] {
            let e = write(&options(&dir, nodes)).expect_err("refused");
            assert!(matches!(e, QuickstartError::BadNodes(_)), "{e}");
        }
        let mut o = options(&dir, &["a", "b"]);
        o.base_public_port = DEFAULT_API_PORT - 1;
        assert!(matches!(write(&o), Err(QuickstartError::BadPorts(_))));
        o.base_public_port = u16::MAX;
        assert!(matches!(write(&o), Err(QuickstartError::BadPorts(_))));
        assert!(!dir.exists(), "nothing written for refused options");
    }

    /// A directory with anything in it is never written into.
    #[test]
    fn a_non_empty_directory_is_refused() {
        let temp = tempfile::tempdir().expect("temp dir");
        std::fs::write(temp.path().join("keep"), "x").expect("write");
        let e = write(&options(temp.path(), &["a"])).expect_err("refused");
        assert!(matches!(e, QuickstartError::NotEmpty(_)), "{e}");
        assert!(e.to_string().contains("is not empty"), "{e}");
    }

    /// The written configs load with the daemons' own parsers.
    #[test]
    fn the_written_configs_load() {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("fleet");
        let layout = write(&options(&dir, &["a", "b", "c"])).expect("written");
        let controller =
            controller::daemon::config::ControllerConfig::load(&layout.controller_config())
                .expect("controller.toml loads");
        assert_eq!(controller.nodes.len(), 3);
        assert_eq!(controller.api.listen.port(), DEFAULT_API_PORT);
        assert_eq!(
            controller.nodes[2].public.port(),
            DEFAULT_BASE_PUBLIC_PORT + 2
        );
        let text = instructions(
            &layout,
            Path::new("fleetweft"),
            Path::new("fleetweft-agent"),
        );
        assert!(text.contains("--version v2"), "{text}");
        assert!(text.contains("'hello from v2'"), "{text}");
        assert!(layout.sample_app().exists());
    }

    /// An HA fleet's configs load with the daemons' own parsers: each
    /// controller on its own data directory and ports with `[storage]` on
    /// etcd, each agent listing every controller in order.
    #[test]
    fn the_ha_configs_load() {
        let temp = tempfile::tempdir().expect("temp dir");
        let layout = write(&options(&temp.path().join("fleet"), &["a", "b"])).expect("written");
        let pki = FleetPki {
            dir: layout.pki_dir(),
            nodes: layout.nodes.clone(),
        };
        let controllers =
            [("x", 7901, 7900), ("y", 7911, 7910)].map(|(name, quic, api)| HaController {
                name: name.to_string(),
                quic_port: quic,
                api_port: api,
            });
        let log = EtcdLog {
            endpoints: vec!["127.0.0.1:2379".into(), "127.0.0.1:2380".into()],
            prefix: "/fleetweft/t".into(),
            lease_ttl_ms: 2_000,
        };
        for c in &controllers {
            let path = layout
                .write_ha_controller_config(&pki, c, &log, None)
                .expect("written");
            let cfg = controller::daemon::config::ControllerConfig::load(&path).expect("loads");
            assert_eq!(cfg.api.listen.port(), c.api_port);
            assert_eq!(cfg.listen.port(), c.quic_port);
            assert_eq!(cfg.data_dir, layout.ha_controller_data(&c.name));
            let etcd = cfg.storage.etcd_config().expect("on etcd");
            assert_eq!(etcd.endpoints, log.endpoints);
            assert_eq!(etcd.prefix, log.prefix);
            assert_eq!(etcd.lease_ttl_ms, 2_000);
            assert_eq!(cfg.nodes.len(), 2);
        }
        let text = layout.ha_agent_toml(&pki, "b", 8082, &controllers);
        let agent = agent::config::AgentConfig::parse(Path::new("agent-b.toml"), &text)
            .expect("the agent config parses");
        let ports: Vec<u16> = agent
            .controller
            .addresses()
            .iter()
            .map(|a| a.port())
            .collect();
        assert_eq!(ports, [7901, 7911]);
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("/a/b.toml"), "/a/b.toml");
        assert_eq!(shell_quote("hello from v1"), "'hello from v1'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
