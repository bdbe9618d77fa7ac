//! The LDA estimators (paper §III-D, §III-E; spec §4): from the sender's and the receiver's
//! synopses of one segment and interval, the mean delay with its confidence interval, the
//! standard deviation through the collapsed-bucket second moment, and loss.
//!
//! ```text
//! usable cell     u_ij = 1 iff S_A[i,j] = S_B[i,j]
//! mean            D  = Σ u_ij (T_B[i,j] − T_A[i,j]) / S,    S = Σ u_ij S_A[i,j]
//! bucket          rows 2i, 2i+1 (0-based) of a bank; sign + for the odd row, − for the even one
//! second moment   F  = Σ ũ_ij (Δ[2i+1,j] − Δ[2i,j])² / S̃,   S̃ = Σ ũ_ij S̃_A(i,j)
//! paper std-dev   σ̂_F = sqrt(max(F − D², 0))                          (`paper_std_dev`)
//! std-dev         σ̂² = Σ u_ij (Δ[i,j] − S_A[i,j]·D)² / (S − Σ u_ij S_A[i,j]²/S)   (`std_dev`)
//! ```
//!
//! The reported `std_dev` is our group moment ([`crate::synopsis::moment`]): unbiased, never
//! clamped, and not a difference of two large numbers like F − D² (which loses σ when the
//! mean is large against it); the paper's is kept beside it.
//!
//! Where this departs from the paper, following the spec:
//! - sums range over every bank (the printed formulas show only Σ_i; spec §8.2);
//! - eq. 3 is misprinted; σ̂² = F − D² with the uncollapsed D, clamped at 0 and flagged
//!   (spec §8.3, §8.5);
//! - a bucket is usable only if both its rows are (the paper compares only the summed counts;
//!   spec §8.6), and a cell with S_B > S_A is unusable and counted as an anomaly (§8.17);
//! - a cell is usable only if the identity digests agree too (our extension, `digest_bits`):
//!   counts alone accept a cell holding different packets at the two points (see `compare`);
//! - a cell with S_A = S_B but a delay sum below −S_A·N (N = `max_negative_delay_ns`, the
//!   largest clock offset allowed) is unusable and counted as an anomaly too: it holds
//!   different packets at the two points, crossing an epoch boundary in opposite directions
//!   (§8.21; our extension, see `compare`);
//! - per-cell differences Δ = T_B − T_A are taken modulo 2^W and read as *signed* W-bit numbers
//!   (the spec reads them as non-negative), so a negative clock offset between the points gives
//!   a negative mean instead of a value near 2^W; a cell's delay sum must stay within ±2^(W−1);
//! - counters are compared modulo 2^count_bits; a difference in the upper half means the
//!   receiver counted more (anomaly);
//! - exact loss comes from the unsampled total counters, an extension (spec §8.16).
//!
//! Pure functions: no I/O, never NaN.

use super::config::LdaConfig;
use super::sizing::confidence_half_width;
use super::state::{Cell, Lda};
use crate::synopsis::Synopsis;
use crate::synopsis::SynopsisConfig;
use crate::synopsis::codec::DecodeError;
use crate::synopsis::estimate::{Estimate, Measured, NoEstimate};
use crate::synopsis::moment::{self, Group, Partition, Population};
use serde::Serialize;
use thiserror::Error;

/// Confidence level of the mean's interval in [`estimate`]: the paper's 98% bounds.
pub const DEFAULT_CONFIDENCE: f64 = 0.98;

/// The two synopses cannot be compared.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum LdaEstimateError {
    /// Sender and receiver were built with different configurations (shape, probabilities,
    /// widths or seed): their cells do not hold the same packets.
    #[error(
        "sender and receiver LDA configurations differ (fingerprints {sender:#018x} vs {receiver:#018x})"
    )]
    ConfigMismatch {
        /// The sender's config fingerprint.
        sender: u64,
        /// The receiver's config fingerprint.
        receiver: u64,
    },
    /// The confidence level is not in (0, 1).
    #[error("confidence level {0} is not in (0, 1)")]
    BadConfidence(f64),
    /// One point's encoded synopsis could not be decoded.
    #[error("cannot decode the {point}'s LDA synopsis: {source}")]
    Decode {
        /// "sender" or "receiver".
        point: &'static str,
        /// Why.
        source: DecodeError,
    },
}

