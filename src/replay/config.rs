//! The configuration of `wirelat replay`: a TOML file, command-line flags, or a file with flags
//! overriding it. Nothing here touches DPDK, so it is checked (and tested) without it.
//!
//! ```toml
//! [eal]
//! args = ["--no-huge", "-m", "512", "--no-pci", "--no-shconf"]
//! main_core = 0              # CPU of the replay loop (the EAL main lcore)
//! # main_cpuset = "0-3"      # or: let it run on any of these CPUs (shared machines)
//!
//! [replay]
//! rate_multiplier = 1.0      # 1: recorded timing; 2: twice as fast; 0: as fast as possible
//! loops = 1                  # passes over the pcaps; 0: until SIGINT/SIGTERM
//!
//! [[stream]]                 # one per port: its pcap goes out of its device
//! pcap = "pair/a_port0.pcap"
//! device = "0000:3b:00.0"
//! [[stream]]
//! pcap = "pair/a_port1.pcap"
//! device = "0000:3b:00.1"
//! ```
//!
//! Several streams are merged into one schedule on their common clock: a frame at time t of
//! any pcap leaves (t − t₀)/rate_multiplier after the start, t₀ being the earliest timestamp of
//! all pcaps, so the relative timing between the ports is kept too. Paths (pcaps and those
//! inside device strings) are relative to the directory wirelat runs in. Unknown keys are
//! errors; every error names the file, line and column.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use wirelat_control::config::{ethdev_name, is_pci_address};

/// Largest burst the replay loop hands to a device at once.
pub const MAX_BURST_SIZE: u16 = 64;
/// Largest DPDK mempool per-lcore cache.
const MAX_MEMPOOL_CACHE: u32 = 512;
/// EAL options `wirelat replay` derives itself.
const RESERVED_EAL_OPTIONS: &[&str] = &["-l", "-c", "--lcores", "--main-lcore", "--master-lcore"];
/// Default bound on the memory the preloaded pcaps may take: 1 GiB.
pub const DEFAULT_MAX_PRELOAD_BYTES: u64 = 1 << 30;

/// A configuration that cannot be used; always a usage error (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ReplayConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML, does not fit the schema, or has a bad value.
    #[error("{}:{line}:{column}: {message}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// Line, from 1.
        line: usize,
        /// Column, from 1.
        column: usize,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A command-line value (or the combination of file and flags) is unusable.
    #[error("{0}")]
    Invalid(String),
}

/// The file's schema.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    eal: FileEal,
    #[serde(default)]
    replay: FileReplay,
    #[serde(default)]
    mempool: FileMempool,
    #[serde(default, rename = "stream")]
    streams: Vec<Spanned<FileStream>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FileEal {
    args: Spanned<Vec<String>>,
    main_core: u16,
    main_cpuset: Option<Spanned<String>>,
}

