//! The special functions and quantiles COLATE's estimators and sizing use (statrs), and the
//! root of Eq 7.

use statrs::distribution::{ChiSquared, ContinuousCDF, Normal, StudentsT};

/// ψ⁽⁰⁾(x), the digamma function.
pub fn digamma(x: f64) -> f64 {
    statrs::function::gamma::digamma(x)
}

/// Φ⁻¹(p) of the standard normal; NaN outside (0, 1).
pub fn normal_quantile(p: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    Normal::standard().inverse_cdf(p)
}

/// The p-quantile of χ² with `df` degrees of freedom; NaN if undefined.
pub fn chi2_quantile(df: f64, p: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    match ChiSquared::new(df) {
        Ok(c) => c.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// Two-sided normal multiplier for coverage `level`: k with P{|Z| ≤ k} = level, i.e.
/// k = √2·erf⁻¹(level) = Φ⁻¹((1 + level)/2) (the k of Eq 19–20).
pub fn two_sided_z(level: f64) -> f64 {
    normal_quantile((1.0 + level) / 2.0)
}

/// Two-sided multiplier of Student's t with `df` degrees of freedom for coverage `level`
/// (→ [`two_sided_z`] as df → ∞); NaN if undefined.
pub fn student_t_two_sided(df: f64, level: f64) -> f64 {
    if !(level > 0.0 && level < 1.0) {
        return f64::NAN;
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf((1.0 + level) / 2.0),
        Err(_) => f64::NAN,
    }
}

/// The root ξ* of Eq 7 rearranged as F(ξ) = ψ(τ − ξ + 1) − ψ(ξ + 1) − ln(n − 1) = 0: the foreign
/// part of a cell that maximises the binomial likelihood of C_r ~ Binom(τ, 1/n) (Theorem 3).
///
/// F falls strictly on (−1, τ + 1) (spec §8 P9), from +∞ to below zero at ξ = τ, so bisection
/// on [−1 + ε, τ] finds the one root. For τ ≫ n it is ≈ (τ − (n − 1)/2)/n, the mode of the
/// binomial; for τ < n/2 it is negative (≈ −1/2). `τ` below 0 (rounding) is taken as 0.
pub fn ml_foreign_offset(tau: f64, n: f64) -> f64 {
    let tau = if tau.is_finite() { tau.max(0.0) } else { return f64::NAN };
    let ln_n1 = (n - 1.0).ln();
    let f = |xi: f64| digamma(tau - xi + 1.0) - digamma(xi + 1.0) - ln_n1;
    let (mut lo, mut hi) = (-1.0 + 1e-12, tau);
    if f(hi) >= 0.0 {
        return hi;
    }
    for _ in 0..400 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if f(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi.abs().max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_tables() {
        // Spec §5.1: k for α = 0.90, 0.95, 0.99 (A = (1 + α)/2, k = Φ⁻¹((1 + A)/2)).
        for (alpha, k) in [(0.90, 1.95996), (0.95, 2.24140), (0.99, 2.80703)] {
            assert!((two_sided_z((1.0 + alpha) / 2.0) - k).abs() < 1e-5, "{alpha}");
        }
        assert!((chi2_quantile(19.0, 0.025) - 8.906_516).abs() < 1e-4);
        assert!((chi2_quantile(19.0, 0.975) - 32.852_327).abs() < 1e-4);
        assert!(normal_quantile(1.0).is_nan() && chi2_quantile(0.0, 0.5).is_nan());
        // t tables: t_{0.975, 4} = 2.776445, t_{0.9995, 9} = 4.780913.
        assert!((student_t_two_sided(4.0, 0.95) - 2.776_445).abs() < 1e-5);
        assert!((student_t_two_sided(9.0, 0.999) - 4.780_913).abs() < 1e-5);
        assert!(student_t_two_sided(0.0, 0.95).is_nan());
        assert!((digamma(1.0) + 0.577_215_664_901_532_9).abs() < 1e-12);
    }

    #[test]
    fn eq7_root_matches_the_binomial_mode() {
        // Spec §4.5: τ = 8·10¹⁰, n = 455 334 → ξ* = 175 694.704, and (τ − (n − 1)/2)/n.
        let (tau, n) = (8e10, 455_334.0);
        let xi = ml_foreign_offset(tau, n);
        assert!((xi - 175_694.704).abs() < 1e-3, "{xi}");
        let closed = (tau - (n - 1.0) / 2.0) / n;
        assert!(((xi - closed) / closed).abs() < 1e-6, "{xi} vs {closed}");
        // Spec §8 P9: a sparse epoch (τ < n/2) has a negative root near −1/2.
        let sparse = ml_foreign_offset(1_000.0, 10_007.0);
        assert!(sparse < 0.0 && sparse > -1.0, "{sparse}");
        // F(ξ*) = 0 (Eq 7 itself).
        for (tau, n) in [(1e6, 1_009.0), (3.3e14, 455_333.0), (50.0, 11.0)] {
            let xi = ml_foreign_offset(tau, n);
            let f = digamma(tau - xi + 1.0) - digamma(xi + 1.0) - (n - 1.0f64).ln();
            assert!(f.abs() < 1e-7, "τ={tau} n={n} ξ={xi} F={f}");
        }
    }
}
