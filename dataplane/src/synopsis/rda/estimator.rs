//! Reconciliation, part 2, and the estimators: repair both points' banks from the peeled
//! difference, then the exact mean from integer sums and the collapsed-bucket standard
//! deviation (spec §4.4–§4.7: Algorithms 2 and 3 with P1, P5, P6, P7 fixed).
//!
//! [`reconcile`] is a pure function of the two points' banks, the decoding point's own cache
//! and a [`TimestampSource`] for the other point (the peer protocol answers it over the
//! network; a simulation passes the other point's cache). It never returns NaN.

use super::banks::Banks;
use super::cache::TimestampSource;
use super::peel::{Difference, PeelGuards, Peeled, Side};
use crate::synopsis::estimate::{Estimate, Measured, NoEstimate};
use serde::{Deserialize, Serialize};

/// The decoding point's own cache and which point it is (the paper: the sender decodes).
#[derive(Clone, Copy)]
pub struct LocalCache<'a> {
    /// Which point this cache belongs to.
    pub side: Side,
    /// Its per-epoch ID → timestamp cache.
    pub cache: &'a dyn TimestampSource,
}

/// What reconciliation did (decode and repair diagnostics).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconciliation {
    /// True when the whole difference was listed and repaired: no residual bucket, no
    /// unconfirmed id, the iteration cap not hit. Then the mean is exact.
    pub complete: bool,
    /// Sender-only ids ("lost" in the paper's terms) confirmed and removed from the sender's
    /// banks.
    pub lost: Vec<u64>,
    /// Receiver-only ids ("reordered") confirmed and removed from the receiver's banks.
    pub reordered: Vec<u64>,
    /// Ids the peeling listed that the point supposedly holding them did not know (false
    /// pures, P4 b); their buckets stay unrepaired and drop out of the estimate.
    pub unconfirmed: Vec<u64>,
    /// Ids decoded and repaired (`lost.len() + reordered.len()`).
    pub decoded: u64,
    /// A lower bound on the difference ids that stayed undecoded.
    pub undecoded_lower_bound: u64,
    /// Buckets of the subtraction RDA that stayed non-empty.
    pub residual_buckets: u64,
    /// Pure-looking buckets refused by the cache or other-bank guards.
    pub rejected_candidates: u64,
    /// Candidates refused because their id had been extracted already (P31).
    pub repeated_candidates: u64,
    /// Buckets popped while peeling.
    pub pops: u64,
    /// True when the iteration cap stopped the peeling.
    pub iteration_cap_hit: bool,
}

/// The RDA estimate of one segment and epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RdaReport {
    /// Mean one-way delay (ns) of the packets seen at both points: exact (up to the final
    /// division) when reconciliation is complete. `samples` = useful bucket weight / k.
    pub mean_ns: Measured<Estimate>,
    /// Standard deviation (ns) from the collapsed useful buckets (population form).
    /// `samples` = collapsed pairs.
    pub std_dev_ns: Measured<Estimate>,
    /// The raw variance estimate F − μ̂² before the clamp at 0 (ns²), when there was one.
    pub variance_ns2: Option<f64>,
    /// True when the variance came out negative and σ was clamped to 0 (P7).
    pub variance_clamped: bool,
    /// Σ over useful buckets of (TS_B − TS_A): the exact integer numerator of the mean (ns).
    pub useful_delay_sum_ns: i128,
    /// Σ over useful buckets of Δ: the denominator of the mean (each packet counted once per
    /// bank in which its bucket is useful).
    pub useful_weight: u64,
    /// Useful bucket pairs (after repair), out of `total_buckets`.
    pub useful_buckets: u64,
    /// k·m.
    pub total_buckets: u64,
    /// Collapsed pairs used by the standard deviation.
    pub collapsed_pairs: u64,
    /// Packets in the sender's banks before repair.
    pub sender_packets: i64,
    /// Packets in the receiver's banks before repair.
    pub receiver_packets: i64,
    /// Decode and repair diagnostics.
    pub reconciliation: Reconciliation,
}

