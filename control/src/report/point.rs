//! A point's own `/metrics` (`wirelat run` and `wirelat offline`, `[metrics] listen`): every
//! counter the run logs (ports, measurement, harvest, publisher, shipper), as Prometheus
//! families of the `prometheus-client` crate, served on the shared HTTP endpoint
//! ([`super::http`]).
//!
//! Control never sees a packet: the values are totals the control thread already harvests
//! (the workers' atomic counters, the publisher's and the shipper's snapshots). It stores them
//! here once per control tick with [`PointMetrics::set`]; a scrape renders whatever was stored
//! last. The counters are mirrors of totals, so they are *set*, not incremented: every total the
//! run keeps only grows, so every series stays monotone as Prometheus expects of a counter.

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

/// Label pairs of one series.
pub type Labels = Vec<(String, String)>;

/// Whether a family counts (only grows) or gauges (a current value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Exposed with the `_total` suffix.
    Counter,
    /// A current value.
    Gauge,
}

/// One family a point exposes: its name (without `_total`), kind and help text.
#[derive(Clone, Copy, Debug)]
pub struct PointFamily {
    /// Name; counters are exposed as `<name>_total`.
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// Help text.
    pub help: &'static str,
}

const fn c(name: &'static str, help: &'static str) -> PointFamily {
    PointFamily { name, kind: Kind::Counter, help }
}

const fn g(name: &'static str, help: &'static str) -> PointFamily {
    PointFamily { name, kind: Kind::Gauge, help }
}

/// Every family a point exposes, with the log field each mirrors in its help text.
pub const POINT_FAMILIES: &[PointFamily] = &[
    g("wirelat_point_info", "1, with the point id and the mode (run, offline) as labels"),
    g(
        "wirelat_point_finished",
        "1 once the run has ended and the values are final (the endpoint lingers for [metrics] linger_ms), else 0",
    ),
    // Ports (log: "port counters"), by port and device name.
    c("wirelat_port_rx_frames", "Frames the workers received on the port (log: rx)"),
    c("wirelat_port_tx_frames", "Frames the workers sent on the port (log: tx)"),
    c("wirelat_port_tx_retries", "Extra tx bursts because the port's ring was full (log: tx_retries)"),
    c(
        "wirelat_port_dropped_frames",
        "Frames dropped at the port, by reason: tx_full (log: tx_dropped), oversize (oversize_dropped), truncated (truncated_dropped)",
    ),
    c(
        "wirelat_port_device_frames",
        "The device's own counters (log: dev_rx, dev_tx, dev_imissed, dev_rx_nombuf, dev_ierrors, dev_oerrors), by counter",
    ),
    // Measurement (log: "measure counters" / "offline run finished").
    c("wirelat_measure_frames", "Frames handed to the measurement pipeline (log: frames)"),
    c("wirelat_measure_measured_packets", "Packets measured by the synopses (log: measured)"),
    c(
        "wirelat_measure_skipped_frames",
        "Frames forwarded but not measured, by reason (log: skipped_arp, skipped_unknown_ethertype, skipped_fragment, skipped_truncated, skipped_malformed, skipped_encapsulation)",
    ),
    c("wirelat_measure_untimed_packets", "Packets without a timestamp (log: untimed)"),
    c("wirelat_measure_late_packets", "Packets older than the worker's current epoch (log: late)"),
    c(
        "wirelat_measure_overrun_epochs",
        "Epochs a worker could not measure because the control thread fell behind, summed over workers (log: overrun_epochs)",
    ),
    c("wirelat_measure_overrun_packets", "Packets not measured because of an overrun (log: overrun_packets)"),
    c(
        "wirelat_measure_overrun_waits",
        "Times a worker waited for a buffer (overrun policy wait) (log: waits)",
    ),
    // Stamping delay, TSC clock on a port with the kernel's receive time (log: "stamping delay").
    c("wirelat_stamp_delay_packets", "Packets whose stamping delay was measured (log: packets)"),
    c("wirelat_stamp_delay_ns_sum", "Sum of the non-negative stamping delays, ns (log: mean_ns × count)"),
    g("wirelat_stamp_delay_max_ns", "Largest stamping delay, ns (log: max_ns)"),
    c(
        "wirelat_stamp_delay_bucket_packets",
        "Stamping delays per log2 bucket, by its exclusive upper edge le_ns (not cumulative); le_ns=\"negative\": stamped before the kernel's time (log: negative)",
    ),
    // Harvest (log: "harvest").
    c("wirelat_harvest_epochs", "Epochs merged from the workers' shards (log: epochs)"),
    c("wirelat_harvest_incomplete_epochs", "Merged epochs some worker skipped (log: incomplete)"),
    c(
        "wirelat_harvest_overrun_epochs",
        "Epochs lost to overruns, as the harvester counts them (log: overrun_epochs)",
    ),
    // Publisher (log: "offline run finished").
    c("wirelat_publish_epochs", "Merged epochs published (log: epochs)"),
    c("wirelat_publish_messages", "Epoch synopses handed to the sinks (log: messages)"),
    c("wirelat_publish_body_bytes", "Encoded bytes of those synopses (log: body_bytes)"),
    c(
        "wirelat_publish_colate_epochs",
        "COLATE counter epochs closed, with a colate_archive (log: colate_epochs)",
    ),
    c(
        "wirelat_publish_given_up",
        "Epoch synopses a sink gave up, by reason: they will not reach their destination (log: \"epochs lost\")",
    ),
    // Shipper (log: "network sink closed").
    c("wirelat_ship_delivered", "Epoch synopses handed to the network sink (log: delivered)"),
    c("wirelat_ship_sent_frames", "Frames written to the peer, resends included (log: sent)"),
    c("wirelat_ship_resent_frames", "Frames written again after a reconnect (log: resent)"),
    c("wirelat_ship_acked", "Epoch synopses the peer acknowledged (log: acked)"),
    c("wirelat_ship_connections", "Successful handshakes with the peer (log: connections)"),
    c("wirelat_ship_connect_failures", "Failed connection attempts to the peer"),
    c(
        "wirelat_ship_not_crash_safe",
        "Epoch synopses kept in memory only, the spill directory being unable to take them (log: not_crash_safe)",
    ),
    g("wirelat_ship_queued", "Epoch synopses waiting for the peer's acknowledgement now"),
    g("wirelat_ship_spilled", "Of those, held only in the spill directory"),
    c("wirelat_ship_rda_lookups", "RDA timestamp look-ups the point answered"),
];

