//! Coverage sizing (issue 19): the vLDA length k and the row width W that give an estimate to a
//! target fraction of the flows, from the load a point expects per epoch. The paper's sizing
//! ([`super::sizing`]) bounds collisions between *large* flows and ignores loss; at 5 % loss it
//! leaves most flows of a few dozen packets without a single clean cell (measured: 28–30 % of
//! the flows of ≥ 10 packets get a mean with k = 1).
//!
//! # The model
//!
//! A flow sends n packets in an epoch; each is lost (or crosses the epoch boundary, which
//! spoils a cell the same way) independently with probability ℓ. Every packet picks one of the
//! k offsets of the flow's vLDA, the same offset in every row (`offsets = "shared"`, Fig. 5).
//! The estimator's [`RowAgreement`](super::SelectionRule::RowAgreement) rule takes a mean only
//! from offsets whose cell holds exactly the same packets in two rows, which happens (short of
//! a 2⁻³² digest coincidence) only when no other flow put a packet there: a *clean* cell.
//!
//! Poissonising n (the offsets then fill independently), an offset holds at least one of the
//! flow's packets and none it lost with probability
//!
//! c(n) = e^(−nℓ/k) · (1 − e^(−n(1−ℓ)/k)).
//!
//! Another flow of m packets touches at most min(m, k) of a row's W cells, so N flows of m̄
//! packets on average leave a given cell free of other flows' packets with probability at
//! least f = e^(−N·min(m̄, k)/W) (Jensen: the bound is conservative). Rows hash flows
//! independently, so the offset is clean in at least two of the R rows with probability
//! h₂ = 1 − (1 − f)^R − R·f·(1 − f)^(R−1), and
//!
//! Q(n) = 1 − (1 − c(n) · h₂)^k
//!
//! is the probability that a flow of n packets gets a mean from its own packets only. c(n)
//! rises and then falls with n (a larger flow loses more packets per cell), so over flows of
//! [`MIN_FLOW_PACKETS`] to `n_max` packets the smallest Q is at one of the two ends.
//!
//! # The recipe
//!
//! For k = 1, 2, …, [`MAX_VLDA_LEN`]: the h₂ that makes min(Q(10), Q(n_max)) reach the target
//! follows in closed form, f by bisection, and W = N·min(m̄, k) / ln(1/f). W is also kept
//! above √(C(R,2)·N·(2k − 1) / ε) with ε = [`FALSE_CONFIRMATION`]: another flow whose window
//! overlaps the flow's in one row (probability (2k − 1)/W) at the same shift in a second row
//! (1/W) would repeat a mixed cell across two rows, so a mean taken as the flow's own would
//! hold its packets; this keeps that below ε per flow (the flow matrix saw it at 1 % of flows
//! without the floor). The layout with the
//! fewest cells wins (ties: the smallest k, which reads fewer cells per flow). None within
//! [`MAX_CELLS`]: refused, with the inputs named.
//!
//! Pure arithmetic; no state.

use super::config::{MAX_CELLS, MAX_ROWS, MAX_VLDA_LEN};
use crate::synopsis::{ConfigError, SynopsisKind};
use serde::{Deserialize, Serialize};

/// Smallest flow (packets per epoch) the coverage target is about: the issue's "flows with at
/// least 10 packets".
pub const MIN_FLOW_PACKETS: f64 = 10.0;

/// What a point expects per epoch and per direction, and what it asks of the sketch.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoverageTarget {
    /// N: flows per epoch (each direction of a segment has its own sketch).
    pub expected_flows: f64,
    /// ℓ: fraction of packets lost between the points, plus the fraction that crosses an epoch
    /// boundary (about mean delay / epoch length), in [0, 1).
    pub expected_loss: f64,
    /// m̄: mean packets per flow per epoch (sets the other flows' load on a cell).
    pub mean_flow_packets: f64,
    /// n_max: the largest flow (packets per epoch) the target must still hold for.
    pub max_flow_packets: f64,
    /// Probability that a flow of 10 to n_max packets gets a mean, in (0, 1).
    pub target: f64,
}

/// Largest probability, per flow, that another flow shares its cells at the same shift in two
/// rows (a mixed cell that row agreement would take for the flow's own).
pub const FALSE_CONFIRMATION: f64 = 1e-3;