impl Default for FileEal {
    fn default() -> Self {
        Self { args: Spanned::new(0..0, Vec::new()), main_core: 0, main_cpuset: None }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FileReplay {
    rate_multiplier: Spanned<f64>,
    loops: u64,
    burst_size: Spanned<u16>,
    max_preload_bytes: Spanned<u64>,
    link_wait_ms: u64,
    stats_interval_ms: u64,
    sleep_above_us: u64,
}

impl Default for FileReplay {
    fn default() -> Self {
        let d = ReplayConfig::defaults();
        Self {
            rate_multiplier: Spanned::new(0..0, d.rate_multiplier),
            loops: d.loops,
            burst_size: Spanned::new(0..0, d.burst_size),
            max_preload_bytes: Spanned::new(0..0, d.max_preload_bytes),
            link_wait_ms: d.link_wait_ms,
            stats_interval_ms: d.stats_interval_ms,
            sleep_above_us: d.sleep_above_us,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FileMempool {
    mbufs: Option<Spanned<u32>>,
    data_room_bytes: Option<Spanned<u16>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileStream {
    pcap: PathBuf,
    device: String,
    #[serde(default = "default_tx_descriptors")]
    tx_descriptors: u16,
}

fn default_tx_descriptors() -> u16 {
    1024
}

/// One pcap and the device it leaves through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConfig {
    /// The pcap (classic pcap, µs or ns timestamps, Ethernet link type).
    pub pcap: PathBuf,
    /// Any DPDK device string: a PCI address (`-a`) or a virtual device (`--vdev`).
    pub device: String,
    /// Tx ring size (adjusted to the device's limits).
    pub tx_descriptors: u16,
}

impl StreamConfig {
    /// The ethdev name: the device string up to its first comma (PCI addresses get their
    /// domain).
    pub fn device_name(&self) -> String {
        ethdev_name(&self.device)
    }

    fn device_head(&self) -> &str {
        self.device.split(',').next().unwrap_or("").trim()
    }

    fn is_pci(&self) -> bool {
        is_pci_address(self.device_head())
    }
}

/// Everything `wirelat replay` needs, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayConfig {
    /// Extra EAL arguments (no lcore options).
    pub eal_args: Vec<String>,
    /// CPU of the replay loop (the EAL main lcore).
    pub main_core: u16,
    /// CPUs the replay loop may run on instead (`"0-3"`, `"0,2"`): the scheduler may move it
    /// between them. For shared machines, where one pinned CPU can be taken by other work for
    /// seconds; a testbed should pin (`main_core`).
    pub main_cpuset: Option<String>,
    /// Gaps are divided by this; 0 sends as fast as possible.
    pub rate_multiplier: f64,
    /// Passes over the pcaps; 0 = until a signal.
    pub loops: u64,
    /// Most frames handed to a device at once.
    pub burst_size: u16,
    /// Refuse pcaps whose frames (plus bookkeeping) need more memory than this.
    pub max_preload_bytes: u64,
    /// Wait up to this long for every link to come up before sending.
    pub link_wait_ms: u64,
    /// Log progress this often (0: only the summary at the end).
    pub stats_interval_ms: u64,
    /// Sleep (instead of spinning) through waits longer than this, waking 1 ms early; 0 always
    /// spins, the most exact timing at the price of a busy core.
    pub sleep_above_us: u64,
    /// Mbufs in the pool; computed when `None`.
    pub mbufs: Option<u32>,
    /// Data room per mbuf including the 128 B headroom; computed from the largest frame when
    /// `None`.
    pub data_room_bytes: Option<u16>,
    /// The streams, at least one.
    pub streams: Vec<StreamConfig>,
}

/// Command-line values that override (or replace) the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--pcap`, paired in order with `--device`.
    pub pcaps: Vec<PathBuf>,
    /// `--device`.
    pub devices: Vec<String>,
    /// `--rate-multiplier`.
    pub rate_multiplier: Option<f64>,
    /// `--loop`.
    pub loops: Option<u64>,
    /// `--eal-args`, split on whitespace, appended to the file's.
    pub eal_args: Option<String>,
    /// `--main-core`.
    pub main_core: Option<u16>,
    /// `--main-cpuset`.
    pub main_cpuset: Option<String>,
    /// `--max-preload-bytes`.
    pub max_preload_bytes: Option<u64>,
    /// `--sleep-above-us`.
    pub sleep_above_us: Option<u64>,
}

impl ReplayConfig {
    fn defaults() -> Self {
        Self {
            eal_args: Vec::new(),
            main_core: 0,
            main_cpuset: None,
            rate_multiplier: 1.0,
            loops: 1,
            burst_size: 32,
            max_preload_bytes: DEFAULT_MAX_PRELOAD_BYTES,
            link_wait_ms: 5000,
            stats_interval_ms: 1000,
            sleep_above_us: 0,
            mbufs: None,
            data_room_bytes: None,
            streams: Vec::new(),
        }
    }

    /// The configuration from an optional file and the command line's overrides.
    pub fn load(file: Option<&Path>, over: &Overrides) -> Result<Self, ReplayConfigError> {
        let mut c = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| ReplayConfigError::Read { path: path.to_owned(), source })?;
                Self::parse(&text, path)?
            }
            None => Self::defaults(),
        };
        if over.pcaps.len() != over.devices.len() {
            return Err(ReplayConfigError::Invalid(format!(
                "--pcap and --device pair up in order: {} pcaps and {} devices given",
                over.pcaps.len(),
                over.devices.len()
            )));
        }
        if !over.pcaps.is_empty() {
            // Streams on the command line replace the file's.
            c.streams = over
                .pcaps
                .iter()
                .zip(&over.devices)
                .map(|(p, d)| StreamConfig { pcap: p.clone(), device: d.clone(), tx_descriptors: 1024 })
                .collect();
        }
        if let Some(r) = over.rate_multiplier {
            c.rate_multiplier = r;
        }
        if let Some(l) = over.loops {
            c.loops = l;
        }
        if let Some(a) = &over.eal_args {
            c.eal_args.extend(a.split_whitespace().map(str::to_owned));
        }
        if let Some(core) = over.main_core {
            c.main_core = core;
            c.main_cpuset = None;
        }
        if let Some(set) = &over.main_cpuset {
            c.main_cpuset = Some(set.clone());
        }
        if let Some(m) = over.max_preload_bytes {
            c.max_preload_bytes = m;
        }
        if let Some(u) = over.sleep_above_us {
            c.sleep_above_us = u;
        }
        c.validate().map_err(ReplayConfigError::Invalid)?;
        Ok(c)
    }

