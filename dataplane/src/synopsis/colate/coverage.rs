//! Coverage sizing of m (issue 19, W12): the cells per flow that leave a flow enough usable
//! cells for a count mean at the load a segment is configured for.
//!
//! # Why m must grow with the load
//!
//! The count mean uses a flow's cells whose packet counts agree at both points and gives no
//! mean when fewer than m/2 are usable ([`super::query`]). A packet of the flow that one point
//! puts in the query window and the other does not spoils the one cell it lands in: a packet
//! lost between the points, or one in flight across either edge of the window (sent before the
//! window starts and received in it, or sent in it and received after it ends). A flow that
//! sends r packets per second through a path of one-way delay D keeps r·D packets in flight at
//! any instant, so a window of length W spoils
//!
//! X = 2·r·D + ℓ·r·W
//!
//! of its packets (both edges, plus the losses ℓ of its r·W packets). Each lands in one of the
//! flow's m cells, uniformly and independently (the per-packet hash j). The flow gets a mean
//! when at least m/2 cells received none of them.
//!
//! # The occupancy probability
//!
//! With X packets thrown into m cells, let K be the number of cells hit. K is a Markov chain in
//! the packets: a packet hits an already-hit cell with probability K/m and a new one with
//! probability (m − K)/m. [`usable_probability`] runs that chain exactly for K ≤ m/2 (K never
//! decreases, so probability mass that passes m/2 is lost for good) and returns
//! P(K ≤ m/2) = P(at least m/2 cells stay clean), in O(X·m/2) steps. Where that is too many
//! steps ([`EXACT_STEPS`]), it returns a proven lower bound instead: the indicators of the
//! empty cells are negatively associated (Dubhashi and Ranjan, 1998), so Chernoff's lower tail
//! holds for their sum E with mean μ = m·(1 − 1/m)^X:
//! P(E ≤ (1 − δ)·μ) ≤ exp(−δ²·μ/2), hence P(E ≥ m/2) ≥ 1 − exp(−δ²·μ/2) with
//! (1 − δ)·μ = m/2 − 1. A bound below the truth can only make m larger, never the coverage lower.
//!
//! # The recipe
//!
//! m is the smallest even m ≥ [`DEFAULT_CELLS_PER_FLOW`] with P ≥ the target for X = ⌈2·r·D +
//! ℓ·r·W⌉ (r and D the largest flow rate and delay the operator expects, so every smaller flow
//! or shorter delay does at least as well). None up to [`MAX_CELLS_PER_FLOW`]: refused, naming
//! the inputs.
//!
//! # What it does not model, and the price
//!
//! Foreign packets lost or in flight also spoil a cell they share with the flow. Per cell they
//! are (all such packets)/n, a fraction of a percent in a vector sized for the traffic (n ≫
//! packets in flight); in a crowded vector they add to X. The price of a larger m is the foreign
//! noise: a flow's m cells collect m times the per-cell foreign noise, so the count mean's
//! standard error from foreign noise grows as √m at a fixed n. Keeping it means growing n (the
//! memory) with m. The query's own standard error and interval account for it either way.
//!
//! Pure arithmetic; no state.

use super::config::{ColateConfig, JMode, MAX_CELLS_PER_FLOW};
use crate::synopsis::{ConfigError, SynopsisKind};
use serde::{Deserialize, Serialize};

/// m when neither `cells_per_flow` nor a load is given, and the smallest m the sizing returns:
/// the paper's typical 20 (its std-dev's accuracy is bounded by m, so the sizing never goes
/// below it).
pub const DEFAULT_CELLS_PER_FLOW: u32 = 20;

/// Default ℓ: loss between the points, a fraction.
pub const DEFAULT_EXPECTED_LOSS: f64 = 0.01;
/// Default target: the probability that the largest, slowest flow still gets a mean.
pub const DEFAULT_TARGET: f64 = 0.95;
/// Default query window W in ms: the appliance's default epoch length (`[epochs] length_ms`)
/// times the collector's default `[colate] windows` = 1.
pub const DEFAULT_WINDOW_MS: f64 = 1000.0;

