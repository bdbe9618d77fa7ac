//! The small tables of `wirelat run`'s configuration (`[monitor]`, `[point]`, `[segments]`,
//! `[epochs]`, `[clock]`, `[output]`, `[[route]]`, `[metrics]`, `[debug]`, `[eal]`, `[workers]`,
//! `[mempool]`, `[stats]`, `[stop]`): their keys and defaults. The file's schema and its
//! validation are in the parent module.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;
use wirelat_dataplane::pipeline::OverrunPolicy;

use super::PortConfig;
use crate::ship::ShipConfig;

/// `[monitor]`: monitor mode on one port that sees both directions (see
/// `wirelat_dataplane::pipeline::split`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorConfig {
    /// The inside prefixes (`"10.0.0.0/8"`, `"2001:db8::/32"`, or an address): a packet from
    /// inside to outside is measured as forward (as if received on port 0), outside to inside
    /// as reverse, whatever port it arrived on; one with both or neither address inside is
    /// counted (`split_both`, `split_neither`) and not measured. 1 to 64 prefixes.
    pub inside: Vec<String>,
}

pub(super) fn default_segments() -> Spanned<SegmentsConfig> {
    Spanned::new(0..0, SegmentsConfig::default())
}

pub(super) fn no_ports() -> Spanned<Vec<PortConfig>> {
    Spanned::new(0..0, Vec::new())
}

/// `[point]`: this appliance.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PointConfig {
    /// The point id carried by every message (both points of a segment need different ids).
    pub id: u32,
}

impl Default for PointConfig {
    fn default() -> Self {
        Self { id: 1 }
    }
}

/// `[segments]`: which segment each direction's two-point synopses belong to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SegmentsConfig {
    /// Segment of packets received on port 0 (client → server).
    pub forward: u32,
    /// Segment of packets received on port 1 (server → client).
    pub reverse: u32,
}

impl Default for SegmentsConfig {
    fn default() -> Self {
        Self { forward: 1, reverse: 2 }
    }
}

/// `[epochs]`: windows of the packet timestamp and the per-worker buffer ring.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EpochsConfig {
    /// Epoch length E in milliseconds: epoch k is [k·E, (k+1)·E) of the packet timestamp.
    pub length_ms: Spanned<u64>,
    /// Synopsis buffers per worker (at least 2).
    pub ring: Spanned<usize>,
    /// What a worker does when the control thread has not returned a buffer at a boundary:
    /// `skip` (count it, do not measure that epoch; live) or `wait` (trace replay).
    pub overrun: OverrunPolicy,
    /// Whether the workers, on idle polls, file RDA's logs and gather and encode LDS's flow
    /// lists of a closed epoch instead of the control thread
    /// (`wirelat_dataplane::pipeline::filing`): the control thread then does a fraction of a
    /// ns per packet for each instead of about 8 (RDA) and 3 (LDS), and the workers that work
    /// in their idle time.
    pub worker_filing: bool,
}

impl Default for EpochsConfig {
    fn default() -> Self {
        Self {
            length_ms: Spanned::new(0..0, 1000),
            ring: Spanned::new(0..0, 4),
            overrun: OverrunPolicy::Skip,
            worker_filing: true,
        }
    }
}

impl EpochsConfig {
    /// E in ns.
    pub fn length_ns(&self) -> u64 {
        self.length_ms.get_ref().saturating_mul(1_000_000)
    }
}

/// Where packet timestamps come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The pcap record time delivered by DPDK's pcap device (µs on DPDK 22.11), for replays.
    Trace,
    /// The TSC read once per burst, converted to wall-clock ns.
    #[default]
    Tsc,
    /// The NIC's rx timestamp, converted to wall-clock ns; TSC where a port lacks it.
    Nic,
    /// The kernel's receive time of each frame, from DPDK's pcap device on a live interface
    /// (`net_pcapN,iface=IF`, `rx_iface=IF` or `rx_iface_in=IF`): libpcap reads the time the
    /// kernel stamped on arrival (CLOCK_REALTIME) and DPDK 22.11 hands it on in whole µs, so
    /// the resolution is 1 µs, but the time a frame then waits unstamped (in the ring, or for
    /// a descheduled worker) is not in it. Frames of other ports have no such time and are
    /// counted as untimed.
    Kernel,
}

impl ClockSource {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ClockSource::Trace => "trace",
            ClockSource::Tsc => "tsc",
            ClockSource::Nic => "nic",
            ClockSource::Kernel => "kernel",
        }
    }
}

/// `[clock]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClockConfig {
    /// `trace`, `tsc` (default), `nic` or `kernel`.
    pub source: ClockSource,
}

/// `[output]`: the local outputs of harvested epochs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// JSON lines (one per epoch and synopsis) to this file, or `-` for stdout.
    pub json: Option<String>,
    /// Write each message's encoded body to a file in this directory.
    pub dump_dir: Option<PathBuf>,
    /// Append COLATE's closed counter epochs to archives in this directory.
    pub colate_archive: Option<PathBuf>,
}

