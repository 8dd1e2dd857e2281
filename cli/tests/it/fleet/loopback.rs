//! The real-process half of the test kit (issue #22 item 5): a fleet of
//! the demo's nodes ([`NODES`]) on loopback, its files written by the
//! quickstart's builder (`demo::quickstart::FleetLayout`: PKI, keys,
//! `controller.toml`, agent configs, as a new user gets them), and its
//! processes started, logged, killed and reaped here. One builder for
//! every test that runs real agents: the controller as a child process
//! ([`Loopback::start_controller`]) or in the test's runtime
//! ([`Loopback::start_controller_here`]), agents with extra arguments or
//! edited configs, HA fleets laying out their own controllers on it.
//!
//! What the tests ask of a running fleet is here too, once: wait for a
//! fleet view, read the events, metrics and logs, sign and upload hello
//! bundles or release trees, roll one out, run the CLI against it.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use api::client::{ApiClient, FleetView};
use controller::daemon::api::EventDto;
use controller::daemon::config::ControllerConfig;
use controller::daemon::core::CoreHandle;
use demo::NODES;
use model::Digest;
use protocol::bundle::{self, ProbeSpec};
use protocol::pki::FleetPki;
use releases::{ChunkStore, ReleaseFields};
use tokio::process::Child;

use crate::binaries::{agent_binary, fleetweft};

/// How often a wait polls.
const POLL_MS: u64 = 100;
/// How long [`Loopback::start_controller`] waits for the API, in seconds.
const CONTROLLER_UP_S: u64 = 60;
/// How long one [`Loopback::wait`] may take unless [`Loopback::step`] says.
const STEP_DEFAULT: Duration = Duration::from_secs(60);

/// How a process's log files are named under `logs/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogNames {
    /// `<name>.log`, written over by a restart.
    Plain,
    /// `<name>.<n>.log` for its n-th start (1-based), every start kept.
    PerStart,
}

