//! Reconciliation, part 2, and the estimators: repair both points' banks from the peeled
//! difference, then the exact mean from integer sums and the collapsed-bucket standard
//! deviation (spec §4.4–§4.7: Algorithms 2 and 3 with P1, P5, P6, P7 fixed).
//!
//! [`reconcile`] is a pure function of the two points' banks, the decoding point's own cache
//! and a [`TimestampSource`] for the other point (the peer protocol answers it over the
//! network; a simulation passes the other point's cache). It never returns NaN.

use super::banks::Banks;
use super::banks::Bucket;
use super::cache::{EXCLUDED, TimestampSource};
use super::config::StdDevEstimator;
use super::peel::{Difference, PeelGuards, Peeled, Side};
use crate::synopsis::estimate::{Estimate, Measured, NoEstimate};
use crate::synopsis::moment::{self, Group, Partition, Population};

/// Level of the bucket-moment σ̂'s interval: the 98 % of LDA's mean interval.
pub const STD_DEV_CONFIDENCE: f64 = 0.98;
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
    /// One-sided ids (confirmed and removed like the others) that the other point saw more
    /// than once and so excluded ([`super::cache`]): neither lost nor reordered, and in no
    /// estimate. Ids excluded at both points never reach the difference; the points'
    /// counters (`duplicate_ids`, `duplicates`) count every excluded id and copy.
    pub excluded_duplicates: Vec<u64>,
    /// Ids the peeling listed that the point supposedly holding them did not know (false
    /// pures, P4 b); their buckets stay unrepaired and drop out of the estimate.
    pub unconfirmed: Vec<u64>,
    /// Ids decoded and repaired (`lost.len() + reordered.len() + excluded_duplicates.len()`).
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
    /// Standard deviation (ns) by the configured estimator (`RdaConfig::std_dev`, default the
    /// bucket moment): a copy of `bucket_moment_std_dev_ns` or `collapsed_std_dev_ns`.
    pub std_dev_ns: Measured<Estimate>,
    /// Our bucket-moment σ̂ (ns) over the useful buckets with its interval
    /// ([`crate::synopsis::moment`], each bank a partition); `samples` = packets in one bank's
    /// useful buckets.
    pub bucket_moment_std_dev_ns: Measured<Estimate>,
    /// The paper's σ̂ (ns) from the collapsed useful buckets (population form, Algorithm 3);
    /// `samples` = collapsed pairs.
    pub collapsed_std_dev_ns: Measured<Estimate>,
    /// The collapsed estimator's raw variance F − μ̂² before the clamp at 0 (ns²).
    pub variance_ns2: Option<f64>,
    /// True when the collapsed variance came out negative and its σ was clamped to 0 (P7).
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
    /// Bounds [low, high] on the sender-only ("lost") packets, decoded or not: both equal
    /// `reconciliation.lost.len()` when the decode completed. Otherwise the undecoded
    /// difference adds L_u with L_u − R_u = (sender − receiver packets after repair) and
    /// R_u ≥ 0, so L_u ≥ that net count; and every undecoded sender-only packet sits in a
    /// bucket that differs between the points in every bank, so L_u ≤ the fewest sender
    /// packets any bank holds in its differing buckets. Never a partial count posing as the loss.
    pub lost_bounds: (u64, u64),
    /// Decode and repair diagnostics.
    pub reconciliation: Reconciliation,
    /// What each point excluded as seen more than once (from the epoch values' counters; zero
    /// until [`RdaReport::note_duplicates`]).
    pub duplicates: Duplicates,
}

/// Identities each point saw more than once in the epoch and excluded from the estimate with
/// every copy ([`super::cache`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Duplicates {
    /// Distinct ids the sender excluded.
    pub sender_ids: u64,
    /// Packets (every copy) the sender excluded.
    pub sender_packets: u64,
    /// Distinct ids the receiver excluded.
    pub receiver_ids: u64,
    /// Packets (every copy) the receiver excluded.
    pub receiver_packets: u64,
}

impl RdaReport {
    /// A report that carries only `reason` (e.g. mismatched configurations).
    pub fn unavailable(reason: NoEstimate) -> Self {
        Self {
            mean_ns: Err(reason.clone()),
            std_dev_ns: Err(reason.clone()),
            bucket_moment_std_dev_ns: Err(reason.clone()),
            collapsed_std_dev_ns: Err(reason),
            variance_ns2: None,
            variance_clamped: false,
            useful_delay_sum_ns: 0,
            useful_weight: 0,
            useful_buckets: 0,
            total_buckets: 0,
            collapsed_pairs: 0,
            sender_packets: 0,
            receiver_packets: 0,
            lost_bounds: (0, 0),
            reconciliation: Reconciliation::default(),
            duplicates: Duplicates::default(),
        }
    }

    /// Copies the two points' duplicate counts into [`RdaReport::duplicates`].
    pub fn note_duplicates(&mut self, sender: &super::RdaCounters, receiver: &super::RdaCounters) {
        self.duplicates = Duplicates {
            sender_ids: sender.duplicate_ids,
            sender_packets: sender.excluded_packets(),
            receiver_ids: receiver.duplicate_ids,
            receiver_packets: receiver.excluded_packets(),
        };
    }
}

