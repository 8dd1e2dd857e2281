//! Three controller hosts on etcd (issue 14, scenarios 19-22): hosts `c1`,
//! `c2`, `c3` (octets 1-3), each running an etcd 3.4 member and a
//! `fleetweft controller` with `[storage] backend = "etcd"`, and agents
//! listing all three controllers.
//!
//! Each controller lists every member, its own host's first, as
//! docs/operations.md recommends: the etcd client pins the first endpoint
//! and fails over to the next when a member stops answering (before that
//! fix a stopped member failed a share of a controller's requests and
//! stopped it, exit 3, although a quorum was up).
//!
//! What is read from the log: the events through `fleetweft log show
//! --etcd ... --json`, and who wrote each entry from etcd's own history
//! (its JSON gateway): the leader key as of the revision that created the
//! entry names the controller whose lease was live then ([`Fleet::writes`]).

use super::*;

/// The controller hosts, at octets 1, 2, 3; controller `i` (1-based) is
/// process `controller-i` on host `CONTROLLER_HOSTS[i - 1]`.
pub const CONTROLLER_HOSTS: [&str; 3] = ["c1", "c2", "c3"];
/// The leadership lease TTL of every controller: a takeover waits about
/// this, and a partitioned leader stops within about this.
pub const LEASE_TTL_MS: u64 = 2_000;
/// etcd's client port on each controller host.
const ETCD_CLIENT_PORT: u16 = 2379;
/// etcd's peer port on each controller host.
const ETCD_PEER_PORT: u16 = 2380;
/// The log's key prefix in etcd.
const LOG_PREFIX: &str = "/fwsc";
/// How many times the log is read before a failure counts.
const LOG_READ_ATTEMPTS: u32 = 3;
/// Pause between two reads of the log.
const LOG_READ_RETRY_MS: u64 = 300;
/// How long the harness waits before starting a controller that exited
/// again (systemd's `RestartSec`).
pub const RESTART_PAUSE_MS: u64 = 500;
/// How long the members may take to be healthy (a quorum, a raft leader).
const ETCD_HEALTH_WAIT_MS: u64 = 30_000;

/// How the fleet's controller side is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One controller on sled, host `ctl` (scenarios 1-18).
    Single,
    /// Three controller hosts, each an etcd member and a controller.
    Ha,
}

/// `[log]` of the controllers with archiving on (scenario 23): snapshots
/// every `snapshot_every_events` events or every `snapshot_every_s`
/// seconds, the live log keeping `keep_events` behind its end, the rest
/// archived in `dir`, ONE directory every controller reaches (as a shared
/// mount would be: the hosts share the scenario's filesystem).
#[derive(Clone, Debug)]
pub struct Archiving {
    /// The shared archive directory.
    pub dir: PathBuf,
    /// `[log] snapshot_every_events`.
    pub snapshot_every_events: u64,
    /// `[log] snapshot_every_s`.
    pub snapshot_every_s: u64,
    /// `[log] keep_events`.
    pub keep_events: u64,
}

impl Archiving {
    /// The `[log]` section.
    fn toml(&self) -> String {
        format!(
            "\n[log]\nsnapshot_every_events = {}\nsnapshot_every_s = {}\nsnapshots_keep = 2\narchive_dir = {:?}\nkeep_events = {}\nkeep_days = 0\n",
            self.snapshot_every_events,
            self.snapshot_every_s,
            self.dir.display().to_string(),
            self.keep_events
        )
    }
}

/// A snapshot's keys in etcd: whether chunks and the manifest are stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotKeys {
    /// Chunk keys under `P/s/<covers>/c/`.
    pub chunks: usize,
    /// `P/s/<covers>/m` exists.
    pub manifest: bool,
}

