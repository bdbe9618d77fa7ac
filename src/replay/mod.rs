//! `wirelat replay`: sends pcaps out of DPDK ports at their recorded timing (scaled by a rate
//! multiplier) or as fast as possible, once, N times or until a signal — what MoonGen's
//! `replay-pcap.lua` does, for machines without MoonGen.
//!
//! - [`config`]: the TOML file and flags (no DPDK).
//! - [`schedule`]: preloading the pcaps (bounded memory), the merged schedule and the lateness
//!   statistics (no DPDK).
//! - `engine`: the EAL, the ports and the TSC-paced loop (only with the `dpdk` feature).
//!
//! Exit codes: 0 done (all passes, or stopped by SIGINT/SIGTERM), 1 a DPDK or device failure,
//! 2 a bad configuration, flag or pcap (also on a build without DPDK, after the configuration
//! and pcaps were checked).

// Without DPDK the engine is absent, and with it the only user of the pacing helpers.
#[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
pub mod config;
#[cfg(feature = "dpdk")]
mod engine;
#[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
pub mod schedule;

use std::path::PathBuf;

use config::{Overrides, ReplayConfig};
use schedule::{Schedule, StreamFrames};

use crate::Failure;

/// Arguments of `wirelat replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// TOML configuration (see configs/replay/pcap-pair.toml); flags override it.
    #[arg(long, short, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// A pcap to send (repeatable; the n-th --pcap leaves through the n-th --device). Replaces
    /// the file's [[stream]] tables.
    #[arg(long, value_name = "FILE.pcap")]
    pub pcap: Vec<PathBuf>,
    /// The DPDK device a pcap leaves through: a PCI address or a virtual device string such as
    /// net_pcap0,tx_pcap=out.pcap (repeatable).
    #[arg(long, value_name = "DEVICE")]
    pub device: Vec<String>,
    /// Divide the recorded gaps by this: 1 = recorded timing, 2 = twice as fast, 0 = as fast
    /// as possible [default: 1].
    #[arg(long, short = 'r', value_name = "X", allow_negative_numbers = true)]
    pub rate_multiplier: Option<f64>,
    /// Passes over the pcaps; 0 = until SIGINT/SIGTERM [default: 1].
    #[arg(long = "loop", short = 'l', value_name = "N")]
    pub loops: Option<u64>,
    /// Extra EAL arguments, whitespace-separated, appended to the file's
    /// (e.g. "--no-huge -m 512 --no-pci --no-shconf").
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub eal_args: Option<String>,
    /// CPU the replay loop runs on (the EAL main lcore) [default: 0].
    #[arg(long, value_name = "CPU")]
    pub main_core: Option<u16>,
    /// Let the replay loop run on any of these CPUs instead of one (e.g. "0-3"): for shared
    /// machines; a testbed should pin with --main-core.
    #[arg(long, value_name = "CPUS", conflicts_with = "main_core")]
    pub main_cpuset: Option<String>,
    /// Refuse pcaps whose frames need more memory than this [default: 1073741824].
    #[arg(long, value_name = "BYTES")]
    pub max_preload_bytes: Option<u64>,
    /// Sleep instead of spinning through waits longer than this (waking 1 ms early); 0 always
    /// spins, the most exact timing [default: 0].
    #[arg(long, value_name = "US")]
    pub sleep_above_us: Option<u64>,
}

fn usage(e: impl std::fmt::Display) -> Failure {
    Failure::Usage(e.to_string())
}

/// Runs `wirelat replay`.
pub fn run(args: &ReplayArgs) -> Result<(), Failure> {
    let over = Overrides {
        pcaps: args.pcap.clone(),
        devices: args.device.clone(),
        rate_multiplier: args.rate_multiplier,
        loops: args.loops,
        eal_args: args.eal_args.clone(),
        main_core: args.main_core,
        main_cpuset: args.main_cpuset.clone(),
        max_preload_bytes: args.max_preload_bytes,
        sleep_above_us: args.sleep_above_us,
    };
    let cfg = ReplayConfig::load(args.config.as_deref(), &over).map_err(usage)?;
    let (frames, schedule) = preload(&cfg)?;
    replay(&cfg, &frames, &schedule)
}