impl RdaReport {
    /// Puts the chosen estimator's σ̂ into `std_dev_ns`.
    pub fn choose_std_dev(&mut self, which: StdDevEstimator) {
        self.std_dev_ns = match which {
            StdDevEstimator::BucketMoment => self.bucket_moment_std_dev_ns.clone(),
            StdDevEstimator::Collapsed => self.collapsed_std_dev_ns.clone(),
        };
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

/// A bucket pair is useful iff ID_A = ID_B, Δ_A = Δ_B and Δ_A > 0 (P6).
fn useful(a: &Bucket, b: &Bucket) -> bool {
    a.id_xor == b.id_xor && a.count == b.count && a.count > 0
}

/// The bucket-moment σ̂ (our estimator, [`crate::synopsis::moment`]): every useful bucket is a
/// group (its exact delay sum and count), each bank a partition of the same packets, so the
/// interval counts the k banks as fully correlated.
pub fn bucket_moment(sender: &Banks, receiver: &Banks, confidence: f64) -> Measured<Estimate> {
    let m = sender.buckets_per_bank();
    let banks: Vec<Vec<Group>> = (0..sender.banks().min(receiver.banks()))
        .map(|l| {
            let (a, b) = (sender.bank(l), receiver.bank(l));
            a.iter()
                .zip(b)
                .take(m)
                .filter(|(ai, bi)| useful(ai, bi))
                .map(|(ai, bi)| Group {
                    // TS sums wrap (P12): their difference, read as i64, is the delay sum.
                    delay_sum: bi.ts_sum_ns.wrapping_sub(ai.ts_sum_ns) as i64 as f64,
                    count: ai.count.max(0) as u64,
                })
                .collect()
        })
        .collect();
    let parts: Vec<(Partition, &[Group])> = banks.iter().map(|g| (Partition::of(g), g.as_slice())).collect();
    // The σ reported is that of the packets both points saw (spec §1.4, P20). After a complete
    // decode every bank's useful buckets hold all of them; after an incomplete one the largest
    // bank's packets stand in for their number (a little low, so σ̂ a little low by about
    // 1/(2S) − 1/(2N), when S is large anyway: incomplete decodes need many differences).
    let common = parts.iter().map(|(p, _)| p.packets).max().unwrap_or(0);
    moment::std_dev(&parts, parts.len(), confidence, Population::Of(common))
}

/// [`RdaReport::lost_bounds`] from the repaired banks and the decoded lost count.
fn lost_bounds(a: &Banks, b: &Banks, decoded: u64) -> (u64, u64) {
    let net = a.packets().saturating_sub(b.packets()).max(0) as u64;
    let high = (0..a.banks().min(b.banks()))
        .map(|l| {
            a.bank(l)
                .iter()
                .zip(b.bank(l))
                // Timestamps always differ (delays); the packet sets differ when ids or counts do.
                .filter(|(x, y)| x.id_xor != y.id_xor || x.count != y.count)
                .map(|(x, _)| x.count.max(0) as u64)
                .fold(0u64, u64::saturating_add)
        })
        .min()
        .unwrap_or(0);
    (decoded.saturating_add(net), decoded.saturating_add(high.max(net)))
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
            if !useful(&ai, &bi) {
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
        // An id the decoding point excluded is not in its banks: as good as unseen here.
        let known_locally = matches!(probe.first(), Some(Some(ts)) if *ts != EXCLUDED);
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
    let (mut answers, mut others) = (Vec::new(), Vec::new());
    for (side, ids) in [(Side::Sender, &peeled.sender_only), (Side::Receiver, &peeled.receiver_only)] {
        if ids.is_empty() {
            continue;
        }
        source_for(side, local, remote).lookup(ids, &mut answers);
        // Whether the other point excluded them (one more batched look-up there).
        source_for(side.other(), local, remote).lookup(ids, &mut others);
        for (i, &id) in ids.iter().enumerate() {
            let elsewhere_excluded = others.get(i).copied().flatten() == Some(EXCLUDED);
            match answers.get(i).copied().flatten() {
                // Excluded (or unknown) at the point said to hold it: a false pure.
                None | Some(EXCLUDED) => rec.unconfirmed.push(id),
                Some(ts) => {
                    match side {
                        Side::Sender => a.delete(id, ts),
                        Side::Receiver => b.delete(id, ts),
                    }
                    match (side, elsewhere_excluded) {
                        (_, true) => rec.excluded_duplicates.push(id),
                        (Side::Sender, false) => rec.lost.push(id),
                        (Side::Receiver, false) => rec.reordered.push(id),
                    }
                }
            }
        }
    }
    rec.decoded = (rec.lost.len() + rec.reordered.len() + rec.excluded_duplicates.len()) as u64;
    rec.complete = rec.residual_buckets == 0 && rec.unconfirmed.is_empty() && !rec.iteration_cap_hit;

    let g = aggregate(&a, &b);
    let k = a.banks();
    let (mean_ns, collapsed_std_dev_ns, variance_ns2, variance_clamped) =
        if sender.packets() == 0 && receiver.packets() == 0 {
            (Err(NoEstimate::NoPackets), Err(NoEstimate::NoPackets), None, false)
        } else {
            estimates(&g, k)
        };
    let bucket_moment_std_dev_ns = match &mean_ns {
        Ok(_) => bucket_moment(&a, &b, STD_DEV_CONFIDENCE),
        Err(e) => Err(e.clone()),
    };
    RdaReport {
        mean_ns,
        std_dev_ns: bucket_moment_std_dev_ns.clone(),
        bucket_moment_std_dev_ns,
        collapsed_std_dev_ns,
        variance_ns2,
        variance_clamped,
        useful_delay_sum_ns: g.delay_sum_ns,
        useful_weight: g.weight.max(0) as u64,
        useful_buckets: g.useful_buckets,
        total_buckets: (k * a.buckets_per_bank()) as u64,
        collapsed_pairs: g.pairs,
        sender_packets: sender.packets(),
        receiver_packets: receiver.packets(),
        lost_bounds: lost_bounds(&a, &b, rec.lost.len() as u64),
        reconciliation: rec,
        duplicates: Duplicates::default(),
    }
}
