//! Accuracy scoring: a run's records ([`crate::record`]) against a ground-truth file
//! ([`crate::truth`]), with pass/fail against given bounds.
//!
//! # Error measures
//!
//! - **Relative error** of an estimate x of a true value t: |x − t| / max(|t|, 1 ns) (the floor
//!   keeps a near-zero true mean, e.g. from a negative clock offset, from dividing by zero).
//! - **Segment records** are compared with the truth of their (direction, epoch): by default the
//!   `same_epoch` statistics (packets both points put in that epoch, which is what LDA/LDS/RDA
//!   measure without cross-epoch reconciliation); [`Basis::Sent`] uses all delivered packets of
//!   the sending epoch instead. Interval coverage = fraction of records whose interval contains
//!   the truth (records without an interval are not counted).
//! - **Flow records** are compared with the flow's truth pooled over epochs `epoch_first..=last`
//!   (same basis); flows whose pooled truth has fewer than `min_flow_packets` packets, or no
//!   truth at all, are counted as unmatched. Summaries: median, 90th percentile and max, overall
//!   and per flow-size bin (delivered packets 1–9, 10–99, 100–999, ≥ 1000).
//! - **Fridge records**: the true quantile Q(q) of the truth's samples whose response epoch is
//!   in range is the fridge spec's (§5): the distinct delays with their cumulated unit weights
//!   as a piecewise-linear CDF, inverted by linear interpolation (`np.interp(q, F, t)`; the
//!   smallest delay below the first knot), the procedure the estimate uses with its weights ([`fridge_truth`]);
//!   error = |log2(max(x, 1) / max(Q, 1))| (§6.1).
//! - Percentiles of error lists use nearest rank (⌈p·n⌉-th smallest).

use crate::record::{FlowRecord, FridgeRecord, Record, SegmentRecord};
use crate::topology::{Direction, Point};
use crate::truth::{FlowEpoch, Stats, Truth};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use wirelat_dataplane::packet::ExchangeKind;
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::estimate::Estimate;
use wirelat_dataplane::synopsis::fridge::distribution::{Quantiles, WeightedSamples};

mod report;

pub use report::{Check, EpochScore, FlowScore, FridgeScore, QuantileScore, Report, SegmentScore};

/// Which truth statistics a segment or flow record is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Packets sent and received in the same epoch.
    #[default]
    SameEpoch,
    /// All delivered packets of the sending epoch.
    Sent,
}

/// Scoring options.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreOptions {
    /// Truth basis.
    pub basis: Basis,
    /// Flows with fewer true packets in the record's range are not scored.
    pub min_flow_packets: u64,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        ScoreOptions { basis: Basis::SameEpoch, min_flow_packets: 1 }
    }
}

/// Bounds for one synopsis; absent bounds are not checked.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct SynopsisBounds {
    /// Max over epochs of the mean's relative error.
    pub mean_rel_err_max: Option<f64>,
    /// Median over epochs of the mean's relative error.
    pub mean_rel_err_median: Option<f64>,
    /// Max over epochs of the std-dev's relative error.
    pub std_rel_err_max: Option<f64>,
    /// Median over epochs of the std-dev's relative error.
    pub std_rel_err_median: Option<f64>,
    /// Minimum interval coverage of the mean.
    pub mean_coverage_min: Option<f64>,
    /// Median per-flow relative error of the mean.
    pub flow_mean_rel_err_median: Option<f64>,
    /// 90th percentile per-flow relative error of the mean.
    pub flow_mean_rel_err_p90: Option<f64>,
    /// Median per-flow relative error of the std-dev.
    pub flow_std_rel_err_median: Option<f64>,
    /// Max fridge quantile error, log2 units.
    pub fridge_log2_err_max: Option<f64>,
    /// At least this many scored records (so a run that estimated nothing fails).
    pub min_records: Option<u64>,
}

/// Bounds per synopsis, keyed by name (`fridge`, `lda`, `lds`, `rda`, `colate`); JSON:
/// `{"lda": {"mean_rel_err_max": 0.05}, "fridge": {"fridge_log2_err_max": 0.1}}`.
pub type Bounds = BTreeMap<String, SynopsisBounds>;

