//! The latency floor of a segment: the smallest one-way latency any packet can show between the
//! two points' clocks, given or derived from the single-packet cells.

use serde::Serialize;

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

/// How a [`Segment`](super::Segment) sets its latency floor: the smallest one-way latency any packet can show
/// between the two points' clocks (see [`Segment::with_floor`](super::Segment::with_floor)).
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
pub(super) fn derived_floor_ticks(single: &mut [i128]) -> Option<i128> {
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
