//! `wirelat run`: plans the cores, brings up DPDK from the configuration, launches one worker
//! per queue index on its own EAL lcore (measuring with the configured synopses, or only
//! forwarding), runs the control loop on the main lcore (harvest and publish epochs, calibrate
//! clocks, log counters, watch the stop conditions), and tears everything down in order
//! (workers, last epochs, outputs, ports, pool, EAL) so that every frame handed to a port is
//! flushed (the pcap driver closes its output file on close).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use crossbeam::utils::CachePadded;
use tracing::{info, warn};
use wirelat_control::config::{ClockSource, Config, DeviceKind, MAX_BURST_SIZE, PortKey};
use wirelat_control::core_plan::{CorePlan, Topology, pci_numa_node};
use wirelat_control::epoch::Harvester;
use wirelat_control::publish::Publisher;
use wirelat_dataplane::clock::{Calibrator, host_tsc_pair};
use wirelat_dataplane::dpdk::{
    self, DpdkError, Eal, LcoreJob, LcoreOutcome, MAX_BURST, Mempool, MempoolSettings, Port, PortSetting,
    PortSettings, RxTimestampField,
};
use wirelat_dataplane::epoch::{EpochClock, EpochLink};
use wirelat_dataplane::measuring::MeasuringHook;
use wirelat_dataplane::pipeline::{CounterSnapshot, EpochSynopses, Pipeline, SharedCounters};
use wirelat_dataplane::stamp_delay::{SharedStampDelay, StampDelay};
use wirelat_dataplane::worker::{
    self, Direction, ForwardOnly, FrameScreen, Path, PathInfo, WorkerCounters, WorkerSettings,
};

use crate::measure;
use crate::point_metrics::Exposed;

mod clocks;
mod stats;
use clocks::{CALIBRATION_INTERVAL, Clocks, packet_clock, setup_clocks, wall_ns};
pub use stats::PortTotals;
use stats::{log_counters, log_measure_counters, log_stamp_delay, record_counters, sum_stamp_delay};

// The configuration's burst limit is the size of the worker's fixed mbuf array.
const _: () = assert!(MAX_BURST_SIZE as usize == MAX_BURST);

/// How often the main lcore looks at the stop conditions at most. Not much more often: on a
/// machine whose cores are shared, frequent wake-ups of the main lcore push other tasks onto the
/// worker cores (measured: a 5 ms tick cost the forwarder ~15% of its rate). With short epochs
/// the harvest ticks faster (a quarter epoch, at least 1 ms).
const CONTROL_TICK: Duration = Duration::from_millis(50);

/// How often the control thread stores the counters in the point's metrics at most.
const METRICS_INTERVAL: Duration = Duration::from_millis(200);

/// Time given to NIC tx rings to drain after the workers stopped, before the ports stop.
const TX_DRAIN: Duration = Duration::from_millis(20);

/// After the workers were told to stop, how long the control thread keeps harvesting before it
/// gives up on a worker that does not finish.
const FINISH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// SIGINT or SIGTERM.
    Signal,
    /// `[stop] idle_ms` without a received frame.
    Idle,
    /// `[stop] after_ms` elapsed.
    Deadline,
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// Why it stopped.
    pub reason: StopReason,
    /// Per-port totals over all workers.
    pub ports: [PortTotals; 2],
    /// Measurement counters over all workers (zero when only forwarding).
    pub measured: CounterSnapshot,
    /// The stamping delay over all workers (empty unless measured: TSC clock and a port with
    /// the kernel's receive time).
    pub stamp_delay: StampDelay,
    /// Merged epochs published.
    pub epochs: u64,
    /// Epochs that some worker could not measure (overruns).
    pub overrun_epochs: u64,
    /// What the outputs gave up (one sentence), if anything: the run then exits non-zero.
    pub lost: Option<String>,
}

