//! Estimated delay distributions: the exact weighted-sample CDF of spec §5 and the binned CDF
//! of the per-epoch histograms, with quantiles and "fraction above" queries.
//!
//! - [`WeightedSamples`]: knots at the distinct delays, F̂ = cumulative normalised weight, linear
//!   interpolation between knots and the smallest delay below the first knot (numpy's
//!   `interp(q, F̂, t)`). With unit weights the same code gives the ground truth.
//! - [`BinnedDistribution`]: mass per log bin placed between the bin's smallest and largest
//!   delay, with the same knot interpolation as the samples' CDF (see its docs); a quantile in
//!   the overflow bin is reported as clamped.
//!
//! Pure functions; no I/O. Never NaN for non-empty input.

use super::bins::LogBins;
use super::combine::CombinedHistogram;

/// Anything that answers quantile queries.
pub trait Quantiles {
    /// The delay (ns) at cumulative probability `q` ∈ [0, 1].
    fn quantile(&self, q: f64) -> f64;
}

/// A piecewise-linear CDF through knots (t_j, F_j), t non-decreasing and F non-decreasing in
/// (0, 1]: numpy's `interp(q, F, t)` for quantiles, the smallest knot below the first.
#[derive(Clone, Debug, PartialEq)]
struct Knots {
    t: Vec<f64>,
    f: Vec<f64>,
}

impl Knots {
    /// Appends a knot; an equal delay keeps the larger cumulative value (a jump).
    fn push(&mut self, t: f64, f: f64) {
        match (self.t.last(), self.f.last_mut()) {
            (Some(&last), Some(fl)) if last == t => *fl = fl.max(f),
            _ => {
                self.t.push(t);
                self.f.push(f);
            }
        }
    }

    /// Divides every F by `total`.
    fn normalise(&mut self, total: f64) {
        for x in &mut self.f {
            *x /= total;
        }
    }

    fn cdf(&self, t_ns: f64) -> f64 {
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

    fn quantile(&self, q: f64) -> f64 {
        let (Some(&first), Some(&last)) = (self.t.first(), self.t.last()) else { return 0.0 };
        let j = self.f.partition_point(|x| *x < q);
        if j == 0 {
            return first;
        }
        if j >= self.f.len() {
            return last;
        }
        let (f0, f1, t0, t1) = (self.f[j - 1], self.f[j], self.t[j - 1], self.t[j]);
        if f1 <= f0 { t1 } else { t0 + (q - f0) / (f1 - f0) * (t1 - t0) }
    }
}

/// The exact CDF of weighted samples (t_i, ω_i).
#[derive(Clone, Debug, PartialEq)]
pub struct WeightedSamples {
    knots: Knots,
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
        let mut knots = Knots { t: Vec::with_capacity(count), f: Vec::with_capacity(count) };
        let mut cum = 0.0;
        for (ti, wi) in pairs {
            cum += wi;
            knots.push(ti, cum);
        }
        knots.normalise(cum);
        Some(Self { knots, total: cum, count })
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
        self.knots.cdf(t_ns)
    }
}

impl Quantiles for WeightedSamples {
    fn quantile(&self, q: f64) -> f64 {
        self.knots.quantile(q)
    }
}

/// A distribution given by mass per log bin, placed where the bin's samples were.
///
/// Rule [ours]: the binned CDF is the CDF of [`WeightedSamples`] for samples spread evenly
/// between each bin's smallest and largest delay. Every sample's weight rises linearly from the
/// previous sample's delay to its own (numpy's `interp`), so a bin of n samples and mass m puts
/// m/n (its first sample's share, at the mean weight) on the gap from the previous non-empty
/// bin's largest delay to its own smallest, and the rest linearly from its smallest to its
/// largest delay. Hence a point mass is exact at any resolution, a bin of one sample is a knot
/// at that sample, and a quantile in a gap between samples interpolates between them instead
/// of jumping to the next bin. A bin without recorded extremes (a histogram built from masses
/// alone) spreads its mass linearly over its edges.
#[derive(Clone, Debug)]
pub struct BinnedDistribution<'a> {
    bins: &'a LogBins,
    mass: Vec<f64>,
    variance: Vec<f64>,
    /// Mass at or below the upper edge of each bin.
    cum: Vec<f64>,
    total: f64,
    knots: Knots,
}

