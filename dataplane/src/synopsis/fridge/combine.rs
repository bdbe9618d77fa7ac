//! Combining the estimates of several fridges of one kind per delay bin (spec §4.3, §4.5,
//! P10, P11): per fridge k and bin b a weight ŵ_k(b) with Σ_k ŵ_k(b) = 1, then
//! f̂(b) = Σ_k ŵ_k(b)·f̂_k(b), and for exact samples ω_i = ŵ_{k_i}(b(t_i))·c_i.
//!
//! - `model_weights` (default): ŵ_k(b) ∝ q_k(t_b) = p_k·e^(−μ_k·t_b), the expected inclusion
//!   probability of a pair of delay t_b in fridge k, with μ_k from the measured request rate
//!   (insertions or offered requests per ns times −ln(1 − 1/M) or −ln(1 − p/M)). The weights do
//!   not depend on which pairs survived, so the combination stays unbiased even when the model
//!   is wrong (end of traffic, lulls); a wrong model costs variance only.
//! - `ivw_plugin` (the paper's): ŵ_k(g) ∝ 1/V̂_k(g) with V̂_k = Σc² over IVW bin g; fridges with
//!   V̂ = 0 in a bin are left out. Data-dependent, hence biased under non-stationary traffic.
//!
//! Pure functions; no I/O.

use super::accum::{BinStats, FridgeCounters, KindCounters};
use super::bins::LogBins;
use super::config::{Combination, FridgeSpec, WeightMode};
use super::set::Sample;

/// What the model weights need to know about one fridge besides its histogram.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FridgeModel {
    /// p_k.
    pub entry_probability: f64,
    /// μ_k ≥ 0: expected −ln(survival) per ns of delay, so ln q_k(t) = ln p_k − μ_k·t.
    pub decay_per_ns: f64,
}

impl FridgeModel {
    /// The model of fridge `spec` from one epoch's counters: μ = A·(events per ns), with
    /// A = −ln(1 − 1/M) per insertion (W1) or −ln(1 − p/M) per offered request (W2). Without
    /// a measured rate (a single request) μ = 0 and the weights fall back to ∝ p_k.
    pub fn from_counters(
        spec: &FridgeSpec,
        mode: WeightMode,
        kind: &KindCounters,
        fridge: &FridgeCounters,
    ) -> Self {
        let m = f64::from(spec.slots.max(2));
        let p = spec.entry_probability;
        let (a, events) = match mode {
            WeightMode::Insertions => (-(-1.0 / m).ln_1p(), fridge.insertions),
            WeightMode::Offered => (-(-p / m).ln_1p(), kind.requests),
        };
        let decay_per_ns =
            if kind.request_gap_ns == 0 { 0.0 } else { a * events as f64 / kind.request_gap_ns as f64 };
        Self { entry_probability: p, decay_per_ns: if decay_per_ns.is_finite() { decay_per_ns } else { 0.0 } }
    }

    /// The fridge's expected lifetime in ns (1/μ), if a rate was measured and 1/μ is finite (a
    /// subnormal μ, from a tiny p under W2, has no finite inverse).
    pub fn lifetime_ns(&self) -> Option<f64> {
        (self.decay_per_ns > 0.0).then(|| 1.0 / self.decay_per_ns).filter(|l| l.is_finite())
    }
}

/// Per-fridge, per-bin combination weights.
#[derive(Clone, Debug, PartialEq)]
pub struct BinWeights {
    bins: usize,
    /// Fridge-major, then bin.
    w: Vec<f64>,
}

impl BinWeights {
    /// ŵ_k(b) (0 out of range).
    #[inline]
    pub fn get(&self, k: usize, b: usize) -> f64 {
        self.w.get(k * self.bins + b).copied().unwrap_or(0.0)
    }

    /// ω = ŵ_k(b(t))·c of one exact sample; `None` for samples the histogram path would also
    /// drop (ln c above the overflow limit).
    pub fn sample_weight(&self, s: &Sample, bins: &LogBins) -> Option<f64> {
        if s.ln_weight > super::set::MAX_LN_WEIGHT || s.ln_weight.is_nan() {
            return None;
        }
        Some(self.get(usize::from(s.fridge), bins.bin_of(s.delay_ns)) * s.ln_weight.exp())
    }
}

