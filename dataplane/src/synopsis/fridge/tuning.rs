//! Choosing entry probabilities (spec §3.3, §4.4, §7.4, P20): make the fridge's lifetime M/p
//! (in offered requests) cover the largest delay of interest, p = M/(λ·t_target), clamped to
//! [p_min, 1] and rounded to a power of two (the fridge is flat within 0.5×–2× of the best p,
//! so the rounding is safe). A [`Recalibrator`] applies the paper's rule "re-calibrate when the
//! rate or the delay scale changes by more than 2×" with hysteresis.
//!
//! Rates and slot counts are per worker shard: with C shards each of M/C slots seeing λ/C
//! requests per second, the lifetime equals one fridge of M slots at λ. Pure functions for the
//! control side; nothing here runs per packet.

use super::config::{FridgeConfig, FridgeSpec, KindConfig, validate_fridges};
use crate::packet::ExchangeKind;
use crate::synopsis::{ConfigError, SynopsisConfig, SynopsisKind};

fn err(field: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::new(SynopsisKind::Fridge, field, reason)
}

/// What the tuning needs to know.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuningTarget {
    /// Requests per second reaching the shard.
    pub request_rate_per_s: f64,
    /// The largest delay that matters (e.g. the SLA threshold × 2, or the p99), ns.
    pub target_delay_ns: u64,
    /// Smallest p allowed (keeps the sample count up when the target is enormous).
    pub p_min: f64,
    /// Round p to the nearest power of two (in log scale).
    pub power_of_two: bool,
}

impl TuningTarget {
    /// A target with p_min = 2⁻²⁰ and power-of-two rounding.
    pub fn new(request_rate_per_s: f64, target_delay_ns: u64) -> Self {
        Self { request_rate_per_s, target_delay_ns, p_min: 1.0 / f64::from(1u32 << 20), power_of_two: true }
    }

    fn check(&self) -> Result<(), ConfigError> {
        if !(self.request_rate_per_s.is_finite() && self.request_rate_per_s > 0.0) {
            return Err(err(
                "request_rate_per_s",
                format!("{} is not a positive rate", self.request_rate_per_s),
            ));
        }
        if self.target_delay_ns == 0 {
            return Err(err("target_delay_ns", "the target delay must be positive"));
        }
        if !(self.p_min.is_finite() && self.p_min > 0.0 && self.p_min <= 1.0) {
            return Err(err("p_min", format!("{} is not in (0, 1]", self.p_min)));
        }
        Ok(())
    }

    /// Requests arriving during the target delay: the lifetime to aim for.
    pub fn requests_in_target(&self) -> f64 {
        self.request_rate_per_s * self.target_delay_ns as f64 * 1e-9
    }
}

fn round_pow2(p: f64) -> f64 {
    p.log2().round().exp2()
}

/// p = clamp(M/(λ·t_target), p_min, 1), optionally rounded to a power of two.
pub fn entry_probability(slots: u32, t: &TuningTarget) -> Result<f64, ConfigError> {
    t.check()?;
    if slots < 2 {
        return Err(err("slots", "a fridge needs at least 2 slots (spec P21)"));
    }
    let raw = f64::from(slots) / t.requests_in_target();
    let p = if t.power_of_two { round_pow2(raw) } else { raw };
    Ok(p.clamp(t.p_min, 1.0))
}

/// One fridge of `slots` slots tuned for `t`.
pub fn single_fridge(slots: u32, t: &TuningTarget) -> Result<Vec<FridgeSpec>, ConfigError> {
    let f = vec![FridgeSpec { slots, entry_probability: entry_probability(slots, t)? }];
    validate_fridges("fridges", &f)?;
    Ok(f)
}

/// Two fridges of `slots / 2` each (spec §4.4): the long one's lifetime covers the target
/// delay, the short one covers the bulk with `bulk_ratio` times the long one's entry
/// probability (16 was the most common best ratio in the spec's sweep; 8–256 all occur),
/// capped so that p₁ + p₂ ≤ 1.
pub fn two_fridges(slots: u32, t: &TuningTarget, bulk_ratio: f64) -> Result<Vec<FridgeSpec>, ConfigError> {
    if !(bulk_ratio.is_finite() && bulk_ratio >= 1.0) {
        return Err(err("bulk_ratio", format!("{bulk_ratio} must be at least 1")));
    }
    let half = slots / 2;
    let p_long = entry_probability(half, t)?;
    if p_long >= 1.0 {
        return Err(err(
            "target_delay_ns",
            "one fridge with p = 1 already covers the target delay: a second fridge cannot help",
        ));
    }
    let mut p_short = (p_long * bulk_ratio).min(1.0 - p_long);
    if t.power_of_two {
        // Largest power of two that still fits next to p_long.
        p_short = p_short.log2().floor().exp2();
    }
    let f = vec![
        FridgeSpec { slots: half, entry_probability: p_short },
        FridgeSpec { slots: half, entry_probability: p_long },
    ];
    validate_fridges("fridges", &f)?;
    Ok(f)
}

