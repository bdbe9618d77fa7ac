//! What `wirelat run` and `wirelat offline` put on their `/metrics` (`[metrics] listen`): the
//! totals the control thread already holds (measurement counters, harvest, publisher, network
//! sink), stored into [`PointMetrics`] once per control tick and once more, final, at the end.
//! The family names and what each mirrors in the log are in
//! [`wirelat_control::report::point::POINT_FAMILIES`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tracing::info;
use wirelat_control::config::Config;
use wirelat_control::epoch::HarvestCounters;
use wirelat_control::publish::Publisher;
use wirelat_control::report::point::{PointEndpoint, PointMetrics};
use wirelat_dataplane::pipeline::CounterSnapshot;
use wirelat_dataplane::stamp_delay::{self, StampDelay};

/// A point's metrics and the endpoint serving them; `None` fields when `[metrics] listen` is
/// absent, so every `record_*` is then a no-op.
pub struct Exposed {
    metrics: Option<Arc<PointMetrics>>,
    endpoint: Option<PointEndpoint>,
    linger: Duration,
}

impl Exposed {
    /// Starts the endpoint of `[metrics]` (nothing when `listen` is absent).
    pub fn start(config: &Config, mode: &str) -> anyhow::Result<Self> {
        let linger = Duration::from_millis(config.metrics.linger_ms);
        let Some(listen) = &config.metrics.listen else {
            return Ok(Self { metrics: None, endpoint: None, linger });
        };
        let metrics = Arc::new(PointMetrics::new(config.point_ids().point, mode));
        let endpoint = PointEndpoint::start(listen, metrics.clone())
            .with_context(|| format!("cannot serve [metrics] listen = \"{listen}\""))?;
        // Stable for scripts and tests, like the collector's line.
        eprintln!("wirelat {mode}: metrics on http://{}/metrics", endpoint.addr);
        Ok(Self { metrics: Some(metrics), endpoint: Some(endpoint), linger })
    }

    /// The metrics, when exposed.
    pub fn metrics(&self) -> Option<&PointMetrics> {
        self.metrics.as_deref()
    }

    /// The measurement counters summed over workers.
    pub fn record_measure(&self, s: &CounterSnapshot) {
        let Some(m) = self.metrics() else { return };
        m.set("wirelat_measure_frames", &[], s.frames);
        m.set("wirelat_measure_measured_packets", &[], s.measured);
        // One series per skip reason: the log's `skipped_<reason>` counters.
        for (key, n) in s.fields() {
            if let Some(reason) = key.strip_prefix("skipped_") {
                m.set("wirelat_measure_skipped_frames", &[("reason", reason)], n);
            }
        }
        m.set("wirelat_measure_untimed_packets", &[], s.untimed);
        m.set("wirelat_measure_late_packets", &[], s.late);
        m.set("wirelat_measure_overrun_epochs", &[], s.overrun_epochs);
        m.set("wirelat_measure_overrun_packets", &[], s.overrun_packets);
        m.set("wirelat_measure_overrun_waits", &[], s.waits);
    }

    /// The stamping delay summed over workers (TSC clock, ports with the kernel's time); only
    /// `run` has live ports, so builds without DPDK do not call it.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub fn record_stamp_delay(&self, d: &StampDelay) {
        let Some(m) = self.metrics() else { return };
        m.set("wirelat_stamp_delay_packets", &[], d.count);
        m.set("wirelat_stamp_delay_ns_sum", &[], d.sum_ns);
        m.set("wirelat_stamp_delay_max_ns", &[], d.max_ns);
        for (i, &n) in d.buckets.iter().enumerate() {
            let edge = stamp_delay::upper_edge(i);
            let le = if edge == u64::MAX { "+Inf".to_owned() } else { edge.to_string() };
            m.set("wirelat_stamp_delay_bucket_packets", &[("le_ns", &le)], n);
        }
        m.set("wirelat_stamp_delay_bucket_packets", &[("le_ns", "negative")], d.negative);
    }

    /// The harvester's counters and its overrun count.
    pub fn record_harvest(&self, h: &HarvestCounters, overrun_epochs: u64) {
        let Some(m) = self.metrics() else { return };
        m.set("wirelat_harvest_epochs", &[], h.epochs);
        m.set("wirelat_harvest_incomplete_epochs", &[], h.incomplete_epochs);
        m.set("wirelat_harvest_overrun_epochs", &[], overrun_epochs);
    }

    /// The publisher's counters, its sinks' give-ups and the network sink's counters.
    pub fn record_publisher(&self, p: &Publisher) {
        let Some(m) = self.metrics() else { return };
        let c = p.counters();
        m.set("wirelat_publish_epochs", &[], c.epochs);
        m.set("wirelat_publish_messages", &[], c.messages);
        m.set("wirelat_publish_body_bytes", &[], c.body_bytes);
        m.set("wirelat_publish_colate_epochs", &[], c.colate_epochs);
        for (reason, n) in p.losses() {
            m.set("wirelat_publish_given_up", &[("reason", reason)], n);
        }
        if let Some(s) = p.ship_counters() {
            m.set("wirelat_ship_delivered", &[], s.frames.delivered);
            m.set("wirelat_ship_sent_frames", &[], s.frames.sent);
            m.set("wirelat_ship_resent_frames", &[], s.frames.resent);
            m.set("wirelat_ship_acked", &[], s.frames.acked);
            m.set("wirelat_ship_connections", &[], s.connections.connections);
            m.set("wirelat_ship_connect_failures", &[], s.connections.connect_failures);
            m.set("wirelat_ship_not_crash_safe", &[], s.queue.not_crash_safe);
            m.set("wirelat_ship_queued", &[], s.queue.queued);
            m.set("wirelat_ship_spilled", &[], s.queue.spilled);
            m.set("wirelat_ship_rda_lookups", &[], s.rda.rda_lookups);
        }
    }

    /// Marks the values final and keeps serving them for `[metrics] linger_ms`.
    pub fn finish(self) {
        let Some(m) = self.metrics() else { return };
        m.set("wirelat_point_finished", &[], 1);
        if !self.linger.is_zero() {
            info!(linger_ms = self.linger.as_millis() as u64, "metrics endpoint: serving the final values");
            std::thread::sleep(self.linger);
        }
        drop(self.endpoint);
    }
}
