//! The main lcore's loop while the workers run: harvest and publish epochs, re-anchor the
//! clocks, store the metrics, log the counters at intervals, and watch the stop conditions;
//! then, once told to stop, harvest until every worker has handed over its last epoch.

use crossbeam::utils::CachePadded;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::warn;
use wirelat_control::config::Config;
use wirelat_control::epoch::Harvester;
use wirelat_control::publish::Publisher;
use wirelat_dataplane::clock::{Calibrator, host_tsc_pair};
use wirelat_dataplane::dpdk::Port;
use wirelat_dataplane::pipeline::{EpochSynopses, SharedCounters};
use wirelat_dataplane::stamp_delay::SharedStampDelay;
use wirelat_dataplane::worker::WorkerCounters;

use super::StopReason;
use super::clocks::{CALIBRATION_INTERVAL, Clocks, wall_ns};
use super::stats::{
    PortTotals, log_counters, log_measure_counters, log_stamp_delay, record_counters, sum_stamp_delay,
};
use crate::point_metrics::Exposed;

/// How often the main lcore looks at the stop conditions at most. Not much more often: on a
/// machine whose cores are shared, frequent wake-ups of the main lcore push other tasks onto the
/// worker cores (measured: a 5 ms tick cost the forwarder ~15% of its rate). With short epochs
/// the harvest ticks faster (a quarter epoch, at least 1 ms).
const CONTROL_TICK: Duration = Duration::from_millis(50);

/// How often the control thread stores the counters in the point's metrics at most.
const METRICS_INTERVAL: Duration = Duration::from_millis(200);

/// After the workers were told to stop, how long the control thread keeps harvesting before it
/// gives up on a worker that does not finish.
const FINISH_TIMEOUT: Duration = Duration::from_secs(10);

/// The main lcore's state: statistics, stop conditions, harvest and clock calibration.
pub(super) struct Control<'a, 'p> {
    pub(super) config: &'a Config,
    pub(super) ports: [&'a Port<'p>; 2],
    pub(super) counters: &'a [CachePadded<WorkerCounters>],
    pub(super) measure_counters: &'a [CachePadded<SharedCounters>],
    /// Per worker, when the stamping delay is measured.
    pub(super) stamp_delays: Option<&'a [CachePadded<SharedStampDelay>]>,
    pub(super) stop: &'a AtomicBool,
    pub(super) abort: &'a AtomicBool,
    pub(super) harvester: Option<&'a mut Harvester<EpochSynopses>>,
    pub(super) publisher: Option<&'a mut Publisher>,
    pub(super) clocks: Option<&'a Clocks>,
    /// The control thread's calibrators (TSC, and each port's NIC clock).
    pub(super) tsc_cal: Option<Calibrator>,
    pub(super) nic_cals: Vec<Calibrator>,
    /// The point's `/metrics` (no-op without `[metrics] listen`).
    pub(super) exposed: &'a Exposed,
}

impl Control<'_, '_> {
    /// Runs until a stop condition, then keeps harvesting until every worker has finished.
    pub(super) fn run(&mut self) -> StopReason {
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
        let mut last_empty_polls = vec![0u64; self.counters.len()];
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
            // Idle time counts only while every worker found its queues empty: a starved worker
            // on a busy machine, or one still working through frames it holds (a replayed burst
            // spanning many epochs, waiting for buffers), is not an exhausted trace, even when
            // another worker's queues ran dry long before.
            let mut all_empty = true;
            for (c, last) in self.counters.iter().zip(last_empty_polls.iter_mut()) {
                let now = c.empty_polls.load(Ordering::Relaxed);
                all_empty &= now != *last;
                *last = now;
            }
            if rx != last_rx {
                idle = Duration::ZERO;
            } else if all_empty {
                idle += tick;
            }
            last_rx = rx;

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
    pub(super) fn finish_harvest(&mut self, until: Instant) {
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
    pub(super) fn record_metrics(&self) {
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