/// The core plan: the configuration's overrides, else the machine topology from hwloc.
fn core_plan(config: &Config) -> anyhow::Result<CorePlan> {
    if let Some(plan) = CorePlan::from_overrides(config) {
        return Ok(plan);
    }
    let topo = match crate::topology::machine_topology() {
        Ok(t) => t,
        Err(e) => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            warn!(error = %e, cpus, "no hwloc topology: planning on a flat list of CPUs");
            Topology::flat(u16::try_from(cpus).unwrap_or(u16::MAX))
        }
    };
    // The NIC's node: the first PCI port's (sysfs, before the EAL binds anything); virtual
    // devices have none.
    let nic_node = config
        .ports
        .get_ref()
        .iter()
        .filter(|p| p.device_kind() == DeviceKind::Pci)
        .find_map(|p| pci_numa_node(&p.device_name()));
    let overrides = config.workers.cores.as_ref().map(|c| c.get_ref().clone());
    CorePlan::plan(&topo, nic_node, usize::from(config.queues()), config.eal.main_core, overrides.as_deref())
        .context("cannot place the workers")
}

/// A `[[port]]` setting that the device or the machine refuses: the operator's configuration
/// must change, so `wirelat run` exits 2 naming the file, line, column and key
/// ([`wirelat_control::config::Config::port_refusal`]), where a runtime failure exits 1.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PortRefused {
    /// Index of the `[[port]]` table.
    pub index: usize,
    /// The setting refused.
    pub key: PortKey,
    /// One sentence: what was refused and what to do.
    pub message: String,
}

impl PortRefused {
    /// `error` as a refusal of port `index`'s setting when the device refused one (anything
    /// else is returned as it was).
    fn from_open(index: usize, error: DpdkError) -> anyhow::Error {
        match error {
            DpdkError::PortRefused { setting, .. } => {
                let key = match setting {
                    PortSetting::Mtu => PortKey::Mtu,
                    PortSetting::Queues => PortKey::Queues,
                    PortSetting::Device => PortKey::Device,
                };
                anyhow::Error::new(PortRefused { index, key, message: error.to_string() })
            }
            // A port absent after probing stays a runtime failure: its driver's probe can fail
            // for reasons of the moment (ring memory, a packet-fanout group id another process
            // took), and the ring geometries the kernel refuses are checked when the
            // configuration is loaded (`af_packet::ring`).
            other => other.into(),
        }
    }
}

/// Refuses, before the EAL starts, an af_xdp port whose interface is missing or has too few rx
/// queues for its sockets (the driver's own error is a bare EINVAL), and warns of receive VLAN
/// offload, which hands XDP frames without their tags on NICs that strip them.
fn check_af_xdp_interface(
    index: usize,
    device: &str,
    xdp: &wirelat_control::af_xdp::AfXdpPort,
) -> Result<(), PortRefused> {
    let refused = |message: String| PortRefused { index, key: PortKey::Device, message };
    if dpdk::kernel_iface_index(&xdp.iface).is_none() {
        return Err(refused(format!("{device}: interface `{}` does not exist", xdp.iface)));
    }
    let needed = xdp.start_queue.saturating_add(xdp.queue_count);
    if let Some(have) = dpdk::kernel_iface_rx_queues(&xdp.iface)
        && have < needed
    {
        return Err(refused(format!(
            "{device}: interface `{}` has {have} rx queue(s) but the XDP sockets need queues {}..{} \
             (start_queue + one per worker); give it more (`ethtool -L`, or `numrxqueues` for a \
             veth) or use fewer workers",
            xdp.iface,
            xdp.start_queue,
            needed - 1
        )));
    }
    if dpdk::kernel_iface_rx_vlan_offload(&xdp.iface).unwrap_or(false) {
        warn!(
            iface = %xdp.iface,
            "receive VLAN offload is on: a NIC that strips VLAN tags hands XDP the frame without its \
             tag, and wirelat would forward it untagged; turn it off with `ethtool -K {} rxvlan off` \
             (README, \"On a real host\")",
            xdp.iface
        );
    }
    Ok(())
}

