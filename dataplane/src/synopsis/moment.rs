//! The group-moment standard deviation shared by LDA and RDA (our estimator, not in either
//! paper): from groups of packets whose delay sum D and count c are known exactly (an LDA
//! cell, an RDA bucket), with the groups formed by hashing and so independent of the delays.
//!
//! For c i.i.d. delays of mean μ and variance σ², E[(D − c·μ)²] = c·σ². μ is estimated from
//! the same groups, μ̂ = ΣD / S with S = Σc, and that takes a little away:
//!
//! ```text
//! E[Σ_g (D_g − c_g·μ̂)²] = σ² · (S − Σ_g c_g² / S)
//! σ̂² = Σ_g (D_g − c_g·μ̂)² / (S − Σ_g c_g² / S)          (unbiased)
//! ```
//!
//! (expand D_g − c_g μ̂ = e_g − c_g (μ̂ − μ) with e_g = D_g − c_g μ: E Σe² = Sσ²,
//! E[(μ̂ − μ) Σ c_g e_g] = σ² Σc²/S and E[(μ̂ − μ)²] Σc² = σ² Σc²/S). Unlike the papers'
//! collapsed-bucket estimators, which form F = E[X²] and subtract μ̂², nothing here is a
//! difference of two large numbers: σ̂² is a sum of squares, never negative, and its error does
//! not grow with μ/σ. RDA's banks each partition the same packets, so each bank is a
//! [`Partition`] with its own μ̂ (equal to the exact mean when the decode completed).
//!
//! Which σ: the above is the variance of the distribution the delays are drawn from. RDA reports
//! the population σ of the N packets both points saw (spec §1.4 and P20: σ² = (1/N) Σ x² − μ²,
//! the ground truth's ddof = 0), and so does LDA (lda.md: the population sd of the received
//! delays): a finite population, of which the groups hold a hash-random subset. Drawn without
//! replacement from N values, two delays have covariance −σ_N²/(N − 1); Σ_g (D_g − c_g·μ̂)² is
//! a quadratic form unchanged by a common shift of the delays, so its expectation is that of
//! i.i.d. delays of variance σ_N² + σ_N²/(N − 1):
//!
//! ```text
//! E[Σ_g (D_g − c_g·μ̂)²] = σ_N² · N/(N − 1) · (S − Σ_g c_g² / S)
//! σ̂_N² = Σ_g (D_g − c_g·μ̂)² · (N − 1) / (N · (S − Σ_g c_g² / S))     ([`Population::Of`])
//! ```
//!
//! Without the factor (N − 1)/N the estimate is √(N/(N − 1)) times too large: √2 for an epoch
//! of two packets, which is how the captures of BENCHMARKS.md (W17, twenty-fourth session) found
//! it. Two packets in two groups then give exactly their population σ.
//!
//! The interval: σ̂² is a ratio of sums over groups, so its variance is estimated by the
//! linearised ratio-estimator form Σ_g (y_g − σ̂² c_g)² / den², y_g = (D_g − c_g μ̂)², times the
//! number of partitions that hold the same packets (they are correlated; counting them as
//! independent would understate it). The half-width on σ̂² uses the same conservative
//! multiplier sqrt(2 ln(2/δ)) as LDA's mean, and σ̂'s interval is the square root of its ends.
//!
//! Pure and allocation-free apart from what the caller holds; never NaN.

use crate::synopsis::estimate::{ConfidenceInterval, Estimate, Measured, NoEstimate};
use crate::synopsis::lda::sizing::confidence_multiplier;

/// Fewest groups (in the largest partition) for which σ̂ gets an interval. The ratio
/// estimator's variance is itself estimated from the groups; with a heavy-tailed delay and a
/// handful of groups it misses the tail that dominates σ (the scenario matrix saw 8–29-packet
/// epochs of Weibull-0.6 delays whose σ was 1.5–3× the upper end). Below this, σ̂ is reported
/// without an interval rather than with a false one.
pub const MIN_INTERVAL_GROUPS: u64 = 30;

