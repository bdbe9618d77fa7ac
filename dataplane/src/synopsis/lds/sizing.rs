//! The paper's analysis (§3, spec §7) and the sizing recipes built on it (spec §8): rows and
//! width from a target probability of large collisions, or the best layout for a memory
//! budget, plus the loss→sampling rules.
//!
//! Model: n flows per epoch, a fraction P of them "large" (more than x packets, P = Pr(T₁ > x)
//! under a fitted heavy tail), C total cells in R rows, vLDAs of k cells. A large flow survives
//! when at least one of its m = R·k locations has at most x/k colliding packets:
//! Q(m) ≈ 1 − (z·m)^m with z = nP/C. The approximation is optimistic for R > 1 (spec §7.4);
//! use it to size, not to promise. Pure arithmetic; no state.

use super::cell::CELL_BYTES;
use super::config::{LdsConfig, MAX_CELLS, MAX_ROWS, MAX_VLDA_LEN};
use crate::synopsis::{ConfigError, SynopsisKind};
use serde::Serialize;
use std::f64::consts::E;

/// Pr(T > x) of a Pareto law with scale `x_m` and shape `a` (1 below the scale).
pub fn pareto_tail(x: f64, x_m: f64, a: f64) -> f64 {
    if x <= x_m { 1.0 } else { (x / x_m).powf(-a) }
}

/// Offered load of large flows per cell, z = n·P / C.
pub fn load(flows: f64, large_tail: f64, cells: f64) -> f64 {
    flows * large_tail / cells
}

/// One row (SDS, §7.1): probability of only small collisions, Q ≈ 1 − n·P/C = 1 − z.
pub fn q_one_row(z: f64) -> f64 {
    (1.0 - z).max(0.0)
}

/// m locations sharing C cells (§7.2–7.3): q(z, m) = 1 − (z·m)^m, clamped to [0, 1]. With
/// m = R it is the multi-row SDS; with m = R·k the LDS.
pub fn q_locations(z: f64, m: f64) -> f64 {
    (1.0 - (z * m).powf(m)).clamp(0.0, 1.0)
}

/// LDS survival (§7.3): Q(Rk) = 1 − (n·k·R·P / C)^(R·k).
pub fn q_lds(flows: f64, large_tail: f64, cells: f64, rows: u32, k: u32) -> f64 {
    q_locations(load(flows, large_tail, cells), f64::from(rows) * f64::from(k))
}

/// The number of locations that maximises q(z, m) for fixed z: m* = 1/(e·z).
pub fn optimal_locations(z: f64) -> f64 {
    1.0 / (E * z)
}

/// The best q over m ≥ 1 (continuous m): 1 − z for z > 1/e, else 1 − e^(−1/(e·z)).
pub fn q_best(z: f64) -> f64 {
    if z > 1.0 / E { q_one_row(z) } else { 1.0 - (-1.0 / (E * z)).exp() }
}

/// Rows for a target probability ε of large collisions with vLDAs of k cells:
/// round(max(1, −ln ε / k)) (§3.2 recipe).
pub fn rows_for(epsilon: f64, k: u32) -> u32 {
    (-epsilon.ln() / f64::from(k)).max(1.0).round() as u32
}

/// Largest load that keeps large collisions below ε: z_max = −1/(e·ln ε).
pub fn z_max(epsilon: f64) -> f64 {
    -1.0 / (E * epsilon.ln())
}

/// Cells needed for ε at the optimum m = ln(1/ε): C ≥ e·n·P·ln(1/ε).
pub fn cells_for(flows: f64, large_tail: f64, epsilon: f64) -> f64 {
    E * flows * large_tail * (1.0 / epsilon).ln()
}

/// How much more load R > 1 rows carry than one row at the same ε: −1/(e·ε·ln ε).
pub fn row_gain(epsilon: f64) -> f64 {
    -1.0 / (E * epsilon * epsilon.ln())
}

/// Expected survivable flows in one row: n·P·(1 − n·P/C).
pub fn survivable_flows(flows: f64, large_tail: f64, cells: f64) -> f64 {
    let large = flows * large_tail;
    large * (1.0 - large / cells)
}

