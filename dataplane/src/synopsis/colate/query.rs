//! Per-flow queries between two points (spec §4): the flow's timestamp sums (Eq 4), its mean
//! latency (Eq 3), the paper's std-dev (Eq 5–10, with the exact γ → ∞ closed form of the virtual
//! repetitions) and, with packet counts, the count-based std-dev and mean.
//!
//! A [`Segment`] holds the epochs a query uses at S and R (see [`super::select`]) and the
//! whole-vector sums that describe the noise; each [`Segment::query`] is then O(m·epochs).
//! Pure: no I/O. All sums are exact integers until the final division (spec §4.4).

use super::cells::CellMap;
use super::config::ColateConfig;
use super::epoch::{CounterEpoch, flags};
use super::stats::{chi2_quantile, ml_foreign_offset, student_t_two_sided, two_sided_z};
use crate::synopsis::estimate::{ConfidenceInterval, Estimate, Measured, NoEstimate};
use crate::synopsis::{Synopsis, SynopsisConfig};
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How the paper's Σ_z d_z² is evaluated from the deviation vectors (Eq 9–10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Repetitions {
    /// γ random pairings from a seeded generator: the paper's "virtual repetitions".
    Random {
        /// γ, the number of pairings averaged.
        gamma: u32,
        /// Seed of the pairings (mixed with the flow hash).
        seed: u64,
    },
    /// Their exact γ → ∞ limit, m/(m − 1)·Σ_j (D_j − D̄)² (spec §4.6): averaging over every
    /// pairing gives this closed form, so no repetition count can beat it. The default.
    Exact,
}

/// Options of a flow query.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryOptions {
    /// Coverage of the confidence intervals (e.g. the required reliability α).
    pub level: f64,
    /// How the paper's std-dev evaluates its pairings.
    pub repetitions: Repetitions,
    /// The required confidence interval β, to report whether the estimate meets it.
    pub beta: Option<f64>,
    /// t^min from the sizing: flows below it are outside the paper's guarantee (spec §8 P12).
    pub t_min_ticks: Option<f64>,
    /// A mean is flagged `reliable` only when its interval's half-width is at most this
    /// fraction of the estimate (and it was not clipped at the floor).
    #[serde(default = "default_reliable_half_width")]
    pub reliable_half_width: f64,
}

/// See [`QueryOptions::reliable_half_width`].
pub const DEFAULT_RELIABLE_HALF_WIDTH: f64 = 0.25;

fn default_reliable_half_width() -> f64 {
    DEFAULT_RELIABLE_HALF_WIDTH
}

impl Default for QueryOptions {
    fn default() -> Self {
        Self {
            level: 0.95,
            repetitions: Repetitions::Exact,
            beta: None,
            t_min_ticks: None,
            reliable_half_width: DEFAULT_RELIABLE_HALF_WIDTH,
        }
    }
}

/// Why two points' epochs cannot be queried together.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// Different configurations (another seed, n, m, tick, origin …): their cells do not
    /// correspond, and the estimate would be garbage (spec §8 P3), so it is refused.
    #[error("configuration fingerprints differ: {what} ({ours:#018x} vs {theirs:#018x})")]
    ConfigMismatch {
        /// Which epochs disagree.
        what: String,
        /// The first configuration's fingerprint.
        ours: u64,
        /// The disagreeing one.
        theirs: u64,
    },
    /// One side has no epoch.
    #[error("no counter epoch at point {side}")]
    NoEpochs {
        /// "S" or "R".
        side: &'static str,
    },
}

/// Per-cell noise statistics of a segment: the whole vector of Δ_i = R_i − S_i describes what
/// foreign packets put into any one cell, including the flow's own.
#[derive(Clone, Debug, Default)]
struct NoiseSums {
    sum_d: f64,
    sum_d2: f64,
    /// With counts: packets at R minus packets at S.
    count_difference: i128,
    /// With counts: the 99.5 % quantile of the clean cells' counts; part of the count a flow's
    /// cell may hold beyond the flow's own share before it counts as holding a chunk of
    /// another large flow.
    k_cut: u64,
    /// With counts: the clean cells (counts agree at S and R, Δ passes the floor, see
    /// [`Segment::with_floor`]) summed by count, cumulatively: entry (k, sums) holds every clean
    /// cell with at most k packets. A query takes as reference the cells with at most the
    /// foreign allowance of its flow's cells (what foreign packets may add to one of them), so
    /// the noise it subtracts and the variance it reports describe the cells it uses: leaving
    /// out every cell above a fixed quantile (as before) hid clustered foreign packets (a
    /// chunk of one flow in one cell) and left no reference at all in a sparse vector.
    reference: Vec<(u64, RefSums)>,
}

impl NoiseSums {
    /// The clean cells with at most `k` packets.
    fn reference_upto(&self, k: f64) -> RefSums {
        let i = self.reference.partition_point(|&(c, _)| c as f64 <= k);
        i.checked_sub(1).map_or_else(RefSums::default, |i| self.reference[i].1)
    }
}

/// Sums over reference cells of Δ (exact and f64), K (the cell's packet count) and products.
#[derive(Clone, Copy, Debug, Default)]
struct RefSums {
    cells: u64,
    d_exact: i128,
    k: f64,
    d2: f64,
    dk: f64,
    k2: f64,
}

impl RefSums {
    fn merge(&mut self, o: &RefSums) {
        self.cells += o.cells;
        self.d_exact += o.d_exact;
        self.k += o.k;
        self.d2 += o.d2;
        self.dk += o.dk;
        self.k2 += o.k2;
    }

