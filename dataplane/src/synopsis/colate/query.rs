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
use super::stats::ml_foreign_offset;
use crate::synopsis::estimate::{ConfidenceInterval, Estimate, Measured, NoEstimate};
use crate::synopsis::quantile::{chi2_quantile, student_t_two_sided, two_sided_z};
use crate::synopsis::{Synopsis, SynopsisConfig};

mod counts;
mod floor;
mod noise;
mod options;
mod paper;
mod report;

use counts::FlowCells;
use floor::derived_floor_ticks;
pub use floor::{FLOOR_MIN_CELLS, FloorUsed, LatencyFloor};
use noise::{NoiseSums, RefSums};
pub use options::{DEFAULT_RELIABLE_HALF_WIDTH, QueryError, QueryOptions, Repetitions};
pub use paper::{
    distinct_pairings, eq4, ordered_pairing_sequences, same_subvector_probability, second_moment_exact,
    second_moment_pairings,
};
use paper::{paper_model, with_interval};
pub use report::{FlowLatencyReport, PaperModel, QueryDiagnostics};

/// The quantile of the reference cells' counts above which a cell counts as holding a chunk of a
/// large flow.
const K_CUT_QUANTILE: f64 = 0.995;
/// In a sparse segment (fewer than [`FLOOR_MIN_CELLS`] single-packet cells) a count mean is
/// reliable only if its usable cells hold at least this share of the flow's packets (`p_f`, as
/// the caller counted them).
const MIN_OWN_SHARE: f64 = 0.5;

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
    /// The floor was to be derived but too few single-packet cells allowed it: it is 0, which
    /// assumes the clocks agree. A flow with cells below it is then not reliable.
    floor_assumed: bool,
    /// Single-packet cells (counts 1 at both points) the segment has, whatever the floor's mode:
    /// fewer than [`FLOOR_MIN_CELLS`] make it sparse.
    single_cells: usize,
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
        let mut single_cells = 0;
        let mut noise = NoiseSums::default();
        let delta = |i: usize| {
            let ss: u128 = s.iter().map(|e| e.data.sum(i) as u128).sum();
            let rs: u128 = r.iter().map(|e| e.data.sum(i) as u128).sum();
            rs as i128 - ss as i128
        };
        let count =
            |l: &[&CounterEpoch], i: usize| l.iter().map(|e| e.data.count(i).unwrap_or(0)).sum::<u64>();
        // The cells some epoch recorded a packet in, in index order, with (Δ, K_S, K_R). Every
        // other cell has Δ = 0 and K = 0 at both points: it adds 0.0 to every float sum below
        // and only counts as a clean cell of count 0, so the passes run over these alone (a
        // demo window touches a few thousand of 10⁶ cells; the full passes, converting each
        // i128 Δ to f64, took 14 ms per segment: BENCHMARKS.md).
        let untouched = |i: usize| {
            s.iter().chain(r.iter()).all(|e| e.data.sum(i) == 0 && e.data.count(i).unwrap_or(0) == 0)
        };
        let touched: Vec<(i128, u64, u64)> =
            (0..n).filter(|&i| !untouched(i)).map(|i| (delta(i), count(&s, i), count(&r, i))).collect();
        let empty = (n - touched.len()) as u64;
        for &(d, _, _) in &touched {
            let d = d as f64;
            noise.sum_d += d;
            noise.sum_d2 += d * d;
        }
        if cfg.packet_counts {
            let mut clean_counts = Vec::with_capacity(touched.len());
            let mut single = Vec::new();
            for &(d, ks, kr) in &touched {
                noise.count_difference += kr as i128 - ks as i128;
                if ks == kr {
                    clean_counts.push(ks);
                }
                if ks == 1 && kr == 1 {
                    single_cells += 1;
                    if floor == LatencyFloor::Derived {
                        single.push(d);
                    }
                }
            }
            if let Some(f) = derived_floor_ticks(&mut single) {
                floor_ticks = f;
                floor_cells = single.len();
            }
            // The quantile of the clean counts, the `empty` zeros included: they sort first.
            let clean = empty as usize + clean_counts.len();
            if clean > 0 {
                let q = ((clean - 1) as f64 * K_CUT_QUANTILE) as usize;
                noise.k_cut = match q.checked_sub(empty as usize) {
                    None => 0,
                    Some(q) => *clean_counts.select_nth_unstable(q).1,
                };
            }
            let mut by_count: std::collections::BTreeMap<u64, RefSums> = Default::default();
            if empty > 0 {
                // Δ = 0 ≥ 0·floor: each empty cell is a clean reference cell of count 0.
                by_count.entry(0).or_default().cells = empty;
            }
            for &(d, ks, kr) in &touched {
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
        let floor_assumed = floor == LatencyFloor::Derived && cfg.packet_counts && floor_cells == 0;
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
            floor_assumed,
            single_cells,
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

        // The flow's packets the usable cells hold (counted, net of foreign packets).
        let mut own_in_usable = None;
        if cfg.packet_counts {
            let flow = FlowCells { delta: &delta, counts_s: &counts_s, counts_r: &counts_r };
            match self.counts_view(&flow, packets) {
                Ok(v) => {
                    own_in_usable = Some(v.own);
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
        let below = report.diagnostics.swapped_flow_cells.unwrap_or(0);
        if report.unreliable_reason.is_none() && self.floor_assumed && below > 0 {
            // Measured on the real captures with B's clock 3 µs behind: 355 of the 375
            // "reliable" flow-epochs beyond 10 standard errors were these (BENCHMARKS.md).
            report.unreliable_reason = Some(format!(
                "{below} of the flow's cells read below the assumed latency floor of 0 and were left \
                 out: swapped packets, or the receiver's clock behind the sender's; the segment's {} \
                 single-packet cells are too few (under {FLOOR_MIN_CELLS}) to tell",
                self.single_cells
            ));
        }
        if let Some(own) = own_in_usable
            && report.unreliable_reason.is_none()
            && self.single_cells < FLOOR_MIN_CELLS
            && own < MIN_OWN_SHARE * pf
        {
            // The left-out cells hold most of the flow's packets (several in one cell above the
            // cap, or beside a crossing packet): the mean rests on a minority of them, and in a
            // segment this sparse the other flows' spread (the standard error's floor for the
            // left-out cells) rests on next to no packets. Denser segments keep that floor, and
            // their flows their flag (the colate matrix: up to 12 points of reliable share lost
            // to this rule there, none of it beyond 25 %).
            report.unreliable_reason = Some(format!(
                "the usable cells hold {own:.1} of the flow's {packets} packets, fewer than half, in a \
                 segment of {} single-packet cells (under {FLOOR_MIN_CELLS}): too sparse to bound the rest",
                self.single_cells
            ));
        }
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