impl RdaReport {
    /// A report that carries only `reason` (e.g. mismatched configurations).
    pub fn unavailable(reason: NoEstimate) -> Self {
        Self {
            mean_ns: Err(reason.clone()),
            std_dev_ns: Err(reason),
            variance_ns2: None,
            variance_clamped: false,
            useful_delay_sum_ns: 0,
            useful_weight: 0,
            useful_buckets: 0,
            total_buckets: 0,
            collapsed_pairs: 0,
            sender_packets: 0,
            receiver_packets: 0,
            reconciliation: Reconciliation::default(),
        }
    }
}

/// `num / den` as f64, computed on the fraction in lowest terms so that equal rationals give
/// bit-identical results (k·Σx / k·N and Σx / N). `den` must not be 0.
pub fn exact_ratio(num: i128, den: i128) -> f64 {
    let g = gcd(num.unsigned_abs(), den.unsigned_abs()).max(1);
    let (n, d) = (num / g as i128, den / g as i128);
    n as f64 / d as f64
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Sums over the useful buckets of a repaired pair of banks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Aggregates {
    /// Σ (TS_B − TS_A), exact.
    pub delay_sum_ns: i128,
    /// Σ Δ.
    pub weight: i128,
    /// Useful buckets.
    pub useful_buckets: u64,
    /// Σ over collapsed pairs of (T̃_B − T̃_A)² (ns²).
    pub sq_sum_ns2: f64,
    /// Σ over collapsed pairs of the collapsed count.
    pub collapsed_count: i128,
    /// Collapsed pairs.
    pub pairs: u64,
}

/// Mean and variance sums of two banks of equal geometry (Algorithm 2 corrected): a bucket
/// pair is useful iff ID_A = ID_B, Δ_A = Δ_B and Δ_A > 0 (P6); within each bank the useful
/// buckets are collapsed in ascending order, pairs (Ψ\[2c\], Ψ\[2c+1\]), an odd leftover unused
/// (P5).
pub fn aggregate(sender: &Banks, receiver: &Banks) -> Aggregates {
    let mut g = Aggregates::default();
    let m = sender.buckets_per_bank();
    for l in 0..sender.banks().min(receiver.banks()) {
        let a = sender.bank(l);
        let b = receiver.bank(l);
        let mut open: Option<usize> = None;
        for i in 0..m.min(a.len()).min(b.len()) {
            let (ai, bi) = (a[i], b[i]);
            if !(ai.id_xor == bi.id_xor && ai.count == bi.count && ai.count > 0) {
                continue;
            }
            g.useful_buckets += 1;
            // TS sums wrap (P12): their difference, read as i64, is the bucket's delay sum.
            g.delay_sum_ns += bi.ts_sum_ns.wrapping_sub(ai.ts_sum_ns) as i64 as i128;
            g.weight += ai.count as i128;
            match open.take() {
                None => open = Some(i),
                Some(p) => {
                    let (ap, bp) = (a[p], b[p]);
                    let a_coll = ap.ts_sum_ns.wrapping_sub(ai.ts_sum_ns);
                    let b_coll = bp.ts_sum_ns.wrapping_sub(bi.ts_sum_ns);
                    // = Σ_{x ∈ p} x − Σ_{x ∈ i} x: exact in i64, squared in f64.
                    let diff = b_coll.wrapping_sub(a_coll) as i64 as f64;
                    g.sq_sum_ns2 += diff * diff;
                    g.collapsed_count += ap.count as i128 + ai.count as i128;
                    g.pairs += 1;
                }
            }
        }
    }
    g
}

/// Mean and standard-deviation estimates from the aggregates of repaired banks with k banks.
/// Returns (mean, std_dev, raw variance, clamped).
pub fn estimates(g: &Aggregates, k: usize) -> (Measured<Estimate>, Measured<Estimate>, Option<f64>, bool) {
    if g.weight <= 0 {
        let e = Err(NoEstimate::NoUsableCells);
        return (e.clone(), e, None, false);
    }
    let k = k.max(1) as i128;
    let mean = exact_ratio(g.delay_sum_ns, g.weight);
    let mean_est = Estimate::new(mean, (g.weight / k) as u64);
    if g.pairs == 0 || g.collapsed_count <= 0 {
        return (mean_est, Err(NoEstimate::TooFewSamples { have: 0, need: 1 }), None, false);
    }
    // Algorithm 3 (P1: F, not F²): σ̂² = SqSum / Count − μ̂²; clamp at 0 (P7).
    let f = g.sq_sum_ns2 / g.collapsed_count as f64;
    let var = f - mean * mean;
    let clamped = var < 0.0;
    let sd = Estimate::new(var.max(0.0).sqrt(), g.pairs);
    (mean_est, sd, var.is_finite().then_some(var), clamped)
}

/// Reconciles the two points' banks of one epoch and estimates (spec §4): subtract, peel with
/// the guards, confirm and repair, aggregate, estimate.
///
/// `local` is the cache of the point that decodes (its own, answered locally, also used by
/// the guards); `remote` answers for the other point. Timestamps of the decoding point's
/// own-side ids come from `local`, of the other side's ids from `remote` (one batched call).
/// Banks of different geometry give a report whose estimates are `ConfigMismatch`.
pub fn reconcile(
    sender: &Banks,
    receiver: &Banks,
    local: LocalCache<'_>,
    remote: &dyn TimestampSource,
    guards: &PeelGuards,
) -> RdaReport {
    let Some(mut diff) = Difference::between(sender, receiver) else {
        return RdaReport::unavailable(NoEstimate::ConfigMismatch);
    };
    let mut probe = Vec::with_capacity(1);
    let mut accept = |id: u64, side: Side| {
        local.cache.lookup(&[id], &mut probe);
        let known_locally = matches!(probe.first(), Some(Some(_)));
        known_locally == (side == local.side)
    };
    let peeled = diff.peel(guards, &mut accept);
    repair_and_estimate(sender, receiver, local, remote, peeled)
}

fn source_for<'a>(
    side: Side,
    local: LocalCache<'a>,
    remote: &'a dyn TimestampSource,
) -> &'a dyn TimestampSource {
    if side == local.side { local.cache } else { remote }
}

