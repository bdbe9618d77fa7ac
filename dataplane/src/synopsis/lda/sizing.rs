//! Closed forms for sizing an LDA and for judging its estimates (spec §4.4, §4.5): expected
//! usable rows and effective sample size under ideal hashing, the paper's lower bound (eq. 2),
//! the mean's confidence half-width (eq. 1) and the expected accuracy of the mean and std-dev.
//!
//! The tests use these to set their tolerances; an operator uses them to size banks. Pure
//! arithmetic, no state.

use super::config::LdaConfig;
use crate::synopsis::quantile;
use serde::Serialize;

/// Expected usable rows of one bank, E\[U\] = m (1 − p/m)^L: a row stays usable when none of the
/// L lost packets is sampled into it (spec §4.5 \[derived\]).
pub fn expected_usable_rows(rows: u32, p: f64, lost: u64) -> f64 {
    let m = f64::from(rows);
    m * (1.0 - p / m).powf(lost as f64)
}

/// Expected effective sample size of one bank, E\[S\] = p R (1 − p/m)^L (spec §4.5).
pub fn expected_samples(rows: u32, p: f64, received: u64, lost: u64) -> f64 {
    let m = f64::from(rows);
    p * received as f64 * (1.0 - p / m).powf(lost as f64)
}

/// Expected usable collapsed buckets of one bank, E\[Ũ\] = (m/2)(1 − 2p/m)^L (spec §4.5).
pub fn expected_usable_buckets(rows: u32, p: f64, lost: u64) -> f64 {
    let m = f64::from(rows);
    m / 2.0 * (1.0 - 2.0 * p / m).powf(lost as f64)
}

/// Expected packets in usable buckets of one bank, E\[S̃\] = p R (1 − 2p/m)^L (spec §4.5).
pub fn expected_collapsed_samples(rows: u32, p: f64, received: u64, lost: u64) -> f64 {
    let m = f64::from(rows);
    p * received as f64 * (1.0 - 2.0 * p / m).powf(lost as f64)
}

/// The paper's lower bound (eq. 2) for one bank tuned with p = α m/(L + 1), valid for L ≥ m:
/// E\[S\] ≥ α (1 − α) · m/(L + 1) · R.
pub fn samples_lower_bound(rows: u32, alpha: f64, received: u64, design_lost: u64) -> f64 {
    alpha * (1.0 - alpha) * f64::from(rows) / (design_lost as f64 + 1.0) * received as f64
}

/// Variance of one bank's effective sample size \[derived here, not in the spec\]: treating the
/// rows as independent (Poissonisation, which slightly overstates it), row i holds
/// c ~ Poisson(λ = pR/m) received sampled packets and is usable with probability
/// q = (1 − p/m)^L independently of c, so Var\[c·1{usable}\] = λq + λ²q(1 − q) and
/// Var\[S\] = m (λq + λ²q(1 − q)).
pub fn samples_variance(rows: u32, p: f64, received: u64, lost: u64) -> f64 {
    let m = f64::from(rows);
    let lambda = p * received as f64 / m;
    let q = (1.0 - p / m).powf(lost as f64);
    m * (lambda * q + lambda * lambda * q * (1.0 - q))
}

/// The multiplier z of the mean's (1 − δ) confidence half-width z·σ/√S from the paper's
/// eq. 1, Pr\[|D − μ| ≥ εμ\] ≤ 2 exp(−ε² S μ²/(2σ²)): z = sqrt(2 ln(2/δ)). For the paper's 98%
/// intervals z = sqrt(2 ln 100) ≈ 3.035 (spec §4.5, §8.19). `None` unless 0 < level < 1.
pub fn confidence_multiplier(level: f64) -> Option<f64> {
    if !(level > 0.0 && level < 1.0) {
        return None;
    }
    let delta = 1.0 - level;
    Some((2.0 * (2.0 / delta).ln()).sqrt())
}

/// Largest S for which [`confidence_half_width`] computes Student's t.
const STUDENT_T_MAX_SAMPLES: u64 = 1_000;

