//! Parameter selection (paper §5, spec §5): from a RAM budget M and the operator's reliability
//! α and confidence interval β to (n, m, b, T), with Eq 21/22 in its corrected form by default.
//!
//! The paper solves Eq 13, 14, 15 and 22 together for n. Under the corrected Eq 22 the
//! accuracy term hardly depends on n (m·T/n ≈ t^max), so the "equation" is mostly a feasibility
//! test B²(t^min)² ≳ k²(t^min + t^max) (spec §5.4): [`solve`] brackets n where 2 ≤ m ≤ m_cap,
//! takes the largest n that meets Eq 22 (the paper's root) when accuracy binds, the n whose m is
//! the requested hint when it does not, and refuses with the numbers when nothing in the bracket
//! meets it. Note the per-point model ignores the cancellation between S and R that makes the
//! real mean far more accurate (see the module docs of [`super`]).

use super::config::{ColateConfig, JMode, is_prime, prev_prime};
use crate::synopsis::quantile::two_sided_z;
use crate::synopsis::{ConfigError, SynopsisConfig, SynopsisKind};
use serde::{Deserialize, Serialize};

/// Which Eq 21/22 to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Eq21Form {
    /// k²n²m/(n − m)² (spec §5.2: the derivation from Eq 18). The default.
    Corrected,
    /// k²n²m/(n − m), as printed: off by a factor ≈ n, which makes the worked example infeasible.
    Printed,
}

/// Eq 11: the reliability each point must reach, A = (1 + α)/2.
pub fn per_point_reliability(alpha: f64) -> f64 {
    (1.0 + alpha) / 2.0
}

/// Eq 19–20: k with P{−k ≤ Z ≤ k} = A, k = √2·erf⁻¹(A).
pub fn k_of(a: f64) -> f64 {
    two_sided_z(a)
}

/// Eq 12: the per-point interval B = β·(t_R − t_S)/(t_R + t_S), the ratio "measured on the
/// network" (it depends on the timestamp origin and unit: spec §5.1).
pub fn per_point_interval(beta: f64, ratio: f64) -> f64 {
    beta * ratio
}

/// Eq 1: E\[C\] = t_f/m + (t − t_f)/n.
pub fn expected_counter(t_f: f64, t: f64, n: f64, m: f64) -> f64 {
    t_f / m + (t - t_f) / n
}

/// Eq 2: Var(C) = (t_f/m)(1 − 1/m) + ((t − t_f)/n)(1 − 1/n).
pub fn counter_variance(t_f: f64, t: f64, n: f64, m: f64) -> f64 {
    (t_f / m) * (1.0 - 1.0 / m) + ((t - t_f) / n) * (1.0 - 1.0 / n)
}

/// Eq 14 solved for T: b = log₂(T/n) + 1 ⇔ T = n·2^(b − 1).
pub fn threshold_of(n: f64, b: f64) -> f64 {
    n * (b - 1.0).exp2()
}

/// Eq 15 solved for m: t^max/m + (T − t^max)/n = 2^b − 1.
pub fn cells_of(n: f64, b: f64, t: f64, t_max: f64) -> f64 {
    t_max / (b.exp2() - 1.0 - (t - t_max) / n)
}

/// The right-hand side of Eq 21/22 at flow sum `t`: k²n²m/(n − m)^e·Var(C) with e = 2
/// (corrected) or 1 (printed).
pub fn eq22_rhs(form: Eq21Form, n: f64, m: f64, t_epoch: f64, t: f64, k: f64) -> f64 {
    k * k * n * n * m / eq21_denominator(form, n, m) * counter_variance(t, t_epoch, n, m)
}

fn eq21_denominator(form: Eq21Form, n: f64, m: f64) -> f64 {
    match form {
        Eq21Form::Corrected => (n - m) * (n - m),
        Eq21Form::Printed => n - m,
    }
}

/// The smallest flow sum t with B²t² ≥ Eq 22's right-hand side: the positive root of
/// B²t² − a·t − c = 0 (Eq 21 is quadratic in t).
pub fn required_t_min(form: Eq21Form, n: f64, m: f64, t_epoch: f64, b_pp: f64, k: f64) -> f64 {
    let c0 = k * k * n * n * m / eq21_denominator(form, n, m);
    let a = c0 * ((1.0 / m) * (1.0 - 1.0 / m) - (1.0 / n) * (1.0 - 1.0 / n));
    let c = c0 * (t_epoch / n) * (1.0 - 1.0 / n);
    (a + (a * a + 4.0 * b_pp * b_pp * c).sqrt()) / (2.0 * b_pp * b_pp)
}