/// The combination weights for the fridges of one kind (and one subset), given their
/// histograms `hists[k]` and models `models[k]`.
pub fn bin_weights(
    comb: &Combination,
    bins: &LogBins,
    models: &[FridgeModel],
    hists: &[&[BinStats]],
) -> BinWeights {
    let nb = bins.len();
    let nf = hists.len();
    let mut w = vec![0.0; nf * nb];
    if nf == 1 {
        w.fill(1.0);
        return BinWeights { bins: nb, w };
    }
    match *comb {
        Combination::ModelWeights => {
            let mut lnq = vec![0.0; nf];
            for b in 0..nb {
                let t = bins.representative_ns(b);
                for (k, l) in lnq.iter_mut().enumerate() {
                    let m = models
                        .get(k)
                        .copied()
                        .unwrap_or(FridgeModel { entry_probability: 0.0, decay_per_ns: 0.0 });
                    *l = if m.entry_probability > 0.0 {
                        m.entry_probability.ln() - m.decay_per_ns * t
                    } else {
                        f64::NEG_INFINITY
                    };
                }
                let max = lnq.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if !max.is_finite() {
                    continue;
                }
                let z: f64 = lnq.iter().map(|l| (l - max).exp()).sum();
                for (k, l) in lnq.iter().enumerate() {
                    w[k * nb + b] = (l - max).exp() / z;
                }
            }
        }
        Combination::IvwPlugin { bins_per_octave } => {
            let group = (bins.bins_per_octave() / bins_per_octave.max(1)).max(1) as usize;
            let ng = bins.group_count(group);
            let mut v = vec![0.0; nf * ng];
            for (k, h) in hists.iter().enumerate() {
                for (b, s) in h.iter().enumerate().take(nb) {
                    v[k * ng + bins.group_of(b, group)] += s.weight_sq_sum;
                }
            }
            for g in 0..ng {
                let inv_sum: f64 = (0..nf).map(|k| v[k * ng + g]).filter(|x| *x > 0.0).map(|x| 1.0 / x).sum();
                if inv_sum <= 0.0 || !inv_sum.is_finite() {
                    continue;
                }
                for b in (0..nb).filter(|&b| bins.group_of(b, group) == g) {
                    for k in 0..nf {
                        let vk = v[k * ng + g];
                        w[k * nb + b] = if vk > 0.0 { (1.0 / vk) / inv_sum } else { 0.0 };
                    }
                }
            }
        }
    }
    BinWeights { bins: nb, w }
}

/// The combined per-bin estimate of one kind (and subset).
#[derive(Clone, Debug, PartialEq)]
pub struct CombinedHistogram {
    /// f̂(b) = Σ_k ŵ_k(b)·Σc_k(b): estimated number of pairs with delay in bin b.
    pub mass: Vec<f64>,
    /// Σ_k ŵ_k(b)²·Σc_k(c_k − 1): variance estimate of `mass[b]` (weights taken as fixed).
    pub variance: Vec<f64>,
    /// Samples behind `mass[b]`.
    pub samples: Vec<u64>,
    /// Smallest and largest delay among those samples, ns (`None` when the bin has none, or
    /// when the histogram was built from masses alone).
    pub extremes: Vec<Option<(u64, u64)>>,
}

impl CombinedHistogram {
    /// `bins` empty bins.
    pub fn empty(bins: usize) -> Self {
        Self {
            mass: vec![0.0; bins],
            variance: vec![0.0; bins],
            samples: vec![0; bins],
            extremes: vec![None; bins],
        }
    }

    /// Σ f̂(b): the estimated number of pairs.
    pub fn total(&self) -> f64 {
        self.mass.iter().sum()
    }

    /// Samples behind the whole histogram.
    pub fn total_samples(&self) -> u64 {
        // Saturating: merged shards of decoded values are not re-checked.
        self.samples.iter().fold(0u64, |a, &s| a.saturating_add(s))
    }
}

/// Applies `weights` to the fridges' histograms.
pub fn combine(weights: &BinWeights, hists: &[&[BinStats]]) -> CombinedHistogram {
    let nb = weights.bins;
    let mut out = CombinedHistogram::empty(nb);
    for (k, h) in hists.iter().enumerate() {
        for (b, s) in h.iter().enumerate().take(nb) {
            let wk = weights.get(k, b);
            out.mass[b] += wk * s.weight_sum;
            out.variance[b] += wk * wk * s.variance_estimate();
            out.samples[b] = out.samples[b].saturating_add(s.samples);
            // A fridge whose weight here is 0 contributes no mass, so not its extremes either.
            if s.samples > 0 && wk > 0.0 {
                out.extremes[b] = Some(match out.extremes[b] {
                    None => (s.min_ns, s.max_ns),
                    Some((lo, hi)) => (lo.min(s.min_ns), hi.max(s.max_ns)),
                });
            }
        }
    }
    out
}

