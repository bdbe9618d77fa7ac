//! `wirelat demo`: the main job. It generates a trace pair (the four pcaps a two-point
//! deployment sees, and its ground truth), starts the peer (`wirelat collect`) and the two
//! appliances (`wirelat run`, point A and point B, each on DPDK's pcap virtual device in trace
//! mode, shipping its epochs to the peer over the authenticated protocol), waits for them, and
//! prints, per synopsis, the estimate next to the ground truth with its error, the fridge's delay
//! CDF as an SVG file and as text.
//!
//! Every part is the real thing: the three processes are this binary's own subcommands, so the
//! demo exercises DPDK, the packet layer, the synopses, the epoch harvest, the network sink and
//! the peer's estimators end to end. The files of a run stay in `--out` (configurations, logs,
//! records, the trace pair) so it can be inspected or re-scored with `wirelat check`.
//!
//! Exit codes: 0 the run completed (and every bound held, when bounds were given), 1 a process
//! failed or a bound was exceeded, 2 bad usage.

mod cdf;
mod configs;
mod procs;
mod summary;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use wirelat_trace::record;
use wirelat_trace::score::{self, Basis, ScoreOptions};
use wirelat_trace::truth::Truth;

use crate::Failure;
use crate::check;
use crate::gen_trace::{self, GenTraceArgs, ResolutionArg};

/// Arguments of `wirelat demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Directory for everything the run writes (trace pair, configurations, logs, records,
    /// the CDF picture); files of the same names are replaced.
    #[arg(long, short, value_name = "DIR", default_value = "out/demo")]
    pub out: PathBuf,
    /// Traffic: `synthetic` (conversations with TCP handshakes and DNS exchanges, from the
    /// seed), `bundled` (the capture built into wirelat) or the path of a pcap.
    #[arg(long, value_name = "synthetic|bundled|FILE.pcap", default_value = "synthetic")]
    pub source: String,
    /// Synthetic traffic: length of the trace.
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    pub duration: String,
    /// Synthetic traffic: mean packet rate over both directions, packets/s.
    #[arg(long, value_name = "PPS", default_value_t = 20_000.0)]
    pub rate: f64,
    /// Delay model of the segment between A and B, both directions (see `gen-trace --help`).
    #[arg(long, value_name = "MODEL", default_value = "weibull:shape=0.6,mean=50us")]
    pub delay: String,
    /// Loss model of the segment, both directions.
    #[arg(long, value_name = "MODEL", default_value = "uniform:0.01")]
    pub loss: String,
    /// B's clock minus A's.
    #[arg(long, value_name = "DURATION", default_value = "-3us", allow_hyphen_values = true)]
    pub clock_offset: String,
    /// Seed of the trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Epoch length (the appliances' and the truth's).
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub epoch_ms: u64,
    /// Bounds per synopsis (as for `wirelat check`); exit 1 when one is exceeded.
    #[arg(long, value_name = "FILE")]
    pub bounds: Option<PathBuf>,
    /// One bound, SYNOPSIS.NAME=VALUE (repeatable; overrides --bounds).
    #[arg(long = "bound", value_name = "SYNOPSIS.NAME=VALUE")]
    pub bound: Vec<String>,
    /// Give up when the appliances have not finished after this long.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub timeout_s: u64,
    /// Also write the run's summary (estimates, truth, errors, bound checks) as JSON here.
    #[arg(long, value_name = "FILE.json")]
    pub summary_json: Option<PathBuf>,
    /// Serve Prometheus `/metrics` at the peer and both points on loopback (ports picked at
    /// start and printed as `demo: metrics of …`), each point keeping its final values up this
    /// many seconds after it finishes, so a scraper sees them (docs/monitoring.md).
    #[arg(long, value_name = "SECONDS")]
    pub metrics_linger_s: Option<u64>,
    /// With `--metrics-linger-s`: wait this many seconds after printing the peer's metrics
    /// endpoint before starting the points, so a scraper that picks the endpoint up sees every
    /// series at zero first. `rate()` needs that sample before the increase, and a short replay
    /// can finish within one scrape interval.
    #[arg(long, value_name = "SECONDS", default_value_t = 0, requires = "metrics_linger_s")]
    pub metrics_lead_s: u64,
}

/// Where a run's files go.
pub struct Layout {
    /// `--out`.
    pub dir: PathBuf,
    /// The trace pair.
    pub pair: PathBuf,
}