/// Runs the appliance until a signal or a `[stop]` condition.
pub fn run(config: &Config) -> anyhow::Result<RunSummary> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("cannot install the signal handler")?;
    }

    let plan = core_plan(config)?;
    info!(main_core = plan.main, worker_cores = ?plan.workers, notes = ?plan.notes, "core plan");
    let measuring = !config.synopses_config().is_empty();
    measure::log_measurement(config, "run");
    // Everything that can fail on the configuration fails before the EAL starts.
    measure::check_memory(config, usize::from(config.queues()))?;
    let template = measuring.then(|| measure::epoch_template(config).map(Arc::new)).transpose()?;
    let mut publisher = measuring.then(|| measure::publisher(config, false)).transpose()?;
    let exposed = Exposed::start(config, "run")?;

    for (index, port) in config.ports.get_ref().iter().enumerate() {
        if let Some(Ok(ring)) = port.af_packet_ring(config.queues()) {
            if dpdk::kernel_iface_index(&ring.iface).is_none() {
                return Err(PortRefused {
                    index,
                    key: PortKey::Device,
                    message: format!("{}: interface `{}` does not exist", port.device.get_ref(), ring.iface),
                }
                .into());
            }
            if dpdk::kernel_iface_gro(&ring.iface).unwrap_or(false) {
                warn!(
                    iface = %ring.iface,
                    "generic receive offload is on: the kernel merges TCP segments into frames above \
                     the MTU, which the ring cuts and wirelat drops as truncated_dropped; turn it off \
                     with `ethtool -K {} gro off` (README, \"On a real host\")",
                    ring.iface
                );
            }
        }
        if let Some(Ok(xdp)) = port.af_xdp_port(config.queues()) {
            check_af_xdp_interface(index, port.device.get_ref(), &xdp)?;
        }
        for file in crate::pcap_input::rx_pcap_files(port.device.get_ref()) {
            let found = crate::pcap_input::check_replay_file(&file)?;
            if let Some(first) = found.first_cut {
                warn!(
                    file = %file.display(),
                    cut_records = found.cut_records,
                    records = found.records,
                    first_cut_record = first,
                    "records cut by the capture's snap length: DPDK's pcap device forwards each as a \
                     whole frame of its cut length (the parser counts them as skipped_truncated)"
                );
            }
        }
    }

    let eal = Eal::init(config.eal_args(&plan))?;
    let queues = config.queues();
    let lcores = eal.worker_lcores();
    if lcores.len() != usize::from(queues) {
        bail!("the EAL started {} worker lcores for {queues} queues", lcores.len());
    }

    let pool = Mempool::new(
        &eal,
        &MempoolSettings {
            name: "wirelat_mbufs".to_owned(),
            mbufs: config.mempool_mbufs(),
            cache_size: *config.mempool.cache_size.get_ref(),
            data_room_bytes: config.data_room_bytes(),
            socket: Some(eal.lcore_socket(eal.main_lcore())),
        },
    )?;

    if config.data_room_bytes() != *config.mempool.data_room_bytes.get_ref() {
        info!(
            configured = *config.mempool.data_room_bytes.get_ref(),
            used = config.data_room_bytes(),
            "mbuf data room raised to hold the af_packet ring frames"
        );
    }
    let mut ports = Vec::with_capacity(2);
    for port_config in config.ports.get_ref() {
        let ring = port_config.af_packet_ring(queues).transpose()?;
        if let Some(r) = &ring {
            info!(
                device = %r.device,
                iface = %r.iface,
                framesz = r.frame_size,
                blocksz = r.block_size,
                framecnt = r.frame_count,
                rx_cut_at = r.rx_cut_at,
                "af_packet ring"
            );
        }
        let settings = PortSettings {
            rx_queues: queues,
            tx_queues: queues,
            rx_descriptors: *port_config.rx_descriptors.get_ref(),
            tx_descriptors: *port_config.tx_descriptors.get_ref(),
            promiscuous: port_config.promiscuous,
            rx_timestamp: port_config.rx_timestamp,
            mtu: *port_config.mtu.get_ref(),
            rx_cut_at: ring.as_ref().map_or(u32::MAX, |r| r.rx_cut_at),
            kernel_iface: port_config.kernel_iface(queues),
            mtu_explicit: port_config.mtu_is_explicit(),
        };
        if let Some(Ok(xdp)) = port_config.af_xdp_port(queues) {
            info!(
                device = %xdp.device,
                iface = %xdp.iface,
                start_queue = xdp.start_queue,
                queue_count = xdp.queue_count,
                "af_xdp sockets"
            );
        }
        let port = Port::open(&eal, &port_config.device_name(), &pool, &settings)
            .map_err(|e| PortRefused::from_open(ports.len(), e))?;
        let i = port.info();
        info!(
            port = ports.len(),
            id = i.id,
            name = %i.name,
            driver = %i.driver,
            bus = %i.bus,
            queues = i.rx_queues,
            rx_descriptors = i.rx_descriptors,
            tx_descriptors = i.tx_descriptors,
            symmetric_rss = i.symmetric_rss,
            rx_timestamp_offload = i.rx_timestamp_offload,
            rx_scatter = i.rx_scatter,
            tx_multi_segment = i.tx_multi_segment,
            mtu = i.mtu,
            promiscuous = i.promiscuous,
            rx_cut_at = i.rx_cut_at,
            tx_max_frame = i.tx_max_frame,
            tx_chained_max = i.tx_chained_max,
            "port started"
        );
        if !i.transmits_chained_mbufs() {
            let data_room = u32::from(config.data_room_bytes()).saturating_sub(128);
            warn!(
                port = ports.len(),
                name = %i.name,
                data_room,
                "device cannot transmit chained mbufs: frames longer than the mbuf data room that \
                 arrive chained will be dropped and counted as oversize_dropped; raise [mempool] \
                 data_room_bytes to avoid it"
            );
        }
        if queues > 1 && !i.symmetric_rss {
            warn!(port = ports.len(), name = %i.name, "device has no RSS: flows are not steered symmetrically across queues");
        }
        ports.push(port);
    }
    let [port0, port1] = ports.as_slice() else { bail!("exactly two ports are needed") };
    let rx_timestamp = RxTimestampField::lookup();
    info!(registered = rx_timestamp.is_some(), "rx timestamp dynamic field");

    let clocks = if measuring {
        Some(setup_clocks(config, &eal, [port0, port1], rx_timestamp, queues)?)
    } else {
        None
    };

    let counters: Vec<CachePadded<WorkerCounters>> = (0..queues).map(|_| CachePadded::default()).collect();
    let measure_counters: Vec<CachePadded<SharedCounters>> =
        (0..queues).map(|_| CachePadded::default()).collect();
    let stamp_delays: Vec<CachePadded<SharedStampDelay>> =
        (0..queues).map(|_| CachePadded::default()).collect();
    let abort = AtomicBool::new(false);
    let settings = WorkerSettings {
        burst_size: *config.workers.burst_size.get_ref(),
        tx_retry_limit: config.workers.tx_retry_limit,
        monitor: config.workers.monitor,
        idle_after_cycles: (u128::from(config.workers.idle_after_us) * u128::from(eal.tsc_hz()) / 1_000_000)
            .try_into()
            .unwrap_or(u64::MAX),
        idle_sleep: Duration::from_micros(u64::from(config.workers.idle_sleep_us)),
    };

    // The epoch rings: one link per worker. Each worker builds its own ring's buffers (and its
    // carry) when it starts, on its own lcore, so that their pages are first touched there and
    // live on its NUMA node; the harvester's accumulators are the control thread's.
    let mut links = Vec::new();
    let mut writers = Vec::new();
    if let Some(t) = &template {
        let clock = EpochClock::new(config.epochs.length_ns()).context("epoch length is 0")?;
        for _ in 0..queues {
            let (link, pending) = EpochLink::deferred(*config.epochs.ring.get_ref(), clock);
            links.push(link);
            writers.push(Some((pending, Arc::clone(t))));
        }
    }
    let mut harvester = template.map(|t| Harvester::new(links, move || (*t).clone()));
    let set = config.synopsis_set();
    let split = config.direction_split().context("[monitor] inside")?;

    // Worker q: port0 rx q -> port1 tx q, and port1 rx q -> port0 tx q.
    let mut jobs = Vec::with_capacity(usize::from(queues));
    for (q, lcore) in (0..queues).zip(lcores) {
        let mut paths = [
            path(Direction::Forward, q, port0, port1, rx_timestamp, settings.monitor)?,
            path(Direction::Reverse, q, port1, port0, rx_timestamp, settings.monitor)?,
        ];
        let worker_counters: &WorkerCounters = &counters[usize::from(q)];
        let shared: &SharedCounters = &measure_counters[usize::from(q)];
        let stamp_delay: &SharedStampDelay = &stamp_delays[usize::from(q)];
        let stop = &*stop;
        let abort = &abort;
        let measurement = match (&clocks, writers.get_mut(usize::from(q)).and_then(Option::take)) {
            (Some(c), Some(ring)) => Some((ring, c)),
            _ => None,
        };
        let (packet_config, overrun, split, set) =
            (config.packet_config(), config.epochs.overrun, split.clone(), set.clone());
        jobs.push(LcoreJob {
            lcore,
            job: Box::new(move || {
                tracing::debug!(queue = q, lcore = Eal::current_lcore(), "worker started");
                match measurement {
                    None => worker::run(&mut paths, &settings, worker_counters, stop, &mut ForwardOnly),
                    Some(((pending, template), c)) => {
                        let writer = pending.build(|| (*template).clone());
                        let pipeline =
                            Pipeline::new(packet_config, writer, set.new_carry(), overrun).with_split(split);
                        info!(queue = q, lcore = Eal::current_lcore(), "worker built its epoch buffers");
                        let clock = packet_clock(c, usize::from(q));
                        let mut hook = MeasuringHook::new(pipeline, clock, shared, abort);
                        if c.stamp_delay {
                            hook = hook.with_stamp_delay(stamp_delay);
                        }
                        match (c.source, c.field) {
                            (ClockSource::Trace, Some(field)) => worker::run_trace_ordered(
                                &mut paths,
                                &settings,
                                worker_counters,
                                stop,
                                &mut hook,
                                field,
                            ),
                            _ => worker::run(&mut paths, &settings, worker_counters, stop, &mut hook),
                        }
                    }
                }
                0
            }),
        });
    }

    info!(
        workers = queues,
        burst_size = settings.burst_size,
        measuring,
        monitor = settings.monitor,
        idle_after_us = config.workers.idle_after_us,
        idle_sleep_us = config.workers.idle_sleep_us,
        "forwarding"
    );
    let started = Instant::now();
    let mut control = Control {
        config,
        ports: [port0, port1],
        counters: &counters,
        measure_counters: &measure_counters,
        stamp_delays: clocks.as_ref().is_some_and(|c| c.stamp_delay).then_some(stamp_delays.as_slice()),
        stop: &stop,
        abort: &abort,
        harvester: harvester.as_mut(),
        publisher: publisher.as_mut(),
        clocks: clocks.as_ref(),
        tsc_cal: clocks.as_ref().map(|c| c.tsc_cal.clone()),
        nic_cals: clocks
            .as_ref()
            .and_then(|c| c.nic.as_ref())
            .map_or_else(Vec::new, |n| n.iter().map(|(_, cal)| cal.clone()).collect()),
        exposed: &exposed,
    };
    let (reason, outcomes) = eal.run_on_lcores(jobs, || control.run())?;
    let elapsed = started.elapsed();
    // Every worker has returned: the last epochs are all handed over.
    control.finish_harvest(Instant::now() + Duration::from_secs(1));
    if let Some(p) = control.publisher.as_mut() {
        if let Err(e) = p.finish() {
            warn!(error = %e, "closing the outputs");
        }
        measure::report_whole_run(p);
    }
    std::thread::sleep(TX_DRAIN);

    let totals = log_counters("final", [port0, port1], &counters, None);
    let measured = log_measure_counters("final", &measure_counters);
    let stamp_delay = control.stamp_delays.map(|d| log_stamp_delay("final", d)).unwrap_or_default();
    let epochs = control.publisher.as_ref().map_or(0, |p| p.counters().epochs);
    let lost = control.publisher.as_deref().and_then(measure::losses);
    let overrun_epochs = control.harvester.as_ref().map_or(0, |h| h.overrun_epochs());
    if let Some(h) = &control.harvester {
        let c = h.counters();
        info!(
            epochs = c.epochs,
            incomplete = c.incomplete_epochs,
            shards = c.shards,
            overrun_epochs,
            "harvest"
        );
    }
    info!(reason = ?reason, seconds = elapsed.as_secs_f64(), mbufs_in_use = pool.in_use(), "stopped");
    control.record_metrics();
    for outcome in &outcomes {
        if outcome.status != 0 {
            let what = if outcome.status == LcoreOutcome::PANICKED { "panicked" } else { "failed" };
            warn!(lcore = outcome.lcore, status = outcome.status, "worker {what}");
        }
    }
    let failed = outcomes.iter().any(|o| o.status != 0);

    drop(ports); // stop + close: flushes and closes pcap output files
    drop(pool);
    eal.cleanup()?;
    exposed.finish();
    if failed {
        bail!("a worker lcore failed; see the log above");
    }
    Ok(RunSummary { reason, ports: totals, measured, stamp_delay, epochs, overrun_epochs, lost })
}

