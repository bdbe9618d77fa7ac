//! The TOML configuration of `wirelat run`: schema, defaults, validation, and the EAL argument
//! list derived from it.
//!
//! Every optional key has a default; unknown keys are rejected; every error names the file,
//! the line and column, and the key. Nothing here touches DPDK, so it builds and is tested
//! without it.
//!
//! ```toml
//! [eal]
//! args = ["--no-huge", "-m", "512", "--no-pci", "--no-shconf"]
//! [workers]
//! cores = [1]            # worker i polls rx queue i of both ports
//! [[port]]
//! device = "net_pcap0,rx_pcap=data/sample.pcap,tx_pcap=out/port0.pcap"
//! [[port]]
//! device = "0000:3b:00.1"
//! ```

use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;
use wirelat_dataplane::packet::PacketConfig;
use wirelat_dataplane::pipeline::{DirectionSplit, SplitError, SynopsisSet};

use crate::af_xdp;
use crate::core_plan::CorePlan;
use crate::publish::PointIds;
use crate::ship::ShipConfig;
use crate::sink::LOCAL_SEGMENT;
use crate::synopses::SynopsesConfig;

mod error;
mod port;
mod tables;
pub use error::{ConfigError, Location};
use error::{invalid, key_span, table_start};
pub use port::{DeviceKind, PortConfig, ethdev_name, is_pci_address};
pub use tables::{
    ClockConfig, ClockSource, DebugConfig, EalConfig, EpochsConfig, MempoolConfig, MetricsConfig,
    MonitorConfig, OutputConfig, PointConfig, Purpose, RouteConfig, SegmentsConfig, StatsConfig, StopConfig,
    WorkersConfig,
};
use tables::{default_segments, no_ports};

/// Largest rx/tx burst a worker handles (the size of its fixed mbuf array).
pub const MAX_BURST_SIZE: u16 = 64;

/// Largest DPDK mempool per-lcore cache (`RTE_MEMPOOL_CACHE_MAX_SIZE`).
pub const MAX_MEMPOOL_CACHE: u32 = 512;

/// EAL options wirelat derives itself; giving them in `[eal] args` would contradict it.
const RESERVED_EAL_OPTIONS: &[&str] = &["-l", "-c", "--lcores", "--main-lcore", "--master-lcore"];

/// The `[[port]]` setting a device refused ([`Config::port_refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortKey {
    /// `mtu` (or the interface's MTU when none is written).
    Mtu,
    /// `device`: the device string, its arguments, the interface it names.
    Device,
    /// The queues, one per worker (`[workers] cores` or `count`).
    Queues,
}

/// The whole `wirelat run` configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// EAL options.
    #[serde(default)]
    pub eal: EalConfig,
    /// Worker lcores and their loop.
    #[serde(default)]
    pub workers: WorkersConfig,
    /// The mbuf pool.
    #[serde(default)]
    pub mempool: MempoolConfig,
    /// Counter logging.
    #[serde(default)]
    pub stats: StatsConfig,
    /// When to stop on its own (trace mode, benchmarks).
    #[serde(default)]
    pub stop: StopConfig,
    /// The two ports of the bump in the wire (`[[port]]` tables). Required by `wirelat run`,
    /// ignored by `wirelat offline`.
    #[serde(rename = "port", default = "no_ports")]
    pub ports: Spanned<Vec<PortConfig>>,
    /// This measurement point.
    #[serde(default)]
    pub point: PointConfig,
    /// Segment ids of the two directions.
    #[serde(default = "default_segments")]
    pub segments: Spanned<SegmentsConfig>,
    /// Epoch windows and the buffer ring.
    #[serde(default)]
    pub epochs: EpochsConfig,
    /// Where packet timestamps come from.
    #[serde(default)]
    pub clock: ClockConfig,
    /// The packet layer (`[packet]`, `[packet.classify]`): identity seed, payload prefix,
    /// request/response classifiers.
    #[serde(default)]
    pub packet: Option<Spanned<PacketConfig>>,
    /// Which synopses run, with their configurations (`[synopses.<name>]`); none = forward only.
    #[serde(default)]
    pub synopses: Option<Spanned<SynopsesConfig>>,
    /// Where harvested epochs go.
    #[serde(default)]
    pub output: OutputConfig,
    /// Ship every harvested epoch to a peer (`wirelat collect`) over the network, besides the
    /// local `[output]` sinks (W9's [`crate::ship::NetworkSink`]).
    #[serde(default)]
    pub ship: Option<Spanned<ShipConfig>>,
    /// Many collectors (`[[route]]`): each gets the epoch synopses of its own segments (and,
    /// when it says so, the fridge), so a fleet is split by segment across collectors.
    #[serde(default, rename = "route")]
    pub routes: Vec<Spanned<RouteConfig>>,
    /// The point's own Prometheus endpoint (`[metrics]`), off by default.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// `[monitor]`: the direction of each packet from inside prefixes, for one port carrying
    /// both directions (a mirror/SPAN port); absent: the port's direction.
    #[serde(default)]
    pub monitor: Option<Spanned<MonitorConfig>>,
    /// Knobs for tests.
    #[serde(default)]
    pub debug: DebugConfig,
}