    fn add(&mut self, d: i128, k: u64, sign: f64) {
        let (df, kf) = (d as f64, k as f64);
        if sign > 0.0 {
            self.cells += 1;
            self.d_exact += d;
        } else {
            self.cells = self.cells.saturating_sub(1);
            self.d_exact -= d;
        }
        self.k += sign * kf;
        self.d2 += sign * df * df;
        self.dk += sign * df * kf;
        self.k2 += sign * kf * kf;
    }

    /// Mean Δ and mean K per cell.
    fn means(&self) -> (f64, f64) {
        let c = self.cells.max(1) as f64;
        (self.d_exact as f64 / c, self.k / c)
    }

    /// Variance over the cells of Δ_i − μ·K_i: the foreign noise a cell carries for a flow of
    /// mean μ.
    fn variance(&self, mu: f64) -> f64 {
        let c = self.cells.max(1) as f64;
        let (md, mk) = self.means();
        ((self.d2 - 2.0 * mu * self.dk + mu * mu * self.k2) / c - (md - mu * mk).powi(2)).max(0.0)
    }
}

/// The share of a flow's cells the count mean needs (see `Segment::counts_view`).
const MIN_USABLE_SHARE: f64 = 0.5;

/// The quantile of the reference cells' counts above which a cell counts as holding a chunk of a
/// large flow.
const K_CUT_QUANTILE: f64 = 0.995;

/// Lower quantile of the single-packet cells' Δ the derived floor starts from (see
/// [`LatencyFloor::Derived`]). High enough that swapped cells (≈ 0.7 % of the single-packet
/// cells of a queue at ρ = 0.8 with 100-ms epochs, measured) cannot reach it.
const FLOOR_LOW_QUANTILE: f64 = 0.05;

/// Upper quantile whose distance from [`FLOOR_LOW_QUANTILE`] is the derived floor's margin.
const FLOOR_HIGH_QUANTILE: f64 = 0.25;

/// Interquartile ranges below q₂₅ under which the derived floor never goes (see
/// [`derived_floor_ticks`]).
const FLOOR_FENCE_IQRS: i128 = 3;

/// Share of the single-packet cells that must read below 0 for the derived floor to go below
/// 0 (see [`derived_floor_ticks`]).
const FLOOR_NEGATIVE_SHARE: f64 = 0.05;

/// Single-packet cells (counts 1 at both points) a derived floor needs: with fewer, its 5 %
/// quantile would rest on one or two cells, and the floor is 0.
pub const FLOOR_MIN_CELLS: usize = 100;

/// How a [`Segment`] sets its latency floor: the smallest one-way latency any packet can show
/// between the two points' clocks (see [`Segment::with_floor`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum LatencyFloor {
    /// From the segment's own data (the default, ours): the cells that hold exactly one packet
    /// at both points hold one latency each (or, rarely, a swap in (−E, L_max)). With q₅, q₂₅
    /// and q₇₅ the quantiles of their Δ, the floor is
    /// min(0, max(q₅ − (q₂₅ − q₅), q₂₅ − 3·(q₇₅ − q₂₅))) less one tick, and 0 when fewer
    /// than 5 % of them read below 0 (with agreeing clocks those are swaps). It lies below
    /// every latency of a distribution whose lower tail is no longer than its q₅…q₂₅ spread,
    /// is never above 0 (so with agreeing clocks no mean can be below 0), resists up to a
    /// quarter of swapped cells, and follows a clock offset of either sign without the
    /// operator knowing it. With fewer than [`FLOOR_MIN_CELLS`] such cells, or without packet
    /// counts, it is 0.
    #[default]
    Derived,
    /// Given by the operator (`[colate] latency_floor_ns`), ns: 0 when the clocks agree,
    /// −(largest clock offset) otherwise.
    Fixed(i64),
}

/// The floor a segment used, and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FloorUsed {
    /// The floor, ns (a whole number of ticks, rounded down).
    pub floor_ns: i64,
    /// Whether it was derived from the data ([`LatencyFloor::Derived`] with enough cells).
    pub derived: bool,
    /// Single-packet cells it was derived from (0 for a fixed floor).
    pub cells: usize,
}

/// The derived floor in ticks from the Δ of the single-packet cells (see
/// [`LatencyFloor::Derived`]), or `None` with fewer than [`FLOOR_MIN_CELLS`].
fn derived_floor_ticks(single: &mut [i128]) -> Option<i128> {
    if single.len() < FLOOR_MIN_CELLS {
        return None;
    }
    let at = |v: &mut [i128], q: f64| {
        let i = ((v.len() - 1) as f64 * q) as usize;
        *v.select_nth_unstable(i).1
    };
    let lo = at(single, FLOOR_LOW_QUANTILE);
    let q1 = at(single, FLOOR_HIGH_QUANTILE);
    let q3 = at(single, 1.0 - FLOOR_HIGH_QUANTILE);
    // Swapped cells lie anywhere in (−E, L_max): when they are more than 5 % of the single
    // cells (a queue holding a good part of an epoch) q₅ is one of them, and the floor would
    // fall towards −E. The far-out fence q₂₅ − 3·(q₇₅ − q₂₅), which a quarter of outliers
    // cannot move, bounds it from below.
    let spread = lo.saturating_sub(q1.saturating_sub(lo));
    let fence = q1.saturating_sub(q3.saturating_sub(q1).saturating_mul(FLOOR_FENCE_IQRS));
    // With agreeing clocks every negative single cell is a swap; a clock offset that matters
    // puts a share of the latencies themselves below 0. Below FLOOR_NEGATIVE_SHARE the
    // negatives are taken for swaps and the floor stays 0.
    let negative = single.iter().filter(|&&d| d < 0).count();
    if (negative as f64) < FLOOR_NEGATIVE_SHARE * single.len() as f64 {
        return Some(0);
    }
    Some(spread.max(fence).saturating_sub(1).min(0))
}