/// What one bank contributed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BankReport {
    /// Rows m_j.
    pub rows: u32,
    /// The probability with which the bank is chosen (after the selection mode's effects).
    pub p_effective: f64,
    /// Usable cells of the bank.
    pub usable_cells: u64,
    /// Packets in its usable cells.
    pub samples: u64,
    /// Usable collapsed buckets.
    pub usable_buckets: u64,
    /// Sampled packets the sender counted in this bank.
    pub sampled_sent: u64,
    /// Sampled packets missing at the receiver in this bank.
    pub sampled_lost: u64,
}

/// Everything the LDA can say about one segment and interval. Delays are in the points'
/// timestamp unit (ns on the appliance).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdaReport {
    /// Mean one-way delay D of the packets in usable cells, with the (`confidence`) interval
    /// D ± sqrt(2 ln(2/δ)) σ̂/√S (paper eq. 1 with σ̂ for σ), with Student's t for the multiplier
    /// where it is larger (S ≤ 7 at 98 %: `sizing::confidence_half_width`). No interval when σ̂
    /// is unknown or was clamped to 0, or from fewer than two packets. `samples` = S.
    pub mean_delay: Measured<Estimate>,
    /// Standard deviation σ̂ by the group moment over usable cells (our estimator, the
    /// default; [`crate::synopsis::moment`]): σ̂² = Σ (Δ − c·D)² / (S − Σc²/S), with its
    /// (`confidence`) interval; `samples` = S.
    pub std_dev: Measured<Estimate>,
    /// The paper's standard deviation sqrt(max(F − D², 0)) from collapsed buckets (spec §4.4),
    /// kept for comparison; `samples` = S̃. Worse when μ ≫ σ (a difference of two large
    /// numbers) and clamped to 0 when F < D².
    pub paper_std_dev: Measured<Estimate>,
    /// Second moment F (mean squared delay); `samples` = S̃.
    pub second_moment: Measured<Estimate>,
    /// F − D² was negative and `paper_std_dev` was clamped to 0 (too few buckets or a low-CV
    /// delay). `std_dev` is never clamped.
    pub variance_clamped: bool,
    /// Nominal level of `mean_delay.interval`.
    pub confidence: f64,
    /// Effective sample size S: packets in usable cells.
    pub samples: u64,
    /// Usable cells (S_A = S_B) over all banks.
    pub usable_cells: u64,
    /// All cells.
    pub cells: u64,
    /// Packets in usable collapsed buckets (S̃).
    pub collapsed_samples: u64,
    /// Usable collapsed buckets (both rows usable).
    pub usable_buckets: u64,
    /// All collapsed buckets.
    pub buckets: u64,
    /// Mass-weighted number of usable buckets B_eff = (Σ k_b)² / Σ k_b², which governs the
    /// accuracy of σ̂ (spec §4.4); 0 without usable buckets.
    pub effective_buckets: f64,
    /// Cells where the receiver counted more packets than the sender (impossible if both points
    /// see the same packets: mutable bytes hashed, boundary slip), or where the counts agree
    /// but the delay sum is below −count·`max_negative_delay_ns` (two packets that slipped
    /// across the epoch boundaries in opposite directions). Treated as unusable. The sum of
    /// the two counts below.
    pub anomalous_cells: u64,
    /// Anomalous cells where the receiver counted more packets than the sender.
    pub receiver_more_cells: u64,
    /// Anomalous cells whose counts agree but whose delay sum is impossible (boundary slip).
    pub slipped_cells: u64,
    /// Sampled packets the sender counted (Σ S_A).
    pub sampled_sent: u64,
    /// Sampled packets the receiver counted (Σ S_B).
    pub sampled_received: u64,
    /// Sampled packets lost: Σ over non-anomalous cells of S_A − S_B.
    pub sampled_lost: u64,
    /// Sampled loss rate sampled_lost / sampled_sent, an estimate of the loss rate.
    pub sampled_loss_rate: Measured<Estimate>,
    /// Every packet the sender saw (unsampled counter; extension, not in the paper).
    pub sent_packets: u64,
    /// Every packet the receiver saw (unsampled counter).
    pub received_packets: u64,
    /// sent − received when the receiver saw no more than the sender: exact loss when both
    /// points cover the same packets (packets crossing an epoch boundary between the points
    /// move it by their net count). `None` when the receiver saw more (never a negative loss).
    pub lost_packets: Option<u64>,
    /// received − sent when the receiver saw more packets than the sender (boundary slip or
    /// traffic entering between the points), else 0.
    pub receiver_excess: u64,
    /// Exact loss rate lost/sent; the reason instead when `lost_packets` is `None`.
    pub loss_rate: Measured<Estimate>,
    /// Per-bank diagnostics, in config order.
    pub banks: Vec<BankReport>,
}