/// Default ℓ when only `expected_flows` is given.
pub const DEFAULT_EXPECTED_LOSS: f64 = 0.01;
/// Default m̄.
pub const DEFAULT_MEAN_FLOW_PACKETS: f64 = 32.0;
/// Default n_max.
pub const DEFAULT_MAX_FLOW_PACKETS: f64 = 1000.0;
/// Default target coverage.
pub const DEFAULT_TARGET: f64 = 0.95;

impl CoverageTarget {
    /// A target for `expected_flows` flows per epoch with the other inputs at their defaults.
    pub fn new(expected_flows: f64) -> Self {
        Self {
            expected_flows,
            expected_loss: DEFAULT_EXPECTED_LOSS,
            mean_flow_packets: DEFAULT_MEAN_FLOW_PACKETS,
            max_flow_packets: DEFAULT_MAX_FLOW_PACKETS,
            target: DEFAULT_TARGET,
        }
    }

    fn check(&self) -> Result<(), ConfigError> {
        let t = self;
        if !(t.expected_flows.is_finite() && t.expected_flows >= 1.0) {
            return Err(refuse("expected_flows", format!("{} must be a finite count ≥ 1", t.expected_flows)));
        }
        if !(t.expected_loss >= 0.0 && t.expected_loss < 1.0) {
            return Err(refuse("expected_loss", format!("{} must be a fraction in [0, 1)", t.expected_loss)));
        }
        if !(t.mean_flow_packets.is_finite() && t.mean_flow_packets >= 1.0) {
            return Err(refuse(
                "mean_flow_packets",
                format!("{} must be a finite count ≥ 1", t.mean_flow_packets),
            ));
        }
        if !(t.max_flow_packets.is_finite() && t.max_flow_packets >= MIN_FLOW_PACKETS) {
            return Err(refuse(
                "max_flow_packets",
                format!("{} must be a finite count ≥ {MIN_FLOW_PACKETS}", t.max_flow_packets),
            ));
        }
        if !(t.target > 0.0 && t.target < 1.0) {
            return Err(refuse("target_coverage", format!("{} must be a probability in (0, 1)", t.target)));
        }
        Ok(())
    }

    /// f: probability that no other flow has a packet in a given cell of a row of `width`
    /// cells when vLDAs are k cells long, e^(−N·min(m̄, k)/W).
    pub fn free_of_others(&self, width: f64, k: u32) -> f64 {
        (-self.expected_flows * self.mean_flow_packets.min(f64::from(k)) / width).exp()
    }
}

fn refuse(field: &str, reason: String) -> ConfigError {
    ConfigError::new(SynopsisKind::Lds, field, reason)
}

/// c(n): probability that one offset of a k-cell vLDA holds at least one of the flow's n
/// packets and none it lost (loss ℓ, Poissonised).
pub fn clean_offset(packets: f64, loss: f64, k: u32) -> f64 {
    let a = packets / f64::from(k);
    (-a * loss).exp() * (1.0 - (-a * (1.0 - loss)).exp())
}

/// h₂: probability that at least two of R rows leave a cell free of other flows, each with
/// probability f independently.
pub fn two_rows_free(f: f64, rows: u32) -> f64 {
    let r = f64::from(rows);
    (1.0 - (1.0 - f).powf(r) - r * f * (1.0 - f).powf(r - 1.0)).clamp(0.0, 1.0)
}

/// Q(n): probability that a flow of `packets` packets gets a mean from its own packets only
/// (module docs), for R `rows` of `width` cells with vLDAs of k cells.
pub fn flow_coverage(t: &CoverageTarget, packets: f64, rows: u32, width: u32, k: u32) -> f64 {
    let c = clean_offset(packets, t.expected_loss, k);
    let h = two_rows_free(t.free_of_others(f64::from(width), k), rows);
    1.0 - (1.0 - c * h).powf(f64::from(k))
}

/// The smallest Q(n) over flows of 10 to n_max packets (at one of the two ends, module docs).
pub fn worst_coverage(t: &CoverageTarget, rows: u32, width: u32, k: u32) -> f64 {
    flow_coverage(t, MIN_FLOW_PACKETS, rows, width, k).min(flow_coverage(
        t,
        t.max_flow_packets,
        rows,
        width,
        k,
    ))
}