/// Half-width of the mean's confidence interval at `level`: m · σ/√S, with m the larger of
/// the paper's sqrt(2 ln(2/δ)) and Student's t with S − 1 degrees of freedom. The paper's
/// bound takes σ as known; σ̂ from a handful of packets is itself far off (under heavy tails
/// mostly too small), and t is the exact multiplier for that when delays are normal. It
/// exceeds the paper's only for S ≤ 7 at 98 % (t = 3.14 at 6 degrees of freedom, 31.8 at 1),
/// so epochs of a few packets (sparse traffic) get honest widths and the rest are unchanged.
/// `None` with fewer than two samples (σ̂ then says nothing), with a non-finite or negative
/// σ, or a level outside (0, 1).
pub fn confidence_half_width(sigma: f64, samples: u64, level: f64) -> Option<f64> {
    if samples < 2 || !(sigma.is_finite() && sigma >= 0.0) {
        return None;
    }
    let z = confidence_multiplier(level)?;
    // Past a thousand degrees of freedom t is within 1.5 % of the normal quantile, which the
    // paper's multiplier exceeds by more at every level up to 1 − 10⁻¹²; statrs inverts t's
    // CDF numerically, slowly at large df.
    let t = if samples <= STUDENT_T_MAX_SAMPLES {
        quantile::student_t_two_sided((samples - 1) as f64, level)
    } else {
        0.0
    };
    Some(z.max(t) * sigma / (samples as f64).sqrt())
}

/// Expected relative error of the mean, E|D − μ|/μ ≈ sqrt(2/π) · CV/√S (spec §4.5): D is the
/// mean of S packets, so its standard error is CV·μ/√S and a normal |error| averages sqrt(2/π)
/// of that.
pub fn expected_mean_relative_error(cv: f64, samples: f64) -> f64 {
    (2.0 / std::f64::consts::PI).sqrt() * cv / samples.sqrt()
}

/// Relative standard deviation of σ̂ ≈ (1 + 1/CV²)/sqrt(2 B_eff), with B_eff the mass-weighted
/// number of usable collapsed buckets (spec §4.4 \[derived\]); mean |relative error| ≈ 0.8 × it.
pub fn std_dev_relative_std(cv: f64, effective_buckets: f64) -> f64 {
    (1.0 + 1.0 / (cv * cv)) / (2.0 * effective_buckets).sqrt()
}

/// [`std_dev_relative_std`] widened by the sampling of the squared delays [derived here, not in
/// the spec]: given which packets sit in usable buckets, F's expectation is the mean of their
/// S̃ squared delays, not of all R, which adds a relative variance (κ − 1)/S̃ with
/// κ = E\[w⁴\]/E\[w²\]². So relvar(F) ≈ 2/B_eff + (κ − 1)/S̃ and σ̂'s relative error is
/// (1 + 1/CV²)/2 times F's. The second term dominates when buckets hold few packets (high loss)
/// and delays are heavy-tailed (κ ≈ 27 for Weibull β = 0.6).
pub fn std_dev_relative_std_sampled(
    cv: f64,
    effective_buckets: f64,
    kappa: f64,
    collapsed_samples: f64,
) -> f64 {
    let f_rel_var = 2.0 / effective_buckets + (kappa - 1.0).max(0.0) / collapsed_samples;
    (1.0 + 1.0 / (cv * cv)) / 2.0 * f_rel_var.sqrt()
}

/// What an LDA configuration should collect in an interval with `received` delivered and
/// `lost` lost packets, summed over its banks with their effective probabilities.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Expected {
    /// E\[usable cells\].
    pub usable_cells: f64,
    /// E\[S\].
    pub samples: f64,
    /// Standard deviation of S ([`samples_variance`], summed over banks).
    pub samples_std: f64,
    /// E\[usable collapsed buckets\].
    pub usable_buckets: f64,
    /// E\[S̃\].
    pub collapsed_samples: f64,
}

