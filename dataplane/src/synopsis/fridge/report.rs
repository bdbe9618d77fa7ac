//! The fridge's estimator: from one decoded epoch synopsis to a serialisable report per
//! exchange kind and per subset: the combined weighted histogram, quantiles with intervals,
//! threshold fractions, and diagnostics.
//!
//! Quantile intervals [ours; the paper gives none]: the delta-method standard deviation of F̂
//! at the quantile (spec §3.5), inverted through F̂ (a Woodruff interval) at 95 %. They treat
//! survivals as independent and the combination weights as fixed, so read them as indicative.
//! Pure functions; never NaN (every value goes through [`Estimate::new`]).

use super::FridgeSynopsis;
use super::accum::{BinStats, KindCounters, KindEpoch};
use super::combine::{CombinedHistogram, FridgeModel, bin_weights, combine};
use super::config::{Combination, KindConfig, WeightMode};
use super::distribution::{BinnedDistribution, Quantiles as _};
use crate::packet::ExchangeKind;
use crate::synopsis::Synopsis;
use crate::synopsis::estimate::{ConfidenceInterval, Estimate, Measured, NoEstimate};
use serde::{Serialize, Serializer};

/// Coverage of the intervals.
pub const INTERVAL_LEVEL: f64 = 0.95;
/// Normal quantile for [`INTERVAL_LEVEL`].
const Z: f64 = 1.959_963_984_540_054;

/// The quantiles every distribution report carries.
pub const REPORTED_QUANTILES: [f64; 4] = [0.5, 0.9, 0.95, 0.99];

/// A [`Measured`] estimate serialised as plain fields: `{"value", "samples", "interval"}` when
/// there is one, `{"value": null, "error": {"reason", …}}` when not, instead of serde's
/// `{"Ok": …}` / `{"Err": …}`, so a reader finds `p99_ns.value` without unwrapping a variant.
#[derive(Clone, Copy, Debug)]
pub struct PlainMeasured<'a>(pub &'a Measured<Estimate>);

impl Serialize for PlainMeasured<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Plain<'a> {
            value: Option<f64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            samples: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            interval: Option<&'a ConfidenceInterval>,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<&'a NoEstimate>,
        }
        let p = match self.0 {
            Ok(e) => Plain {
                value: Some(e.value),
                samples: Some(e.samples),
                interval: e.interval.as_ref(),
                error: None,
            },
            Err(e) => Plain { value: None, samples: None, interval: None, error: Some(e) },
        };
        p.serialize(s)
    }
}

fn plain<S: Serializer>(m: &Measured<Estimate>, s: S) -> Result<S::Ok, S::Error> {
    PlainMeasured(m).serialize(s)
}

/// One bin of the combined histogram.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HistogramBin {
    /// Lower edge, ns.
    pub low_ns: u64,
    /// Upper edge, ns (`None` for the open last bin).
    pub high_ns: Option<u64>,
    /// Estimated number of pairs, f̂(b).
    pub pairs: f64,
    /// Standard error of `pairs`.
    pub pairs_se: f64,
    /// Samples behind it.
    pub samples: u64,
}

/// A "fraction of delays above the threshold" answer (the SLA query of spec §1.1).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThresholdReport {
    /// Threshold, ns.
    pub threshold_ns: u64,
    /// Fraction of pairs slower than the threshold, with a 95 % delta-method interval.
    #[serde(serialize_with = "plain")]
    pub fraction_above: Measured<Estimate>,
}

/// The estimated delay distribution of one kind (or one subset of it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DistributionReport {
    /// Samples (matched responses) behind it.
    pub samples: u64,
    /// Estimated number of request/response pairs, Σ f̂(b), with a 95 % interval.
    #[serde(serialize_with = "plain")]
    pub estimated_pairs: Measured<Estimate>,
    /// Median delay, ns.
    #[serde(serialize_with = "plain")]
    pub p50_ns: Measured<Estimate>,
    /// 90th percentile, ns.
    #[serde(serialize_with = "plain")]
    pub p90_ns: Measured<Estimate>,
    /// 95th percentile, ns.
    #[serde(serialize_with = "plain")]
    pub p95_ns: Measured<Estimate>,
    /// 99th percentile, ns.
    #[serde(serialize_with = "plain")]
    pub p99_ns: Measured<Estimate>,
    /// Configured threshold queries.
    pub above: Vec<ThresholdReport>,
    /// The non-empty bins of the combined histogram.
    pub histogram: Vec<HistogramBin>,
}