/// Chain steps (X·m/2) above which [`usable_probability`] uses its Chernoff bound rather than
/// the exact chain: about 0.1 s in a debug build.
pub const EXACT_STEPS: u64 = 20_000_000;

/// The load the sizing is for: what an operator can measure or knows of the segment.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoverageTarget {
    /// D: the largest one-way delay between the points (propagation plus queueing), µs; the
    /// queue's p99 delay is a good value.
    pub max_delay_us: f64,
    /// r: the largest packet rate of one flow in one direction, packets per second; the p99
    /// of the flows' rates is a good value.
    pub max_flow_pps: f64,
    /// ℓ: the fraction of packets lost between the points, in [0, 1).
    pub expected_loss: f64,
    /// W: the query window in ms, the point's epoch length times the collector's
    /// `[colate] windows`.
    pub window_ms: f64,
    /// The probability, in (0, 1), that a flow at rate r and delay D gets a mean.
    pub target: f64,
}

/// What [`for_coverage`] derived.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CoverageSizing {
    /// The request.
    pub target: CoverageTarget,
    /// X: the flow's packets spoiled per window (both edges plus losses), rounded up.
    pub spoiled_packets: u64,
    /// m.
    pub cells_per_flow: u32,
    /// P(at least m/2 of the m cells stay clean | X packets), exact or its lower bound.
    pub probability: f64,
    /// Whether [`Self::probability`] is exact (false: the Chernoff lower bound).
    pub exact: bool,
}

impl CoverageTarget {
    /// X = 2·r·D + ℓ·r·W, real-valued.
    pub fn spoiled_packets(&self) -> f64 {
        let r = self.max_flow_pps;
        2.0 * r * self.max_delay_us * 1e-6 + self.expected_loss * r * self.window_ms * 1e-3
    }

    fn check(&self) -> Result<(), ConfigError> {
        let t = self;
        if !(t.max_delay_us.is_finite() && t.max_delay_us >= 0.0) {
            return Err(refuse("max_delay_us", format!("{} must be a finite delay ≥ 0 µs", t.max_delay_us)));
        }
        if !(t.max_flow_pps.is_finite() && t.max_flow_pps > 0.0) {
            return Err(refuse("max_flow_pps", format!("{} must be a finite rate > 0", t.max_flow_pps)));
        }
        if !(t.expected_loss >= 0.0 && t.expected_loss < 1.0) {
            return Err(refuse("expected_loss", format!("{} must be a fraction in [0, 1)", t.expected_loss)));
        }
        if !(t.window_ms.is_finite() && t.window_ms > 0.0) {
            return Err(refuse("window_ms", format!("{} must be a finite length > 0 ms", t.window_ms)));
        }
        if !(t.target > 0.0 && t.target < 1.0) {
            return Err(refuse("target_coverage", format!("{} must be a probability in (0, 1)", t.target)));
        }
        // A packet at the largest delay then spans a whole window: most of a flow's packets
        // cross an edge, and no m gives it usable cells (measured: at a p99 delay of 82 ms in
        // 100-ms windows 13 % of the flows had none of their packets in a usable cell).
        if t.max_delay_us * 1e-3 >= t.window_ms {
            return Err(refuse(
                "window_ms",
                format!(
                    "{} ms is not longer than max_delay_us = {} µs: most packets would cross the window's \
                     edges; query longer windows ([epochs] length_ms × the collector's [colate] windows)",
                    t.window_ms, t.max_delay_us
                ),
            ));
        }
        Ok(())
    }
}

fn refuse(field: &str, reason: String) -> ConfigError {
    ConfigError::new(SynopsisKind::Colate, field, reason)
}

/// P(at least m/2 of m cells stay clean) when `spoiled` packets fall into them uniformly and
/// independently, exact (the occupancy chain), or its Chernoff lower bound when the chain would
/// take more than [`EXACT_STEPS`] steps; the flag says which. `m` must be even and ≥ 2.
pub fn usable_probability(m: u32, spoiled: u64) -> (f64, bool) {
    let half = u64::from(m / 2);
    if spoiled <= half {
        return (1.0, true);
    }
    if spoiled.saturating_mul(half) <= EXACT_STEPS {
        (exact_usable_probability(m, spoiled), true)
    } else {
        (chernoff_usable_bound(m, spoiled), false)
    }
}