impl Config {
    /// Reads, parses and validates `path` for `wirelat run`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::load_for(path, Purpose::Run)
    }

    /// Reads, parses and validates `path` for `purpose`.
    pub fn load_for(path: &Path, purpose: Purpose) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        Self::parse_for(&text, path, purpose)
    }

    /// What only this machine can tell about the configuration loaded from `path` (its text
    /// parses the same anywhere): outputs that name the wrong kind of file and, for
    /// `wirelat run`, cores the EAL could not use. Called by the commands before they start
    /// anything; the error names the file, line, column and key.
    pub fn check_machine(&self, path: &Path, purpose: Purpose) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        self.check_output_paths(&text, path)?;
        if purpose == Purpose::Run
            && let Some(usable) = usable_cpus()
        {
            self.check_cores(&text, path, &usable)?;
        }
        Ok(())
    }

    /// A refusal of `[[port]]` number `index`'s `key` that only opening the device could find
    /// (an MTU its driver or kernel interface does not take, queues it does not have, an
    /// interface that does not exist), as the same error a bad value in the file gives: the
    /// file, line, column and key of the setting, then `message`. The MTU is located at
    /// `mtu`, or at `device` when no `mtu` was written (the interface's own MTU was used).
    pub fn port_refusal(&self, path: &Path, index: usize, key: PortKey, message: String) -> ConfigError {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let port = self.ports.get_ref().get(index);
        let span = match (key, port) {
            (PortKey::Mtu, Some(p)) if p.mtu_is_explicit() => Some(p.mtu.span()),
            (PortKey::Mtu | PortKey::Device, Some(p)) => Some(p.device.span()),
            (PortKey::Queues, _) => {
                Some(self.workers.cores.as_ref().map_or_else(|| self.workers.count.span(), Spanned::span))
            }
            (_, None) => None,
        };
        invalid(path, &text, span, message)
    }

    /// `[output] json` must not be a directory, `dump_dir` and `colate_archive` not a file
    /// (each would fail only when the run opens it, as a runtime error with exit code 1).
    fn check_output_paths(&self, text: &str, path: &Path) -> Result<(), ConfigError> {
        let table = table_start(text, "[output]").unwrap_or(0);
        let fail = |key: &str, message: String| {
            let span = key_span(text, table..table, key);
            Err(invalid(path, text, Some(span), message))
        };
        if let Some(json) = self.output.json.as_deref().filter(|j| *j != "-")
            && Path::new(json).is_dir()
        {
            return fail("json", format!("{json} is a directory; the JSON output must be a file (or `-`)"));
        }
        for (key, dir) in
            [("dump_dir", &self.output.dump_dir), ("colate_archive", &self.output.colate_archive)]
        {
            if let Some(dir) = dir
                && dir.exists()
                && !dir.is_dir()
            {
                return fail(key, format!("{} is a file; it must name a directory", dir.display()));
            }
        }
        Ok(())
    }

    /// Every configured core (`[workers] cores`, `[eal] main_core`) and the worker count must
    /// fit the CPUs this process may run on (`usable`, from its affinity mask): otherwise the
    /// EAL stops with a usage text and exit code 1 instead of naming the key.
    fn check_cores(&self, text: &str, path: &Path, usable: &[u16]) -> Result<(), ConfigError> {
        let list = usable_list(usable);
        if let Some(cores) = &self.workers.cores
            && let Some(bad) = cores.get_ref().iter().find(|c| !usable.contains(c))
        {
            return Err(invalid(
                path,
                text,
                Some(cores.span()),
                format!("worker core {bad} is not a CPU this machine lets wirelat use (usable: {list})"),
            ));
        }
        if let Some(main) = self.eal.main_core
            && !usable.contains(&main)
        {
            let table = table_start(text, "[eal]").unwrap_or(0);
            return Err(invalid(
                path,
                text,
                Some(key_span(text, table..table, "main_core")),
                format!("main core {main} is not a CPU this machine lets wirelat use (usable: {list})"),
            ));
        }
        if self.workers.cores.is_none() && usize::from(*self.workers.count.get_ref()) > usable.len() {
            return Err(invalid(
                path,
                text,
                Some(self.workers.count.span()),
                format!(
                    "{} workers need as many CPUs but this machine lets wirelat use {} ({list})",
                    self.workers.count.get_ref(),
                    usable.len()
                ),
            ));
        }
        Ok(())
    }

    /// Parses and validates `text` for `wirelat run`; `path` is only used in error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        Self::parse_for(text, path, Purpose::Run)
    }

    /// Parses and validates `text` for `purpose`; `path` is only used in error messages.
    pub fn parse_for(text: &str, path: &Path, purpose: Purpose) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let span = e.span();
            invalid(path, text, span, e.message().trim_end().to_owned())
        })?;
        config.validate(text, path, purpose)?;
        crate::synopses::log_derived(text);
        Ok(config)
    }

    /// Number of queues per port (= number of workers).
    pub fn queues(&self) -> u16 {
        // validate() bounds the worker count to RTE_MAX_LCORE - 1.
        match &self.workers.cores {
            Some(cores) => u16::try_from(cores.get_ref().len()).unwrap_or(u16::MAX),
            None => *self.workers.count.get_ref(),
        }
    }

    /// The packet layer's settings (defaults when `[packet]` is absent).
    pub fn packet_config(&self) -> PacketConfig {
        self.packet.as_ref().map(|p| p.get_ref().clone()).unwrap_or_default()
    }

    /// The enabled synopses (none when `[synopses]` is absent).
    pub fn synopses_config(&self) -> SynopsesConfig {
        self.synopses.as_ref().map(|s| s.get_ref().clone()).unwrap_or_default()
    }

    /// The direction split of `[monitor] inside`, if given (checked when the file was loaded).
    pub fn direction_split(&self) -> Result<Option<DirectionSplit>, SplitError> {
        self.monitor.as_ref().map(|m| DirectionSplit::parse(&m.get_ref().inside)).transpose()
    }

    /// The `[ship]` table, if the epochs go to a peer.
    pub fn ship_config(&self) -> Option<&ShipConfig> {
        self.ship.as_ref().map(Spanned::get_ref)
    }

    /// The enabled synopses as the data plane's set.
    pub fn synopsis_set(&self) -> SynopsisSet {
        self.synopses_config()
    }

    /// Point and segment ids.
    pub fn point_ids(&self) -> PointIds {
        let seg = self.segments.get_ref();
        PointIds { point: self.point.id, forward_segment: seg.forward, reverse_segment: seg.reverse }
    }

    /// The mbuf data room: `[mempool] data_room_bytes`, raised to what the kernel ports' ring
    /// frames need (their driver refuses smaller mbufs).
    pub fn data_room_bytes(&self) -> u16 {
        let configured = *self.mempool.data_room_bytes.get_ref();
        let queues = self.queues();
        self.ports
            .get_ref()
            .iter()
            .filter_map(|p| p.af_packet_ring(queues)?.ok())
            .map(|r| u16::try_from(r.min_data_room).unwrap_or(u16::MAX))
            .fold(configured, u16::max)
    }

    /// Mbufs for the pool: the configured number, or enough for every rx ring to be full,
    /// every af_xdp fill ring to be stocked, every tx ring to be full, every lcore cache to be full and every worker to hold two
    /// bursts, plus slack for chained jumbo frames; rounded up to 2^k - 1 (DPDK's optimum).
    pub fn mempool_mbufs(&self) -> u32 {
        if let Some(n) = self.mempool.mbufs {
            return n;
        }
        let queues = u32::from(self.queues());
        let rings: u32 = self
            .ports
            .get_ref()
            .iter()
            .map(|p| {
                // An af_xdp rx queue also keeps its fill ring stocked from the pool.
                let fill = if p.af_xdp_port(self.queues()).is_some() { af_xdp::FILL_RING_MBUFS } else { 0 };
                queues
                    * (u32::from(*p.rx_descriptors.get_ref()) + u32::from(*p.tx_descriptors.get_ref()) + fill)
            })
            .sum();
        let caches = (queues + 1) * *self.mempool.cache_size.get_ref();
        let bursts = queues * 2 * u32::from(MAX_BURST_SIZE);
        let need = rings + caches + bursts + 1024;
        need.saturating_add(1).checked_next_power_of_two().map_or(u32::MAX, |p| p - 1)
    }

    /// The full EAL argument list (without the program name): `[eal] args`, the lcore map of
    /// `plan` (lcore 0 on its main core, lcore i+1 on worker core i) and one `--vdev` or `-a` per
    /// port.
    pub fn eal_args(&self, plan: &CorePlan) -> Vec<String> {
        let mut args: Vec<String> = self.eal.args.get_ref().clone();
        let mut lcores = format!("0@{}", plan.main);
        for (i, core) in plan.workers.iter().enumerate() {
            lcores.push_str(&format!(",{}@{}", i + 1, core));
        }
        args.push(format!("--lcores={lcores}"));
        args.push("--main-lcore=0".to_owned());
        for port in self.ports.get_ref() {
            match port.device_kind() {
                DeviceKind::Pci => {
                    args.push("-a".to_owned());
                    args.push(port.device.get_ref().trim().to_owned());
                }
                DeviceKind::Virtual => args.push(format!("--vdev={}", port.eal_device(self.queues()))),
            }
        }
        args
    }

    fn validate(&self, text: &str, path: &Path, purpose: Purpose) -> Result<(), ConfigError> {
        let fail = |span: Range<usize>, message: String| Err(invalid(path, text, Some(span), message));

        self.validate_measurement(text, path)?;
        let ports = self.ports.get_ref();
        if purpose == Purpose::Run && ports.len() != 2 {
            return fail(
                self.ports.span(),
                format!(
                    "exactly two [[port]] tables are needed (the two sides of the wire), found {}",
                    ports.len()
                ),
            );
        }
        for (i, port) in ports.iter().enumerate() {
            if port.device_head().is_empty() {
                return fail(
                    port.device.span(),
                    "the device string is empty; give e.g. `net_pcap0,rx_pcap=in.pcap` or a PCI address"
                        .into(),
                );
            }
            if ports[..i].iter().any(|other| other.device_name() == port.device_name()) {
                return fail(
                    port.device.span(),
                    format!("device `{}` is used by two ports", port.device_name()),
                );
            }
            if *port.mtu.get_ref() < 68 {
                return fail(
                    port.mtu.span(),
                    format!("MTU {} is below the IPv4 minimum of 68", port.mtu.get_ref()),
                );
            }
            for desc in [&port.rx_descriptors, &port.tx_descriptors] {
                if *desc.get_ref() == 0 {
                    return fail(desc.span(), "a ring needs at least one descriptor".into());
                }
            }
            if let Some(Err(e)) = port.af_packet_ring(self.queues()) {
                return fail(port.device.span(), e.to_string());
            }
            if let Some(Err(e)) = port.af_xdp_port(self.queues()) {
                return fail(port.device.span(), e.to_string());
            }
        }

        if purpose == Purpose::Run
            && self.clock.source == ClockSource::Kernel
            && ports.iter().all(|p| p.kernel_timestamp_iface().is_none())
        {
            return fail(
                self.ports.span(),
                "[clock] source = \"kernel\" needs a port on DPDK's pcap device opened on a live \
                 interface (`net_pcap0,iface=IF` or `rx_iface=IF`): only that driver passes the \
                 kernel's receive time (af_packet ports and pcap files carry none)"
                    .into(),
            );
        }
        let count = &self.workers.count;
        if *count.get_ref() == 0 || *count.get_ref() >= 128 {
            return fail(count.span(), format!("{} workers is outside 1..=127", count.get_ref()));
        }
        if let Some(cores_spanned) = &self.workers.cores {
            let cores = cores_spanned.get_ref();
            if cores.is_empty() {
                return fail(cores_spanned.span(), "at least one worker core is needed".into());
            }
            if cores.len() >= 128 {
                return fail(
                    cores_spanned.span(),
                    format!("{} workers exceed DPDK's 127 worker lcores", cores.len()),
                );
            }
            for (i, core) in cores.iter().enumerate() {
                if cores[..i].contains(core) {
                    return fail(
                        cores_spanned.span(),
                        format!("core {core} is listed twice: each worker needs its own core"),
                    );
                }
            }
        }
        let burst = *self.workers.burst_size.get_ref();
        if burst == 0 || burst > MAX_BURST_SIZE {
            return fail(
                self.workers.burst_size.span(),
                format!("burst size {burst} is outside 1..={MAX_BURST_SIZE}"),
            );
        }

        let cache = *self.mempool.cache_size.get_ref();
        if cache > MAX_MEMPOOL_CACHE {
            return fail(
                self.mempool.cache_size.span(),
                format!("cache size {cache} exceeds DPDK's maximum of {MAX_MEMPOOL_CACHE}"),
            );
        }
        let room = *self.mempool.data_room_bytes.get_ref();
        if room < 128 + 64 {
            return fail(
                self.mempool.data_room_bytes.span(),
                format!("data room {room} B leaves no space for a minimum frame after the 128 B headroom"),
            );
        }

        for arg in self.eal.args.get_ref() {
            let option = arg.split('=').next().unwrap_or(arg);
            if RESERVED_EAL_OPTIONS.contains(&option) {
                return fail(
                    self.eal.args.span(),
                    format!(
                        "`{arg}` is derived from [eal] main_core and [workers] cores; remove it from args"
                    ),
                );
            }
        }
        Ok(())
    }
}

