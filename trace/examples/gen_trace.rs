//! Generates a trace pair: `a_port0.pcap`, `a_port1.pcap`, `b_port0.pcap`, `b_port1.pcap` and
//! `truth.json` (until `wirelat gen-trace` wires this into the CLI).
//!
//! ```text
//! cargo run -p wirelat-trace --example gen_trace -- --out /tmp/pair \
//!     --delay weibull:shape=0.6,mean=50us --loss uniform:0.01 --duration 2s --rate 20000
//! ```

use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;
use wirelat_trace::generate::{self, GenConfig, Source};
use wirelat_trace::segment::SegmentConfig;
use wirelat_trace::traffic::TrafficConfig;
use wirelat_trace::truth::Resolution;
use wirelat_trace::{Direction, Tap, spec};

#[derive(Parser)]
#[command(about = "Generate a two-point trace pair and its ground truth")]
struct Args {
    /// Output directory.
    #[arg(long)]
    out: PathBuf,
    /// Full configuration as JSON (other model flags are then ignored, except --seed and --out).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the effective configuration as JSON and exit.
    #[arg(long)]
    print_config: bool,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// `synthetic`, `bundled` (the in-repo base pcap) or a pcap path.
    #[arg(long, default_value = "synthetic")]
    source: String,
    /// Synthetic packet rate, packets/s over both directions.
    #[arg(long, default_value_t = 20_000.0)]
    rate: f64,
    /// Synthetic duration (e.g. 2s, 500ms).
    #[arg(long, default_value = "2s")]
    duration: String,
    /// Fraction of synthetic conversations over IPv6.
    #[arg(long, default_value_t = 0.2)]
    ipv6: f64,
    /// Forward delay model (e.g. constant:50us, weibull:shape=0.6,mean=50us, queue:rate_bps=1e8,prop=20us).
    #[arg(long, default_value = "weibull:shape=0.6,mean=50us")]
    delay: String,
    /// Reverse delay model (default: same as forward, independent draws).
    #[arg(long)]
    reverse_delay: Option<String>,
    /// Forward loss model (none, uniform:0.01, bursty:rate=0.01,burst=100).
    #[arg(long, default_value = "none")]
    loss: String,
    /// Reverse loss model (default: same as forward).
    #[arg(long)]
    reverse_loss: Option<String>,
    /// Force FIFO order in both directions.
    #[arg(long)]
    fifo: bool,
    /// Per-flow paths in both directions, WEIGHT:EXTRA,... (e.g. 0.7:0,0.3:200us).
    #[arg(long)]
    paths: Option<String>,
    /// Explicit reordering in both directions, FRACTION/DELAY (e.g. 0.01/uniform:low=50us,high=500us).
    #[arg(long)]
    reorder: Option<String>,
    /// B's clock minus true time (e.g. -3us).
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    clock_offset: String,
    /// Timestamp resolution: ns, or us (what DPDK 22.11's pcap device keeps).
    #[arg(long, default_value = "ns")]
    resolution: String,
    /// Epoch length of the truth.
    #[arg(long, default_value = "100ms")]
    epoch: String,
    /// Rewrite DSCP at B's copy to this value.
    #[arg(long)]
    dscp: Option<u8>,
    /// Keep TTL / hop limit unchanged in flight.
    #[arg(long)]
    keep_ttl: bool,
    /// Base pcap: keep its own timestamps instead of rebasing to the start time.
    #[arg(long)]
    keep_base_times: bool,
    /// Base pcap: multiply gaps by this factor.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Omit per-epoch entries in the flows' truth.
    #[arg(long)]
    no_flow_epochs: bool,
}

fn config(a: &Args) -> anyhow::Result<GenConfig> {
    if let Some(p) = &a.config {
        let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let mut c: GenConfig =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
        c.seed = a.seed;
        return Ok(c);
    }
    let reorder = a.reorder.as_deref().map(spec::reorder).transpose()?;
    let paths = a.paths.as_deref().map(spec::paths).transpose()?.unwrap_or_default();
    let fwd = SegmentConfig {
        delay: spec::delay(&a.delay)?,
        loss: spec::loss(&a.loss)?,
        fifo: a.fifo,
        reorder,
        paths,
    };
    let rev = SegmentConfig {
        delay: a.reverse_delay.as_deref().map(spec::delay).transpose()?.unwrap_or(fwd.delay),
        loss: a.reverse_loss.as_deref().map(spec::loss).transpose()?.unwrap_or(fwd.loss),
        ..fwd.clone()
    };
    let traffic = TrafficConfig {
        packet_rate_pps: a.rate,
        duration_ns: spec::duration_ns(&a.duration)?,
        ipv6_fraction: a.ipv6,
        ..TrafficConfig::default()
    };
    let mut c = GenConfig::synthetic(a.seed, traffic, fwd);
    c.reverse = rev;
    c.source = match a.source.as_str() {
        "synthetic" => c.source,
        "bundled" => Source::Base { path: None, rebase: !a.keep_base_times, time_scale: a.time_scale },
        p => Source::Base {
            path: Some(PathBuf::from(p)),
            rebase: !a.keep_base_times,
            time_scale: a.time_scale,
        },
    };
    c.clock_offset_ns = spec::signed_duration_ns(&a.clock_offset)?;
    c.resolution = match a.resolution.as_str() {
        "ns" => Resolution::Ns,
        "us" => Resolution::Us,
        r => anyhow::bail!("resolution {r:?}: expected ns or us"),
    };
    c.epoch_len_ns = spec::duration_ns(&a.epoch)?;
    c.in_flight.dscp = a.dscp;
    c.in_flight.decrement_ttl = !a.keep_ttl;
    c.flow_epochs = !a.no_flow_epochs;
    Ok(c)
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let cfg = config(&a)?;
    if a.print_config {
        println!("{}", serde_json::to_string_pretty(&cfg)?);
        return Ok(());
    }
    let pair = generate::generate(&cfg)?;
    pair.write_dir(&a.out)?;
    let t = &pair.truth;
    println!("wrote {}", a.out.display());
    for tap in Tap::ALL {
        println!("  {}.pcap: {} frames", tap.name(), pair.capture(tap).len());
    }
    for dir in Direction::BOTH {
        if let Some(d) = t.direction(dir) {
            let x = &d.total;
            println!(
                "  {:<8} sent {:>8} delivered {:>8} lost {:>6} ({:.3}%)  mean {:>10.1} ns  sd {:>10.1} ns  \
                 reordered {} unmeasured {} epochs {}",
                dir.name(),
                x.sent,
                x.delivered,
                x.lost,
                100.0 * x.lost as f64 / x.sent.max(1) as f64,
                x.delay.mean_ns,
                x.delay.std_dev_ns,
                x.reordered,
                x.unmeasured,
                d.epochs.len()
            );
        }
    }
    println!("  flows: {}", t.flows.len());
    for f in &t.fridge {
        println!(
            "  fridge {} {:?}: {} samples ({} requests, {} duplicate, {} unanswered)",
            f.point.name(),
            f.kind,
            f.delay_ns.len(),
            f.requests,
            f.duplicate_requests,
            f.unanswered_requests
        );
    }
    Ok(())
}