/// The flow count that maximises survivable flows in one row, n = C/(2P), and that maximum,
/// C/4.
pub fn max_survivable(cells: f64, large_tail: f64) -> (f64, f64) {
    (cells / (2.0 * large_tail), cells / 4.0)
}

/// Sampling rate for a vLDA of k cells to see about one loss per cell when a flow loses
/// `losses` packets: p = k / L, at most 1 (spec §8 item 3; the paper's "L/k" is inverted).
pub fn sampling_for_losses(losses: f64, k: u32) -> f64 {
    (f64::from(k) / losses).min(1.0)
}

/// Losses per flow a row sampling at `p` tolerates with vLDAs of k cells: k / p.
pub fn tolerated_losses(p: f64, k: u32) -> f64 {
    f64::from(k) / p
}

/// Paper-equivalent bytes of `cells` cells (16 bytes each).
pub fn sketch_bytes(cells: u64) -> u64 {
    cells * CELL_BYTES as u64
}

/// The traffic a sketch is sized for.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FlowPopulation {
    /// Expected flows per epoch, n (spec P23: per epoch, not per day).
    pub flows: f64,
    /// P = Pr(T₁ > x): the fraction of flows above the "large" threshold x.
    pub large_tail: f64,
}

/// How width relates to k.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum WidthConvention {
    /// The analysis as written: C_tot cells in R rows already account for k.
    Analysis,
    /// The paper's loss experiment: size as for k = 1, then make each row k times wider.
    PaperWidthTimesK,
}

/// A sketch layout with the analysis' prediction for it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Sizing {
    /// Rows R.
    pub rows: u32,
    /// Cells per row W.
    pub width: u32,
    /// vLDA length k.
    pub vlda_len: u32,
    /// Paper-equivalent bytes of one sketch (16·R·W).
    pub bytes: u64,
    /// Load z = n·P / (R·W).
    pub load: f64,
    /// Predicted probability that a large flow survives, 1 − (z·R·k)^(R·k) (optimistic for
    /// R > 1, spec §7.4).
    pub predicted_survival: f64,
}

impl Sizing {
    /// A single-bank config of this shape (other fields at their defaults).
    pub fn config(&self, seed: u64) -> LdsConfig {
        LdsConfig { vlda_len: self.vlda_len, seed, ..LdsConfig::new(self.rows, self.width) }
    }

    fn new(pop: &FlowPopulation, rows: u32, width: u32, k: u32) -> Self {
        let cells = f64::from(rows) * f64::from(width);
        Self {
            rows,
            width,
            vlda_len: k,
            bytes: sketch_bytes(u64::from(rows) * u64::from(width)),
            load: load(pop.flows, pop.large_tail, cells),
            predicted_survival: q_lds(pop.flows, pop.large_tail, cells, rows, k),
        }
    }
}

fn refuse(field: &str, reason: String) -> ConfigError {
    ConfigError::new(SynopsisKind::Lds, format!("sizing.{field}"), reason)
}

fn check_inputs(pop: &FlowPopulation, k: u32) -> Result<(), ConfigError> {
    if !(pop.flows.is_finite() && pop.flows >= 1.0) {
        return Err(refuse("flows", format!("{} must be a finite count ≥ 1", pop.flows)));
    }
    if !(pop.large_tail > 0.0 && pop.large_tail <= 1.0) {
        return Err(refuse("large_tail", format!("{} must be a probability in (0, 1]", pop.large_tail)));
    }
    if k == 0 || k > MAX_VLDA_LEN {
        return Err(refuse("vlda_len", format!("{k} must be in 1..={MAX_VLDA_LEN}")));
    }
    Ok(())
}

fn checked_shape(rows: u32, cells_needed: f64, what: &str) -> Result<u32, ConfigError> {
    let width = (cells_needed / f64::from(rows)).ceil();
    let total = width * f64::from(rows);
    if !total.is_finite() || total > MAX_CELLS as f64 || width > f64::from(u32::MAX) {
        return Err(refuse(
            what,
            format!(
                "needs {total:.3e} cells, above the limit of {MAX_CELLS} ({} bytes)",
                sketch_bytes(MAX_CELLS)
            ),
        ));
    }
    Ok(width.max(1.0) as u32)
}

