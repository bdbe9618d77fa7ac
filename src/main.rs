//! `wirelat`: the command-line entry point.
//!
//! Exit codes: 0 success, 1 runtime failure (DPDK, devices, I/O), 2 bad usage or bad
//! configuration (including `run` on a build without the `dpdk` feature). Errors are printed
//! as one clear message; nothing here panics on user input.

#![forbid(unsafe_code)]

mod check;
#[cfg(feature = "dpdk")]
mod demo;
mod gen_trace;
mod measure;
mod offline;
mod pcap_input;
mod point_metrics;
mod replay;
#[cfg(feature = "dpdk")]
mod run;
mod sample_pcap;
#[cfg(feature = "dpdk")]
mod topology;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wirelat_control::config::{Config, Purpose};

/// DPDK middlebox that forwards traffic untouched and measures its latency passively.
#[derive(Debug, Parser)]
#[command(name = "wirelat", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the bump-in-the-wire appliance described by a TOML file.
    Run {
        /// The configuration file (see configs/).
        #[arg(long, short, value_name = "FILE.toml")]
        config: PathBuf,
    },
    /// Measure pcap files without DPDK: the same pipeline, harvest and outputs as `run`, with
    /// the packets of port 0 and port 1 merged by timestamp and spread over emulated workers.
    Offline {
        /// The configuration file (its [[port]] tables are ignored).
        #[arg(long, short, value_name = "FILE.toml")]
        config: PathBuf,
        /// Frames received on port 0 (forward direction).
        #[arg(long, value_name = "FILE.pcap")]
        port0: PathBuf,
        /// Frames received on port 1 (reverse direction).
        #[arg(long, value_name = "FILE.pcap")]
        port1: Option<PathBuf>,
        /// Emulated workers, 1..=127 (default: the configuration's worker count).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=127))]
        workers: Option<u8>,
        /// Give every emulated worker its own copy of the whole trace (its IP addresses offset
        /// per worker, so flows and packet ids are its own) instead of a share of it: N workers
        /// at the trace's full rate each, for the control thread's cost (scripts/control-cost.sh).
        #[arg(long)]
        replicas: bool,
        /// Replay the trace this many times, each pass shifted by whole epochs past the last
        /// (a long run's steady state from a short trace, for benchmarks).
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        loops: u64,
    },
    /// Run the peer that pairs the points' epochs and estimates (see configs/collector.toml).
    Collect {
        /// The collector's configuration file.
        #[arg(long, short, value_name = "FILE.toml")]
        config: PathBuf,
    },
    /// Ship one simulated point's epochs to a peer (tests and demos of the shipping path).
    #[command(hide = true)]
    SimPoint {
        /// The simulated point's configuration ([point], [segments], [ship], [sim], [synopses]).
        #[arg(long, short, value_name = "FILE.toml")]
        config: PathBuf,
        /// One epoch every this many ms, on a schedule from the start (a point that fell
        /// behind catches up instead of drifting from the other point).
        #[arg(long, default_value_t = 0)]
        pace_ms: u64,
        /// Skip the epochs before this one (a point restarted mid-run).
        #[arg(long, default_value_t = 0)]
        from_epoch: u64,
        /// Exit abruptly after this epoch (a crash).
        #[arg(long)]
        crash_after: Option<u64>,
    },
    /// Write the bundled sample pcap (varied frames, see data/sample.pcap) to a file.
    SamplePcap {
        /// Output file.
        #[arg(long, short, value_name = "FILE.pcap")]
        out: PathBuf,
        /// Write a pcap with no frames instead.
        #[arg(long)]
        empty: bool,
    },
    /// Generate a two-point trace pair (four pcaps) and its ground truth (truth.json).
    GenTrace(Box<gen_trace::GenTraceArgs>),
    /// Score a run's JSON-lines records against a truth.json; exit 1 if a bound fails.
    Check(check::CheckArgs),
    /// Send pcaps out of DPDK ports at their recorded timing (scaled), or as fast as possible.
    Replay(replay::ReplayArgs),
    /// The main job: generate a trace pair, run point A, point B and the peer on DPDK's pcap
    /// device, and print every synopsis's estimate next to the ground truth.
    #[cfg(feature = "dpdk")]
    Demo(Box<demo::DemoArgs>),
}

/// Why the program failed, deciding the exit code.
enum Failure {
    /// Bad usage or configuration: exit code 2.
    Usage(String),
    /// Anything else: exit code 1.
    Runtime(anyhow::Error),
}