/// Reads a W-bit two's-complement value.
fn signed(v: u64, bits: u8) -> i128 {
    if bits >= 64 {
        return i128::from(v as i64);
    }
    let half = 1u64 << (bits - 1);
    if v >= half { i128::from(v) - (1i128 << bits) } else { i128::from(v) }
}

/// One cell pair as the estimator sees it.
#[derive(Clone, Copy)]
struct CellPair {
    usable: bool,
    /// The receiver counted more than the sender.
    receiver_more: bool,
    /// The counts agree but the delay sum is below the slip floor.
    slipped: bool,
    /// Packets the receiver is missing (0 when usable or anomalous).
    lost: u64,
    sent: u64,
    /// Δ = T_B − T_A of a usable cell, signed (0 otherwise).
    delay_sum: i128,
}

/// Compares cell (i, j) of the two points: usable when the counts *and* the identity digests
/// agree (spec §4.1 plus our digest) and the delay sum is possible for real packets; anomalous
/// when the receiver counted more (spec §8.17) or when the counts agree but the cell cannot
/// hold the same packets at both points (below).
///
/// **Boundary slip (our rule, beyond the spec; spec §8.21 only says a slipped packet spoils its
/// cell).** Each point assigns a packet to an epoch of length E by its own timestamp, so a
/// packet sent just before a boundary is counted in epoch k at A and in k+1 at B. If such a
/// crossing-out packet X and a crossing-in packet Y (A saw it in k−1, B in k) fall into the same
/// cell of epoch k, the counts agree, yet the cell holds X at A and Y at B and its difference
/// carries t_B(Y) − t_A(X) ∈ (−E, −E + d_X + d_Y) instead of two delays: one such cell moved a
/// 100-ms epoch's mean by about E/S and inflated σ̂ by ×85.
///
/// No rule on (count, delay sum) alone can refuse every such cell: a cell of c packets with
/// delays in [−N, M] sums to [−cN, cM], a slipped one to (−E − (c−1)N, −E + (c+1)M), and the
/// two ranges overlap as soon as c(M + N) + M > E — with 10-ms epochs and 10 ms of allowed
/// offset, already at c = 1. So each cell also sums its packets' identities (`digest_bits`
/// wide): a cell is usable only if A's and B's digests agree, and for different packet sets
/// they agree with probability 2^-W, whatever E, the offset and the delays. The old guard
/// (Δ < −c·N: no c real packets sum that low) stays as a second test, and is the only one
/// when `digest_bits` = 0 (the paper's cell). Both outcomes count as `slipped`.
fn compare(cfg: &LdaConfig, a: &Cell, b: &Cell) -> CellPair {
    let count_mask = cfg.count_mask();
    let missing = a.count.wrapping_sub(b.count) & count_mask;
    let receiver_more = missing > count_mask >> 1;
    // Same count and same identity digest: the same packets at both points, up to a 2^-W
    // digest collision (no digest configured: counts only, as in the paper).
    let matched = missing == 0 && a.digest == b.digest;
    let delay_sum =
        if matched { signed(b.ts_sum.wrapping_sub(a.ts_sum) & cfg.ts_mask(), cfg.ts_bits) } else { 0 };
    // c ≤ 2^64 and N < 2^64: the product can exceed i128, so it saturates (no guard then).
    let floor = i128::from(a.count).saturating_mul(i128::from(cfg.max_negative_delay_ns));
    let other_packets = missing == 0 && a.digest != b.digest;
    let slipped = other_packets || (matched && delay_sum < -floor);
    let usable = matched && !slipped;
    CellPair {
        usable,
        receiver_more,
        slipped,
        lost: if receiver_more { 0 } else { missing },
        sent: a.count,
        delay_sum: if usable { delay_sum } else { 0 },
    }
}