/// Rows and width so a large flow meets only large collisions with probability at most
/// `epsilon` (spec §8 recipe 1): R = round(max(1, ln(1/ε)/k)), m = R·k, and the smallest C
/// with (n·m·P/C)^m ≤ ε, i.e. C = n·m·P / ε^(1/m) (= e·n·P·ln(1/ε) when m = ln(1/ε)).
/// Refuses ε outside (0, 1), populations that make no sense, more rows than the sketch
/// allows, and layouts above the cell limit.
pub fn for_accuracy(
    pop: &FlowPopulation,
    epsilon: f64,
    k: u32,
    convention: WidthConvention,
) -> Result<Sizing, ConfigError> {
    check_inputs(pop, k)?;
    if !(epsilon > 0.0 && epsilon < 1.0) {
        return Err(refuse("epsilon", format!("{epsilon} must be a probability in (0, 1)")));
    }
    let analysis_k = match convention {
        WidthConvention::Analysis => k,
        WidthConvention::PaperWidthTimesK => 1,
    };
    let rows = rows_for(epsilon, analysis_k);
    if rows > MAX_ROWS {
        return Err(refuse(
            "epsilon",
            format!("ε = {epsilon:e} needs {rows} rows, above the limit of {MAX_ROWS}; raise ε or k"),
        ));
    }
    let m = f64::from(rows * analysis_k);
    let cells = pop.flows * m * pop.large_tail / epsilon.powf(1.0 / m);
    let mut width = checked_shape(rows, cells, "epsilon")?;
    if convention == WidthConvention::PaperWidthTimesK {
        width = checked_shape(rows, f64::from(width) * f64::from(rows) * f64::from(k), "epsilon")?;
    }
    if width < k {
        width = k;
    }
    Ok(Sizing::new(pop, rows, width, k))
}