/// The epochs of S and R that one or more queries use, with their whole-vector noise sums.
#[derive(Debug)]
pub struct Segment<'a> {
    cfg: ColateConfig,
    map: CellMap,
    s: Vec<&'a CounterEpoch>,
    r: Vec<&'a CounterEpoch>,
    total_s: u128,
    total_r: u128,
    packets_s: u64,
    packets_r: u64,
    flags: u8,
    noise: NoiseSums,
    /// The latency floor in ticks (rounded down): no packet's latency is below it, so a cell
    /// whose Δ_i is below c_i·floor holds different packets at S and R.
    floor_ticks: i128,
    /// Where the floor came from.
    floor_used: FloorUsed,
}

/// What the query saw, beside the estimates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueryDiagnostics {
    /// Sequence numbers of the epochs used at S.
    pub epochs_s: Vec<u64>,
    /// Sequence numbers of the epochs used at R.
    pub epochs_r: Vec<u64>,
    /// Packets recorded in them at S and R.
    pub packets_s: u64,
    /// See `packets_s`.
    pub packets_r: u64,
    /// OR of the epochs' anomaly flags.
    pub flags: u8,
    /// Variance of a cell's latency sum Δ_i over the vector, excluding the flow's cells
    /// (ticks²): the foreign noise every cell of the flow carries.
    pub noise_variance_ticks2: f64,
    /// With counts: the flow's cells whose packet counts differ between S and R (a packet seen
    /// at one point only landed there: boundary, loss or extra traffic).
    pub mismatched_flow_cells: Option<u32>,
    /// With counts: packets at R minus packets at S over the whole segment.
    pub count_difference: Option<i64>,
    /// With counts: the flow's cells whose counts agree but whose Δ is below c·floor, so they
    /// hold different packets at S and R (a swap: see [`Segment::with_floor`]).
    pub swapped_flow_cells: Option<u32>,
    /// With counts: Σ over the flow's cells of packets seen at S and not at R (lost, or
    /// leaving the epoch in flight; the flow's own or a foreign packet sharing the cell). An
    /// upper bound on what the flow lost here, 0 when it certainly lost nothing.
    pub flow_packets_missing_at_r: Option<u64>,
    /// With counts: the same for packets seen at R and not at S (entering the epoch in
    /// flight, or extra packets).
    pub flow_packets_extra_at_r: Option<u64>,
    /// The latency floor the segment used and where it came from.
    pub latency_floor: FloorUsed,
}

/// The paper's a-priori model for this flow (Eq 12, corrected Eq 21 at t = t̃, T = t_X).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PaperModel {
    /// The per-point relative half-width B at S the paper's variance (Eq 2) gives.
    pub b_s: f64,
    /// The same at R.
    pub b_r: f64,
    /// The β on the mean those imply by Eq 12: B·(t̃_R + t̃_S)/(t̃_R − t̃_S) (worst case, no
    /// cancellation between the points; usually far wider than the real error).
    pub implied_beta: f64,
}

/// Everything a query answers for one flow between S and R.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowLatencyReport {
    /// The flow (the packet layer's flow hash).
    pub flow_hash: u64,
    /// p_f, as given by the caller (NetFlow or a counter; spec §1).
    pub packets: u64,
    /// μ̃ (Eq 3), ns, with a data-driven interval at `level`: SE = n·√(m·v̂)/((n − m)·p_f),
    /// v̂ the per-cell noise variance.
    pub mean_ns: Measured<Estimate>,
    /// The paper's σ̃ (Eq 5 with Ŝ₂ from the pairings), ns. Interval from Ŝ₂ ≈ χ²_{m−1}
    /// (ours): typically very wide.
    pub std_dev_paper_ns: Measured<Estimate>,
    /// Count-based σ̂ (spec §8 P2 extension, foreign part removed), ns; needs `packet_counts`.
    /// Interval from χ²_{|J|−1}.
    pub std_dev_counts_ns: Measured<Estimate>,
    /// Mean from the flow's usable cells and their counts (ours; needs `packet_counts`): cells
    /// whose counts differ at S and R (epoch-edge, lost or extra packets) or that hold a chunk
    /// of another large flow are left out; interval from the reference cells' noise.
    pub mean_counts_ns: Measured<Estimate>,
    /// With counts: how many of the flow's m cells the count estimators used.
    pub usable_flow_cells: Option<u32>,
    /// With counts: the count mean's standard error (ns): sampling of the flow's cells,
    /// foreign packets in them, tick rounding (see `Segment::counts_view`). Its interval is
    /// ±z·se, or ±t_{|J|−1}·se when cells were left out. By Chebyshev's inequality, whatever
    /// the shape of the noise, at most 1 % of flows can be off by more than 10·se.
    pub mean_counts_std_error_ns: Option<f64>,
    /// The count mean fell below the latency floor (its foreign correction overshot) and is
    /// reported at the floor; its interval is clipped there too.
    pub mean_clipped: bool,
    /// Whether the mean a flow record carries (the count mean with `packet_counts`, else the
    /// paper's) can be relied on: it exists, was not clipped, and its interval's half-width is
    /// within [`QueryOptions::reliable_half_width`] of it.
    pub reliable: bool,
    /// Why `reliable` is false.
    pub unreliable_reason: Option<String>,
    /// With counts, why the paper's mean (`mean_ns`, Eq 3 over all m cells) is not to be
    /// trusted for this flow: cells whose packets differ at S and R enter it at timestamp
    /// scale (this is how it read −161 816 ns for a 41.7 µs flow).
    pub paper_mean_suspect: Option<String>,
    /// t̃_{f,S} (Eq 4), ticks.
    pub flow_sum_s_ticks: f64,
    /// t̃_{f,R} (Eq 4), ticks.
    pub flow_sum_r_ticks: f64,
    /// Σ over epochs of the Eq 7 root ξ* at S (ticks): subtracted from every cell, it cancels
    /// in Eq 9 and so never changes the std-dev (spec §4.5).
    pub ml_offset_s_ticks: f64,
    /// The same at R.
    pub ml_offset_r_ticks: f64,
    /// Ŝ₂ ≈ Σ_z d_z² (Eq 10), ticks².
    pub second_moment_ticks2: f64,
    /// The paper's σ̃² came out negative and was clamped to 0 (spec §8 P10).
    pub paper_variance_clamped: bool,
    /// The count-based σ̂² came out negative after the noise correction and was clamped to 0.
    pub counts_variance_clamped: bool,
    /// Half-width of the mean's interval over |μ̃|.
    pub mean_relative_half_width: Option<f64>,
    /// Whether that relative half-width is within the requested β.
    pub meets_beta: Option<bool>,
    /// Whether t̃_{f,S} ≥ t^min, i.e. the flow is one the sizing targeted.
    pub targeted: Option<bool>,
    /// The paper's per-point reliability model for this flow.
    pub paper_model: Option<PaperModel>,
    /// What the query saw.
    pub diagnostics: QueryDiagnostics,
}

