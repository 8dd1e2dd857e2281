//! The `Controller` test harness shared by the API tests and the dashboard
//! browser test: a real `fleetweft controller` process with no agents, its
//! keys, a signed bundle, and a tiny HTTP client.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];
/// Small, so an unanswered op goes UNKNOWN quickly.
pub const OP_TIMEOUT_MS: u64 = 1_000;

pub struct Controller {
    pub child: Child,
    pub port: u16,
    pub token: String,
    pub token_file: PathBuf,
    pub bundle: PathBuf,
    /// The bundle signing key (secret) the controller's public key checks.
    pub signing_key: PathBuf,
    /// The fleet PKI (CA, node certificates) under `_dir/pki`.
    pub pki: protocol::pki::FleetPki,
    /// The QUIC port agents connect to.
    pub quic_port: u16,
    pub _dir: tempfile::TempDir,
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port for a listener (below the kernel's ephemeral range,
/// see `demo::ports`).
pub fn free_tcp_port() -> u16 {
    demo::ports::free_port().expect("a free loopback port")
}

/// A loopback port for the QUIC listener.
pub fn free_udp_port() -> u16 {
    demo::ports::free_port().expect("a free loopback port")
}

/// Start `fleetweft controller` on `dir/controller.toml`, appending its
/// output to `dir/controller.log`.
pub fn spawn_controller(dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("controller.log"))
        .expect("log");
    Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .arg("controller")
        .arg("--config")
        .arg(dir.join("controller.toml"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start the controller")
}

pub fn s(p: &Path) -> String {
    p.display().to_string()
}

impl Controller {
    pub fn start() -> Controller {
        Self::start_with("", "")
    }

    /// Start with `api_extra` lines in `[api]` and `tail` (more tables,
    /// e.g. `[[webhooks]]`) at the end of controller.toml.
    pub fn start_with(api_extra: &str, tail: &str) -> Controller {
        let dir = tempfile::tempdir().expect("temp dir");
        let nodes: Vec<String> = NODES.iter().map(|n| n.to_string()).collect();
        let pki =
            protocol::pki::init_fleet(&dir.path().join("pki"), &nodes, "localhost").expect("pki");
        let (signing, verifying) = protocol::bundle::keygen();
        let pubkey = dir.path().join("bundle-signing.pub");
        protocol::bundle::save_verifying_key(&pubkey, &verifying).expect("pubkey");
        let signing_key = dir.path().join("bundle-signing.key");
        protocol::bundle::save_signing_key(&signing_key, &signing).expect("signing key");
        let bundle_bytes = protocol::bundle::sign(
            &signing,
            b"print('hello')\n",
            protocol::bundle::ManifestFields {
                name: "app".into(),
                version: "v2".into(),
                app_file_name: "app.py".into(),
                run: vec!["python3".into(), "app.py".into()],
                probe: protocol::bundle::ProbeSpec {
                    path: "/health".into(),
                    expect_status: 200,
                    expect_body: "ok".into(),
                    expect_json: None,
                },
            },
        )
        .expect("sign");
        let bundle = dir.path().join("v2.bundle");
        std::fs::write(&bundle, bundle_bytes).expect("bundle");
        let port = free_tcp_port();
        let quic_port = free_udp_port();
        let mut text = format!(
            "data_dir = {:?}\nlisten = \"127.0.0.1:{}\"\n\n[api]\nlisten = \"127.0.0.1:{port}\"\n{api_extra}\n\
             [tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\noperator_token = {:?}\n\n\
             [bundles]\npubkey = {:?}\n\n[timing]\nop_timeout_ms = {OP_TIMEOUT_MS}\n",
            s(&dir.path().join("data")),
            quic_port,
            s(&pki.ca_cert()),
            s(&pki.controller_cert()),
            s(&pki.controller_key()),
            s(&pki.operator_token()),
            s(&pubkey),
        );
        for node in NODES {
            text.push_str(&format!(
                "\n[[nodes]]\nname = \"{node}\"\npublic = \"127.0.0.1:{}\"\n",
                free_tcp_port()
            ));
        }
        text.push_str(tail);
        let config = dir.path().join("controller.toml");
        std::fs::write(&config, text).expect("config");
        let child = spawn_controller(dir.path());
        let token = protocol::pki::load_operator_token(&pki.operator_token()).expect("token");
        let ctl = Controller {
            child,
            port,
            token,
            token_file: pki.operator_token(),
            bundle,
            signing_key,
            pki,
            quic_port,
            _dir: dir,
        };
        ctl.wait_up();
        ctl
    }

    /// Kill the controller process and start it again on the same config
    /// and data directory.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn_controller(self._dir.path());
        self.wait_up();
    }

    pub fn wait_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.try_http("GET", "/api/status", None, b"").is_none() {
            assert!(
                Instant::now() < deadline,
                "controller did not come up: {}",
                std::fs::read_to_string(self._dir.path().join("controller.log"))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn try_http(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).ok()?;
        stream.write_all(body).ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).ok()?;
        let text = String::from_utf8_lossy(&answer).into_owned();
        let status = text.split(' ').nth(1)?.parse().ok()?;
        let body = text.split_once("\r\n\r\n")?.1.to_string();
        // Small answers only here; decode chunked bodies crudely.
        let body = if text
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(&body)
        } else {
            body
        };
        Some((status, body))
    }

    pub fn http(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> (u16, String) {
        self.try_http(method, path, token, body)
            .unwrap_or_else(|| panic!("{method} {path}: no answer"))
    }

    /// POST `body` as JSON with the operator token: status and body.
    pub fn post_json(&self, path: &str, body: &serde_json::Value) -> (u16, String) {
        self.http("POST", path, Some(&self.token), body.to_string().as_bytes())
    }

    /// A GET answering 200 with JSON.
    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let (code, body) = self.http("GET", path, None, b"");
        assert_eq!(code, 200, "GET {path}: {body}");
        serde_json::from_str(&body).expect("json")
    }

    /// The `/api/status` summary.
    pub fn status(&self) -> serde_json::Value {
        self.get_json("/api/status")
    }

    /// Every item of a paged list, following `next`.
    pub fn all_pages(&self, path: &str) -> Vec<serde_json::Value> {
        let mut items = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let url = match &after {
                Some(a) => format!("{path}?limit=1000&after={a}"),
                None => format!("{path}?limit=1000"),
            };
            let page = self.get_json(&url);
            items.extend(page["items"].as_array().expect("items").iter().cloned());
            match page["next"].as_str() {
                Some(n) => after = Some(n.to_string()),
                None => return items,
            }
        }
    }

