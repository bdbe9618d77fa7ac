//! Where a packet goes: the paper's bank hash g(x) and row hash h(x), precomputed from a config
//! into a form the per-packet path evaluates with one data-dependent branch (sampled or not)
//! and no division.
//!
//! Two independent streams are derived from the packet identity with the config seed (the
//! paper takes high and low bits of one hash; spec §8.13 allows either):
//!
//! - the **bank stream** u, a uniform u64. Bank selection (either mode of [`BankSelect`])
//!   partitions the 2^64 values of u into at most one interval per bank, laid out from 0
//!   upwards; the remaining values mean "not sampled" (g(x) = 0). Leading-zero selection is
//!   exactly such a partition: "z ≥ k" is "u < 2^(64−k)", so the bank with the largest
//!   exponent owns the lowest interval.
//! - the **row stream**, reduced onto 0..m_j (Lemire). The sign s(x) of the std-dev estimator
//!   is the low bit of the row: odd rows count +, even rows − (the paper's rows 2i and 2i−1,
//!   numbered from 1).
//!
//! So a packet costs one hash for the bank choice, and a sampled packet one more for its row:
//! the row bits cannot come from the bank hash, whose 64 bits the exact thresholds all use.
//! A single bank with p = 1 skips the bank hash. Nothing here allocates per packet.

use super::config::{BankSelect, LdaConfig, MAX_BANKS, exponent_of};
use crate::synopsis::hash::{derive, mix64, reduce};

/// Purpose tags that turn the config seed into the seeds of the two streams.
const BANK_STREAM: u64 = 0x4c44_415f_4241_4e4b; // "LDA_BANK"
const ROW_STREAM: u64 = 0x4c44_415f_524f_5753; // "LDA_ROWS"

/// A cell of the flat cell array: bank, row within the bank, and flat index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellIndex {
    /// Bank j (0-based, config order).
    pub bank: usize,
    /// Row i within the bank (0-based; the paper's row i + 1).
    pub row: u64,
    /// Index into the flat cell array (banks laid out one after the other, in config order).
    pub flat: usize,
}

/// The precomputed bank and row hashes of one configuration.
///
/// A stream is `mix64(identity ^ key)` with `key = derive(seed, purpose)`: the shape of
/// [`derive`] (whose key is `mix64(seed ^ φ)`), with the key computed once here instead of once
/// per packet (a per-packet `derive` recomputes it: the compiler cannot keep it in a register
/// across the cell write).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    bank_key: u64,
    row_key: u64,
    /// Banks n: the first n slots of the per-interval arrays are real.
    n: usize,
    /// One bank with p = 1: g(x) is constant and the bank hash is skipped.
    samples_all: bool,
    /// The largest sampled value of u (the last interval's upper end): above it, g(x) = 0.
    sampled_max: u64,
    /// Per interval t, in increasing order of u: its inclusive upper end, its bank, the bank's
    /// first flat cell and its row count.
    hi: [u64; MAX_BANKS],
    bank: [u8; MAX_BANKS],
    first_cell: [u32; MAX_BANKS],
    rows: [u64; MAX_BANKS],
}

impl Placement {
    /// Precomputes the placement of a validated config.
    pub(crate) fn new(cfg: &LdaConfig) -> Self {
        let n = cfg.banks.len().min(MAX_BANKS);
        let widths = cfg.selection_widths();
        // Interval order: config order for thresholds; most selective (largest k) first for
        // leading zeros, so that interval t covers exactly the values with k_t ≤ z < k_{t−1}.
        let mut order: Vec<usize> = (0..n).collect();
        if cfg.select == BankSelect::LeadingZeros {
            order.sort_by_key(|&j| std::cmp::Reverse(exponent_of(cfg.banks[j].p).unwrap_or(0)));
        }
        let mut first = Vec::with_capacity(n);
        let mut acc = 0u32;
        for b in &cfg.banks[..n] {
            first.push(acc);
            acc = acc.saturating_add(b.rows);
        }
        let mut p = Self {
            bank_key: derive(cfg.seed, BANK_STREAM),
            row_key: derive(cfg.seed, ROW_STREAM),
            n,
            samples_all: n == 1 && widths.first() == Some(&(1u128 << 64)),
            sampled_max: 0,
            hi: [u64::MAX; MAX_BANKS],
            bank: [0; MAX_BANKS],
            first_cell: [0; MAX_BANKS],
            rows: [0; MAX_BANKS],
        };
        let mut upper: u128 = 0;
        for (t, &j) in order.iter().enumerate() {
            upper += widths.get(j).copied().unwrap_or(0);
            // A validated config has widths ≥ 1 summing to ≤ 2^64, so upper − 1 fits a u64
            // (u64::MAX exactly when Σp = 1: every value is sampled).
            p.hi[t] = u64::try_from(upper.saturating_sub(1)).unwrap_or(u64::MAX);
            p.bank[t] = j as u8;
            p.first_cell[t] = first[j];
            p.rows[t] = u64::from(cfg.banks[j].rows);
            p.sampled_max = p.hi[t];
        }
        p
    }