/// Loads every stream's pcap within the memory bound and merges the schedule.
fn preload(cfg: &ReplayConfig) -> Result<(Vec<StreamFrames>, Schedule), Failure> {
    let mut budget = cfg.max_preload_bytes;
    let mut frames = Vec::with_capacity(cfg.streams.len());
    for s in &cfg.streams {
        let f = schedule::load_pcap(&s.pcap, &mut budget, cfg.max_preload_bytes).map_err(usage)?;
        if f.truncated > 0 {
            tracing::warn!(pcap = %s.pcap.display(), frames = f.truncated,
                "frames were captured shorter than they were on the wire; sending the captured bytes");
        }
        if f.backwards > 0 {
            tracing::warn!(pcap = %s.pcap.display(), frames = f.backwards,
                "timestamps go backwards; those frames follow their predecessor at once");
        }
        if f.is_empty() {
            tracing::warn!(pcap = %s.pcap.display(), "the pcap has no frames: nothing leaves this device");
        }
        tracing::info!(pcap = %s.pcap.display(), frames = f.len(), nanosecond = f.nanosecond,
            largest_frame = f.max_frame, "pcap loaded");
        if f.empty > 0 {
            tracing::warn!(pcap = %s.pcap.display(), records = f.empty, "records without bytes skipped");
        }
        frames.push(f);
    }
    let schedule = Schedule::merge(&frames).map_err(usage)?;
    tracing::info!(
        frames = schedule.slots.len(),
        span_ns = schedule.span_ns,
        preloaded_bytes = cfg.max_preload_bytes - budget,
        "pcaps preloaded"
    );
    Ok((frames, schedule))
}

#[cfg(feature = "dpdk")]
fn replay(cfg: &ReplayConfig, frames: &[StreamFrames], schedule: &Schedule) -> Result<(), Failure> {
    let summary = engine::run(cfg, frames, schedule).map_err(Failure::Runtime)?;
    print!("{}", render_summary(cfg, schedule, &summary));
    Ok(())
}

#[cfg(not(feature = "dpdk"))]
fn replay(_cfg: &ReplayConfig, _frames: &[StreamFrames], _schedule: &Schedule) -> Result<(), Failure> {
    Err(Failure::Usage(
        "DPDK support was not compiled in: this wirelat was built without the `dpdk` feature \
         (the configuration and pcaps are valid; rebuild with the default features to send them)"
            .to_owned(),
    ))
}

/// The summary printed on stdout at the end (logs go to stderr).
#[cfg(feature = "dpdk")]
fn render_summary(cfg: &ReplayConfig, schedule: &Schedule, s: &engine::ReplaySummary) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for (i, (t, c)) in s.streams.iter().zip(&cfg.streams).enumerate() {
        let _ = writeln!(
            out,
            "stream {i}: {} <- {}: sent {} frames {} bytes, chained {}, tx_retries {}, unsent {}; \
             device tx {} oerrors {}",
            t.device,
            c.pcap.display(),
            t.frames,
            t.bytes,
            t.chained,
            t.tx_retries,
            t.unsent,
            t.device_stats.tx_packets,
            t.device_stats.tx_errors
        );
    }
    let frames: u64 = s.streams.iter().map(|t| t.frames).sum();
    let bytes: u64 = s.streams.iter().map(|t| t.bytes).sum();
    let secs = s.elapsed_ns as f64 / 1e9;
    let (fps, mbps) =
        if secs > 0.0 { (frames as f64 / secs, bytes as f64 * 8.0 / secs / 1e6) } else { (0.0, 0.0) };
    let _ = writeln!(
        out,
        "sent {frames} frames {bytes} bytes in {secs:.6} s ({fps:.1} frames/s, {mbps:.3} Mbit/s of frame bytes)"
    );
    if cfg.rate_multiplier > 0.0 && s.passes > 0 {
        // Pass k starts k periods after the first; the last pass ends with its last frame.
        let trace_ns = (s.passes - 1) as f64 * schedule.period_ns as f64 + schedule.span_ns as f64;
        let _ = writeln!(
            out,
            "schedule: {:.6} s of trace time at rate multiplier {} = {:.6} s from first to last frame",
            trace_ns / 1e9,
            cfg.rate_multiplier,
            trace_ns / cfg.rate_multiplier / 1e9
        );
    }
    let l = &s.lateness;
    if l.count() > 0 {
        let _ = writeln!(
            out,
            "timing error (handed to the driver minus due) over {} frames: mean {:.0} ns, p50 <= {} ns, \
             p99 <= {} ns, max {} ns",
            l.count(),
            l.mean_ns(),
            l.quantile_ns(0.5),
            l.quantile_ns(0.99),
            l.max_ns()
        );
    } else {
        let _ = writeln!(out, "timing: as fast as possible (no schedule)");
    }
    if s.pool_waits > 0 {
        let _ = writeln!(out, "waited {} times for the devices to free mbufs", s.pool_waits);
    }
    let _ = writeln!(
        out,
        "passes {} of {}; stopped: {:?}",
        s.passes,
        if cfg.loops == 0 { "unlimited".to_owned() } else { cfg.loops.to_string() },
        s.reason
    );
    out
}
