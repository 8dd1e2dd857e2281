//! The command line of `fleetweft-fleetsim`, and the parsing of its
//! percentages and latency distributions (bad input is named).

use std::path::PathBuf;

/// The most simulated agents one run may start: the controller's node limit
/// (`model::NODES_MAX`).
pub const AGENTS_MAX: u32 = 100_000;

/// Options of one simulated fleet run.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "fleetweft-fleetsim",
    about = "N simulated agents (the real agent core and protocol) against a real controller: roll a release over all of them and report"
)]
pub struct Options {
    /// Simulated agents (nodes `sim-00000` ...; the first is the canary).
    #[arg(long, default_value_t = 100)]
    pub agents: u32,
    /// Switch latency in ms: `MEAN` (exponential with that mean) or
    /// `MIN..MAX` (uniform).
    #[arg(long, default_value = "20", value_parser = parse_latency)]
    pub switch_ms: Latency,
    /// Percentage of followers whose new release answers wrongly.
    #[arg(long, default_value = "0", value_parser = parse_percent)]
    pub wrong: f64,
    /// Percentage of followers that go silent (drop their connection and
    /// stay away) once granted.
    #[arg(long, default_value = "0", value_parser = parse_percent)]
    pub silent: f64,
    /// Percentage of followers that crash once switched and restart.
    #[arg(long, default_value = "0", value_parser = parse_percent)]
    pub crash: f64,
    /// How long a silent node stays away, in seconds.
    #[arg(long, default_value_t = 20)]
    pub silent_s: u64,
    /// How long a crashed node takes to restart, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub crash_restart_ms: u64,
    /// The rollout's slot budget (ops in flight at once).
    #[arg(long, default_value_t = 50)]
    pub slots: u16,
    /// Waves, e.g. `1%,10%,50%,100%`: passed through to the rollout start
    /// (the controller refuses it until waves are in the model).
    #[arg(long)]
    pub waves: Option<String>,
    /// Failure budget `N` or `P%`: passed through to the rollout start.
    #[arg(long)]
    pub max_failed: Option<String>,
    /// UNKNOWN budget `N`: passed through to the rollout start.
    #[arg(long)]
    pub max_unknown: Option<String>,
    /// How long the rollout may take before the run gives up, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_s: u64,
    /// The controller's op timeout (`[timing] op_timeout_ms`).
    #[arg(long, default_value_t = 15_000)]
    pub op_timeout_ms: u64,
    /// Handshakes in flight at once.
    #[arg(long, default_value_t = 64)]
    pub connect_concurrency: usize,
    /// The agents' retry timer (re-send what is outstanding), in ms.
    #[arg(long, default_value_t = 1_000)]
    pub retry_ms: u64,
    /// Where the PKI is kept and reused across runs.
    #[arg(long, default_value = "/tmp/fleetweft-fleetsim-pki")]
    pub pki_dir: PathBuf,
    /// Work directory (controller config, log, bundles); a fresh temporary
    /// one when not given. Must be empty or absent.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The `fleetweft` binary (default: next to this one).
    #[arg(long)]
    pub controller_bin: Option<PathBuf>,
    /// Seed for fault assignment and latencies (runs replay).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fetch the proof of this many nodes after the rollout (the controller
    /// probes their public routes on the embedded HTTP server).
    #[arg(long, default_value_t = 3)]
    pub proofs: usize,
    /// Exit 1 unless the rollout ends in this status (`completed`, `paused`).
    #[arg(long)]
    pub expect: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Keep the controller and the agents up this many seconds after the
    /// rollout ended, for a look at the console (`scripts/console-10k.sh`
    /// measures its pages in a browser); at most [`HOLD_S_MAX`].
    #[arg(long, default_value_t = 0)]
    pub hold_s: u64,
    /// Architectures the agents declare, comma-separated, given out in
    /// turn (`aarch64,x86_64`: even nodes aarch64, odd ones x86_64), to
    /// simulate a mixed fleet (issue #24 item 5). Default: this machine's.
    #[arg(long, value_delimiter = ',', value_parser = parse_arch)]
    pub arch: Vec<model::platform::Arch>,
}

impl Options {
    /// The platform node `index` declares: this machine's, with the
    /// architecture of `--arch` in turn when given.
    pub fn platform(&self, index: usize) -> model::platform::Platform {
        let mut platform = model::platform::Platform::current();
        if !self.arch.is_empty() {
            platform.arch = self.arch[index % self.arch.len()];
        }
        platform
    }
}