    /// The cell a packet updates, or `None` when no bank samples it (g(x) = 0).
    #[inline(always)]
    pub(crate) fn locate(&self, identity: u64) -> Option<CellIndex> {
        // g(x): "not sampled" is one comparison (the common case under tuned sampling); a
        // sampled packet's interval index is the number of upper ends below u. `samples_all`
        // and the trip count n are the same for every packet, so no branch depends on data
        // except "is it sampled".
        let t = if self.samples_all {
            0
        } else {
            let u = mix64(identity ^ self.bank_key);
            if u > self.sampled_max {
                return None;
            }
            self.hi.iter().take(self.n).map(|&h| usize::from(u > h)).sum::<usize>()
        };
        // h(x): uniform row in the chosen bank, from the independent row stream.
        let rows = *self.rows.get(t)?;
        let row = reduce(mix64(identity ^ self.row_key), rows);
        let first = *self.first_cell.get(t)? as usize;
        Some(CellIndex { bank: usize::from(*self.bank.get(t)?), row, flat: first + row as usize })
    }

    /// Only the flat cell index (the update path).
    #[inline(always)]
    pub(crate) fn flat_cell(&self, identity: u64) -> Option<usize> {
        self.locate(identity).map(|c| c.flat)
    }

    /// The bank-stream value u of a packet (for tests of the selection itself).
    #[cfg(test)]
    pub(crate) fn bank_hash(&self, identity: u64) -> u64 {
        mix64(identity ^ self.bank_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::SynopsisConfig;
    use crate::synopsis::lda::config::BankConfig;

    /// Binomial tolerance: |count − n·p| ≤ k·sqrt(n·p·(1 − p)).
    fn within_binomial(count: u64, n: u64, p: f64, k: f64) -> bool {
        let mean = n as f64 * p;
        (count as f64 - mean).abs() <= k * (mean * (1.0 - p)).sqrt()
    }

    fn counts(cfg: &LdaConfig, n: u64) -> (Vec<u64>, u64) {
        let pl = Placement::new(cfg);
        let mut per_bank = vec![0u64; cfg.banks.len()];
        let mut unsampled = 0;
        for i in 0..n {
            match pl.locate(i) {
                Some(c) => per_bank[c.bank] += 1,
                None => unsampled += 1,
            }
        }
        (per_bank, unsampled)
    }

    #[test]
    fn threshold_selection_hits_each_p_exactly() {
        // 10^7 keys; each bank count within 5 binomial standard deviations of n·p_j
        // (spec §9: threshold mode gives exactly p_j).
        let n = 10_000_000;
        let cfg = LdaConfig {
            banks: vec![
                BankConfig { rows: 512, p: 0.3 },
                BankConfig { rows: 256, p: 0.01024 },
                BankConfig { rows: 256, p: 0.000512 },
            ],
            select: BankSelect::Thresholds,
            ts_bits: 64,
            count_bits: 64,
            seed: 11,
            max_negative_delay_ns: crate::synopsis::lda::DEFAULT_MAX_NEGATIVE_DELAY_NS,
            digest_bits: crate::synopsis::lda::DEFAULT_DIGEST_BITS,
        };
        cfg.validate().unwrap();
        let (per_bank, unsampled) = counts(&cfg, n);
        for (j, b) in cfg.banks.iter().enumerate() {
            assert!(
                within_binomial(per_bank[j], n, b.p, 5.0),
                "bank {j}: {} vs {}",
                per_bank[j],
                n as f64 * b.p
            );
        }
        let rest = 1.0 - cfg.banks.iter().map(|b| b.p).sum::<f64>();
        assert!(within_binomial(unsampled, n, rest, 5.0));
    }

    #[test]
    fn leading_zero_selection_is_nested() {
        // Paper's example p = 1/8 and 1/128 (listed least selective first to exercise the
        // ordering): effective probabilities 1/8 − 1/128 and 1/128, within 5 binomial sd.
        let n = 10_000_000;
        let mut cfg = LdaConfig::single_bank(64, 0.125, 5);
        cfg.banks.push(BankConfig { rows: 64, p: 1.0 / 128.0 });
        cfg.select = BankSelect::LeadingZeros;
        cfg.validate().unwrap();
        let (per_bank, unsampled) = counts(&cfg, n);
        let eff = [0.125 - 1.0 / 128.0, 1.0 / 128.0];
        assert_eq!(cfg.effective_probabilities(), eff.to_vec());
        for j in 0..2 {
            assert!(within_binomial(per_bank[j], n, eff[j], 5.0), "bank {j}: {}", per_bank[j]);
        }
        assert!(within_binomial(unsampled, n, 0.875, 5.0));
        // And the nominal p_1 = 1/8 is NOT what bank 0 gets (the test can tell the modes apart):
        // 1/128 of 10^7 is ~78k counts, hundreds of standard deviations.
        assert!(!within_binomial(per_bank[0], n, 0.125, 5.0));
    }

    #[test]
    fn leading_zero_intervals_equal_counting_zeros() {
        // The interval form must pick exactly the bank the paper's rule picks: the bank whose
        // exponent is the largest k_j ≤ leading_zeros(u).
        let mut cfg = LdaConfig::single_bank(4, 0.5, 9);
        cfg.banks.push(BankConfig { rows: 4, p: 1.0 / 64.0 });
        cfg.banks.push(BankConfig { rows: 4, p: 1.0 / 8.0 });
        cfg.select = BankSelect::LeadingZeros;
        cfg.validate().unwrap();
        let ks = [1u32, 6, 3];
        let pl = Placement::new(&cfg);
        for i in 0..200_000u64 {
            let z = pl.bank_hash(i).leading_zeros();
            let want = (0..3).filter(|&j| ks[j] <= z).max_by_key(|&j| ks[j]);
            assert_eq!(pl.locate(i).map(|c| c.bank), want, "identity {i}, z = {z}");
        }
    }

    #[test]
    fn full_sampling_and_edges() {
        // Σp = 1 in two banks: every packet is sampled.
        let mut cfg = LdaConfig::single_bank(4, 0.5, 1);
        cfg.banks.push(BankConfig { rows: 4, p: 0.5 });
        let pl = Placement::new(&cfg);
        assert!((0..10_000).all(|i| pl.locate(i).is_some()));
        // p = 1 single bank, with the leading-zero mode (k = 0) too.
        let mut one = LdaConfig::single_bank(6, 1.0, 1);
        let pl = Placement::new(&one);
        assert!((0..10_000).all(|i| pl.locate(i).is_some_and(|c| c.row < 6)));
        one.select = BankSelect::LeadingZeros;
        one.validate().unwrap();
        let pl = Placement::new(&one);
        assert!((0..10_000).all(|i| pl.locate(i).is_some()));
    }

    #[test]
    fn rows_are_uniform_and_independent_of_the_bank() {
        // Chi-square of row counts within each of two banks of 8 rows (7 degrees of freedom):
        // E = 112k per row; the 99.99% point of χ²(7) is 29.9. A row hash correlated with the
        // bank choice would skew the rows of the rarer bank.
        let mut cfg = LdaConfig::single_bank(8, 0.9, 3);
        cfg.banks.push(BankConfig { rows: 8, p: 0.1 });
        let pl = Placement::new(&cfg);
        let n = 10_000_000u64;
        let mut rows = [[0u64; 8]; 2];
        for i in 0..n {
            if let Some(c) = pl.locate(i) {
                rows[c.bank][c.row as usize] += 1;
                assert_eq!(c.flat, c.bank * 8 + c.row as usize);
            }
        }
        for r in rows {
            let total: u64 = r.iter().sum();
            let e = total as f64 / 8.0;
            let chi2: f64 = r.iter().map(|&o| (o as f64 - e).powi(2) / e).sum();
            assert!(chi2 < 29.9, "chi2 = {chi2}, rows {r:?}");
        }
    }

    #[test]
    fn seeds_change_the_placement() {
        let a = Placement::new(&LdaConfig::single_bank(1024, 1.0, 1));
        let b = Placement::new(&LdaConfig::single_bank(1024, 1.0, 2));
        let same = (0..1000).filter(|&i| a.locate(i) == b.locate(i)).count();
        // Independent rows agree with probability 1/1024: expect ~1 of 1000.
        assert!(same < 10, "{same}");
    }
}
