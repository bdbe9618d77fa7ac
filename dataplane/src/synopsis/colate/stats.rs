//! The special function COLATE's estimators use (statrs) and the root of Eq 7. The
//! distributions' quantiles are shared with the other synopses: [`crate::synopsis::quantile`].

/// ψ⁽⁰⁾(x), the digamma function.
pub fn digamma(x: f64) -> f64 {
    statrs::function::gamma::digamma(x)
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
    fn digamma_at_one_is_minus_euler_gamma() {
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
