//! The peer's counters and latest estimates, and a Prometheus text endpoint serving them
//! (`GET /metrics` on [`super::http`]).
//!
//! Every series belongs to a family declared in [`FAMILIES`] (name, type, help), so the
//! exposition is complete and stable: a family appears with its `# HELP`/`# TYPE` lines even
//! before its first sample. Updates happen per message or per estimate, never per packet.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A metric family.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    /// Name.
    pub name: &'static str,
    /// True for a counter, false for a gauge.
    pub counter: bool,
    /// Help text.
    pub help: &'static str,
}

const fn counter(name: &'static str, help: &'static str) -> Family {
    Family { name, counter: true, help }
}

const fn gauge(name: &'static str, help: &'static str) -> Family {
    Family { name, counter: false, help }
}

/// Frames received, by message type.
pub const FRAMES: Family =
    counter("wirelat_peer_frames_received_total", "Frames received from points, by type.");
/// Epoch synopses received, by point and synopsis.
pub const EPOCHS: Family =
    counter("wirelat_peer_epochs_received_total", "Epoch synopses received, by point and synopsis.");
/// Duplicates.
pub const DUPLICATES: Family = counter(
    "wirelat_peer_duplicates_total",
    "Epoch synopses received again (resends after a reconnect or restart), by point and synopsis.",
);
/// Rejections by reason.
pub const REJECTED: Family = counter(
    "wirelat_peer_rejected_total",
    "Connections, frames or synopses refused, by reason (bad_mac, bad_checksum, truncated, oversized_length, unknown_version, fingerprint_mismatch, ...).",
);
/// Epoch synopses of segments this collector does not own.
pub const UNOWNED: Family = counter(
    "wirelat_peer_unowned_epochs_total",
    "Epoch synopses of a segment this collector does not own for the sending point (acknowledged and dropped: a misrouted point), by point, segment and synopsis.",
);
/// Connections accepted.
pub const CONNECTIONS: Family =
    counter("wirelat_peer_connections_total", "Authenticated connections accepted, by point.");
/// Points connected now.
pub const CONNECTED: Family = gauge("wirelat_peer_connected_points", "Points connected now.");
/// Pairs formed.
pub const PAIRS: Family = counter(
    "wirelat_peer_pairs_total",
    "Groups resolved (both points' epochs, or one point's for the fridge), by synopsis and whether a side was absent.",
);
/// Estimates.
pub const ESTIMATES: Family = counter(
    "wirelat_peer_estimates_total",
    "Estimates made, by synopsis and outcome (ok or the reason there is none).",
);
/// Records written.
pub const RECORDS: Family = counter("wirelat_peer_records_total", "JSON-lines records written.");
/// Groups waiting.
pub const PENDING: Family =
    gauge("wirelat_peer_pending_groups", "Groups waiting for a point's epoch or watermark.");
/// Groups given up at the peer.
pub const PEER_GIVEN_UP: Family = counter(
    "wirelat_peer_given_up_total",
    "Groups the peer gave up on, by reason (pending_overflow, write_failed).",
);
/// Points' own give-ups.
pub const POINT_GIVEN_UP: Family = gauge(
    "wirelat_point_given_up",
    "Epoch synopses a point gave up before the peer got them, by point and reason (as last reported by the point).",
);
/// Watermarks.
pub const WATERMARK: Family =
    gauge("wirelat_point_watermark_epoch", "First epoch a point has not fully delivered, by point.");
/// RDA look-ups.
pub const RDA_LOOKUPS: Family = counter(
    "wirelat_peer_rda_lookups_total",
    "RDA timestamp look-up requests sent to points, by outcome (ok, no_cache, failed).",
);
/// RDA look-up rounds.
pub const RDA_ROUNDS: Family = counter(
    "wirelat_peer_rda_lookup_rounds_total",
    "Reconciliation rounds run while look-up answers arrived.",
);
/// Latest mean.
pub const LATEST_MEAN: Family =
    gauge("wirelat_latest_mean_delay_ns", "Latest mean one-way delay estimate, by segment and synopsis.");
/// Latest std-dev.
pub const LATEST_STD: Family = gauge(
    "wirelat_latest_std_dev_ns",
    "Latest one-way delay standard deviation estimate, by segment and synopsis.",
);
/// Latest loss.
pub const LATEST_LOSS: Family =
    gauge("wirelat_latest_loss_rate", "Latest loss rate, by segment and synopsis.");
/// Latest samples.
pub const LATEST_SAMPLES: Family =
    gauge("wirelat_latest_samples", "Samples behind the latest mean estimate, by segment and synopsis.");
/// Latest epoch.
pub const LATEST_EPOCH: Family =
    gauge("wirelat_latest_epoch", "Epoch of the latest estimate, by segment (or point) and synopsis.");
/// Latest fridge quantiles.
pub const LATEST_QUANTILE: Family = gauge(
    "wirelat_fridge_latest_quantile_ns",
    "Latest request-response delay quantile at a point, by point, exchange kind and quantile.",
);

