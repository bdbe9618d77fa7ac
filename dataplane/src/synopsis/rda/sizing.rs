//! Late binding of the bucket count (spec §5.3, §6.4, P16, P17): a bottom-k MinHash signature
//! of each point's cache, the difference-size estimate d̂ from two signatures, the bucket
//! count m = max(m_min, ⌈2·d̂·(1 + slack)⌉) capped at m_max, and the retry schedule (double m
//! after an incomplete decode).
//!
//! Bottom-k MinHash: each point keeps the K smallest values of h(id) = derive(id, minhash
//! seed) over its cache. The K smallest of the union of two signatures are the K smallest of
//! the union of the sets, so the fraction of them present in both signatures estimates the
//! Jaccard index J, and d̂ = (|S_A| + |S_B|)·(1 − Ĵ)/(1 + Ĵ) (spec §6.4). Known weakness
//! (P16): Ĵ moves in steps of 1/K, so when d ≪ n/K the estimate is usually 0 and m_min plus
//! the retries carry the sizing; when both sets have fewer than K ids the estimate is exact.
//! The exact lower bound d ≥ ||S_A| − |S_B|| is applied as well. No I/O.

use super::cache::TimestampCache;
use super::config::{Binding, RdaConfig};
use crate::synopsis::hash::derive;
use serde::{Deserialize, Serialize};
use std::collections::BinaryHeap;

/// A bottom-k MinHash signature of one point's epoch cache.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinHashSignature {
    /// Distinct ids in the cache (|S|).
    pub set_size: u64,
    /// The min(K, |S|) smallest hash values, ascending and distinct.
    pub mins: Vec<u64>,
}

impl MinHashSignature {
    /// The signature of `ids` (distinct) with `len` values and hash seed `seed`.
    pub fn from_ids(ids: impl IntoIterator<Item = u64>, len: usize, seed: u64) -> Self {
        let len = len.max(1);
        let mut heap: BinaryHeap<u64> = BinaryHeap::with_capacity(len + 1);
        let mut n = 0u64;
        for id in ids {
            n += 1;
            let h = derive(id, seed);
            if heap.len() < len {
                heap.push(h);
            } else if heap.peek().is_some_and(|&top| h < top) {
                heap.pop();
                heap.push(h);
            }
        }
        let mut mins = heap.into_vec();
        mins.sort_unstable();
        mins.dedup();
        Self { set_size: n, mins }
    }

    /// The signature of a point's cache under `cfg` (`signature_len` of the late-binding
    /// config, or 256 in online mode).
    pub fn of_cache(cache: &TimestampCache, cfg: &RdaConfig) -> Self {
        Self::from_ids(cache.iter_measured().map(|(id, _)| id), signature_len(cfg), cfg.minhash_seed())
    }
}

/// K of the configuration (256 in online mode, where it is only informative).
pub fn signature_len(cfg: &RdaConfig) -> usize {
    match cfg.binding {
        Binding::LateBinding { signature_len, .. } => signature_len as usize,
        Binding::Online { .. } => 256,
    }
}

/// The estimate of |S_A ⊕ S_B| from two signatures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DifferenceEstimate {
    /// Ĵ, the estimated Jaccard index.
    pub jaccard: f64,
    /// Values of the union's bottom-k the estimate rests on.
    pub sample: u64,
    /// d̂ (never below the exact bound ||S_A| − |S_B||).
    pub difference: f64,
}

/// d̂ from the two points' signatures (spec §6.4).
pub fn estimate_difference(a: &MinHashSignature, b: &MinHashSignature) -> DifferenceEstimate {
    let size_gap = a.set_size.abs_diff(b.set_size) as f64;
    let total = a.set_size as f64 + b.set_size as f64; // wire values: no u64 overflow
    // A signature with fewer values than ids is truncated at its K-th smallest hash, which is
    // at least the union's K-th smallest: the union's K smallest values are all decided by
    // both signatures. Two complete signatures (sets below K) decide the whole union.
    let truncated = |s: &MinHashSignature| (s.mins.len() as u64) < s.set_size;
    let len = match (truncated(a), truncated(b)) {
        (false, false) => usize::MAX,
        (true, false) => a.mins.len(),
        (false, true) => b.mins.len(),
        (true, true) => a.mins.len().min(b.mins.len()),
    };
    if len == 0 || (a.mins.is_empty() && b.mins.is_empty()) {
        return DifferenceEstimate { jaccard: 1.0, sample: 0, difference: size_gap };
    }
    // Merge the two ascending lists, taking the `len` smallest distinct values of the union
    // and counting those present in both.
    let (mut i, mut j, mut taken, mut both) = (0usize, 0usize, 0usize, 0usize);
    while taken < len && (i < a.mins.len() || j < b.mins.len()) {
        match (a.mins.get(i), b.mins.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                both += 1;
                i += 1;
                j += 1;
            }
            (Some(&x), Some(&y)) if x < y => i += 1,
            (Some(_), Some(_)) => j += 1,
            (Some(_), None) => i += 1,
            (None, Some(_)) => j += 1,
            (None, None) => break,
        }
        taken += 1;
    }
    let jaccard = if taken == 0 { 1.0 } else { both as f64 / taken as f64 };
    let d = total * (1.0 - jaccard) / (1.0 + jaccard);
    DifferenceEstimate { jaccard, sample: taken as u64, difference: d.max(size_gap) }
}