/// One direction of worker `queue`: rx queue `queue` of `rx`, tx queue `queue` of `tx`.
fn path<'p>(
    direction: Direction,
    queue: u16,
    rx: &'p Port<'_>,
    tx: &'p Port<'_>,
    rx_timestamp: Option<RxTimestampField>,
    monitor: bool,
) -> anyhow::Result<Path<'p>> {
    Ok(Path {
        rx: rx.rx_queue(queue)?,
        tx: tx.tx_queue(queue)?,
        info: PathInfo { direction, queue, rx_timestamp },
        screen: FrameScreen {
            check_chains: rx.info().may_receive_chained_mbufs(),
            rx_cut_at: rx.info().rx_cut_at,
            // A monitor transmits nothing, so no egress limit applies.
            tx_max: if monitor { u32::MAX } else { tx.info().tx_max_frame },
            tx_chained_max: if monitor { u32::MAX } else { tx.info().tx_chained_max },
        },
    })
}

/// The main lcore's state: statistics, stop conditions, harvest and clock calibration.
struct Control<'a, 'p> {
    config: &'a Config,
    ports: [&'a Port<'p>; 2],
    counters: &'a [CachePadded<WorkerCounters>],
    measure_counters: &'a [CachePadded<SharedCounters>],
    /// Per worker, when the stamping delay is measured.
    stamp_delays: Option<&'a [CachePadded<SharedStampDelay>]>,
    stop: &'a AtomicBool,
    abort: &'a AtomicBool,
    harvester: Option<&'a mut Harvester<EpochSynopses>>,
    publisher: Option<&'a mut Publisher>,
    clocks: Option<&'a Clocks>,
    /// The control thread's calibrators (TSC, and each port's NIC clock).
    tsc_cal: Option<Calibrator>,
    nic_cals: Vec<Calibrator>,
    /// The point's `/metrics` (no-op without `[metrics] listen`).
    exposed: &'a Exposed,
}

