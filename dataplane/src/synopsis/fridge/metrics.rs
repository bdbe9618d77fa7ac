//! The paper's accuracy metric (spec §6.1): the relative percentile error
//! E(q) = |log2(Q̂(q)/Q(q))|, the horizontal distance between the estimated and true CDFs on a
//! log delay axis, at q = 0.50, 0.95, 0.99, and its maximum over q ∈ [0.05, 0.95] on a grid of
//! step 10⁻⁴ (9001 points; interior maxima are possible, so knots alone are not enough).
//! The paper prints these as percentages: 0.08 = "8 %". Pure functions, no I/O; used by the
//! tests and the reproduction, never on the packet path.

use super::distribution::Quantiles;
use serde::Serialize;

/// |log2(estimate/truth)|; +∞ when either is not positive (no meaningful ratio).
pub fn log2_error(estimate: f64, truth: f64) -> f64 {
    if estimate > 0.0 && truth > 0.0 && estimate.is_finite() && truth.is_finite() {
        (estimate / truth).log2().abs()
    } else {
        f64::INFINITY
    }
}

/// The paper's error figures for one estimate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct QuantileErrors {
    /// E(0.50).
    pub e50: f64,
    /// E(0.95).
    pub e95: f64,
    /// E(0.99).
    pub e99: f64,
    /// max E(q) over q ∈ [0.05, 0.95], step 10⁻⁴.
    pub e_max: f64,
}

/// Grid of the maximum: 9001 points from 0.05 to 0.95.
pub const E_MAX_POINTS: usize = 9001;

/// E(q) at 0.5, 0.95, 0.99 and E_max of `estimate` against `truth`.
pub fn quantile_errors(estimate: &impl Quantiles, truth: &impl Quantiles) -> QuantileErrors {
    let e = |q: f64| log2_error(estimate.quantile(q), truth.quantile(q));
    let e_max = (0..E_MAX_POINTS).map(|i| e(0.05 + i as f64 * 1e-4)).fold(0.0, f64::max);
    QuantileErrors { e50: e(0.5), e95: e(0.95), e99: e(0.99), e_max }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::fridge::distribution::WeightedSamples;

    #[test]
    fn doubling_every_delay_is_an_error_of_one() {
        let truth = WeightedSamples::unit((1..=1000).map(f64::from)).unwrap();
        let doubled = WeightedSamples::unit((1..=1000).map(|d| 2.0 * f64::from(d))).unwrap();
        let e = quantile_errors(&doubled, &truth);
        for v in [e.e50, e.e95, e.e99, e.e_max] {
            assert!((v - 1.0).abs() < 1e-9, "{e:?}");
        }
        let same = quantile_errors(&truth, &truth);
        assert_eq!(same.e_max, 0.0);
        assert_eq!(log2_error(0.0, 1.0), f64::INFINITY);
    }

    #[test]
    fn interior_maximum_is_found() {
        // Estimate equal to the truth except one knot in the middle of [0.05, 0.95] is moved:
        // the error peaks at q = 0.5 exactly, between the grid's neighbours of the old knots.
        let truth = WeightedSamples::unit([1.0, 2.0, 4.0]).unwrap();
        let est = WeightedSamples::unit([1.0, 3.0, 4.0]).unwrap();
        // Truth F knots: 1/3, 2/3, 1 at t = 1, 2, 4. At q = 0.5: truth 1.5, estimate 2.0.
        let e = quantile_errors(&est, &truth);
        assert!((e.e50 - (2.0f64 / 1.5).log2()).abs() < 1e-12);
        // The maximum is at q = 2/3: log2(3/2).
        assert!((e.e_max - 1.5f64.log2()).abs() < 1e-3, "{e:?}");
    }
}
