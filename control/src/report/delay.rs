//! The collector's delay distributions for Prometheus: the fridge's request→response delay
//! histograms per point, exchange kind and subset; per segment, the epochs' one-way delay
//! estimates as a histogram (a summary's `_sum`/`_count` plus buckets), the latest estimate and
//! its interval as separate series, jitter (std-dev) likewise, and loss as counters.
//!
//! Fed from the records the engine writes ([`DelayMetrics::observe_records`]), once per group,
//! never per packet; rendered with `prometheus-client`'s text encoder through a
//! [`Collector`](prometheus_client::collector::Collector), because the fridge's bins carry
//! *estimated* pair counts (real numbers), which no per-observation histogram can take.
//!
//! # From fridge bins to fixed buckets
//! Every series uses the same fixed bucket bounds, [`BUCKETS_SECONDS`]: 1-2-5 steps from 1 µs
//! to 10 s, so histograms of every point, kind and prefix aggregate with `sum by (le)`. A fridge
//! bin [lo, hi) with f̂ estimated pairs is spread over the buckets the way the fridge's own
//! quantiles read a bin (`LogBins::interpolate`): log-uniformly inside a regular bin, uniformly
//! in the underflow bin [0, min); the open overflow bin goes to `+Inf` (the fridge reports a
//! quantile there as clamped, with no value, too). Each bucket's accumulated mass is rounded to
//! a whole count at exposition: per bucket that stays monotone over time, so `rate()` works. The
//! `_sum` adds f̂ × the bin's representative delay (geometric middle; half the underflow bin;
//! the overflow bin's lower edge). A quantile from `histogram_quantile` is then exact up to the
//! bucket it falls in: within one bucket of the fridge's own (finer-binned) quantile.
//!
//! # Bounded cardinality
//! At most [`DEFAULT_MAX_SERIES`] label sets over all families (the fridge's subsets are
//! configured prefixes and ports, segments and points are configured, so a collector normally
//! stays far below). A new label set beyond the cap is not created; each refusal is counted in
//! `wirelat_peer_metric_series_dropped_total`, and the record itself is still written.

use crate::report::line::Line;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _, NoLabelSet, prometheus_text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use wirelat_dataplane::synopsis::estimate::Estimate;
use wirelat_dataplane::synopsis::fridge::report::HistogramBin;

/// Upper bounds of the fixed buckets, in seconds (`+Inf` follows).
pub const BUCKETS_SECONDS: [f64; 22] = [
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5,
    1.0, 2.0, 5.0, 10.0,
];

/// The default cap on label sets over every family here.
pub const DEFAULT_MAX_SERIES: usize = 10_000;

/// Accumulated (weighted) histogram over [`BUCKETS_SECONDS`] and `+Inf`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Weighted {
    /// Mass per bucket (not cumulative); the last entry is `+Inf`.
    pub mass: [f64; BUCKETS_SECONDS.len() + 1],
    /// Σ mass × value, seconds.
    pub sum: f64,
}

impl Weighted {
    /// Adds `w` at the single value `seconds`.
    pub fn add_point(&mut self, seconds: f64, w: f64) {
        if !(seconds.is_finite() && w.is_finite() && w > 0.0) {
            return;
        }
        let b = BUCKETS_SECONDS.iter().position(|&ub| seconds <= ub).unwrap_or(BUCKETS_SECONDS.len());
        self.mass[b] += w;
        self.sum += w * seconds;
    }

    /// Adds a fridge bin [`lo_ns`, `hi_ns`) holding `w` estimated pairs (module docs).
    pub fn add_bin(&mut self, lo_ns: f64, hi_ns: Option<f64>, w: f64) {
        if !(w.is_finite() && w > 0.0 && lo_ns.is_finite() && lo_ns >= 0.0) {
            return;
        }
        let lo = lo_ns * 1e-9;
        let Some(hi) = hi_ns.map(|h| h * 1e-9).filter(|h| h.is_finite() && *h > lo) else {
            // The open overflow bin: unknown beyond its lower edge.
            self.mass[BUCKETS_SECONDS.len()] += w;
            self.sum += w * lo;
            return;
        };
        // Fraction of the bin at or below t: linear from 0, log-linear otherwise.
        let below = |t: f64| -> f64 {
            let f = if t <= lo {
                0.0
            } else if t >= hi {
                1.0
            } else if lo == 0.0 {
                t / hi
            } else {
                (t / lo).ln() / (hi / lo).ln()
            };
            f.clamp(0.0, 1.0)
        };
        let mut prev = 0.0;
        for (b, &ub) in BUCKETS_SECONDS.iter().enumerate() {
            let f = below(ub);
            self.mass[b] += w * (f - prev);
            prev = f;
        }
        self.mass[BUCKETS_SECONDS.len()] += w * (1.0 - prev);
        self.sum += w * if lo == 0.0 { hi / 2.0 } else { (lo * hi).sqrt() };
    }