impl<'a> Segment<'a> {
    /// A segment over the epochs `s` (sender side) and `r` (receiver side) with the latency
    /// floor derived from its own data ([`LatencyFloor::Derived`]): safe whatever the offset
    /// between the points' clocks.
    pub fn new(s: Vec<&'a CounterEpoch>, r: Vec<&'a CounterEpoch>) -> Result<Self, QueryError> {
        Self::with_latency_floor(s, r, LatencyFloor::Derived)
    }

    /// [`Segment::with_latency_floor`] with a fixed floor of `latency_floor_ns`.
    pub fn with_floor(
        s: Vec<&'a CounterEpoch>,
        r: Vec<&'a CounterEpoch>,
        latency_floor_ns: i64,
    ) -> Result<Self, QueryError> {
        Self::with_latency_floor(s, r, LatencyFloor::Fixed(latency_floor_ns))
    }

    /// A segment over the epochs `s` (sender side) and `r` (receiver side). Every epoch must
    /// carry the same configuration; the whole-vector noise sums are computed here (O(n·epochs)).
    ///
    /// `latency_floor_ns` is the smallest one-way latency any packet can show between the two
    /// points' clocks: 0 when they agree, −(largest clock offset) otherwise. With packet counts
    /// it is how the count estimators recognise a **swapped cell**: one whose counts agree at
    /// S and R although its packets differ (a packet lost or leaving the epoch at S, another
    /// entering it at R, in the same cell). Such a cell's Δ carries t_R(in) − t_S(out), which
    /// lies anywhere in (−E, L_max) for an epoch of length E, not a latency; a clean cell's Δ is
    /// a sum of c latencies, so never below c·floor. Cells below it are left out (ours; see
    /// docs/colate.md "Why flows without loss got ×7 errors"). The floor is given, or derived
    /// from the segment's single-packet cells ([`LatencyFloor`]).
    pub fn with_latency_floor(
        s: Vec<&'a CounterEpoch>,
        r: Vec<&'a CounterEpoch>,
        floor: LatencyFloor,
    ) -> Result<Self, QueryError> {
        let first = s.first().ok_or(QueryError::NoEpochs { side: "S" })?;
        if r.is_empty() {
            return Err(QueryError::NoEpochs { side: "R" });
        }
        let cfg = first.data.config().clone();
        let fp = cfg.fingerprint();
        for (side, list) in [("S", &s), ("R", &r)] {
            for e in list.iter() {
                if e.data.config() != &cfg {
                    return Err(QueryError::ConfigMismatch {
                        what: format!("epoch {} of point {} at {side}", e.seq, e.point),
                        ours: fp,
                        theirs: e.data.config().fingerprint(),
                    });
                }
            }
        }
        let n = cfg.counters as usize;
        let tick = i128::from(cfg.tick_ns.max(1));
        let mut floor_ticks = match floor {
            LatencyFloor::Fixed(ns) => i128::from(ns).div_euclid(tick),
            LatencyFloor::Derived => 0,
        };
        let mut floor_cells = 0;
        let mut noise = NoiseSums::default();
        let delta = |i: usize| {
            let ss: u128 = s.iter().map(|e| e.data.sum(i) as u128).sum();
            let rs: u128 = r.iter().map(|e| e.data.sum(i) as u128).sum();
            rs as i128 - ss as i128
        };
        let count =
            |l: &[&CounterEpoch], i: usize| l.iter().map(|e| e.data.count(i).unwrap_or(0)).sum::<u64>();
        for i in 0..n {
            let d = delta(i) as f64;
            noise.sum_d += d;
            noise.sum_d2 += d * d;
        }
        if cfg.packet_counts {
            let mut clean_counts = Vec::with_capacity(n);
            let mut single = Vec::new();
            for i in 0..n {
                let (ks, kr) = (count(&s, i), count(&r, i));
                noise.count_difference += kr as i128 - ks as i128;
                if ks == kr {
                    clean_counts.push(ks);
                }
                if ks == 1 && kr == 1 && floor == LatencyFloor::Derived {
                    single.push(delta(i));
                }
            }
            if let Some(f) = derived_floor_ticks(&mut single) {
                floor_ticks = f;
                floor_cells = single.len();
            }
            if !clean_counts.is_empty() {
                let q = ((clean_counts.len() - 1) as f64 * K_CUT_QUANTILE) as usize;
                let (_, kq, _) = clean_counts.select_nth_unstable(q);
                noise.k_cut = *kq;
            }
            let mut by_count: std::collections::BTreeMap<u64, RefSums> = Default::default();
            for i in 0..n {
                let (ks, kr, d) = (count(&s, i), count(&r, i), delta(i));
                if ks == kr && above_floor(d, ks, floor_ticks) {
                    by_count.entry(ks).or_default().add(d, ks, 1.0);
                }
            }
            let mut acc = RefSums::default();
            noise.reference = by_count
                .into_iter()
                .map(|(k, sums)| {
                    acc.merge(&sums);
                    (k, acc)
                })
                .collect();
        }
        let total = |l: &[&CounterEpoch]| l.iter().map(|e| e.data.total_ticks()).sum::<u128>();
        let packets = |l: &[&CounterEpoch]| l.iter().map(|e| e.data.packets()).sum::<u64>();
        let flags = s.iter().chain(r.iter()).fold(0u8, |f, e| f | e.flags);
        Ok(Self {
            map: CellMap::new(&cfg),
            total_s: total(&s),
            total_r: total(&r),
            packets_s: packets(&s),
            packets_r: packets(&r),
            cfg,
            s,
            r,
            flags,
            noise,
            floor_ticks,
            floor_used: FloorUsed {
                floor_ns: i64::try_from(floor_ticks.saturating_mul(tick)).unwrap_or(i64::MIN),
                derived: floor_cells > 0,
                cells: floor_cells,
            },
        })
    }