/// What [`solve`] is asked.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizingRequest {
    /// M: RAM for the counter vector, in bits ("1 MB" in the paper is 2²³ bits: spec §8 P14).
    pub memory_bits: u64,
    /// α ∈ [0, 1): required reliability.
    pub alpha: f64,
    /// β ∈ (0, 1]: required confidence interval (relative).
    pub beta: f64,
    /// The Eq 12 ratio (t_R − t_S)/(t_R + t_S) ∈ (0, 1] measured on the network; 1 reproduces the
    /// paper's example (B = β).
    pub eq12_ratio: f64,
    /// t^min: the smallest per-flow timestamp sum to guarantee (ticks).
    pub t_min_ticks: f64,
    /// t^max: the largest per-flow timestamp sum (ticks).
    pub t_max_ticks: f64,
    /// Which Eq 22.
    pub form: Eq21Form,
    /// m to aim for when the accuracy target does not bind (the paper's typical 20).
    pub cells_per_flow_hint: u32,
    /// Upper end of the bracket for m.
    pub max_cells_per_flow: u32,
}

impl SizingRequest {
    /// A request with the corrected Eq 22, m hint 20 and m ≤ 1024.
    pub fn new(
        memory_bits: u64,
        alpha: f64,
        beta: f64,
        eq12_ratio: f64,
        t_min_ticks: f64,
        t_max_ticks: f64,
    ) -> Self {
        Self {
            memory_bits,
            alpha,
            beta,
            eq12_ratio,
            t_min_ticks,
            t_max_ticks,
            form: Eq21Form::Corrected,
            cells_per_flow_hint: 20,
            max_cells_per_flow: 1024,
        }
    }
}

/// How n was picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Eq 22 binds: n is its root, the largest n that meets the target (the paper's method).
    Root,
    /// Eq 22 holds across the bracket: n is the one whose m is the hint.
    NotBinding,
}

/// The real-valued solution of Eq 13–15 and 22.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ContinuousParams {
    /// n.
    pub n: f64,
    /// m.
    pub m: f64,
    /// b = M/n.
    pub b: f64,
    /// T = n·2^(b − 1).
    pub t: f64,
}

/// The result of [`solve`]: the continuous solution and the integer configuration derived from
/// it (b rounded up, n the largest prime with n·b ≤ M, m even, T kept), with the checks redone
/// on the integers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Sizing {
    /// The request.
    pub request: SizingRequest,
    /// A (Eq 11).
    pub per_point_reliability: f64,
    /// k (Eq 20).
    pub k: f64,
    /// B (Eq 12).
    pub per_point_interval: f64,
    /// How n was picked.
    pub verdict: Verdict,
    /// Real-valued n, m, b, T.
    pub continuous: ContinuousParams,
    /// Integer n (prime).
    pub counters: u32,
    /// Integer m (even).
    pub cells_per_flow: u32,
    /// Integer b.
    pub counter_bits: u8,
    /// T (ticks).
    pub epoch_threshold_ticks: u64,
    /// (B²(t^min)² − RHS)/(B²(t^min)²) with the integer parameters: ≥ 0 means Eq 22 holds.
    pub eq22_slack: f64,
    /// Eq 15 as an inequality with the integer parameters: the largest flow's expected
    /// counter fits in b bits.
    pub largest_flow_fits: bool,
}

