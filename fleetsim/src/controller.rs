//! The real controller process: its `controller.toml` (the fleet
//! bootstrapped through `[[nodes]]`, every public route on the embedded
//! server), starting it, waiting for its API, and restarting it.

use anyhow::{bail, Context};
use api::client::ApiClient;
use protocol::pki::FleetPki;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::Child;

/// How long the controller may take to answer its API after a start.
pub const API_UP_TIMEOUT_MS: u64 = 120_000;
/// How often a starting controller's API is asked.
pub const API_POLL_MS: u64 = 20;

/// Where the controller listens and what it runs on.
pub struct ControllerSetup {
    /// The `fleetweft` binary.
    pub exe: PathBuf,
    /// The work directory.
    pub dir: PathBuf,
    /// QUIC port for agents.
    pub quic_port: u16,
    /// Operator API port.
    pub api_port: u16,
}

/// A running controller.
pub struct RunningController {
    /// The process (killed on drop).
    pub child: Child,
    /// Its pid, for `/proc`.
    pub pid: u32,
}

impl ControllerSetup {
    /// The config path.
    pub fn config(&self) -> PathBuf {
        self.dir.join("controller.toml")
    }

    /// Write `controller.toml` for `names` with routes `publics`.
    pub fn write_config(
        &self,
        pki: &FleetPki,
        pubkey: &Path,
        names: &[String],
        publics: &[std::net::SocketAddr],
        op_timeout_ms: u64,
    ) -> anyhow::Result<()> {
        assert_eq!(names.len(), publics.len(), "one route per node");
        let mut text = format!(
            "data_dir = {:?}\nlisten = \"127.0.0.1:{}\"\n\n[api]\nlisten = \"127.0.0.1:{}\"\n\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\noperator_token = {:?}\n\n[bundles]\npubkey = {:?}\n\n[timing]\nop_timeout_ms = {op_timeout_ms}\n",
            self.dir.join("controller-data").display().to_string(),
            self.quic_port,
            self.api_port,
            pki.ca_cert().display().to_string(),
            pki.controller_cert().display().to_string(),
            pki.controller_key().display().to_string(),
            pki.operator_token().display().to_string(),
            pubkey.display().to_string(),
        );
        // Enrollment (`fleetweft node add`) is not on main yet: the fleet
        // is bootstrapped through the config's node list.
        for (name, public) in names.iter().zip(publics) {
            text.push_str(&format!(
                "\n[[nodes]]\nname = \"{name}\"\npublic = \"{public}\"\n"
            ));
        }
        std::fs::write(self.config(), text)
            .with_context(|| format!("writing {}", self.config().display()))
    }

    /// Start the controller and wait until `api` answers; the time it took.
    pub async fn start(
        &self,
        api: &ApiClient,
        log_name: &str,
    ) -> anyhow::Result<(RunningController, Duration)> {
        let args = vec![
            "controller".to_string(),
            "--config".into(),
            self.config().display().to_string(),
        ];
        let log = self.dir.join(log_name);
        let started = Instant::now();
        let mut child = demo::spawn(&self.exe, &args, &log)?;
        let pid = child.id().context("the controller has no pid")?;
        let deadline = started + Duration::from_millis(API_UP_TIMEOUT_MS);
        loop {
            if api.get_text("/metrics").await.is_ok() {
                return Ok((RunningController { child, pid }, started.elapsed()));
            }
            if let Some(status) = child.try_wait()? {
                bail!("the controller exited ({status}); see {}", log.display());
            }
            if Instant::now() > deadline {
                bail!(
                    "the controller's API did not answer within {API_UP_TIMEOUT_MS} ms; see {}",
                    log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(API_POLL_MS)).await;
        }
    }
}

impl RunningController {
    /// SIGKILL it and wait for it to be gone.
    pub async fn kill(mut self) -> anyhow::Result<()> {
        self.child.start_kill().context("killing the controller")?;
        self.child
            .wait()
            .await
            .context("waiting for the controller")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `[[nodes]]` bootstrap of the largest fleet the simulator runs
    /// must fit the controller's config limit.
    #[test]
    fn the_largest_fleet_fits_the_controller_config_limit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let n = crate::options::AGENTS_MAX as usize;
        let names: Vec<String> = (0..n).map(crate::pki::node_name).collect();
        let publics: Vec<_> = (0..n)
            .map(|i| {
                let mut a = crate::routes::Routes::addr(i);
                a.set_port(65_535);
                a
            })
            .collect();
        let setup = ControllerSetup {
            exe: PathBuf::from("fleetweft"),
            dir: dir.path().to_path_buf(),
            quic_port: 65_535,
            api_port: 65_535,
        };
        let pki = FleetPki {
            dir: dir.path().join("a-pki-directory-with-a-longish-name"),
            nodes: Vec::new(),
        };
        setup
            .write_config(
                &pki,
                &dir.path().join("bundle-signing.pub"),
                &names,
                &publics,
                15_000,
            )
            .expect("config written");
        let len = std::fs::metadata(setup.config()).expect("config").len();
        let max = controller::daemon::config::CONFIG_BYTES_MAX;
        assert!(len <= max, "{n} nodes take {len} bytes, over {max}");
    }
}