    /// The summary with every rollout, node and op: `{"last_sequence",
    /// "rollouts": [...], "nodes": [...], "ops": [...]}` (a small fleet).
    pub fn view(&self) -> serde_json::Value {
        let mut view = self.status();
        view["rollouts"] = self.get_json("/api/rollouts");
        view["nodes"] = serde_json::Value::Array(self.all_pages("/api/nodes"));
        view["ops"] = serde_json::Value::Array(self.all_pages("/api/ops"));
        view
    }

    pub fn last_sequence(&self) -> serde_json::Value {
        self.status()["last_sequence"].clone()
    }

    /// Upload the bundle; returns its digest (hex).
    pub fn upload_bundle(&self) -> String {
        let bytes = std::fs::read(&self.bundle).unwrap();
        let (code, body) = self.http("POST", "/api/bundles", Some(&self.token), &bytes);
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["digest"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Upload the bundle and start a rollout with canary `canary`; returns
    /// the rollout's id.
    pub fn start_rollout(&self, canary: &str) -> String {
        let digest = self.upload_bundle();
        let request = serde_json::json!({
            "release": digest, "canary": canary, "followers": [], "slots": 1,
        });
        let (code, body) = self.http(
            "POST",
            "/api/rollouts",
            Some(&self.token),
            request.to_string().as_bytes(),
        );
        assert_eq!(code, 200, "{body}");
        let status = self.view();
        status["rollouts"].as_array().unwrap().last().unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn cli(&self, args: &[&str], token: Option<&str>) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetweft"));
        cmd.args(args)
            .arg("--controller")
            .arg(self.url())
            .env_remove("FLEETWEFT_TOKEN")
            .stdin(Stdio::null());
        if let Some(t) = token {
            cmd.env("FLEETWEFT_TOKEN", t);
        }
        cmd.output().expect("run fleetweft")
    }

    /// Wait until the rollout's op is UNKNOWN.
    pub fn wait_for_unknown(&self) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_millis(OP_TIMEOUT_MS + 15_000);
        loop {
            let status = self.view();
            if status["ops"]
                .as_array()
                .unwrap()
                .iter()
                .any(|o| !o["unknown"].is_null())
            {
                return status;
            }
            assert!(Instant::now() < deadline, "no op went UNKNOWN: {status}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

pub fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
