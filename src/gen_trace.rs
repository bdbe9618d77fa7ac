//! `wirelat gen-trace`: the command-line face of the trace crate's generator. It writes the four
//! pcaps a two-point deployment sees (`a_port0.pcap`, `a_port1.pcap`, `b_port0.pcap`,
//! `b_port1.pcap`) and `truth.json` into one directory.
//!
//! The configuration is built in layers: the generator's defaults (synthetic traffic, Weibull
//! delays with mean 50 µs, no loss), then `--config FILE` (a JSON configuration as printed by
//! `--print-config`, or a `truth.json` whose embedded configuration is reused), then every flag
//! given on the command line. A flag that does not apply to the chosen source (`--rate` with a
//! base pcap, `--time-scale` with synthetic traffic) is a usage error, never silently ignored.
//!
//! Exit codes: 0 written, 1 the output could not be written, 2 a bad flag, model string,
//! configuration or base pcap. Nothing here needs DPDK.

use std::path::{Path, PathBuf};

use anyhow::Context;
use wirelat_trace::generate::{self, GenConfig, Source};
use wirelat_trace::segment::{DelaySpec, SegmentConfig};
use wirelat_trace::traffic::TrafficConfig;
use wirelat_trace::truth::Resolution;
use wirelat_trace::{Direction, Tap, spec};

use crate::Failure;

/// Timestamp resolution of the written pcaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ResolutionArg {
    /// Nanoseconds (pcap magic a1b23c4d).
    Ns,
    /// Microseconds, floored: what DPDK 22.11's pcap device delivers to the appliance.
    Us,
}

/// Arguments of `wirelat gen-trace`. Every model flag is optional: unset flags keep the value
/// from `--config` or the generator's default.
#[derive(Debug, clap::Args)]
pub struct GenTraceArgs {
    /// Output directory (created if missing); existing files of the same names are replaced.
    #[arg(long, short, value_name = "DIR", required_unless_present = "print_config")]
    pub out: Option<PathBuf>,
    /// Base configuration: JSON as printed by --print-config, or a truth.json (its embedded
    /// configuration is reused). Flags override it.
    #[arg(long, value_name = "FILE.json")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration as JSON and exit without generating.
    #[arg(long)]
    pub print_config: bool,
    /// Seed of every random choice [default: 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Traffic source: `synthetic`, `bundled` (the base capture built into wirelat) or the
    /// path of a pcap [default: synthetic].
    #[arg(long, value_name = "synthetic|bundled|FILE.pcap")]
    pub source: Option<String>,
    /// Synthetic traffic: mean packet rate over both directions, packets/s [default: 20000].
    #[arg(long, value_name = "PPS")]
    pub rate: Option<f64>,
    /// Synthetic traffic: length of the trace, e.g. 2s, 500ms [default: 2s].
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Synthetic traffic: fraction of conversations over IPv6 [default: 0.2].
    #[arg(long, value_name = "FRACTION")]
    pub ipv6: Option<f64>,
    /// Forward (A→B) delay model, also used for the reverse direction unless --reverse-delay:
    /// constant:50us, weibull:shape=0.6,mean=50us, pareto:shape=3,mean=50us,
    /// lognormal:mu=10.8,sigma=0.5, bimodal:low=20us,high=200us,p=0.1,
    /// lognormal_mix:mu_low=9.9,sigma_low=0.3,mu_high=12.2,sigma_high=0.6,p=0.05,
    /// uniform:low=10us,high=90us, queue:rate_bps=1e9,prop=20us
    /// [default: weibull:shape=0.6,mean=50us].
    #[arg(long, value_name = "MODEL")]
    pub delay: Option<String>,
    /// Reverse (B→A) delay model.
    #[arg(long, value_name = "MODEL")]
    pub reverse_delay: Option<String>,
    /// Forward loss model, also used for the reverse direction unless --reverse-loss: none,
    /// uniform:0.01, bursty:rate=0.01,burst=100 [default: none].
    #[arg(long, value_name = "MODEL")]
    pub loss: Option<String>,
    /// Reverse loss model.
    #[arg(long, value_name = "MODEL")]
    pub reverse_loss: Option<String>,
    /// Force FIFO order in both directions (no packet overtakes another).
    #[arg(long)]
    pub fifo: bool,
    /// Per-flow paths in both directions, WEIGHT:EXTRA,... e.g. 0.7:0,0.3:200us.
    #[arg(long, value_name = "PATHS")]
    pub paths: Option<String>,
    /// Explicit reordering in both directions, FRACTION/DELAY e.g. 0.01/uniform:low=50us,high=500us.
    #[arg(long, value_name = "SPEC")]
    pub reorder: Option<String>,
    /// B's clock minus true time, e.g. -3us [default: 0].
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub clock_offset: Option<String>,
    /// Timestamp resolution of the written pcaps [default: ns].
    #[arg(long, value_enum)]
    pub resolution: Option<ResolutionArg>,
    /// Epoch length of the ground truth, e.g. 100ms [default: 100ms]. Use the appliance's.
    #[arg(long, value_name = "DURATION")]
    pub epoch: Option<String>,
    /// True time of the first packet, ns since 1970 [default: 1700000000000000000].
    #[arg(long, value_name = "NS")]
    pub start_ns: Option<u64>,
    /// Rewrite DSCP to this value in B's copies (0..=63).
    #[arg(long, value_name = "DSCP")]
    pub dscp: Option<u8>,
    /// Keep TTL / hop limit unchanged in flight (by default routers decrement it).
    #[arg(long)]
    pub keep_ttl: bool,
    /// Base pcap: keep its own timestamps instead of starting at --start-ns.
    #[arg(long)]
    pub keep_base_times: bool,
    /// Base pcap: multiply the gaps between its packets by this factor [default: 1].
    #[arg(long, value_name = "FACTOR")]
    pub time_scale: Option<f64>,
    /// Omit the per-epoch entries of the flows' truth (smaller truth.json).
    #[arg(long)]
    pub no_flow_epochs: bool,
}