fn repair_and_estimate(
    sender: &Banks,
    receiver: &Banks,
    local: LocalCache<'_>,
    remote: &dyn TimestampSource,
    peeled: Peeled,
) -> RdaReport {
    let mut a = sender.clone();
    let mut b = receiver.clone();
    let mut rec = Reconciliation {
        residual_buckets: peeled.residual_buckets,
        undecoded_lower_bound: peeled.undecoded_lower_bound,
        rejected_candidates: peeled.rejected_candidates,
        repeated_candidates: peeled.repeated_candidates,
        pops: peeled.pops,
        iteration_cap_hit: peeled.iteration_cap_hit,
        ..Reconciliation::default()
    };
    let mut answers = Vec::new();
    for (side, ids) in [(Side::Sender, &peeled.sender_only), (Side::Receiver, &peeled.receiver_only)] {
        if ids.is_empty() {
            continue;
        }
        source_for(side, local, remote).lookup(ids, &mut answers);
        for (i, &id) in ids.iter().enumerate() {
            match (side, answers.get(i).copied().flatten()) {
                (Side::Sender, Some(ts)) => {
                    a.delete(id, ts);
                    rec.lost.push(id);
                }
                (Side::Receiver, Some(ts)) => {
                    b.delete(id, ts);
                    rec.reordered.push(id);
                }
                (_, None) => rec.unconfirmed.push(id),
            }
        }
    }
    rec.decoded = (rec.lost.len() + rec.reordered.len()) as u64;
    rec.complete = rec.residual_buckets == 0 && rec.unconfirmed.is_empty() && !rec.iteration_cap_hit;

    let g = aggregate(&a, &b);
    let k = a.banks();
    let (mean_ns, std_dev_ns, variance_ns2, variance_clamped) =
        if sender.packets() == 0 && receiver.packets() == 0 {
            (Err(NoEstimate::NoPackets), Err(NoEstimate::NoPackets), None, false)
        } else {
            estimates(&g, k)
        };
    RdaReport {
        mean_ns,
        std_dev_ns,
        variance_ns2,
        variance_clamped,
        useful_delay_sum_ns: g.delay_sum_ns,
        useful_weight: g.weight.max(0) as u64,
        useful_buckets: g.useful_buckets,
        total_buckets: (k * a.buckets_per_bank()) as u64,
        collapsed_pairs: g.pairs,
        sender_packets: sender.packets(),
        receiver_packets: receiver.packets(),
        reconciliation: rec,
    }
}
