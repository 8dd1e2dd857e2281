//! `fleetweft`: the operator's command line.
//!
//! - `fleetweft log verify --data DIR | --journal DIR [--json]`: checks every
//!   entry, the hash chain and (controller) the rules over the whole history;
//!   prints a summary. Never writes to DIR: it reads a private copy.
//! - `fleetweft log show --data DIR | --journal DIR [--from SEQ] [--json]`:
//!   prints the events (journal records) in domain words, control
//!   characters escaped (or JSON lines).
//! - Both also read a controller log in etcd: `--etcd HOST:PORT,... --prefix P`
//!   (read-only; exit 4 when etcd cannot be reached).
//! - `fleetweft log copy --from LOC --to LOC`, LOC a sled log directory or
//!   `etcd://HOST:PORT[,...]/PREFIX`: copies a controller log between
//!   backends byte for byte, verifying the source before and the copy after;
//!   refuses a non-empty destination. Exit 0 copied, 1 failed.
//!
//!   Exit codes of both: 0 sound, 1 damaged or a rule broken (naming the
//!   first bad sequence and why), 2 not a log or the other kind of log (or a
//!   usage error), 3 in use by a running controller or agent, 4 could not
//!   be inspected (the private copy failed; nothing was judged).
//! - `fleetweft pki init --dir DIR --nodes a,b,c [--controller-host NAME]`:
//!   creates the fleet CA, controller and node certificates and the operator
//!   token (layout in `protocol::pki`). Refuses an existing DIR.
//! - `fleetweft pki issue NODE --dir DIR [--force]`: one new certificate and
//!   key for NODE from the existing CA in DIR, printing the file names and
//!   the fingerprint; refuses to replace the node's files without --force.
//! - `fleetweft bundle keygen --out DIR`: writes `DIR/bundle-signing.key`
//!   (0600) and `DIR/bundle-signing.pub`.
//! - `fleetweft bundle sign --key KEY --app FILE --name N --version V
//!   --probe-path P --expect-status S --expect-body B [--run CMD] --out FILE`:
//!   writes a signed bundle and prints its digest (the release identity).
//!   With `--dir DIR --run CMD` instead of `--app`: a format-2 release (a
//!   tree of chunks) in the new directory OUT (`OUT/manifest`,
//!   `OUT/chunks/<sha256>`).
//! - `fleetweft bundle verify --pubkey PUB BUNDLE`: exit 0 printing name,
//!   version and digest; exit 1 with the reason the bundle is refused. A
//!   format-2 release is verified streaming, chunks (or `--tree DIR`) too.
//! - `fleetweft bundle inspect BUNDLE [--pubkey PUB] [--json]`: the tree,
//!   sizes, chunk count and digest, of either format.
//! - `fleetweft bundle export RELEASE --out DIR [--pubkey PUB] [--json]`:
//!   a format-2 release laid out for a plain HTTP mirror
//!   (`DIR/chunks/<sha256>`, `DIR/<digest>.release`), resumable
//!   ([`cli::release_export`]).
//!
//! Exit codes of `pki` and `bundle`: 0 on success, 1 on any failure (the
//! reason is printed), 2 for usage errors.
//!
//! `fleetweft controller --config FILE` runs the daemon: exit 0 after
//! SIGTERM or SIGINT, 2 for an unreadable or invalid config, 1 if it cannot
//! start, 3 if the event log fails while it runs (`docs/operations.md`, "Exit codes").
//!
//! Against a running controller (`--controller URL`, default
//! http://127.0.0.1:7800; several URLs, repeated or comma-separated, for a
//! leader and its hot standbys: reads go to the first that answers, writes
//! to the leader; writes take the token from `--token-file FILE`,
//! else `--pki DIR` (`DIR/operator-token`), else `FLEETWEFT_TOKEN`): `status`, `proof NODE | --rollout ID`, `unresolved`,
//! `rollout start|pause|resume|approve`, `node release NODE`,
//! `node revoke-cert NODE [--cert FILE]`, each with `--json` for the API's
//! DTO. Exit 0 ok, 1 bad news (proof not verified, something unresolved, a
//! command or bundle refused by the controller, a controller that cannot be
//! reached), 2 usage (bad arguments, no or a wrong token, an unknown name)
//! ([`cli::ops`]).
//!
//! `fleetweft quickstart DIR --nodes a,b,c`: writes a loopback fleet's files
//! and prints the commands that start it and roll out the sample app.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use logtools::copy::{copy_log, open_etcd_read_only, LogLocation};
use logtools::history::{archive_error, verify_history, visit_history, HistorySummary};
use logtools::inspect::{
    locate, printable, printable_json, verify_controller_log, verify_controller_log_in,
    verify_journal, visit_events, visit_events_in, visit_records, InspectError, JournalSummary,
    LogKind, LogSummary,
};
use protocol::bundle::{self, JsonField, ManifestFields, ProbeSpec, APP_BYTES_MAX};
use protocol::pki::{self, DEFAULT_CONTROLLER_HOST};

/// Exit code for a log that is damaged or breaks a rule.
const EXIT_BAD_LOG: u8 = 1;
/// Exit code for a directory that is not a Fleetweft log (or is missing),
/// or holds the other kind of log.
const EXIT_NOT_A_LOG: u8 = 2;
/// Exit code for a log held open by a running controller or agent.
const EXIT_IN_USE: u8 = 3;
/// Exit code for a log that could not be inspected without writing to it
/// (the private copy failed: too large, no space, unreadable), or whose
/// report could not be written.
const EXIT_UNINSPECTABLE: u8 = 4;
/// File name of the bundle signing key written by `bundle keygen`.
const SIGNING_KEY_FILE: &str = "bundle-signing.key";
/// File name of the bundle public key written by `bundle keygen`.
const PUBLIC_KEY_FILE: &str = "bundle-signing.pub";