    /// Parses and validates a file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ReplayConfigError> {
        let at = |span: Option<Range<usize>>, message: String| {
            let (line, column) = locate(text, span.map_or(0, |s| s.start));
            ReplayConfigError::InFile { path: path.to_owned(), line, column, message }
        };
        let f: FileConfig =
            toml::from_str(text).map_err(|e| at(e.span(), e.message().trim_end().to_owned()))?;
        let mut c = Self::defaults();
        c.eal_args = f.eal.args.get_ref().clone();
        c.main_core = f.eal.main_core;
        c.main_cpuset = f.eal.main_cpuset.as_ref().map(|s| s.get_ref().clone());
        c.rate_multiplier = *f.replay.rate_multiplier.get_ref();
        c.loops = f.replay.loops;
        c.burst_size = *f.replay.burst_size.get_ref();
        c.max_preload_bytes = *f.replay.max_preload_bytes.get_ref();
        c.link_wait_ms = f.replay.link_wait_ms;
        c.stats_interval_ms = f.replay.stats_interval_ms;
        c.sleep_above_us = f.replay.sleep_above_us;
        c.mbufs = f.mempool.mbufs.as_ref().map(|m| *m.get_ref());
        c.data_room_bytes = f.mempool.data_room_bytes.as_ref().map(|d| *d.get_ref());
        c.streams = f
            .streams
            .iter()
            .map(|s| {
                let s = s.get_ref();
                StreamConfig {
                    pcap: s.pcap.clone(),
                    device: s.device.clone(),
                    tx_descriptors: s.tx_descriptors,
                }
            })
            .collect();
        // Check each value where it was written, so the error can point at it.
        let checks: [SpanCheck; 6] = [
            (Some(f.replay.rate_multiplier.span()), check_rate(c.rate_multiplier)),
            (Some(f.replay.burst_size.span()), check_burst(c.burst_size)),
            (Some(f.replay.max_preload_bytes.span()), check_preload(c.max_preload_bytes)),
            (Some(f.eal.args.span()), check_eal_args(&c.eal_args)),
            (f.eal.main_cpuset.as_ref().map(Spanned::span), check_cpuset(c.main_cpuset.as_deref())),
            (f.mempool.data_room_bytes.as_ref().map(Spanned::span), check_data_room(c.data_room_bytes)),
        ];
        for (span, result) in checks {
            result.map_err(|m| at(span, m))?;
        }
        for (i, s) in f.streams.iter().enumerate() {
            check_stream(i, s.get_ref().tx_descriptors, &c.streams).map_err(|m| at(Some(s.span()), m))?;
        }
        Ok(c)
    }

    /// Checks every value (a file's values were also checked where they were written).
    pub fn validate(&self) -> Result<(), String> {
        check_rate(self.rate_multiplier)?;
        check_burst(self.burst_size)?;
        check_preload(self.max_preload_bytes)?;
        check_eal_args(&self.eal_args)?;
        check_cpuset(self.main_cpuset.as_deref())?;
        check_data_room(self.data_room_bytes)?;
        if self.streams.is_empty() {
            return Err(
                "nothing to replay: give --pcap FILE --device DEVICE, or [[stream]] tables in --config"
                    .into(),
            );
        }
        for (i, s) in self.streams.iter().enumerate() {
            check_stream(i, s.tx_descriptors, &self.streams)?;
        }
        if let Some(n) = self.mbufs
            && n < self.min_mbufs()
        {
            return Err(format!(
                "[mempool] mbufs = {n} is too few: the tx rings and bursts alone need {}",
                self.min_mbufs()
            ));
        }
        Ok(())
    }

    /// Mbufs the rings, the mempool cache and two bursts per stream can hold at once.
    fn min_mbufs(&self) -> u32 {
        let rings: u32 = self.streams.iter().map(|s| u32::from(s.tx_descriptors) + RX_DESCRIPTORS).sum();
        rings + MEMPOOL_CACHE + 2 * u32::from(MAX_BURST_SIZE) * self.streams.len() as u32
    }

    /// The pool size: configured, or [`Self::min_mbufs`] plus slack for chained frames,
    /// rounded up to 2^k − 1 (DPDK's optimum).
    pub fn mempool_mbufs(&self) -> u32 {
        if let Some(n) = self.mbufs {
            return n;
        }
        let need = self.min_mbufs().saturating_add(1024);
        need.saturating_add(1).checked_next_power_of_two().map_or(u32::MAX, |p| p - 1)
    }

    /// The full EAL argument list: `[eal] args`, the one lcore, and one `-a`/`--vdev` per
    /// stream.
    pub fn full_eal_args(&self) -> Vec<String> {
        let mut args = self.eal_args.clone();
        match &self.main_cpuset {
            Some(set) => args.push(format!("--lcores=0@({set})")),
            None => args.push(format!("--lcores=0@{}", self.main_core)),
        }
        args.push("--main-lcore=0".to_owned());
        for s in &self.streams {
            if s.is_pci() {
                args.push("-a".to_owned());
                args.push(s.device.trim().to_owned());
            } else {
                args.push(format!("--vdev={}", s.device.trim()));
            }
        }
        args
    }
}

