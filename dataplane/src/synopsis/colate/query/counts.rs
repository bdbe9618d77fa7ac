//! The count extension (ours, spec §8 P2): with packet counts, a flow's mean and σ̂ from its
//! usable cells (counts that agree at S and R, Δ not below the floor, no chunk of another large
//! flow), net of the reference cells' foreign latency and count.

use super::noise::RefSums;
use super::paper::with_interval;
use super::{QueryOptions, Segment, above_floor};
use crate::synopsis::estimate::{Estimate, Measured, NoEstimate};
use crate::synopsis::quantile::chi2_quantile;

/// The share of a flow's cells the count mean needs (see `Segment::counts_view`).
const MIN_USABLE_SHARE: f64 = 0.5;

impl Segment<'_> {
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
    ///   variance). It vanishes when every cell is used. Under a heavy tail a few surviving
    ///   cells most often miss the flow's slow packets and then show almost no spread, so
    ///   this part is taken at least as large as it would be for packets with the spread of
    ///   the reference cells' (the other flows' packets, pooled: σ²_pool =
    ///   Σ (Δ_i − μ_p·K_i)² / Σ K_i), i.e. (1 − |J|/m)·P·σ²_pool. Without that floor a flow
    ///   that lost the cells of its two slow packets read 36 µs ± 11 µs against a truth of
    ///   148 µs (docs/colate.md, "The standard error under a heavy tail").
    /// - **foreign**: |J|·ν̂/P², the reference cells' variance of Δ_i − μ̂·K_i per cell.
    /// - **ticks**: each latency is a difference of two floored tick counts, off by U − U′ with
    ///   U, U′ uniform on [0, 1): variance 1/6 tick² per packet, P/6/P² for the mean.
    pub(super) fn counts_view(&self, flow: &FlowCells<'_>, packets: u64) -> Result<CountsView, NoEstimate> {
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
        // The flow's packets in J are counted net of the reference cells' mean count, so one
        // packet reads as 1 − |J|·K̄: a lone packet in a vector with any foreign packets falls
        // short of 1 (it used to be refused here). The cut is midway between none and one.
        if own < 0.5 {
            return Err(NoEstimate::Other { detail: "no packets of the flow in its usable cells".into() });
        }
        let mean = latency / own;
        let nu = reference.variance(mean);
        let ss: f64 = used.iter().map(|&(d, c)| ((d as f64 - md) - mean * (c as f64 - mk)).powi(2)).sum();
        let own_ss = (ss - j * nu).max(0.0);
        let sampled = j < m;
        let sampling = if used.len() >= 2 { (1.0 - j / m).max(0.0) * j / (j - 1.0) * own_ss } else { 0.0 };
        // The left-out cells' packets, had they the spread of the other flows' packets this
        // epoch: (1 − |J|/m)·σ²_pool/P as Var(μ̂), here scaled by P² like `sampling`.
        let pooled = (1.0 - j / m).max(0.0) * own * reference.per_packet_variance();
        let sampling = sampling.max(pooled);
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
    pub(super) fn std_dev_counts(
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
pub(super) struct FlowCells<'x> {
    pub(super) delta: &'x [i128],
    pub(super) counts_s: &'x [u64],
    pub(super) counts_r: &'x [u64],
}

/// See [`Segment::counts_view`].
pub(super) struct CountsView {
    /// (Δ_j, c_j) of the usable cells.
    pub(super) used: Vec<(i128, u64)>,
    /// Reference sums without the flow's cells.
    reference: RefSums,
    /// μ̂ (ticks).
    pub(super) mean: f64,
    /// Its standard error (ticks; NaN when unknown).
    pub(super) se: f64,
    /// The flow's packets counted in J (Σ_J c_j − |J|·K̄).
    pub(super) own: f64,
    /// Whether J is a sample of the flow's cells (|J| < m), so the sampling part enters.
    pub(super) sampled: bool,
}