#[derive(Parser)]
#[command(name = "fleetweft", about = "Fleetweft edge release manager")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect the controller's event log or an agent's journal (read-only:
    /// works on a private copy, never writes to the directory).
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
    /// Create the fleet's certificates and operator token.
    Pki {
        #[command(subcommand)]
        command: PkiCommand,
    },
    /// Create signing keys; sign and verify app bundles.
    Bundle {
        #[command(subcommand)]
        command: BundleCommand,
    },
    /// Run the controller daemon. Exit 2 if the config is unreadable or
    /// invalid, 1 if it cannot start (the message says why), 3 if the event
    /// log fails while it runs.
    Controller {
        /// Path to controller.toml.
        #[arg(long)]
        config: PathBuf,
        /// Honour the config's [faults] section (demos and tests only).
        #[arg(long)]
        allow_fault_injection: bool,
    },
    /// Run a controller and three agents on loopback and roll v1 -> v2;
    /// with --ha, two controllers on a 3-member etcd cluster, the leader
    /// killed mid-rollout and the standby finishing it.
    Demo {
        /// Where to put keys, configs, data and logs (default: a new temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Which story to tell.
        #[arg(long, value_enum, default_value = "happy")]
        scenario: DemoScenario,
        /// Keep the fleet running afterwards until Ctrl-C.
        #[arg(long)]
        keep_running: bool,
        /// High availability on etcd: start a 3-member etcd cluster on
        /// loopback (needs `etcd` on PATH), two controllers on one log and
        /// three agents listing both; SIGKILL the leader right after the
        /// canary's commit decision is stored; the standby takes over and
        /// finishes the rollout. Tells the happy story only.
        #[arg(long, conflicts_with = "scenario")]
        ha: bool,
    },
    /// Write a loopback fleet's files (PKI, signing keys, controller.toml,
    /// one agent config per node, the sample app) into DIR and print the
    /// commands that start it and roll the sample app out as v1 and v2.
    /// Refuses a non-empty DIR.
    Quickstart {
        /// The directory to write (new or empty).
        dir: PathBuf,
        /// Node names, comma-separated (1-63 of a-z, 0-9, '-').
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<String>,
        /// The controller API port on 127.0.0.1.
        #[arg(long, default_value_t = demo::quickstart::DEFAULT_API_PORT)]
        api_port: u16,
        /// The controller QUIC port on 127.0.0.1 (agents connect here).
        #[arg(long, default_value_t = demo::quickstart::DEFAULT_QUIC_PORT)]
        quic_port: u16,
        /// The first node's public route port; node i gets this + i.
        #[arg(long, default_value_t = demo::quickstart::DEFAULT_BASE_PUBLIC_PORT)]
        base_public_port: u16,
    },
    /// Print a shell completion script for fleetweft or fleetweft-agent,
    /// e.g. `fleetweft completions bash > /etc/bash_completion.d/fleetweft`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
        /// Which binary's completions.
        #[arg(long, value_enum, default_value = "fleetweft")]
        binary: Binary,
    },
    /// Write man pages for fleetweft (one per command) and fleetweft-agent
    /// into DIR (created if missing); prints each file written.
    Manpages {
        /// The directory, e.g. /usr/local/share/man/man1.
        dir: PathBuf,
    },
    /// The fleet's summary (counts, the latest rollouts, UNKNOWN ops) and
    /// one page of nodes.
    Status {
        #[command(flatten)]
        page: PageFlags,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// A page of nodes in enrollment order, filtered by labels and state.
    Nodes {
        /// Only nodes with this label (K=V); repeat for more (all must hold).
        #[arg(long = "label", value_name = "K=V")]
        labels: Vec<String>,
        /// Only nodes in this state: idle, live, unknown, drifted,
        /// quarantined or retired.
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        page: PageFlags,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// A page of ops (hot and archived) in op order, filtered by rollout
    /// and state.
    Ops {
        /// Only this rollout's ops (r0, r1, ...).
        #[arg(long)]
        rollout: Option<String>,
        /// Only ops in this state: unknown, granted, decided, restoring,
        /// verified, rolled-back, not-applied, resolved, settled or
        /// holding-slot.
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        page: PageFlags,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// The proof verdict for a node or a rollout, read back now: the
    /// controller probes the route and asks the agent to re-hash what it
    /// serves (exit 1 unless verified).
    Proof {
        /// The node.
        #[arg(required_unless_present = "rollout", conflicts_with = "rollout")]
        node: Option<String>,
        /// A rollout id (r0, r1, ...) instead of a node.
        #[arg(long)]
        rollout: Option<String>,
        /// Judge the last recorded evidence instead of reading back now
        /// (labelled as recorded, with its age).
        #[arg(long, conflicts_with = "record")]
        cached: bool,
        /// Also record the fresh observation in the log (a write: needs the
        /// operator token); a node is observed at most once per 10 s.
        #[arg(long, conflicts_with = "rollout")]
        record: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Follow the event log as it is appended (one line per event; --json:
    /// JSON lines). With --rollout: exit 0 once the rollout completes, 1
    /// when it pauses, ends short or is superseded (a CI step).
    Watch {
        /// Only this rollout's events, and exit with its outcome.
        #[arg(long)]
        rollout: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// The handover report: every UNKNOWN or waiting op (exit 1 if any).
    Unresolved {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Ask the controller to probe a node's public route now and its agent
    /// for a readback; it records what it saw and prints it (exit 1 unless
    /// the route answered rightly as the release it should serve).
    Probe {
        /// The node.
        node: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Settle an op by hand with an observation: a fresh controller probe
    /// (--probe) or what you saw yourself.
    Resolve {
        /// The op (op0, op1, ...).
        op: String,
        /// What the observation shows.
        #[arg(long, value_parser = ["confirm-new", "confirm-baseline", "abandon"])]
        resolution: String,
        /// Let the controller probe the node's route now and use that.
        #[arg(long, conflicts_with_all = ["observed_verdict", "observed_identity", "process_healthy", "process_uptime_ms", "process_restarts"], required_unless_present = "observed_verdict")]
        probe: bool,
        /// The functional verdict you observed.
        #[arg(long, value_parser = ["pass", "wrong-answer", "unreachable"], requires = "observed_identity")]
        observed_verdict: Option<String>,
        /// The release identity (hex) the route answered with, or "none".
        #[arg(long)]
        observed_identity: Option<String>,
        /// The app process looked alive (recorded, never judged on).
        #[arg(long)]
        process_healthy: bool,
        /// How long the app process had been up, in milliseconds, if you saw
        /// it (recorded; omitted: not observed).
        #[arg(long, requires = "observed_verdict")]
        process_uptime_ms: Option<u64>,
        /// How often the app process had been restarted, if you saw it
        /// (recorded; the proof says restart_loop above the supervisor's
        /// bound; omitted: not observed).
        #[arg(long, requires = "observed_verdict")]
        process_restarts: Option<u32>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Take ownership of an unresolved op (recorded in the log).
    Claim {
        /// The op (op0, op1, ...).
        op: String,
        /// Who owns it: the operator whose credential makes the claim (the
        /// default); another name is refused.
        #[arg(long)]
        owner: Option<String>,
        /// When you will look again, e.g. 2026-12-01T10:00:00Z.
        #[arg(long)]
        review_by: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Order an op rolled back: its node puts the baseline back, and the op
    /// settles rolled-back only when a serving probe proves it. Needs a
    /// stored commit and a baseline; pauses the op's rollout.
    Rollback {
        /// The op (op0, op1, ...).
        op: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Start and steer rollouts.
    Rollout {
        #[command(subcommand)]
        command: RolloutCommand,
    },
    /// The fleet roster and node identities: enroll, label and retire
    /// nodes, release a quarantine, revoke a certificate.
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// An app's configuration, its own release layer: set a revision (a
    /// rollout started after it deploys it with the code), show the latest.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Named operators with roles (viewer < deployer < approver < admin):
    /// add one (its credential is shown once), rotate a credential, revoke
    /// one, list them. Every operator event in the log names who did it.
    Operator {
        #[command(subcommand)]
        command: OperatorCommand,
    },
}

#[derive(Subcommand)]
enum OperatorCommand {
    /// Record an operator with a role (an admin's command) and print its
    /// credential, once; --write keeps it in a file (mode 0600) for
    /// --token-file instead.
    Add {
        /// Its name: 1 to 64 of a-z, 0-9, '.', '_', '-' (never reused).
        name: String,
        /// viewer, deployer, approver or admin.
        #[arg(long)]
        role: String,
        /// Write the credential to this file (mode 0600) instead of
        /// printing it.
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Replace an operator's credential (your own, or anyone's as an
    /// admin): the old one is refused from now on.
    Rotate {
        /// The operator.
        name: String,
        /// Write the new credential to this file (mode 0600) instead of
        /// printing it.
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Revoke an operator (an admin's command): its credential is refused
    /// from now on, also after a restart. Never the last admin.
    Revoke {
        /// The operator.
        name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Every operator recorded, with its role.
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Record the app's next configuration revision, whole: what is not
    /// named here is not in it. Exit 1 if the controller refuses it.
    Set {
        /// The app (its release manifest's name).
        app: String,
        /// Environment variables the app gets.
        #[arg(value_name = "KEY=VALUE")]
        values: Vec<String>,
        /// A file the app finds in FLEETWEFT_CONFIG_DIR (repeatable).
        #[arg(long = "file", value_name = "NAME=PATH")]
        files: Vec<String>,
        /// A KEY among the values that is secret: sealed in the log and
        /// shown only by its fingerprint (repeatable).
        #[arg(long = "secret", value_name = "KEY")]
        secrets: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// The app's latest revision (a secret only by its fingerprint).
    Show {
        /// The app.
        app: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Subcommand)]
enum NodeCommand {
    /// Enroll a node: it takes the next node id; its agent is accepted
    /// with any fleet-CA certificate for NAME (`fleetweft pki issue NAME`).
    Add {
        /// The node's name (1-63 of a-z, 0-9, '-'; the certificate's id).
        name: String,
        /// A label, key=value (repeat for more).
        #[arg(long = "label", value_name = "K=V")]
        labels: Vec<String>,
        /// The node's public route, probed by the controller (HOST:PORT).
        #[arg(long, value_name = "ADDR")]
        public: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Set labels (key=value) and drop them (key-) on a node.
    Label {
        /// The node.
        name: String,
        /// key=value to set, key- to drop.
        #[arg(required = true, value_name = "K=V|K-")]
        changes: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Retire a node: nothing more is granted to it and its agent is
    /// refused. Refused while the node holds a live op.
    Retire {
        /// The node.
        name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Release a node quarantined after an identity conflict: its
    /// connections are closed, its agents reconnect, and commands flow
    /// again (a second conflict quarantines it again).
    Release {
        /// The node.
        node: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Revoke a node certificate: recorded in the log, refused at every
    /// handshake from now on (also after a restart); connections that
    /// presented it are closed.
    RevokeCert {
        /// The node.
        node: String,
        /// The certificate to revoke (PEM). Default: the one the node
        /// presented on its latest connection since the controller started.
        #[arg(long)]
        cert: Option<PathBuf>,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// A binary of the project with a command line to document.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Binary {
    /// The operator CLI and controller.
    Fleetweft,
    /// The node agent.
    FleetweftAgent,
}

impl Binary {
    fn command(self) -> clap::Command {
        use clap::CommandFactory;
        match self {
            Binary::Fleetweft => Cli::command(),
            Binary::FleetweftAgent => agent::cli::Args::command(),
        }
    }
}

/// How to reach the controller's API.
#[derive(clap::Args, Clone)]
struct ApiArgs {
    /// The controller's API URL. With several controllers (HA: a leader
    /// and hot standbys) repeat the flag or give a comma-separated list:
    /// reads go to the first that answers, writes to the leader (a
    /// standby's 503 names it; the next URL is tried otherwise).
    #[arg(
        long,
        value_name = "URL[,URL...]",
        value_delimiter = ',',
        default_value = cli::ops::DEFAULT_CONTROLLER
    )]
    controller: Vec<String>,
    /// File holding the operator token. Writes need a token; the first of
    /// --token-file, --pki, FLEETWEFT_TOKEN that is given is used.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// PKI directory made by `fleetweft pki init`: use its operator-token
    /// file (DIR/operator-token). --token-file wins over it; it wins over
    /// FLEETWEFT_TOKEN.
    #[arg(long, value_name = "DIR")]
    pki: Option<PathBuf>,
    /// Print the API's JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// Which page of a list to read.
#[derive(clap::Args)]
struct PageFlags {
    /// Items in the page (1 to 1000).
    #[arg(long)]
    limit: Option<usize>,
    /// Start after this item: the `next page: --after` of the page before.
    #[arg(long)]
    after: Option<String>,
}

impl PageFlags {
    fn args(self) -> cli::ops::PageArgs {
        cli::ops::PageArgs {
            limit: self.limit,
            after: self.after,
        }
    }
}

#[derive(Subcommand)]
enum RolloutCommand {
    /// Upload a signed bundle and start rolling it out.
    Start {
        /// The signed bundle file, or a format-2 release directory (`bundle
        /// sign --dir`'s OUT), uploaded resumably as `bundle upload` does.
        #[arg(long)]
        bundle: PathBuf,
        /// The canary node. With --select and no --canary, the first
        /// selected node is the canary.
        #[arg(long, required_unless_present = "select")]
        canary: Option<String>,
        /// Followers in order, comma-separated.
        #[arg(long, value_delimiter = ',', conflicts_with = "select")]
        followers: Vec<String>,
        /// Select the followers by labels, e.g. region=eu,tier=edge: every
        /// enrolled, not retired node whose labels hold all pairs, in
        /// enrollment order, resolved once by the controller at start.
        #[arg(long, value_name = "K=V,...")]
        select: Option<String>,
        /// How many ops may hold a slot at once (UNKNOWN ones count).
        #[arg(long)]
        slots: u16,
        /// Wait for `rollout approve` after the canary passes.
        #[arg(long)]
        approve_after_canary: bool,
        /// Waves after the canary: cumulative ends, counts of followers or
        /// percentages of them, e.g. 1%,10%,50%,100%. A wave is granted
        /// only once every op of the waves before it settled.
        #[arg(long, value_name = "END,...")]
        waves: Option<String>,
        /// Wait for `rollout approve` before each wave after the first.
        #[arg(long)]
        approve_between_waves: bool,
        /// Follower ops that may fail (each restored and proven) before
        /// the rollout pauses itself and grants no more: N or P%.
        #[arg(long, value_name = "N|P%")]
        max_failed: Option<String>,
        /// Pause once this many ops are UNKNOWN at once.
        #[arg(long, value_name = "N")]
        max_unknown: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Pause a rollout.
    Pause {
        /// Rollout id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Resume a paused rollout.
    Resume {
        /// Rollout id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Approve the followers after the canary.
    Approve {
        /// Rollout id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Subcommand)]
enum PkiCommand {
    /// Create a fleet CA, the controller's and each node's certificate, and
    /// a random operator token in a new directory.
    Init {
        /// The PKI directory to create; it must not exist.
        #[arg(long)]
        dir: PathBuf,
        /// Node ids, comma-separated; each is 1-63 of a-z, 0-9, '-'.
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<String>,
        /// DNS name (or IP address) agents use to reach the controller;
        /// 127.0.0.1 is always included.
        #[arg(long, default_value = DEFAULT_CONTROLLER_HOST)]
        controller_host: String,
    },
    /// Issue one new certificate and key for a node from the existing CA
    /// (DIR/ca.pem, DIR/ca-key.pem), into DIR/nodes/; nothing else changes.
    Issue {
        /// The node id.
        node: String,
        /// The PKI directory made by `fleetweft pki init`.
        #[arg(long)]
        dir: PathBuf,
        /// Replace the node's existing certificate and key.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand)]
// Parsed once per process: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum BundleCommand {
    /// Create an Ed25519 signing key pair.
    Keygen {
        /// Directory for bundle-signing.key (0600) and bundle-signing.pub.
        #[arg(long)]
        out: PathBuf,
    },
    /// Sign an app file into a bundle; print the bundle's digest.
    Sign {
        /// The signing key (bundle-signing.key).
        #[arg(long)]
        key: PathBuf,
        /// The app file; its file name is the name it is staged under.
        /// Writes a format-1 bundle (one file, at most 8 MiB).
        #[arg(long, required_unless_present = "dir", conflicts_with = "dir")]
        app: Option<PathBuf>,
        /// A directory to release as a tree (format 2): every file under
        /// it, chunked. `--out` is then a new directory: `OUT/manifest`
        /// (the signed manifest) and `OUT/chunks/<sha256>`, the layout any
        /// plain HTTP server can serve. Needs `--run`.
        #[arg(long, requires = "run")]
        dir: Option<PathBuf>,
        /// A tree for one architecture, as ARCH=DIR (`x86_64` or
        /// `aarch64`; repeat for each): a node of that architecture stages
        /// `--dir`'s files together with DIR's, and a rollout over a node
        /// of an architecture with no tree is refused (format 3; without
        /// any, the release is format 2 and runs on every architecture).
        #[arg(long = "arch-dir", value_name = "ARCH=DIR", requires = "dir",
              value_parser = parse_arch_dir)]
        arch_dirs: Vec<(model::platform::Arch, PathBuf)>,
        /// Release name.
        #[arg(long)]
        name: String,
        /// Release version.
        #[arg(long)]
        version: String,
        /// HTTP path the agent probes, e.g. /health.
        #[arg(long)]
        probe_path: String,
        /// HTTP status the probe expects.
        #[arg(long)]
        expect_status: u16,
        /// Response body the probe expects, exactly (surrounding
        /// whitespace ignored).
        #[arg(
            long,
            allow_hyphen_values = true,
            required_unless_present = "expect_json",
            conflicts_with = "expect_json"
        )]
        expect_body: Option<String>,
        /// Instead of an exact body: a JSON field the answer must carry,
        /// as POINTER=JSON, e.g. `/version="v2"` or `/ok=true`.
        #[arg(long, allow_hyphen_values = true, value_parser = parse_json_field)]
        expect_json: Option<JsonField>,
        /// Command that starts the app, split on whitespace. Default:
        /// `python3 FILE` for a .py file, else `./FILE`.
        #[arg(long)]
        run: Option<String>,
        /// Where to write the bundle (or, with `--dir`, the release
        /// directory); must not exist.
        #[arg(long)]
        out: PathBuf,
        /// Limits and a user (format 4; trees only).
        #[command(flatten)]
        limits: cli::release_tree::LimitArgs,
        /// A data migration (format 5; trees only).
        #[command(flatten)]
        migration: cli::release_tree::MigrationArgs,
    },
    /// Upload a release to the controller without starting a rollout;
    /// print its digest (what `rollout start` and `POST /api/rollouts`
    /// name). A format-1 bundle file is posted whole. A format-2 release
    /// directory (`bundle sign --dir`'s OUT) is uploaded resumably: each
    /// chunk is asked for and only the missing ones are sent, one at a
    /// time from disk, with a progress line per chunk on stderr; then the
    /// signed manifest. Run it again to resume an interrupted upload.
    Upload {
        /// The bundle file, or a format-2 release directory or manifest.
        bundle: PathBuf,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List the releases the controller stores (format-1 bundles and
    /// format-2 trees), their sizes and chunks, and what still names each
    /// (a rollout, nodes running it, unsettled ops): a release nothing
    /// names says `no` and `bundle rm` can remove it.
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Remove a stored release nothing names, then its chunks no other
    /// release names (and chunks no release names that are older than a
    /// day). Refused, with what names it, while a rollout deploys it, a
    /// node runs it or an unsettled op moves a node to or from it.
    Rm {
        /// The release digest, or a prefix of at least 6 hex digits that
        /// names one stored release.
        digest: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Lay a format-2 release out for a plain HTTP mirror: every chunk at
    /// `OUT/chunks/<sha256>` and the signed manifest at
    /// `OUT/<digest>.release`. Each chunk is verified as it is written
    /// (temporary file, fsync, rename); chunks already there are re-hashed
    /// and kept, damaged ones replaced, so running it again resumes an
    /// interrupted export. One OUT can hold several releases.
    Export {
        /// A format-2 release directory or manifest (`bundle sign --dir`'s
        /// OUT).
        release: PathBuf,
        /// The mirror's directory (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// Check the manifest's signature against this public key first.
        #[arg(long)]
        pubkey: Option<PathBuf>,
        /// Print JSON: the counts and the manifest's path.
        #[arg(long)]
        json: bool,
    },
    /// Verify a bundle against a public key; print name, version, digest.
    /// A format-2 release (its directory or manifest file) is verified
    /// streaming: the signed manifest, then every chunk in `chunks/` next
    /// to it, or with `--tree` an unpacked directory.
    Verify {
        /// The trusted public key (bundle-signing.pub).
        #[arg(long)]
        pubkey: PathBuf,
        /// The bundle file, or a format-2 release directory or manifest.
        bundle: PathBuf,
        /// Format 2: verify this directory (an unpacked tree) against the
        /// manifest instead of the chunk directory.
        #[arg(long)]
        tree: Option<PathBuf>,
        /// Print JSON: `{"verified": true, "name", "version", "digest",
        /// "probe"}`, or `{"verified": false, "error"}` (exit 1).
        #[arg(long)]
        json: bool,
    },
    /// Show a release as a tree: files, modes, sizes, chunk count and
    /// digest. A format-1 bundle shows as a tree of one file.
    Inspect {
        /// The bundle file, or a format-2 release directory or manifest.
        bundle: PathBuf,
        /// Check the signature against this public key (without it the
        /// signature is not checked, and the output says so).
        #[arg(long)]
        pubkey: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum LogCommand {
    /// Verify every entry, the hash chain and the rules; print a summary.
    /// Exit 0 sound, 1 damaged or a rule broken, 2 not a log (or the other
    /// kind), 3 in use by a running controller or agent, 4 could not be
    /// inspected.
    Verify {
        #[command(flatten)]
        target: LogTarget,
        /// The etcd log's key prefix (with `--etcd`).
        #[arg(long, value_name = "P", requires = "etcd")]
        prefix: Option<String>,
        #[command(flatten)]
        tls: EtcdTlsArgs,
        /// Print the summary (or the failure) as JSON.
        #[arg(long)]
        json: bool,
        /// Also fold the log from genesis and compare every stored
        /// snapshot with the fold (controller logs); exit 1 naming the
        /// first snapshot that differs.
        #[arg(long)]
        deep: bool,
        /// The archive directory of a controller log whose head was
        /// archived (`[log] archive_dir`): verify the whole chain across
        /// its segments and the live log, and the rules from genesis. A
        /// damaged segment is named with its first bad sequence (exit 1).
        #[arg(long, value_name = "DIR", conflicts_with = "journal")]
        archive: Option<PathBuf>,
    },
    /// Print the events (or journal records), one per line, in domain
    /// words; control characters are shown escaped. Stops at the first
    /// damaged entry. Exit codes as for `log verify`.
    Show {
        #[command(flatten)]
        target: LogTarget,
        /// The etcd log's key prefix (with `--etcd`).
        #[arg(long, value_name = "P", requires = "etcd")]
        prefix: Option<String>,
        #[command(flatten)]
        tls: EtcdTlsArgs,
        /// First sequence to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Print JSON lines instead.
        #[arg(long)]
        json: bool,
        /// The archive directory of a controller log whose head was
        /// archived: read the archived events first, then the live log.
        #[arg(long, value_name = "DIR", conflicts_with = "journal")]
        archive: Option<PathBuf>,
        /// Draw the events from `--from` on as a message sequence chart
        /// into FILE instead of printing them (controller logs): an SVG
        /// picture when FILE ends in `.svg`, else Mermaid text; at most
        /// 400 events per chart.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "journal"])]
        diagram: Option<PathBuf>,
    },
    /// Archive a stopped controller's old history by hand: the entries
    /// below its newest snapshot and more than `--keep-events` behind the
    /// end move into compressed segments in `--archive DIR`, then out of
    /// the live log (the daemon does this itself with `[log] archive_dir`;
    /// `keep_days` is the daemon's: it knows when its snapshots were
    /// written). On etcd it takes the log's leadership, so it refuses
    /// while a controller leads; then it compacts etcd's revision history.
    /// Exit 0 done (or nothing to do), 1 refused or failed.
    Archive {
        /// The controller's data directory (holding `log/`), or its log
        /// directory itself.
        #[arg(long, value_name = "DIR", required_unless_present = "etcd")]
        data: Option<PathBuf>,
        /// A controller log in etcd: the cluster's client endpoints,
        /// comma-separated (with `--prefix`).
        #[arg(
            long,
            value_name = "ENDPOINTS",
            value_delimiter = ',',
            requires = "prefix",
            conflicts_with = "data"
        )]
        etcd: Option<Vec<String>>,
        /// The etcd log's key prefix (with `--etcd`).
        #[arg(long, value_name = "P", requires = "etcd")]
        prefix: Option<String>,
        #[command(flatten)]
        tls: EtcdTlsArgs,
        /// The archive directory (created if missing).
        #[arg(long, value_name = "DIR")]
        archive: PathBuf,
        /// Entries kept in the live log behind its end (0: none).
        #[arg(long, value_name = "N", default_value_t = controller::daemon::config::KEEP_EVENTS_DEFAULT)]
        keep_events: u64,
    },
    /// Copy a controller log between backends (sled directory or
    /// `etcd://HOST:PORT[,...]/PREFIX`), byte for byte, verifying the source
    /// before and the copy after. Refuses a non-empty destination.
    Copy {
        /// The log to copy.
        #[arg(long, value_parser = LogLocation::parse)]
        from: LogLocation,
        /// The empty destination.
        #[arg(long, value_parser = LogLocation::parse)]
        to: LogLocation,
        /// TLS to etcd, for whichever side (or both) is in etcd.
        #[command(flatten)]
        tls: EtcdTlsArgs,
    },
}

/// TLS to etcd (`log verify|show --etcd`, `log copy` with an etcd side).
#[derive(clap::Args)]
struct EtcdTlsArgs {
    /// PEM CA certificate(s) of the etcd members: connect over TLS
    /// (endpoints then use https).
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// PEM client certificate for etcd's mutual TLS (with `--key-file`).
    #[arg(long, value_name = "FILE", requires = "ca_file", requires = "key_file")]
    cert_file: Option<PathBuf>,
    /// PEM private key of `--cert-file`.
    #[arg(long, value_name = "FILE", requires = "cert_file")]
    key_file: Option<PathBuf>,
}

impl EtcdTlsArgs {
    /// The TLS settings, `None` without `--ca-file`.
    fn settings(self) -> Option<eventlog::EtcdTls> {
        let ca_file = self.ca_file?;
        Some(eventlog::EtcdTls {
            ca_file,
            cert_file: self.cert_file,
            key_file: self.key_file,
        })
    }
}

/// Which log `fleetweft log` reads: exactly one of the three.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct LogTarget {
    /// A controller log in etcd: the cluster's client endpoints,
    /// comma-separated (with `--prefix`).
    #[arg(
        long,
        value_name = "ENDPOINTS",
        requires = "prefix",
        value_delimiter = ','
    )]
    etcd: Option<Vec<String>>,

    /// The controller's data directory (holding `log/`), or its log
    /// directory itself.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// An agent's data directory (holding `journal/`), or its journal
    /// directory itself.
    #[arg(long, value_name = "DIR")]
    journal: Option<PathBuf>,
}

impl LogTarget {
    fn kind_and_dir(self) -> (LogKind, PathBuf) {
        match (self.data, self.journal) {
            (_, Some(dir)) => (LogKind::AgentJournal, dir),
            (Some(dir), None) => (LogKind::Controller, dir),
            (None, None) => unreachable!("clap requires --data, --journal or --etcd"),
        }
    }
}

/// clap's parser for `--expect-json`.
/// Which story the demo tells (`--scenario`): the CLI's words for
/// [`demo::Scenario`], so the demo crate needs no clap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum DemoScenario {
    /// v1 everywhere, then v2 through the canary to every node.
    Happy,
    /// v2 answers wrongly on the canary (healthy process): restore, pause.
    WrongAnswer,
    /// The first commit reply for v2 is lost; the operator pauses; the
    /// stored decision is replayed and the op settles; no follower granted.
    LostReply,
}

impl From<DemoScenario> for demo::Scenario {
    fn from(scenario: DemoScenario) -> demo::Scenario {
        match scenario {
            DemoScenario::Happy => demo::Scenario::Happy,
            DemoScenario::WrongAnswer => demo::Scenario::WrongAnswer,
            DemoScenario::LostReply => demo::Scenario::LostReply,
        }
    }
}

fn parse_json_field(text: &str) -> Result<JsonField, String> {
    JsonField::parse(text)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Log { command } => return log_main(command),
        Command::Pki { command } => pki_main(command),
        Command::Bundle { command } => bundle_main(command),
        Command::Controller {
            config,
            allow_fault_injection,
        } => run_controller(&config, allow_fault_injection),
        Command::Completions { shell, binary } => {
            let mut command = binary.command();
            let name = command.get_name().to_string();
            clap_complete::generate(shell, &mut command, name, &mut io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Manpages { dir } => manpages(&dir),
        Command::Quickstart {
            dir,
            nodes,
            api_port,
            quic_port,
            base_public_port,
        } => quickstart(demo::quickstart::QuickstartOptions {
            dir,
            nodes,
            api_port,
            quic_port,
            base_public_port,
        }),
        Command::Demo {
            dir,
            scenario,
            keep_running,
            ha,
        } => run_demo(demo::DemoOptions {
            dir,
            scenario: scenario.into(),
            keep_running,
            ha,
        }),
        command @ (Command::Status { .. }
        | Command::Nodes { .. }
        | Command::Ops { .. }
        | Command::Proof { .. }
        | Command::Watch { .. }
        | Command::Unresolved { .. }
        | Command::Probe { .. }) => return query_main(command),
        command @ (Command::Resolve { .. } | Command::Claim { .. } | Command::Rollback { .. }) => {
            return action_main(command)
        }
        Command::Rollout { command } => return rollout(command),
        Command::Node { command } => return node_main(command),
        Command::Config { command } => return config_main(command),
        Command::Operator { command } => return operator_main(command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("fleetweft: {err:#}");
            ExitCode::from(EXIT_BAD_LOG)
        }
    }
}

/// `fleetweft log ...`.
fn log_main(command: LogCommand) -> ExitCode {
    match command {
        LogCommand::Verify {
            target,
            prefix,
            tls,
            json,
            deep,
            archive,
        } => {
            let tls = tls.settings();
            if tls.is_some() && target.etcd.is_none() {
                eprintln!("fleetweft: --ca-file is only used with --etcd");
                return ExitCode::from(2);
            }
            let checks = Checks {
                json,
                deep,
                archive,
            };
            log_command(match (target.etcd, prefix) {
                (Some(endpoints), Some(prefix)) => log_verify_etcd(endpoints, prefix, tls, checks),
                (etcd, _) => log_verify(LogTarget { etcd, ..target }, checks),
            })
        }
        LogCommand::Show {
            target,
            prefix,
            tls,
            from,
            json,
            archive,
            diagram,
        } => {
            let format = match (diagram, json) {
                (Some(path), _) => ShowFormat::Diagram(path, Box::default()),
                (None, true) => ShowFormat::Json,
                (None, false) => ShowFormat::Text,
            };
            log_show_main(target, prefix, tls, from, format, archive)
        }
        LogCommand::Archive {
            data,
            etcd,
            prefix,
            tls,
            archive,
            keep_events,
        } => {
            let place = match (data, etcd, prefix) {
                (_, Some(endpoints), Some(prefix)) => {
                    let mut config = eventlog::EtcdConfig::new(endpoints, prefix);
                    config.tls = tls.settings();
                    ArchivePlace::Etcd(config)
                }
                (Some(dir), _, _) => ArchivePlace::Sled(dir),
                _ => {
                    eprintln!("fleetweft: give --data DIR or --etcd ENDPOINTS --prefix P");
                    return ExitCode::from(2);
                }
            };
            log_archive(place, &archive, keep_events)
        }
        LogCommand::Copy { from, to, tls } => {
            let tls = tls.settings();
            log_copy(&from.with_tls(tls.clone()), &to.with_tls(tls))
        }
    }
}

/// `fleetweft log show`: from etcd, through an archive, or from a directory.
fn log_show_main(
    target: LogTarget,
    prefix: Option<String>,
    tls: EtcdTlsArgs,
    from: u64,
    format: ShowFormat,
    archive: Option<PathBuf>,
) -> ExitCode {
    let tls = tls.settings();
    if tls.is_some() && target.etcd.is_none() {
        eprintln!("fleetweft: --ca-file is only used with --etcd");
        return ExitCode::from(2);
    }
    log_command(match (target.etcd, prefix, archive) {
        (Some(endpoints), Some(prefix), archive) => {
            log_show_etcd(endpoints, prefix, tls, from, format, archive.as_deref())
        }
        (etcd, _, Some(archive)) => {
            log_show_archive(LogTarget { etcd, ..target }, &archive, from, format)
        }
        (etcd, _, None) => log_show(LogTarget { etcd, ..target }, from, format),
    })
}

/// `fleetweft bundle ...`.
/// `bundle sign`: a format-1 bundle of one app file, or a release tree.
fn bundle_sign_main(command: BundleCommand) -> anyhow::Result<ExitCode> {
    let BundleCommand::Sign {
        key,
        app,
        dir,
        arch_dirs,
        name,
        version,
        probe_path,
        expect_status,
        expect_body,
        expect_json,
        run,
        out,
        limits,
        migration,
    } = command
    else {
        anyhow::bail!("bundle_sign_main is for `bundle sign` only")
    };
    let probe = ProbeSpec {
        path: probe_path,
        expect_status,
        expect_body: expect_body.unwrap_or_default(),
        expect_json,
    };
    match (app, dir) {
        (Some(app), _) => bundle_sign(&key, &app, name, version, probe, run, &out),
        (None, dir) => {
            let source = TreeSource {
                dir,
                arch_dirs,
                limits: limits.into_limits(),
                migration: migration.into_migration(),
            };
            bundle_sign_tree(&key, source, name, version, probe, run, &out)
        }
    }
}

fn bundle_main(command: BundleCommand) -> anyhow::Result<ExitCode> {
    match command {
        BundleCommand::Keygen { out } => bundle_keygen(&out),
        sign @ BundleCommand::Sign { .. } => bundle_sign_main(sign),
        BundleCommand::Verify {
            pubkey,
            bundle,
            tree,
            json,
        } if tree.is_some() || cli::release_tree::is_release(&bundle) => {
            bundle_verify_release(&pubkey, &bundle, tree.as_deref(), json)
        }
        BundleCommand::Verify {
            pubkey,
            bundle,
            json: true,
            ..
        } => bundle_verify_json(&pubkey, &bundle),
        BundleCommand::Verify { pubkey, bundle, .. } => bundle_verify(&pubkey, &bundle),
        BundleCommand::Inspect {
            bundle,
            pubkey,
            json,
        } => cli::release_tree::inspect(&bundle, pubkey.as_deref(), json),
        BundleCommand::Export {
            release,
            out,
            pubkey,
            json,
        } => Ok(local_command(cli::release_export::export(
            &release,
            &out,
            pubkey.as_deref(),
            json,
        ))),
        command @ (BundleCommand::Upload { .. }
        | BundleCommand::List { .. }
        | BundleCommand::Rm { .. }) => Ok(bundle_api_main(command)),
    }
}

/// `fleetweft bundle upload|list|rm`: through the controller's API.
fn bundle_api_main(command: BundleCommand) -> ExitCode {
    match command {
        BundleCommand::Upload { bundle, api } => api_command(&api, |c, json| async move {
            cli::release_upload::upload(&c, &bundle, json).await
        }),
        BundleCommand::List { api } => api_command(&api, |c, json| async move {
            cli::release_list::list(&c, json).await
        }),
        BundleCommand::Rm { digest, api } => api_command(&api, |c, json| async move {
            cli::release_list::remove(&c, &digest, json).await
        }),
        // `bundle_main` routes only these here.
        _ => unreachable!("bundle_api_main: a local bundle command"),
    }
}

/// The commands that read the controller's state through its API.
fn query_main(command: Command) -> ExitCode {
    match command {
        Command::Status { page, api } => {
            let page = page.args();
            api_command(&api, |c, json| async move {
                cli::ops::status(&c, &page, json).await
            })
        }
        Command::Nodes {
            labels,
            state,
            page,
            api,
        } => {
            let page = page.args();
            api_command(&api, |c, json| async move {
                cli::ops::nodes(&c, &labels, state.as_deref(), &page, json).await
            })
        }
        Command::Ops {
            rollout,
            state,
            page,
            api,
        } => {
            let page = page.args();
            api_command(&api, |c, json| async move {
                cli::ops::ops(&c, rollout.as_deref(), state.as_deref(), &page, json).await
            })
        }
        Command::Proof {
            node,
            rollout,
            cached,
            record,
            api,
        } => api_command(&api, |c, json| async move {
            let how = cli::ops::ProofHow { cached, record };
            match (node, rollout) {
                (_, Some(id)) => cli::ops::rollout_proof(&c, &id, how, json).await,
                (Some(node), None) => cli::ops::node_proof(&c, &node, how, json).await,
                (None, None) => unreachable!("clap requires a node or --rollout"),
            }
        }),
        Command::Watch { rollout, api } => api_command(&api, |c, json| async move {
            match cli::watch::watch(&c, rollout.as_deref(), json).await {
                Ok(code) => Ok(cli::ops::Output {
                    text: String::new(),
                    code,
                }),
                Err(e) => Err(cli::ops::Failure {
                    message: e.message,
                    code: e.code,
                }),
            }
        }),
        Command::Unresolved { api } => api_command(&api, |c, json| async move {
            cli::ops::unresolved(&c, json).await
        }),
        Command::Probe { node, api } => api_command(&api, |c, json| async move {
            cli::ops::probe(&c, &node, json).await
        }),
        // `main` routes only these here.
        _ => unreachable!("query_main: another command"),
    }
}

/// The operator's actions on one op through the API.
fn action_main(command: Command) -> ExitCode {
    match command {
        Command::Resolve {
            op,
            resolution,
            probe,
            observed_verdict,
            observed_identity,
            process_healthy,
            process_uptime_ms,
            process_restarts,
            api,
        } => {
            let observation = match (probe, observed_verdict) {
                (false, Some(verdict)) => {
                    let identity =
                        observed_identity.filter(|i| !matches!(i.as_str(), "none" | "null" | ""));
                    Some(api::view::ObservationBody {
                        verdict,
                        identity,
                        process_healthy,
                        process_uptime_ms,
                        process_restarts,
                    })
                }
                _ => None,
            };
            api_command(&api, |c, json| async move {
                cli::ops::resolve(&c, &op, &resolution, observation, json).await
            })
        }
        Command::Claim {
            op,
            owner,
            review_by,
            api,
        } => api_command(&api, |c, json| async move {
            cli::ops::claim(&c, &op, owner.as_deref(), &review_by, json).await
        }),
        Command::Rollback { op, api } => api_command(&api, |c, json| async move {
            cli::ops::roll_back(&c, &op, json).await
        }),
        // `main` routes only these here.
        _ => unreachable!("action_main: another command"),
    }
}

/// `fleetweft node ...`.
fn node_main(command: NodeCommand) -> ExitCode {
    match command {
        NodeCommand::Add {
            name,
            labels,
            public,
            api,
        } => {
            let labels = match cli::ops::parse_pairs(labels.iter().map(String::as_str)) {
                Ok(l) => l,
                Err(why) => return usage(&format!("--label: {why}")),
            };
            api_command(&api, |c, json| async move {
                cli::ops::node_add(&c, &name, &labels, &public, json).await
            })
        }
        NodeCommand::Label { name, changes, api } => {
            let (drops, sets): (Vec<&String>, Vec<&String>) = changes
                .iter()
                .partition(|c| !c.contains('=') && c.ends_with('-'));
            let remove: Vec<String> = drops
                .iter()
                .map(|c| c.trim_end_matches('-').to_string())
                .collect();
            let set = match cli::ops::parse_pairs(sets.iter().map(|s| s.as_str())) {
                Ok(l) => l,
                Err(why) => return usage(&format!("{why} (give key=value, or key- to drop)")),
            };
            api_command(&api, |c, json| async move {
                cli::ops::node_label(&c, &name, &set, &remove, json).await
            })
        }
        NodeCommand::Retire { name, api } => api_command(&api, |c, json| async move {
            cli::ops::node_retire(&c, &name, json).await
        }),
        NodeCommand::Release { node, api } => api_command(&api, |c, json| async move {
            cli::ops::node_release(&c, &node, json).await
        }),
        NodeCommand::RevokeCert { node, cert, api } => {
            let fingerprint = match cert
                .as_deref()
                .map(|path| cert_fingerprint(path, &node))
                .transpose()
            {
                Ok(f) => f,
                Err(err) => {
                    eprintln!("fleetweft: {err:#}");
                    return ExitCode::from(EXIT_BAD_LOG);
                }
            };
            api_command(&api, |c, json| async move {
                cli::ops::node_revoke_cert(&c, &node, fingerprint.as_deref(), json).await
            })
        }
    }
}

/// The exit code of `log verify|show`; a failure to write the report is
/// not a verdict on the log.
fn log_command(result: anyhow::Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|err| {
        eprintln!("fleetweft: {}", printable(&format!("{err:#}")));
        ExitCode::from(EXIT_UNINSPECTABLE)
    })
}

/// Exit code for an inspection failure.
fn exit_code(err: &InspectError) -> ExitCode {
    ExitCode::from(match err {
        InspectError::NotALog(_) | InspectError::WrongKind { .. } => EXIT_NOT_A_LOG,
        InspectError::InUse { .. } => EXIT_IN_USE,
        InspectError::Uninspectable(_) => EXIT_UNINSPECTABLE,
        InspectError::Damaged(_) | InspectError::RuleViolated { .. } => EXIT_BAD_LOG,
        InspectError::NeedsArchive { .. } => EXIT_UNINSPECTABLE,
        InspectError::Archive(eventlog::ArchiveError::Io { .. }) => EXIT_UNINSPECTABLE,
        InspectError::Archive(_) => EXIT_BAD_LOG,
    })
}

/// The failure's name in JSON (`error`) and its prefix in text.
fn failure_words(err: &InspectError) -> (&'static str, &'static str) {
    match err {
        InspectError::NotALog(_) => ("not a log", "not a Fleetweft log: "),
        // These two messages say it all themselves.
        InspectError::WrongKind { .. } => ("wrong kind", ""),
        InspectError::InUse { .. } => ("in use", ""),
        InspectError::Uninspectable(_) => ("cannot inspect", ""),
        InspectError::Damaged(_) => ("damaged", "log is damaged: "),
        InspectError::RuleViolated { .. } => ("rule violated", "log breaks a rule: "),
        InspectError::NeedsArchive { .. } => ("needs the archive", ""),
        InspectError::Archive(eventlog::ArchiveError::Io { .. }) => ("cannot inspect", ""),
        InspectError::Archive(_) => ("damaged", "archived history is damaged: "),
    }
}

/// Reports `err` (JSON on stdout, else text on stderr) and returns its code.
fn report_failure(
    out: &mut impl Write,
    err: &InspectError,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let (kind, prefix) = failure_words(err);
    if json {
        let value = serde_json::json!({
            "sound": false,
            "error": kind,
            "sequence": err.sequence(),
            "rule": err.rule(),
            "reason": err.to_string(),
        });
        writeln!(
            out,
            "{}",
            printable_json(&serde_json::to_string_pretty(&value)?)
        )?;
    } else {
        eprintln!("fleetweft: {prefix}{}", printable(&err.to_string()));
    }
    Ok(exit_code(err))
}

/// What `log verify` checks beyond the chain and the rules.
struct Checks {
    json: bool,
    deep: bool,
    /// The archive of a log whose head was archived.
    archive: Option<PathBuf>,
}

fn log_verify(target: LogTarget, checks: Checks) -> anyhow::Result<ExitCode> {
    let Checks {
        json,
        deep,
        archive,
    } = checks;
    let mut out = io::stdout().lock();
    let (kind, given) = target.kind_and_dir();
    let dir = match locate(&given, kind) {
        Ok(dir) => dir,
        Err(err) => return report_failure(&mut out, &err, json),
    };
    if let Some(archive) = archive {
        let outcome = eventlog::read_private_copy(&dir, |storage| {
            Ok(verify_history_and_deep(&archive, storage, deep))
        })
        .unwrap_or_else(|err| Err(InspectError::from_verify(err, LogKind::Controller)));
        return print_history(&mut out, &dir, &archive, outcome, json);
    }
    let summary = match kind {
        LogKind::Controller => verify_controller_log(&dir).map(Summary::Controller),
        LogKind::AgentJournal => verify_journal(&dir).map(Summary::Journal),
    };
    let summary = match (summary, kind, deep) {
        (Ok(summary), LogKind::Controller, true) => {
            match eventlog::read_private_copy(&dir, |storage| cli::deep::check(storage)) {
                Ok(deep) => return print_deep(&mut out, &dir, summary, deep, json),
                Err(err) => Err(InspectError::Uninspectable(err)),
            }
        }
        (summary, _, _) => summary,
    };
    match summary {
        Ok(summary) => {
            if json {
                let value = match &summary {
                    Summary::Controller(summary) => {
                        serde_json::json!({ "sound": true, "summary": summary })
                    }
                    Summary::Journal(summary) => {
                        serde_json::json!({ "sound": true, "journal": summary })
                    }
                };
                writeln!(
                    out,
                    "{}",
                    printable_json(&serde_json::to_string_pretty(&value)?)
                )?;
            } else {
                let mut text = String::new();
                match &summary {
                    Summary::Controller(summary) => print_summary(&mut text, &dir, summary)?,
                    Summary::Journal(summary) => print_journal_summary(&mut text, &dir, summary)?,
                }
                for line in text.lines() {
                    writeln!(out, "{}", printable(line))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => report_failure(&mut out, &err, json),
    }
}

/// `log verify --archive` (and `--deep`) on one storage.
fn verify_history_and_deep(
    archive: &Path,
    storage: &dyn eventlog::LogStorage,
    deep: bool,
) -> Result<(HistorySummary, Option<cli::deep::Deep>), InspectError> {
    let history = verify_history(archive, storage)?;
    let deep = if deep {
        Some(cli::deep::check_with_archive(archive, storage).map_err(archive_error)?)
    } else {
        None
    };
    Ok((history, deep))
}

/// What `log verify --archive` prints: the summary of the whole history,
/// the archive's extent, the deep pass's verdict; or the failure.
fn print_history(
    out: &mut impl Write,
    name: &Path,
    archive: &Path,
    outcome: Result<(HistorySummary, Option<cli::deep::Deep>), InspectError>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let (history, deep) = match outcome {
        Ok(found) => found,
        Err(err) => return report_failure(out, &err, json),
    };
    let sound = deep.as_ref().is_none_or(|d| d.sound);
    if json {
        let value = serde_json::json!({
            "sound": sound,
            "summary": history.summary,
            "archive": {
                "dir": archive.display().to_string(),
                "segments": history.segments,
                "archive_end": history.archive_end,
                "first_live": history.first_live,
            },
            "snapshots": deep.as_ref().map(|d| d.json.clone()),
        });
        let text = serde_json::to_string_pretty(&value)?;
        writeln!(out, "{}", printable_json(&text))?;
    } else {
        let mut text = String::new();
        print_summary(&mut text, name, &history.summary)?;
        text.push_str(&format!(
            "archive:       {} segment(s) in {}, entries 0..{}; the live log starts at {}\n",
            history.segments,
            archive.display(),
            history.archive_end,
            history.first_live
        ));
        if let Some(deep) = &deep {
            text.push_str(&deep.text);
        }
        for line in text.lines() {
            writeln!(out, "{}", printable(line))?;
        }
    }
    Ok(if sound {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_BAD_LOG)
    })
}

/// `log show --archive DIR`: the archived events, then the live log's.
fn log_show_archive(
    target: LogTarget,
    archive: &Path,
    from: u64,
    mut format: ShowFormat,
) -> anyhow::Result<ExitCode> {
    let mut out = io::stdout().lock();
    let (kind, given) = target.kind_and_dir();
    if kind != LogKind::Controller {
        bail!("--archive reads controller logs only");
    }
    let dir = match locate(&given, kind) {
        Ok(dir) => dir,
        Err(err) => return report_failure(&mut out, &err, false),
    };
    let mut write_error: Option<anyhow::Error> = None;
    let result = eventlog::read_private_copy(&dir, |storage| {
        Ok(show_history(
            archive,
            storage,
            from,
            &mut format,
            &mut out,
            &mut write_error,
        ))
    })
    .unwrap_or_else(|err| Err(InspectError::from_verify(err, LogKind::Controller)));
    format.finish(&mut out, &mut write_error);
    show_outcome(&mut out, write_error, result)
}

/// Prints every event of the history from `from` on, as `log show` does
/// (JSON lines say whether each was read from the archive).
fn show_history(
    archive: &Path,
    storage: &dyn eventlog::LogStorage,
    from: u64,
    format: &mut ShowFormat,
    out: &mut impl Write,
    write_error: &mut Option<anyhow::Error>,
) -> Result<eventlog::HistoryReport, InspectError> {
    visit_history(archive, storage, from, |sequence, event, archived| {
        if write_error.is_some() {
            return Ok(());
        }
        if let Some(line) = format.line(sequence, event, Some(archived)) {
            if let Err(err) = line.and_then(|line| writeln!(out, "{line}").map_err(Into::into)) {
                *write_error = Some(err);
            }
        }
        Ok(())
    })
}

/// How `log show` gives a controller log's events: text lines, JSON lines,
/// or a sequence chart written to a file at the end.
enum ShowFormat {
    Text,
    Json,
    Diagram(PathBuf, Box<logtools::diagram::LogChart>),
}

impl ShowFormat {
    /// The line for one event (`None` when it goes into the chart);
    /// `archived` is said in JSON when the history was read with its archive.
    fn line(
        &mut self,
        sequence: u64,
        event: &model::controller::Event,
        archived: Option<bool>,
    ) -> Option<anyhow::Result<String>> {
        match self {
            ShowFormat::Text => Some(Ok(
                printable(&format!("{sequence:>6}  {event}")).into_owned()
            )),
            ShowFormat::Json => Some(
                serde_json::to_value(event)
                    .and_then(|value| {
                        let mut object = serde_json::json!({
                            "sequence": sequence, "text": event.to_string(), "event": value
                        });
                        if let Some(archived) = archived {
                            object["archived"] = archived.into();
                        }
                        serde_json::to_string(&object)
                    })
                    .map(|line| printable_json(&line).into_owned())
                    .map_err(anyhow::Error::from),
            ),
            ShowFormat::Diagram(_, chart) => {
                chart.event(sequence, event);
                None
            }
        }
    }

    /// With `--diagram`: writes the chart (SVG or Mermaid by the file's
    /// extension) and says so on stdout.
    fn finish(self, out: &mut impl Write, write_error: &mut Option<anyhow::Error>) {
        let ShowFormat::Diagram(path, chart) = self else {
            return;
        };
        let drawn = chart.drawn();
        let chart = chart.finish();
        let text = match path.extension().is_some_and(|e| e == "svg") {
            true => chart.svg(),
            false => chart.mermaid(),
        };
        let written = std::fs::write(&path, text)
            .with_context(|| format!("writing {}", path.display()))
            .and_then(|()| {
                writeln!(out, "drew {drawn} event(s) into {}", path.display()).map_err(Into::into)
            });
        if let Err(err) = written {
            write_error.get_or_insert(err);
        }
    }
}

/// Where `log archive` finds the log.
enum ArchivePlace {
    Sled(PathBuf),
    Etcd(eventlog::EtcdConfig),
}

/// `log archive`: see [`LogCommand::Archive`].
fn log_archive(place: ArchivePlace, archive: &Path, keep_events: u64) -> ExitCode {
    match archive_by_hand(place, archive, keep_events) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("fleetweft: {}", printable(&format!("{err:#}")));
            ExitCode::from(EXIT_BAD_LOG)
        }
    }
}

fn archive_by_hand(place: ArchivePlace, archive: &Path, keep_events: u64) -> anyhow::Result<()> {
    use controller::daemon::annex::Derived;
    use controller::driver::Controller;
    let mut leadership = None;
    let started = match &place {
        ArchivePlace::Sled(given) => {
            let dir = locate(given, LogKind::Controller).map_err(|e| anyhow::anyhow!("{e}"))?;
            Controller::start(&dir, Derived::decode)
                .with_context(|| format!("opening the controller log {}", dir.display()))?
        }
        ArchivePlace::Etcd(config) => {
            let candidate = format!("fleetweft log archive (pid {})", std::process::id());
            let client = eventlog::EtcdClient::connect(config)?;
            let won = eventlog::Leadership::campaign(
                &client,
                config,
                &candidate,
                std::time::Duration::ZERO,
            )
            .context("taking the log's leadership (is a controller running?)")?;
            let storage = eventlog::EtcdStorage::open(&client, config, &won)?;
            leadership = Some(won);
            Controller::start_on_storage(Box::new(storage), Derived::decode)
                .context("opening the controller log in etcd")?
        }
    };
    let controller = started.controller;
    let Some(covers) = started.snapshot.map(|s| s.covers) else {
        bail!(
            "the log has no usable snapshot: archiving keeps every entry a start needs, and \
             without a snapshot a start needs them all (run the controller until it writes one)"
        );
    };
    let end = controller.last_sequence().map_or(0, |last| last + 1);
    let retention = controller::archive::Retention {
        keep_events,
        keep_days: 0,
    };
    let times = controller::archive::SnapshotTimes::default();
    let upto = controller::archive::archive_upto(
        end,
        covers,
        retention,
        &times,
        std::time::SystemTime::now(),
    );
    let archiver = controller.archiver();
    let first_live = archiver.first_live()?;
    if upto <= first_live {
        println!(
            "nothing to archive: the live log starts at {first_live}, and only entries below \
             {upto} may leave it (the newest snapshot covers {covers} of {end} entries; \
             --keep-events {keep_events})"
        );
    } else {
        let began = std::time::Instant::now();
        let done = archiver.archive(archive, upto, &eventlog::ArchiveConfig::default())?;
        let secs = began.elapsed().as_secs_f64();
        print_archived(&done, archive, secs);
    }
    drop(archiver);
    controller.close()?;
    if let Some(won) = leadership {
        won.resign()?;
    }
    Ok(())
}

/// What `log archive` did: the entries and segments, the rate, what the
/// live log starts at now.
fn print_archived(done: &controller::archive::Archived, archive: &Path, secs: f64) {
    let r = &done.report;
    let entries = r.archived.end.saturating_sub(r.archived.start);
    println!(
        "archived entries {}..{} into {} segment(s) in {} in {secs:.2} s ({:.0} entries/s); \
         deleted {} keys; the live log starts at {}{}",
        r.archived.start,
        r.archived.end,
        r.segments.len(),
        archive.display(),
        if secs > 0.0 {
            entries as f64 / secs
        } else {
            0.0
        },
        r.deleted,
        r.first_live,
        match done.compacted_to {
            Some(revision) => format!("; etcd compacted to revision {revision}"),
            None => String::new(),
        }
    );
}

/// A sound controller log's summary and the deep pass's verdict; exit 1
/// when a snapshot differs from the fold.
fn print_deep(
    out: &mut impl Write,
    name: &Path,
    summary: Summary,
    deep: cli::deep::Deep,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let Summary::Controller(summary) = summary else {
        bail!("--deep verifies controller logs only");
    };
    if json {
        let value = serde_json::json!({
            "sound": deep.sound,
            "summary": summary,
            "snapshots": deep.json,
        });
        let text = serde_json::to_string_pretty(&value)?;
        writeln!(out, "{}", printable_json(&text))?;
    } else {
        let mut text = String::new();
        print_summary(&mut text, name, &summary)?;
        text.push_str(&deep.text);
        for line in text.lines() {
            writeln!(out, "{}", printable(line))?;
        }
    }
    Ok(if deep.sound {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_BAD_LOG)
    })
}

/// A sound log's summary, of either kind.
enum Summary {
    Controller(LogSummary),
    Journal(JournalSummary),
}

fn print_summary(
    out: &mut impl std::fmt::Write,
    dir: &std::path::Path,
    summary: &LogSummary,
) -> anyhow::Result<()> {
    writeln!(out, "log {} is sound", dir.display())?;
    print_chain(
        out,
        summary.entries,
        summary.last_sequence,
        &summary.head_hash,
        "log",
    )?;
    print_rollouts(out, &summary.rollouts)?;
    writeln!(out, "open ops:      {}", summary.open_ops.len())?;
    for op in summary.open_ops.iter().take(LOG_VERIFY_OPS_LISTED_MAX) {
        write!(out, "  {}  {}  {}", op.op, op.node, op.phase)?;
        match &op.unknown {
            Some(reason) => writeln!(out, "  UNKNOWN: {reason}")?,
            None => writeln!(out)?,
        }
    }
    let unlisted = summary
        .open_ops
        .len()
        .saturating_sub(LOG_VERIFY_OPS_LISTED_MAX);
    if unlisted > 0 {
        writeln!(
            out,
            "  ... {unlisted} more open ops (--json lists every one)"
        )?;
    }
    Ok(())
}

/// Rollouts `log verify` lists by name: every one not finished, and at
/// most this many of the newest finished ones. A log of years holds
/// hundreds of finished rollouts (500 at 20 million events on 10,000
/// nodes); the text report counts them, `--json` lists them all.
const LOG_VERIFY_FINISHED_ROLLOUTS_LISTED_MAX: usize = 10;
/// Open ops `log verify` lists by name (a 10,000-node wave can hold
/// thousands); `--json` lists them all.
const LOG_VERIFY_OPS_LISTED_MAX: usize = 50;

/// The rollouts' count per status, then the rollouts still in play and the
/// newest finished ones.
fn print_rollouts(
    out: &mut impl std::fmt::Write,
    rollouts: &[logtools::inspect::RolloutSummary],
) -> anyhow::Result<()> {
    // A status word without its reason: `paused (why)` counts as `paused`.
    let word = |status: &str| status.split(" (").next().unwrap_or(status).to_string();
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for rollout in rollouts {
        *counts.entry(word(&rollout.status)).or_default() += 1;
    }
    let counts: Vec<String> = counts.iter().map(|(w, n)| format!("{w} {n}")).collect();
    match counts.is_empty() {
        true => writeln!(out, "rollouts:      0")?,
        false => writeln!(
            out,
            "rollouts:      {} ({})",
            rollouts.len(),
            counts.join(", ")
        )?,
    }
    let finished_total = rollouts.iter().filter(|r| r.finished).count();
    let finished_skipped = finished_total.saturating_sub(LOG_VERIFY_FINISHED_ROLLOUTS_LISTED_MAX);
    if finished_skipped > 0 {
        writeln!(
            out,
            "  ... {finished_skipped} older finished rollouts (--json lists every one)"
        )?;
    }
    let mut finished_seen = 0;
    for rollout in rollouts {
        if rollout.finished {
            finished_seen += 1;
            if finished_seen <= finished_skipped {
                continue;
            }
        }
        writeln!(
            out,
            "  {}  {}  release {}",
            rollout.id, rollout.status, rollout.release
        )?;
    }
    Ok(())
}

/// The hash chain's lines, shared by a controller log and a journal.
fn print_chain(
    out: &mut impl std::fmt::Write,
    entries: impl std::fmt::Display,
    last_sequence: Option<u64>,
    head_hash: &impl std::fmt::Display,
    kind: &str,
) -> anyhow::Result<()> {
    writeln!(out, "entries:       {entries}")?;
    match last_sequence {
        Some(last) => writeln!(out, "last sequence: {last}")?,
        None => writeln!(out, "last sequence: none (empty {kind})")?,
    }
    writeln!(out, "head hash:     {head_hash}")?;
    Ok(())
}

fn print_journal_summary(
    out: &mut impl std::fmt::Write,
    dir: &std::path::Path,
    summary: &JournalSummary,
) -> anyhow::Result<()> {
    writeln!(out, "agent journal {} is sound", dir.display())?;
    print_chain(
        out,
        summary.entries,
        summary.last_sequence,
        &summary.head_hash,
        "journal",
    )?;
    let serving = summary.serving.as_deref().unwrap_or("nothing");
    writeln!(out, "serving:       {serving}")?;
    writeln!(out, "accepted:      {}", summary.accepted)?;
    writeln!(
        out,
        "op:            {}",
        summary.op.as_deref().unwrap_or("none")
    )?;
    if let Some(record) = &summary.last_record {
        writeln!(out, "last record:   {record}")?;
    }
    Ok(())
}

/// `log verify --etcd E --prefix P`: as for a directory, read-only.
fn log_verify_etcd(
    endpoints: Vec<String>,
    prefix: String,
    tls: Option<eventlog::EtcdTls>,
    checks: Checks,
) -> anyhow::Result<ExitCode> {
    let Checks {
        json,
        deep,
        archive,
    } = checks;
    let mut out = io::stdout().lock();
    let mut config = eventlog::EtcdConfig::new(endpoints.clone(), prefix.clone());
    config.tls = tls;
    let name = format!("etcd://{}{prefix}", endpoints.join(","));
    let storage = match open_etcd_read_only(&config) {
        Ok(storage) => storage,
        Err(err) => {
            let err = InspectError::Uninspectable(eventlog::VerifyError::Storage(err));
            return report_failure(&mut out, &err, json);
        }
    };
    if let Some(archive) = archive {
        let outcome = verify_history_and_deep(&archive, &storage, deep);
        return print_history(&mut out, Path::new(&name), &archive, outcome, json);
    }
    let summary = match (verify_controller_log_in(&storage, &name), deep) {
        (Ok(summary), true) => {
            return match cli::deep::check(&storage) {
                Ok(deep) => {
                    let summary = Summary::Controller(summary);
                    print_deep(&mut out, Path::new(&name), summary, deep, json)
                }
                Err(err) => report_failure(&mut out, &InspectError::Uninspectable(err), json),
            };
        }
        (summary, _) => summary,
    };
    match summary {
        Ok(summary) if json => {
            let value = serde_json::json!({ "sound": true, "summary": summary });
            let text = serde_json::to_string_pretty(&value)?;
            writeln!(out, "{}", printable_json(&text))?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(summary) => {
            let mut text = String::new();
            print_summary(&mut text, Path::new(&name), &summary)?;
            for line in text.lines() {
                writeln!(out, "{}", printable(line))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => report_failure(&mut out, &err, json),
    }
}

/// `log show --etcd E --prefix P`: as for a directory, read-only.
fn log_show_etcd(
    endpoints: Vec<String>,
    prefix: String,
    tls: Option<eventlog::EtcdTls>,
    from: u64,
    mut format: ShowFormat,
    archive: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let mut out = io::stdout().lock();
    let mut config = eventlog::EtcdConfig::new(endpoints.clone(), prefix.clone());
    config.tls = tls;
    let name = format!("etcd://{}{prefix}", endpoints.join(","));
    let storage = match open_etcd_read_only(&config) {
        Ok(storage) => storage,
        Err(err) => {
            let err = InspectError::Uninspectable(eventlog::VerifyError::Storage(err));
            return report_failure(&mut out, &err, false);
        }
    };
    let mut write_error: Option<anyhow::Error> = None;
    if let Some(archive) = archive {
        let result = show_history(
            archive,
            &storage,
            from,
            &mut format,
            &mut out,
            &mut write_error,
        );
        format.finish(&mut out, &mut write_error);
        return show_outcome(&mut out, write_error, result);
    }
    let result = visit_events_in(&storage, &name, from, |sequence, event| {
        if write_error.is_some() {
            return;
        }
        if let Some(line) = format.line(sequence, event, None) {
            if let Err(err) = line.and_then(|line| writeln!(out, "{line}").map_err(Into::into)) {
                write_error = Some(err);
            }
        }
    });
    format.finish(&mut out, &mut write_error);
    show_outcome(&mut out, write_error, result)
}

/// `log copy --from LOC --to LOC`.
fn log_copy(from: &LogLocation, to: &LogLocation) -> ExitCode {
    let candidate = format!("fleetweft log copy (pid {})", std::process::id());
    match copy_log(from, to, &candidate) {
        Ok(report) => {
            println!(
                "copied {} entries; the copy verifies, head hash {}",
                report.entries, report.head_hash
            );
            if report.first_live > 0 {
                println!(
                    "the head of this log was archived: copied its live start ({}), the entries \
                     from there and {} snapshot(s); copy the archive directory as files, and \
                     check the rules with `fleetweft log verify --archive DIR`",
                    report.first_live, report.snapshots
                );
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!(
                "fleetweft: {}",
                printable(&format!("{:#}", anyhow::Error::from(err)))
            );
            ExitCode::from(EXIT_BAD_LOG)
        }
    }
}

fn log_show(target: LogTarget, from: u64, mut format: ShowFormat) -> anyhow::Result<ExitCode> {
    let json = matches!(format, ShowFormat::Json);
    let mut out = io::stdout().lock();
    let (kind, given) = target.kind_and_dir();
    let dir = match locate(&given, kind) {
        Ok(dir) => dir,
        Err(err) => return report_failure(&mut out, &err, false),
    };
    // Write errors inside the visitor are kept and reported after the walk,
    // since the visitor itself cannot fail the verification.
    let mut write_error: Option<anyhow::Error> = None;
    let mut show = |sequence: u64,
                    text: String,
                    field: &str,
                    value: &dyn Fn() -> serde_json::Result<serde_json::Value>| {
        if write_error.is_some() {
            return;
        }
        let line = if json {
            // JSON escapes control characters itself.
            value()
                .and_then(|value| {
                    let mut object = serde_json::json!({ "sequence": sequence, "text": text });
                    object[field] = value;
                    serde_json::to_string(&object)
                })
                .map(|line| printable_json(&line).into_owned())
                .map_err(anyhow::Error::from)
        } else {
            Ok(printable(&format!("{sequence:>6}  {text}")).into_owned())
        };
        if let Err(err) = line.and_then(|line| writeln!(out, "{line}").map_err(Into::into)) {
            write_error = Some(err);
        }
    };
    let result = match kind {
        LogKind::Controller => visit_events(&dir, from, |sequence, event| {
            if !matches!(format, ShowFormat::Diagram(..)) {
                show(sequence, event.to_string(), "event", &|| {
                    serde_json::to_value(event)
                });
            } else {
                // A chart takes the event; nothing is printed.
                let _ = format.line(sequence, event, None);
            }
        }),
        LogKind::AgentJournal => visit_records(&dir, from, |sequence, record| {
            show(sequence, record.to_string(), "record", &|| {
                serde_json::to_value(record)
            });
        }),
    };
    format.finish(&mut out, &mut write_error);
    show_outcome(&mut out, write_error, result)
}

/// How `log show` ends on either backend: a failed write to stdout first;
/// then damage (what was intact before it is printed: say where it
/// stopped); any other failure goes to stderr as text, so stdout stays
/// events only.
fn show_outcome<T>(
    out: &mut impl Write,
    write_error: Option<anyhow::Error>,
    result: Result<T, InspectError>,
) -> anyhow::Result<ExitCode> {
    if let Some(err) = write_error {
        return Err(err).context("writing events");
    }
    match result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(err @ InspectError::Damaged(_)) => {
            eprintln!("fleetweft: stopped: {}", printable(&err.to_string()));
            Ok(exit_code(&err))
        }
        Err(err) => report_failure(out, &err, false),
    }
}

fn pki_init(dir: &Path, nodes: &[String], controller_host: &str) -> anyhow::Result<ExitCode> {
    let pki = pki::init_fleet(dir, nodes, controller_host)
        .with_context(|| format!("creating the fleet PKI in {}", dir.display()))?;
    let mut out = io::stdout().lock();
    // Labelled with the config keys that take each file, so the configs
    // can be written from this output alone.
    writeln!(out, "created fleet PKI in {}", pki.dir.display())?;
    writeln!(
        out,
        "  CA key (secret, keep offline): {}",
        pki.ca_key().display()
    )?;
    writeln!(out, "controller.toml [tls]:")?;
    writeln!(out, "  ca = {:?}", pki.ca_cert().display().to_string())?;
    writeln!(
        out,
        "  cert = {:?}",
        pki.controller_cert().display().to_string()
    )?;
    writeln!(
        out,
        "  key = {:?}",
        pki.controller_key().display().to_string()
    )?;
    // The token itself is never printed: terminals and CI logs keep output.
    writeln!(
        out,
        "  operator_token = {:?}",
        pki.operator_token().display().to_string()
    )?;
    for node in &pki.nodes {
        writeln!(out, "agent config of {node} [tls]:")?;
        writeln!(out, "  ca = {:?}", pki.ca_cert().display().to_string())?;
        writeln!(
            out,
            "  cert = {:?}",
            pki.node_cert(node).display().to_string()
        )?;
        writeln!(
            out,
            "  key = {:?}",
            pki.node_key(node).display().to_string()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn pki_issue(dir: &Path, node: &str, force: bool) -> anyhow::Result<ExitCode> {
    let (cert, key) = pki::issue_node(dir, node, force).with_context(|| {
        format!(
            "issuing a certificate for {node} from the CA in {}",
            dir.display()
        )
    })?;
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "issued a new certificate for {node} (valid {} days)",
        pki::NODE_CERT_LIFETIME_DAYS
    )?;
    writeln!(out, "  certificate:      {}", cert.display())?;
    writeln!(out, "  key (secret):     {}", key.display())?;
    let der = protocol::tls::load_certs(&cert)?;
    writeln!(
        out,
        "  fingerprint:      {}",
        hex::encode(pki::cert_fingerprint(der[0].as_ref()))
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The hex SHA-256 fingerprint of the certificate in `path`, which must
/// name `node`.
fn cert_fingerprint(path: &Path, node: &str) -> anyhow::Result<String> {
    let der = protocol::tls::load_certs(path)?;
    let named = pki::node_id_from_cert(der[0].as_ref())
        .with_context(|| format!("{} is not a node certificate", path.display()))?;
    if named != node {
        bail!(
            "{} is node {named:?}'s certificate, not {node:?}'s",
            path.display()
        );
    }
    Ok(hex::encode(pki::cert_fingerprint(der[0].as_ref())))
}

fn bundle_keygen(dir: &Path) -> anyhow::Result<ExitCode> {
    let secret_path = dir.join(SIGNING_KEY_FILE);
    let public_path = dir.join(PUBLIC_KEY_FILE);
    // Checked up front so a refusal leaves neither file half-replaced.
    for path in [&secret_path, &public_path] {
        if path.symlink_metadata().is_ok() {
            bail!(
                "{} already exists; refusing to overwrite a key",
                path.display()
            );
        }
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (secret, public) = bundle::keygen();
    bundle::save_signing_key(&secret_path, &secret)?;
    bundle::save_verifying_key(&public_path, &public)?;
    let mut out = io::stdout().lock();
    writeln!(out, "signing key (secret): {}", secret_path.display())?;
    writeln!(out, "public key:           {}", public_path.display())?;
    writeln!(
        out,
        "key id:               {}",
        hex_string(&bundle::key_id(&public))
    )?;
    Ok(ExitCode::SUCCESS)
}

fn hex_string(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads the app file, refusing anything over `APP_BYTES_MAX` without
/// reading all of it.
fn read_app(path: &Path) -> anyhow::Result<Vec<u8>> {
    let file = File::open(path).with_context(|| format!("opening app {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(APP_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading app {}", path.display()))?;
    if bytes.len() as u64 > APP_BYTES_MAX {
        bail!(
            "app {} is larger than the {APP_BYTES_MAX}-byte limit",
            path.display()
        );
    }
    Ok(bytes)
}

/// The default run command for an app file: Python scripts run under
/// `python3`, anything else is executed directly.
fn default_run(app_file_name: &str) -> Vec<String> {
    if app_file_name.ends_with(".py") {
        vec!["python3".to_string(), app_file_name.to_string()]
    } else {
        vec![format!("./{app_file_name}")]
    }
}

fn bundle_sign(
    key_path: &Path,
    app_path: &Path,
    name: String,
    version: String,
    probe: ProbeSpec,
    run: Option<String>,
    out_path: &Path,
) -> anyhow::Result<ExitCode> {
    let key = bundle::load_signing_key(key_path)?;
    let app = read_app(app_path)?;
    let app_file_name = app_path
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{}: no usable file name", app_path.display()))?
        .to_string();
    let run = match run {
        Some(cmd) => cmd.split_whitespace().map(str::to_string).collect(),
        None => default_run(&app_file_name),
    };
    let fields = ManifestFields {
        name,
        version,
        app_file_name,
        run,
        probe,
    };
    let bytes = bundle::sign(&key, &app, fields).context("signing the bundle")?;
    write_new_atomically(out_path, &bytes)?;
    println!("{}", bundle::bundle_digest(&bytes).to_hex());
    Ok(ExitCode::SUCCESS)
}

/// What `bundle sign --dir` signs: the common tree and the trees of each
/// architecture (`--arch-dir`).
struct TreeSource {
    dir: Option<PathBuf>,
    arch_dirs: Vec<(model::platform::Arch, PathBuf)>,
    limits: releases::AppLimits,
    migration: Option<releases::AppMigration>,
}

/// `--arch-dir`'s value: `ARCH=DIR`.
fn parse_arch_dir(text: &str) -> Result<(model::platform::Arch, PathBuf), String> {
    let (arch, dir) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected ARCH=DIR, e.g. aarch64=./build-arm64"))?;
    let arch = agent::cli::parse_arch(arch)?;
    if dir.is_empty() {
        return Err(format!("{text:?}: the directory is empty"));
    }
    Ok((arch, PathBuf::from(dir)))
}

/// `bundle sign --dir`: a format-2 release directory at `out` (format 3
/// with `--arch-dir`, format 4 with a limit or a user, format 5 with a
/// migration).
fn bundle_sign_tree(
    key: &Path,
    source: TreeSource,
    name: String,
    version: String,
    probe: ProbeSpec,
    run: Option<String>,
    out: &Path,
) -> anyhow::Result<ExitCode> {
    let dir = source.dir.context("give --app FILE or --dir DIR")?;
    let run = run.context("--dir needs --run CMD (the command that starts the app)")?;
    let fields = releases::ReleaseFields {
        name,
        version,
        run: run.split_whitespace().map(str::to_string).collect(),
        probe,
        limits: source.limits,
        migration: source.migration,
    };
    let digest = cli::release_tree::sign_tree_arches(key, &dir, &source.arch_dirs, fields, out)?;
    println!("{}", digest.to_hex());
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to a new file at `path` via a temporary file and a rename,
/// so a reader never sees a partial bundle. Refuses to replace a file: a
/// bundle is a release identity and is never rewritten in place.
fn write_new_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if path.symlink_metadata().is_ok() {
        bail!("{} already exists; refusing to overwrite", path.display());
    }
    let file_name = path
        .file_name()
        .with_context(|| format!("{}: not a file path", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        // link(2) fails if `path` appeared meanwhile, where rename(2) would
        // silently replace it.
        .and_then(|()| fs::hard_link(&tmp, path));
    // Best effort: the bundle is in place (or the write error is what the
    // operator needs to see); a stray temporary file is harmless.
    let _ = fs::remove_file(&tmp);
    written.with_context(|| format!("writing {}", path.display()))
}

fn bundle_verify(pubkey: &Path, bundle_path: &Path) -> anyhow::Result<ExitCode> {
    let key = bundle::load_verifying_key(pubkey)?;
    let bytes = bundle::read_bundle(bundle_path)?;
    let verified = bundle::verify(&key, &bytes)
        .with_context(|| format!("bundle {} refused", bundle_path.display()))?;
    let mut out = io::stdout().lock();
    writeln!(out, "name:    {}", verified.manifest.name)?;
    writeln!(out, "version: {}", verified.manifest.version)?;
    writeln!(out, "digest:  {}", verified.digest.to_hex())?;
    Ok(ExitCode::SUCCESS)
}

/// `bundle verify` of a format-2 release, text or JSON (as for format 1,
/// with `format`, `files`, `bytes`, `chunks` added).
fn bundle_verify_release(
    pubkey: &Path,
    path: &Path,
    tree: Option<&Path>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let verified = cli::release_tree::verify_release(pubkey, path, tree);
    if !json {
        let (release, checked) = verified?;
        let lines = cli::release_tree::verified_lines(&release.manifest, &release.digest, checked);
        io::stdout().lock().write_all(lines.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let (value, code) = match verified.and_then(|(r, _)| {
        let probe = r.manifest.probe.to_spec()?;
        Ok((r, probe))
    }) {
        Ok((r, probe)) => (
            serde_json::json!({
                "verified": true,
                "format": r.manifest.format,
                "name": r.manifest.name,
                "version": r.manifest.version,
                "digest": r.digest.to_hex(),
                "probe": probe,
                "files": r.manifest.entries.len(),
                "bytes": r.manifest.total_bytes(),
                "chunks": r.manifest.chunk_count(),
            }),
            ExitCode::SUCCESS,
        ),
        Err(e) => (
            serde_json::json!({ "verified": false, "error": format!("{e:#}") }),
            ExitCode::FAILURE,
        ),
    };
    writeln!(
        io::stdout().lock(),
        "{}",
        serde_json::to_string_pretty(&value)?
    )?;
    Ok(code)
}

/// `bundle verify --json`: the same checks as [`bundle_verify`], the
/// answer as one JSON object on stdout, a refusal included (exit 1).
fn bundle_verify_json(pubkey: &Path, bundle_path: &Path) -> anyhow::Result<ExitCode> {
    let verified = bundle::load_verifying_key(pubkey)
        .map_err(anyhow::Error::from)
        .and_then(|key| {
            let bytes = bundle::read_bundle(bundle_path)?;
            bundle::verify(&key, &bytes)
                .with_context(|| format!("bundle {} refused", bundle_path.display()))
        });
    let (value, code) = match verified {
        Ok(v) => (
            serde_json::json!({
                "verified": true,
                "name": v.manifest.name,
                "version": v.manifest.version,
                "digest": v.digest.to_hex(),
                "probe": v.manifest.probe,
            }),
            ExitCode::SUCCESS,
        ),
        Err(e) => (
            serde_json::json!({ "verified": false, "error": format!("{e:#}") }),
            ExitCode::FAILURE,
        ),
    };
    writeln!(
        io::stdout().lock(),
        "{}",
        serde_json::to_string_pretty(&value)?
    )?;
    Ok(code)
}

fn init_tracing(default: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .with_ansi(daemonkit::log_colour())
        .with_writer(io::stderr)
        .try_init();
}

fn tokio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn run_controller(config: &Path, allow_faults: bool) -> anyhow::Result<ExitCode> {
    init_tracing("info");
    let cfg = match controller::daemon::config::ControllerConfig::load(config) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("fleetweft: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let runtime = tokio_runtime()?;
    match runtime.block_on(controller::daemon::run(cfg, allow_faults)) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // The daemon stopped on its own (its log failed: 3; deposed: 4;
        // docs/operations.md, "Exit codes"), the reason already logged.
        // The part that met it is parked for good: leave the runtime
        // without waiting for it.
        Err(err) => match err.downcast_ref::<controller::daemon::fatal::Fatal>() {
            Some(fatal) => {
                let code = ExitCode::from(fatal.exit_code());
                runtime.shutdown_background();
                Ok(code)
            }
            None => Err(err),
        },
    }
}

/// Man pages: `<name>.1` for each binary and `<name>-<sub>[-<sub>].1` for
/// every subcommand, so `man fleetweft-rollout-start` works.
fn manpages(dir: &Path) -> anyhow::Result<ExitCode> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut out = io::stdout().lock();
    for binary in [Binary::Fleetweft, Binary::FleetweftAgent] {
        let command = binary.command();
        let name = command.get_name().to_string();
        for path in write_manpages(dir, &name, command)? {
            writeln!(out, "{}", path.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_manpages(dir: &Path, name: &str, command: clap::Command) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .title(name.to_string())
        .render(&mut page)
        .with_context(|| format!("rendering the man page of {name}"))?;
    let path = dir.join(format!("{name}.1"));
    fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    written.push(path);
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        let sub_name = format!("{name}-{}", sub.get_name());
        written.extend(write_manpages(dir, &sub_name, sub.clone())?);
    }
    Ok(written)
}

fn quickstart(options: demo::quickstart::QuickstartOptions) -> anyhow::Result<ExitCode> {
    let layout = demo::quickstart::write(&options)?;
    let exe = std::env::current_exe().context("locating the fleetweft binary")?;
    let agent = exe.with_file_name("fleetweft-agent");
    // Next to this binary when built together (cargo, scripts/demo.sh);
    // otherwise whatever `fleetweft-agent` is on PATH.
    let agent = if agent.exists() {
        agent
    } else {
        PathBuf::from("fleetweft-agent")
    };
    print!("{}", demo::quickstart::instructions(&layout, &exe, &agent));
    Ok(ExitCode::SUCCESS)
}

fn run_demo(options: demo::DemoOptions) -> anyhow::Result<ExitCode> {
    init_tracing("warn");
    let ok = tokio_runtime()?.block_on(demo::run(options))?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn rollout(command: RolloutCommand) -> ExitCode {
    match command {
        RolloutCommand::Start {
            bundle,
            canary,
            followers,
            select,
            slots,
            approve_after_canary,
            waves,
            approve_between_waves,
            max_failed,
            max_unknown,
            api,
        } => {
            let select = match select
                .as_deref()
                .map(|s| cli::ops::parse_pairs(s.split(',')))
                .transpose()
            {
                Ok(s) => s,
                Err(why) => return usage(&format!("--select: {why}")),
            };
            let bytes = if cli::release_tree::is_release(&bundle) {
                cli::ops::ReleaseSource::Tree(bundle)
            } else {
                match protocol::bundle::read_bundle(&bundle) {
                    Ok(b) => cli::ops::ReleaseSource::Bundle(b),
                    Err(e) => {
                        eprintln!("fleetweft: reading {}: {e}", bundle.display());
                        return ExitCode::from(cli::ops::EXIT_USAGE);
                    }
                }
            };
            let request = cli::ops::StartRequest {
                bundle: bytes,
                canary,
                followers,
                select,
                slots,
                approve_after_canary,
                waves,
                approve_between_waves,
                max_failed,
                max_unknown,
            };
            api_command(&api, |c, json| async move {
                cli::ops::rollout_start(&c, request, json).await
            })
        }
        RolloutCommand::Pause { id, api } => api_command(&api, |c, json| async move {
            cli::ops::rollout_command(&c, "pause", &id, json).await
        }),
        RolloutCommand::Resume { id, api } => api_command(&api, |c, json| async move {
            cli::ops::rollout_command(&c, "resume", &id, json).await
        }),
        RolloutCommand::Approve { id, api } => api_command(&api, |c, json| async move {
            cli::ops::rollout_command(&c, "approve", &id, json).await
        }),
    }
}

/// A usage error: printed, with the usage exit code.
fn usage(message: &str) -> ExitCode {
    eprintln!("fleetweft: {message}");
    ExitCode::from(cli::ops::EXIT_USAGE)
}

/// Run one API command: token, client, runtime, print, exit code.
/// A command that needs no controller: its output or failure, printed,
/// as the exit code.
fn local_command(outcome: Result<cli::ops::Output, cli::ops::Failure>) -> ExitCode {
    match outcome {
        Ok(out) => {
            print!("{}", out.text);
            ExitCode::from(out.code)
        }
        Err(failure) => {
            eprintln!("fleetweft: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// `fleetweft pki ...`.
fn pki_main(command: PkiCommand) -> anyhow::Result<ExitCode> {
    match command {
        PkiCommand::Init {
            dir,
            nodes,
            controller_host,
        } => pki_init(&dir, &nodes, &controller_host),
        PkiCommand::Issue { node, dir, force } => pki_issue(&dir, &node, force),
    }
}

/// `fleetweft config ...` through the API.
fn config_main(command: ConfigCommand) -> ExitCode {
    match command {
        ConfigCommand::Set {
            app,
            values,
            files,
            secrets,
            api,
        } => {
            let request = match cli::ops::config_request(&values, &files, &secrets) {
                Ok(request) => request,
                Err(failure) => return local_command(Err(failure)),
            };
            api_command(&api, |c, json| async move {
                cli::ops::config_set(&c, &app, &request, json).await
            })
        }
        ConfigCommand::Show { app, api } => api_command(&api, |c, json| async move {
            cli::ops::config_show(&c, &app, json).await
        }),
    }
}

fn operator_main(command: OperatorCommand) -> ExitCode {
    use cli::ops::{operator_add, operator_list, operator_revoke, operator_rotate};
    match command {
        OperatorCommand::Add {
            name,
            role,
            write,
            api,
        } => api_command(&api, |c, json| async move {
            operator_add(&c, &name, &role, write.as_deref(), json).await
        }),
        OperatorCommand::Rotate { name, write, api } => api_command(&api, |c, json| async move {
            operator_rotate(&c, &name, write.as_deref(), json).await
        }),
        OperatorCommand::Revoke { name, api } => api_command(&api, |c, json| async move {
            operator_revoke(&c, &name, json).await
        }),
        OperatorCommand::List { api } => {
            api_command(&api, |c, json| async move { operator_list(&c, json).await })
        }
    }
}

fn api_command<F, Fut>(api: &ApiArgs, run: F) -> ExitCode
where
    F: FnOnce(api::client::ApiClient, bool) -> Fut,
    Fut: std::future::Future<Output = Result<cli::ops::Output, cli::ops::Failure>>,
{
    use cli::ops::{load_token, Failure, EXIT_USAGE};
    let outcome = load_token(api.token_file.as_deref(), api.pki.as_deref()).and_then(|token| {
        let client = api::client::ApiClient::with_controllers(api.controller.clone(), token);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure {
                message: format!("starting the async runtime: {e}"),
                code: EXIT_USAGE,
            })?;
        rt.block_on(run(client, api.json))
    });
    local_command(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use logtools::inspect::RolloutSummary;

    fn rollout(n: usize, status: &str, finished: bool) -> RolloutSummary {
        RolloutSummary {
            id: format!("r{n}"),
            status: status.to_string(),
            release: "v".to_string(),
            finished,
        }
    }

    /// A long history is counted, not listed: every rollout still in play
    /// by name, the newest finished ones, and a line for the rest.
    #[test]
    fn log_verify_lists_rollouts_in_play_and_only_the_newest_finished() {
        let mut rollouts: Vec<_> = (0..500).map(|n| rollout(n, "completed", true)).collect();
        rollouts[3] = rollout(3, "superseded", false);
        rollouts[499] = rollout(499, "active (operator)", false);
        let mut out = String::new();
        print_rollouts(&mut out, &rollouts).expect("print");
        assert!(
            out.starts_with("rollouts:      500 (active 1, completed 498, superseded 1)\n"),
            "{out}"
        );
        let skipped = 498 - LOG_VERIFY_FINISHED_ROLLOUTS_LISTED_MAX;
        assert!(
            out.contains(&format!("... {skipped} older finished rollouts")),
            "{out}"
        );
        assert!(out.contains("  r3  superseded"), "{out}");
        assert!(out.contains("  r499  active (operator)"), "{out}");
        assert!(out.contains("  r498  completed"), "{out}");
        assert!(!out.contains("  r100  "), "{out}");
        let listed = out.lines().filter(|l| l.starts_with("  r")).count();
        assert_eq!(listed, LOG_VERIFY_FINISHED_ROLLOUTS_LISTED_MAX + 2, "{out}");
    }
}
