//! `fleetweft-transfer-bench`: a tree release moved end to end on real
//! processes (issue #23, "Benchmark, not a timed test").
//!
//! Generates a deterministic tree of `--release-bytes` (the realistic tree
//! of `releases::sample`: large files, 10 MiB files, small files), signs it
//! (`bundle sign --dir`'s code), uploads it to a real controller process
//! (`bundle upload`'s code) and rolls it out to `--agents` real agent
//! processes on loopback (canary, then every follower at once), with the
//! rollout's proof read back at the end. Then:
//!
//! - resume: one more agent is rolled the same release, SIGKILLed once its
//!   chunk store holds half the release, and started again; the bytes the
//!   controller served it beyond the release's are `resume_refetched_bytes`
//!   (an upper bound: a chunk cut short counts whole);
//! - delta: one 10 MiB file of the tree is rewritten and the new release
//!   rolled to the first agent: `delta_fetched_bytes` is what it was served,
//!   `delta_changed_bytes` the file's size;
//! - staging against the physical limit: the tree assembled from its chunks
//!   (`releases::tree::assemble`, what an agent's staging does once the
//!   chunks are in) against `cp -r` plus `sha256sum` of the same tree on the
//!   same disk: `stage_ratio_to_copy`.
//!
//! - mirror: the release is laid out with `fleetweft bundle export` and
//!   served by `python3 -m http.server` (any plain HTTP server); one more
//!   agent, whose node the controller's config gives that mirror
//!   (`[[artifacts.site]]`, label `site=bench-mirror`), is rolled the
//!   release: `mirror_controller_share` is what the controller sent it
//!   over the bytes it moved (issue #23: at most 2%).
//!
//! Memory is each process's `VmHWM` (peak resident, reset through
//! `/proc/PID/clear_refs` before the phase) beside its `VmRSS` just before
//! the phase ("idle"): per controller and per agent process. Egress is the
//! controller's `/metrics` counters (artifact bytes before QUIC framing).
//!
//! Progress goes to stderr; the figures to stdout (`--json`: one object).
//! Disk: about `release_bytes` × (4 + 2 × agents) at the peak (tree,
//! signed chunks, the controller's store, each agent's chunks and tree).
//!
//! `cargo build --release --bin fleetweft --bin fleetweft-agent --bin fleetweft-transfer-bench`
//! `target/release/fleetweft-transfer-bench --json --release-bytes 4294967296`
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

// Shared with fleetweft-switch-bench; each uses part of it.
#[allow(dead_code)]
#[path = "transfer_bench/fleet.rs"]
mod fleet;
#[path = "transfer_bench/procfs.rs"]
mod procfs;

use anyhow::{bail, Context};
use clap::Parser;
use fleet::{Fleet, Served};
use model::Digest;
use protocol::bundle::ProbeSpec;
use releases::limits::MIB;
use releases::sample::{tree_sizes_scaled, Noise, CHANGED_FILE_BYTES, CHANGED_FILE_INDEX};
use releases::ReleaseFields;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "fleetweft-transfer-bench")]
struct Args {
    /// Bytes of the release's content (4 GiB: 4294967296).
    #[arg(long, default_value_t = 256 * MIB)]
    release_bytes: u64,
    /// Agent processes the release is rolled out to (plus one for the
    /// resume phase).
    #[arg(long, default_value_t = 2)]
    agents: usize,
    /// Where everything goes (must not exist); default a new directory in
    /// the temp dir. Removed at the end unless `--keep`.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the directory (logs, data) at the end.
    #[arg(long)]
    keep: bool,
    /// Print the figures as one JSON object.
    #[arg(long)]
    json: bool,
}