impl Config {
    /// Checks what measurement needs: point and segment ids, epochs, the packet layer and every
    /// synopsis configuration.
    fn validate_measurement(&self, text: &str, path: &Path) -> Result<(), ConfigError> {
        let fail = |span: Range<usize>, message: String| Err(invalid(path, text, Some(span), message));
        let seg = self.segments.get_ref();
        if seg.forward == LOCAL_SEGMENT || seg.reverse == LOCAL_SEGMENT || seg.forward == seg.reverse {
            return fail(
                self.segments.span(),
                format!(
                    "segment ids must differ from each other and from {LOCAL_SEGMENT} (the fridge's local \
                     segment); got forward = {}, reverse = {}",
                    seg.forward, seg.reverse
                ),
            );
        }
        let len = &self.epochs.length_ms;
        if *len.get_ref() == 0 || *len.get_ref() > 86_400_000 {
            return fail(len.span(), format!("epoch length {} ms is outside 1..=86400000", len.get_ref()));
        }
        let ring = &self.epochs.ring;
        if *ring.get_ref() < 2 || *ring.get_ref() > 64 {
            return fail(ring.span(), format!("a ring of {} buffers is outside 2..=64", ring.get_ref()));
        }
        if let Some(p) = &self.packet
            && let Err(e) = p.get_ref().validate()
        {
            return fail(p.span(), e.to_string());
        }
        if let Some(s) = &self.synopses
            && let Err(e) = s.get_ref().validate()
        {
            // Point at the failing synopsis's own table (and its key when written), not at the
            // first `[synopses.*]` table.
            let header = format!("[synopses.{}]", e.synopsis.name());
            let field = e.field.split(['.', '[']).next().unwrap_or_default();
            let span = match table_start(text, &header) {
                Some(at) => key_span(text, at..at + header.len(), field),
                None => s.span(),
            };
            return fail(span, format!("synopses.{e}"));
        }
        if let Some(m) = &self.monitor
            && let Err(e) = DirectionSplit::parse(&m.get_ref().inside)
        {
            return fail(key_span(text, m.span(), "inside"), format!("monitor.inside: {e}"));
        }
        if let Some(ship) = &self.ship
            && let Err((key, e)) = ship.get_ref().validate()
        {
            return fail(key_span(text, ship.span(), key), e);
        }
        for route in &self.routes {
            if let Err((key, e)) = route.get_ref().ship.validate() {
                return fail(key_span(text, route.span(), key), format!("[[route]] ship.{e}"));
            }
            if self.synopses_config().is_empty() {
                return fail(route.span(), "[[route]] needs at least one [synopses.*] table".into());
            }
        }
        let spills: Vec<&Path> = self
            .ship_config()
            .into_iter()
            .chain(self.routes.iter().map(|r| &r.get_ref().ship))
            .filter_map(|s| s.spill_dir.as_deref())
            .collect();
        if let Some((i, _)) = spills.iter().enumerate().find(|(i, d)| spills[..*i].contains(d)) {
            let span = self.routes.get(i.saturating_sub(1)).map_or(0..0, |r| r.span());
            return fail(
                span,
                format!("two [ship]/[[route]] sinks share the spill directory {}", spills[i].display()),
            );
        }
        if let Some(ship) = &self.ship
            && self.synopses_config().is_empty()
        {
            return fail(
                ship.span(),
                "[ship] needs at least one [synopses.*] table: nothing is measured".into(),
            );
        }
        Ok(())
    }
}

/// The CPUs this process may run on (its affinity mask), ascending; None when unknown.
fn usable_cpus() -> Option<Vec<u16>> {
    let mut cpus: Vec<u16> =
        core_affinity::get_core_ids()?.into_iter().filter_map(|c| u16::try_from(c.id).ok()).collect();
    cpus.sort_unstable();
    (!cpus.is_empty()).then_some(cpus)
}

/// `0-3, 6` for the CPU list `usable` (ascending).
fn usable_list(usable: &[u16]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(&start) = usable.get(i) {
        let mut end = start;
        while usable.get(i + 1).is_some_and(|&n| Some(n) == end.checked_add(1)) {
            end += 1;
            i += 1;
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests;