    /// The latency floor this segment uses and where it came from.
    pub fn latency_floor(&self) -> FloorUsed {
        self.floor_used
    }

    /// The configuration shared by every epoch of the segment.
    pub fn config(&self) -> &ColateConfig {
        &self.cfg
    }

    /// Eq 4 for one point's epochs: t̃_{f,X} = (n·Σ_j S\[j\] − m·t_X)/(n − m), summed over the
    /// epochs (linear, so the same as Eq 4 on their sum). Ticks.
    pub fn flow_sum(&self, flow_hash: u64, receiver: bool) -> f64 {
        let cells = self.map.subvector(flow_hash);
        let (epochs, total) = if receiver { (&self.r, self.total_r) } else { (&self.s, self.total_s) };
        let sub: u128 =
            epochs.iter().map(|e| cells.iter().map(|&i| e.data.sum(i) as u128).sum::<u128>()).sum();
        eq4(sub, total, self.cfg.counters as u64, self.cfg.cells_per_flow as u64)
    }

    /// Answers one flow query. `packets` is p_f, supplied by the caller (NetFlow or a packet
    /// counter; COLATE does not measure it).
    pub fn query(&self, flow_hash: u64, packets: u64, opts: &QueryOptions) -> FlowLatencyReport {
        let cfg = &self.cfg;
        let n = cfg.counters as u64;
        let m = cfg.cells_per_flow as usize;
        let (nf, mf) = (n as f64, m as f64);
        let tick = cfg.tick_ns as f64;
        let cells = self.map.subvector(flow_hash);

        // Per-point, per-cell sums over epochs (exact), per-epoch Eq 4 and Eq 7.
        let side = |epochs: &[&CounterEpoch]| {
            let mut sums = vec![0u128; m];
            let mut counts = vec![0u64; m];
            let mut offset = 0.0;
            for e in epochs {
                let mut sub = 0u128;
                for (j, &i) in cells.iter().enumerate() {
                    sums[j] += e.data.sum(i) as u128;
                    counts[j] += e.data.count(i).unwrap_or(0);
                    sub += e.data.sum(i) as u128;
                }
                let t = e.data.total_ticks();
                let t_f = eq4(sub, t, n, m as u64);
                offset += ml_foreign_offset(t as f64 - t_f, nf);
            }
            (sums, counts, offset)
        };
        let (sums_s, counts_s, xi_s) = side(&self.s);
        let (sums_r, counts_r, xi_r) = side(&self.r);
        let delta: Vec<i128> = sums_r.iter().zip(&sums_s).map(|(&r, &s)| r as i128 - s as i128).collect();
        let sub_s: u128 = sums_s.iter().sum();
        let sub_r: u128 = sums_r.iter().sum();
        let t_s = eq4(sub_s, self.total_s, n, m as u64);
        let t_r = eq4(sub_r, self.total_r, n, m as u64);

        // Noise variance of one cell, from the cells outside the flow's subvector.
        let own_d: f64 = delta.iter().map(|&d| d as f64).sum();
        let own_d2: f64 = delta.iter().map(|&d| (d as f64) * (d as f64)).sum();
        let others = nf - mf;
        let noise_mean = (self.noise.sum_d - own_d) / others;
        let noise_var = ((self.noise.sum_d2 - own_d2) / others - noise_mean * noise_mean).max(0.0);

        let mismatched =
            cfg.packet_counts.then(|| counts_s.iter().zip(&counts_r).filter(|(a, b)| a != b).count() as u32);
        let swapped = cfg.packet_counts.then(|| {
            delta
                .iter()
                .zip(counts_s.iter().zip(&counts_r))
                .filter(|&(&d, (&a, &b))| a == b && !above_floor(d, a, self.floor_ticks))
                .count() as u32
        });
        let one_sided =
            |x: &[u64], y: &[u64]| x.iter().zip(y).map(|(a, b)| a.saturating_sub(*b)).sum::<u64>();
        let diagnostics = QueryDiagnostics {
            epochs_s: self.s.iter().map(|e| e.seq).collect(),
            epochs_r: self.r.iter().map(|e| e.seq).collect(),
            packets_s: self.packets_s,
            packets_r: self.packets_r,
            flags: self.flags,
            noise_variance_ticks2: noise_var,
            mismatched_flow_cells: mismatched,
            count_difference: cfg
                .packet_counts
                .then(|| self.noise.count_difference.clamp(i64::MIN as i128, i64::MAX as i128) as i64),
            swapped_flow_cells: swapped,
            flow_packets_missing_at_r: cfg.packet_counts.then(|| one_sided(&counts_s, &counts_r)),
            flow_packets_extra_at_r: cfg.packet_counts.then(|| one_sided(&counts_r, &counts_s)),
            latency_floor: self.floor_used,
        };
        let paper_mean_suspect = match (mismatched, swapped) {
            (Some(a), Some(b)) if a + b > 0 => Some(format!(
                "{a} of the flow's cells differ in count and {b} hold swapped packets at S and R; \
                 Eq 3 adds their timestamps"
            )),
            _ => None,
        };
        let mut report = FlowLatencyReport {
            flow_hash,
            packets,
            mean_ns: Err(NoEstimate::NoPackets),
            std_dev_paper_ns: Err(NoEstimate::NoPackets),
            std_dev_counts_ns: Err(NoEstimate::Other { detail: "packet counts are not enabled".into() }),
            mean_counts_ns: Err(NoEstimate::Other { detail: "packet counts are not enabled".into() }),
            usable_flow_cells: None,
            mean_counts_std_error_ns: None,
            mean_clipped: false,
            reliable: false,
            unreliable_reason: None,
            paper_mean_suspect,
            flow_sum_s_ticks: t_s,
            flow_sum_r_ticks: t_r,
            ml_offset_s_ticks: xi_s,
            ml_offset_r_ticks: xi_r,
            second_moment_ticks2: 0.0,
            paper_variance_clamped: false,
            counts_variance_clamped: false,
            mean_relative_half_width: None,
            meets_beta: None,
            targeted: opts.t_min_ticks.map(|t| t_s >= t),
            paper_model: None,
            diagnostics,
        };
        if self.flags & flags::COUNTER_WRAPPED != 0 {
            let e = NoEstimate::Other {
                detail: "a u64 counter wrapped in an epoch used: its sums are unusable".into(),
            };
            report.mean_ns = Err(e.clone());
            report.std_dev_paper_ns = Err(e.clone());
            report.std_dev_counts_ns = Err(e.clone());
            report.mean_counts_ns = Err(e);
            report.unreliable_reason = Some("a counter wrapped".into());
            return report;
        }
        if packets == 0 {
            report.unreliable_reason = Some("no packets".into());
            return report;
        }
        let pf = packets as f64;
        let z = two_sided_z(opts.level);

        // Eq 3 in exact integers: (n·Σ_j Δ_j − m·(t_R − t_S)) / ((n − m)·p_f).
        let sum_delta: i128 = delta.iter().sum();
        let num = (n as i128)
            .checked_mul(sum_delta)
            .zip((m as i128).checked_mul(self.total_r as i128 - self.total_s as i128))
            .and_then(|(a, b)| a.checked_sub(b));
        let mean_ticks = num.map_or(f64::NAN, |num| num as f64 / ((nf - mf) * pf));
        let se_ticks = nf * (mf * noise_var).sqrt() / ((nf - mf) * pf);
        report.mean_ns = Estimate::new(mean_ticks * tick, packets)
            .map(|e| e.with_half_width(opts.level, z * se_ticks * tick));
        let rel = z * se_ticks / mean_ticks.abs();
        if report.mean_ns.is_ok() && rel.is_finite() {
            report.mean_relative_half_width = Some(rel);
            report.meets_beta = opts.beta.map(|b| rel <= b);
        }
        report.paper_model = paper_model(t_s, t_r, self.total_s as f64, self.total_r as f64, nf, mf, z);

        // The paper's std-dev: D_j = w̃_R[j] − w̃_S[j] (offsets ξ* included, they cancel below).
        if packets < 2 {
            report.std_dev_paper_ns = Err(NoEstimate::TooFewSamples { have: packets, need: 2 });
        } else {
            let d: Vec<f64> = delta.iter().map(|&x| x as f64 - (xi_r - xi_s)).collect();
            let s2 = match opts.repetitions {
                Repetitions::Exact => second_moment_exact(&d),
                Repetitions::Random { gamma, seed } => second_moment_pairings(&d, gamma, seed ^ flow_hash),
            };
            report.second_moment_ticks2 = s2;
            let var = s2 / pf - mean_ticks * mean_ticks;
            report.paper_variance_clamped = var < 0.0;
            let sd = var.max(0.0).sqrt();
            // Ŝ₂·(m − 1)/Ŝ₂-true ≈ χ²_{m−1} (noise-free, normal cells; spec §8 P2).
            let df = mf - 1.0;
            let a = 1.0 - opts.level;
            let lo =
                (s2 * df / chi2_quantile(df, 1.0 - a / 2.0) / pf - mean_ticks * mean_ticks).max(0.0).sqrt();
            let hi = (s2 * df / chi2_quantile(df, a / 2.0) / pf - mean_ticks * mean_ticks).max(0.0).sqrt();
            report.std_dev_paper_ns =
                Estimate::new(sd * tick, packets).map(|e| with_interval(e, opts.level, lo * tick, hi * tick));
        }

        if cfg.packet_counts {
            let flow = FlowCells { delta: &delta, counts_s: &counts_s, counts_r: &counts_r };
            match self.counts_view(&flow, packets) {
                Ok(v) => {
                    report.usable_flow_cells = Some(v.used.len() as u32);
                    report.mean_counts_std_error_ns = v.se.is_finite().then_some(v.se * tick);
                    // The sampling part rests on |J| cells: Student's t with |J| − 1 degrees of
                    // freedom where it enters (a heavy-tailed flow's few cells understate it).
                    let k = if v.sampled {
                        student_t_two_sided(v.used.len() as f64 - 1.0, opts.level)
                    } else {
                        z
                    };
                    let (mean, clipped) = self.clip_to_floor(v.mean, k * v.se, opts.level, packets);
                    report.mean_clipped = clipped;
                    report.mean_counts_ns = mean;
                    report.std_dev_counts_ns =
                        self.std_dev_counts(&v, packets, opts, &mut report.counts_variance_clamped);
                }
                Err(e) => {
                    report.mean_counts_ns = Err(e.clone());
                    report.std_dev_counts_ns = Err(e);
                }
            }
        }
        let recorded = if cfg.packet_counts { &report.mean_counts_ns } else { &report.mean_ns };
        report.unreliable_reason = reliability(recorded, report.mean_clipped, opts.reliable_half_width);
        report.reliable = report.unreliable_reason.is_none();
        report
    }

