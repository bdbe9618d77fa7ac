//! What a flow query answers: the report, the paper's a-priori model and the diagnostics.

use super::FloorUsed;
use crate::synopsis::estimate::{Estimate, Measured};
use serde::Serialize;

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
    /// hold different packets at S and R (a swap: see [`Segment::with_floor`](super::Segment::with_floor)).
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