/// The expectations of §4.5 for a (validated) configuration.
pub fn expected(cfg: &LdaConfig, received: u64, lost: u64) -> Expected {
    let mut e = Expected {
        usable_cells: 0.0,
        samples: 0.0,
        samples_std: 0.0,
        usable_buckets: 0.0,
        collapsed_samples: 0.0,
    };
    let mut var = 0.0;
    for (b, p) in cfg.banks.iter().zip(cfg.effective_probabilities()) {
        e.usable_cells += expected_usable_rows(b.rows, p, lost);
        e.samples += expected_samples(b.rows, p, received, lost);
        var += samples_variance(b.rows, p, received, lost);
        e.usable_buckets += expected_usable_buckets(b.rows, p, lost);
        e.collapsed_samples += expected_collapsed_samples(b.rows, p, received, lost);
    }
    e.samples_std = var.sqrt();
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::lda::config::{BankTarget, DEFAULT_ALPHA};

    #[test]
    fn the_98_percent_multiplier() {
        // Spec §4.5: sqrt(2 ln 100) ≈ 3.035.
        assert!((confidence_multiplier(0.98).unwrap() - 3.0349).abs() < 1e-4);
        // From 8 samples on the paper's multiplier is the larger one.
        let z = confidence_multiplier(0.98).unwrap();
        assert_eq!(confidence_half_width(2.0, 64, 0.98), Some(z / 4.0));
        assert_eq!(confidence_half_width(1.0, 8, 0.98), Some(z / 8f64.sqrt()));
        // Below, Student's t with S − 1 degrees of freedom: t(0.99; 1) = 31.82, t(0.99; 6) = 3.143.
        assert!((confidence_half_width(1.0, 2, 0.98).unwrap() * 2f64.sqrt() - 31.821).abs() < 1e-2);
        assert!((confidence_half_width(1.0, 7, 0.98).unwrap() * 7f64.sqrt() - 3.143).abs() < 1e-3);
        assert_eq!(confidence_half_width(1.0, 1, 0.98), None);
        assert_eq!(confidence_half_width(1.0, 0, 0.98), None);
        assert_eq!(confidence_half_width(f64::NAN, 10, 0.98), None);
        assert_eq!(confidence_multiplier(1.0), None);
    }

    #[test]
    fn spec_table_expectations() {
        // Spec §7.7, single bank m = 1024 tuned at N = 5M: E[S] = 3.07M, 310.2k, 30.7k, 5.90k,
        // 2.80k, 1.24k and bound (2) = 2.55M (l = 1e-4, p clamped), 255.7k, ..., 1.02k.
        let n = 5_000_000u64;
        for (l, es, bound) in [
            (1e-3, 310.2e3, 255.7e3),
            (1e-2, 30.7e3, 25.3e3),
            (5e-2, 5.90e3, 4.86e3),
            (0.1, 2.80e3, 2.30e3),
            (0.2, 1.24e3, 1.02e3),
        ] {
            let lost = (n as f64 * l) as u64;
            let cfg =
                LdaConfig::tuned(n, &[BankTarget { rows: 1024, loss_rate: l }], DEFAULT_ALPHA, 0).unwrap();
            let e = expected(&cfg, n - lost, lost);
            assert!((e.samples / es - 1.0).abs() < 0.01, "l={l}: {} vs {es}", e.samples);
            let b = samples_lower_bound(1024, DEFAULT_ALPHA, n - lost, lost);
            assert!((b / bound - 1.0).abs() < 0.01, "l={l}: bound {b} vs {bound}");
            // ≈ 1.2× the bound (spec §7.2): the exact expectation beats the bound.
            assert!(e.samples > 1.15 * b && e.samples < 1.3 * b);
        }
        // Usable buckets ≈ (m/2) e^(−2α) ≈ 188 at α = 0.5.
        let cfg = LdaConfig::tuned(n, &[BankTarget { rows: 1024, loss_rate: 0.01 }], 0.5, 0).unwrap();
        let e = expected(&cfg, n - 50_000, 50_000);
        assert!((e.usable_buckets - 512.0 * (-1f64).exp()).abs() < 2.0, "{}", e.usable_buckets);
        assert!((e.usable_cells - 1024.0 * (-0.5f64).exp()).abs() < 2.0);
    }

    #[test]
    fn two_bank_expectation_matches_the_spec() {
        // Spec §7.7 two banks (512 @ 0.005, 512 @ 0.1): E[S] = 48.8k at l = 1e-3, 21.1k at 1e-2.
        let n = 5_000_000u64;
        let cfg = LdaConfig::tuned(
            n,
            &[BankTarget { rows: 512, loss_rate: 0.005 }, BankTarget { rows: 512, loss_rate: 0.1 }],
            0.5,
            0,
        )
        .unwrap();
        for (l, es) in [(1e-3, 48.8e3), (1e-2, 21.1e3), (0.1, 1.4e3)] {
            let lost = (n as f64 * l) as u64;
            let s = expected(&cfg, n - lost, lost).samples;
            assert!((s / es - 1.0).abs() < 0.03, "l={l}: {s} vs {es}");
        }
    }

    #[test]
    fn accuracy_models() {
        // Spec §7.7: CV 1.758 and S = 309.5k give ≈ 0.25% mean error; ≈ 188 buckets give σ̂
        // relative std (1 + 1/CV²)/sqrt(2·188) ≈ 6.8%.
        assert!((expected_mean_relative_error(1.758, 309.5e3) - 0.00252).abs() < 1e-4);
        assert!((std_dev_relative_std(1.758, 188.0) - 0.0681).abs() < 1e-3);
        // Without the sampling term the two models agree; with many packets per bucket it fades.
        let (a, b) =
            (std_dev_relative_std_sampled(1.758, 188.0, 1.0, 1e3), std_dev_relative_std(1.758, 188.0));
        assert!((a - b).abs() < 1e-12 * b);
        let few = std_dev_relative_std_sampled(1.758, 188.0, 27.0, 750.0);
        assert!(few > 2.0 * std_dev_relative_std(1.758, 188.0), "{few}");
    }
}