impl Sizing {
    /// The configuration these parameters give, with the caller's timescale and seed.
    pub fn config(
        &self,
        tick_ns: u64,
        origin_ns: u64,
        seed: u64,
        packet_counts: bool,
    ) -> Result<ColateConfig, ConfigError> {
        let cfg = ColateConfig {
            counters: self.counters,
            cells_per_flow: self.cells_per_flow,
            counter_bits: self.counter_bits,
            epoch_threshold_ticks: self.epoch_threshold_ticks,
            tick_ns,
            origin_ns,
            seed,
            j_mode: JMode::Consistent,
            packet_counts,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

fn err(field: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::new(SynopsisKind::Colate, format!("sizing.{field}"), reason)
}

/// Solves for (n, m, b, T); refuses infeasible targets with the numbers that would make them
/// feasible.
pub fn solve(req: &SizingRequest) -> Result<Sizing, ConfigError> {
    let mbits = req.memory_bits as f64;
    if !(0.0..1.0).contains(&req.alpha) {
        return Err(err("alpha", format!("must be in [0, 1), got {}", req.alpha)));
    }
    if !(req.beta > 0.0 && req.beta <= 1.0) {
        return Err(err("beta", format!("must be in (0, 1], got {}", req.beta)));
    }
    if !(req.eq12_ratio > 0.0 && req.eq12_ratio <= 1.0) {
        return Err(err("eq12_ratio", format!("must be in (0, 1], got {}", req.eq12_ratio)));
    }
    if !(req.t_min_ticks >= 1.0
        && req.t_min_ticks.is_finite()
        && req.t_max_ticks >= req.t_min_ticks
        && req.t_max_ticks.is_finite())
    {
        return Err(err(
            "t_min_ticks",
            format!("need 1 ≤ t_min ≤ t_max, got {} and {}", req.t_min_ticks, req.t_max_ticks),
        ));
    }
    if req.memory_bits < 1024 {
        return Err(err(
            "memory_bits",
            format!("{} bits is too small for a counter vector", req.memory_bits),
        ));
    }
    let hint = req.cells_per_flow_hint.max(2) as f64;
    let m_cap = (req.max_cells_per_flow as f64).max(hint).min(super::config::MAX_CELLS_PER_FLOW as f64);
    let a = per_point_reliability(req.alpha);
    let k = k_of(a);
    let bpp = per_point_interval(req.beta, req.eq12_ratio);
    let (tmin, tmax) = (req.t_min_ticks, req.t_max_ticks);

    // m(n) from Eq 13–15 with b = M/n, T = n·2^(b−1); increasing in n.
    let params = |n: f64| {
        let b = mbits / n;
        let t = threshold_of(n, b);
        ContinuousParams { n, m: cells_of(n, b, t, tmax), b, t }
    };
    let n_for_m = |target: f64| -> f64 {
        let (mut lo, mut hi) = ((mbits / 64.0).max(3.0), mbits);
        if params(lo).m >= target {
            return lo;
        }
        if params(hi).m <= target {
            return hi;
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if params(mid).m < target { lo = mid } else { hi = mid }
        }
        0.5 * (lo + hi)
    };
    let (n_lo, n_hi) = (n_for_m(2.0), n_for_m(m_cap));
    let slack = |p: &ContinuousParams| bpp * bpp * tmin * tmin - eq22_rhs(req.form, p.n, p.m, p.t, tmin, k);
    let ok = |n: f64| {
        let p = params(n);
        p.m >= 2.0 && p.m < n && slack(&p) >= 0.0
    };

    const GRID: usize = 256;
    let grid: Vec<f64> = (0..=GRID).map(|i| n_lo * (n_hi / n_lo).powf(i as f64 / GRID as f64)).collect();
    let Some(top) = (0..=GRID).rev().find(|&i| ok(grid[i])) else {
        let p = params(n_for_m(hint));
        let need = required_t_min(req.form, p.n, p.m, p.t, bpp, k);
        let best_b = eq22_rhs(req.form, p.n, p.m, p.t, tmin, k).sqrt() / tmin;
        return Err(err(
            "target",
            format!(
                "infeasible: α = {}, β = {} need a per-point interval B = {:.4} at t_min = {:.4e} ticks, \
                 but with M = {} bits (n ≈ {:.0}, m ≈ {:.1}, T ≈ {:.3e}) Eq 22 ({:?}) allows only B = {:.4}; \
                 target flows with t ≥ {:.4e} ticks, relax β to ≥ {:.4}, or lower α",
                req.alpha,
                req.beta,
                bpp,
                tmin,
                req.memory_bits,
                p.n,
                p.m,
                p.t,
                req.form,
                best_b,
                need,
                best_b / req.eq12_ratio,
            ),
        ));
    };
    let (verdict, n_star) = if top == GRID {
        let nh = n_for_m(hint);
        (Verdict::NotBinding, if ok(nh) { nh } else { grid[top] })
    } else {
        let (mut lo, mut hi) = (grid[top], grid[top + 1]);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if ok(mid) { lo = mid } else { hi = mid }
        }
        (Verdict::Root, lo)
    };
    let cont = params(n_star);

    // Integers: b up, n the largest prime with n·b ≤ M, m even (nearest), T kept (Eq 14 then
    // holds as b ≥ log₂(T/n) + 1).
    let b_int = (cont.b - 1e-9).ceil().clamp(1.0, 64.0) as u8;
    let mut m_int = (((cont.m / 2.0).round() * 2.0) as u64).max(2);
    let n_budget = (req.memory_bits / b_int as u64).min(super::config::MAX_COUNTERS as u64);
    let n_int = prev_prime(n_budget).filter(|&p| p > m_int && is_prime(p)).ok_or_else(|| {
        err("memory_bits", format!("{} bits leave no prime n > m = {m_int} at b = {b_int}", req.memory_bits))
    })?;
    let t_int = cont.t.floor().clamp(1.0, u64::MAX as f64) as u64;
    let check = |m: u64| {
        let (n, mf, t) = (n_int as f64, m as f64, t_int as f64);
        let rhs = eq22_rhs(req.form, n, mf, t, tmin, k);
        let s = (bpp * bpp * tmin * tmin - rhs) / (bpp * bpp * tmin * tmin);
        let fits = expected_counter(tmax, t, n, mf) <= (b_int as f64).exp2() - 1.0;
        (s, fits)
    };
    let (mut eq22_slack, mut largest_flow_fits) = check(m_int);
    // Rounding m up can break Eq 22 at the root: step down to the next even m that holds.
    while eq22_slack < 0.0 && m_int > 2 {
        m_int -= 2;
        (eq22_slack, largest_flow_fits) = check(m_int);
    }
    if eq22_slack < 0.0 {
        return Err(err(
            "target",
            format!(
                "rounding (n, m, b) = ({:.0}, {:.2}, {:.3}) to integers breaks Eq 22; raise M or relax β",
                cont.n, cont.m, cont.b
            ),
        ));
    }
    Ok(Sizing {
        request: *req,
        per_point_reliability: a,
        k,
        per_point_interval: bpp,
        verdict,
        continuous: cont,
        counters: n_int as u32,
        cells_per_flow: m_int as u32,
        counter_bits: b_int,
        epoch_threshold_ticks: t_int,
        eq22_slack,
        largest_flow_fits,
    })
}
