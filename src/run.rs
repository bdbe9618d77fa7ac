//! `wirelat run`: brings up DPDK from the configuration, launches one forwarding worker per
//! queue index on its own EAL lcore, runs the statistics/stop loop on the main lcore, and tears
//! everything down in order (workers, then ports, then the pool, then the EAL) so that every
//! frame handed to a port is flushed (the pcap driver closes its output file on close).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use crossbeam::utils::CachePadded;
use tracing::{info, warn};
use wirelat_control::config::{Config, MAX_BURST_SIZE};
use wirelat_dataplane::dpdk::{
    Eal, LcoreJob, LcoreOutcome, MAX_BURST, Mempool, MempoolSettings, Port, PortSettings, RxTimestampField,
};
use wirelat_dataplane::worker::{
    self, Direction, ForwardOnly, Path, PathInfo, PathSnapshot, WorkerCounters, WorkerSettings,
};

// The configuration's burst limit is the size of the worker's fixed mbuf array.
const _: () = assert!(MAX_BURST_SIZE as usize == MAX_BURST);

/// How often the main lcore looks at the stop conditions. Not much more often: on a machine
/// whose cores are shared, frequent wake-ups of the main lcore push other tasks onto the
/// worker cores (measured: a 5 ms tick cost the forwarder ~15% of its rate).
const CONTROL_TICK: Duration = Duration::from_millis(50);

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
}

/// Counters of one port summed over its queues: rx as ingress, the rest as egress.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortTotals {
    /// Frames received on this port.
    pub rx: u64,
    /// Frames sent on this port.
    pub tx: u64,
    /// Extra tx bursts on this port because its ring was full.
    pub tx_retries: u64,
    /// Frames dropped because this port's tx ring stayed full.
    pub tx_dropped: u64,
    /// Multi-segment frames this port could not transmit.
    pub oversize_dropped: u64,
}

/// Runs the appliance until a signal or a `[stop]` condition.
pub fn run(config: &Config) -> anyhow::Result<RunSummary> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("cannot install the signal handler")?;
    }

    let eal = Eal::init(config.eal_args())?;
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
            data_room_bytes: *config.mempool.data_room_bytes.get_ref(),
            socket: Some(eal.lcore_socket(eal.main_lcore())),
        },
    )?;

    let mut ports = Vec::with_capacity(2);
    for port_config in config.ports.get_ref() {
        let settings = PortSettings {
            rx_queues: queues,
            tx_queues: queues,
            rx_descriptors: *port_config.rx_descriptors.get_ref(),
            tx_descriptors: *port_config.tx_descriptors.get_ref(),
            promiscuous: port_config.promiscuous,
            rx_timestamp: port_config.rx_timestamp,
            mtu: *port_config.mtu.get_ref(),
        };
        let port = Port::open(&eal, &port_config.device_name(), &pool, &settings)?;
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
            "port started"
        );
        if !i.transmits_chained_mbufs() {
            let data_room = u32::from(*config.mempool.data_room_bytes.get_ref()).saturating_sub(128);
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

    let counters: Vec<CachePadded<WorkerCounters>> = (0..queues).map(|_| CachePadded::default()).collect();
    let settings = WorkerSettings {
        burst_size: *config.workers.burst_size.get_ref(),
        tx_retry_limit: config.workers.tx_retry_limit,
    };

    // Worker q: port0 rx q -> port1 tx q, and port1 rx q -> port0 tx q.
    let mut jobs = Vec::with_capacity(usize::from(queues));
    for (q, lcore) in (0..queues).zip(lcores) {
        let mut paths = [
            path(Direction::Port0ToPort1, q, port0, port1, rx_timestamp)?,
            path(Direction::Port1ToPort0, q, port1, port0, rx_timestamp)?,
        ];
        let worker_counters: &WorkerCounters = &counters[usize::from(q)];
        let stop = &*stop;
        jobs.push(LcoreJob {
            lcore,
            job: Box::new(move || {
                tracing::debug!(queue = q, lcore = Eal::current_lcore(), "worker started");
                worker::run(&mut paths, &settings, worker_counters, stop, &mut ForwardOnly);
                0
            }),
        });
    }

    info!(workers = queues, burst_size = settings.burst_size, "forwarding");
    let started = Instant::now();
    let (reason, outcomes) =
        eal.run_on_lcores(jobs, || control_loop(config, [port0, port1], &counters, &stop))?;
    let elapsed = started.elapsed();
    std::thread::sleep(TX_DRAIN);

    let totals = log_counters("final", [port0, port1], &counters, None);
    info!(reason = ?reason, seconds = elapsed.as_secs_f64(), mbufs_in_use = pool.in_use(), "stopped");
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
    if failed {
        bail!("a worker lcore failed; see the log above");
    }
    Ok(RunSummary { reason, ports: totals })
}

