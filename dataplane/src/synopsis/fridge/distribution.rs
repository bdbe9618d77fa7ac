//! Estimated delay distributions: the exact weighted-sample CDF of spec §5 and the binned CDF
//! of the per-epoch histograms, with quantiles and "fraction above" queries.
//!
//! - [`WeightedSamples`]: knots at the distinct delays, F̂ = cumulative normalised weight, linear
//!   interpolation between knots and the smallest delay below the first knot (numpy's
//!   `interp(q, F̂, t)`). With unit weights the same code gives the ground truth.
//! - [`BinnedDistribution`]: mass per log bin, linear in the underflow bin and log-linear inside
//!   regular bins; a quantile in the overflow bin is its lower edge (reported as clamped).
//!
//! Pure functions; no I/O. Never NaN for non-empty input.

use super::bins::LogBins;
use super::combine::CombinedHistogram;

/// Anything that answers quantile queries.
pub trait Quantiles {
    /// The delay (ns) at cumulative probability `q` ∈ [0, 1].
    fn quantile(&self, q: f64) -> f64;
}

/// The exact CDF of weighted samples (t_i, ω_i).
#[derive(Clone, Debug, PartialEq)]
pub struct WeightedSamples {
    t: Vec<f64>,
    f: Vec<f64>,
    total: f64,
    count: usize,
}

impl WeightedSamples {
    /// From (delay, weight) pairs; weights ≤ 0 or not finite are dropped. `None` if nothing
    /// with positive weight remains.
    pub fn new(mut pairs: Vec<(f64, f64)>) -> Option<Self> {
        pairs.retain(|(t, w)| t.is_finite() && w.is_finite() && *w > 0.0);
        if pairs.is_empty() {
            return None;
        }
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count = pairs.len();
        let mut t: Vec<f64> = Vec::with_capacity(pairs.len());
        let mut f: Vec<f64> = Vec::with_capacity(pairs.len());
        let mut cum = 0.0;
        for (ti, wi) in pairs {
            cum += wi;
            match t.last() {
                Some(&last) if last == ti => {
                    if let Some(x) = f.last_mut() {
                        *x = cum;
                    }
                }
                _ => {
                    t.push(ti);
                    f.push(cum);
                }
            }
        }
        for x in &mut f {
            *x /= cum;
        }
        Some(Self { t, f, total: cum, count })
    }

    /// Unit weights: the ground-truth CDF of a list of delays.
    pub fn unit(delays: impl IntoIterator<Item = f64>) -> Option<Self> {
        Self::new(delays.into_iter().map(|d| (d, 1.0)).collect())
    }

    /// Σω: the estimated number of pairs.
    pub fn total_weight(&self) -> f64 {
        self.total
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Always false (construction refuses empty input).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// F̂(t), interpolated linearly between knots; 0 below the first knot, 1 from the last.
    pub fn cdf(&self, t_ns: f64) -> f64 {
        let j = self.t.partition_point(|x| *x <= t_ns);
        if j == 0 {
            return 0.0;
        }
        if j >= self.t.len() {
            return 1.0;
        }
        let (t0, t1, f0, f1) = (self.t[j - 1], self.t[j], self.f[j - 1], self.f[j]);
        f0 + (f1 - f0) * (t_ns - t0) / (t1 - t0)
    }
}

impl Quantiles for WeightedSamples {
    fn quantile(&self, q: f64) -> f64 {
        let j = self.f.partition_point(|x| *x < q);
        if j == 0 {
            return self.t[0];
        }
        if j >= self.f.len() {
            return self.t[self.t.len() - 1];
        }
        let (f0, f1, t0, t1) = (self.f[j - 1], self.f[j], self.t[j - 1], self.t[j]);
        if f1 <= f0 { t1 } else { t0 + (q - f0) / (f1 - f0) * (t1 - t0) }
    }
}

/// A distribution given by mass per log bin.
#[derive(Clone, Debug)]
pub struct BinnedDistribution<'a> {
    bins: &'a LogBins,
    mass: Vec<f64>,
    variance: Vec<f64>,
    /// Mass at or below the upper edge of each bin.
    cum: Vec<f64>,
    total: f64,
}

/// A quantile read off a binned distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BinnedQuantile {
    /// Delay, ns.
    pub value_ns: f64,
    /// True when the quantile lies in the overflow bin (value is its lower edge).
    pub clamped: bool,
}

impl<'a> BinnedDistribution<'a> {
    /// From a combined histogram; `None` when its total mass is not positive.
    pub fn new(bins: &'a LogBins, h: &CombinedHistogram) -> Option<Self> {
        let mass: Vec<f64> =
            h.mass.iter().map(|m| if m.is_finite() && *m > 0.0 { *m } else { 0.0 }).collect();
        let variance: Vec<f64> =
            h.variance.iter().map(|v| if v.is_finite() && *v > 0.0 { *v } else { 0.0 }).collect();
        let mut cum = Vec::with_capacity(mass.len());
        let mut s = 0.0;
        for m in &mass {
            s += m;
            cum.push(s);
        }
        (s > 0.0 && s.is_finite()).then_some(Self { bins, mass, variance, cum, total: s })
    }

