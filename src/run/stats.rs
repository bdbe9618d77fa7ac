//! The statistics `wirelat run` logs, prints and exposes: the port and queue counters (ours,
//! summed per port, and the device's), the measurement counters per worker and in total, and
//! the stamping delay. Read by the control loop; the workers only publish.

use crossbeam::utils::CachePadded;
use std::time::Instant;
use tracing::info;
use wirelat_dataplane::dpdk::Port;
use wirelat_dataplane::pipeline::{CounterSnapshot, SharedCounters};
use wirelat_dataplane::stamp_delay::{SharedStampDelay, StampDelay};
use wirelat_dataplane::worker::{PathSnapshot, WorkerCounters};

use crate::point_metrics::Exposed;

/// The port counters, listed once (`field => log key`): hands the list to the macro it is given,
/// after that macro's own arguments. It declares [`PortTotals`] and writes the "port counters"
/// and "queue counters" lines.
macro_rules! port_counters {
    ($($then:ident)::+ ! { $($args:tt)* }) => {
        $($then)::+! { $($args)* {
            /// Frames received on this port.
            rx => rx,
            /// Frames sent on this port.
            tx => tx,
            /// Extra tx bursts on this port because its ring was full.
            tx_retries => tx_retries,
            /// Frames dropped because this port's tx ring stayed full.
            tx_dropped => tx_dropped,
            /// Frames this port could not transmit whole (too long for it, or chained beyond
            /// what it sends).
            oversize_dropped => oversize_dropped,
            /// Frames received on this port cut short or with a broken mbuf chain (never
            /// forwarded).
            truncated_dropped => truncated_dropped,
        } }
    };
}

port_counters!(wirelat_dataplane::counter_set! {
    /// Counters of one port summed over its queues (or of one queue): rx as ingress, the rest
    /// as egress. A port's view of two directions' [`PathSnapshot`]s, hence its own set.
    pub struct PortTotals;
});

impl PortTotals {
    /// Both ports' counters from one worker's two directions: port `p` receives in direction
    /// `p` and transmits in the other.
    fn of_queue(paths: &[PathSnapshot; 2]) -> [PortTotals; 2] {
        std::array::from_fn(|p| {
            let (ingress, egress) = (&paths[p], &paths[1 - p]);
            PortTotals {
                rx: ingress.rx_packets,
                tx: egress.tx_packets,
                tx_retries: egress.tx_retries,
                tx_dropped: egress.tx_dropped,
                oversize_dropped: egress.oversize_dropped,
                truncated_dropped: ingress.truncated_dropped,
            }
        })
    }
}

/// Logs per-port counters (ours and the device's), and per-queue ones when there are several
/// queues or at the end. With `since`, also the rates since that report.
pub(super) fn log_counters(
    label: &str,
    ports: [&Port<'_>; 2],
    counters: &[CachePadded<WorkerCounters>],
    since: Option<(Instant, [PortTotals; 2])>,
) -> [PortTotals; 2] {
    let snapshots: Vec<[PathSnapshot; 2]> =
        counters.iter().map(|c| [c.paths[0].snapshot(), c.paths[1].snapshot()]).collect();
    let totals = port_totals(&snapshots);
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
        port_counters!(wirelat_dataplane::log_counters! {
            info,
            t,
            [label, port = p, name = %port.info().name,],
            [
                dev_rx = device.rx_packets,
                dev_tx = device.tx_packets,
                dev_imissed = device.rx_missed,
                dev_rx_nombuf = device.rx_nombuf,
                dev_ierrors = device.rx_errors,
                dev_oerrors = device.tx_errors,
                rx_pps = rx_pps.round() as u64,
                tx_pps = tx_pps.round() as u64,
            ],
            "port counters"
        });
    }
    if snapshots.len() > 1 || label == "final" {
        for (q, snap) in snapshots.iter().enumerate() {
            for (p, t) in PortTotals::of_queue(snap).iter().enumerate() {
                port_counters!(wirelat_dataplane::log_counters! {
                    info, t, [label, port = p, queue = q,], [], "queue counters"
                });
            }
        }
    }
    totals
}