/// A layout chosen for a coverage target.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CoverageSizing {
    /// Rows R (as asked).
    pub rows: u32,
    /// Cells per row W.
    pub width: u32,
    /// vLDA length k.
    pub vlda_len: u32,
    /// The predicted coverage of the worst flow size, min(Q(10), Q(n_max)).
    pub predicted_coverage: f64,
    /// Paper-equivalent bytes of one sketch (16·R·W).
    pub bytes: u64,
}

/// Smallest width at which vLDAs of k cells reach the target, or `None` when no width can
/// (the flow's own losses alone leave too few clean offsets).
fn width_for(t: &CoverageTarget, rows: u32, k: u32) -> Option<f64> {
    let c = clean_offset(MIN_FLOW_PACKETS, t.expected_loss, k).min(clean_offset(
        t.max_flow_packets,
        t.expected_loss,
        k,
    ));
    // 1 − (1 − c·h₂)^k ≥ target  ⇔  h₂ ≥ (1 − (1 − target)^(1/k)) / c.
    let need = (1.0 - (1.0 - t.target).powf(1.0 / f64::from(k))) / c;
    if !(c > 0.0 && need < two_rows_free(1.0 - 1e-12, rows)) {
        return None;
    }
    // h₂ grows with f: bisect for the smallest f that gives `need`.
    let (mut lo, mut hi) = (0.0f64, 1.0 - 1e-12);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if two_rows_free(mid, rows) >= need { hi = mid } else { lo = mid }
    }
    Some(t.expected_flows * t.mean_flow_packets.min(f64::from(k)) / -hi.ln())
}