/// The variance σ̂² estimates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Population {
    /// The variance of the distribution the delays are drawn from: for a small epoch
    /// √(N/(N − 1)) times the population σ, as above.
    Distribution,
    /// The population variance (ddof = 0) of these many packets, of which the groups hold a
    /// hash-random subset (LDA and RDA: the packets both points saw).
    Of(u64),
}

/// One group: its exact delay sum (ns) and packet count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Group {
    /// Σ (T_B − T_A) over the group's packets.
    pub delay_sum: f64,
    /// Packets in the group.
    pub count: u64,
}

/// The sums one partition (a set of groups with disjoint packets) contributes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Partition {
    /// Σ_g (D_g − c_g μ̂)².
    pub square_sum: f64,
    /// S − Σ c_g² / S: the expected square sum over σ².
    pub denominator: f64,
    /// Groups with a packet.
    pub groups: u64,
    /// S.
    pub packets: u64,
}

impl Partition {
    /// The sums of `groups` about their own mean (empty groups are ignored).
    pub fn of(groups: &[Group]) -> Self {
        let (mut s, mut d, mut c2, mut n) = (0.0f64, 0.0f64, 0.0f64, 0u64);
        let mut packets = 0u64;
        for g in groups.iter().filter(|g| g.count > 0) {
            let c = g.count as f64;
            s += c;
            d += g.delay_sum;
            c2 += c * c;
            n += 1;
            packets = packets.saturating_add(g.count);
        }
        if s <= 0.0 {
            return Self::default();
        }
        let mean = d / s;
        let square_sum = groups
            .iter()
            .filter(|g| g.count > 0)
            .map(|g| {
                let r = g.delay_sum - g.count as f64 * mean;
                r * r
            })
            .sum();
        Self { square_sum, denominator: (s - c2 / s).max(0.0), groups: n, packets }
    }
}