/// Per-port totals of the workers' path snapshots.
fn port_totals(snapshots: &[[PathSnapshot; 2]]) -> [PortTotals; 2] {
    let mut totals = [PortTotals::default(); 2];
    for snap in snapshots {
        for (total, queue) in totals.iter_mut().zip(PortTotals::of_queue(snap)) {
            total.add(&queue);
        }
    }
    totals
}

/// Stores the port counters (ours and the device's, as `log_counters` logs them) and the
/// measurement counters summed over workers in the point's metrics.
pub(super) fn record_counters(
    exposed: &Exposed,
    ports: [&Port<'_>; 2],
    counters: &[CachePadded<WorkerCounters>],
    measure_counters: &[CachePadded<SharedCounters>],
) {
    let Some(m) = exposed.metrics() else { return };
    let snapshots: Vec<[PathSnapshot; 2]> =
        counters.iter().map(|c| [c.paths[0].snapshot(), c.paths[1].snapshot()]).collect();
    for (p, (t, port)) in port_totals(&snapshots).iter().zip(ports).enumerate() {
        let name = port.info().name.clone();
        let id = p.to_string();
        let l = [("port", id.as_str()), ("name", name.as_str())];
        m.set("wirelat_port_rx_frames", &l, t.rx);
        m.set("wirelat_port_tx_frames", &l, t.tx);
        m.set("wirelat_port_tx_retries", &l, t.tx_retries);
        for (reason, n) in
            [("tx_full", t.tx_dropped), ("oversize", t.oversize_dropped), ("truncated", t.truncated_dropped)]
        {
            m.set("wirelat_port_dropped_frames", &[l[0], l[1], ("reason", reason)], n);
        }
        let d = port.stats().unwrap_or_default();
        for (counter, n) in [
            ("rx", d.rx_packets),
            ("tx", d.tx_packets),
            ("imissed", d.rx_missed),
            ("rx_nombuf", d.rx_nombuf),
            ("ierrors", d.rx_errors),
            ("oerrors", d.tx_errors),
        ] {
            m.set("wirelat_port_device_frames", &[l[0], l[1], ("counter", counter)], n);
        }
    }
    let mut total = CounterSnapshot::default();
    for c in measure_counters {
        total.add(&c.snapshot());
    }
    exposed.record_measure(&total);
}

/// Logs the measurement counters per worker (when several) and in total; returns the total.
pub(super) fn log_measure_counters(label: &str, counters: &[CachePadded<SharedCounters>]) -> CounterSnapshot {
    let mut total = CounterSnapshot::default();
    for (q, c) in counters.iter().enumerate() {
        let s = c.snapshot();
        if counters.len() > 1 {
            log_snapshot(label, Some(q), &s);
        }
        total.add(&s);
    }
    log_snapshot(label, None, &total);
    total
}

/// The workers' stamping delays summed.
pub(super) fn sum_stamp_delay(delays: &[CachePadded<SharedStampDelay>]) -> StampDelay {
    let mut total = StampDelay::default();
    for d in delays {
        total.add(&d.snapshot());
    }
    total
}

/// Logs the stamping delay over all workers (one line) and returns it.
pub(super) fn log_stamp_delay(label: &str, delays: &[CachePadded<SharedStampDelay>]) -> StampDelay {
    let d = sum_stamp_delay(delays);
    info!(
        label,
        packets = d.count,
        mean_ns = d.mean_ns().map_or(0, |m| m.round() as u64),
        p50_below_ns = d.quantile_upper_ns(0.5).unwrap_or(0),
        p99_below_ns = d.quantile_upper_ns(0.99).unwrap_or(0),
        max_ns = d.max_ns,
        negative = d.negative,
        max_negative_ns = d.max_negative_ns,
        "stamping delay (TSC stamp − kernel receive time, 1 µs resolution)"
    );
    d
}

/// The "measure counters" line of one worker (`worker`) or of all: every counter of
/// [`wirelat_dataplane::measure_counters!`] by its log key.
fn log_snapshot(label: &str, worker: Option<usize>, s: &CounterSnapshot) {
    wirelat_dataplane::measure_counters!(wirelat_dataplane::log_counters! {
        info, s, [label, worker,], [], "measure counters"
    });
}
