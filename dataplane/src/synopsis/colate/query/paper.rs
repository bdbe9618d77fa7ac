//! The paper's formulas (Eq 4, the pairing counts, the virtual repetitions of Eq 9–10, the
//! a-priori model of Eq 12/21) as pure functions.

use super::PaperModel;
use crate::synopsis::estimate::{ConfidenceInterval, Estimate};
use rand::seq::SliceRandom;

/// Eq 4 from exact sums: (n·Σ S\[j\] − m·t)/(n − m), in i128 until the division.
pub fn eq4(subvector_sum: u128, total: u128, n: u64, m: u64) -> f64 {
    let num = (n as i128)
        .checked_mul(subvector_sum as i128)
        .zip((m as i128).checked_mul(total as i128))
        .and_then(|(a, b)| a.checked_sub(b));
    num.map_or(f64::NAN, |v| v as f64 / (n as f64 - m as f64))
}

/// The paper's count of pair sequences ∏_{i=1..m/2} C(m − 2(i − 1), 2) = m!/2^{m/2} (§4.2.2;
/// 2.38·10¹⁵ for m = 20). Many give the same value: see [`distinct_pairings`].
pub fn ordered_pairing_sequences(m: u32) -> f64 {
    (1..=m).map(f64::from).product::<f64>() / 2f64.powi((m / 2) as i32)
}

/// The number of distinct pairings (perfect matchings) of m cells, (m − 1)!! (654 729 075 for
/// m = 20): the only values a pairing can give.
pub fn distinct_pairings(m: u32) -> f64 {
    (1..m).step_by(2).map(f64::from).product()
}

/// m!/n^m: the paper's chance that two flows get the same subvector (§3.1; 2.4·10⁻⁶² for
/// n = 10 000, m = 20).
pub fn same_subvector_probability(n: u32, m: u32) -> f64 {
    (1..=m).map(|i| i as f64 / n as f64).product()
}

/// The exact average over all pairings of Σ_l (D_{Q\[2l\]} − D_{Q\[2l−1\]})²: each unordered pair
/// {a, b} is paired with probability 1/(m − 1), so the average is
/// Σ_{a<b} (D_a − D_b)²/(m − 1) = m/(m − 1)·Σ_j (D_j − D̄)² (spec §4.6).
pub fn second_moment_exact(d: &[f64]) -> f64 {
    let m = d.len() as f64;
    if d.len() < 2 {
        return 0.0;
    }
    let mean = d.iter().sum::<f64>() / m;
    m / (m - 1.0) * d.iter().map(|x| (x - mean).powi(2)).sum::<f64>()
}

/// The paper's virtual repetitions (Eq 9, 10, steps 4–5): γ uniformly random permutations Q,
/// each giving Σ_l (v_R\[l\] − v_S\[l\])² = Σ_l (D_{Q\[2l\]} − D_{Q\[2l−1\]})², averaged. An odd
/// trailing element (odd m never passes validation) is ignored.
pub fn second_moment_pairings(d: &[f64], gamma: u32, seed: u64) -> f64 {
    if d.len() < 2 || gamma == 0 {
        return 0.0;
    }
    // PCG-64 as the simulations use: the pairings are fixed for a seed on every platform.
    let mut rng = <rand_pcg::Pcg64Mcg as rand::SeedableRng>::seed_from_u64(seed);
    let mut q: Vec<usize> = (0..d.len()).collect();
    let mut acc = 0.0;
    for _ in 0..gamma {
        q.shuffle(&mut rng);
        acc += q.chunks_exact(2).map(|p| (d[p[1]] - d[p[0]]).powi(2)).sum::<f64>();
    }
    acc / gamma as f64
}

pub(super) fn with_interval(mut e: Estimate, level: f64, low: f64, high: f64) -> Estimate {
    if low.is_finite() && high.is_finite() {
        e.interval = Some(ConfidenceInterval { level, low, high });
    }
    e
}

/// Corrected Eq 21 at the flow's own t̃ with the epoch sum in place of T, per point, and the
/// β it implies through Eq 12.
pub(super) fn paper_model(
    t_s: f64,
    t_r: f64,
    total_s: f64,
    total_r: f64,
    n: f64,
    m: f64,
    k: f64,
) -> Option<PaperModel> {
    let b = |t: f64, total: f64| {
        let var = (t / m) * (1.0 - 1.0 / m) + ((total - t) / n) * (1.0 - 1.0 / n);
        (k * k * n * n * m / ((n - m) * (n - m)) * var).sqrt() / t
    };
    let (b_s, b_r) = (b(t_s, total_s), b(t_r, total_r));
    let implied_beta = (b_s.max(b_r) * (t_r + t_s) / (t_r - t_s)).abs();
    (b_s.is_finite() && b_r.is_finite() && implied_beta.is_finite()).then_some(PaperModel {
        b_s,
        b_r,
        implied_beta,
    })
}