/// The synopsis named `name`, if any.
pub fn synopsis_named(name: &str) -> Option<SynopsisKind> {
    SynopsisKind::ALL.into_iter().find(|k| k.name() == name)
}

/// n, mean, median, 90th percentile and max of a list of errors.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Summary {
    /// Number of errors.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Median (nearest rank).
    pub median: f64,
    /// 90th percentile (nearest rank).
    pub p90: f64,
    /// Maximum.
    pub max: f64,
}

/// The ⌈p·n⌉-th smallest of sorted `xs` (the smallest for p ≤ 0); `None` if empty.
pub fn nearest_rank(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let k = ((p * n as f64).ceil() as usize).clamp(1, n);
    sorted.get(k - 1).copied()
}

/// The fridge spec's true distribution (§5) of `samples`: unit weights, whose CDF
/// [`Quantiles::quantile`] inverts by linear interpolation (`None` if empty).
pub fn fridge_truth(samples: &[f64]) -> Option<WeightedSamples> {
    WeightedSamples::unit(samples.iter().copied())
}

impl Summary {
    /// Summary of `errors` (NaN-free by construction of the scorer).
    pub fn of(errors: &[f64]) -> Summary {
        let mut v: Vec<f64> = errors.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Summary::default();
        }
        v.sort_by(f64::total_cmp);
        Summary {
            n: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            median: nearest_rank(&v, 0.5).unwrap_or(0.0),
            p90: nearest_rank(&v, 0.9).unwrap_or(0.0),
            max: v.last().copied().unwrap_or(0.0),
        }
    }
}

/// |x − t| / max(|t|, 1).
pub fn rel_err(estimate: f64, truth: f64) -> f64 {
    (estimate - truth).abs() / truth.abs().max(1.0)
}

/// |log2(max(x, 1) / max(t, 1))|.
pub fn log2_err(estimate: f64, truth: f64) -> f64 {
    (estimate.max(1.0) / truth.max(1.0)).log2().abs()
}

fn basis_stats(e: &FlowEpoch, basis: Basis) -> Stats {
    match basis {
        Basis::SameEpoch => e.same_epoch,
        Basis::Sent => e.delay,
    }
}

fn covered(est: &Estimate, truth: f64) -> Option<bool> {
    est.interval.map(|i| i.low <= truth && truth <= i.high)
}

