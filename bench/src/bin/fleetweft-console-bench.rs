//! fleetweft-console-bench: what each console page costs to render against
//! the fleet's size (issue #28 item 6, "render time"; the guide: the
//! console stays useful at 100,000 nodes). For each size it builds the
//! view layer's test fleet (`api::view::fixture::fleet`: a rollout over
//! every node, 500 slots, 300 ops verified and 150 UNKNOWN) and renders
//! every page the size test renders (`console::every_page`, 12 pages),
//! `--repeat` times, printing each page's bytes as JSON lines, then one
//! line per size with the median and fastest time to render them all.
//! Rendering only: no HTTP, no browser.
//!
//! `fleetweft-console-bench --nodes 1000,10000,100000 --repeat 5`

use anyhow::{bail, Context, Result};
use clap::Parser;
use std::time::Instant;

/// Largest fleet this bench builds (the model's `NODES_MAX`).
const NODES_MAX: u32 = 100_000;
/// Most renders of one page per size.
const REPEAT_MAX: usize = 100;

#[derive(Parser)]
#[command(about = "Render every console page at each fleet size and print bytes and time")]
struct Args {
    /// Fleet sizes, comma separated.
    #[arg(long, default_value = "1000,10000,100000", value_delimiter = ',')]
    nodes: Vec<u32>,
    /// Renders of every page per size (the median is reported).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.repeat == 0 || args.repeat > REPEAT_MAX {
        bail!("--repeat {} is out of range 1..={REPEAT_MAX}", args.repeat);
    }
    for &nodes in &args.nodes {
        if !(1_000..=NODES_MAX).contains(&nodes) {
            bail!("--nodes {nodes} is out of range 1000..={NODES_MAX} (the fixture needs 450 ops)");
        }
        measure(nodes, args.repeat)?;
    }
    Ok(())
}

/// One size: build the fleet, render every page `repeat` times.
fn measure(nodes: u32, repeat: usize) -> Result<()> {
    let started = Instant::now();
    eprintln!("console-bench: building a {nodes}-node fleet ...");
    let snap = api::view::fixture::fleet(nodes, 500, 300, 150);
    let build_s = started.elapsed().as_secs_f64();
    let mut samples_ms = Vec::with_capacity(repeat);
    let mut pages = Vec::new();
    for round in 0..repeat {
        let t = Instant::now();
        pages = controller::daemon::console::every_page(&snap)
            .context("the fixture fleet has no rollout 0")?;
        samples_ms.push(t.elapsed().as_secs_f64() * 1e3);
        eprintln!(
            "console-bench: {nodes} nodes, round {} of {repeat}: {} pages in {:.1} ms",
            round + 1,
            pages.len(),
            samples_ms[round]
        );
    }
    samples_ms.sort_by(f64::total_cmp);
    for (name, html) in &pages {
        println!(
            "{}",
            serde_json::json!({ "nodes": nodes, "page": name, "bytes": html.len() })
        );
    }
    let largest = pages.iter().map(|(_, h)| h.len()).max().unwrap_or(0);
    println!(
        "{}",
        serde_json::json!({
            "nodes": nodes,
            "pages": pages.len(),
            "fleet_build_s": round3(build_s),
            "largest_page_bytes": largest,
            "every_page_ms_median": round3(samples_ms[samples_ms.len() / 2]),
            "every_page_ms_min": round3(samples_ms[0]),
        })
    );
    Ok(())
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