/// One `[[route]]`: a collector that owns some segments (and perhaps the fridge). The point
/// ships it exactly the epoch synopses of those, through a network sink of its own (queue,
/// spill directory, retries: `ship`, the fields of `[ship]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The segment ids whose two-point synopses go to this collector.
    #[serde(default)]
    pub segments: Vec<u32>,
    /// Whether the fridge (the point's own, segment 0) goes to this collector too.
    #[serde(default)]
    pub fridge: bool,
    /// Where and how: `{ peer = "host:port", key_file = "…", … }` as in `[ship]`.
    pub ship: ShipConfig,
}

impl RouteConfig {
    /// Whether a message of `segment` (0: the fridge) goes this way.
    pub fn owns(&self, segment: u32) -> bool {
        if segment == crate::sink::LOCAL_SEGMENT { self.fridge } else { self.segments.contains(&segment) }
    }
}

/// `[metrics]`: the point's `/metrics` endpoint (`wirelat run` and `wirelat offline`), with every
/// counter the run logs ([`crate::report::point`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// `host:port` to serve `GET /metrics` on; no endpoint when absent.
    pub listen: Option<String>,
    /// After the run has ended, keep serving the final values this long, so a scraper sees
    /// them (a short offline run ends between two scrapes); 0 stops at once.
    pub linger_ms: u64,
}

/// `[debug]`: knobs for tests; leave them alone in production.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DebugConfig {
    /// Sleep this long before each harvest (makes the control thread slow, to test overruns).
    pub harvest_delay_ms: u64,
}

/// `[eal]`: how the DPDK EAL is started.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EalConfig {
    /// Extra EAL arguments, e.g. `["--no-huge", "-m", "512", "--no-pci", "--no-shconf"]`.
    /// Lcore options are derived from `[workers]` and rejected here; port devices are added as
    /// `--vdev` / `-a` from `[[port]] device`.
    pub args: Spanned<Vec<String>>,
    /// CPU of the main lcore (control thread); overrides the core plan.
    pub main_core: Option<u16>,
}

impl Default for EalConfig {
    fn default() -> Self {
        Self { args: Spanned::new(0..0, Vec::new()), main_core: None }
    }
}

/// `[workers]`: one worker per queue index.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersConfig {
    /// CPU of each worker; worker `i` polls rx queue `i` of both ports. Its length is the
    /// number of queues per port. Overrides the core plan (and `count`).
    pub cores: Option<Spanned<Vec<u16>>>,
    /// Number of workers when `cores` is absent: the core plan places them.
    pub count: Spanned<u16>,
    /// Mbufs per rx burst, 1..=64.
    pub burst_size: Spanned<u16>,
    /// Extra tx bursts tried while a tx ring is full before the rest is dropped (and counted).
    pub tx_retry_limit: u32,
    /// Monitor mode, for mirror (SPAN) ports and optical taps: both ports receive only, one
    /// direction each (port 0 carries port 0 → port 1 traffic, port 1 the reverse), and
    /// nothing is transmitted. Measures exactly what inline mode measures on the same frames.
    pub monitor: bool,
    /// Idle mode: after this many µs without a received frame, a worker sleeps
    /// `idle_sleep_us` between polls, until a frame arrives. 0 (the default) busy-polls always,
    /// as a dedicated core should; on a shared core it keeps the worker from starving others.
    pub idle_after_us: u64,
    /// Length of each idle pause in µs (the added latency of the first frame after a quiet
    /// spell is at most this plus the kernel's timer slack).
    pub idle_sleep_us: u32,
}

impl Default for WorkersConfig {
    fn default() -> Self {
        Self {
            cores: None,
            count: Spanned::new(0..0, 1),
            burst_size: Spanned::new(0..0, 32),
            tx_retry_limit: 64,
            monitor: false,
            idle_after_us: 0,
            idle_sleep_us: 100,
        }
    }
}

/// `[mempool]`: the mbuf pool shared by both ports.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MempoolConfig {
    /// Number of mbufs; computed from queues and ring sizes when absent.
    pub mbufs: Option<u32>,
    /// Per-lcore cache, at most 512.
    pub cache_size: Spanned<u32>,
    /// Data room per mbuf including the 128-byte headroom. Larger frames are chained over
    /// several mbufs (where the devices support it).
    pub data_room_bytes: Spanned<u16>,
}

impl Default for MempoolConfig {
    fn default() -> Self {
        Self {
            mbufs: None,
            cache_size: Spanned::new(0..0, 256),
            data_room_bytes: Spanned::new(0..0, 2048 + 128),
        }
    }
}

/// `[stats]`: counter logging.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatsConfig {
    /// Log the counters every this many milliseconds; 0 logs them only at exit.
    pub interval_ms: u64,
}

impl Default for StatsConfig {
    fn default() -> Self {
        Self { interval_ms: 1000 }
    }
}

/// `[stop]`: conditions that end the run without a signal. 0 disables a condition.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StopConfig {
    /// Stop once no port received anything for this long while the workers kept finding their
    /// queues empty (trace mode: the pcap driver reads its file once, then idles). Time a worker
    /// spends on frames it already holds, waiting for epoch buffers, does not count.
    pub idle_ms: u64,
    /// Stop after this long in total.
    pub after_ms: u64,
}

/// What the configuration is loaded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `wirelat run`: the two `[[port]]` tables are required.
    Run,
    /// `wirelat offline`: ports are ignored (pcap files stand in for them).
    Offline,
}