fn score_segments(truth: &Truth, recs: &[&SegmentRecord], opts: &ScoreOptions) -> Vec<SegmentScore> {
    let mut groups: BTreeMap<(u8, Direction), Vec<&SegmentRecord>> = BTreeMap::new();
    for r in recs {
        groups.entry((r.synopsis as u8, r.direction)).or_default().push(r);
    }
    let mut out = Vec::new();
    for ((kind, direction), rs) in groups {
        let Some(synopsis) = SynopsisKind::from_u8(kind) else { continue };
        let epochs: HashMap<u64, Stats> = truth
            .direction(direction)
            .map(|d| {
                d.epochs
                    .iter()
                    .map(|e| {
                        (
                            e.epoch,
                            match opts.basis {
                                Basis::SameEpoch => e.same_epoch,
                                Basis::Sent => e.delay,
                            },
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut scores = Vec::new();
        let mut unmatched = 0;
        for r in rs {
            let Some(t) = epochs.get(&r.epoch).filter(|t| t.count > 0) else {
                unmatched += 1;
                continue;
            };
            scores.push(EpochScore {
                epoch: r.epoch,
                truth: *t,
                mean_ns: r.mean_ns.map(|e| e.value),
                mean_rel_err: r.mean_ns.map(|e| rel_err(e.value, t.mean_ns)),
                mean_covered: r.mean_ns.and_then(|e| covered(&e, t.mean_ns)),
                std_dev_ns: r.std_dev_ns.map(|e| e.value),
                std_rel_err: r.std_dev_ns.map(|e| rel_err(e.value, t.std_dev_ns)),
            });
        }
        scores.sort_by_key(|s| s.epoch);
        let me: Vec<f64> = scores.iter().filter_map(|s| s.mean_rel_err).collect();
        let se: Vec<f64> = scores.iter().filter_map(|s| s.std_rel_err).collect();
        let cov: Vec<bool> = scores.iter().filter_map(|s| s.mean_covered).collect();
        out.push(SegmentScore {
            synopsis,
            direction,
            unmatched,
            mean_rel_err: Summary::of(&me),
            std_rel_err: Summary::of(&se),
            mean_coverage: (!cov.is_empty())
                .then(|| cov.iter().filter(|c| **c).count() as f64 / cov.len() as f64),
            epochs: scores,
        });
    }
    out
}

fn size_bin(n: u64) -> usize {
    match n {
        0..=9 => 0,
        10..=99 => 1,
        100..=999 => 2,
        _ => 3,
    }
}

const SIZE_BINS: [&str; 4] = ["1-9", "10-99", "100-999", "1000+"];

/// Per-synopsis raw flow errors (mean, std-dev) over both directions, for the bound checks.
type FlowErrors = HashMap<SynopsisKind, (Vec<f64>, Vec<f64>)>;

fn score_flows(truth: &Truth, recs: &[&FlowRecord], opts: &ScoreOptions) -> (Vec<FlowScore>, FlowErrors) {
    let index: HashMap<(Direction, crate::record::FlowId), &crate::truth::FlowTruth> =
        truth.flows.iter().map(|f| ((f.direction, f.flow), f)).collect();
    let mut groups: BTreeMap<(u8, Direction), Vec<&FlowRecord>> = BTreeMap::new();
    for r in recs {
        groups.entry((r.synopsis as u8, r.direction)).or_default().push(r);
    }
    let mut out = Vec::new();
    let mut raw: FlowErrors = HashMap::new();
    for ((kind, direction), rs) in groups {
        let Some(synopsis) = SynopsisKind::from_u8(kind) else { continue };
        let (mut me, mut se) = (Vec::new(), Vec::new());
        let mut by_size: [Vec<f64>; 4] = Default::default();
        let (mut unmatched, mut no_estimate) = (0, 0);
        for r in rs {
            let t = index.get(&(direction, r.flow)).map(|f| {
                let parts: Vec<Stats> = f
                    .epochs
                    .iter()
                    .filter(|e| (r.epoch_first..=r.epoch_last).contains(&e.epoch))
                    .map(|e| basis_stats(e, opts.basis))
                    .collect();
                Stats::pool(parts.iter())
            });
            let Some(t) = t.filter(|t| t.count >= opts.min_flow_packets.max(1)) else {
                unmatched += 1;
                continue;
            };
            let Some(m) = r.mean_ns else {
                no_estimate += 1;
                continue;
            };
            let e = rel_err(m.value, t.mean_ns);
            me.push(e);
            by_size[size_bin(t.count)].push(e);
            if let Some(s) = r.std_dev_ns {
                se.push(rel_err(s.value, t.std_dev_ns));
            }
        }
        let entry = raw.entry(synopsis).or_default();
        entry.0.extend_from_slice(&me);
        entry.1.extend_from_slice(&se);
        out.push(FlowScore {
            synopsis,
            direction,
            scored: me.len(),
            unmatched,
            no_estimate,
            mean_rel_err: Summary::of(&me),
            std_rel_err: Summary::of(&se),
            mean_rel_err_by_size: SIZE_BINS
                .iter()
                .zip(by_size.iter())
                .filter(|(_, v)| !v.is_empty())
                .map(|(l, v)| (l.to_string(), Summary::of(v)))
                .collect(),
        });
    }
    (out, raw)
}

fn score_fridge(truth: &Truth, recs: &[&FridgeRecord]) -> Vec<FridgeScore> {
    let e = truth.epoch_len_ns.max(1);
    let mut out = Vec::new();
    for r in recs {
        let samples: Vec<f64> = truth
            .fridge
            .iter()
            .filter(|f| f.point == r.point && f.kind == r.kind)
            .flat_map(|f| {
                f.response_ts_ns
                    .iter()
                    .zip(&f.delay_ns)
                    .filter(|(ts, _)| (r.epoch_first..=r.epoch_last).contains(&(**ts / e)))
                    .map(|(_, d)| *d as f64)
            })
            .collect();
        let dist = fridge_truth(&samples);
        let quantiles: Vec<QuantileScore> = r
            .quantiles
            .iter()
            .filter_map(|qp| {
                let t = dist.as_ref()?.quantile(qp.q);
                Some(QuantileScore {
                    q: qp.q,
                    estimate_ns: qp.delay_ns,
                    truth_ns: t,
                    log2_err: log2_err(qp.delay_ns, t),
                })
            })
            .collect();
        out.push(FridgeScore {
            point: r.point,
            kind: r.kind,
            epoch_first: r.epoch_first,
            epoch_last: r.epoch_last,
            truth_samples: samples.len(),
            max_log2_err: quantiles.iter().map(|q| q.log2_err).fold(0.0, f64::max),
            quantiles,
        });
    }
    out
}

/// Scores `records` against `truth` and checks `bounds`.
pub fn score(truth: &Truth, records: &[Record], opts: &ScoreOptions, bounds: &Bounds) -> Report {
    let seg: Vec<&SegmentRecord> =
        records.iter().filter_map(|r| if let Record::Segment(s) = r { Some(s) } else { None }).collect();
    let flo: Vec<&FlowRecord> =
        records.iter().filter_map(|r| if let Record::Flow(s) = r { Some(s) } else { None }).collect();
    let fri: Vec<&FridgeRecord> = records
        .iter()
        .filter_map(|r| if let Record::FridgeQuantiles(s) = r { Some(s) } else { None })
        .collect();
    let segment = score_segments(truth, &seg, opts);
    let (flow, flow_errors) = score_flows(truth, &flo, opts);
    let fridge = score_fridge(truth, &fri);

    let mut checks = Vec::new();
    for (name, b) in bounds {
        let Some(kind) = synopsis_named(name) else {
            checks.push(Check {
                name: format!("{name}: unknown synopsis"),
                value: 0.0,
                bound: 0.0,
                pass: false,
            });
            continue;
        };
        let segs: Vec<&SegmentScore> = segment.iter().filter(|s| s.synopsis == kind).collect();
        let (flow_mean, flow_std) = flow_errors.get(&kind).cloned().unwrap_or_default();
        let all_mean: Vec<f64> =
            segs.iter().flat_map(|s| s.epochs.iter().filter_map(|e| e.mean_rel_err)).collect();
        let all_std: Vec<f64> =
            segs.iter().flat_map(|s| s.epochs.iter().filter_map(|e| e.std_rel_err)).collect();
        let cov: Vec<bool> =
            segs.iter().flat_map(|s| s.epochs.iter().filter_map(|e| e.mean_covered)).collect();
        let mut upper = |what: &str, value: f64, bound: Option<f64>| {
            if let Some(bound) = bound {
                checks.push(Check { name: format!("{name}.{what}"), value, bound, pass: value <= bound });
            }
        };
        let sm = Summary::of(&all_mean);
        let ss = Summary::of(&all_std);
        upper("mean_rel_err_max", sm.max, b.mean_rel_err_max);
        upper("mean_rel_err_median", sm.median, b.mean_rel_err_median);
        upper("std_rel_err_max", ss.max, b.std_rel_err_max);
        upper("std_rel_err_median", ss.median, b.std_rel_err_median);
        // Flow errors pooled over both directions.
        let (fm, fs) = (Summary::of(&flow_mean), Summary::of(&flow_std));
        upper("flow_mean_rel_err_median", fm.median, b.flow_mean_rel_err_median);
        upper("flow_mean_rel_err_p90", fm.p90, b.flow_mean_rel_err_p90);
        upper("flow_std_rel_err_median", fs.median, b.flow_std_rel_err_median);
        if kind == SynopsisKind::Fridge {
            upper(
                "fridge_log2_err_max",
                fridge.iter().map(|f| f.max_log2_err).fold(0.0, f64::max),
                b.fridge_log2_err_max,
            );
        }
        if let Some(min) = b.mean_coverage_min {
            let c = if cov.is_empty() {
                0.0
            } else {
                cov.iter().filter(|c| **c).count() as f64 / cov.len() as f64
            };
            checks.push(Check {
                name: format!("{name}.mean_coverage_min"),
                value: c,
                bound: min,
                pass: c >= min,
            });
        }
        if let Some(min) = b.min_records {
            let n = if kind == SynopsisKind::Fridge { fridge.len() } else { all_mean.len() + flow_mean.len() }
                as f64;
            checks.push(Check {
                name: format!("{name}.min_records"),
                value: n,
                bound: min as f64,
                pass: n >= min as f64,
            });
        }
    }
    let pass = checks.iter().all(|c| c.pass);
    Report { segment, flow, fridge, checks, pass }
}

/// The records a perfect run would emit for `truth` (on `basis`): a segment record per
/// (synopsis in `segment_kinds`, direction, epoch with packets), a flow record per (synopsis in
/// `flow_kinds`, flow) over the flow's whole epoch range, and fridge quantiles 0.05, 0.10, ...,
/// 0.95, 0.99 per point and kind over the whole trace. Useful to check the scorer and as a
/// reference output shape for the peer.
pub fn truth_as_records(
    truth: &Truth,
    basis: Basis,
    segment_kinds: &[SynopsisKind],
    flow_kinds: &[SynopsisKind],
) -> Vec<Record> {
    use crate::record::{QuantilePoint, RECORD_VERSION};
    let est = |v: f64, n: u64| Estimate::new(v, n).ok();
    let mut out = vec![Record::Run { version: RECORD_VERSION }];
    for kind in segment_kinds {
        for d in &truth.directions {
            for e in &d.epochs {
                let s = match basis {
                    Basis::SameEpoch => e.same_epoch,
                    Basis::Sent => e.delay,
                };
                if s.count == 0 {
                    continue;
                }
                out.push(Record::Segment(SegmentRecord {
                    synopsis: *kind,
                    direction: d.direction,
                    epoch: e.epoch,
                    mean_ns: est(s.mean_ns, s.count),
                    std_dev_ns: est(s.std_dev_ns, s.count),
                }));
            }
        }
    }
    for kind in flow_kinds {
        for f in &truth.flows {
            let (Some(first), Some(last)) = (f.epochs.first(), f.epochs.last()) else { continue };
            let parts: Vec<Stats> = f.epochs.iter().map(|e| basis_stats(e, basis)).collect();
            let s = Stats::pool(parts.iter());
            if s.count == 0 {
                continue;
            }
            out.push(Record::Flow(FlowRecord {
                synopsis: *kind,
                direction: f.direction,
                epoch_first: first.epoch,
                epoch_last: last.epoch,
                flow: f.flow,
                encap: Default::default(),
                mean_ns: est(s.mean_ns, s.count),
                std_dev_ns: est(s.std_dev_ns, s.count),
            }));
        }
    }
    let e = truth.epoch_len_ns.max(1);
    for f in &truth.fridge {
        let d: Vec<f64> = f.delay_ns.iter().map(|x| *x as f64).collect();
        let Some(dist) = fridge_truth(&d) else { continue };
        let qs: Vec<f64> = (1..=19).map(|i| f64::from(i) * 0.05).chain([0.99]).collect();
        out.push(Record::FridgeQuantiles(FridgeRecord {
            point: f.point,
            kind: f.kind,
            epoch_first: truth.first_ts_ns / e,
            epoch_last: truth.last_ts_ns / e,
            quantiles: qs.into_iter().map(|q| QuantilePoint { q, delay_ns: dist.quantile(q) }).collect(),
        }));
    }
    out
}