/// `--arch`'s values: `x86_64` or `aarch64` (also `amd64`, `arm64`).
fn parse_arch(text: &str) -> Result<model::platform::Arch, String> {
    model::platform::Arch::parse_tree_arch(text)
        .ok_or_else(|| format!("{text:?} is not x86_64 or aarch64 (nor amd64, arm64)"))
}

/// A switch latency distribution, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Latency {
    /// Exponential with this mean.
    Mean(f64),
    /// Uniform in `[min, max]`.
    Range(u64, u64),
}

/// The longest `--hold-s`: an hour.
pub const HOLD_S_MAX: u64 = 3600;

/// The longest switch latency one draw may take, in milliseconds: keeps an
/// exponential tail from holding a slot for minutes.
pub const SWITCH_MS_MAX: u64 = 60_000;

impl Latency {
    /// One draw, from `uniform` in `[0, 1)`.
    pub fn draw_ms(self, uniform: f64) -> u64 {
        assert!((0.0..1.0).contains(&uniform), "uniform draw out of range");
        let ms = match self {
            Latency::Mean(mean) => (-mean * (1.0 - uniform).ln()).round() as u64,
            Latency::Range(min, max) => min + ((max - min + 1) as f64 * uniform) as u64,
        };
        ms.min(SWITCH_MS_MAX)
    }
}

/// Parse `MEAN` or `MIN..MAX` (milliseconds).
pub fn parse_latency(text: &str) -> Result<Latency, String> {
    let number = |t: &str| {
        t.trim()
            .parse::<u64>()
            .map_err(|_| format!("`{t}` is not a whole number of milliseconds"))
    };
    match text.split_once("..") {
        Some((min, max)) => {
            let (min, max) = (number(min)?, number(max)?);
            if min > max || max > SWITCH_MS_MAX {
                return Err(format!(
                    "range {min}..{max}: expected MIN <= MAX <= {SWITCH_MS_MAX}"
                ));
            }
            Ok(Latency::Range(min, max))
        }
        None => {
            let mean = number(text)?;
            if mean > SWITCH_MS_MAX {
                return Err(format!("mean {mean} ms is over {SWITCH_MS_MAX} ms"));
            }
            Ok(Latency::Mean(mean as f64))
        }
    }
}

/// Parse `P` or `P%` with `0 <= P <= 100`.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%');
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a percentage (like 2 or 2%)"))?;
    if !(0.0..=100.0).contains(&value) {
        return Err(format!("{value}% is outside 0..100"));
    }
    Ok(value)
}

impl Options {
    /// Checks what clap cannot: the fleet size and slot budget.
    pub fn validate(&self) -> Result<(), String> {
        if self.hold_s > HOLD_S_MAX {
            return Err(format!("--hold-s {}: at most {HOLD_S_MAX}", self.hold_s));
        }
        if self.agents < 2 || self.agents > AGENTS_MAX {
            return Err(format!(
                "--agents {}: expected 2..={AGENTS_MAX} (a canary and at least one follower)",
                self.agents
            ));
        }
        if self.slots == 0 {
            return Err("--slots 0: a rollout needs at least one slot".into());
        }
        if self.connect_concurrency == 0 {
            return Err("--connect-concurrency 0: at least one handshake at a time".into());
        }
        if self.retry_ms == 0 {
            return Err("--retry-ms 0: the retry timer needs a period".into());
        }
        if self.wrong + self.silent + self.crash > 100.0 {
            return Err("--wrong + --silent + --crash exceed 100% of the followers".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_parse_and_draw_within_bounds() {
        assert_eq!(parse_latency("50"), Ok(Latency::Mean(50.0)));
        assert_eq!(parse_latency("10..30"), Ok(Latency::Range(10, 30)));
        assert!(parse_latency("30..10").unwrap_err().contains("MIN <= MAX"));
        assert!(parse_latency("fast").unwrap_err().contains("`fast`"));
        let range = Latency::Range(10, 30);
        for i in 0..100 {
            let ms = range.draw_ms(i as f64 / 100.0);
            assert!((10..=30).contains(&ms), "{ms}");
        }
        assert_eq!(Latency::Mean(0.0).draw_ms(0.5), 0);
        assert!(Latency::Mean(1e9).draw_ms(0.999) <= SWITCH_MS_MAX);
    }

    #[test]
    fn percentages_are_bounded() {
        assert_eq!(parse_percent("2%"), Ok(2.0));
        assert_eq!(parse_percent("0.5"), Ok(0.5));
        assert!(parse_percent("101").unwrap_err().contains("outside"));
        assert!(parse_percent("lots").unwrap_err().contains("`lots`"));
    }
}