/// `base` with the fridges of `kind` replaced by `fridges` (added if the kind was not measured),
/// validated.
pub fn with_kind(
    base: &FridgeConfig,
    kind: ExchangeKind,
    fridges: Vec<FridgeSpec>,
) -> Result<FridgeConfig, ConfigError> {
    let mut cfg = base.clone();
    match cfg.kinds.iter_mut().find(|k| k.kind == kind) {
        Some(k) => k.fridges = fridges,
        None => cfg.kinds.push(KindConfig { kind, fridges }),
    }
    cfg.validate()?;
    Ok(cfg)
}

/// Keeps a fridge's p and says when to change it: only when the ideal p has moved by more
/// than a factor `band` (2, the paper's guidance) from the current one, so small drifts of
/// the rate or delay scale do not churn generations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recalibrator {
    slots: u32,
    current_p: f64,
    band: f64,
}

impl Recalibrator {
    /// Starts at `current_p` for a fridge of `slots` slots.
    pub fn new(slots: u32, current_p: f64) -> Self {
        Self { slots, current_p, band: 2.0 }
    }

    /// The p in use.
    pub fn current(&self) -> f64 {
        self.current_p
    }

    /// Given the latest measured rate and target, the new p if a change is due (the caller
    /// then starts a new fridge generation, spec §7.4), else `None`.
    pub fn observe(&mut self, t: &TuningTarget) -> Result<Option<f64>, ConfigError> {
        let ideal = entry_probability(self.slots, &TuningTarget { power_of_two: false, ..*t })?;
        let ratio = ideal / self.current_p;
        if ratio > self.band || ratio < 1.0 / self.band {
            let p = entry_probability(self.slots, t)?;
            if p != self.current_p {
                self.current_p = p;
                return Ok(Some(p));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_operating_points() {
        // Fig 3: M = 2¹², 1 M requests/s; T = 2¹² ms → M/(λT) ≈ 2⁻¹⁰ (spec §6.5 p*),
        // T = 2⁶ ms → 2⁻⁴.
        let p = entry_probability(1 << 12, &TuningTarget::new(1e6, 4_096_000_000)).unwrap();
        assert_eq!(p, 2f64.powi(-10));
        let p = entry_probability(1 << 12, &TuningTarget::new(1e6, 64_000_000)).unwrap();
        assert_eq!(p, 2f64.powi(-4));
        // Plenty of memory: p = 1.
        assert_eq!(entry_probability(1 << 20, &TuningTarget::new(1e3, 1_000_000)).unwrap(), 1.0);
    }

    #[test]
    fn infeasible_targets_are_refused() {
        assert!(entry_probability(1 << 12, &TuningTarget::new(0.0, 1)).is_err());
        assert!(entry_probability(1 << 12, &TuningTarget::new(f64::NAN, 1)).is_err());
        assert!(entry_probability(1 << 12, &TuningTarget::new(1e6, 0)).is_err());
        assert!(entry_probability(1, &TuningTarget::new(1e6, 1000)).is_err());
        assert!(two_fridges(1 << 20, &TuningTarget::new(1e3, 1_000_000), 16.0).is_err());
    }

    #[test]
    fn two_fridges_split_memory_and_respect_the_sum() {
        let f = two_fridges(1 << 12, &TuningTarget::new(535e3, 512_000_000), 16.0).unwrap();
        assert_eq!(f[0].slots + f[1].slots, 1 << 12);
        assert!(f[0].entry_probability + f[1].entry_probability <= 1.0);
        assert_eq!(f[0].entry_probability, 16.0 * f[1].entry_probability);
        let f = two_fridges(1 << 12, &TuningTarget::new(1e4, 512_000_000), 16.0).unwrap();
        assert!(f[0].entry_probability + f[1].entry_probability <= 1.0, "{f:?}");
    }

    #[test]
    fn tuned_configs_are_validated() {
        let t = TuningTarget::new(535e3, 512_000_000);
        let base = FridgeConfig::default();
        let cfg = with_kind(&base, ExchangeKind::Dns, two_fridges(1 << 12, &t, 16.0).unwrap()).unwrap();
        assert_eq!(cfg.kinds.len(), base.kinds.len());
        assert_eq!(cfg.kinds[1].fridges.len(), 2);
        let cfg = with_kind(&base, ExchangeKind::TcpData, single_fridge(1 << 14, &t).unwrap()).unwrap();
        assert_eq!(cfg.kinds.len(), 3);
        assert!(with_kind(&base, ExchangeKind::Dns, vec![]).is_err());
    }

    #[test]
    fn recalibration_has_hysteresis() {
        let mut r = Recalibrator::new(1 << 12, 2f64.powi(-10));
        let t = |rate: f64| TuningTarget::new(rate, 4_096_000_000);
        // 1.5× more traffic: ideal p moves by 1/1.5, inside the band: keep.
        assert_eq!(r.observe(&t(1.5e6)).unwrap(), None);
        // 3× more traffic: change, to the power of two nearest the ideal.
        assert_eq!(r.observe(&t(3e6)).unwrap(), Some(2f64.powi(-12)));
        // Back to 2.5 M/s: ideal 1.6× the current p: still inside the band.
        assert_eq!(r.observe(&t(2.5e6)).unwrap(), None);
        assert_eq!(r.current(), 2f64.powi(-12));
    }
}