    /// Adds another histogram.
    pub fn merge(&mut self, o: &Weighted) {
        for (a, b) in self.mass.iter_mut().zip(&o.mass) {
            *a += b;
        }
        self.sum += o.sum;
    }

    /// Whole counts per bucket (each bucket's mass rounded) for the encoder.
    fn counts(&self) -> Vec<(f64, u64)> {
        BUCKETS_SECONDS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(&self.mass)
            .map(|(ub, m)| (ub, m.round().max(0.0) as u64))
            .collect()
    }

    /// The `q`-quantile as Prometheus's `histogram_quantile` computes it from the rounded
    /// cumulative counts: linear inside the bucket, the lower bound 0 for the first one, the
    /// highest finite bound when it falls in `+Inf`. `None` without observations.
    pub fn prometheus_quantile(&self, q: f64) -> Option<f64> {
        let counts = self.counts();
        let total: u64 = counts.iter().map(|(_, c)| c).sum();
        if total == 0 {
            return None;
        }
        let rank = q * total as f64;
        let mut cum = 0u64;
        let mut lower = 0.0;
        for (ub, c) in counts {
            let next = cum + c;
            if next as f64 >= rank && c > 0 {
                if ub.is_infinite() {
                    return Some(lower);
                }
                return Some(lower + (ub - lower) * (rank - cum as f64) / c as f64);
            }
            cum = next;
            if ub.is_finite() {
                lower = ub;
            }
        }
        Some(lower)
    }
}

/// Latest value of an estimate and its interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Latest {
    value: f64,
    low: Option<f64>,
    high: Option<f64>,
}

type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Default)]
struct State {
    /// (point, kind) → the kind's whole distribution.
    fridge: BTreeMap<Labels, Weighted>,
    /// (point, kind, subset) → one subset's distribution.
    fridge_subset: BTreeMap<Labels, Weighted>,
    /// (segment, synopsis) → epochs' mean delay estimates.
    segment_delay: BTreeMap<Labels, Weighted>,
    segment_latest: BTreeMap<Labels, Latest>,
    jitter_latest: BTreeMap<Labels, Latest>,
    /// (segment, synopsis) → (sent, lost) over epochs with a known loss.
    loss: BTreeMap<Labels, (u64, u64)>,
    /// (segment, synopsis) → epochs whose loss is unknown (null).
    loss_unknown: BTreeMap<Labels, u64>,
    series: usize,
    dropped: u64,
}

impl State {
    /// The entry of `labels` in `map`, unless it is new and the cap is reached.
    fn entry<'m, V: Default>(
        series: &mut usize,
        dropped: &mut u64,
        max: usize,
        map: &'m mut BTreeMap<Labels, V>,
        labels: Labels,
    ) -> Option<&'m mut V> {
        if !map.contains_key(&labels) {
            if *series >= max {
                *dropped += 1;
                return None;
            }
            *series += 1;
        }
        Some(map.entry(labels).or_default())
    }
}

/// The collector's delay distributions (module docs); shared with the HTTP thread.
#[derive(Debug)]
pub struct DelayMetrics {
    state: Mutex<State>,
    max_series: usize,
}

impl Default for DelayMetrics {
    fn default() -> Self {
        Self::with_max_series(DEFAULT_MAX_SERIES)
    }
}

fn ns_to_s(v: f64) -> Option<f64> {
    v.is_finite().then_some(v * 1e-9)
}

/// An estimate's value and interval in seconds (`None` when the value is not finite: the
/// record writes it as `null`).
fn latest_of(e: &Estimate) -> Option<Latest> {
    Some(Latest {
        value: ns_to_s(e.value)?,
        low: e.interval.as_ref().and_then(|i| ns_to_s(i.low)),
        high: e.interval.as_ref().and_then(|i| ns_to_s(i.high)),
    })
}

/// A fridge report's histogram as a [`Weighted`].
fn histogram_of(bins: &[HistogramBin]) -> Weighted {
    let mut w = Weighted::default();
    for b in bins {
        w.add_bin(b.low_ns as f64, b.high_ns.map(|h| h as f64), b.pairs);
    }
    w
}

/// The label set of a fridge series: the point's name (its side, "a" or "b"), its id (names
/// repeat when a collector owns several point pairs) and the exchange kind.
fn fridge_labels(point: &str, point_id: &str, kind: &str) -> Labels {
    vec![("point", point.to_owned()), ("point_id", point_id.to_owned()), ("kind", kind.to_owned())]
}

