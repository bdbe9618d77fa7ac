//! `wirelat run`: plans the cores, brings up DPDK from the configuration, launches one worker
//! per queue index on its own EAL lcore (measuring with the configured synopses, or only
//! forwarding), runs the control loop on the main lcore (harvest and publish epochs, calibrate
//! clocks, log counters, watch the stop conditions), and tears everything down in order
//! (workers, last epochs, outputs, ports, pool, EAL) so that every frame handed to a port is
//! flushed (the pcap driver closes its output file on close).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use crossbeam::utils::CachePadded;
use tracing::{info, warn};
use wirelat_control::config::{ClockSource, Config, DeviceKind, MAX_BURST_SIZE};
use wirelat_control::core_plan::{CorePlan, Topology, pci_numa_node};
use wirelat_control::epoch::Harvester;
use wirelat_dataplane::dpdk::{
    Eal, LcoreJob, LcoreOutcome, MAX_BURST, Mempool, MempoolSettings, RxTimestampField,
};
use wirelat_dataplane::epoch::{EpochClock, EpochLink};
use wirelat_dataplane::measuring::MeasuringHook;
use wirelat_dataplane::pipeline::{CounterSnapshot, FilingCounts, OverrunPolicy, SharedCounters};
use wirelat_dataplane::stamp_delay::{SharedStampDelay, StampDelay};
use wirelat_dataplane::worker::{self, Direction, ForwardOnly, WorkerCounters, WorkerSettings};

use crate::measure;
use crate::point_metrics::Exposed;

mod build;
mod clocks;
mod control;
mod ports;
mod stats;
use clocks::{packet_clock, setup_clocks};
use control::Control;
pub use ports::PortRefused;
use ports::{check_interfaces, open_ports, path};
pub use stats::PortTotals;
use stats::{log_counters, log_measure_counters, log_stamp_delay};

// The configuration's burst limit is the size of the worker's fixed mbuf array.
const _: () = assert!(MAX_BURST_SIZE as usize == MAX_BURST);

/// Time given to NIC tx rings to drain after the workers stopped, before the ports stop.
const TX_DRAIN: Duration = Duration::from_millis(20);

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
    let template = measuring.then(|| measure::epoch_template(config)).transpose()?;
    // A replay whose workers wait for the control thread (`overrun = "wait"`: nothing of the
    // input may be skipped) may as well wait for the peer: otherwise a peer that fell a queue's
    // worth of epochs behind lost them as `queue_full` (the demo's 16-MB COLATE bodies filled
    // the 512-MiB queue at its 16th epoch). Live (`skip`), the workers must keep draining the
    // wire, so a full queue gives epochs up, counted.
    let backpressure = config.epochs.overrun == OverrunPolicy::Wait;
    let mut publisher = measuring.then(|| measure::publisher(config, backpressure)).transpose()?;
    let exposed = Exposed::start(config, "run")?;

    check_interfaces(config)?;

    let eal = Eal::init(config.eal_args(&plan))?;
    let queues = config.queues();
    let lcores = eal.worker_lcores();
    if lcores.len() != usize::from(queues) {
        bail!("the EAL started {} worker lcores for {queues} queues", lcores.len());
    }

    // The epoch rings: one link per worker. Each worker builds its own pipeline (its ring's
    // buffers, backed, and its carry) on its own lcore, so that their pages are first touched
    // there and live on its NUMA node; the harvester's accumulators are the control thread's.
    // The builds run before any port starts: writing a ring's reserved logs took up to about
    // half a second here at the sizes of `configs/measure-trace.toml`, and a started port would
    // meanwhile take frames that nobody polls (its rx ring overflows) instead of showing its
    // link down.
    let mut links = Vec::new();
    let mut pipelines = Vec::new().into_iter();
    if let Some(t) = &template {
        let clock = EpochClock::new(config.epochs.length_ns()).context("epoch length is 0")?;
        let mut pending = Vec::with_capacity(usize::from(queues));
        for _ in 0..queues {
            let (link, writer) = EpochLink::deferred(*config.epochs.ring.get_ref(), clock);
            links.push(link);
            pending.push(writer);
        }
        pipelines = build::build_pipelines(&eal, &lcores, pending, t, config)?.into_iter();
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
    let ports = open_ports(config, &eal, &pool)?;
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

    // The workers' share of RDA's filing waits at most a quarter epoch for them (20 ms at most):
    // the shards it holds meanwhile are buffers their rings lack.
    let patience = wirelat_control::epoch::DEFAULT_PATIENCE
        .min(std::time::Duration::from_nanos(config.epochs.length_ns() / 4));
    let mut harvester = template.map(|t| Harvester::new(links, move || t.clone()).with_patience(patience));

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
        let measurement = match (&clocks, pipelines.next()) {
            (Some(c), Some(pipeline)) => Some((pipeline, c)),
            _ => None,
        };
        jobs.push(LcoreJob {
            lcore,
            job: Box::new(move || {
                tracing::debug!(queue = q, lcore = Eal::current_lcore(), "worker started");
                match measurement {
                    None => worker::run(&mut paths, &settings, worker_counters, stop, &mut ForwardOnly),
                    Some((pipeline, c)) => {
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
        // The workers' share of the harvest (`[epochs] worker_filing`): per epoch and direction
        // lent, the chunks of RDA's filing and of LDS's flow lists they did and those the
        // control thread did itself.
        let filing = h.accumulators().fold(FilingCounts::default(), |mut sum, acc| {
            sum.add_from(&acc.filing_counts());
            sum
        });
        info!(
            epochs = c.epochs,
            incomplete = c.incomplete_epochs,
            shards = c.shards,
            overrun_epochs,
            rda_filings_lent = filing.lent,
            rda_chunks_by_workers = filing.by_workers,
            rda_chunks_by_control = filing.by_control,
            lds_lists_lent = filing.lists_lent,
            lds_chunks_by_workers = filing.list_chunks_by_workers,
            lds_chunks_by_control = filing.list_chunks_by_control,
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