/// Who wrote one log entry, read from etcd's history.
#[derive(Clone, Debug)]
pub struct Write {
    /// The entry's log sequence.
    pub sequence: u64,
    /// The etcd revision of the transaction that created it.
    pub revision: i64,
    /// The controller (1-3) whose leader key was live at that revision,
    /// `None` if no leader key was (or it named no controller host).
    pub holder: Option<usize>,
    /// That leader key's create revision: one leadership epoch.
    pub epoch: Option<i64>,
}

/// The address of controller host `i` (1-based).
fn host_ip(i: usize) -> String {
    format!("{SUBNET}.{i}")
}

/// The three controllers' API URLs, in host order.
pub fn api_urls() -> Vec<String> {
    (1..=CONTROLLER_HOSTS.len())
        .map(|i| format!("http://{}:{API_PORT}", host_ip(i)))
        .collect()
}

/// The three controllers' QUIC addresses, quoted for an agent's `addrs`.
pub fn agent_addrs() -> Vec<String> {
    (1..=CONTROLLER_HOSTS.len())
        .map(|i| format!("\"{}:{QUIC_PORT}\"", host_ip(i)))
        .collect()
}

/// Member `i`'s client endpoint (HOST:PORT).
fn etcd_endpoint(i: usize) -> String {
    format!("{}:{ETCD_CLIENT_PORT}", host_ip(i))
}