/// The series a collector's configuration announces ([`DelayMetrics::declare`]).
#[derive(Clone, Debug, Default)]
pub struct Declared {
    /// (name, id) of every point.
    pub points: Vec<(String, String)>,
    /// The fridge's exchange kinds, as records name them.
    pub fridge_kinds: Vec<String>,
    /// The fridge's subset names (configured subsets and "other"), when subsets are on.
    pub fridge_subsets: Vec<String>,
    /// (segment, synopsis) of every segment record the collector will write.
    pub segments: Vec<(String, String)>,
}

impl DelayMetrics {
    /// With a cap of `max` label sets.
    pub fn with_max_series(max: usize) -> Self {
        Self { state: Mutex::new(State::default()), max_series: max }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Label sets refused because of the cap.
    pub fn dropped_series(&self) -> u64 {
        self.lock().dropped
    }

    /// Creates, at zero, the series the collector's configuration says will come: without a
    /// first sample at 0, a series born with its first group's counts shows no increase, and
    /// every `rate()` over it (the dashboard's quantiles and ratios) reads 0/0 until a second
    /// group arrives — for a fridge spanning the whole run, never. The cap still applies.
    pub fn declare(&self, d: &Declared) {
        let mut guard = self.lock();
        let State { fridge, fridge_subset, segment_delay, loss, loss_unknown, series, dropped, .. } =
            &mut *guard;
        let max = self.max_series;
        for (name, id) in &d.points {
            for kind in &d.fridge_kinds {
                let base = fridge_labels(name, id, kind);
                State::entry(series, dropped, max, fridge, base.clone());
                for sub in &d.fridge_subsets {
                    let mut l = base.clone();
                    l.push(("subset", sub.clone()));
                    State::entry(series, dropped, max, fridge_subset, l);
                }
            }
        }
        for (seg, syn) in &d.segments {
            let l: Labels = vec![("segment", seg.clone()), ("synopsis", syn.clone())];
            State::entry(series, dropped, max, segment_delay, l.clone());
            State::entry(series, dropped, max, loss, l.clone());
            State::entry(series, dropped, max, loss_unknown, l);
        }
    }

    /// The fridge histogram of (`point`, `point_id`, `kind`), and of one `subset` when given.
    pub fn fridge(&self, point: &str, point_id: &str, kind: &str, subset: Option<&str>) -> Option<Weighted> {
        let s = self.lock();
        let mut l = fridge_labels(point, point_id, kind);
        match subset {
            None => s.fridge.get(&l).cloned(),
            Some(sub) => {
                l.push(("subset", sub.to_owned()));
                s.fridge_subset.get(&l).cloned()
            }
        }
    }

    /// Takes the records of one group as the engine writes them (`fridge_quantiles` and
    /// `segment` records; others are ignored).
    pub fn observe_records(&self, lines: &[Line]) {
        let mut guard = self.lock();
        let State {
            fridge,
            fridge_subset,
            segment_delay,
            segment_latest,
            jitter_latest,
            loss,
            loss_unknown,
            series,
            dropped,
        } = &mut *guard;
        let max = self.max_series;
        for line in lines {
            match line {
                Line::FridgeQuantiles(f) => {
                    let base =
                        fridge_labels(f.record.point.name(), &f.point_id.to_string(), f.record.kind.name());
                    let all = histogram_of(&f.report.all.histogram);
                    if let Some(h) = State::entry(series, dropped, max, fridge, base.clone()) {
                        h.merge(&all);
                    }
                    for sub in &f.report.subsets {
                        let mut l = base.clone();
                        l.push(("subset", sub.subset.clone()));
                        let h = histogram_of(&sub.distribution.histogram);
                        if let Some(acc) = State::entry(series, dropped, max, fridge_subset, l) {
                            acc.merge(&h);
                        }
                    }
                }
                Line::Segment(s) => {
                    let l: Labels = vec![
                        ("segment", s.sides.segment.to_string()),
                        ("synopsis", s.record.synopsis.name().to_owned()),
                    ];
                    if let Some(m) = s.record.mean_ns.as_ref().and_then(latest_of) {
                        if let Some(h) = State::entry(series, dropped, max, segment_delay, l.clone()) {
                            h.add_point(m.value, 1.0);
                        }
                        if let Some(x) = State::entry(series, dropped, max, segment_latest, l.clone()) {
                            *x = m;
                        }
                    }
                    if let Some(sd) = s.record.std_dev_ns.as_ref().and_then(latest_of)
                        && let Some(x) = State::entry(series, dropped, max, jitter_latest, l.clone())
                    {
                        *x = sd;
                    }
                    // (sent, lost) where the line has a loss; LDS's weighted counts give no
                    // lost packets, so its epochs count as loss unknown.
                    let Some((sent, lost)) = s.result.sent_lost() else { continue };
                    match lost {
                        Some(lost) => {
                            if let Some(x) = State::entry(series, dropped, max, loss, l) {
                                x.0 += sent;
                                x.1 += lost;
                            }
                        }
                        None => {
                            if let Some(x) = State::entry(series, dropped, max, loss_unknown, l) {
                                *x += 1;
                            }
                        }
                    }
                }
                Line::Run { .. } | Line::Flow(_) | Line::EpochSummary(_) => {}
            }
        }
    }

    /// The Prometheus text exposition (format 0.0.4) of every family here.
    pub fn render(self: &Arc<Self>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(View(self.clone())));
        let mut out = String::new();
        if prometheus_text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}

/// The registry's view of [`DelayMetrics`].
#[derive(Debug)]
struct View(Arc<DelayMetrics>);

fn histograms(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    map: &BTreeMap<Labels, Weighted>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in map {
        let counts = h.counts();
        let total = counts.iter().map(|(_, c)| c).sum();
        m.encode_family(labels)?.encode_histogram::<NoLabelSet>(h.sum, total, &counts, None)?;
    }
    Ok(())
}

fn latest_gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    map: &BTreeMap<Labels, Latest>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in map {
        ConstGauge::new(v.value).encode(m.encode_family(labels)?)?;
    }
    let interval = format!("{name}_interval");
    let mut m = enc.encode_descriptor(
        &interval,
        "Bounds of the latest estimate's confidence interval (bound=low|high), same labels",
        None,
        MetricType::Gauge,
    )?;
    for (labels, v) in map {
        for (bound, x) in [("low", v.low), ("high", v.high)] {
            if let Some(x) = x {
                let mut l = labels.clone();
                l.push(("bound", bound.to_owned()));
                ConstGauge::new(x).encode(m.encode_family(&l)?)?;
            }
        }
    }
    Ok(())
}