/// Every family, in exposition order.
pub const FAMILIES: [Family; 22] = [
    FRAMES,
    EPOCHS,
    DUPLICATES,
    REJECTED,
    UNOWNED,
    CONNECTIONS,
    CONNECTED,
    PAIRS,
    ESTIMATES,
    RECORDS,
    PENDING,
    PEER_GIVEN_UP,
    POINT_GIVEN_UP,
    WATERMARK,
    RDA_LOOKUPS,
    RDA_ROUNDS,
    LATEST_MEAN,
    LATEST_STD,
    LATEST_LOSS,
    LATEST_SAMPLES,
    LATEST_EPOCH,
    LATEST_QUANTILE,
];

/// The registry.
#[derive(Default)]
pub struct Metrics {
    series: Mutex<BTreeMap<&'static str, BTreeMap<String, f64>>>,
    /// The delay histograms, summaries and loss counters ([`super::delay`]), rendered after
    /// the families above.
    delay: Arc<super::delay::DelayMetrics>,
}

fn labels_text(labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let mut s = String::from("{");
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        let _ = write!(s, "{k}=\"{v}\"");
    }
    s.push('}');
    s
}

impl Metrics {
    /// Adds `by` to a counter.
    pub fn inc(&self, f: Family, labels: &[(&str, &str)], by: u64) {
        let mut m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(f.name).or_default().entry(labels_text(labels)).or_default() += by as f64;
    }

    /// Sets a gauge.
    pub fn set(&self, f: Family, labels: &[(&str, &str)], value: f64) {
        if !value.is_finite() {
            return;
        }
        let mut m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(f.name).or_default().insert(labels_text(labels), value);
    }

    /// The value of one series (0 when absent).
    pub fn get(&self, f: Family, labels: &[(&str, &str)]) -> f64 {
        let m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        m.get(f.name).and_then(|s| s.get(&labels_text(labels))).copied().unwrap_or(0.0)
    }

    /// The sum over every series of a family.
    pub fn total(&self, f: Family) -> f64 {
        let m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        m.get(f.name).map_or(0.0, |s| s.values().sum())
    }

    /// The delay distributions fed from the records ([`super::delay`]).
    pub fn delay(&self) -> &super::delay::DelayMetrics {
        &self.delay
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self) -> String {
        let mut out = self.render_families();
        out.push_str(&self.delay.render());
        out
    }

    fn render_families(&self) -> String {
        let m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        for f in FAMILIES {
            let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
            let _ = writeln!(out, "# TYPE {} {}", f.name, if f.counter { "counter" } else { "gauge" });
            if let Some(series) = m.get(f.name) {
                for (labels, v) in series {
                    let _ = writeln!(out, "{}{labels} {v}", f.name);
                }
            }
        }
        out
    }
}

/// Serves `GET /metrics` (and a pointer at `/`) on `listener` until `stop` is set, on the
/// shared HTTP endpoint ([`super::http`]: concurrent connections, request deadlines).
pub fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    let pages: super::http::Pages = Arc::new(move |path| match path {
        "/metrics" => Some(("text/plain; version=0.0.4; charset=utf-8", metrics.render())),
        "/" => Some(("text/plain; charset=utf-8", "wirelat peer: see /metrics\n".to_owned())),
        _ => None,
    });
    super::http::serve(listener, pages, stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::Ordering;

    #[test]
    fn exposition_lists_every_family_and_escapes_labels() {
        let m = Metrics::default();
        m.inc(REJECTED, &[("reason", "bad_mac")], 2);
        m.inc(REJECTED, &[("reason", "bad_mac")], 1);
        m.set(LATEST_MEAN, &[("segment", "1"), ("synopsis", "lda")], 12.5);
        m.set(LATEST_MEAN, &[("segment", "q\"x")], f64::NAN);
        let t = m.render();
        for f in FAMILIES {
            assert!(t.contains(&format!("# TYPE {} ", f.name)), "{}", f.name);
        }
        assert!(t.contains("wirelat_peer_rejected_total{reason=\"bad_mac\"} 3\n"), "{t}");
        assert!(t.contains("wirelat_latest_mean_delay_ns{segment=\"1\",synopsis=\"lda\"} 12.5\n"));
        assert!(!t.contains("NaN"));
        assert_eq!(labels_text(&[("a", "x\"y\\")]), "{a=\"x\\\"y\\\\\"}");
        assert_eq!(m.total(REJECTED), 3.0);
    }

    #[test]
    fn the_endpoint_answers_http_get() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let m = Arc::new(Metrics::default());
        m.inc(RECORDS, &[], 4);
        let stop = Arc::new(AtomicBool::new(false));
        let h = serve(l, m, stop.clone()).unwrap();
        let get = |path: &str| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut r = String::new();
            s.read_to_string(&mut r).unwrap();
            r
        };
        let r = get("/metrics");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("wirelat_peer_records_total 4\n"));
        assert!(get("/nope").starts_with("HTTP/1.1 404"));
        // 50 silent connections and one trickling a byte at a time do not hold up a scrape
        // (the endpoint served one connection at a time: each silent one cost its 2-s timeout).
        let silent: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET /me").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let t = std::time::Instant::now();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut r = String::new();
        let read = s.read_to_string(&mut r);
        assert!(read.is_ok() && r.contains("wirelat_peer_records_total 4\n"), "{read:?} {r}");
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "the scrape took {:?}", t.elapsed());
        drop((silent, slow));
        stop.store(true, Ordering::SeqCst);
        h.join().unwrap();
    }
}