/// One direction of worker `queue`: rx queue `queue` of `rx`, tx queue `queue` of `tx`.
fn path<'p>(
    direction: Direction,
    queue: u16,
    rx: &'p Port<'_>,
    tx: &'p Port<'_>,
    rx_timestamp: Option<RxTimestampField>,
) -> anyhow::Result<Path<'p>> {
    Ok(Path {
        rx: rx.rx_queue(queue)?,
        tx: tx.tx_queue(queue)?,
        info: PathInfo { direction, queue, rx_timestamp },
        drop_chained: rx.info().may_receive_chained_mbufs() && !tx.info().transmits_chained_mbufs(),
    })
}

/// The main lcore's loop: periodic counters, and the stop conditions. Sets `stop` when done.
fn control_loop(
    config: &Config,
    ports: [&Port<'_>; 2],
    counters: &[CachePadded<WorkerCounters>],
    stop: &AtomicBool,
) -> StopReason {
    let started = Instant::now();
    let interval = Duration::from_millis(config.stats.interval_ms);
    let idle_limit = Duration::from_millis(config.stop.idle_ms);
    let deadline = Duration::from_millis(config.stop.after_ms);

    let mut next_report = started + interval;
    let mut last_report: Option<(Instant, [PortTotals; 2])> = Some((started, [PortTotals::default(); 2]));
    let mut last_rx = 0u64;
    let mut last_polls = 0u64;
    let mut idle = Duration::ZERO;
    let mut last_tick = started;

    let reason = loop {
        if stop.load(Ordering::Relaxed) {
            break StopReason::Signal;
        }
        std::thread::sleep(CONTROL_TICK);
        let now = Instant::now();
        let tick = now - last_tick;
        last_tick = now;

        let rx: u64 =
            counters.iter().flat_map(|c| &c.paths).map(|p| p.rx_packets.load(Ordering::Relaxed)).sum();
        let polls: u64 = counters.iter().map(|c| c.polls.load(Ordering::Relaxed)).sum();
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
            let totals = log_counters("interval", ports, counters, last_report);
            last_report = Some((now, totals));
            next_report = now + interval;
        }
    };
    stop.store(true, Ordering::Relaxed);
    reason
}

/// Logs per-port counters (ours and the device's), and per-queue ones when there are several
/// queues or at the end. With `since`, also the rates since that report.
fn log_counters(
    label: &str,
    ports: [&Port<'_>; 2],
    counters: &[CachePadded<WorkerCounters>],
    since: Option<(Instant, [PortTotals; 2])>,
) -> [PortTotals; 2] {
    let snapshots: Vec<[PathSnapshot; 2]> =
        counters.iter().map(|c| [c.paths[0].snapshot(), c.paths[1].snapshot()]).collect();
    let mut totals = [PortTotals::default(); 2];
    for (p, total) in totals.iter_mut().enumerate() {
        for snap in &snapshots {
            // Port p receives in direction p and transmits in the other direction.
            let ingress = &snap[p];
            let egress = &snap[1 - p];
            total.rx += ingress.rx_packets;
            total.tx += egress.tx_packets;
            total.tx_retries += egress.tx_retries;
            total.tx_dropped += egress.tx_dropped;
            total.oversize_dropped += egress.oversize_dropped;
        }
    }
    let seconds = since.map(|(t, _)| t.elapsed().as_secs_f64()).filter(|s| *s > 0.0);
    for (p, port) in ports.iter().enumerate() {
        let t = totals[p];
        let device = port.stats().unwrap_or_default();
        let (rx_pps, tx_pps) = match (seconds, since) {
            (Some(s), Some((_, before))) => {
                ((t.rx - before[p].rx) as f64 / s, (t.tx - before[p].tx) as f64 / s)
            }
            _ => (0.0, 0.0),
        };
        info!(
            label,
            port = p,
            name = %port.info().name,
            rx = t.rx,
            tx = t.tx,
            tx_retries = t.tx_retries,
            tx_dropped = t.tx_dropped,
            oversize_dropped = t.oversize_dropped,
            dev_rx = device.rx_packets,
            dev_tx = device.tx_packets,
            dev_imissed = device.rx_missed,
            dev_rx_nombuf = device.rx_nombuf,
            dev_ierrors = device.rx_errors,
            dev_oerrors = device.tx_errors,
            rx_pps = rx_pps.round() as u64,
            tx_pps = tx_pps.round() as u64,
            "port counters"
        );
    }
    if snapshots.len() > 1 || label == "final" {
        for (q, snap) in snapshots.iter().enumerate() {
            for (p, _) in ports.iter().enumerate() {
                info!(
                    label,
                    port = p,
                    queue = q,
                    rx = snap[p].rx_packets,
                    tx = snap[1 - p].tx_packets,
                    tx_retries = snap[1 - p].tx_retries,
                    tx_dropped = snap[1 - p].tx_dropped,
                    oversize_dropped = snap[1 - p].oversize_dropped,
                    "queue counters"
                );
            }
        }
    }
    totals
}