    /// μ̂ ± half (ticks) as an estimate in ns, raised to the latency floor where it fell below
    /// it (a mean below the smallest possible latency is impossible, so the floor is the
    /// closest admissible value); the interval is clipped the same way.
    fn clip_to_floor(&self, mean: f64, half: f64, level: f64, packets: u64) -> (Measured<Estimate>, bool) {
        let tick = self.cfg.tick_ns as f64;
        let floor = self.floor_ticks as f64;
        let clipped = mean < floor;
        let est = Estimate::new(mean.max(floor) * tick, packets).map(|mut e| {
            if half.is_finite() {
                e.interval = Some(ConfidenceInterval {
                    level,
                    low: (mean - half).max(floor) * tick,
                    high: (mean + half).max(floor) * tick,
                });
            }
            e
        });
        (est, clipped)
    }

    /// The count extension's view of one flow (ours, spec §8 P2): the usable cells J, the
    /// reference statistics without them, the flow's mean from J and its interval.
    ///
    /// J holds the flow's cells whose counts agree at S and R (no boundary, lost or extra packet
    /// landed there), whose Δ_j is not below c_j·floor (no swap: counts can agree over different
    /// packets, see [`Segment::with_floor`]) and whose count c_j stays within
    /// p_f/m + 5·√(p_f/m) + k_cut (no chunk of another large flow). With the reference cells'
    /// mean foreign latency Δ̄ and count K̄, the flow's latency in J is Σ_J Δ_j − |J|·Δ̄ and its
    /// packets in J are Σ_J c_j − |J|·K̄: their ratio is the mean (Eq 4 restricted to J, divided
    /// by the counted packets rather than p_f·|J|/m, which removes the subsampling error).
    ///
    /// Its standard error has three parts, all from the same cells (ours):
    /// - **sampling**: J is a random |J| of the flow's m cells (the hash places packets
    ///   independently of their latency, and a cell drops out for what happens to *some* packet
    ///   in it), so μ̂ is a ratio estimator over a simple random sample of cells without
    ///   replacement: Var = (1 − |J|/m)·|J|/(|J| − 1)·Σ_J A_j²/P², P the own packets, A_j the
    ///   flow's own deviation in cell j, Σ A_j² = Σ r_j² − |J|·ν̂ (r_j below, ν̂ the foreign
    ///   variance). It vanishes when every cell is used.
    /// - **foreign**: |J|·ν̂/P², the reference cells' variance of Δ_i − μ̂·K_i per cell.
    /// - **ticks**: each latency is a difference of two floored tick counts, off by U − U′ with
    ///   U, U′ uniform on [0, 1): variance 1/6 tick² per packet, P/6/P² for the mean.
    fn counts_view(&self, flow: &FlowCells<'_>, packets: u64) -> Result<CountsView, NoEstimate> {
        let m = self.cfg.cells_per_flow as f64;
        let share = packets as f64 / m;
        let allowance = 5.0 * share.sqrt() + self.noise.k_cut as f64;
        let cap = share + allowance;
        let mut reference = self.noise.reference_upto(allowance);
        let mut used = Vec::with_capacity(flow.delta.len());
        for ((&d, &cs), &cr) in flow.delta.iter().zip(flow.counts_s).zip(flow.counts_r) {
            let clean = cs == cr && above_floor(d, cs, self.floor_ticks);
            if clean && cs as f64 <= allowance {
                reference.add(d, cs, -1.0);
            }
            if clean && (cs as f64) <= cap {
                used.push((d, cs));
            }
        }
        if reference.cells < 2 {
            return Err(NoEstimate::NoUsableCells);
        }
        if used.is_empty() {
            return Err(NoEstimate::Other {
                detail: "every cell of the flow is contaminated (counts differ, packets swapped or too many)"
                    .into(),
            });
        }
        // Fewer than half the cells: the spread of so few cells cannot bound what the left-out
        // cells held (one slow packet among them moves a heavy-tailed flow's mean by more than
        // the survivors show), so no mean rather than one with a false interval.
        if (used.len() as f64) < MIN_USABLE_SHARE * m {
            return Err(NoEstimate::Other {
                detail: format!(
                    "only {} of the flow's {} cells are usable (the rest hold lost, in-flight or swapped \
                     packets): fewer than half cannot bound the mean",
                    used.len(),
                    m
                ),
            });
        }
        let (md, mk) = reference.means();
        let j = used.len() as f64;
        let latency: f64 = used.iter().map(|u| u.0 as f64).sum::<f64>() - j * md;
        let own: f64 = used.iter().map(|u| u.1 as f64).sum::<f64>() - j * mk;
        if own < 1.0 {
            return Err(NoEstimate::Other { detail: "no packets of the flow in its usable cells".into() });
        }
        let mean = latency / own;
        let nu = reference.variance(mean);
        let ss: f64 = used.iter().map(|&(d, c)| ((d as f64 - md) - mean * (c as f64 - mk)).powi(2)).sum();
        let own_ss = (ss - j * nu).max(0.0);
        let sampled = j < m;
        let sampling = if used.len() >= 2 { (1.0 - j / m).max(0.0) * j / (j - 1.0) * own_ss } else { 0.0 };
        let se = ((sampling + j * nu + own / 6.0) / (own * own)).sqrt();
        // One usable cell of several leaves the sampling part unknown: no interval.
        let se = if used.len() < 2 && sampled { f64::NAN } else { se };
        Ok(CountsView { used, reference, mean, se, own, sampled })
    }