/// A quantile read off a binned distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BinnedQuantile {
    /// Delay, ns.
    pub value_ns: f64,
    /// True when the quantile lies in the overflow bin (beyond the histogram's last edge).
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
        let mut knots = Knots { t: Vec::new(), f: Vec::new() };
        let mut s = 0.0;
        for (b, m) in mass.iter().enumerate() {
            if *m > 0.0 {
                let samples = h.samples.get(b).copied().unwrap_or(0);
                match h.extremes.get(b).copied().flatten() {
                    Some((lo, hi)) if samples > 0 => {
                        knots.push(lo as f64, s + m / samples as f64);
                        knots.push(hi as f64, s + m);
                    }
                    _ => {
                        let lo = bins.low_ns(b) as f64;
                        knots.push(lo, s);
                        knots.push(bins.high_ns(b).map_or(lo, |hi| hi as f64), s + m);
                    }
                }
            }
            s += m;
            cum.push(s);
        }
        if !(s > 0.0 && s.is_finite()) {
            return None;
        }
        knots.normalise(s);
        Some(Self { bins, mass, variance, cum, total: s, knots })
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
        let value_ns = self.knots.quantile(q.clamp(0.0, 1.0));
        BinnedQuantile { value_ns, clamped: value_ns >= self.bins.low_ns(self.bins.overflow()) as f64 }
    }

    /// F̂(t) under the same rule.
    pub fn cdf(&self, t_ns: f64) -> f64 {
        self.knots.cdf(t_ns)
    }

    /// Standard deviation of F̂ at delay `t_ns` by the delta method (spec §3.5, the spec's own suggestion):
    /// Var F̂(t) ≈ N̂⁻²·Σ_b Var f̂(b)·(1[b ≤ t] − F̂(t))², a bin straddling t split by the
    /// fraction of its mass below t.
    pub fn cdf_sd(&self, t_ns: f64) -> f64 {
        let f = self.cdf(t_ns);
        let below_mass = f * self.total;
        let mut s = 0.0;
        for (b, v) in self.variance.iter().enumerate() {
            let before = if b == 0 { 0.0 } else { self.cum[b - 1] };
            let m = self.mass[b];
            let below = if m > 0.0 { ((below_mass - before) / m).clamp(0.0, 1.0) } else { 0.0 };
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

    fn histogram(bins: &LogBins) -> CombinedHistogram {
        CombinedHistogram::empty(bins.len())
    }

    #[test]
    fn binned_quantiles_without_extremes_spread_over_the_bin() {
        let bins = LogBins::new(&HistogramConfig { min_delay_ns: 1024, octaves: 10, bins_per_octave: 1 });
        let mut h = histogram(&bins);
        // All mass in [2048, 4096) and no extremes: linear over the bin, the median is 3072.
        h.mass[2] = 10.0;
        h.variance[2] = 4.0;
        let d = BinnedDistribution::new(&bins, &h).unwrap();
        assert!((d.quantile(0.5) - 3072.0).abs() < 1e-6);
        assert!((d.cdf(3072.0) - 0.5).abs() < 1e-12);
        assert_eq!(d.fraction_above(5000.0).0, 0.0);
        h.mass[bins.overflow()] = 10.0;
        let d = BinnedDistribution::new(&bins, &h).unwrap();
        let q = d.quantile_detail(1.0);
        assert!(q.clamped);
        assert_eq!(q.value_ns, (1024u64 << 10) as f64);
        assert!(!d.quantile_detail(0.4).clamped);
    }

    #[test]
    fn binned_point_mass_is_exact_and_gaps_interpolate_like_the_samples() {
        let bins = LogBins::new(&HistogramConfig { min_delay_ns: 1024, octaves: 20, bins_per_octave: 4 });
        // A point mass of 50 samples at 41 700 ns: every quantile is the point.
        let mut h = histogram(&bins);
        let b = bins.bin_of(41_700);
        (h.mass[b], h.samples[b], h.extremes[b]) = (50.0, 50, Some((41_700, 41_700)));
        let d = BinnedDistribution::new(&bins, &h).unwrap();
        for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(d.quantile(q), 41_700.0, "q = {q}");
        }
        // 99 samples evenly between 10 and 20 µs, one at 5 ms: p99.5 lies in the gap, where the
        // samples' CDF interpolates between 20 µs and 5 ms; the old rule jumped to 5 ms's bin.
        let delays: Vec<f64> =
            (0..99).map(|i| 10_000.0 + 10_000.0 * f64::from(i) / 98.0).chain([5_000_000.0]).collect();
        let mut h = histogram(&bins);
        for &t in &delays {
            let b = bins.bin_of(t as u64);
            h.mass[b] += 1.0;
            h.samples[b] += 1;
            h.extremes[b] = Some(
                h.extremes[b].map_or((t as u64, t as u64), |(lo, hi)| (lo.min(t as u64), hi.max(t as u64))),
            );
        }
        let d = BinnedDistribution::new(&bins, &h).unwrap();
        let truth = WeightedSamples::unit(delays).unwrap();
        for q in [0.5, 0.9, 0.95, 0.99, 0.995] {
            let (e, t) = (d.quantile(q), truth.quantile(q));
            // Inside a bin the samples are not exactly evenly spread over [min, max]; one bin
            // (2^(1/4)) of them holds at most a 1/8 octave misplacement: ≤ 0.02 here by layout.
            assert!((e / t).log2().abs() < 0.02, "q = {q}: {e} vs truth {t}");
        }
    }
}