/// One subset's distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SubsetReport {
    /// "client 192.0.2.0/24", "server port 53" or "other".
    pub subset: String,
    /// Its distribution.
    pub distribution: DistributionReport,
}

/// Per-fridge diagnostics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FridgeDiagnostics {
    /// M.
    pub slots: u32,
    /// p.
    pub entry_probability: f64,
    /// Requests written this epoch.
    pub insertions: u64,
    /// Samples this fridge produced.
    pub samples: u64,
    /// Expected lifetime 1/μ from the measured rate, ns (the delay at which survival drops
    /// to 1/e); `None` without a rate.
    pub lifetime_ns: Option<f64>,
}

/// Diagnostics of one kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindDiagnostics {
    /// The raw counters.
    pub counters: KindCounters,
    /// Requests per second per shard, from the request gaps.
    pub request_rate_per_s: Option<f64>,
    /// "model_weights" or "ivw_plugin" (only matters with several fridges).
    pub combination: &'static str,
    /// "insertions" (W1) or "offered" (W2).
    pub weight: &'static str,
    /// Per fridge.
    pub fridges: Vec<FridgeDiagnostics>,
    /// Quantiles that fell in the open last bin (reported as NoEstimate).
    pub clamped_quantiles: u64,
}

/// Everything estimated for one exchange kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindReport {
    /// The exchange kind.
    pub kind: ExchangeKind,
    /// All samples of the kind.
    pub all: DistributionReport,
    /// Per configured subset, then "other" (empty when no subsets are configured).
    pub subsets: Vec<SubsetReport>,
    /// Diagnostics.
    pub diagnostics: KindDiagnostics,
}

/// The fridge's report for one epoch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FridgeReport {
    /// Per measured kind, in config order.
    pub kinds: Vec<KindReport>,
    /// Exchanges of kinds that are not measured.
    pub ignored_exchanges: u64,
}

/// Estimates every kind and subset of one (merged, decoded) epoch synopsis.
pub fn estimate(syn: &FridgeSynopsis) -> FridgeReport {
    let cfg = syn.config();
    let kinds = cfg.kinds.iter().zip(syn.kinds()).map(|(kc, epoch)| estimate_kind(syn, kc, epoch)).collect();
    FridgeReport { kinds, ignored_exchanges: syn.ignored_exchanges() }
}

/// The models of a kind's fridges from its epoch counters.
pub fn models(kc: &KindConfig, mode: WeightMode, epoch: &KindEpoch) -> Vec<FridgeModel> {
    kc.fridges
        .iter()
        .zip(&epoch.fridges)
        .map(|(spec, fc)| FridgeModel::from_counters(spec, mode, &epoch.counters, fc))
        .collect()
}

fn estimate_kind(syn: &FridgeSynopsis, kc: &KindConfig, epoch: &KindEpoch) -> KindReport {
    let cfg = syn.config();
    let bins = syn.bins();
    let models = models(kc, cfg.weight, epoch);
    let nf = epoch.fridge_count();
    let ns = epoch.subset_count();
    let mut clamped = 0u64;

    // "All" = the fridges' histograms summed over subsets, then combined.
    let mut all: Vec<Vec<BinStats>> = vec![vec![BinStats::default(); bins.len()]; nf];
    for s in 0..ns {
        for (k, acc) in all.iter_mut().enumerate() {
            for (a, b) in acc.iter_mut().zip(epoch.hist(s, k)) {
                a.add(b);
            }
        }
    }
    let all_refs: Vec<&[BinStats]> = all.iter().map(|v| v.as_slice()).collect();
    let all_report = distribution_report(syn, &models, &all_refs, &mut clamped);

    let subsets = if cfg.subsets.is_empty() {
        Vec::new()
    } else {
        // Configured subsets first (buckets 1..), then "other" (bucket 0).
        (1..ns)
            .chain(std::iter::once(0))
            .map(|s| {
                let refs: Vec<&[BinStats]> = (0..nf).map(|k| epoch.hist(s, k)).collect();
                SubsetReport {
                    subset: syn.subsets().name(s),
                    distribution: distribution_report(syn, &models, &refs, &mut clamped),
                }
            })
            .collect()
    };

    let c = &epoch.counters;
    let fridges = kc
        .fridges
        .iter()
        .enumerate()
        .map(|(k, spec)| FridgeDiagnostics {
            slots: spec.slots,
            entry_probability: spec.entry_probability,
            insertions: epoch.fridges.get(k).map_or(0, |f| f.insertions),
            samples: all.get(k).map_or(0, |h| h.iter().fold(0u64, |a, b| a.saturating_add(b.samples))),
            lifetime_ns: models.get(k).and_then(|m| m.lifetime_ns()),
        })
        .collect();
    let diagnostics = KindDiagnostics {
        counters: *c,
        request_rate_per_s: (c.request_gap_ns > 0).then(|| c.requests as f64 * 1e9 / c.request_gap_ns as f64),
        combination: match cfg.combination {
            Combination::ModelWeights => "model_weights",
            Combination::IvwPlugin { .. } => "ivw_plugin",
        },
        weight: match cfg.weight {
            WeightMode::Insertions => "insertions",
            WeightMode::Offered => "offered",
        },
        fridges,
        clamped_quantiles: clamped,
    };
    KindReport { kind: kc.kind, all: all_report, subsets, diagnostics }
}