/// The occupancy chain (module docs): the distribution of the number K of hit cells after each
/// packet, kept for K ≤ m/2 only.
pub fn exact_usable_probability(m: u32, spoiled: u64) -> f64 {
    let half = (m / 2) as usize;
    let mf = f64::from(m);
    let mut p = vec![0.0f64; half + 1];
    p[0] = 1.0;
    for _ in 0..spoiled {
        // Downwards so that p[k − 1] is still the previous step's value.
        for k in (0..=half).rev() {
            let stay = p[k] * k as f64 / mf;
            let enter = if k > 0 { p[k - 1] * (mf - (k - 1) as f64) / mf } else { 0.0 };
            p[k] = stay + enter;
        }
    }
    p.iter().sum::<f64>().clamp(0.0, 1.0)
}

/// Chernoff's lower bound on P(E ≥ m/2) for the number E of empty cells (module docs).
pub fn chernoff_usable_bound(m: u32, spoiled: u64) -> f64 {
    let mf = f64::from(m);
    let mu = mf * (1.0 - 1.0 / mf).powf(spoiled as f64);
    let below = mf / 2.0 - 1.0; // E < m/2 ⇔ E ≤ m/2 − 1
    if mu <= below {
        return 0.0;
    }
    let delta = 1.0 - below / mu;
    (1.0 - (-delta * delta * mu / 2.0).exp()).max(0.0)
}

/// The smallest even m ≥ [`DEFAULT_CELLS_PER_FLOW`] that gives a flow at the target's rate and
/// delay at least m/2 clean cells with the target probability; refused (naming the inputs) when
/// no m ≤ [`MAX_CELLS_PER_FLOW`] does.
pub fn for_coverage(t: &CoverageTarget) -> Result<CoverageSizing, ConfigError> {
    t.check()?;
    let x = t.spoiled_packets();
    // X packets always leave at least m/2 cells clean once m ≥ 2·X: a cap far beyond any m
    // that could be wanted means the inputs cannot be met.
    if x > f64::from(MAX_CELLS_PER_FLOW) {
        return Err(unreachable_target(t, x));
    }
    let spoiled = x.ceil() as u64;
    let passes = |m: u32| usable_probability(m, spoiled).0 >= t.target;
    let lo = DEFAULT_CELLS_PER_FLOW;
    let m = if passes(lo) {
        lo
    } else {
        // The probability grows with m (checked exhaustively over small cases in the tests):
        // gallop to a passing m, then bisect over even m.
        let mut fail = lo;
        let mut pass = lo;
        loop {
            if pass >= MAX_CELLS_PER_FLOW {
                if !passes(MAX_CELLS_PER_FLOW) {
                    return Err(unreachable_target(t, x));
                }
                pass = MAX_CELLS_PER_FLOW;
                break;
            }
            pass = (pass * 2).min(MAX_CELLS_PER_FLOW);
            if passes(pass) {
                break;
            }
            fail = pass;
        }
        while pass - fail > 2 {
            let mid = (fail / 2 + pass / 2) / 2 * 2;
            let mid = if mid <= fail { fail + 2 } else { mid };
            if passes(mid) { pass = mid } else { fail = mid }
        }
        pass
    };
    let (probability, exact) = usable_probability(m, spoiled);
    Ok(CoverageSizing { target: *t, spoiled_packets: spoiled, cells_per_flow: m, probability, exact })
}

fn unreachable_target(t: &CoverageTarget, x: f64) -> ConfigError {
    refuse(
        "target_coverage",
        format!(
            "no cells_per_flow up to {MAX_CELLS_PER_FLOW} gives {} of flows a mean: a flow at max_flow_pps = {} \
             through max_delay_us = {} with expected_loss = {} over window_ms = {} spoils {x:.0} of its cells' \
             packets per window; lower max_flow_pps or max_delay_us, or query longer windows",
            t.target, t.max_flow_pps, t.max_delay_us, t.expected_loss, t.window_ms
        ),
    )
}