/// Decodes both points' encoded synopses (each must carry `cfg`'s fingerprint) and estimates
/// with [`estimate`].
pub fn estimate_encoded(
    cfg: &LdaConfig,
    sender: &[u8],
    receiver: &[u8],
) -> Result<LdaReport, LdaEstimateError> {
    let a =
        Lda::decode(cfg, sender).map_err(|source| LdaEstimateError::Decode { point: "sender", source })?;
    let b = Lda::decode(cfg, receiver)
        .map_err(|source| LdaEstimateError::Decode { point: "receiver", source })?;
    estimate(&a, &b)
}

/// Estimates with the paper's 98% interval for the mean ([`DEFAULT_CONFIDENCE`]).
pub fn estimate(sender: &Lda, receiver: &Lda) -> Result<LdaReport, LdaEstimateError> {
    estimate_with_confidence(sender, receiver, DEFAULT_CONFIDENCE)
}

/// Estimates mean, std-dev and loss from the sender's and receiver's synopses of the same
/// segment and interval, with a mean interval at `confidence` (0 < confidence < 1).
pub fn estimate_with_confidence(
    sender: &Lda,
    receiver: &Lda,
    confidence: f64,
) -> Result<LdaReport, LdaEstimateError> {
    let cfg = sender.config();
    if cfg != receiver.config() {
        return Err(LdaEstimateError::ConfigMismatch {
            sender: cfg.fingerprint(),
            receiver: receiver.config().fingerprint(),
        });
    }
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(LdaEstimateError::BadConfidence(confidence));
    }

    let mut r = LdaReport {
        mean_delay: Err(NoEstimate::NoPackets),
        std_dev: Err(NoEstimate::NoPackets),
        paper_std_dev: Err(NoEstimate::NoPackets),
        second_moment: Err(NoEstimate::NoPackets),
        variance_clamped: false,
        confidence,
        samples: 0,
        usable_cells: 0,
        cells: cfg.total_cells(),
        collapsed_samples: 0,
        usable_buckets: 0,
        buckets: cfg.total_cells() / 2,
        effective_buckets: 0.0,
        anomalous_cells: 0,
        receiver_more_cells: 0,
        slipped_cells: 0,
        sampled_sent: 0,
        sampled_received: 0,
        sampled_lost: 0,
        sampled_loss_rate: Err(NoEstimate::NoPackets),
        sent_packets: sender.total_packets(),
        received_packets: receiver.total_packets(),
        lost_packets: sender.total_packets().checked_sub(receiver.total_packets()),
        receiver_excess: receiver.total_packets().saturating_sub(sender.total_packets()),
        loss_rate: Err(NoEstimate::NoPackets),
        banks: Vec::with_capacity(cfg.banks.len()),
    };

    // Counts come from a peer: sums saturate instead of overflowing on absurd input. Delay sums
    // fit i128 (at most 2^22 cells of |Δ| < 2^63).
    let mut delay_sum: i128 = 0; // Σ u_ij Δ[i,j]
    let mut square_sum = 0.0f64; // Σ ũ_ij (signed bucket sum)²
    let mut bucket_mass_sq = 0.0f64; // Σ k_b² over usable buckets
    let mut groups = Vec::with_capacity(cfg.total_cells() as usize); // usable cells, for σ̂
    let probabilities = cfg.effective_probabilities();
    for (j, bank) in cfg.banks.iter().enumerate() {
        let mut br = BankReport {
            rows: bank.rows,
            p_effective: probabilities.get(j).copied().unwrap_or(0.0),
            usable_cells: 0,
            samples: 0,
            usable_buckets: 0,
            sampled_sent: 0,
            sampled_lost: 0,
        };
        // Rows 2i (sign −) and 2i+1 (sign +) form bucket i.
        for (pa, pb) in sender.bank_cells(j).chunks_exact(2).zip(receiver.bank_cells(j).chunks_exact(2)) {
            let minus = compare(cfg, &pa[0], &pb[0]);
            let plus = compare(cfg, &pa[1], &pb[1]);
            for c in [minus, plus] {
                br.sampled_sent = br.sampled_sent.saturating_add(c.sent);
                br.sampled_lost = br.sampled_lost.saturating_add(c.lost);
                r.receiver_more_cells += u64::from(c.receiver_more);
                r.slipped_cells += u64::from(c.slipped);
                r.anomalous_cells += u64::from(c.receiver_more || c.slipped);
                if c.usable {
                    br.usable_cells += 1;
                    br.samples = br.samples.saturating_add(c.sent);
                    delay_sum += c.delay_sum;
                    groups.push(Group { delay_sum: c.delay_sum as f64, count: c.sent });
                }
            }
            if minus.usable && plus.usable {
                let k = minus.sent.saturating_add(plus.sent);
                let signed_sum = (plus.delay_sum - minus.delay_sum) as f64;
                square_sum += signed_sum * signed_sum;
                bucket_mass_sq += (k as f64) * (k as f64);
                br.usable_buckets += 1;
                r.collapsed_samples = r.collapsed_samples.saturating_add(k);
            }
        }
        r.usable_cells += br.usable_cells;
        r.samples = r.samples.saturating_add(br.samples);
        r.usable_buckets += br.usable_buckets;
        r.sampled_sent = r.sampled_sent.saturating_add(br.sampled_sent);
        r.sampled_lost = r.sampled_lost.saturating_add(br.sampled_lost);
        r.banks.push(br);
    }
    r.sampled_received = receiver.cells().iter().fold(0u64, |acc, c| acc.saturating_add(c.count));
    if bucket_mass_sq > 0.0 {
        let mass = r.collapsed_samples as f64;
        r.effective_buckets = mass * mass / bucket_mass_sq;
    }

    // Mean over usable cells.
    let none_usable = if r.sampled_sent == 0 { NoEstimate::NoPackets } else { NoEstimate::NoUsableCells };
    let mean = if r.samples == 0 {
        Err(none_usable.clone())
    } else {
        Estimate::new(delay_sum as f64 / r.samples as f64, r.samples)
    };

    // Second moment and std-dev over usable buckets.
    if r.collapsed_samples == 0 {
        r.second_moment = Err(none_usable.clone());
        r.paper_std_dev = Err(none_usable.clone());
    } else {
        let f = square_sum / r.collapsed_samples as f64;
        r.second_moment = Estimate::new(f, r.collapsed_samples);
        r.paper_std_dev = match &mean {
            Ok(d) => {
                let var = f - d.value * d.value;
                r.variance_clamped = var < 0.0;
                Estimate::new(var.max(0.0).sqrt(), r.collapsed_samples)
            }
            Err(e) => Err(e.clone()),
        };
    }

    r.std_dev = if r.samples == 0 {
        Err(none_usable)
    } else {
        // The σ asked for is that of the packets both points saw (the ground truth's, ddof = 0);
        // the usable cells hold a hash-chosen subset of them. Their number is the smaller of
        // the two unsampled counts (exact when both points cover the same packets), and never
        // below the packets the usable cells hold.
        let common = r.sent_packets.min(r.received_packets).max(r.samples);
        moment::std_dev(&[(Partition::of(&groups), &groups)], 1, confidence, Population::Of(common))
    };

    // The interval uses the group-moment σ̂ (it is never clamped).
    r.mean_delay = mean.map(|d| match &r.std_dev {
        Ok(s) => match confidence_half_width(s.value, r.samples, confidence) {
            Some(h) => d.with_half_width(confidence, h),
            None => d,
        },
        _ => d,
    });

    r.sampled_loss_rate = if r.sampled_sent == 0 {
        Err(NoEstimate::NoPackets)
    } else {
        Estimate::new(r.sampled_lost as f64 / r.sampled_sent as f64, r.sampled_sent)
    };
    r.loss_rate = if r.sent_packets == 0 {
        Err(NoEstimate::NoPackets)
    } else {
        match r.lost_packets {
            None => Err(NoEstimate::Other {
                detail: format!(
                    "the receiver saw {} more packets than the sender (interval boundary slip or \
                     traffic entering between the points)",
                    r.receiver_excess
                ),
            }),
            Some(lost) => Estimate::new(lost as f64 / r.sent_packets as f64, r.sent_packets),
        }
    };
    Ok(r)
}