/// A loopback fleet: its files, its ports, and the processes it started.
pub struct Loopback {
    /// The fleet's directory (configs, `pki/`, `keys/`, data, `logs/`).
    pub dir: PathBuf,
    pub pki: FleetPki,
    /// The operator token.
    pub token: String,
    /// The bundle-signing key (saved in `keys/` too).
    pub signing: ed25519_dalek::SigningKey,
    pub quic_port: u16,
    pub api_port: u16,
    /// Each node's public route port, in [`NODES`] order.
    pub public_ports: Vec<u16>,
    /// The API's base URL, for the CLI.
    pub api_url: String,
    /// The operator's API client.
    pub api: ApiClient,
    /// Running children by name.
    pub children: HashMap<String, Child>,
    /// How many times each name was started.
    pub starts: HashMap<String, u32>,
    /// The hello bundles signed by [`Loopback::sign_hello`]: version ->
    /// (release digest, signed bytes).
    pub releases: HashMap<String, (Digest, Vec<u8>)>,
    /// The controller's core when it runs in the test's runtime
    /// ([`Loopback::start_controller_here`]).
    core: Option<CoreHandle>,
    /// How long one [`Loopback::wait`] may take.
    step: Duration,
    log_names: LogNames,
    /// Removed on drop unless the test failed (its logs kept for a
    /// post-mortem).
    removed_on_drop: Option<PathBuf>,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.start_kill();
        }
        if !std::thread::panicking() {
            if let Some(dir) = &self.removed_on_drop {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

impl Loopback {
    /// Lays out a fleet of [`NODES`] in `dir` on free ports: PKI, the
    /// bundle-signing keys, `controller.toml` with `extra_controller_toml`
    /// appended, `logs/`. Nothing runs yet.
    pub fn lay_out(dir: PathBuf, extra_controller_toml: &str) -> Loopback {
        std::fs::create_dir_all(dir.join("logs")).expect("logs dir");
        let port = || demo::ports::free_port().expect("free port");
        let (quic_port, api_port) = (port(), port());
        let public_ports: Vec<u16> = NODES.iter().map(|_| port()).collect();
        let layout = demo::layout_of(&dir, quic_port, api_port, &public_ports);
        let (pki, signing) = layout.write_pki_and_keys().expect("pki and keys");
        let token = protocol::pki::load_operator_token(&pki.operator_token()).expect("token");
        layout
            .write_controller_config(&pki, None)
            .expect("controller config");
        if !extra_controller_toml.is_empty() {
            let config = layout.controller_config();
            let text = std::fs::read_to_string(&config).expect("controller config");
            std::fs::write(&config, format!("{text}\n{extra_controller_toml}"))
                .expect("extend the config");
        }
        let api_url = layout.api_url();
        Loopback {
            dir,
            pki,
            api: ApiClient::new(api_url.clone(), Some(token.clone())),
            token,
            signing,
            quic_port,
            api_port,
            public_ports,
            api_url,
            children: HashMap::new(),
            starts: HashMap::new(),
            releases: HashMap::new(),
            core: None,
            step: STEP_DEFAULT,
            log_names: LogNames::Plain,
            removed_on_drop: None,
        }
    }

    /// A fleet in `fleet/` of a new temporary directory, which is removed
    /// when the fleet is dropped after a passing test; logs per start.
    pub fn in_temp_dir(extra_controller_toml: &str) -> Loopback {
        let parent = tempfile::tempdir().expect("temp dir").keep();
        let mut fleet = Loopback::lay_out(parent.join("fleet"), extra_controller_toml);
        fleet.log_names = LogNames::PerStart;
        fleet.removed_on_drop = Some(parent);
        fleet
    }

    /// How the processes' logs are named from now on.
    pub fn log_names(mut self, names: LogNames) -> Loopback {
        self.log_names = names;
        self
    }

    /// How long one [`Loopback::wait`] may take (60 s unless set).
    pub fn step(mut self, step: Duration) -> Loopback {
        self.step = step;
        self
    }

    /// The log file of `name`'s `n`-th start.
    pub fn log_path(&self, name: &str, n: u32) -> PathBuf {
        match self.log_names {
            LogNames::Plain => self.dir.join(format!("logs/{name}.log")),
            LogNames::PerStart => self.dir.join(format!("logs/{name}.{n}.log")),
        }
    }

    /// Every log file of `name` (one per start), concatenated.
    pub fn logs(&self, name: &str) -> String {
        (1..=self.starts.get(name).copied().unwrap_or(0))
            .map(|n| std::fs::read_to_string(self.log_path(name, n)).unwrap_or_default())
            .collect()
    }

    /// The log of `name`'s latest start only.
    pub fn last_log(&self, name: &str) -> String {
        let n = self.starts.get(name).copied().unwrap_or(0);
        std::fs::read_to_string(self.log_path(name, n)).unwrap_or_default()
    }

    /// Starts `exe` with `args` as `name`, its output to its log.
    pub fn spawn(&mut self, name: &str, exe: &Path, args: &[String]) {
        let n = self.starts.entry(name.to_string()).or_insert(0);
        *n += 1;
        let n = *n;
        let log = self.log_path(name, n);
        let child = demo::spawn(exe, args, &log).expect("spawn");
        assert!(
            self.children.insert(name.to_string(), child).is_none(),
            "{name} is already running"
        );
    }

    /// SIGKILLs `name` and reaps it.
    pub async fn kill(&mut self, name: &str) {
        let mut child = self.children.remove(name).expect("a running child");
        child.start_kill().expect("kill");
        child.wait().await.expect("reap");
    }

    /// `fleetweft controller` as the child `controller`, once its API
    /// answers.
    pub async fn start_controller(&mut self) {
        let config = self.dir.join("controller.toml").display().to_string();
        self.spawn(
            "controller",
            &fleetweft(),
            &["controller".into(), "--config".into(), config],
        );
        let api = self.api.clone();
        poll(
            "the controller's API answers",
            Duration::from_secs(CONTROLLER_UP_S),
            || async {
                api.get::<controller::daemon::api::StatusDto>("/api/status")
                    .await
                    .is_ok()
            },
        )
        .await;
    }

    /// The controller in the test's runtime (its log in
    /// `logs/controller.log`), its core kept for [`Loopback::core`]; the
    /// runtime must be shut down before the directory is removed, so it
    /// never writes into a removed log.
    pub async fn start_controller_here(&mut self) -> CoreHandle {
        let log =
            std::fs::File::create(self.dir.join("logs/controller.log")).expect("controller log");
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(log))
            .try_init();
        let cfg = ControllerConfig::load(&self.dir.join("controller.toml")).expect("load config");
        let daemon = controller::daemon::start(cfg, false)
            .await
            .expect("start the controller");
        let core = daemon.core.clone();
        tokio::spawn(daemon.serve());
        self.core = Some(core.clone());
        core
    }

    /// The core of the controller started by
    /// [`Loopback::start_controller_here`].
    pub fn core(&self) -> &CoreHandle {
        self.core
            .as_ref()
            .expect("the controller runs in the test's runtime")
    }

    /// Writes `node`'s agent config (the fleet's defaults) and returns it.
    pub fn agent_config(&self, node: &str) -> PathBuf {
        let i = NODES.iter().position(|n| *n == node).expect("a fleet node");
        demo::write_agent_config(
            &self.dir,
            &self.pki,
            node,
            self.quic_port,
            self.public_ports[i],
            None,
        )
        .expect("agent config")
    }

    /// Starts `name`'s agent on `config` with `extra` arguments.
    pub fn spawn_agent(&mut self, name: &str, config: &Path, extra: &[&str]) {
        let mut args = vec!["--config".to_string(), config.display().to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        self.spawn(name, &agent_binary(), &args);
    }

    /// Starts `node`'s agent on the fleet's default config, with `extra`
    /// arguments (such as `--arch aarch64`).
    pub fn start_agent(&mut self, node: &str, extra: &[&str]) {
        let config = self.agent_config(node);
        self.spawn_agent(node, &config, extra);
    }

    /// Starts `node`'s agent with a `[faults]` section (TOML lines) and
    /// `--allow-fault-injection`.
    pub fn start_agent_with_faults(&mut self, node: &str, faults: &str) {
        let config = self.agent_config(node);
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!("\n[faults]\n{faults}"));
        std::fs::write(&config, text).unwrap();
        self.spawn_agent(node, &config, &["--allow-fault-injection"]);
    }

    /// Starts `node`'s agent trusting `pubkey` instead of the fleet's
    /// bundle-signing key (a misconfigured node).
    pub fn start_agent_trusting(&mut self, node: &str, pubkey: &Path) {
        let config = self.agent_config(node);
        let fleet_key = format!(
            "{:?}",
            self.dir
                .join("keys/bundle-signing.pub")
                .display()
                .to_string()
        );
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.contains(&fleet_key), "{text}");
        let text = text.replace(&fleet_key, &format!("{:?}", pubkey.display().to_string()));
        std::fs::write(&config, text).unwrap();
        self.spawn_agent(node, &config, &[]);
    }

    /// Polls the fleet view until `done` holds, within the fleet's
    /// [`Loopback::step`]; on timeout panics with the status and events.
    pub async fn wait(&self, what: &str, done: impl Fn(&FleetView) -> bool) -> FleetView {
        let start = Instant::now();
        let deadline = start + self.step;
        loop {
            if let Ok(s) = self.api.fleet_view().await {
                if done(&s) {
                    waited(what, start);
                    return s;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for: {what}\nstatus: {:#?}\nevents:\n{}\n(logs in {})",
                    self.api.fleet_view().await.ok(),
                    self.event_text().await,
                    self.dir.join("logs").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    /// The fleet view, now.
    pub async fn status(&self) -> FleetView {
        self.api.fleet_view().await.unwrap()
    }

    /// Every event in the controller's log.
    pub async fn events(&self) -> Vec<EventDto> {
        self.api.get("/api/events?from=0").await.expect("events")
    }

    /// Every event in the controller's log, one line each (for a failure).
    pub async fn event_text(&self) -> String {
        match self.api.get::<Vec<EventDto>>("/api/events?from=0").await {
            Ok(events) => events
                .iter()
                .map(|e| format!("  #{} {}\n", e.sequence, e.text))
                .collect(),
            Err(e) => format!("  (no events: {e})"),
        }
    }

    /// The value of the metric `name` on `/metrics`.
    pub async fn metric(&self, name: &str) -> Option<f64> {
        let text = self.api.get_text("/metrics").await.ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
    }

    /// The last log sequence of the controller in the test's runtime.
    pub async fn last_sequence(&self) -> Option<u64> {
        self.core()
            .snapshot()
            .await
            .expect("snapshot")
            .last_sequence
    }

    /// The last log sequence once nothing was appended for `QUIET` (the
    /// agents' last messages about a finished rollout have arrived).
    pub async fn quiet_sequence(&self) -> Option<u64> {
        const QUIET: Duration = Duration::from_secs(2);
        let deadline = Instant::now() + self.step;
        let mut last = self.last_sequence().await;
        loop {
            tokio::time::sleep(QUIET).await;
            let now = self.last_sequence().await;
            if now == last {
                return now;
            }
            assert!(Instant::now() < deadline, "the event log never went quiet");
            last = now;
        }
    }

    /// `GET /hello` on `node`'s public route: status, release, body.
    pub async fn public(&self, node: &str) -> Option<(u16, Option<String>, String)> {
        let i = NODES.iter().position(|n| *n == node).unwrap();
        demo::raw_get(self.public_ports[i], "/hello").await
    }

    /// The release directory of `release` on `node`'s disk (staging
    /// installs it under `<data_dir>/releases/<digest hex>/`).
    pub fn release_dir(&self, node: &str, release: Digest) -> PathBuf {
        self.dir
            .join(format!("{node}-data"))
            .join("releases")
            .join(release.to_hex())
    }

    /// Stops the controller child and runs `fleetweft log verify` on its
    /// log.
    pub async fn verify_log(&mut self) {
        self.kill("controller").await;
        let out = StdCommand::new(fleetweft())
            .args(["log", "verify", "--data"])
            .arg(self.dir.join("controller-data/log"))
            .output()
            .expect("run log verify");
        assert!(
            out.status.success(),
            "log verify failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `fleetweft ARGS --controller URL --token-file TOKEN`: its exit code
    /// and stdout (stderr appended).
    pub fn cli_code(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = StdCommand::new(fleetweft())
            .args(args)
            .args(["--controller", &self.api_url, "--token-file"])
            .arg(self.pki.operator_token())
            .output()
            .expect("run fleetweft");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    }

    /// [`Loopback::cli_code`] that must succeed.
    pub fn cli(&self, args: &[&str]) -> String {
        let (code, text) = self.cli_code(args);
        assert_eq!(code, Some(0), "fleetweft {args:?}: {text}");
        text
    }
}

/// Releases: hello bundles by version, release trees, rollouts of them.
impl Loopback {
    /// Signs the sample app as each of `versions` with the fleet's key and
    /// keeps the bundles ([`Loopback::digest`], [`Loopback::upload_hello`]).
    pub fn sign_hello(&mut self, versions: &[&str]) {
        for version in versions {
            let bytes = demo::sign_hello(&self.signing, version).unwrap();
            self.releases
                .insert(version.to_string(), (bundle::bundle_digest(&bytes), bytes));
        }
    }

    /// Uploads the signed hello bundles of `versions`, in order.
    pub async fn upload_hello(&self, versions: &[&str]) {
        for version in versions {
            let bytes = self.releases[*version].1.clone();
            let _: serde_json::Value = self.api.post_bytes("/api/bundles", bytes).await.unwrap();
        }
    }

    /// The release digest of the signed hello `version`.
    pub fn digest(&self, version: &str) -> Digest {
        self.releases[version].0
    }

    /// Starts a rollout of the hello `version`, one slot.
    pub async fn rollout(&self, version: &str, canary: &str, followers: &[&str]) {
        let _: serde_json::Value = self
            .api
            .post_json(
                "/api/rollouts",
                &serde_json::json!({
                    "release": self.digest(version).to_hex(),
                    "canary": canary,
                    "followers": followers,
                    "slots": 1,
                }),
            )
            .await
            .unwrap();
    }

    /// Signs the release tree `tree` as `version` (chunks into
    /// `signed-<version>/chunks`), uploads every chunk and then the
    /// manifest; returns the release digest.
    pub async fn sign_and_upload(&self, tree: &Path, version: &str) -> Digest {
        self.sign_and_upload_arches(tree, &[], version).await
    }

    /// [`Loopback::sign_and_upload`] with a tree per architecture
    /// (`arch_trees`: architecture, its directory) beside the common `tree`.
    pub async fn sign_and_upload_arches(
        &self,
        tree: &Path,
        arch_trees: &[(model::platform::Arch, PathBuf)],
        version: &str,
    ) -> Digest {
        self.sign_and_upload_with(tree, arch_trees, version, Default::default(), None)
            .await
    }

    /// [`Loopback::sign_and_upload`] of a release declaring `limits`
    /// (format 4, issue #24 item 4).
    pub async fn sign_and_upload_limited(
        &self,
        tree: &Path,
        version: &str,
        limits: releases::AppLimits,
    ) -> Digest {
        self.sign_and_upload_with(tree, &[], version, limits, None)
            .await
    }

    /// [`Loopback::sign_and_upload`] of a release declaring `migration`
    /// (format 5, issue #24 item 2).
    pub async fn sign_and_upload_migrating(
        &self,
        tree: &Path,
        version: &str,
        migration: releases::AppMigration,
    ) -> Digest {
        self.sign_and_upload_with(tree, &[], version, Default::default(), Some(migration))
            .await
    }

    async fn sign_and_upload_with(
        &self,
        tree: &Path,
        arch_trees: &[(model::platform::Arch, PathBuf)],
        version: &str,
        limits: releases::AppLimits,
        migration: Option<releases::AppMigration>,
    ) -> Digest {
        let out = self.dir.join(format!("signed-{version}"));
        let (store, _) = ChunkStore::open(&out.join("chunks")).expect("chunk dir");
        let fields = ReleaseFields {
            name: "hello-tree".into(),
            version: version.into(),
            run: vec!["python3".into(), "app.py".into()],
            probe: ProbeSpec {
                path: "/hello".into(),
                expect_status: 200,
                expect_body: format!("hello from {version}"),
                expect_json: None,
            },
            limits,
            migration,
        };
        let mut sink = releases::tree::store_sink(&store);
        let manifest =
            releases::tree::sign_dir_arches(&self.signing, fields, tree, arch_trees, &mut sink)
                .expect("sign");
        std::fs::write(out.join(releases::EXPORT_MANIFEST_FILE), &manifest).expect("manifest");
        for entry in std::fs::read_dir(store.dir()).expect("chunks") {
            let entry = entry.expect("chunk");
            let name = entry.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(entry.path()).expect("chunk bytes");
            let _: serde_json::Value = self
                .api
                .put_bytes(&format!("/api/chunks/{name}"), bytes)
                .await
                .expect("upload a chunk");
        }
        let _: serde_json::Value = self
            .api
            .post_bytes("/api/releases", manifest.clone())
            .await
            .expect("upload the manifest");
        releases::release_digest(&manifest)
    }

    /// Starts a rollout of `release` over `nodes` (the first the canary,
    /// one slot).
    pub async fn start_rollout(&self, release: Digest, nodes: &[&str]) {
        let _: serde_json::Value = self
            .api
            .post_json(
                "/api/rollouts",
                &serde_json::json!({
                    "release": release.to_hex(),
                    "canary": nodes[0],
                    "followers": &nodes[1..],
                    "slots": 1,
                }),
            )
            .await
            .expect("start the rollout");
    }

    /// Starts rollout `id` of `release` over `nodes` (canary first, one
    /// slot) and waits until it completes with every op verified and its
    /// proof verified.
    pub async fn roll_out(&self, id: &str, release: Digest, nodes: &[&str]) {
        self.start_rollout(release, nodes).await;
        self.wait(&format!("{id} completed"), |s| {
            s.rollouts
                .iter()
                .any(|r| r.id == id && r.status == "completed")
        })
        .await;
        let view = self.api.fleet_view().await.expect("view");
        let ops: Vec<_> = view.ops.iter().filter(|o| o.rollout == id).collect();
        assert_eq!(ops.len(), nodes.len(), "{ops:?}");
        for op in ops {
            assert_eq!(op.outcome.as_deref(), Some("verified"), "{op:?}");
        }
        let proof: proof::RolloutProof = self
            .api
            .get(&format!("/api/rollouts/{id}/proof"))
            .await
            .expect("the rollout's proof");
        assert_eq!(proof.verdict, proof::Verdict::Verified, "{proof:#?}");
    }

    /// Starts rollout `id` of `release` over `nodes` (the first the
    /// canary, one slot) and waits for the canary's op to settle: it must
    /// be rolled back, with no follower granted.
    pub async fn canary_rolled_back(&self, id: &str, release: Digest, nodes: &[&str]) {
        self.start_rollout(release, nodes).await;
        let s = self
            .wait("the canary's op settles", |s| {
                op_of(s, id, nodes[0]).is_some_and(|o| o.outcome.is_some())
            })
            .await;
        let op = op_of(&s, id, nodes[0]).expect("the canary's op");
        assert_eq!(op.outcome.as_deref(), Some("rolled-back"), "{op:?}");
        for follower in &nodes[1..] {
            assert!(op_of(&s, id, follower).is_none(), "{follower} granted");
        }
    }
}

/// Polls `check` until it holds, within `step`.
pub async fn poll<F: Future<Output = bool>>(what: &str, step: Duration, check: impl Fn() -> F) {
    let start = Instant::now();
    let deadline = start + step;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    waited(what, start);
}

/// Prints how long a wait took (captured, shown when the test fails): a
/// test that overruns its whole deadline with every step inside its own
/// shows where its time went.
fn waited(what: &str, start: Instant) {
    eprintln!("waited {:.1} s for: {what}", start.elapsed().as_secs_f64());
}

/// The op of `rollout` on `node` in the fleet view, if granted.
pub fn op_of<'a>(s: &'a FleetView, rollout: &str, node: &str) -> Option<&'a api::view::OpDto> {
    s.ops
        .iter()
        .find(|o| o.rollout == rollout && o.node == node)
}