fn distribution_report(
    syn: &FridgeSynopsis,
    models: &[FridgeModel],
    hists: &[&[BinStats]],
    clamped: &mut u64,
) -> DistributionReport {
    let cfg = syn.config();
    let bins = syn.bins();
    let weights = bin_weights(&cfg.combination, bins, models, hists);
    let combined: CombinedHistogram = combine(&weights, hists);
    let samples = combined.total_samples();
    let histogram = (0..bins.len())
        .filter(|&b| combined.samples[b] > 0)
        .map(|b| HistogramBin {
            low_ns: bins.low_ns(b),
            high_ns: bins.high_ns(b),
            pairs: combined.mass[b],
            pairs_se: combined.variance[b].max(0.0).sqrt(),
            samples: combined.samples[b],
        })
        .collect();
    let none = || Err(NoEstimate::TooFewSamples { have: samples, need: 1 });
    let Some(dist) = BinnedDistribution::new(bins, &combined) else {
        return DistributionReport {
            samples,
            estimated_pairs: none(),
            p50_ns: none(),
            p90_ns: none(),
            p95_ns: none(),
            p99_ns: none(),
            above: cfg
                .report_thresholds_ns
                .iter()
                .map(|&t| ThresholdReport { threshold_ns: t, fraction_above: none() })
                .collect(),
            histogram,
        };
    };
    let estimated_pairs = Estimate::new(dist.total(), samples)
        .map(|e| e.with_half_width(INTERVAL_LEVEL, Z * dist.total_variance().sqrt()));
    let mut quantile = |q: f64| -> Measured<Estimate> {
        let d = dist.quantile_detail(q);
        if d.clamped {
            *clamped += 1;
            return Err(NoEstimate::Other {
                detail: format!("p{} lies beyond the histogram's last edge ({} ns)", q * 100.0, d.value_ns),
            });
        }
        let sd = dist.cdf_sd(d.value_ns);
        let low = dist.quantile((q - Z * sd).max(0.0));
        let high = dist.quantile((q + Z * sd).min(1.0));
        let mut e = Estimate::new(d.value_ns, samples)?;
        if low.is_finite() && high.is_finite() {
            e.interval = Some(ConfidenceInterval { level: INTERVAL_LEVEL, low, high });
        }
        Ok(e)
    };
    let [q50, q90, q95, q99] = REPORTED_QUANTILES.map(&mut quantile);
    let above = cfg
        .report_thresholds_ns
        .iter()
        .map(|&t| {
            let (f, sd) = dist.fraction_above(t as f64);
            let fraction_above = Estimate::new(f, samples).map(|e| {
                let mut e = e;
                e.interval = Some(ConfidenceInterval {
                    level: INTERVAL_LEVEL,
                    low: (f - Z * sd).max(0.0),
                    high: (f + Z * sd).min(1.0),
                });
                e
            });
            ThresholdReport { threshold_ns: t, fraction_above }
        })
        .collect();
    DistributionReport {
        samples,
        estimated_pairs,
        p50_ns: q50,
        p90_ns: q90,
        p95_ns: q95,
        p99_ns: q99,
        above,
        histogram,
    }
}