    /// Σ f̂(b).
    pub fn total(&self) -> f64 {
        self.total
    }

    /// Variance estimate of the total, Σ_b Var f̂(b).
    pub fn total_variance(&self) -> f64 {
        self.variance.iter().sum()
    }

    /// The quantile at `q`, and whether it fell in the overflow bin.
    pub fn quantile_detail(&self, q: f64) -> BinnedQuantile {
        let target = q.clamp(0.0, 1.0) * self.total;
        let b = self.cum.partition_point(|c| *c < target).min(self.mass.len().saturating_sub(1));
        // Skip empty bins so the quantile sits inside a bin that has mass.
        let b = (b..self.mass.len()).find(|&i| self.mass[i] > 0.0).unwrap_or(b);
        let before = if b == 0 { 0.0 } else { self.cum[b - 1] };
        let frac = if self.mass[b] > 0.0 { (target - before) / self.mass[b] } else { 0.0 };
        BinnedQuantile { value_ns: self.bins.interpolate(b, frac), clamped: b == self.bins.overflow() }
    }

    /// F̂(t) under the same within-bin interpolation.
    pub fn cdf(&self, t_ns: f64) -> f64 {
        let b = if t_ns <= 0.0 { 0 } else { self.bins.bin_of(t_ns.min(u64::MAX as f64) as u64) };
        let before = if b == 0 { 0.0 } else { self.cum[b - 1] };
        (before + self.mass[b] * self.bins.fraction_below(b, t_ns)) / self.total
    }

    /// Standard deviation of F̂ at delay `t_ns` by the delta method (spec §3.5, the spec's own suggestion):
    /// Var F̂(t) ≈ N̂⁻²·Σ_b Var f̂(b)·(1[b ≤ t] − F̂(t))², the bin holding t split by its fraction.
    pub fn cdf_sd(&self, t_ns: f64) -> f64 {
        let f = self.cdf(t_ns);
        let b_t = if t_ns <= 0.0 { 0 } else { self.bins.bin_of(t_ns.min(u64::MAX as f64) as u64) };
        let mut s = 0.0;
        for (b, v) in self.variance.iter().enumerate() {
            let below = match b.cmp(&b_t) {
                std::cmp::Ordering::Less => 1.0,
                std::cmp::Ordering::Greater => 0.0,
                std::cmp::Ordering::Equal => self.bins.fraction_below(b, t_ns),
            };
            s += v * (below * (1.0 - f).powi(2) + (1.0 - below) * f * f);
        }
        s.sqrt() / self.total
    }

    /// Fraction of pairs with delay above `t_ns`, and its delta-method standard deviation.
    pub fn fraction_above(&self, t_ns: f64) -> (f64, f64) {
        (1.0 - self.cdf(t_ns), self.cdf_sd(t_ns))
    }
}

impl Quantiles for BinnedDistribution<'_> {
    fn quantile(&self, q: f64) -> f64 {
        self.quantile_detail(q).value_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::fridge::config::HistogramConfig;

    #[test]
    fn weighted_quantile_is_numpy_interp() {
        // Knots t = 1, 2, 4 with weights 1, 1, 2 → F = 0.25, 0.5, 1.
        let w = WeightedSamples::new(vec![(4.0, 1.0), (1.0, 1.0), (2.0, 1.0), (4.0, 1.0)]).unwrap();
        assert_eq!(w.quantile(0.1), 1.0, "below the first knot: the smallest delay");
        assert_eq!(w.quantile(0.25), 1.0);
        assert!((w.quantile(0.375) - 1.5).abs() < 1e-12);
        assert!((w.quantile(0.75) - 3.0).abs() < 1e-12);
        assert_eq!(w.quantile(1.0), 4.0);
        assert!((w.cdf(3.0) - 0.75).abs() < 1e-12);
        assert_eq!(w.total_weight(), 4.0);
        assert!(WeightedSamples::new(vec![(1.0, 0.0)]).is_none());
    }

    #[test]
    fn binned_quantiles_interpolate_log_linearly() {
        let bins = LogBins::new(&HistogramConfig { min_delay_ns: 1024, octaves: 10, bins_per_octave: 1 });
        let mut h = CombinedHistogram {
            mass: vec![0.0; bins.len()],
            variance: vec![0.0; bins.len()],
            samples: vec![0; bins.len()],
        };
        // All mass in [2048, 4096): the median is √2·2048 under log-linear interpolation.
        h.mass[2] = 10.0;
        h.variance[2] = 4.0;
        let d = BinnedDistribution::new(&bins, &h).unwrap();
        assert!((d.quantile(0.5) - 2048.0 * 2f64.sqrt()).abs() < 1e-6);
        assert!((d.cdf(2048.0 * 2f64.sqrt()) - 0.5).abs() < 1e-12);
        assert_eq!(d.fraction_above(5000.0).0, 0.0);
        h.mass[bins.overflow()] = 10.0;
        let d = BinnedDistribution::new(&bins, &h).unwrap();
        let q = d.quantile_detail(0.9);
        assert!(q.clamped);
        assert_eq!(q.value_ns, (1024u64 << 10) as f64);
    }
}
