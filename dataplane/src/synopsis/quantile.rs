//! Quantiles of the normal, χ² and Student's t distributions (statrs), for the synopses'
//! intervals and sizing: COLATE's Eq 19–20 and standard errors, LDA's mean interval at small S.

use statrs::distribution::{ChiSquared, ContinuousCDF, Normal, StudentsT};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_tables() {
        // COLATE spec §5.1: k for α = 0.90, 0.95, 0.99 (A = (1 + α)/2, k = Φ⁻¹((1 + A)/2)).
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
    }
}