/// Controller `i`'s `[storage] endpoints` (TOML): every member, its own
/// host's first (the one its client pins while it answers).
fn endpoints_from(i: usize) -> String {
    let count = CONTROLLER_HOSTS.len();
    (0..count)
        .map(|k| format!("{:?}", etcd_endpoint((i - 1 + k) % count + 1)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The controller number (1-3) a leader key's advert names, by its API
/// address (`controller agents=HOST:PORT api=URL`).
fn holder_of(advert: &str) -> Option<usize> {
    let api = advert
        .split_whitespace()
        .find_map(|w| w.strip_prefix("api="))?;
    api_urls().iter().position(|u| u == api).map(|i| i + 1)
}

/// Base64 (standard alphabet, padded) of `bytes`, for etcd's JSON gateway.
fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (k, b)| n | (u32::from(*b) << (16 - 8 * k)));
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes [`b64`]'s encoding; `None` on anything else.
fn unb64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut n, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        n = (n << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((n >> bits) as u8);
            n &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// An int64 of etcd's JSON gateway (a string, or absent for 0).
fn int64(value: &serde_json::Value) -> i64 {
    match value {
        serde_json::Value::String(s) => s.parse().unwrap_or(0),
        v => v.as_i64().unwrap_or(0),
    }
}

/// The leadership epochs of a log, from [`Fleet::writes`]: every entry
/// must have been written while a controller's leader key was live (no
/// append outside a lease), and, in sequence order, the revisions and the
/// epochs never go back (an epoch, once followed by another, writes
/// nothing more). Returns the runs: (controller, first sequence, last).
pub fn leadership_runs(writes: &[Write]) -> anyhow::Result<Vec<(usize, u64, u64)>> {
    let mut runs: Vec<(usize, i64, u64, u64)> = Vec::new();
    let mut last_revision = 0;
    for w in writes {
        let (Some(holder), Some(epoch)) = (w.holder, w.epoch) else {
            bail!(
                "entry #{} was written at etcd revision {} while no controller held the leadership",
                w.sequence,
                w.revision
            );
        };
        ensure!(
            w.revision >= last_revision,
            "entry #{} was written at revision {}, before the entry ahead of it ({last_revision})",
            w.sequence,
            w.revision
        );
        last_revision = w.revision;
        match runs.last_mut() {
            Some(run) if run.1 == epoch => run.3 = w.sequence,
            Some(run) if run.1 > epoch => bail!(
                "entry #{} was written under controller {holder}'s leadership (epoch {epoch}) after controller {}'s newer one (epoch {}) had written: a deposed leader appended",
                w.sequence,
                run.0,
                run.1
            ),
            _ => runs.push((holder, epoch, w.sequence, w.sequence)),
        }
    }
    Ok(runs.into_iter().map(|(h, _, a, b)| (h, a, b)).collect())
}

/// The runs of [`leadership_runs`] as `c1 #0-#41, c2 #42-#60`.
pub fn runs_text(runs: &[(usize, u64, u64)]) -> String {
    runs.iter()
        .map(|(h, a, b)| format!("c{h} #{a}-#{b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Fleet {
    /// Start the three etcd members and wait until each is healthy.
    pub(super) async fn start_etcd_cluster(&mut self) -> anyhow::Result<()> {
        for i in 1..=CONTROLLER_HOSTS.len() {
            self.start_etcd(i)?;
        }
        for i in 1..=CONTROLLER_HOSTS.len() {
            self.wait_etcd_healthy(i).await?;
        }
        Ok(())
    }

    /// Start etcd member `i` on its host (a new cluster the first time;
    /// on a restart etcd ignores the `--initial-*` flags and rejoins with
    /// its data directory), with the limits the log's atomic batch needs.
    pub fn start_etcd(&mut self, i: usize) -> anyhow::Result<()> {
        let cluster: Vec<String> = (1..=CONTROLLER_HOSTS.len())
            .map(|k| format!("m{k}=http://{}:{ETCD_PEER_PORT}", host_ip(k)))
            .collect();
        let member = etcdkit::MemberSpec {
            name: format!("m{i}"),
            data_dir: self.dir.join(format!("etcd-{i}")),
            client_url: format!("http://{}", etcd_endpoint(i)),
            peer_url: format!("http://{}:{ETCD_PEER_PORT}", host_ip(i)),
            metrics_url: None,
            initial_cluster: cluster.join(","),
            existing: false,
            token: "fwsc".into(),
            tls: None,
        };
        // The one launcher's flags: the limits the log's atomic batch
        // needs, and pre-vote. Without pre-vote (etcd 3.4's default), a
        // member rejoining after a partition forces a raft election with
        // its higher term and the cluster has no leader for seconds: the
        // leading controller could not renew its lease and was deposed
        // (found by scenario 20). 3.5 enables it by default.
        let args = etcdkit::member_args(&member, &etcdkit::Tuning::networked());
        let ns = format!("{}-{}", net::PREFIX, CONTROLLER_HOSTS[i - 1]);
        self.spawn_in(&format!("etcd-{i}"), &ns, Path::new(ETCD_EXE), &args)
    }

    /// Wait until member `i` says it is healthy (it sees a raft leader).
    pub async fn wait_etcd_healthy(&self, i: usize) -> anyhow::Result<()> {
        let api = ApiClient::new(format!("http://{}", etcd_endpoint(i)), None);
        wait_for(
            &format!("etcd member m{i} healthy"),
            ETCD_HEALTH_WAIT_MS,
            || {
                let api = api.clone();
                async move {
                    api.get::<serde_json::Value>("/health")
                        .await
                        .is_ok_and(|h| h["health"] == "true")
                }
            },
        )
        .await
    }

    /// Start controller `i` (1-3) on its host with `faults`; its bundles
    /// are copied to its host first (bundles are per host: the operator
    /// uploads every release to every controller host). Waits until its
    /// API answers (as leader or standby).
    pub async fn start_ha_controller(
        &mut self,
        i: usize,
        faults: &ControllerFaults,
    ) -> anyhow::Result<()> {
        self.spawn_ha_controller(i, faults)?;
        let url = api_urls()[i - 1].clone();
        self.wait_role(i, None, WAIT_MS)
            .await
            .with_context(|| format!("controller {i}'s API at {url}"))
    }

    /// [`Fleet::start_ha_controller`] without waiting for its API.
    pub fn spawn_ha_controller(
        &mut self,
        i: usize,
        faults: &ControllerFaults,
    ) -> anyhow::Result<()> {
        let ip = host_ip(i);
        let data = self.dir.join(format!("controller-{i}-data"));
        let bundles = data.join("bundles");
        std::fs::create_dir_all(&bundles)?;
        for (digest, file) in self.releases.values() {
            std::fs::copy(file, bundles.join(format!("{}.bundle", digest.to_hex())))
                .with_context(|| format!("copying {} to c{i}", file.display()))?;
        }
        let mut text = self.controller_toml(&data, &ip, faults);
        text.push_str(&format!(
            "\n[storage]\nbackend = \"etcd\"\nendpoints = [{}]\nprefix = \"{LOG_PREFIX}\"\nlease_ttl_ms = {LEASE_TTL_MS}\n",
            endpoints_from(i)
        ));
        if let Some(archiving) = &self.archiving {
            text.push_str(&archiving.toml());
        }
        let config = self.dir.join(format!("controller-{i}.toml"));
        std::fs::write(&config, text)?;
        let args = controller_args(&config, faults);
        let exe = self.bins.fleetweft.clone();
        let ns = format!("{}-{}", net::PREFIX, CONTROLLER_HOSTS[i - 1]);
        self.spawn_in(&format!("controller-{i}"), &ns, &exe, &args)
    }

    /// Start controller `i` without faults, as systemd's `Restart=always`
    /// would: started again (after [`RESTART_PAUSE_MS`]) each time it
    /// exits before its API answers (e.g. its member cannot serve a read
    /// yet), within `ms`. Returns the exit codes of the failed starts.
    pub async fn start_supervised(
        &mut self,
        i: usize,
        ms: u64,
    ) -> anyhow::Result<Vec<Option<i32>>> {
        let name = format!("controller-{i}");
        let deadline = Instant::now() + Duration::from_millis(ms);
        let mut failed = Vec::new();
        self.spawn_ha_controller(i, &ControllerFaults::default())?;
        loop {
            if self.role(i).await.is_some() {
                return Ok(failed);
            }
            if let Some(code) = self.exited(&name)? {
                failed.push(code);
                tokio::time::sleep(Duration::from_millis(RESTART_PAUSE_MS)).await;
                self.spawn_ha_controller(i, &ControllerFaults::default())?;
            }
            ensure!(
                Instant::now() < deadline,
                "controller {i} did not come up within {ms} ms; failed starts: {failed:?}"
            );
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    /// Start controller 1 with `faults_c1` and wait until it leads, then
    /// controllers 2 and 3 (without faults) as hot standbys.
    pub async fn start_ha_controllers(
        &mut self,
        faults_c1: &ControllerFaults,
    ) -> anyhow::Result<()> {
        self.start_ha_controller(1, faults_c1).await?;
        self.wait_role(1, Some("leader"), WAIT_MS).await?;
        for i in 2..=CONTROLLER_HOSTS.len() {
            self.start_ha_controller(i, &ControllerFaults::default())
                .await?;
            self.wait_role(i, Some("standby"), WAIT_MS).await?;
        }
        Ok(())
    }

    /// The role controller `i` answers with (`leader`, `standby`), `None`
    /// if it does not answer.
    pub async fn role(&self, i: usize) -> Option<String> {
        let api = ApiClient::new(api_urls()[i - 1].clone(), Some(self.token()));
        let status: serde_json::Value = api.get("/api/status").await.ok()?;
        status["role"].as_str().map(str::to_string)
    }

    /// The controller that answers as the leader now, if one does.
    pub async fn leader(&self) -> Option<usize> {
        for i in 1..=CONTROLLER_HOSTS.len() {
            if self.role(i).await.as_deref() == Some("leader") {
                return Some(i);
            }
        }
        None
    }

    /// Wait until controller `i` answers with `role` (any role: `None`).
    pub async fn wait_role(&self, i: usize, role: Option<&str>, ms: u64) -> anyhow::Result<()> {
        let what = format!("controller {i} answers as {}", role.unwrap_or("anything"));
        wait_for(&what, ms, || async move {
            match (self.role(i).await, role) {
                (Some(_), None) => true,
                (Some(r), Some(want)) => r == want,
                (None, _) => false,
            }
        })
        .await
    }

    /// Wait until a controller accepted by `ok` leads; its number.
    pub async fn wait_leader(
        &self,
        what: &str,
        ms: u64,
        ok: impl Fn(usize) -> bool,
    ) -> anyhow::Result<usize> {
        let deadline = Instant::now() + Duration::from_millis(ms);
        loop {
            if let Some(i) = self.leader().await.filter(|i| ok(*i)) {
                return Ok(i);
            }
            ensure!(
                Instant::now() < deadline,
                "timed out after {ms} ms waiting for: {what}"
            );
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    /// The operator token (for API calls the harness makes itself).
    fn token(&self) -> String {
        self.api.token().unwrap_or_default().to_string()
    }

    /// The exit code of `name` if it has exited (reaped and forgotten
    /// then; `Some(None)` if a signal ended it), `None` while it runs.
    pub fn exited(&mut self, name: &str) -> anyhow::Result<Option<Option<i32>>> {
        let child = self
            .children
            .get_mut(name)
            .with_context(|| format!("{name} was not started"))?;
        match child.try_wait()? {
            Some(status) => {
                self.children.remove(name);
                Ok(Some(status.code()))
            }
            None => Ok(None),
        }
    }

    /// Wait (bounded) until `name` exits on its own; its exit code.
    pub async fn wait_exit(&mut self, name: &str, ms: u64) -> anyhow::Result<Option<i32>> {
        let deadline = Instant::now() + Duration::from_millis(ms);
        loop {
            if let Some(code) = self.exited(name)? {
                return Ok(code);
            }
            ensure!(
                Instant::now() < deadline,
                "{name} still running after {ms} ms"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether `name` was started and is not known to have exited.
    pub fn running(&self, name: &str) -> bool {
        self.children.contains_key(name)
    }

    /// SIGKILL every running controller.
    pub async fn kill_controllers(&mut self) -> anyhow::Result<()> {
        for i in 1..=CONTROLLER_HOSTS.len() {
            let name = format!("controller-{i}");
            if self.running(&name) {
                self.kill(&name).await?;
            }
        }
        Ok(())
    }

    /// SIGKILL every process of the fleet at once, the nodes' apps too
    /// (what a power cut of every host leaves), and reap them.
    pub async fn kill_everything(&mut self) -> anyhow::Result<()> {
        self.signal_everything();
        let names: Vec<String> = self.children.keys().cloned().collect();
        for name in names {
            // Already dead from the SIGKILL above: only the reaping is left.
            let _ = self.kill(&name).await;
        }
        Ok(())
    }

    /// SIGKILL every process of the fleet, the nodes' apps too, without
    /// waiting for them: a process blocked in a sync the power-cut
    /// campaign holds dies only once that sync is answered (the cut), and
    /// runs no code of its own in between.
    pub fn signal_everything(&mut self) {
        let mut pids: Vec<u32> = self.children.values().filter_map(|c| c.id()).collect();
        for node in &self.nodes {
            let data = self.dir.join(format!("{node}-data"));
            pids.extend(processes_under(&data).into_iter().map(|(pid, _, _)| pid));
        }
        for pid in pids {
            // SAFETY: kill(2) of a process this scenario started.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
    }

    /// Where reads go: the controller, or the one that leads now.
    pub(super) async fn read_url(&self) -> anyhow::Result<String> {
        match self.layout {
            Layout::Single => Ok(self.controller_url()),
            Layout::Ha => match self.leader().await {
                Some(i) => Ok(api_urls()[i - 1].clone()),
                None => bail!("no controller answers as the leader"),
            },
        }
    }

    /// An API client for `url` (the fleet's own for one controller).
    pub(super) fn read_api(&self, url: &str) -> ApiClient {
        match self.layout {
            Layout::Single => self.api.clone(),
            Layout::Ha => ApiClient::new(url.to_string(), Some(self.token())),
        }
    }

    /// The endpoints of the members the harness has running.
    fn running_endpoints(&self) -> Vec<String> {
        (1..=CONTROLLER_HOSTS.len())
            .filter(|i| self.running(&format!("etcd-{i}")))
            .map(etcd_endpoint)
            .collect()
    }

    /// `log VERB --etcd <running members> --prefix P [--archive DIR]`.
    pub(super) fn etcd_log_args(&self, verb: &str) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "log".into(),
            verb.into(),
            "--etcd".into(),
            self.running_endpoints().join(","),
            "--prefix".into(),
            LOG_PREFIX.into(),
        ];
        if let Some(archiving) = &self.archiving {
            args.push("--archive".into());
            args.push(archiving.dir.display().to_string());
        }
        args
    }

    /// The snapshot keys in etcd, by `covers` (keys only, one range).
    pub async fn snapshot_keys(
        &self,
    ) -> anyhow::Result<std::collections::BTreeMap<u64, SnapshotKeys>> {
        let prefix = format!("{LOG_PREFIX}/s/");
        let answer = self
            .etcd_range(serde_json::json!({
                "key": b64(prefix.as_bytes()),
                "range_end": b64(format!("{LOG_PREFIX}/s0").as_bytes()),
                "keys_only": true,
            }))
            .await?;
        let mut found = std::collections::BTreeMap::new();
        for kv in answer["kvs"].as_array().cloned().unwrap_or_default() {
            let key = kv["key"]
                .as_str()
                .and_then(unb64)
                .context("a snapshot key")?;
            let rest = key.get(prefix.len()..).unwrap_or_default();
            let (covers, part) = rest
                .split_at_checked(8)
                .with_context(|| format!("snapshot key {key:?} is not prefix + 8 bytes + part"))?;
            let covers = u64::from_be_bytes(covers.try_into().context("8 bytes")?);
            let keys: &mut SnapshotKeys = found.entry(covers).or_default();
            if part == b"/m" {
                keys.manifest = true;
            } else {
                keys.chunks += 1;
            }
        }
        Ok(found)
    }

    /// Whether `P/start` is stored: the leader archived the log's head.
    pub async fn live_start_stored(&self) -> anyhow::Result<bool> {
        let answer = self
            .etcd_range(serde_json::json!({
                "key": b64(format!("{LOG_PREFIX}/start").as_bytes()),
                "keys_only": true,
            }))
            .await?;
        Ok(answer["kvs"].as_array().is_some_and(|kvs| !kvs.is_empty()))
    }

    /// Every event of the log in etcd, read by `fleetweft log show --etcd
    /// ... --json` (the log itself, not a controller's view of it). Tried
    /// up to [`LOG_READ_ATTEMPTS`] times: the read-only open cross-checks
    /// its scan against the last key, read separately, and an append by the
    /// running leader in between fails it (`Inconsistent`); a damaged log
    /// fails every attempt.
    pub async fn log_events(&self) -> anyhow::Result<Vec<EventDto>> {
        let mut last_error = None;
        for _ in 0..LOG_READ_ATTEMPTS {
            match self.log_events_once().await {
                Ok(events) => return Ok(events),
                Err(e) => last_error = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(LOG_READ_RETRY_MS)).await;
        }
        Err(last_error.unwrap_or_else(|| anyhow!("no attempt to read the log")))
    }

    async fn log_events_once(&self) -> anyhow::Result<Vec<EventDto>> {
        let mut args = self.etcd_log_args("show");
        args.push("--json".into());
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            Command::new(&self.bins.fleetweft)
                .args(&args)
                .kill_on_drop(true)
                .output(),
        )
        .await
        .context("log show hung")??;
        let text = String::from_utf8_lossy(&out.stdout);
        ensure!(
            out.status.success(),
            "fleetweft {} failed ({}): {text}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        text.lines()
            .map(|l| serde_json::from_str(l).with_context(|| format!("log show line: {l}")))
            .collect()
    }

    /// One range request to etcd's JSON gateway, to the first running
    /// member that answers.
    async fn etcd_range(&self, body: serde_json::Value) -> anyhow::Result<serde_json::Value> {
        let mut errors = Vec::new();
        for endpoint in self.running_endpoints() {
            let api = ApiClient::new(format!("http://{endpoint}"), None);
            match api.post_json("/v3/kv/range", &body).await {
                Ok(answer) => return Ok(answer),
                Err(e) => errors.push(format!("{endpoint}: {e}")),
            }
        }
        bail!("no etcd member answered a range: {}", errors.join("; "))
    }

    /// Who wrote each entry of the log, in sequence order: the revision
    /// that created its key, and the leader key as of that revision (etcd
    /// keeps every revision: the members run without compaction).
    pub async fn writes(&self) -> anyhow::Result<Vec<Write>> {
        let entries = format!("{LOG_PREFIX}/e/");
        let answer = self
            .etcd_range(serde_json::json!({
                "key": b64(entries.as_bytes()),
                "range_end": b64(format!("{LOG_PREFIX}/e0").as_bytes()),
                "keys_only": true,
            }))
            .await?;
        let mut writes = Vec::new();
        let mut holders: HashMap<i64, (Option<usize>, Option<i64>)> = HashMap::new();
        let kvs = answer["kvs"].as_array().cloned().unwrap_or_default();
        for kv in kvs {
            let key = kv["key"].as_str().and_then(unb64).context("an entry key")?;
            let seq: [u8; 8] = key
                .get(entries.len()..)
                .and_then(|s| s.try_into().ok())
                .with_context(|| format!("entry key {key:?} is not prefix + 8 bytes"))?;
            let revision = int64(&kv["create_revision"]);
            let (holder, epoch) = match holders.get(&revision) {
                Some(known) => *known,
                None => {
                    let leader = self.leader_key_at(revision).await?;
                    holders.insert(revision, leader);
                    leader
                }
            };
            writes.push(Write {
                sequence: u64::from_be_bytes(seq),
                revision,
                holder,
                epoch,
            });
        }
        writes.sort_by_key(|w| w.sequence);
        Ok(writes)
    }

    /// The leader key as of `revision`: (controller, its create revision).
    async fn leader_key_at(&self, revision: i64) -> anyhow::Result<(Option<usize>, Option<i64>)> {
        let answer = self
            .etcd_range(serde_json::json!({
                "key": b64(format!("{LOG_PREFIX}/leader").as_bytes()),
                "revision": revision.to_string(),
            }))
            .await?;
        let Some(kv) = answer["kvs"].as_array().and_then(|k| k.first()) else {
            return Ok((None, None));
        };
        let advert = kv["value"]
            .as_str()
            .and_then(unb64)
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default();
        Ok((holder_of(&advert), Some(int64(&kv["create_revision"]))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for text in ["", "f", "fo", "foo", "/fwsc/e/", "/fwsc/leader"] {
            assert_eq!(
                unb64(&b64(text.as_bytes())).as_deref(),
                Some(text.as_bytes())
            );
        }
        assert_eq!(b64(b"/fwsc/e0"), "L2Z3c2MvZTA=");
    }

    fn w(sequence: u64, revision: i64, holder: usize, epoch: i64) -> Write {
        Write {
            sequence,
            revision,
            holder: Some(holder),
            epoch: Some(epoch),
        }
    }

    #[test]
    fn runs_refuse_a_write_outside_a_lease_or_from_an_older_epoch() {
        let good = [w(0, 10, 1, 5), w(1, 11, 1, 5), w(2, 20, 2, 15)];
        assert_eq!(leadership_runs(&good).unwrap(), vec![(1, 0, 1), (2, 2, 2)]);
        let back = [w(0, 10, 1, 5), w(1, 20, 2, 15), w(2, 21, 1, 5)];
        assert!(leadership_runs(&back).is_err());
        let mut gap = good.to_vec();
        gap[1].holder = None;
        gap[1].epoch = None;
        assert!(leadership_runs(&gap).is_err());
    }
}