impl Control<'_, '_> {
    /// Runs until a stop condition, then keeps harvesting until every worker has finished.
    fn run(&mut self) -> StopReason {
        let config = self.config;
        let started = Instant::now();
        let interval = Duration::from_millis(config.stats.interval_ms);
        let idle_limit = Duration::from_millis(config.stop.idle_ms);
        let deadline = Duration::from_millis(config.stop.after_ms);
        let quarter_epoch = Duration::from_nanos(config.epochs.length_ns() / 4);
        let tick_len = if self.harvester.is_some() {
            CONTROL_TICK.min(quarter_epoch).max(Duration::from_millis(1))
        } else {
            CONTROL_TICK
        };
        let harvest_delay = Duration::from_millis(config.debug.harvest_delay_ms);

        let mut next_report = started + interval;
        let mut last_report: Option<(Instant, [PortTotals; 2])> = Some((started, [PortTotals::default(); 2]));
        let mut next_calibration = started + CALIBRATION_INTERVAL;
        let mut next_metrics = started;
        let mut last_rx = 0u64;
        let mut last_polls = 0u64;
        let mut idle = Duration::ZERO;
        let mut last_tick = started;

        let reason = loop {
            if self.stop.load(Ordering::Relaxed) {
                break StopReason::Signal;
            }
            std::thread::sleep(tick_len);
            let now = Instant::now();
            let tick = now - last_tick;
            last_tick = now;

            if !harvest_delay.is_zero() {
                std::thread::sleep(harvest_delay);
            }
            self.harvest();
            if now >= next_calibration {
                self.calibrate();
                next_calibration = now + CALIBRATION_INTERVAL;
            }
            if now >= next_metrics {
                self.record_metrics();
                next_metrics = now + METRICS_INTERVAL;
            }

            let rx: u64 = self
                .counters
                .iter()
                .flat_map(|c| &c.paths)
                .map(|p| p.rx_packets.load(Ordering::Relaxed))
                .sum();
            let polls: u64 = self.counters.iter().map(|c| c.polls.load(Ordering::Relaxed)).sum();
            // Idle time counts only while the workers actually polled: a starved worker on a busy
            // machine is not an exhausted trace.
            if rx != last_rx {
                idle = Duration::ZERO;
            } else if polls != last_polls {
                idle += tick;
            }
            last_rx = rx;
            last_polls = polls;

            if !idle_limit.is_zero() && idle >= idle_limit {
                break StopReason::Idle;
            }
            if !deadline.is_zero() && now - started >= deadline {
                break StopReason::Deadline;
            }
            if !interval.is_zero() && now >= next_report {
                let totals = log_counters("interval", self.ports, self.counters, last_report);
                log_measure_counters("interval", self.measure_counters);
                if let Some(d) = self.stamp_delays {
                    log_stamp_delay("interval", d);
                }
                last_report = Some((now, totals));
                next_report = now + interval;
            }
        };
        self.stop.store(true, Ordering::Relaxed);
        // Workers finish their last bursts (and, with policy `wait`, may need buffers back).
        self.finish_harvest(Instant::now() + FINISH_TIMEOUT);
        reason
    }