/// The late-binding margins of a configuration: (m_min, m_max, slack, attempts). Online mode
/// gives its fixed m for both bounds, no slack and one attempt.
pub fn margins(cfg: &RdaConfig) -> (usize, usize, f64, u32) {
    match cfg.binding {
        Binding::LateBinding { min_buckets_per_bank, max_buckets_per_bank, slack, max_attempts, .. } => {
            (min_buckets_per_bank as usize, max_buckets_per_bank as usize, slack, max_attempts)
        }
        Binding::Online { buckets_per_bank } => {
            (buckets_per_bank as usize, buckets_per_bank as usize, 0.0, 1)
        }
    }
}

/// m for an estimated difference d̂: max(m_min, ⌈2·d̂·(1 + slack)⌉), at most m_max (spec
/// §5.3: m = 2d per bank from Theorem 2, plus the safety margin).
pub fn buckets_for(cfg: &RdaConfig, difference: f64) -> usize {
    let (lo, hi, slack, _) = margins(cfg);
    let want = (2.0 * difference.max(0.0) * (1.0 + slack)).ceil();
    let want = if want.is_finite() && want < hi as f64 { want as usize } else { hi };
    want.clamp(lo, hi)
}

/// m for the next attempt after an incomplete decode with `m` buckets on attempt `attempt`
/// (1-based): 2m capped at m_max, or `None` when the attempts are used up or m is at the cap.
pub fn next_attempt(cfg: &RdaConfig, m: usize, attempt: u32) -> Option<usize> {
    let (_, hi, _, attempts) = margins(cfg);
    if attempt >= attempts || m >= hi {
        return None;
    }
    Some(m.saturating_mul(2).min(hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_sets_give_the_exact_difference() {
        // Both sets below K: the signatures are the whole hashed sets, so Ĵ and d̂ are exact.
        let a: Vec<u64> = (1..=100).collect();
        let b: Vec<u64> = (11..=120).collect(); // d = 10 + 20 = 30
        let sa = MinHashSignature::from_ids(a, 256, 9);
        let sb = MinHashSignature::from_ids(b, 256, 9);
        let e = estimate_difference(&sa, &sb);
        assert_eq!(e.jaccard, 90.0 / 120.0);
        assert!((e.difference - 30.0).abs() < 1e-9, "{e:?}");
    }

    #[test]
    fn large_difference_is_estimated_within_the_binomial_error() {
        // n = 20,000 per side, half shared: J = 10,000/30,000 = 1/3, d = 20,000. With K = 1024
        // Ĵ has sd ≈ sqrt(J(1 − J)/K) = 0.0147; d̂ = 2n(1 − Ĵ)/(1 + Ĵ) has slope |∂d/∂J| =
        // 4n/(1 + J)² = 45,000 → sd ≈ 660. Allow 4 sd.
        let a = 1..=20_000u64;
        let b = 10_001..=30_000u64;
        let e = estimate_difference(
            &MinHashSignature::from_ids(a, 1024, 3),
            &MinHashSignature::from_ids(b, 1024, 3),
        );
        assert!((e.difference - 20_000.0).abs() < 4.0 * 660.0, "{e:?}");
        assert_eq!(e.sample, 1024);
    }

    #[test]
    fn size_gap_is_a_floor_and_margins_apply() {
        let a = MinHashSignature::from_ids(1..=5_000u64, 16, 1);
        let b = MinHashSignature::from_ids(1..=4_000u64, 16, 1);
        let e = estimate_difference(&a, &b);
        assert!(e.difference >= 1_000.0);
        let cfg = RdaConfig::late_binding(2, 1 << 16);
        assert_eq!(buckets_for(&cfg, 0.0), 1024, "m_min");
        assert_eq!(buckets_for(&cfg, 1_000.0), 3_000, "2·d̂·1.5");
        assert_eq!(buckets_for(&cfg, 1e12), 1 << 20, "m_max");
        assert_eq!(buckets_for(&cfg, f64::INFINITY), 1 << 20);
        assert_eq!(next_attempt(&cfg, 3_000, 1), Some(6_000));
        assert_eq!(next_attempt(&cfg, 6_000, 5), Some(12_000));
        assert_eq!(next_attempt(&cfg, 12_000, 6), None, "6 attempts");
        assert_eq!(next_attempt(&cfg, 1 << 20, 1), None, "at the cap");
        let online = RdaConfig::online(2, 500, 16);
        assert_eq!(buckets_for(&online, 1e6), 500);
        assert_eq!(next_attempt(&online, 500, 1), None);
    }
}