/// The segment model used when neither `--config` nor `--delay` says otherwise.
const DEFAULT_DELAY: &str = "weibull:shape=0.6,mean=50us";
/// The seed used when neither `--config` nor `--seed` gives one.
const DEFAULT_SEED: u64 = 1;

fn usage(e: impl std::fmt::Display) -> Failure {
    Failure::Usage(e.to_string())
}

/// Runs `wirelat gen-trace`.
pub fn run(args: &GenTraceArgs) -> Result<(), Failure> {
    let cfg = effective_config(args)?;
    if args.print_config {
        let text = serde_json::to_string_pretty(&cfg).map_err(|e| Failure::Runtime(e.into()))?;
        println!("{text}");
        return Ok(());
    }
    let out = args.out.as_deref().ok_or_else(|| usage("--out DIR is required"))?;
    // Everything generate() can refuse comes from the configuration or the base pcap.
    let pair = generate::generate(&cfg).map_err(usage)?;
    pair.write_dir(out)
        .with_context(|| format!("writing the trace pair to {}", out.display()))
        .map_err(Failure::Runtime)?;
    print_summary(out, &pair);
    Ok(())
}

/// The configuration the flags describe (defaults, then `--config`, then flags).
pub fn effective_config(a: &GenTraceArgs) -> Result<GenConfig, Failure> {
    let mut c = match &a.config {
        Some(path) => read_config(path)?,
        None => default_config()?,
    };
    if let Some(seed) = a.seed {
        c.seed = seed;
    }
    apply_source(a, &mut c)?;
    apply_segments(a, &mut c)?;
    if let Some(s) = &a.clock_offset {
        c.clock_offset_ns = spec::signed_duration_ns(s).map_err(usage)?;
    }
    if let Some(r) = a.resolution {
        c.resolution = match r {
            ResolutionArg::Ns => Resolution::Ns,
            ResolutionArg::Us => Resolution::Us,
        };
    }
    if let Some(s) = &a.epoch {
        c.epoch_len_ns = spec::duration_ns(s).map_err(usage)?;
    }
    if let Some(t) = a.start_ns {
        c.start_ns = t;
    }
    if a.dscp.is_some() {
        c.in_flight.dscp = a.dscp;
    }
    if a.keep_ttl {
        c.in_flight.decrement_ttl = false;
    }
    if a.no_flow_epochs {
        c.flow_epochs = false;
    }
    c.validate().map_err(usage)?;
    if let Source::Synthetic { traffic } = &c.source {
        traffic.validate().map_err(usage)?;
    }
    Ok(c)
}

fn default_config() -> Result<GenConfig, Failure> {
    let seg = SegmentConfig {
        delay: spec::delay(DEFAULT_DELAY).map_err(usage)?,
        loss: wirelat_dataplane::sim::LossModel::None,
        fifo: false,
        reorder: None,
        paths: vec![],
    };
    Ok(GenConfig::synthetic(DEFAULT_SEED, TrafficConfig::default(), seg))
}

/// A generator configuration from JSON: either a configuration itself or a truth file that
/// embeds one.
fn read_config(path: &Path) -> Result<GenConfig, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read configuration {}: {e}", path.display())))?;
    let mut value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| usage(format!("{}: not valid JSON: {e}", path.display())))?;
    if value.get("schema").and_then(|s| s.as_str()) == Some(wirelat_trace::truth::TRUTH_SCHEMA) {
        value =
            value.get_mut("config").map(serde_json::Value::take).filter(|v| !v.is_null()).ok_or_else(
                || usage(format!("{}: this truth file embeds no configuration", path.display())),
            )?;
    }
    serde_json::from_value(value)
        .map_err(|e| usage(format!("{}: not a trace generator configuration: {e}", path.display())))
}