    /// Harvests until every worker has finished or `until`; then stops any wait of the workers.
    fn finish_harvest(&mut self, until: Instant) {
        let Some(h) = self.harvester.as_deref() else { return };
        let mut done = h.done();
        while !done && Instant::now() < until {
            self.harvest();
            std::thread::sleep(Duration::from_millis(1));
            done = self.harvester.as_deref().is_some_and(|h| h.done());
        }
        if !done {
            warn!("a worker did not hand over its last epoch in time; its last epochs are lost");
            self.abort.store(true, Ordering::Relaxed);
        }
    }

    /// Merges and publishes every epoch all workers have passed.
    fn harvest(&mut self) {
        let (Some(h), Some(p)) = (self.harvester.as_deref_mut(), self.publisher.as_deref_mut()) else {
            return;
        };
        let result = h.poll(|e| {
            if let Err(err) = p.publish(e.epoch, e.merged, e.shards, e.complete) {
                warn!(epoch = e.epoch, error = %err, "publishing an epoch");
            }
        });
        match result {
            Ok(_) => {
                if let Some(passed) = h.passed() {
                    p.progress(passed);
                }
            }
            Err(e) => warn!(error = %e, "merging worker shards failed"),
        }
    }

    /// Stores every counter the run logs in the point's metrics (no-op without an endpoint).
    fn record_metrics(&self) {
        if self.exposed.metrics().is_none() {
            return;
        }
        record_counters(self.exposed, self.ports, self.counters, self.measure_counters);
        if let Some(d) = self.stamp_delays {
            self.exposed.record_stamp_delay(&sum_stamp_delay(d));
        }
        if let Some(h) = self.harvester.as_deref() {
            self.exposed.record_harvest(&h.counters(), h.overrun_epochs());
        }
        if let Some(p) = self.publisher.as_deref() {
            self.exposed.record_publisher(p);
        }
    }

    /// Re-anchors the TSC and NIC clock mappings on wall-clock time.
    fn calibrate(&mut self) {
        let Some(c) = self.clocks else { return };
        if let Some(cal) = &mut self.tsc_cal {
            // A pair whose reads were interrupted is skipped: the segment in force stays.
            if let Some(next) = cal.reanchor_pair(&c.tsc.segment(), host_tsc_pair()) {
                c.tsc.publish(next);
            }
        }
        if let Some(nic) = &c.nic {
            for (i, (map, _)) in nic.iter().enumerate() {
                let (Some(cal), Some(port)) = (self.nic_cals.get_mut(i), self.ports.get(i)) else { continue };
                let Ok(raw) = port.read_clock() else { continue };
                map.publish(cal.reanchor(&map.segment(), raw, wall_ns()));
            }
        }
    }
}