/// Large blocks (the synopses' tables) on transparent huge pages: see
/// `wirelat_dataplane::dpdk::HugePageAlloc`.
#[cfg(feature = "dpdk")]
#[global_allocator]
static ALLOCATOR: wirelat_dataplane::dpdk::HugePageAlloc = wirelat_dataplane::dpdk::HugePageAlloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // clap prints usage errors (exit code 2) and --help/--version (exit code 0) itself.
        Err(e) => e.exit(),
    };
    init_logging();
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("wirelat: error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(error)) => {
            eprintln!("wirelat: error: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// Sorts a failure: what the operator's input caused (a `[ship]` key, key file or spill
/// directory, the collector's key file or listen address) is bad input, exit code 2, with the
/// sentence naming the key; anything else is a runtime failure, exit code 1.
fn classify(error: anyhow::Error) -> Failure {
    use wirelat_control::peer::PeerError;
    use wirelat_control::ship::ShipError;
    let bad_input = error.chain().any(|c| {
        matches!(
            c.downcast_ref::<ShipError>(),
            Some(ShipError::Key(_) | ShipError::Config(_) | ShipError::Spill { .. })
        ) || matches!(
            c.downcast_ref::<PeerError>(),
            Some(PeerError::Key(_) | PeerError::Listen { .. } | PeerError::Memory(_))
        ) || c.is::<offline::BadInput>()
    });
    if bad_input { Failure::Usage(format!("{error:#}")) } else { Failure::Runtime(error) }
}

fn execute(command: Command) -> Result<(), Failure> {
    match command {
        Command::Run { config } => {
            let loaded = Config::load(&config).map_err(|e| Failure::Usage(e.to_string()))?;
            loaded.check_machine(&config, Purpose::Run).map_err(|e| Failure::Usage(e.to_string()))?;
            run_appliance(&loaded, &config)
        }
        Command::Offline { config, port0, port1, workers, replicas, loops } => {
            let loaded =
                Config::load_for(&config, Purpose::Offline).map_err(|e| Failure::Usage(e.to_string()))?;
            loaded.check_machine(&config, Purpose::Offline).map_err(|e| Failure::Usage(e.to_string()))?;
            let workers = workers.map_or_else(|| usize::from(loaded.queues()), usize::from);
            let load = if replicas { offline::Load::Replicas } else { offline::Load::Split };
            let opts = offline::Options { workers, load, loops };
            offline::run(&loaded, &port0, port1.as_deref(), &opts).map_err(classify)?;
            Ok(())
        }
        Command::Collect { config } => {
            let cfg = wirelat_control::peer::PeerConfig::load(&config)
                .map_err(|e| Failure::Usage(e.to_string()))?;
            wirelat_control::peer::run_until_signal(cfg).map_err(|e| classify(e.into()))
        }
        Command::SimPoint { config, pace_ms, from_epoch, crash_after } => {
            let opts = wirelat_control::sim_point::RunOptions {
                pace: std::time::Duration::from_millis(pace_ms),
                from_epoch,
                crash_after,
            };
            wirelat_control::sim_point::run(&config, opts).map_err(|e| Failure::Runtime(anyhow::anyhow!(e)))
        }
        Command::SamplePcap { out, empty } => sample_pcap::write(&out, empty).map_err(Failure::Runtime),
        Command::GenTrace(args) => gen_trace::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Replay(args) => replay::run(&args),
        #[cfg(feature = "dpdk")]
        Command::Demo(args) => demo::run(&args),
    }
}

#[cfg(feature = "dpdk")]
fn run_appliance(config: &Config, path: &std::path::Path) -> Result<(), Failure> {
    let summary = run::run(config).map_err(|e| match e.downcast_ref::<run::PortRefused>() {
        Some(r) => Failure::Usage(config.port_refusal(path, r.index, r.key, r.message.clone()).to_string()),
        None => classify(e),
    })?;
    // The outcome on stdout (logs are on stderr).
    for (p, t) in summary.ports.iter().enumerate() {
        let counts: Vec<String> = t.fields().iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!("port {p}: {}", counts.join(" "));
    }
    let m = &summary.measured;
    if m.frames > 0 || summary.epochs > 0 {
        println!(
            "measured {} skipped {} untimed {} late {} overrun_epochs {} overrun_packets {} epochs {}",
            m.measured,
            m.skipped(),
            m.untimed,
            m.late,
            summary.overrun_epochs,
            m.overrun_packets,
            summary.epochs
        );
    }
    let d = &summary.stamp_delay;
    if d.count > 0 {
        println!(
            "stamping delay: packets {} mean_ns {} p50_below_ns {} p99_below_ns {} max_ns {} negative {} max_negative_ns {}",
            d.count,
            d.mean_ns().map_or(0, |m| m.round() as u64),
            d.quantile_upper_ns(0.5).unwrap_or(0),
            d.quantile_upper_ns(0.99).unwrap_or(0),
            d.max_ns,
            d.negative,
            d.max_negative_ns
        );
    }
    println!("stopped: {:?}", summary.reason);
    match summary.lost {
        Some(lost) => Err(Failure::Runtime(anyhow::anyhow!(lost))),
        None => Ok(()),
    }
}

#[cfg(not(feature = "dpdk"))]
fn run_appliance(_config: &Config, _path: &std::path::Path) -> Result<(), Failure> {
    Err(Failure::Usage(
        "DPDK support was not compiled in: this wirelat was built without the `dpdk` feature \
         (rebuild with the default features on a machine with DPDK, see README.md)"
            .to_owned(),
    ))
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr: stdout is kept for data output.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