enum Fam {
    Counter(Family<Labels, Counter>),
    Gauge(Family<Labels, Gauge>),
}

/// A point's metrics: a `prometheus-client` registry of [`POINT_FAMILIES`].
pub struct PointMetrics {
    registry: RwLock<Registry>,
    families: BTreeMap<&'static str, Fam>,
}

impl std::fmt::Debug for PointMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PointMetrics").field("families", &self.families.len()).finish()
    }
}

/// `(key, value)` label pairs as owned [`Labels`].
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

impl PointMetrics {
    /// Every family registered, no series yet; `point` and `mode` label the info series.
    pub fn new(point: u32, mode: &str) -> Self {
        let mut registry = Registry::default();
        let mut families = BTreeMap::new();
        for f in POINT_FAMILIES {
            let fam = match f.kind {
                Kind::Counter => {
                    let fam = Family::<Labels, Counter>::default();
                    registry.register(f.name, f.help, fam.clone());
                    Fam::Counter(fam)
                }
                Kind::Gauge => {
                    let fam = Family::<Labels, Gauge>::default();
                    registry.register(f.name, f.help, fam.clone());
                    Fam::Gauge(fam)
                }
            };
            families.insert(f.name, fam);
        }
        let m = Self { registry: RwLock::new(registry), families };
        m.set("wirelat_point_info", &[("point", &point.to_string()), ("mode", mode)], 1);
        m.set("wirelat_point_finished", &[], 0);
        m
    }

    /// Stores `value` in the series (`family`, `labels`). An unknown family is a bug in the
    /// caller; it is ignored (with a debug assertion) rather than taking the run down.
    pub fn set(&self, family: &str, labels_: &[(&str, &str)], value: u64) {
        let l = labels(labels_);
        match self.families.get(family) {
            Some(Fam::Counter(f)) => f.get_or_create(&l).inner().store(value, Ordering::Relaxed),
            Some(Fam::Gauge(f)) => {
                f.get_or_create(&l).set(i64::try_from(value).unwrap_or(i64::MAX));
            }
            None => debug_assert!(false, "unknown point family {family}"),
        }
    }

    /// The value of one series, if it was set.
    pub fn get(&self, family: &str, labels_: &[(&str, &str)]) -> Option<u64> {
        let l = labels(labels_);
        match self.families.get(family)? {
            Fam::Counter(f) => f.get(&l).map(|c| c.get()),
            Fam::Gauge(f) => f.get(&l).map(|g| g.get().max(0) as u64),
        }
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let r = self.registry.read().unwrap_or_else(|p| p.into_inner());
        if prometheus_text::encode(&mut out, &r).is_err() {
            out.clear();
        }
        out
    }
}

/// A running `/metrics` endpoint of a point: stops (and joins its thread) on drop.
pub struct PointEndpoint {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The bound address (the configured one, with the port the OS chose for port 0).
    pub addr: std::net::SocketAddr,
}

impl PointEndpoint {
    /// Binds `listen` and serves `GET /metrics` from `metrics` until dropped.
    pub fn start(listen: &str, metrics: Arc<PointMetrics>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let pages: super::http::Pages = Arc::new(move |path| match path {
            "/metrics" => Some((prometheus_text::CONTENT_TYPE, metrics.render())),
            "/" => Some(("text/plain; charset=utf-8", "wirelat point: see /metrics\n".to_owned())),
            _ => None,
        });
        let thread = super::http::serve(listener, pages, stop.clone())?;
        Ok(Self { stop, thread: Some(thread), addr })
    }
}

impl Drop for PointEndpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_render_with_help_type_and_set_values() {
        let m = PointMetrics::new(7, "offline");
        // prometheus-client leaves out families without a series.
        for f in POINT_FAMILIES {
            m.set(f.name, &[], 1);
        }
        m.set("wirelat_port_rx_frames", &[("port", "0")], 12);
        m.set("wirelat_port_rx_frames", &[("port", "0")], 15);
        m.set("wirelat_ship_queued", &[], 3);
        let t = m.render();
        for f in POINT_FAMILIES {
            let name = if f.kind == Kind::Counter { format!("{}_total", f.name) } else { f.name.to_owned() };
            assert!(t.contains(&format!("# TYPE {name} ")), "{name} missing:\n{t}");
        }
        assert!(t.contains("wirelat_port_rx_frames_total{port=\"0\"} 15\n"), "{t}");
        assert!(t.contains("wirelat_ship_queued 3\n"), "{t}");
        assert!(!t.contains(".."), "prometheus-client ends help texts with a period itself:\n{t}");
        assert!(t.contains("wirelat_point_info{point=\"7\",mode=\"offline\"} 1\n"), "{t}");
        assert_eq!(m.get("wirelat_port_rx_frames", &[("port", "0")]), Some(15));
        assert_eq!(m.get("wirelat_port_rx_frames", &[("port", "1")]), None);
    }
}
