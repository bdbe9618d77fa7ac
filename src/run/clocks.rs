//! The packet clocks of `wirelat run`: which clock the workers stamp packets with (the
//! trace's, the TSC, the kernel's receive time or the NIC's), set up once before the workers
//! start, and the wall-clock reads and intervals the control loop re-anchors them with.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::bail;
use tracing::{info, warn};
use wirelat_control::config::{ClockSource, Config};
use wirelat_dataplane::clock::{Calibrator, ClockMap, TraceTime, host_tsc_pair};
use wirelat_dataplane::dpdk::{self, Eal, Port, RxTimestampField};
use wirelat_dataplane::measuring::PacketClock;

/// How often the TSC and NIC clock mappings are re-anchored on wall-clock time.
pub(super) const CALIBRATION_INTERVAL: Duration = Duration::from_secs(1);

/// Idle ticks of NIC-clocked workers stay this far behind the TSC time (NIC and TSC clocks are
/// only as close as their calibration: a lagging NIC clock must not make packets late).
const NIC_IDLE_GUARD_NS: u64 = 1_000_000;

/// Idle ticks of kernel-clocked workers stay this far behind the TSC time: a frame the kernel
/// stamped may still sit in libpcap's ring, not yet readable (a TPACKET_V3 block is handed over
/// when full or when its timer fires, a few ms), and an idle tick past its time would make it
/// late. BENCHMARKS "W11 (third session)" has the waits measured here.
const KERNEL_IDLE_GUARD_NS: u64 = 20_000_000;

/// The clocks the workers read and the control thread calibrates.
pub(super) struct Clocks {
    pub(super) source: ClockSource,
    pub(super) tsc: ClockMap,
    pub(super) tsc_cal: Calibrator,
    /// Per port (NIC source only): its map and calibrator.
    pub(super) nic: Option<[(ClockMap, Calibrator); 2]>,
    pub(super) trace: TraceTime,
    pub(super) field: Option<RxTimestampField>,
    /// TSC source with a port that carries the kernel's receive time: the workers measure the
    /// stamping delay.
    pub(super) stamp_delay: bool,
    /// Kernel source, or the stamping delay measured: the kernel stamps each frame once as it
    /// enters the receive path, while this lives (see [`dpdk::NetTimestamping`]).
    _net_timestamping: Option<dpdk::NetTimestamping>,
}