/// Rows R as given (at least 2: a clean cell is recognised by a second row repeating it), and
/// the vLDA length and width with the fewest cells that give a mean from its own packets to
/// the target fraction of flows of 10 to n_max packets (module docs). Refuses targets no k up
/// to [`MAX_VLDA_LEN`] reaches within [`MAX_CELLS`] cells, in one sentence naming the inputs.
pub fn for_coverage(t: &CoverageTarget, rows: u32) -> Result<CoverageSizing, ConfigError> {
    t.check()?;
    if !(2..=MAX_ROWS).contains(&rows) {
        return Err(refuse(
            "rows",
            format!("{rows} is outside 2..={MAX_ROWS} (coverage sizing confirms cells across two rows)"),
        ));
    }
    let max_width = (MAX_CELLS / u64::from(rows)) as f64;
    let mut best: Option<(f64, u32)> = None;
    for k in 1..=MAX_VLDA_LEN {
        let Some(w) = width_for(t, rows, k) else { continue };
        let pairs = f64::from(rows) * f64::from(rows - 1) / 2.0;
        let distinct = (pairs * t.expected_flows * f64::from(2 * k - 1) / FALSE_CONFIRMATION).sqrt();
        let w = w.max(distinct).max(f64::from(k)).ceil();
        if w <= max_width && best.is_none_or(|(bw, _)| w < bw) {
            best = Some((w, k));
        }
    }
    let Some((width, k)) = best else {
        return Err(refuse(
            "expected_flows",
            format!(
                "no layout of {rows} rows within {MAX_CELLS} cells gives a mean to {:.1} % of flows of \
                 {MIN_FLOW_PACKETS}–{} packets at {:.2} % loss with {} flows per epoch; lower \
                 max_flow_packets or expected_flows, or add rows",
                100.0 * t.target,
                t.max_flow_packets,
                100.0 * t.expected_loss,
                t.expected_flows
            ),
        ));
    };
    let width = width as u32;
    Ok(CoverageSizing {
        rows,
        width,
        vlda_len: k,
        predicted_coverage: worst_coverage(t, rows, width, k),
        bytes: u64::from(rows) * u64::from(width) * super::cell::CELL_BYTES as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_offset_and_two_rows_match_their_closed_forms() {
        // n = 10, ℓ = 0.05, k = 1: e^(−0.5)·(1 − e^(−9.5)).
        let c = clean_offset(10.0, 0.05, 1);
        assert!((c - (-0.5f64).exp() * (1.0 - (-9.5f64).exp())).abs() < 1e-12);
        // No loss: only emptiness matters.
        assert!((clean_offset(4.0, 0.0, 4) - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
        // Two of two rows: f²; two of four at f = 1/2: 1 − 1/16 − 4/16.
        assert!((two_rows_free(0.3, 2) - 0.09).abs() < 1e-12);
        assert!((two_rows_free(0.5, 4) - 11.0 / 16.0).abs() < 1e-12);
        let t = CoverageTarget::new(1000.0);
        assert!((t.free_of_others(4000.0, 2) - (-0.5f64).exp()).abs() < 1e-12);
        assert!((t.free_of_others(4000.0, 64) - (-8.0f64).exp()).abs() < 1e-12, "min(m̄ = 32, k)");
    }

    /// The formula against a direct simulation of its own model with a fixed n (multinomial
    /// offsets, not Poisson; independent loss; each row's cell free of other flows with
    /// probability f), seeded: the formula stays within 4σ of the simulation plus the
    /// Poissonisation gap, and never above it by more than the noise.
    #[test]
    fn coverage_formula_matches_a_simulation_of_its_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(19);
        let t = CoverageTarget { expected_loss: 0.05, ..CoverageTarget::new(2000.0) };
        let rows = 4u32;
        for (n, k, w) in [(10u32, 1u32, 20_000u32), (40, 4, 30_000), (200, 16, 300_000), (10, 8, 100_000)] {
            let f = t.free_of_others(f64::from(w), k);
            let trials = 20_000;
            let mut covered = 0u32;
            for _ in 0..trials {
                // Per offset: (delivered, lost), shared by the rows.
                let mut own = vec![(0u32, 0u32); k as usize];
                for _ in 0..n {
                    let cell = &mut own[rng.random_range(0..k) as usize];
                    if rng.random::<f64>() < t.expected_loss { cell.1 += 1 } else { cell.0 += 1 }
                }
                let ok = own.iter().any(|&(d, l)| {
                    let free = (0..rows).filter(|_| rng.random::<f64>() < f).count();
                    d > 0 && l == 0 && free >= 2
                });
                covered += u32::from(ok);
            }
            let sim = f64::from(covered) / f64::from(trials);
            let q = flow_coverage(&t, f64::from(n), rows, w, k);
            let sd = (q * (1.0 - q) / f64::from(trials)).sqrt().max(1e-4);
            assert!(q <= sim + 4.0 * sd && q >= sim - 4.0 * sd - 0.03, "n {n} k {k} w {w}: {q} vs {sim}");
        }
    }

    #[test]
    fn five_percent_loss_needs_a_longer_vlda_than_one() {
        let t =
            CoverageTarget { expected_loss: 0.05, max_flow_packets: 200.0, ..CoverageTarget::new(20_000.0) };
        let s = for_coverage(&t, 4).unwrap();
        assert!(s.vlda_len > 1, "{s:?}");
        assert!(s.predicted_coverage >= 0.95 - 1e-9, "{s:?}");
        // The smallest: one cell fewer per row misses the target.
        assert!(worst_coverage(&t, 4, s.width - 1, s.vlda_len) < 0.95, "{s:?}");
        // k = 1 at the old `width = flows` layout is far off.
        assert!(worst_coverage(&t, 4, 20_000, 1) < 0.5);
        // No loss needs no vLDA.
        let z = CoverageTarget { expected_loss: 0.0, ..t };
        assert_eq!(for_coverage(&z, 4).unwrap().vlda_len, 1);
    }

    #[test]
    fn unreachable_targets_are_refused_in_one_sentence() {
        let t = CoverageTarget {
            expected_loss: 0.5,
            max_flow_packets: 1e6,
            target: 0.999,
            ..CoverageTarget::new(1e6)
        };
        let e = for_coverage(&t, 2).unwrap_err();
        assert_eq!(e.field, "expected_flows");
        assert!(e.reason.contains("no layout") && !e.reason.contains('\n'), "{e}");
        for bad in [
            CoverageTarget { expected_flows: 0.0, ..CoverageTarget::new(1.0) },
            CoverageTarget { expected_loss: 1.0, ..CoverageTarget::new(10.0) },
            CoverageTarget { max_flow_packets: 5.0, ..CoverageTarget::new(10.0) },
            CoverageTarget { target: 1.0, ..CoverageTarget::new(10.0) },
            CoverageTarget { mean_flow_packets: f64::NAN, ..CoverageTarget::new(10.0) },
        ] {
            assert!(for_coverage(&bad, 4).is_err(), "{bad:?}");
        }
        assert_eq!(for_coverage(&CoverageTarget::new(10.0), 1).unwrap_err().field, "rows");
    }
}