/// The `[synopses.colate]` table as written: [`ColateConfig`]'s keys with `cells_per_flow`
/// optional, plus the coverage-sizing keys. `cells_per_flow` is either given (an explicit m),
/// or derived by [`for_coverage`] from `max_delay_us` and `max_flow_pps` (and the optional
/// `expected_loss`, `window_ms`, `target_coverage`), or, with neither, the default
/// [`DEFAULT_CELLS_PER_FLOW`]. Giving both is refused: one source of truth for m.
///
/// [`ColateConfig`] itself keeps its plain encoding (archives and the fingerprint use it): the
/// derived m is in it, so two points derive the same m from the same table, and points whose
/// tables derive different m refuse each other's epochs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColateConfigKeys {
    /// See [`ColateConfig::counters`].
    pub counters: u32,
    /// See [`ColateConfig::cells_per_flow`]; derived when absent.
    pub cells_per_flow: Option<u32>,
    /// See [`ColateConfig::counter_bits`].
    pub counter_bits: u8,
    /// See [`ColateConfig::epoch_threshold_ticks`].
    pub epoch_threshold_ticks: u64,
    /// See [`ColateConfig::tick_ns`].
    #[serde(default = "one")]
    pub tick_ns: u64,
    /// See [`ColateConfig::origin_ns`].
    #[serde(default)]
    pub origin_ns: u64,
    /// See [`ColateConfig::seed`].
    #[serde(default)]
    pub seed: u64,
    /// See [`ColateConfig::j_mode`].
    #[serde(default)]
    pub j_mode: JMode,
    /// See [`ColateConfig::packet_counts`].
    #[serde(default)]
    pub packet_counts: bool,
    /// [`CoverageTarget::max_delay_us`].
    pub max_delay_us: Option<f64>,
    /// [`CoverageTarget::max_flow_pps`].
    pub max_flow_pps: Option<f64>,
    /// [`CoverageTarget::expected_loss`] (default [`DEFAULT_EXPECTED_LOSS`]).
    pub expected_loss: Option<f64>,
    /// [`CoverageTarget::window_ms`] (default [`DEFAULT_WINDOW_MS`]).
    pub window_ms: Option<f64>,
    /// [`CoverageTarget::target`] (default [`DEFAULT_TARGET`]).
    pub target_coverage: Option<f64>,
}

fn one() -> u64 {
    1
}