/// Wall-clock now, in ns since the Unix epoch.
pub(super) fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Sets up the configured clock; logs which one is used.
pub(super) fn setup_clocks(
    config: &Config,
    eal: &Eal,
    ports: [&Port<'_>; 2],
    field: Option<RxTimestampField>,
    workers: u16,
) -> anyhow::Result<Clocks> {
    let tsc_hz = eal.tsc_hz() as f64;
    let interval_ns = CALIBRATION_INTERVAL.as_nanos() as u64;
    // Measured against CLOCK_REALTIME with narrow pairs, as every process on the host does, so
    // that two points here map one TSC alike (issue 18); EAL's rate only bounds the measured
    // one. If no narrow pair can be read, the nominal rate and one pair, as before.
    let (tsc_cal, seg) = match Calibrator::measured(tsc_hz, interval_ns, host_tsc_pair, std::thread::sleep) {
        Ok((cal, seg, check)) => {
            info!(
                measured_hz = check.measured_hz,
                nominal_hz = check.nominal_hz,
                disagreement_ns = check.disagreement_ns,
                pair_width_ns = check.pair_width_ns,
                "TSC mapped to CLOCK_REALTIME; a fresh pair checked against it"
            );
            (cal, seg)
        }
        Err(e) => {
            warn!(error = %e, "TSC calibration against CLOCK_REALTIME failed: nominal rate, one pair");
            Calibrator::start(dpdk::rdtsc(), wall_ns(), tsc_hz, interval_ns)
        }
    };
    let mut clocks = Clocks {
        source: config.clock.source,
        tsc: ClockMap::new(seg),
        tsc_cal,
        nic: None,
        trace: TraceTime::new(usize::from(workers)),
        field,
        stamp_delay: false,
        _net_timestamping: None,
    };
    let live: Vec<&str> = config.ports.get_ref().iter().filter_map(|p| p.kernel_timestamp_iface()).collect();
    match config.clock.source {
        ClockSource::Trace => {
            if field.is_none() {
                bail!(
                    "[clock] source = \"trace\" needs rx timestamps in the mbufs, and no driver registered \
                     the timestamp field: use DPDK's pcap device (net_pcap) for trace replay"
                );
            }
            info!(
                clock = "trace",
                unit = "µs from the pcap device, × 1000",
                "packet clock: pcap record time"
            );
        }
        ClockSource::Tsc => {
            // Where a port delivers the kernel's receive time, the workers measure how late
            // their TSC stamp is (issue 18).
            clocks.stamp_delay = field.is_some() && !live.is_empty();
            info!(
                clock = "tsc",
                tsc_hz,
                recalibrate_s = CALIBRATION_INTERVAL.as_secs(),
                stamp_delay_measured_on = ?live,
                "packet clock: TSC, once per burst"
            );
        }
        ClockSource::Kernel => {
            if field.is_none() {
                bail!(
                    "[clock] source = \"kernel\" needs the kernel's receive time in the mbufs, and no \
                     driver registered the timestamp field: use DPDK's pcap device on the interface \
                     (`net_pcap0,iface=IF`)"
                );
            }
            info!(
                clock = "kernel",
                interfaces = ?live,
                resolution_ns = 1000,
                idle_guard_ms = KERNEL_IDLE_GUARD_NS / 1_000_000,
                "packet clock: the kernel's receive time (CLOCK_REALTIME) from the pcap device, in µs"
            );
        }
        ClockSource::Nic => match nic_clocks(ports, field) {
            Ok(maps) => {
                info!(clock = "nic", "packet clock: NIC rx timestamps, calibrated with rte_eth_read_clock");
                clocks.nic = Some(maps);
            }
            Err(why) => {
                warn!(reason = %why, "packet clock: NIC timestamps unavailable, falling back to the TSC");
                clocks.source = ClockSource::Tsc;
            }
        },
    }
    if clocks.source == ClockSource::Kernel || clocks.stamp_delay {
        match dpdk::NetTimestamping::enable() {
            Ok(t) => {
                info!(
                    "kernel receive timestamps taken once per frame as it enters the receive path (held on while the run lasts)"
                );
                clocks._net_timestamping = Some(t);
            }
            Err(e) => warn!(
                error = %e,
                "cannot turn the kernel's receive timestamping on: each packet socket stamps frames at its own read"
            ),
        }
    }
    Ok(clocks)
}

/// Calibrates each port's device clock against wall-clock time over a short interval.
fn nic_clocks(
    ports: [&Port<'_>; 2],
    field: Option<RxTimestampField>,
) -> Result<[(ClockMap, Calibrator); 2], String> {
    if field.is_none() {
        return Err("no driver registered the rx timestamp field".into());
    }
    for p in ports {
        if !p.info().rx_timestamp_offload {
            return Err(format!("port {} does not offer the rx timestamp offload", p.info().name));
        }
    }
    let first: Vec<(u64, u64)> = ports
        .iter()
        .map(|p| p.read_clock().map(|c| (c, wall_ns())))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(100));
    let mut out = Vec::with_capacity(2);
    for (p, (raw0, wall0)) in ports.iter().zip(first) {
        let raw1 = p.read_clock().map_err(|e| e.to_string())?;
        let wall1 = wall_ns();
        if raw1 <= raw0 || wall1 <= wall0 {
            return Err(format!("port {}: the device clock does not advance", p.info().name));
        }
        let hz = (raw1 - raw0) as f64 * 1e9 / (wall1 - wall0) as f64;
        let (cal, seg) = Calibrator::start(raw1, wall1, hz, CALIBRATION_INTERVAL.as_nanos() as u64);
        out.push((ClockMap::new(seg), cal));
    }
    let mut it = out.into_iter();
    match (it.next(), it.next()) {
        (Some(a), Some(b)) => Ok([a, b]),
        _ => Err("two ports needed".into()),
    }
}

/// Worker `w`'s view of the clocks.
pub(super) fn packet_clock(c: &Clocks, w: usize) -> PacketClock<'_> {
    match (c.source, c.field, &c.nic) {
        (ClockSource::Trace, Some(field), _) => PacketClock::Trace { field, time: &c.trace, worker: w },
        (ClockSource::Nic, Some(field), Some([a, b])) => {
            PacketClock::Nic { field, ports: [&a.0, &b.0], tsc: &c.tsc, idle_guard_ns: NIC_IDLE_GUARD_NS }
        }
        (ClockSource::Kernel, Some(field), _) => {
            PacketClock::Kernel { field, tsc: &c.tsc, idle_guard_ns: KERNEL_IDLE_GUARD_NS }
        }
        _ => PacketClock::Tsc { map: &c.tsc, kernel_field: c.field.filter(|_| c.stamp_delay) },
    }
}