impl Layout {
    fn new(dir: &Path) -> Self {
        Self { dir: dir.to_path_buf(), pair: dir.join("pair") }
    }
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn usage(e: impl std::fmt::Display) -> Failure {
    Failure::Usage(e.to_string())
}

/// Runs `wirelat demo`.
pub fn run(args: &DemoArgs) -> Result<(), Failure> {
    if args.epoch_ms == 0 {
        return Err(usage("--epoch-ms must be at least 1"));
    }
    let bounds = check::load_bounds(args.bounds.as_deref(), &args.bound)?;
    let layout = Layout::new(&args.out);
    std::fs::create_dir_all(&layout.dir)
        .with_context(|| format!("creating {}", layout.dir.display()))
        .map_err(Failure::Runtime)?;

    // 1. The trace pair and its truth.
    let gen_cfg = gen_trace::effective_config(&trace_args(args, &layout))?;
    let pair = wirelat_trace::generate::generate(&gen_cfg).map_err(usage)?;
    pair.write_dir(&layout.pair)
        .with_context(|| format!("writing the trace pair to {}", layout.pair.display()))
        .map_err(Failure::Runtime)?;
    let truth_path = layout.pair.join("truth.json");
    let truth = Truth::read(&truth_path).map_err(|e| Failure::Runtime(anyhow::anyhow!("{e}")))?;
    println!("demo: trace pair in {} ({})", layout.pair.display(), describe_trace(&truth, args));

    // 2. The peer and the two points.
    let bin = std::env::current_exe().context("locating the wirelat binary").map_err(Failure::Runtime)?;
    let records = layout.file("records.jsonl");
    for stale in [records.clone(), layout.file("records.jsonl.commit")] {
        let _ = std::fs::remove_file(stale);
    }
    configs::write_key(&layout.file("peer.key")).map_err(Failure::Runtime)?;
    let plan = configs::Plan {
        layout: &layout,
        epoch_len_ms: args.epoch_ms,
        colate_origin_ns: truth.first_ts_ns.saturating_sub(args.epoch_ms * 1_000_000),
        records: &records,
        metrics_linger_ms: args.metrics_linger_s.map(|s| s.saturating_mul(1000)),
        metrics_lead: Duration::from_secs(args.metrics_lead_s),
    };
    configs::write_collector(&plan).map_err(Failure::Runtime)?;
    let timeout = Duration::from_secs(args.timeout_s.max(1));
    let tap_frames = |tap: &str| truth.files.iter().find(|f| f.tap == tap).map(|f| f.frames);
    procs::run_deployment(&bin, &plan, timeout, &tap_frames).map_err(Failure::Runtime)?;

    // 3. Score and print.
    let text = std::fs::read_to_string(&records)
        .with_context(|| format!("reading the peer's records {}", records.display()))
        .map_err(Failure::Runtime)?;
    let parsed = record::parse_lines(&text, &records.display().to_string())
        .map_err(|e| Failure::Runtime(anyhow::anyhow!("records: {e}")))?;
    let opts = ScoreOptions { basis: Basis::SameEpoch, min_flow_packets: 1 };
    let mut report = score::score(&truth, &parsed.records, &opts, &bounds);
    check::require_records(&mut report, &bounds);

    let summary = summary::Summary::build(&truth, &report, &text);
    print!("{}", summary.render());
    let pictures = cdf::Pictures::build(&truth, &text);
    let svg = layout.file("fridge-cdf.svg");
    std::fs::write(&svg, pictures.svg())
        .with_context(|| format!("writing {}", svg.display()))
        .map_err(Failure::Runtime)?;
    print!("{}", pictures.text());
    println!("demo: fridge delay CDFs (estimate and truth) drawn in {}", svg.display());
    if !bounds.is_empty() {
        print!("{}", check::render_table(&report, parsed.skipped, false));
    }
    println!(
        "demo: records in {}; re-score with: wirelat check --truth {} --records {}",
        records.display(),
        truth_path.display(),
        records.display()
    );
    if let Some(path) = &args.summary_json {
        let value = serde_json::json!({ "summary": summary, "checks": report.checks, "pass": report.pass });
        let text = serde_json::to_string_pretty(&value).map_err(|e| Failure::Runtime(e.into()))?;
        std::fs::write(path, text)
            .with_context(|| format!("writing {}", path.display()))
            .map_err(Failure::Runtime)?;
    }
    if !summary.complete() {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "the peer produced no estimate for: {}",
            summary.missing().join(", ")
        )));
    }
    check::verdict(&report)
}

/// The `gen-trace` arguments the demo's flags stand for.
fn trace_args(a: &DemoArgs, layout: &Layout) -> GenTraceArgs {
    let synthetic = a.source == "synthetic";
    GenTraceArgs {
        out: Some(layout.pair.clone()),
        config: None,
        print_config: false,
        seed: Some(a.seed),
        source: Some(a.source.clone()),
        rate: synthetic.then_some(a.rate),
        duration: synthetic.then(|| a.duration.clone()),
        ipv6: None,
        delay: Some(a.delay.clone()),
        reverse_delay: None,
        loss: Some(a.loss.clone()),
        reverse_loss: None,
        fifo: false,
        paths: None,
        reorder: None,
        clock_offset: Some(a.clock_offset.clone()),
        // DPDK 22.11's pcap device delivers microseconds: the truth is computed from those.
        resolution: Some(ResolutionArg::Us),
        epoch: Some(format!("{}ms", a.epoch_ms)),
        start_ns: None,
        dscp: None,
        keep_ttl: false,
        keep_base_times: false,
        time_scale: None,
        no_flow_epochs: false,
    }
}

fn describe_trace(truth: &Truth, a: &DemoArgs) -> String {
    let frames: u64 = truth.files.iter().map(|f| f.frames).sum();
    let span_ms = truth.last_ts_ns.saturating_sub(truth.first_ts_ns) as f64 / 1e6;
    format!(
        "{frames} frames over the four taps, {span_ms:.0} ms, delay {}, loss {}, B's clock {}",
        a.delay, a.loss, a.clock_offset
    )
}