/// The layout that maximises predicted survival within `budget_bytes` (spec §8 recipe 2):
/// C = budget/16, z = n·P/C, R = round(max(1, m*/k)) with m* = 1/(e·z) (R = 1 when
/// z > 1/e). Refuses budgets below one row of k cells and loads at which the analysis predicts
/// nothing survives (z·R·k ≥ 1).
pub fn for_memory(pop: &FlowPopulation, budget_bytes: u64, k: u32) -> Result<Sizing, ConfigError> {
    check_inputs(pop, k)?;
    let cells = (budget_bytes / CELL_BYTES as u64).min(MAX_CELLS);
    if cells < u64::from(k) {
        return Err(refuse(
            "budget_bytes",
            format!("{budget_bytes} bytes hold {cells} cells, fewer than one vLDA of {k}"),
        ));
    }
    let z = load(pop.flows, pop.large_tail, cells as f64);
    let rows = if z > 1.0 / E { 1.0 } else { (optimal_locations(z) / f64::from(k)).max(1.0).round() };
    let rows = (rows as u32).clamp(1, MAX_ROWS);
    let width = u32::try_from(cells / u64::from(rows)).unwrap_or(u32::MAX);
    if width < k {
        return Err(refuse(
            "budget_bytes",
            format!("{budget_bytes} bytes give rows of {width} cells, shorter than k = {k}"),
        ));
    }
    let sizing = Sizing::new(pop, rows, width, k);
    if sizing.load * f64::from(rows) * f64::from(k) >= 1.0 {
        let needed = pop.flows * pop.large_tail * f64::from(k);
        return Err(refuse(
            "budget_bytes",
            format!(
                "too small for {} flows: z·R·k = {:.2} ≥ 1, the analysis predicts no survivable flow; \
                 give more than {:.0} bytes",
                pop.flows,
                sizing.load * f64::from(rows) * f64::from(k),
                needed * CELL_BYTES as f64
            ),
        ));
    }
    Ok(sizing)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Spec §11.6 "exact / closed-form" claims, tolerance 1e-3 unless the paper prints more.
    const TOL: f64 = 1e-3;

    #[test]
    fn one_row_example() {
        // x = 50, n/C = 2, P = 50^-0.8 = 0.04375: Q ≈ 1 − 2·P = 0.9125 ≈ "91%".
        let p = pareto_tail(50.0, 1.0, 0.8);
        assert!((p - 0.04375).abs() < 1e-4, "{p}");
        assert!((q_one_row(load(2.0, 0.04375, 1.0)) - 0.9125).abs() < TOL);
        assert!((q_locations(0.0875, 1.0) - 0.9125).abs() < TOL);
    }

    #[test]
    fn multi_row_example() {
        // R* = 1/(e·0.0875) = 4.204 → 4; q(0.0875, 4) = 1 − 0.35^4 = 0.98499.
        assert!((optimal_locations(0.0875) - 4.204).abs() < TOL);
        assert_eq!(optimal_locations(0.0875).round(), 4.0);
        assert!((q_locations(0.0875, 4.0) - 0.98499).abs() < 1e-5);
        for (r, q) in [(2.0, 0.9694), (3.0, 0.9819), (5.0, 0.9840)] {
            assert!((q_locations(0.0875, r) - q).abs() < 1e-4, "R = {r}");
        }
        // ε = 0.015 ⇒ −ln ε = 4.20 rows; R = round(max(1, −ln ε / k)).
        assert!((-(0.015f64).ln() - 4.20).abs() < 0.01);
        assert_eq!(rows_for(0.015, 1), 4);
        assert_eq!(rows_for(0.015, 5), 1);
        assert_eq!(rows_for(0.015, 2), 2);
        assert_eq!(rows_for(0.5, 1), 1);
    }

    #[test]
    fn capacity_and_epsilon_formulas() {
        // Survivable flows n·P(1 − n·P/C) peak at n = C/(2P) with value C/4.
        let (c, p) = (70_000.0, 0.04375);
        let (n_star, best) = max_survivable(c, p);
        assert!((n_star - c / (2.0 * p)).abs() < 1e-9);
        assert!((best - c / 4.0).abs() < 1e-9);
        assert!((survivable_flows(n_star, p, c) - best).abs() < 1e-6);
        assert!(survivable_flows(n_star * 1.1, p, c) < best && survivable_flows(n_star * 0.9, p, c) < best);
        // z_max(ε) = −1/(e ln ε), R(ε) = −ln ε, gain = −1/(e ε ln ε).
        for eps in [0.001, 0.015, 0.1, 0.3] {
            assert!((z_max(eps) + 1.0 / (E * eps.ln())).abs() < 1e-12);
            assert!((row_gain(eps) + 1.0 / (E * eps * eps.ln())).abs() < 1e-9);
            assert!(row_gain(eps) > 1.0, "R > 1 carries more load for ε < 1/e");
            // At z = z_max the best q is exactly 1 − ε.
            assert!((q_best(z_max(eps)) - (1.0 - eps)).abs() < 1e-12);
        }
        // q_best is 1 − z above 1/e.
        assert!((q_best(0.5) - 0.5).abs() < 1e-12);
        // LDS: Q(Rk) = 1 − (n·k·R·P/C)^(Rk).
        let q = q_lds(146_000.0, 0.04375, 350_000.0, 4, 5);
        let direct = 1.0 - (146_000.0f64 * 5.0 * 4.0 * 0.04375 / 350_000.0).powf(20.0);
        assert!((q - direct).abs() < 1e-12);
        // The paper's consistency check: C ≥ e·n·P·ln(1/ε) ≈ 72,900 cells for ε = 0.015.
        assert!((cells_for(146_000.0, 0.04375, 0.015) - 72_900.0).abs() < 100.0);
    }

    #[test]
    fn sampling_rules() {
        // p = k/L: (L = 500, k = 5) gives 0.01; tolerated k/p for p ∈ {0.1, 0.5, 1} = {50, 10, 5}.
        assert!((sampling_for_losses(500.0, 5) - 0.01).abs() < 1e-12);
        assert_eq!(sampling_for_losses(2.0, 5), 1.0);
        for (p, l) in [(0.01, 500.0), (0.1, 50.0), (0.5, 10.0), (1.0, 5.0)] {
            assert!((tolerated_losses(p, 5) - l).abs() < 1e-9);
        }
    }

    #[test]
    fn memory_figures() {
        // 40,000 cells = 625 KiB exactly; 70,000 ≈ 1.07 MiB; 100,000 ≈ 1.53 MiB.
        assert_eq!(sketch_bytes(40_000), 625 * 1024);
        assert!((sketch_bytes(70_000) as f64 / 1048576.0 - 1.07).abs() < 0.005);
        assert!((sketch_bytes(100_000) as f64 / 1048576.0 - 1.53).abs() < 0.005);
        assert_eq!(LdsConfig::new(4, 17_500).sketch_bytes(), 1_120_000);
    }

    #[test]
    fn accuracy_target_gives_the_papers_layout() {
        let pop = FlowPopulation { flows: 146_000.0, large_tail: 0.04375 };
        let s = for_accuracy(&pop, 0.015, 1, WidthConvention::Analysis).unwrap();
        assert_eq!(s.rows, 4);
        // 146000·4·0.04375 / 0.015^(1/4) = 73,007.6 cells → 18,252 per row (the paper used 17,500).
        assert_eq!(s.width, 18_252);
        assert!((s.predicted_survival - 0.985).abs() < 1e-3, "{s:?}");
        crate::synopsis::SynopsisConfig::validate(&s.config(1)).unwrap();
        // k = 5 under the paper's convention: the k = 1 rows, each five times wider.
        let p = for_accuracy(&pop, 0.015, 5, WidthConvention::PaperWidthTimesK).unwrap();
        assert_eq!((p.rows, p.vlda_len), (4, 5));
        assert_eq!(p.width, 5 * s.width);
        // Under the analysis proper, k = 5 means one row of locations.
        let a = for_accuracy(&pop, 0.015, 5, WidthConvention::Analysis).unwrap();
        assert_eq!(a.rows, 1);
        assert!(a.predicted_survival >= 0.985 - 1e-9);
    }

    #[test]
    fn memory_budget_gives_the_best_rows() {
        let pop = FlowPopulation { flows: 146_000.0, large_tail: 0.04375 };
        let s = for_memory(&pop, 1_120_000, 1).unwrap();
        // z = 146000·0.04375/70000 = 0.09125 → m* = 4.03 → R = 4, W = 17,500.
        assert_eq!((s.rows, s.width), (4, 17_500));
        assert!((s.load - 0.09125).abs() < 1e-9);
        assert!((s.predicted_survival - (1.0 - (0.365f64).powi(4))).abs() < 1e-9);
        // A heavier load falls back to one row.
        let one = for_memory(&pop, 16 * 12_000, 1).unwrap();
        assert_eq!(one.rows, 1);
        assert!((one.predicted_survival - (1.0 - one.load)).abs() < 1e-12);
    }

    #[test]
    fn infeasible_targets_are_refused_clearly() {
        let pop = FlowPopulation { flows: 146_000.0, large_tail: 0.04375 };
        for eps in [0.0, 1.0, -0.1, f64::NAN] {
            let e = for_accuracy(&pop, eps, 1, WidthConvention::Analysis).unwrap_err();
            assert_eq!(e.field, "sizing.epsilon", "{eps}");
        }
        let e = for_accuracy(&pop, 1e-40, 1, WidthConvention::Analysis).unwrap_err();
        assert!(e.reason.contains("rows"), "{e}");
        let huge = FlowPopulation { flows: 1e12, large_tail: 0.5 };
        let e = for_accuracy(&huge, 0.01, 1, WidthConvention::Analysis).unwrap_err();
        assert!(e.reason.contains("limit"), "{e}");
        // 146k flows with 6,000 cells: z = 1.06, nothing survives.
        let e = for_memory(&pop, 16 * 6_000, 1).unwrap_err();
        assert!(e.reason.contains("no survivable flow"), "{e}");
        assert_eq!(for_memory(&pop, 10, 1).unwrap_err().field, "sizing.budget_bytes");
        let bad = FlowPopulation { flows: 0.0, large_tail: 0.1 };
        assert_eq!(for_memory(&bad, 1 << 20, 1).unwrap_err().field, "sizing.flows");
        let bad = FlowPopulation { flows: 10.0, large_tail: 0.0 };
        assert_eq!(for_memory(&bad, 1 << 20, 1).unwrap_err().field, "sizing.large_tail");
        assert_eq!(for_memory(&pop, 1 << 20, 0).unwrap_err().field, "sizing.vlda_len");
    }
}
