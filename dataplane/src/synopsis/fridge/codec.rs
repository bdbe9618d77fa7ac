//! Sparse encoding of the fridge's histograms: only bins holding samples are written, as
//! (flat index u32, samples u64, Σc f64, Σc² f64, min delay u64, max delay u64) after a u32
//! count (format 2; format 1 had no extremes). The decoder checks the
//! count against the configured histogram size before reading entries, and every value against
//! what a fridge can produce (1 ≤ c ≤ e^300, so samples ≤ Σc ≤ samples·e^300 and
//! Σc ≤ Σc² ≤ Σc·e^300), and the extremes against the bin's edges. The upper bounds keep every sum the report forms finite. Never
//! panics and never allocates on any input.

use super::accum::BinStats;
use super::bins::LogBins;
use crate::synopsis::codec::{DecodeError, Reader, Writer};

/// Bytes of one encoded bin.
const ENTRY_BYTES: usize = 4 + 8 + 8 + 8 + 8 + 8;
/// Relative slack for the float invariants (sums of many rounded terms).
const SLACK: f64 = 1e-9;
/// Above any weight a bin can hold: e^(MAX_LN_WEIGHT + 1), a factor e of margin over the
/// largest c the accumulators accept. With it Σ over all bins of Σc stays below
/// 2^64·e^301 ≈ 10^150 and of Σc² below ≈ 10^281, so no report sum overflows to ∞.
fn weight_bound() -> f64 {
    (super::set::MAX_LN_WEIGHT + 1.0).exp()
}

/// Writes the non-empty bins of `hist`.
pub(super) fn encode_hist(hist: &[BinStats], w: &mut Writer<'_>) {
    let n = hist.iter().filter(|b| b.samples != 0).count();
    w.reserve(4 + n * ENTRY_BYTES);
    w.u32(n as u32);
    for (i, b) in hist.iter().enumerate().filter(|(_, b)| b.samples != 0) {
        w.u32(i as u32);
        w.u64(b.samples);
        w.f64(b.weight_sum);
        w.f64(b.weight_sq_sum);
        w.u64(b.min_ns);
        w.u64(b.max_ns);
    }
}

fn invalid(field: &'static str, reason: String) -> DecodeError {
    DecodeError::Invalid { field, reason }
}

/// Reads bins written by [`encode_hist`] into the zeroed `hist`, whose histograms each have
/// `bins`' layout.
pub(super) fn decode_hist(
    hist: &mut [BinStats],
    bins: &LogBins,
    r: &mut Reader<'_>,
) -> Result<(), DecodeError> {
    let n = r.u32()? as usize;
    if n > hist.len() {
        return Err(invalid("fridge.bins", format!("{n} non-empty bins but histograms hold {}", hist.len())));
    }
    r.require(n * ENTRY_BYTES)?;
    let mut next = 0usize;
    for _ in 0..n {
        let i = r.u32()? as usize;
        let samples = r.u64()?;
        let sum = r.f64()?;
        let sq = r.f64()?;
        let (min_ns, max_ns) = (r.u64()?, r.u64()?);
        if i < next || i >= hist.len() {
            return Err(invalid(
                "fridge.bin_index",
                format!("bin {i} out of order or beyond {}", hist.len()),
            ));
        }
        next = i + 1;
        let c_max = weight_bound();
        let plausible = samples > 0
            && sum.is_finite()
            && sq.is_finite()
            && sum >= samples as f64 * (1.0 - SLACK)
            && sq >= sum * (1.0 - SLACK)
            && sum <= samples as f64 * c_max
            && sq <= sum * c_max;
        if !plausible {
            return Err(invalid(
                "fridge.bin",
                format!("bin {i}: samples {samples}, Σc {sum}, Σc² {sq} cannot come from a fridge"),
            ));
        }
        let bin = i % bins.len();
        let inside = |d: u64| d >= bins.low_ns(bin) && bins.high_ns(bin).is_none_or(|hi| d < hi);
        if min_ns > max_ns || !inside(min_ns) || !inside(max_ns) || (samples == 1 && min_ns != max_ns) {
            return Err(invalid(
                "fridge.bin_extremes",
                format!("bin {i}: delays {min_ns}..={max_ns} ns with {samples} samples do not fit the bin"),
            ));
        }
        if let Some(b) = hist.get_mut(i) {
            *b = BinStats { samples, weight_sum: sum, weight_sq_sum: sq, min_ns, max_ns };
        }
    }
    Ok(())
}