    /// σ̂ from the counts (ours, after spec §8 P2). Over the usable cells J,
    /// r_j = (Δ_j − Δ̄) − μ̂·(c_j − K̄) = A_j + B_j with A_j = Σ_own (d − μ) the flow's deviation
    /// in the cell and B_j the centred foreign part. The hash allocates the flow's packets to
    /// its cells uniformly, so E[A_j²] = (1 − 1/m)·p_f·σ²/m exactly (multinomial allocation of
    /// deviations summing to 0), whatever the latencies' correlation; E[B_j²] is the reference
    /// cells' variance of Δ_i − μ̂·K_i. Hence σ̂² = (Σ_J r_j² − |J|·ν̂) / ((1 − 1/m)·p_f·|J|/m).
    /// Unlike the paper's pairings no μ²·(c_a − c_b)² term enters, so the error does not grow
    /// with μ/σ. Interval: Σ_J A_j² ≈ σ²-scaled χ²_{|J|−1}.
    fn std_dev_counts(
        &self,
        v: &CountsView,
        packets: u64,
        opts: &QueryOptions,
        clamped: &mut bool,
    ) -> Measured<Estimate> {
        if packets < 2 {
            return Err(NoEstimate::TooFewSamples { have: packets, need: 2 });
        }
        if v.used.len() < 2 {
            return Err(NoEstimate::TooFewSamples { have: v.used.len() as u64, need: 2 });
        }
        let (md, mk) = v.reference.means();
        let ss: f64 = v.used.iter().map(|&(d, c)| ((d as f64 - md) - v.mean * (c as f64 - mk)).powi(2)).sum();
        let j = v.used.len() as f64;
        let m = self.cfg.cells_per_flow as f64;
        // E[Σ_J A_j²] = (1 − 1/m)·σ²·(the flow's packets in J): counted in J, not p_f·|J|/m,
        // so a census that over-counts p_f (LDS's Count-Min) or a cell dropped for loss does
        // not bias σ̂.
        let scale = (1.0 - 1.0 / m) * v.own;
        let own_ss = ss - j * v.reference.variance(v.mean);
        let var = own_ss / scale;
        *clamped = var < 0.0;
        let df = j - 1.0;
        let a = 1.0 - opts.level;
        let tick = self.cfg.tick_ns as f64;
        let lo = (own_ss.max(0.0) * df / chi2_quantile(df, 1.0 - a / 2.0) / scale).sqrt();
        let hi = (own_ss.max(0.0) * df / chi2_quantile(df, a / 2.0) / scale).sqrt();
        Estimate::new(var.max(0.0).sqrt() * tick, packets)
            .map(|e| with_interval(e, opts.level, lo * tick, hi * tick))
    }
}