/// A value's span in the file and its check.
type SpanCheck = (Option<Range<usize>>, Result<(), String>);

/// Rx descriptors set up on every port: the replay never receives, but ports need a queue.
pub const RX_DESCRIPTORS: u32 = 128;
/// Per-lcore mempool cache of the replay pool.
pub const MEMPOOL_CACHE: u32 = 256;
const _: () = assert!(MEMPOOL_CACHE <= MAX_MEMPOOL_CACHE);

fn check_rate(r: f64) -> Result<(), String> {
    if r.is_finite() && r >= 0.0 {
        Ok(())
    } else {
        Err(format!("rate_multiplier {r} must be a finite number >= 0 (0 sends as fast as possible)"))
    }
}

fn check_burst(b: u16) -> Result<(), String> {
    if (1..=MAX_BURST_SIZE).contains(&b) {
        Ok(())
    } else {
        Err(format!("burst_size {b} is outside 1..={MAX_BURST_SIZE}"))
    }
}

fn check_preload(b: u64) -> Result<(), String> {
    if b == 0 { Err("max_preload_bytes must be positive".into()) } else { Ok(()) }
}

fn check_data_room(d: Option<u16>) -> Result<(), String> {
    match d {
        Some(d) if d < 128 + 64 => {
            Err(format!("data_room_bytes {d} leaves no room for a minimum frame after the 128 B headroom"))
        }
        _ => Ok(()),
    }
}

fn check_eal_args(args: &[String]) -> Result<(), String> {
    for arg in args {
        let option = arg.split('=').next().unwrap_or(arg);
        if RESERVED_EAL_OPTIONS.contains(&option) {
            return Err(format!("EAL option `{arg}` is derived from main_core; remove it"));
        }
    }
    Ok(())
}

/// A CPU list as DPDK's `--lcores` takes it inside parentheses: numbers, ranges, commas.
fn check_cpuset(set: Option<&str>) -> Result<(), String> {
    let Some(set) = set else { return Ok(()) };
    let ok = set.split(',').all(|part| {
        let mut ends = part.splitn(2, '-');
        let first = ends.next().is_some_and(|n| !n.is_empty() && n.parse::<u16>().is_ok());
        first && ends.next().is_none_or(|n| n.parse::<u16>().is_ok())
    });
    if ok { Ok(()) } else { Err(format!("main_cpuset {set:?}: expected CPUs like \"0-3\" or \"0,2,4\"")) }
}