fn apply_source(a: &GenTraceArgs, c: &mut GenConfig) -> Result<(), Failure> {
    if let Some(src) = &a.source {
        let (rebase, time_scale) = match &c.source {
            Source::Base { rebase, time_scale, .. } => (*rebase, *time_scale),
            Source::Synthetic { .. } => (true, 1.0),
        };
        c.source = match src.as_str() {
            "synthetic" => match &c.source {
                Source::Synthetic { .. } => c.source.clone(),
                Source::Base { .. } => Source::Synthetic { traffic: TrafficConfig::default() },
            },
            "bundled" => Source::Base { path: None, rebase, time_scale },
            "" => return Err(usage("--source: give synthetic, bundled or the path of a pcap")),
            path => {
                let p = PathBuf::from(path);
                if !p.is_file() {
                    return Err(usage(format!("--source {path}: no such pcap file")));
                }
                Source::Base { path: Some(p), rebase, time_scale }
            }
        };
    }
    match &mut c.source {
        Source::Synthetic { traffic } => {
            if a.keep_base_times || a.time_scale.is_some() {
                return Err(usage(
                    "--keep-base-times and --time-scale apply to a base pcap (--source), not to synthetic traffic",
                ));
            }
            if let Some(r) = a.rate {
                traffic.packet_rate_pps = r;
            }
            if let Some(d) = &a.duration {
                traffic.duration_ns = spec::duration_ns(d).map_err(usage)?;
            }
            if let Some(f) = a.ipv6 {
                traffic.ipv6_fraction = f;
            }
        }
        Source::Base { rebase, time_scale, .. } => {
            if a.rate.is_some() || a.duration.is_some() || a.ipv6.is_some() {
                return Err(usage(
                    "--rate, --duration and --ipv6 apply to synthetic traffic, not to a base pcap",
                ));
            }
            if a.keep_base_times {
                *rebase = false;
            }
            if let Some(s) = a.time_scale {
                if !(s.is_finite() && s > 0.0) {
                    return Err(usage(format!("--time-scale {s}: must be a positive number")));
                }
                *time_scale = s;
            }
        }
    }
    Ok(())
}

fn apply_segments(a: &GenTraceArgs, c: &mut GenConfig) -> Result<(), Failure> {
    let delay = a.delay.as_deref().map(spec::delay).transpose().map_err(usage)?;
    let reverse_delay = a.reverse_delay.as_deref().map(spec::delay).transpose().map_err(usage)?;
    let loss = a.loss.as_deref().map(spec::loss).transpose().map_err(usage)?;
    let reverse_loss = a.reverse_loss.as_deref().map(spec::loss).transpose().map_err(usage)?;
    let reorder = a.reorder.as_deref().map(spec::reorder).transpose().map_err(usage)?;
    let paths = a.paths.as_deref().map(spec::paths).transpose().map_err(usage)?;
    let set_delay = |s: &mut SegmentConfig, d: Option<DelaySpec>| {
        if let Some(d) = d {
            s.delay = d;
        }
    };
    set_delay(&mut c.forward, delay);
    set_delay(&mut c.reverse, reverse_delay.or(delay));
    if let Some(l) = loss {
        c.forward.loss = l;
    }
    if let Some(l) = reverse_loss.or(loss) {
        c.reverse.loss = l;
    }
    for s in [&mut c.forward, &mut c.reverse] {
        if a.fifo {
            s.fifo = true;
        }
        if let Some(r) = &reorder {
            s.reorder = Some(*r);
        }
        if let Some(p) = &paths {
            s.paths = p.clone();
        }
    }
    Ok(())
}

fn print_summary(out: &Path, pair: &generate::TracePair) {
    let t = &pair.truth;
    println!("wrote {}", out.display());
    for tap in Tap::ALL {
        println!("  {}.pcap: {} frames", tap.name(), pair.capture(tap).len());
    }
    println!(
        "  truth.json: seed {}, epoch {} ns, clock offset {} ns",
        t.seed, t.epoch_len_ns, t.clock_offset_ns
    );
    for dir in Direction::BOTH {
        if let Some(d) = t.direction(dir) {
            let x = &d.total;
            println!(
                "  {:<8} sent {} delivered {} lost {} ({:.3}%) mean {:.1} ns sd {:.1} ns reordered {} epochs {}",
                dir.name(),
                x.sent,
                x.delivered,
                x.lost,
                100.0 * x.lost as f64 / x.sent.max(1) as f64,
                x.delay.mean_ns,
                x.delay.std_dev_ns,
                x.reordered,
                d.epochs.len()
            );
        }
    }
    println!("  flows: {}", t.flows.len());
    for f in &t.fridge {
        println!(
            "  fridge {} {}: {} request→response samples",
            f.point.name(),
            serde_json::to_value(f.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
            f.delay_ns.len()
        );
    }
}