/// The flow's cells at both points: Δ_j = R − S sums, and the packet counts.
struct FlowCells<'x> {
    delta: &'x [i128],
    counts_s: &'x [u64],
    counts_r: &'x [u64],
}

/// See [`Segment::counts_view`].
struct CountsView {
    /// (Δ_j, c_j) of the usable cells.
    used: Vec<(i128, u64)>,
    /// Reference sums without the flow's cells.
    reference: RefSums,
    /// μ̂ (ticks).
    mean: f64,
    /// Its standard error (ticks; NaN when unknown).
    se: f64,
    /// The flow's packets counted in J (Σ_J c_j − |J|·K̄).
    own: f64,
    /// Whether J is a sample of the flow's cells (|J| < m), so the sampling part enters.
    sampled: bool,
}

/// Whether a cell whose counts agree at S and R can hold the same packets at both: its Δ (a
/// sum of `count` latencies if so) is not below `count`·floor (ticks).
fn above_floor(delta: i128, count: u64, floor_ticks: i128) -> bool {
    delta >= i128::from(count).saturating_mul(floor_ticks)
}

/// Why a recorded mean is not reliable (`None` when it is).
fn reliability(mean: &Measured<Estimate>, clipped: bool, max_half_width: f64) -> Option<String> {
    let e = match mean {
        Ok(e) => e,
        Err(e) => return Some(format!("no estimate: {e}")),
    };
    if clipped {
        return Some("the estimate fell below the latency floor and was clipped to it".into());
    }
    let Some(i) = e.interval else { return Some("no interval (too few usable cells)".into()) };
    let half = (i.high - i.low) / 2.0;
    if half.is_nan() || half > max_half_width * e.value.abs() {
        return Some(format!(
            "interval half-width {half:.0} ns is more than {max_half_width} of the estimate {:.0} ns",
            e.value
        ));
    }
    None
}

/// One flow's estimates from the epochs of S and R a selection chose (see
/// [`super::select_aligned`]): [`Segment::new`] then [`Segment::query`]. Build a [`Segment`]
/// yourself to answer many flows over the same epochs.
pub fn estimate(
    sender: Vec<&CounterEpoch>,
    receiver: Vec<&CounterEpoch>,
    flow_hash: u64,
    packets: u64,
    opts: &QueryOptions,
) -> Result<FlowLatencyReport, QueryError> {
    Ok(Segment::new(sender, receiver)?.query(flow_hash, packets, opts))
}

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

fn with_interval(mut e: Estimate, level: f64, low: f64, high: f64) -> Estimate {
    if low.is_finite() && high.is_finite() {
        e.interval = Some(ConfidenceInterval { level, low, high });
    }
    e
}

/// Corrected Eq 21 at the flow's own t̃ with the epoch sum in place of T, per point, and the
/// β it implies through Eq 12.
fn paper_model(t_s: f64, t_r: f64, total_s: f64, total_r: f64, n: f64, m: f64, k: f64) -> Option<PaperModel> {
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