impl ColateConfigKeys {
    /// The configuration, validated, and the sizing that derived its m (`None` when m was given
    /// or defaulted).
    pub fn resolve(self) -> Result<(ColateConfig, Option<CoverageSizing>), ConfigError> {
        let load_keys = [
            ("max_delay_us", self.max_delay_us.is_some()),
            ("max_flow_pps", self.max_flow_pps.is_some()),
            ("expected_loss", self.expected_loss.is_some()),
            ("window_ms", self.window_ms.is_some()),
            ("target_coverage", self.target_coverage.is_some()),
        ];
        let given = load_keys.iter().find(|(_, set)| *set).map(|(name, _)| *name);
        let sizing = match (self.cells_per_flow, given, self.max_delay_us, self.max_flow_pps) {
            (Some(_), Some(key), ..) => {
                return Err(refuse(
                    "cells_per_flow",
                    format!("give either cells_per_flow or the load it is derived from ({key} …), not both"),
                ));
            }
            (None, Some(_), Some(max_delay_us), Some(max_flow_pps)) => Some(for_coverage(&CoverageTarget {
                max_delay_us,
                max_flow_pps,
                expected_loss: self.expected_loss.unwrap_or(DEFAULT_EXPECTED_LOSS),
                window_ms: self.window_ms.unwrap_or(DEFAULT_WINDOW_MS),
                target: self.target_coverage.unwrap_or(DEFAULT_TARGET),
            })?),
            (None, Some(_), None, _) => {
                return Err(refuse(
                    "max_delay_us",
                    "is needed to derive cells_per_flow from the load".into(),
                ));
            }
            (None, Some(_), _, None) => {
                return Err(refuse(
                    "max_flow_pps",
                    "is needed to derive cells_per_flow from the load".into(),
                ));
            }
            _ => None,
        };
        let cells_per_flow =
            sizing.map(|s| s.cells_per_flow).or(self.cells_per_flow).unwrap_or(DEFAULT_CELLS_PER_FLOW);
        let cfg = ColateConfig {
            counters: self.counters,
            cells_per_flow,
            counter_bits: self.counter_bits,
            epoch_threshold_ticks: self.epoch_threshold_ticks,
            tick_ns: self.tick_ns,
            origin_ns: self.origin_ns,
            seed: self.seed,
            j_mode: self.j_mode,
            packet_counts: self.packet_counts,
        };
        crate::synopsis::SynopsisConfig::validate(&cfg)?;
        Ok((cfg, sizing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// P(at least m/2 cells clean) by enumerating all m^x assignments of x packets to m cells.
    fn enumerate(m: u32, x: u32) -> f64 {
        let total = u64::from(m).pow(x);
        let mut good = 0u64;
        for code in 0..total {
            let mut hit = 0u64;
            let mut c = code;
            for _ in 0..x {
                hit |= 1 << (c % u64::from(m));
                c /= u64::from(m);
            }
            good += u64::from(m - hit.count_ones() >= m / 2);
        }
        good as f64 / total as f64
    }

    #[test]
    fn the_occupancy_chain_equals_an_exact_enumeration() {
        for m in [2u32, 4, 6, 8] {
            for x in 0..=7u32 {
                if u64::from(m).pow(x) > 3_000_000 {
                    continue;
                }
                let (p, exact) = usable_probability(m, u64::from(x));
                assert!(exact);
                let e = enumerate(m, x);
                assert!((p - e).abs() < 1e-12, "m = {m}, x = {x}: chain {p}, enumeration {e}");
                assert!((exact_usable_probability(m, u64::from(x)) - e).abs() < 1e-12);
            }
        }
        // A hand case: 3 packets in 4 cells leave ≥ 2 clean unless all three hit different
        // cells: 1 − 4·3·2/4³ = 0.625.
        assert!((exact_usable_probability(4, 3) - 0.625).abs() < 1e-15);
    }

    #[test]
    fn the_chernoff_bound_never_exceeds_the_exact_probability() {
        for m in (20..=200).step_by(10) {
            for x in (0..=3 * m).step_by(3) {
                let exact = exact_usable_probability(m, u64::from(x));
                let bound = chernoff_usable_bound(m, u64::from(x));
                assert!(bound <= exact + 1e-12, "m = {m}, x = {x}: bound {bound} > exact {exact}");
            }
        }
    }

    #[test]
    fn the_probability_grows_with_m() {
        // The search in `for_coverage` bisects: it needs P non-decreasing in even m.
        for x in 0..=120u64 {
            let mut last = 0.0;
            for m in (2..=200u32).step_by(2) {
                let p = exact_usable_probability(m, x);
                assert!(p >= last - 1e-12, "x = {x}: P falls from {last} to {p} at m = {m}");
                last = p;
            }
        }
    }

    fn target(pps: f64, delay_us: f64) -> CoverageTarget {
        CoverageTarget {
            max_delay_us: delay_us,
            max_flow_pps: pps,
            expected_loss: 0.01,
            window_ms: 100.0,
            target: 0.95,
        }
    }

    #[test]
    fn m_is_the_smallest_even_m_that_meets_the_target() {
        for (pps, delay) in [(10.0, 100.0), (300.0, 30_000.0), (1_000.0, 40_000.0), (5_000.0, 60_000.0)] {
            let t = target(pps, delay);
            let s = for_coverage(&t).unwrap();
            let x = (2.0 * pps * delay * 1e-6 + 0.01 * pps * 0.1).ceil() as u64;
            assert_eq!(s.spoiled_packets, x);
            assert!(s.cells_per_flow.is_multiple_of(2) && s.cells_per_flow >= DEFAULT_CELLS_PER_FLOW);
            assert!(s.probability >= 0.95, "{s:?}");
            assert!(usable_probability(s.cells_per_flow, x).0 >= 0.95);
            if s.cells_per_flow > DEFAULT_CELLS_PER_FLOW {
                assert!(usable_probability(s.cells_per_flow - 2, x).0 < 0.95, "{s:?} is not the smallest");
            }
        }
        // A light load keeps the default; m·ln 2 ≈ X is where the median flow loses its mean,
        // so the 95 % m sits above X/ln 2.
        assert_eq!(for_coverage(&target(10.0, 100.0)).unwrap().cells_per_flow, 20);
        let s = for_coverage(&target(300.0, 30_000.0)).unwrap();
        assert!(f64::from(s.cells_per_flow) > s.spoiled_packets as f64 / std::f64::consts::LN_2);
    }

    #[test]
    fn targets_no_m_reaches_are_refused_naming_the_key() {
        let e = for_coverage(&CoverageTarget { window_ms: 1e4, ..target(1e6, 1e6) }).unwrap_err();
        assert_eq!(e.field, "target_coverage");
        assert!(e.reason.contains("max_flow_pps"), "{}", e.reason);
        let e = for_coverage(&CoverageTarget { target: 1.0, ..target(10.0, 10.0) }).unwrap_err();
        assert_eq!(e.field, "target_coverage");
        assert_eq!(for_coverage(&target(-1.0, 10.0)).unwrap_err().field, "max_flow_pps");
        assert_eq!(for_coverage(&target(1.0, f64::NAN)).unwrap_err().field, "max_delay_us");
        let e = for_coverage(&CoverageTarget { expected_loss: 1.0, ..target(1.0, 1.0) }).unwrap_err();
        assert_eq!(e.field, "expected_loss");
        let e = for_coverage(&CoverageTarget { window_ms: 0.0, ..target(1.0, 1.0) }).unwrap_err();
        assert_eq!(e.field, "window_ms");
        let e = for_coverage(&target(10.0, 100_000.0)).unwrap_err();
        assert_eq!(e.field, "window_ms");
        assert!(e.reason.contains("max_delay_us"), "{}", e.reason);
        assert!(for_coverage(&target(10.0, 99_000.0)).is_ok());
    }

    fn keys(extra: &str) -> Result<(ColateConfig, Option<CoverageSizing>), ConfigError> {
        let json =
            format!(r#"{{"counters": 1000003, "counter_bits": 48, "epoch_threshold_ticks": 1000{extra}}}"#);
        serde_json::from_str::<ColateConfigKeys>(&json).unwrap().resolve()
    }

    #[test]
    fn keys_derive_default_or_take_m_and_refuse_both() {
        let (c, s) = keys("").unwrap();
        assert_eq!((c.cells_per_flow, s), (DEFAULT_CELLS_PER_FLOW, None));
        let (c, s) = keys(r#", "cells_per_flow": 64"#).unwrap();
        assert_eq!((c.cells_per_flow, s), (64, None));
        let (c, s) = keys(r#", "max_delay_us": 30000, "max_flow_pps": 300, "window_ms": 100"#).unwrap();
        let s = s.unwrap();
        assert_eq!(c.cells_per_flow, s.cells_per_flow);
        assert!(s.cells_per_flow > 20, "{s:?}");
        // The derived m is in the config, so the fingerprint covers it.
        use crate::synopsis::SynopsisConfig;
        let (explicit, _) = keys(&format!(r#", "cells_per_flow": {}"#, s.cells_per_flow)).unwrap();
        assert_eq!(explicit.fingerprint(), c.fingerprint());
        assert_ne!(keys("").unwrap().0.fingerprint(), c.fingerprint());

        let e = keys(r#", "cells_per_flow": 20, "max_delay_us": 100"#).unwrap_err();
        assert_eq!(e.field, "cells_per_flow");
        assert_eq!(keys(r#", "max_delay_us": 100"#).unwrap_err().field, "max_flow_pps");
        assert_eq!(keys(r#", "target_coverage": 0.9"#).unwrap_err().field, "max_delay_us");
        assert_eq!(
            keys(r#", "max_delay_us": 1e5, "max_flow_pps": 1e6"#).unwrap_err().field,
            "target_coverage"
        );
        // The derived m still has to fit the vector: m < n.
        let json = r#"{"counters": 101, "counter_bits": 48, "epoch_threshold_ticks": 1000,
            "max_delay_us": 90000, "max_flow_pps": 1000}"#;
        let e = serde_json::from_str::<ColateConfigKeys>(json).unwrap().resolve().unwrap_err();
        assert_eq!(e.field, "cells_per_flow");
    }
}