impl Collector for View {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.0.lock();
        histograms(
            &mut enc,
            "wirelat_fridge_delay_seconds",
            "Request-response delay at a point, by point (name and id) and exchange kind: the fridge's estimated pairs on fixed buckets (docs/monitoring.md)",
            &s.fridge,
        )?;
        histograms(
            &mut enc,
            "wirelat_fridge_subset_delay_seconds",
            "Request-response delay at a point, by point (name and id), exchange kind and configured subset (client prefix, server port, or other)",
            &s.fridge_subset,
        )?;
        histograms(
            &mut enc,
            "wirelat_segment_delay_seconds",
            "Epochs' mean one-way delay estimates of a segment, by segment and synopsis: _sum/_count give the mean over a range, buckets the spread across epochs",
            &s.segment_delay,
        )?;
        latest_gauges(
            &mut enc,
            "wirelat_segment_delay_latest_seconds",
            "Latest epoch's mean one-way delay estimate, by segment and synopsis",
            &s.segment_latest,
        )?;
        latest_gauges(
            &mut enc,
            "wirelat_segment_jitter_latest_seconds",
            "Latest epoch's one-way delay standard deviation estimate (jitter), by segment and synopsis",
            &s.jitter_latest,
        )?;
        let counter = |enc: &mut DescriptorEncoder, name: &str, help: &str, values: Vec<(&Labels, u64)>| {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (l, v) in values {
                ConstCounter::new(v).encode(m.encode_family(l)?)?;
            }
            Ok::<(), std::fmt::Error>(())
        };
        counter(
            &mut enc,
            "wirelat_segment_sent_packets",
            "Packets the upstream point sent into a segment, over epochs whose loss is known, by segment and synopsis",
            s.loss.iter().map(|(l, (sent, _))| (l, *sent)).collect(),
        )?;
        counter(
            &mut enc,
            "wirelat_segment_lost_packets",
            "Of those, lost in the segment: rate(lost)/rate(sent) is the loss rate over a range",
            s.loss.iter().map(|(l, (_, lost))| (l, *lost)).collect(),
        )?;
        counter(
            &mut enc,
            "wirelat_segment_loss_unknown_epochs",
            "Epochs whose loss is unknown (the record's lost is null), by segment and synopsis",
            s.loss_unknown.iter().map(|(l, n)| (l, *n)).collect(),
        )?;
        let none: Labels = Vec::new();
        counter(
            &mut enc,
            "wirelat_peer_metric_series_dropped",
            "Label sets of the delay families not created because the cap on series was reached",
            vec![(&none, s.dropped)],
        )
    }
}

#[cfg(test)]
mod tests;