/// σ̂ from the partitions' sums, with an interval at `confidence` whose variance term is
/// Σ_g (y_g − σ̂² c_g)² over every group of every partition (`groups` again, with each
/// partition's own mean), times `overlap` (how many partitions hold each packet).
///
/// `samples` of the estimate is the packets of one partition (the largest). `population` says
/// which variance is estimated (the module docs).
pub fn std_dev(
    parts: &[(Partition, &[Group])],
    overlap: usize,
    confidence: f64,
    population: Population,
) -> Measured<Estimate> {
    let finite = match population {
        Population::Of(n) if n > 1 => n as f64 / (n - 1) as f64,
        _ => 1.0,
    };
    let den: f64 = parts.iter().map(|(p, _)| p.denominator).sum();
    let num: f64 = parts.iter().map(|(p, _)| p.square_sum).sum();
    let samples = parts.iter().map(|(p, _)| p.packets).max().unwrap_or(0);
    if samples == 0 {
        return Err(NoEstimate::NoPackets);
    }
    let groups: u64 = parts.iter().map(|(p, _)| p.groups).max().unwrap_or(0);
    if den.is_nan() || den <= 0.0 || groups < 2 {
        return Err(NoEstimate::TooFewSamples { have: groups, need: 2 });
    }
    // The residuals of the ratio estimator are those of the distribution's variance; the
    // population's is that ratio times (N − 1)/N, and so is its standard error.
    let var_distribution = num / den;
    let var = var_distribution / finite;
    let mut spread = 0.0f64;
    for (p, gs) in parts {
        if p.packets == 0 {
            continue;
        }
        let mean = gs.iter().map(|g| g.delay_sum).sum::<f64>() / p.packets as f64;
        for g in gs.iter().filter(|g| g.count > 0) {
            let c = g.count as f64;
            let r = g.delay_sum - c * mean;
            let e = r * r - var_distribution * c;
            spread += e * e;
        }
    }
    let var_of_var = spread * overlap.max(1) as f64 / (den * den * finite * finite);
    let est = Estimate::new(var.max(0.0).sqrt(), samples)?;
    Ok(match confidence_multiplier(confidence) {
        Some(z) if var_of_var.is_finite() && groups >= MIN_INTERVAL_GROUPS => {
            let h = z * var_of_var.sqrt();
            Estimate {
                interval: Some(ConfidenceInterval {
                    level: confidence,
                    low: (var - h).max(0.0).sqrt(),
                    high: (var + h).sqrt(),
                }),
                ..est
            }
        }
        _ => est,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimRng;
    use rand::{Rng, SeedableRng};

    /// Packets of a known population σ hashed into m groups: σ̂ is unbiased whatever μ/σ (the
    /// collapsed estimators lose σ when μ ≫ σ), and its interval covers σ at about its level.
    #[test]
    fn unbiased_and_covered_whatever_the_mean() {
        for &mu in &[0.0, 1e3, 1e6, 1e9] {
            let mut rng = SimRng::seed_from_u64(7);
            let (trials, mut covered, mut rel_sum) = (200, 0, 0.0);
            for _ in 0..trials {
                let m = 128;
                let mut groups = vec![Group { delay_sum: 0.0, count: 0 }; m];
                let mut xs = Vec::new();
                for _ in 0..2000 {
                    // Exponential delays of σ = 100 around μ.
                    let x = mu + 100.0 * -(1.0 - rng.random::<f64>()).ln();
                    xs.push(x);
                    let g = &mut groups[rng.random_range(0..m)];
                    g.delay_sum += x;
                    g.count += 1;
                }
                let n = xs.len() as f64;
                let mean = xs.iter().sum::<f64>() / n;
                let sigma = (xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
                let p = Partition::of(&groups);
                let e = std_dev(&[(p, &groups)], 1, 0.98, Population::Distribution).unwrap();
                rel_sum += (e.value - sigma) / sigma;
                let i = e.interval.unwrap();
                covered += usize::from(i.low <= sigma && sigma <= i.high);
            }
            // Relative std of σ̂² ≈ sqrt((κ−1)/m + ...) ≈ 0.2 for exponential delays and 128
            // groups, so σ̂'s ≈ 0.1; the mean of 200 trials is within ±3·0.1/√200 ≈ 0.021.
            let bias = rel_sum / trials as f64;
            assert!(bias.abs() < 0.025, "μ = {mu}: mean relative error {bias}");
            assert!(covered as f64 >= 0.95 * trials as f64, "μ = {mu}: covered {covered}/{trials}");
        }
    }

    /// With few groups the correction S − Σc²/S matters (≈ S·(1 − 1/m)): 8 groups, σ̂² must
    /// be unbiased to within 3 standard errors of a 400-trial average (σ̂²'s relative sd is
    /// ≈ sqrt(2/7) ≈ 0.53 here, so ±0.08), which the uncorrected S (bias −1/8) fails.
    #[test]
    fn the_mean_correction_keeps_few_groups_unbiased() {
        let mut rng = SimRng::seed_from_u64(11);
        let (trials, m) = (400, 8);
        let mut ratio_sum = 0.0;
        for _ in 0..trials {
            let mut groups = vec![Group { delay_sum: 0.0, count: 0 }; m];
            let xs: Vec<f64> = (0..2000).map(|_| 5e4 + 100.0 * -(1.0 - rng.random::<f64>()).ln()).collect();
            for &x in &xs {
                let g = &mut groups[rng.random_range(0..m)];
                g.delay_sum += x;
                g.count += 1;
            }
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
            let e = std_dev(&[(Partition::of(&groups), &groups)], 1, 0.98, Population::Distribution).unwrap();
            ratio_sum += e.value * e.value / var;
        }
        let bias = ratio_sum / trials as f64 - 1.0;
        assert!(bias.abs() < 0.08, "mean σ̂²/σ² − 1 = {bias}");
    }

    #[test]
    fn one_group_or_none_gives_no_estimate() {
        let one = [Group { delay_sum: 5.0, count: 3 }];
        assert!(std_dev(&[(Partition::of(&one), &one)], 1, 0.98, Population::Distribution).is_err());
        // A few groups: an estimate, but no interval.
        let few: Vec<Group> = (0..5).map(|i| Group { delay_sum: 10.0 * i as f64, count: 2 }).collect();
        let e = std_dev(&[(Partition::of(&few), &few)], 1, 0.98, Population::Distribution).unwrap();
        assert!(e.value > 0.0 && e.interval.is_none());
        assert_eq!(std_dev(&[], 1, 0.98, Population::Distribution), Err(NoEstimate::NoPackets));
    }

    /// Packets each alone in a group: σ̂ of [`Population::Of`] is exactly their population σ
    /// (ddof = 0, the ground truth's), and [`Population::Distribution`] the sample σ (ddof =
    /// 1), √(N/(N − 1)) times it: √2 for two packets.
    #[test]
    fn singleton_groups_give_the_population_sigma_exactly() {
        for xs in
            [vec![10_000.0, 12_000.0], vec![10_000.0, 12_000.0, 17_000.0], vec![5.0, 9.0, 9.0, 30.0, 31.0]]
        {
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
            let groups: Vec<Group> = xs.iter().map(|&x| Group { delay_sum: x, count: 1 }).collect();
            let p = Partition::of(&groups);
            let pop = std_dev(&[(p, &groups)], 1, 0.98, Population::Of(xs.len() as u64)).unwrap().value;
            let dist = std_dev(&[(p, &groups)], 1, 0.98, Population::Distribution).unwrap().value;
            let sigma = (ss / n).sqrt();
            assert!((pop - sigma).abs() <= 1e-12 * sigma, "{xs:?}: {pop} vs the population σ {sigma}");
            let sample = (ss / (n - 1.0)).sqrt();
            assert!((dist - sample).abs() <= 1e-12 * sample, "{xs:?}: {dist} vs the sample σ {sample}");
        }
    }

    /// Five fixed delays hashed into three groups (so groups often hold two or three of them):
    /// over 40 000 random assignments the mean of σ̂² of [`Population::Of`] is their population
    /// variance within 4 standard errors of the mean (the trials' own spread), and that of
    /// [`Population::Distribution`] is 5/4 of it, which this tolerance tells apart.
    #[test]
    fn a_few_packets_in_shared_groups_average_to_their_population_variance() {
        let xs = [10_000.0, 12_000.0, 17_000.0, 25_000.0, 41_000.0];
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var_pop = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        let mut rng = SimRng::seed_from_u64(23);
        let (mut sum, mut sum_sq, mut sum_dist, mut trials) = (0.0f64, 0.0f64, 0.0f64, 0u32);
        while trials < 40_000 {
            let mut groups = vec![Group { delay_sum: 0.0, count: 0 }; 3];
            for &x in &xs {
                let g = &mut groups[rng.random_range(0..3)];
                g.delay_sum += x;
                g.count += 1;
            }
            let p = Partition::of(&groups);
            // All five in one group: no estimate (nothing to compare), as for one packet.
            let Ok(e) = std_dev(&[(p, &groups)], 1, 0.98, Population::Of(xs.len() as u64)) else { continue };
            let d = std_dev(&[(p, &groups)], 1, 0.98, Population::Distribution).unwrap();
            let v = e.value * e.value / var_pop;
            sum += v;
            sum_sq += v * v;
            sum_dist += d.value * d.value / var_pop;
            trials += 1;
        }
        let t = f64::from(trials);
        let ratio = sum / t;
        let se = ((sum_sq / t - ratio * ratio) / t).sqrt();
        assert!((ratio - 1.0).abs() < 4.0 * se, "mean σ̂²/σ_N² = {ratio} (se {se})");
        assert!((sum_dist / t - 1.25).abs() < 5.0 * 1.25 * se, "the distribution's σ̂²: {}", sum_dist / t);
        assert!(0.25 > 8.0 * se, "the test must tell 5/4 from 1: se {se}");
    }
}