/// Per-fridge histograms built from exact samples (the same accumulation the synopsis does),
/// for the exact-sample path of tests and the reproduction.
pub fn histograms_from_samples(samples: &[Sample], fridges: usize, bins: &LogBins) -> Vec<Vec<BinStats>> {
    let mut h = vec![vec![BinStats::default(); bins.len()]; fridges];
    for s in samples {
        if s.ln_weight > super::set::MAX_LN_WEIGHT || s.ln_weight.is_nan() {
            continue;
        }
        if let Some(b) = h.get_mut(usize::from(s.fridge)).and_then(|f| f.get_mut(bins.bin_of(s.delay_ns))) {
            b.add_sample(s.ln_weight.exp(), s.delay_ns);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::fridge::config::HistogramConfig;

    fn bins() -> LogBins {
        LogBins::new(&HistogramConfig { min_delay_ns: 1 << 20, octaves: 12, bins_per_octave: 4 })
    }

    fn stats(n: u64, c: f64) -> BinStats {
        BinStats {
            samples: n,
            weight_sum: n as f64 * c,
            weight_sq_sum: n as f64 * c * c,
            min_ns: 0,
            max_ns: 0,
        }
    }

    #[test]
    fn ivw_weights_are_inverse_variance_and_skip_empty_fridges() {
        let b = bins();
        let mut h0 = vec![BinStats::default(); b.len()];
        let mut h1 = vec![BinStats::default(); b.len()];
        h0[5] = stats(10, 2.0); // V̂ = 40
        h1[5] = stats(5, 4.0); // V̂ = 80
        h0[9] = stats(3, 2.0); // fridge 1 has nothing in bin 9's group
        let comb = Combination::IvwPlugin { bins_per_octave: 4 };
        let w = bin_weights(&comb, &b, &[], &[&h0, &h1]);
        assert!((w.get(0, 5) - 2.0 / 3.0).abs() < 1e-12);
        assert!((w.get(1, 5) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!((w.get(0, 9), w.get(1, 9)), (1.0, 0.0));
        let c = combine(&w, &[&h0, &h1]);
        assert!((c.mass[5] - (2.0 / 3.0 * 20.0 + 1.0 / 3.0 * 20.0)).abs() < 1e-9);
        assert_eq!(c.samples[5], 15);
        // Variance: Σ w²·Σc(c−1) = (2/3)²·20 + (1/3)²·60.
        assert!((c.variance[5] - (4.0 / 9.0 * 20.0 + 1.0 / 9.0 * 60.0)).abs() < 1e-9);
        // With IVW at 1 bin per octave, bins 5..=8 share one group.
        let w1 = bin_weights(&Combination::IvwPlugin { bins_per_octave: 1 }, &b, &[], &[&h0, &h1]);
        assert_eq!(w1.get(0, 6), w1.get(0, 5));
    }

    #[test]
    fn model_weights_follow_inclusion_probabilities() {
        let b = bins();
        let models = [
            FridgeModel { entry_probability: 0.5, decay_per_ns: 1e-7 },
            FridgeModel { entry_probability: 0.03125, decay_per_ns: 1e-9 },
        ];
        let empty = vec![BinStats::default(); b.len()];
        let w = bin_weights(&Combination::ModelWeights, &b, &models, &[&empty, &empty]);
        for bin in 0..b.len() {
            assert!((w.get(0, bin) + w.get(1, bin) - 1.0).abs() < 1e-12);
        }
        // Short delays: the high-p fridge dominates (0.5 vs 1/32); long: the long-lifetime one.
        assert!((w.get(0, 0) - 0.5 / (0.5 + 0.03125)).abs() < 1e-12);
        assert!(w.get(1, b.overflow()) > 0.999);
        let t = b.representative_ns(20);
        let (q0, q1) = (0.5 * (-1e-7 * t).exp(), 0.03125 * (-1e-9 * t).exp());
        assert!((w.get(0, 20) - q0 / (q0 + q1)).abs() < 1e-12);
    }

    #[test]
    fn model_from_counters() {
        let spec = FridgeSpec { slots: 1024, entry_probability: 0.25 };
        let kind = KindCounters { requests: 4000, request_gap_ns: 4_000_000, ..Default::default() };
        let fr = FridgeCounters { insertions: 1000 };
        let m = FridgeModel::from_counters(&spec, WeightMode::Insertions, &kind, &fr);
        let a = -(-1.0f64 / 1024.0).ln_1p();
        assert!((m.decay_per_ns - a * 1000.0 / 4e6).abs() < 1e-18);
        // Lifetime ≈ M/(p·λ) = 1024 / (0.25 · 1e-3 per ns) ≈ 4.1 ms.
        assert!((m.lifetime_ns().unwrap() / 4.096e6 - 1.0).abs() < 1e-3);
        let idle = KindCounters::default();
        assert_eq!(FridgeModel::from_counters(&spec, WeightMode::Offered, &idle, &fr).decay_per_ns, 0.0);
        // A valid but tiny p under W2 gives a subnormal rate: 1/μ overflows, and the report
        // must not carry the infinity (serialised as null).
        let tiny = FridgeSpec { slots: 1 << 26, entry_probability: 1e-300 };
        let fast = KindCounters { requests: 1, request_gap_ns: 4, ..Default::default() };
        let m = FridgeModel::from_counters(&tiny, WeightMode::Offered, &fast, &fr);
        assert!(m.decay_per_ns > 0.0);
        assert_eq!(m.lifetime_ns(), None);
    }
}