/// How long one rollout or wait may take, per GiB of release (at least
/// one GiB's worth): two shared cores stage about 100 MiB/s.
const WAIT_PER_GIB: Duration = Duration::from_secs(300);
/// Seed of the changed file's new bytes (no file of the tree uses it).
const REWRITE_SEED: u64 = u64::MAX - 2;
/// Copy buffer while a file is generated, in bytes.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.agents == 0 {
        bail!("--agents must be at least 1");
    }
    if args.release_bytes > releases::limits::RELEASE_BYTES_MAX {
        bail!(
            "--release-bytes is over RELEASE_BYTES_MAX ({})",
            releases::limits::RELEASE_BYTES_MAX
        );
    }
    let dir = match &args.dir {
        Some(dir) if dir.exists() => bail!(
            "{} exists: the bench needs a fresh directory",
            dir.display()
        ),
        Some(dir) => dir.clone(),
        None => {
            std::env::temp_dir().join(format!("fleetweft-transfer-bench-{}", std::process::id()))
        }
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let measured = runtime.block_on(run(&args, &dir));
    drop(runtime);
    if args.keep {
        eprintln!("kept {}", dir.display());
    } else {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let figures = measured?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else {
        print_lines(&figures);
    }
    Ok(())
}

/// Prints the figures one per line, `key: value`.
fn print_lines(figures: &serde_json::Value) {
    if let Some(map) = figures.as_object() {
        for (key, value) in map {
            println!("{key}: {value}");
        }
    }
}

/// The whole bench on a fresh fleet in `dir`.
async fn run(args: &Args, dir: &Path) -> anyhow::Result<serde_json::Value> {
    let n = args.agents;
    let wait =
        WAIT_PER_GIB.mul_f64((args.release_bytes as f64 / releases::limits::GIB as f64).max(1.0));
    let mut nodes: Vec<String> = (0..n).map(|i| format!("node-{i}")).collect();
    nodes.push("node-resume".into());
    nodes.push("node-mirror".into());
    let (resume, mirrored) = (n, n + 1);
    let started = Instant::now();
    let mirror_port = demo::ports::free_port().context("picking the mirror's port")?;
    let mirror_url = format!("http://127.0.0.1:{mirror_port}/fleet");
    let extra = format!(
        "\n[[artifacts.site]]\nlabels = {{ {MIRROR_LABEL} = \"{MIRROR_SITE}\" }}\nmirrors = [\"{mirror_url}\"]\n"
    );
    let mut fleet = Fleet::start(dir, nodes, &extra).await?;
    for i in 0..n {
        fleet.start_agent(i)?;
    }
    let all: Vec<usize> = (0..n).collect();
    fleet.wait_connected(&all, Duration::from_secs(60)).await?;
    eprintln!(
        "fleet up: a controller and {n} agents ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    let tree = dir.join("tree");
    let sizes = tree_sizes_scaled(args.release_bytes);
    write_tree(&tree, &sizes, None)?;
    let mut out = serde_json::Map::new();
    let signed = dir.join("signed-v1");
    let (sign_s, sign_peak) = measure_self(|| sign(&fleet, &tree, &signed, "v1"))?;
    eprintln!("signed v1 in {sign_s:.1} s");
    let (stage_s, copy_s) = stage_against_copy(dir, &tree, &signed)?;
    eprintln!("staging {stage_s:.1} s, cp -r + sha256sum {copy_s:.1} s");

    let moved = transfer(&mut fleet, &signed, &all, wait).await?;
    let release = moved.release;
    let unique_bytes = moved.unique_bytes;
    let mirror_root = dir.join("mirror-root");
    export(&signed, &mirror_root.join("fleet"))?;
    remove(&signed)?;
    remove(&tree)?;
    let resumed = kill_at_half(&mut fleet, resume, release, unique_bytes, wait).await?;
    fleet.kill_agent(resume).await?;
    remove(&fleet.data_dir(resume))?;
    let mirror = from_mirror(
        &mut fleet,
        mirrored,
        release,
        &mirror_root,
        mirror_port,
        wait,
    )
    .await?;
    fleet.kill_agent(mirrored).await?;
    remove(&fleet.data_dir(mirrored))?;
    remove(&mirror_root)?;
    let delta = delta(&mut fleet, dir, &sizes, wait).await?;

    out.insert("release_bytes".into(), args.release_bytes.into());
    insert_moved(&mut out, sizes.len(), n, moved, (sign_s, sign_peak));
    out.insert("stage_s".into(), round(stage_s).into());
    out.insert("copy_and_hash_s".into(), round(copy_s).into());
    out.insert("stage_ratio_to_copy".into(), round(stage_s / copy_s).into());
    for (key, value) in resumed.into_iter().chain(mirror).chain(delta) {
        out.insert(key, value);
    }
    out.insert(
        "bench_s".into(),
        round(started.elapsed().as_secs_f64()).into(),
    );
    Ok(serde_json::Value::Object(out))
}

/// [`run`]'s figures of the transfer itself, after `release_bytes`.
fn insert_moved(
    out: &mut serde_json::Map<String, serde_json::Value>,
    files: usize,
    n: usize,
    moved: Moved,
    (sign_s, sign_peak): (f64, f64),
) {
    out.insert("release_files".into(), files.into());
    out.insert("release_chunks".into(), moved.chunks.into());
    out.insert("agents".into(), n.into());
    out.insert(
        "agent_rss_is".into(),
        "per agent process, VmHWM from /proc".into(),
    );
    out.insert("wall_s".into(), round(moved.wall_s).into());
    out.insert("upload_s".into(), round(moved.upload_s).into());
    out.insert("sign_s".into(), round(sign_s).into());
    out.insert("sign_peak_rss_mib".into(), round(sign_peak).into());
    out.insert(
        "upload_peak_rss_mib".into(),
        round(moved.upload_peak_mib).into(),
    );
    out.insert("proof_s".into(), round(moved.proof_s).into());
    out.insert(
        "controller_egress_bytes".into(),
        moved.served.bytes().into(),
    );
    for (key, value) in moved.memory {
        out.insert(key, value);
    }
}

/// The signed release's manifest bytes and digest, which must be what the
/// controller accepted (`accepted`, its reply's digest).
fn accepted(accepted: &str, signed: &Path) -> anyhow::Result<(Vec<u8>, Digest)> {
    let bytes =
        releases::manifest::read_release_file(&signed.join(releases::EXPORT_MANIFEST_FILE))?;
    let release = releases::release_digest(&bytes);
    if accepted != release.to_hex() {
        bail!(
            "the controller accepted {}, not {}",
            accepted,
            release.to_hex()
        );
    }
    Ok((bytes, release))
}

/// The controller's and the agents' processes, their resident memory
/// now, with each one's peak reset.
fn idle_rss(fleet: &Fleet, agents: &[usize]) -> anyhow::Result<(u32, Vec<u32>, f64, Vec<f64>)> {
    let ctrl = fleet.controller_pid()?;
    let pids: Vec<u32> = agents
        .iter()
        .map(|i| fleet.agent_pid(*i))
        .collect::<Result<_, _>>()?;
    let ctrl_idle = procfs::rss_mib(ctrl)?;
    let agent_idle: Vec<f64> = pids
        .iter()
        .map(|p| procfs::rss_mib(*p))
        .collect::<Result<_, _>>()?;
    for pid in pids.iter().chain([&ctrl]) {
        procfs::reset_peak(*pid)?;
    }
    Ok((ctrl, pids, ctrl_idle, agent_idle))
}

/// The memory figures of a transfer: the controller's idle, peak and
/// upload peak, each agent's idle and peak.
fn memory_figures(
    (ctrl_idle, ctrl_peak, ctrl_upload_peak): (f64, f64, f64),
    agent_idle: &[f64],
    agent_peak: &[f64],
) -> Vec<(String, serde_json::Value)> {
    let over: Vec<f64> = agent_peak
        .iter()
        .zip(agent_idle)
        .map(|(p, i)| round(p - i))
        .collect();
    vec![
        ("controller_idle_rss_mib".into(), round(ctrl_idle).into()),
        ("controller_peak_rss_mib".into(), round(ctrl_peak).into()),
        (
            "controller_upload_peak_rss_mib".into(),
            round(ctrl_upload_peak).into(),
        ),
        (
            "controller_peak_over_idle_mib".into(),
            round(ctrl_peak - ctrl_idle).into(),
        ),
        (
            "agent_idle_rss_mib".into(),
            agent_idle.iter().map(|x| round(*x)).collect(),
        ),
        (
            "agent_peak_rss_mib".into(),
            agent_peak.iter().map(|x| round(*x)).collect(),
        ),
        ("agent_peak_over_idle_mib".into(), over.into()),
    ]
}

/// Three decimals.
fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn remove(path: &Path) -> anyhow::Result<()> {
    std::fs::remove_dir_all(path).with_context(|| format!("removing {}", path.display()))
}

/// Writes the sample tree `sizes` under `root` (`app.py` and
/// `data/fNNNNN.bin`); with `rewrite`, the file [`CHANGED_FILE_INDEX`] gets
/// new bytes from that seed.
fn write_tree(root: &Path, sizes: &[u64], rewrite: Option<u64>) -> anyhow::Result<()> {
    let data = root.join("data");
    std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    std::fs::write(root.join("app.py"), demo::HELLO_APP).context("writing app.py")?;
    let total: u64 = sizes.iter().sum();
    let (mut written, mut shown) = (0u64, Instant::now());
    for (i, size) in sizes.iter().enumerate() {
        let seed = match rewrite {
            Some(seed) if i == CHANGED_FILE_INDEX => seed,
            _ => i as u64,
        };
        let path = data.join(format!("f{i:05}.bin"));
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let mut writer = std::io::BufWriter::with_capacity(WRITE_BUFFER_BYTES, file);
        std::io::copy(&mut Noise::new(seed, *size), &mut writer)
            .and_then(|_| std::io::Write::flush(&mut writer))
            .with_context(|| format!("writing {}", path.display()))?;
        written += size;
        if shown.elapsed() > Duration::from_secs(5) {
            eprintln!("  tree: {} of {} MiB", written / MIB, total / MIB);
            shown = Instant::now();
        }
    }
    eprintln!(
        "tree: {} files, {} MiB in {}",
        sizes.len() + 1,
        total / MIB,
        root.display()
    );
    Ok(())
}

/// The release's fields: the hello app (its probe answers `hello from
/// VERSION`) with the data beside it.
fn fields(version: &str) -> ReleaseFields {
    ReleaseFields {
        name: "transfer-bench".into(),
        version: version.into(),
        run: vec!["python3".into(), "app.py".into()],
        probe: ProbeSpec {
            path: "/hello".into(),
            expect_status: 200,
            expect_body: format!("hello from {version}"),
            expect_json: None,
        },
        limits: Default::default(),
        migration: None,
    }
}

/// Signs `tree` into the release directory `out`, as `bundle sign --dir`.
fn sign(fleet: &Fleet, tree: &Path, out: &Path, version: &str) -> anyhow::Result<Digest> {
    cli::release_tree::sign_tree(&fleet.signing_key, tree, fields(version), out)
}

/// Runs `f` in this process, timing it and reading this process's peak
/// resident memory over it (MiB).
fn measure_self<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(f64, f64)> {
    let me = std::process::id();
    procfs::reset_peak(me)?;
    let took = Instant::now();
    f()?;
    Ok((took.elapsed().as_secs_f64(), procfs::peak_mib(me)?))
}

/// Times assembling `tree`'s release from the signed chunks in `signed`
/// (verified as read, written, fsynced, whole-file digests checked) and,
/// on the same disk, `cp -r` of the tree plus `sha256sum` of every file.
fn stage_against_copy(dir: &Path, tree: &Path, signed: &Path) -> anyhow::Result<(f64, f64)> {
    let bytes =
        releases::manifest::read_release_file(&signed.join(releases::EXPORT_MANIFEST_FILE))?;
    let release = releases::read_unverified(&bytes)?;
    let store = releases::ChunkStore::open_read_only(&signed.join(releases::EXPORT_CHUNKS_DIR))?;
    let staged = dir.join("stage-check");
    let took = Instant::now();
    releases::tree::assemble(&release.manifest, &store, &staged).context("assembling")?;
    let stage_s = took.elapsed().as_secs_f64();
    remove(&staged)?;
    let copy = dir.join("copy-check");
    let took = Instant::now();
    let script =
        "cp -r \"$1\" \"$2\" && find \"$2\" -type f -print0 | xargs -0 sha256sum > /dev/null";
    let status = std::process::Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(tree)
        .arg(&copy)
        .status()
        .context("running cp and sha256sum")?;
    let copy_s = took.elapsed().as_secs_f64();
    if !status.success() {
        bail!("cp -r + sha256sum failed: {status}");
    }
    remove(&copy)?;
    Ok((stage_s, copy_s))
}

/// What the main transfer measured.
struct Moved {
    release: Digest,
    chunks: usize,
    unique_bytes: u64,
    wall_s: f64,
    upload_s: f64,
    upload_peak_mib: f64,
    proof_s: f64,
    served: Served,
    memory: Vec<(String, serde_json::Value)>,
}

/// Uploads `signed` and rolls it out to `agents`, measuring time, egress
/// and every process's memory.
async fn transfer(
    fleet: &mut Fleet,
    signed: &Path,
    agents: &[usize],
    wait: Duration,
) -> anyhow::Result<Moved> {
    let (ctrl, pids, ctrl_idle, agent_idle) = idle_rss(fleet, agents)?;
    let me = std::process::id();
    procfs::reset_peak(me)?;
    let took = Instant::now();
    let mut last = Instant::now();
    let mut progress = |line: String| {
        if last.elapsed() > Duration::from_secs(5) {
            eprintln!("  upload: {line}");
            last = Instant::now();
        }
    };
    let (reply, stats) = cli::release_upload::upload_tree(&fleet.api, signed, &mut progress)
        .await
        .map_err(|f| anyhow::anyhow!("upload: {}", f.message))?;
    let upload_s = took.elapsed().as_secs_f64();
    let upload_peak_mib = procfs::peak_mib(me)?;
    let (bytes, release) = accepted(&reply.digest, signed)?;
    let manifest = releases::read_unverified(&bytes)?.manifest;
    let unique = manifest.unique_chunks();
    let unique_bytes: u64 = unique.iter().map(|c| u64::from(c.len)).sum();
    eprintln!(
        "uploaded {} chunks ({} MiB) in {upload_s:.1} s",
        stats.sent,
        stats.bytes_sent / MIB
    );
    let ctrl_upload_peak = procfs::peak_mib(ctrl)?;
    procfs::reset_peak(ctrl)?;

    let before = fleet.served().await?;
    let took = Instant::now();
    let id = fleet
        .start_rollout(release, agents[0], &agents[1..])
        .await?;
    fleet.wait_completed(&id, wait).await?;
    let wall_s = took.elapsed().as_secs_f64();
    let served = fleet.served().await?.since(before);
    eprintln!("rolled out to {} agents in {wall_s:.1} s", agents.len());
    let took = Instant::now();
    let verdict = fleet.proof_verdict(&id).await?;
    let proof_s = took.elapsed().as_secs_f64();
    if verdict != "verified" {
        bail!("rollout {id}'s proof says {verdict}, not verified");
    }
    let ctrl_peak = procfs::peak_mib(ctrl)?.max(ctrl_upload_peak);
    let agent_peak: Vec<f64> = pids
        .iter()
        .map(|p| procfs::peak_mib(*p))
        .collect::<Result<_, _>>()?;
    let memory = memory_figures(
        (ctrl_idle, ctrl_peak, ctrl_upload_peak),
        &agent_idle,
        &agent_peak,
    );
    Ok(Moved {
        release,
        chunks: unique.len(),
        unique_bytes,
        wall_s,
        upload_s,
        upload_peak_mib,
        proof_s,
        served,
        memory,
    })
}

/// Rolls `release` to the agent `i` (not started yet), SIGKILLs it once
/// its chunk store holds half the release, starts it again and waits for
/// the rollout to complete. Bytes the controller served it beyond the
/// release's own are the refetched ones.
async fn kill_at_half(
    fleet: &mut Fleet,
    i: usize,
    release: Digest,
    unique_bytes: u64,
    wait: Duration,
) -> anyhow::Result<Vec<(String, serde_json::Value)>> {
    fleet.start_agent(i)?;
    fleet.wait_connected(&[i], Duration::from_secs(60)).await?;
    let before = fleet.served().await?;
    let id = fleet.start_rollout(release, i, &[]).await?;
    let chunks = fleet.data_dir(i).join(agent::staging::tree::CHUNKS_DIR);
    let deadline = Instant::now() + wait;
    let mut held = procfs::dir_bytes(&chunks);
    while held < unique_bytes / 2 {
        if Instant::now() > deadline {
            bail!("the resume agent never held half the release ({held} bytes)");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        held = procfs::dir_bytes(&chunks);
    }
    fleet.kill_agent(i).await?;
    let held = procfs::dir_bytes(&chunks);
    let partial_dir = fleet
        .data_dir(i)
        .join(agent::staging::tree::PARTIAL_CHUNKS_DIR);
    let partial = procfs::dir_bytes(&partial_dir);
    let at_kill = fleet.served().await?.since(before);
    eprintln!(
        "resume: SIGKILLed with {} of {} MiB held ({} MiB served so far); restarting",
        held / MIB,
        unique_bytes / MIB,
        at_kill.chunk_bytes / MIB
    );
    fleet.start_agent(i)?;
    fleet.wait_completed(&id, wait).await?;
    let served = fleet.served().await?.since(before);
    let refetched = served.chunk_bytes.saturating_sub(unique_bytes);
    eprintln!("resume: completed; {} bytes served twice", refetched);
    Ok(vec![
        ("resume_held_at_kill_bytes".into(), held.into()),
        ("resume_served_bytes".into(), served.chunk_bytes.into()),
        ("resume_refetched_bytes".into(), refetched.into()),
        ("resume_partial_at_kill_bytes".into(), partial.into()),
        (
            "chunk_bytes_max".into(),
            protocol::quic::CHUNK_BYTES_MAX.into(),
        ),
    ])
}

/// The node label that gives a node the bench's mirror.
const MIRROR_LABEL: &str = "site";
/// Its value.
const MIRROR_SITE: &str = "bench-mirror";

/// `fleetweft bundle export SIGNED --out OUT`: the release laid out for a
/// mirror (the operator's command, as a child process).
fn export(signed: &Path, out: &Path) -> anyhow::Result<()> {
    let (fleetweft, _) = fleet::binaries()?;
    let status = std::process::Command::new(fleetweft)
        .args(["bundle", "export"])
        .arg(signed)
        .arg("--out")
        .arg(out)
        .stdout(std::process::Stdio::null())
        .status()
        .context("running fleetweft bundle export")?;
    if !status.success() {
        bail!("fleetweft bundle export failed: {status}");
    }
    Ok(())
}

/// Serves `root` with `python3 -m http.server` on loopback `port`, labels
/// the agent `i` for the bench's mirror, rolls `release` to it and
/// measures what the controller sent it against what it moved.
async fn from_mirror(
    fleet: &mut Fleet,
    i: usize,
    release: Digest,
    root: &Path,
    port: u16,
    wait: Duration,
) -> anyhow::Result<Vec<(String, serde_json::Value)>> {
    let server = tokio::process::Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1"])
        .arg(port.to_string())
        .arg("--directory")
        .arg(root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting python3 -m http.server (the mirror)")?;
    wait_listening(port).await?;
    fleet.start_agent(i)?;
    fleet.wait_connected(&[i], Duration::from_secs(60)).await?;
    fleet.label(i, MIRROR_LABEL, MIRROR_SITE).await?;
    let before = fleet.served().await?;
    let took = Instant::now();
    let id = fleet.start_rollout(release, i, &[]).await?;
    fleet.wait_completed(&id, wait).await?;
    let wall_s = took.elapsed().as_secs_f64();
    drop(server);
    let served = fleet.served().await?.since(before);
    let data = fleet.data_dir(i);
    let moved = procfs::dir_bytes(&data.join(agent::staging::tree::CHUNKS_DIR));
    let share = served.bytes() as f64 / moved.max(1) as f64;
    eprintln!(
        "mirror: {} MiB moved in {wall_s:.1} s, the controller sent {} bytes ({:.4}%)",
        moved / MIB,
        served.bytes(),
        share * 100.0
    );
    Ok(vec![
        ("mirror_moved_bytes".into(), moved.into()),
        ("mirror_controller_bytes".into(), served.bytes().into()),
        ("mirror_controller_chunks".into(), served.chunks.into()),
        (
            "mirror_controller_share".into(),
            ((share * 1e6).round() / 1e6).into(),
        ),
        ("mirror_wall_s".into(), round(wall_s).into()),
    ])
}

/// Waits until something accepts connections on loopback `port` (the
/// mirror's server has started), at most 10 s.
async fn wait_listening(port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            bail!("the mirror did not listen on port {port} within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Rewrites one 10 MiB file of the tree, signs and uploads the new release
/// and rolls it to the first agent: what it fetches against what changed.
async fn delta(
    fleet: &mut Fleet,
    dir: &Path,
    sizes: &[u64],
    wait: Duration,
) -> anyhow::Result<Vec<(String, serde_json::Value)>> {
    let tree = dir.join("tree-v2");
    write_tree(&tree, sizes, Some(REWRITE_SEED))?;
    let signed = dir.join("signed-v2");
    let v2 = sign(fleet, &tree, &signed, "v2")?;
    let mut quiet = |_: String| {};
    let (reply, _) = cli::release_upload::upload_tree(&fleet.api, &signed, &mut quiet)
        .await
        .map_err(|f| anyhow::anyhow!("upload v2: {}", f.message))?;
    if reply.digest != v2.to_hex() {
        bail!(
            "the controller accepted {}, not v2 {}",
            reply.digest,
            v2.to_hex()
        );
    }
    let release_bytes: u64 = sizes.iter().sum::<u64>() + demo::HELLO_APP.len() as u64;
    remove(&signed)?;
    remove(&tree)?;
    let before = fleet.served().await?;
    let id = fleet.start_rollout(v2, 0, &[]).await?;
    fleet.wait_completed(&id, wait).await?;
    let fetched = fleet.served().await?.since(before).chunk_bytes;
    eprintln!("delta: {fetched} bytes fetched for a {CHANGED_FILE_BYTES}-byte file changed");
    Ok(vec![
        ("delta_fetched_bytes".into(), fetched.into()),
        ("delta_changed_bytes".into(), CHANGED_FILE_BYTES.into()),
        (
            "dedup_ratio".into(),
            round(1.0 - fetched as f64 / release_bytes as f64).into(),
        ),
    ])
}
