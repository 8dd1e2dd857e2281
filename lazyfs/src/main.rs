//! `fleetweft-lazyfs`: mounts a lazy filesystem in the foreground until
//! SIGTERM/SIGINT (or an external `umount`), then unmounts. Cuts: write
//! `cut` to `MOUNT/.lazyfs-ctl`; read that file for the counters.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use lazyfs::{LazyConfig, LazyMount, TearMode, DEFAULT_BLOCK_BYTES};
use std::path::PathBuf;

/// How often the signal wait wakes up to check the mount is still there (ms).
const POLL_MS: i64 = 500;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Tear {
    None,
    Zero,
    Garbage,
}

/// A lazy FUSE filesystem for power-loss tests.
#[derive(Debug, Parser)]
#[command(name = "fleetweft-lazyfs")]
struct Args {
    /// Directory holding the durable state.
    #[arg(long)]
    backing: PathBuf,
    /// Where to mount.
    #[arg(long)]
    mount: PathBuf,
    /// Tear the last pending write of each file at a cut.
    #[arg(long, value_enum, default_value = "none")]
    tear: Tear,
    /// Tear granularity in bytes.
    #[arg(long, default_value_t = DEFAULT_BLOCK_BYTES)]
    block_bytes: u64,
    /// Cut at the Nth fsync/fsyncdir instead of syncing.
    #[arg(long)]
    cut_at_sync: Option<u64>,
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let tear = match args.tear {
        Tear::None => TearMode::None,
        Tear::Zero => TearMode::Zero,
        Tear::Garbage => TearMode::Garbage,
    };
    let config = LazyConfig {
        backing: args.backing,
        tear,
        block_bytes: args.block_bytes,
        cut_at_sync: args.cut_at_sync,
        power: None,
    };
    // Block the signals before the FUSE thread starts so it inherits the
    // mask and only this thread receives them, through sigtimedwait.
    let set = block_signals()?;
    let mount = LazyMount::mount(&args.mount, config).context("mounting")?;
    eprintln!(
        "fleetweft-lazyfs: mounted at {}",
        mount.mountpoint().display()
    );
    while mount.is_alive() {
        if let Some(sig) = wait_signal(&set) {
            eprintln!("fleetweft-lazyfs: signal {sig}, unmounting");
            break;
        }
    }
    let report = mount.report();
    drop(mount);
    eprint!("{}", report.to_text());
    Ok(())
}

fn block_signals() -> Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data; the calls only fill it and set this
    // thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            bail!("blocking SIGINT/SIGTERM failed");
        }
        Ok(set)
    }
}

/// Waits up to `POLL_MS` for SIGINT/SIGTERM.
fn wait_signal(set: &libc::sigset_t) -> Option<i32> {
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: POLL_MS * 1_000_000,
    };
    // SAFETY: `set` and `timeout` are valid for the call; no siginfo wanted.
    let sig = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &timeout) };
    (sig > 0).then_some(sig)
}
