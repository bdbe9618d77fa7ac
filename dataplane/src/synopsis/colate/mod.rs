//! COLATE (Shahzad & Liu, SIGMETRICS 2014): per-flow mean and standard deviation of latency
//! between any two points, with no probes and no timestamps in packets. Spec:
//! `shared/specs/colate.md`; paper: `shared/seeds/004_…txt`.
//!
//! This module holds the counter vector and its per-packet update, the counter epochs and their
//! encoding, the epoch selection and estimators of a query, and the parameter sizing. It never
//! does I/O: the control crate's `colate_archive` writes and reads the epochs.
//!
//! # Recording (spec §3, recommended version)
//!
//! Each point keeps one vector of n counters ([`Colate`]). A packet of flow f seen at `ts`
//! adds its tick value u = (ts − O)/tick to one cell: i = (h1 + j·h2) mod n, where (h1, h2) come
//! from the packet layer's `flow_hash` ([`cells`]) and j ∈ [0, m) from the packet `identity`.
//! That is one flow hash mix, one packet hash mix and one add. Two choices differ from the
//! paper's literal text. Both follow spec §8:
//!
//! * **j is a hash of the packet identity**, not a random draw (P1). The same packet lands in
//!   the same cell at every point. Theorem 4 needs this. It also makes foreign noise cancel
//!   into foreign *latencies*. With independent j ([`JMode::PerPointRandom`], kept to show the
//!   failure) the mean is off by 10²–10³ relative.
//! * **n is prime and the step is double hashing** (P7), so a flow's m cells are distinct.
//!
//! Cells are u64 in software. The modelled width b only decides when an epoch must close and
//! the paper's storage accounting. A u128 running total detects a wrapped cell.
//! With `packet_counts` (beyond the paper, spec §8 P2) each cell also counts its packets. The
//! count sits beside the sum, so both adds touch one cache line. [`Colate::update_burst`] does
//! the same for 32 packets at a time, hashing them all before the adds, so a vector larger
//! than the cache keeps many misses in flight (measured in BENCHMARKS.md).
//!
//! # Runtime windows and counter epochs: the design
//!
//! wirelat's runtime cuts time into windows [k·E, (k+1)·E). It merges the per-core shards of a
//! window exactly (wrapping addition), so one `Colate` per window and point reaches the
//! control thread. COLATE's own epochs are closed by the sum threshold T instead. The control
//! side owns an [`EpochAccumulator`] per point. It adds each window into the open counter
//! epoch, and first closes the epoch when that window would push the epoch's tick sum past T
//! or one of its counters past 2^b − 1 (the check before the add, spec P8). A closed
//! [`CounterEpoch`] holds whole windows, the ticks of its first and last packet, and flags for
//! anomalies. The control crate appends it to the point's archive.
//!
//! Why windows and not the paper's per-packet check: a worker cannot close an epoch on a sum
//! that only exists after the cross-core merge. Checking T per window is exact, costs nothing
//! per packet, and the only change is that an epoch may stop short of T by up to one window.
//! That means slightly more epochs and slightly more storage per packet, not less accuracy:
//! Eq 4 is linear, so the estimate over several epochs equals Eq 4 on their sum. (The paper's
//! Eq 7 is per epoch, but its offset cancels in the std-dev, see below.)
//!
//! What does affect accuracy is *which packets* the two points' selections share. Each point
//! closes on its own sum, so its epoch boundaries can fall one window apart from the other
//! point's. The paper's overlap rule ([`epochs_overlapping`]) would then compare unions that
//! differ by whole windows. Every packet in one union but not the other adds noise at timestamp
//! scale (≈ u/p_f per packet in the flow's cells, ≈ m·u/(n·p_f) per packet elsewhere), and
//! nothing cancels it. The query therefore uses [`select_aligned`], which grows both selections
//! until they cover the same windows. What remains are the packets in flight across the two
//! outer window edges (≈ λ·L̄ each). They hit a given flow's cells with probability
//! ≈ 2·λ·L̄·m/n, and then cost ≈ u_edge/p_f. Keep the origin near the measured period (the
//! noise scales with u). With `packet_counts`, the count mean avoids this residue
//! entirely: a cell whose counts differ at S and R is left out.
//!
//! # Queries (spec §4)
//!
//! [`Segment::query`] returns a [`FlowLatencyReport`]:
//!
//! * **Mean**: Eq 4 for t̃_{f,S} and t̃_{f,R}, then Eq 3, computed as
//!   (n·Σ_j Δ_j − m·(t_R − t_S)) / ((n − m)·p_f) in i128 until the final division. The interval
//!   is ours and data-driven. The error is n·Σ_j (F_j − F̄)/((n − m)·p_f), where F_j is the
//!   foreign latency in the flow's cell j. Its variance is estimated by the variance v̂ of
//!   Δ_i = R_i − S_i over the other n − m cells, so SE = n·√(m·v̂)/((n − m)·p_f). This interval
//!   widens by itself when the noise does not cancel.
//! * **Std-dev, paper** (Eq 5–10): Eq 7's maximum-likelihood offset ξ* is solved per epoch
//!   ([`stats::ml_foreign_offset`]), then the deviation vectors of Eq 9 are formed and averaged
//!   over pairings. *The virtual repetitions converge to a closed form*: each pair of cells
//!   is paired with probability 1/(m − 1), so the average over all pairings is exactly
//!   m/(m − 1)·Σ_j (D_j − D̄)². [`Repetitions::Exact`] (the default) computes that limit, and
//!   [`Repetitions::Random`] draws γ seeded pairings as the paper does. ξ* is the same for
//!   every cell of a point, so it cancels in Eq 9 and never changes σ̃ (it is reported).
//!   σ̃² = Ŝ₂/p_f − μ̃² is clamped at 0 with a flag.
//! * **Count extension** (`packet_counts`, beyond the paper, after spec §8 P2): the flow's
//!   *usable* cells J are the ones whose counts agree at S and R (no epoch-edge, lost or extra
//!   packet landed there), whose Δ is not below c·floor (counts can agree over *different*
//!   packets, one out at S and one in at R: a swap, see [`Segment::with_floor`]; W12) and whose
//!   count is not inflated by a chunk of another large flow
//!   (c_j ≤ p_f/m + 5·√(p_f/m) + k_cut, with k_cut the 99.5 % quantile of the clean cells'
//!   counts). The *reference* cells are the vector's other clean cells with at most the
//!   flow's foreign allowance 5·√(p_f/m) + k_cut packets. They give the mean foreign latency
//!   Δ̄ and count K̄ per cell and the foreign variance ν̂. Mean:
//!   (Σ_J Δ_j − |J|·Δ̄)/(Σ_J c_j − |J|·K̄), i.e. latency over *counted* packets, raised to the
//!   floor if below it; its standard error adds cell sampling, foreign noise and tick rounding
//!   (`Segment::counts_view`); fewer than m/2 usable cells give no mean. Std-dev:
//!   r_j = (Δ_j − Δ̄) − μ̂·(c_j − K̄) and σ̂² = (Σ_J r_j² − |J|·ν̂)/((1 − 1/m)·P_J), P_J the
//!   flow's counted packets in J (≈ p_f·|J|/m). This is unbiased because the hash
//!   allocates the flow's packets uniformly to its cells, so E[Σ_j A_j²] = (1 − 1/m)·p_f·σ²
//!   whatever the latencies' correlation. Its interval comes from χ²_{|J|−1}.
//!
//! ## What limits the mean (ours, measured)
//!
//! With consistent j the foreign noise of Eq 3 is at *latency* scale, but it is heavy-tailed.
//! A flow that shares a cell with a larger flow receives that flow's whole per-cell latency
//! mass (p_g/m·μ_g), and Eq 3 cannot remove it. The chance is ≈ m²·(flows in the epoch at
//! least as large)/n. So Eq 3 meets (α, β) only while that stays well below 1 − α
//! (`mean_meets_the_required_reliability_where_the_sizing_holds` vs
//! `crowded_vectors_need_the_count_mean` in the tests). The paper's sizing does not model
//! this: it smears timestamps into unit trials. The count mean drops such cells and divides by
//! counted packets, so only the latency *difference* of a leftover chunk matters.
//!
//! ## Which std-dev (and mean) operators should use
//!
//! **Use the count extension (`packet_counts = true`) whenever σ is wanted or flows share a
//! crowded vector**; use Eq 3's mean alone only for large flows in a sparse vector. Reasons:
//!
//! * The paper's σ̃ is unbiased for Σ d², but even noise-free its relative SD is
//!   ≈ √(2/(m − 1)) (0.32 at m = 20) on σ² + μ², not on σ². Whenever μ ≳ σ (any path with a
//!   base delay), σ̃² = Ŝ₂/p − μ̃² is dominated by that error and often negative. Repetitions
//!   cannot help, because they converge to the closed form above.
//! * The count σ̂'s relative error is ≈ 1/√(2(m − 1)) (0.16 at m = 20) whatever μ/σ is. A 5 %
//!   target still needs m in the hundreds.
//! * The price is twice the memory and about 1.3× the stored bits, and a second add to the
//!   same cache line per packet.
//!
//! Measured side by side in BENCHMARKS.md (`colate_repro`).
//!
//! # Sizing (spec §5)
//!
//! [`sizing::solve`] takes M, α, β, t^min, t^max and the Eq 12 ratio. It uses Eq 11–15 and
//! Eq 22 with the (n − m)² correction ([`sizing::Eq21Form::Corrected`]; the printed form is
//! selectable and makes the paper's own example infeasible). Infeasible targets are refused
//! with the t^min or β that would work. Caveat: the paper's model treats each point's error as
//! independent, at timestamp scale, in tick units. It neither predicts the real error (which
//! cancels) nor is independent of the tick. Use the query's own interval to judge a result.
//!
//! [`coverage::for_coverage`] (ours, W12) derives m instead from the load (largest delay and
//! per-flow rate, loss, query window): the smallest even m that leaves a flow at that load half
//! its cells usable with the target probability, from the exact occupancy distribution.
//!
//! # Negative findings kept as behaviour
//!
//! * Points with different seeds, n, m, tick or origin have different config fingerprints.
//!   Their epochs are refused by `decode`, by [`Segment::new`] and by the archive (P3).
//! * [`JMode::PerPointRandom`] exists only to show that independent j destroys the mean (P1).

pub mod cells;
pub mod config;
pub mod coverage;
pub mod epoch;
pub mod pack;
pub mod query;
pub mod select;
pub mod sizing;
pub mod state;
pub mod stats;
#[cfg(any(test, feature = "sim"))]
pub mod trace;

pub use config::{ColateConfig, JMode};
pub use epoch::{AccumulateError, CounterEpoch, EpochAccumulator, EpochMeta, StorageStats};
pub use query::{
    FloorUsed, FlowLatencyReport, LatencyFloor, QueryDiagnostics, QueryError, QueryOptions, Repetitions,
    Segment, estimate,
};
pub use select::{Selection, epochs_overlapping, select_aligned};
pub use state::Colate;

#[cfg(test)]
mod tests;