fn check_stream(i: usize, tx_descriptors: u16, streams: &[StreamConfig]) -> Result<(), String> {
    let Some(s) = streams.get(i) else { return Ok(()) };
    if s.device_head().is_empty() {
        return Err(format!("stream {i}: the device string is empty"));
    }
    if s.pcap.as_os_str().is_empty() {
        return Err(format!("stream {i}: the pcap path is empty"));
    }
    if streams[..i].iter().any(|o| o.device_name() == s.device_name()) {
        return Err(format!("stream {i}: device `{}` is used by two streams", s.device_name()));
    }
    if tx_descriptors == 0 {
        return Err(format!("stream {i}: tx_descriptors must be positive"));
    }
    Ok(())
}

/// Line and column (from 1) of byte `offset` of `text`.
fn locate(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before.get(line_start..).map_or(1, |s| s.chars().count() + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ReplayConfig, ReplayConfigError> {
        ReplayConfig::parse(text, Path::new("r.toml"))
    }

    const STREAM: &str = "[[stream]]\npcap = \"a.pcap\"\ndevice = \"net_pcap0,tx_pcap=o.pcap\"\n";

    #[test]
    fn file_values_and_defaults() {
        let c = parse(&format!("[replay]\nrate_multiplier = 2.5\nloops = 0\n{STREAM}"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.rate_multiplier, 2.5);
        assert_eq!(c.loops, 0);
        assert_eq!(c.burst_size, 32);
        assert_eq!(c.streams[0].device_name(), "net_pcap0");
        assert!(c.full_eal_args().contains(&"--vdev=net_pcap0,tx_pcap=o.pcap".to_owned()));
        assert!(c.mempool_mbufs() >= c.min_mbufs() && (c.mempool_mbufs() + 1).is_power_of_two());
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse(&format!("[replay]\nrate_multiplier = -1.0\n{STREAM}")).map(|_| ()).unwrap_err();
        assert!(e.to_string().starts_with("r.toml:2:19: rate_multiplier -1"), "{e}");
        let e = parse(&format!("[replay]\nspeed = 1\n{STREAM}")).map(|_| ()).unwrap_err();
        assert!(e.to_string().starts_with("r.toml:2:1:") && e.to_string().contains("speed"), "{e}");
        let e = parse(&format!("{STREAM}{STREAM}")).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("used by two streams"), "{e}");
        let e = parse(&format!("[eal]\nargs = [\"-l\", \"1\"]\n{STREAM}")).map(|_| ()).unwrap_err();
        assert!(e.to_string().starts_with("r.toml:2:"), "{e}");
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let text = include_str!("../../configs/replay/pcap-pair.toml");
        let c = ReplayConfig::parse(text, Path::new("configs/replay/pcap-pair.toml"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.streams.len(), 2);
        assert_eq!((c.rate_multiplier, c.loops, c.sleep_above_us), (1.0, 1, 0));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn flags_override_and_pair_up() {
        let over = Overrides {
            pcaps: vec!["x.pcap".into()],
            devices: vec!["0000:3b:00.0".into()],
            rate_multiplier: Some(0.0),
            loops: Some(3),
            eal_args: Some("--no-huge -m 512".into()),
            ..Overrides::default()
        };
        let c = ReplayConfig::load(None, &over).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((c.rate_multiplier, c.loops), (0.0, 3));
        let args = c.full_eal_args();
        assert_eq!(&args[..3], ["--no-huge", "-m", "512"]);
        assert!(args.windows(2).any(|w| w[0] == "-a" && w[1] == "0000:3b:00.0"));
        let unpaired = Overrides { pcaps: vec!["x.pcap".into()], ..Overrides::default() };
        assert!(ReplayConfig::load(None, &unpaired).is_err());
        assert!(ReplayConfig::load(None, &Overrides::default()).is_err(), "no stream at all");
        let floating = Overrides { main_cpuset: Some("0-1".into()), ..over.clone() };
        let c = ReplayConfig::load(None, &floating).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.full_eal_args().contains(&"--lcores=0@(0-1)".to_owned()));
        for bad in ["", "0-", "a", "0;1", "1-2-3"] {
            let o = Overrides { main_cpuset: Some(bad.into()), ..over.clone() };
            assert!(ReplayConfig::load(None, &o).is_err(), "{bad:?}");
        }
        let bad_rate = Overrides { rate_multiplier: Some(f64::NAN), ..over };
        assert!(ReplayConfig::load(None, &bad_rate).is_err());
    }
}
