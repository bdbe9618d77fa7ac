//! The LDA configuration both points share: banks (rows, sampling probability), how a packet
//! picks its bank, the emulated accumulator widths and the hash seed; plus the paper's α-tuning
//! rule that derives the probabilities from a traffic volume and target loss rates.
//!
//! Nothing here runs per packet.

use crate::synopsis::{ConfigError, SynopsisConfig, SynopsisKind};
use serde::{Deserialize, Serialize};

/// Most banks an LDA may have (the paper evaluates up to four). Bounded so bank selection is a
/// fixed, branch-free scan.
pub const MAX_BANKS: usize = 8;

/// Most cells (over all banks) an LDA may have: 4 Mi cells of 16 bytes is 64 MiB, far above
/// any sensible synopsis and a cap on what a config file can make us allocate.
pub const MAX_CELLS: u64 = 1 << 22;

/// The paper's tuning constant α in `p = α m / (L + 1)` (spec §5, §8.24).
pub const DEFAULT_ALPHA: f64 = 0.5;

/// Default of [`LdaConfig::max_negative_delay_ns`]: 10 ms, far beyond the offset of clocks kept
/// by PTP or NTP on a LAN and a tenth of the usual 100-ms epoch.
pub const DEFAULT_MAX_NEGATIVE_DELAY_NS: u64 = 10_000_000;

/// One bank: `rows` timestamp-accumulator/packet-counter cells, sampled with probability `p`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BankConfig {
    /// Rows m_j. Even, because the std-dev estimator pairs rows 2i, 2i+1 into one signed bucket.
    pub rows: u32,
    /// Sampling probability p_j in (0, 1]. With [`BankSelect::LeadingZeros`] it must be 2^-k.
    pub p: f64,
}

/// How a packet's uniform 64-bit bank hash picks at most one bank (g(x) in the paper).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BankSelect {
    /// Bank j iff c_{j−1} ≤ u < c_j with c_j = Σ_{k≤j} ⌊2^64·p_k⌋: bank j is chosen with
    /// probability exactly ⌊2^64·p_j⌋/2^64 (spec §8.7, the recommended default).
    #[default]
    Thresholds,
    /// The paper's hardware trick: with p_j = 2^-k_j, count the leading zero bits z of u and pick
    /// the bank with the largest k_j ≤ z. The sets are nested, so a bank's effective probability
    /// is 2^-k_j − 2^-k_next (k_next the next larger exponent), e.g. 1/8 − 1/128 (spec §8.7).
    LeadingZeros,
}

/// Configuration of a Lossy Difference Aggregator. Both points of a segment must use the same
/// one (compared through [`SynopsisConfig::fingerprint`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LdaConfig {
    /// The banks, 1 to [`MAX_BANKS`]. Their sampling sets are disjoint: a packet updates at
    /// most one bank.
    pub banks: Vec<BankConfig>,
    /// How the bank is chosen.
    #[serde(default)]
    pub select: BankSelect,
    /// Width W of the timestamp accumulators, 8..=64 bits: sums wrap modulo 2^W (40 emulates
    /// the paper's hardware). Per-cell delay sums must stay within ±2^(W−1) time units.
    #[serde(default = "default_width")]
    pub ts_bits: u8,
    /// Width of the packet counters, 8..=64 bits (32 emulates the paper's hardware).
    #[serde(default = "default_width")]
    pub count_bits: u8,
    /// Seed of the bank and row hashes (two independent streams are derived from it).
    #[serde(default)]
    pub seed: u64,
    /// The most negative one-way delay N, in timestamp units (ns), that a real packet can show:
    /// how far the receiver's clock may run behind the sender's. A cell whose counts agree but
    /// whose delay sum over its c packets is below −c·N cannot hold the same packets at both
    /// points (an epoch-boundary slip, see the estimator's `compare`) and is counted as
    /// anomalous instead of usable. Our extension, not in the paper. Covered by the
    /// fingerprint like every field, so both points must agree on it.
    #[serde(default = "default_max_negative_delay_ns")]
    pub max_negative_delay_ns: u64,
    /// Width of each cell's identity digest (the wrapping sum of its packets' identities),
    /// 0 or 8..=64 bits. A cell is usable only if its counts *and* digests agree at the two
    /// points, which no pair of different packet sets passes except by a 2^-W collision:
    /// epoch-boundary slips cannot be accepted whatever the epoch length, clock offset or
    /// delay (our extension; 0 gives the paper's two-field cell and falls back on the
    /// `max_negative_delay_ns` guard alone).
    #[serde(default = "default_digest_bits")]
    pub digest_bits: u8,
}

/// Default of [`LdaConfig::digest_bits`]: a 32-bit digest lets a slipped cell through with
/// probability 2^-32, for 4 more bytes a cell on the wire.
pub const DEFAULT_DIGEST_BITS: u8 = 32;

fn default_digest_bits() -> u8 {
    DEFAULT_DIGEST_BITS
}

fn default_width() -> u8 {
    64
}

fn default_max_negative_delay_ns() -> u64 {
    DEFAULT_MAX_NEGATIVE_DELAY_NS
}

/// A bank to be tuned by [`LdaConfig::tuned`]: its rows and the loss rate it should handle.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BankTarget {
    /// Rows m_j (even).
    pub rows: u32,
    /// Target loss rate l_j in [0, 1).
    pub loss_rate: f64,
}

fn err(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::new(SynopsisKind::Lda, field, reason)
}

/// ⌊2^64·p⌋ as an integer, for p in [0, 1]: exact because multiplying by a power of two is.
pub(crate) fn scaled_probability(p: f64) -> u128 {
    (p * 18_446_744_073_709_551_616.0) as u128
}

/// 2^64 as a float.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

impl LdaConfig {
    /// A single bank of `rows` cells sampled with probability `p`, 64-bit accumulators.
    pub fn single_bank(rows: u32, p: f64, seed: u64) -> Self {
        Self {
            banks: vec![BankConfig { rows, p }],
            select: BankSelect::Thresholds,
            ts_bits: 64,
            count_bits: 64,
            seed,
            max_negative_delay_ns: DEFAULT_MAX_NEGATIVE_DELAY_NS,
            digest_bits: DEFAULT_DIGEST_BITS,
        }
    }

    /// The paper's tuning rule (§III-D, spec §5): for an interval expected to carry
    /// `expected_packets` packets N, bank j gets `p_j = α m_j / (N l_j + 1)`, clamped to 1.
    /// The banks' sampling sets are disjoint, so Σ p_j must not exceed 1: an infeasible set of
    /// targets is refused rather than silently rescaled.
    pub fn tuned(
        expected_packets: u64,
        targets: &[BankTarget],
        alpha: f64,
        seed: u64,
    ) -> Result<Self, ConfigError> {
        if !(alpha > 0.0 && alpha <= 1.0) {
            return Err(err("alpha", format!("must be in (0, 1], got {alpha}")));
        }
        if expected_packets == 0 {
            return Err(err("expected_packets", "must be positive"));
        }
        let mut banks = Vec::with_capacity(targets.len());
        for (j, t) in targets.iter().enumerate() {
            if !(0.0..1.0).contains(&t.loss_rate) {
                return Err(err(
                    format!("banks[{j}].loss_rate"),
                    format!("must be in [0, 1), got {}", t.loss_rate),
                ));
            }
            let design_losses = expected_packets as f64 * t.loss_rate;
            let p = (alpha * f64::from(t.rows) / (design_losses + 1.0)).min(1.0);
            banks.push(BankConfig { rows: t.rows, p });
        }
        let total: f64 = banks.iter().map(|b| b.p).sum();
        if total > 1.0 {
            let ps: Vec<String> = banks.iter().map(|b| format!("{:.6}", b.p)).collect();
            return Err(err(
                "banks",
                format!(
                    "tuned probabilities [{}] sum to {total:.6} > 1: the banks' sampling sets must be \
                     disjoint; use fewer rows or higher target loss rates",
                    ps.join(", ")
                ),
            ));
        }
        let cfg = Self {
            banks,
            select: BankSelect::Thresholds,
            ts_bits: 64,
            count_bits: 64,
            seed,
            max_negative_delay_ns: DEFAULT_MAX_NEGATIVE_DELAY_NS,
            digest_bits: DEFAULT_DIGEST_BITS,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Total cells over all banks.
    pub fn total_cells(&self) -> u64 {
        self.banks.iter().map(|b| u64::from(b.rows)).sum()
    }

    /// Mask of the timestamp accumulators (2^W − 1).
    pub fn ts_mask(&self) -> u64 {
        width_mask(self.ts_bits)
    }

    /// Mask of the packet counters.
    pub fn count_mask(&self) -> u64 {
        width_mask(self.count_bits)
    }

    /// Mask of the identity digests (0 when there is none).
    pub fn digest_mask(&self) -> u64 {
        if self.digest_bits == 0 { 0 } else { width_mask(self.digest_bits) }
    }

    /// Each bank's exact probability of being chosen for a packet, given the selection mode
    /// (thresholds: ⌊2^64 p_j⌋/2^64; leading zeros: 2^-k_j − 2^-k_next). Meaningful for a
    /// validated config.
    pub fn effective_probabilities(&self) -> Vec<f64> {
        self.selection_widths().into_iter().map(|w| w as f64 / TWO_POW_64).collect()
    }

    /// How many of the 2^64 bank-hash values select each bank.
    pub(crate) fn selection_widths(&self) -> Vec<u128> {
        match self.select {
            BankSelect::Thresholds => self.banks.iter().map(|b| scaled_probability(b.p)).collect(),
            BankSelect::LeadingZeros => {
                let ks: Vec<Option<u32>> = self.banks.iter().map(|b| exponent_of(b.p)).collect();
                ks.iter()
                    .map(|k| {
                        let Some(k) = *k else { return 0 };
                        // The next more selective bank takes the values with ≥ k_next zeros.
                        let k_next = ks.iter().flatten().copied().filter(|&o| o > k).min();
                        let own = 1u128 << (64 - k);
                        own - k_next.map_or(0, |kn| 1u128 << (64 - kn))
                    })
                    .collect()
            }
        }
    }
}

/// k if p = 2^-k exactly with 0 ≤ k ≤ 63.
pub(crate) fn exponent_of(p: f64) -> Option<u32> {
    (0..64u32).find(|&k| p == (-(k as f64)).exp2())
}

fn width_mask(bits: u8) -> u64 {
    if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 }
}

impl SynopsisConfig for LdaConfig {
    const KIND: SynopsisKind = SynopsisKind::Lda;
    type Written = Self;

    fn from_written(written: Self) -> Result<Self, ConfigError> {
        Ok(written)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.banks.is_empty() || self.banks.len() > MAX_BANKS {
            return Err(err("banks", format!("need 1 to {MAX_BANKS} banks, got {}", self.banks.len())));
        }
        for (j, b) in self.banks.iter().enumerate() {
            if b.rows < 2 || b.rows % 2 != 0 {
                return Err(err(
                    format!("banks[{j}].rows"),
                    format!("must be even and at least 2 (rows pair into signed buckets), got {}", b.rows),
                ));
            }
            if !(b.p > 0.0 && b.p <= 1.0) {
                return Err(err(format!("banks[{j}].p"), format!("must be in (0, 1], got {}", b.p)));
            }
            if scaled_probability(b.p) == 0 {
                return Err(err(format!("banks[{j}].p"), format!("{} is below 2^-64", b.p)));
            }
        }
        if self.total_cells() > MAX_CELLS {
            return Err(err("banks", format!("{} cells exceed the cap of {MAX_CELLS}", self.total_cells())));
        }
        match self.select {
            BankSelect::Thresholds => {
                let total: u128 = self.selection_widths().iter().sum();
                if total > 1u128 << 64 {
                    let sum: f64 = self.banks.iter().map(|b| b.p).sum();
                    return Err(err(
                        "banks",
                        format!("sampling probabilities sum to {sum} > 1 (bank sampling sets are disjoint)"),
                    ));
                }
            }
            BankSelect::LeadingZeros => {
                let mut seen = Vec::with_capacity(self.banks.len());
                for (j, b) in self.banks.iter().enumerate() {
                    let Some(k) = exponent_of(b.p) else {
                        return Err(err(
                            format!("banks[{j}].p"),
                            format!("leading-zero selection needs p = 2^-k (k in 0..=63), got {}", b.p),
                        ));
                    };
                    if seen.contains(&k) {
                        return Err(err(
                            format!("banks[{j}].p"),
                            format!(
                                "two banks share p = 2^-{k}: with leading-zero selection one would never be chosen"
                            ),
                        ));
                    }
                    seen.push(k);
                }
            }
        }
        for (name, bits) in [("ts_bits", self.ts_bits), ("count_bits", self.count_bits)] {
            if !(8..=64).contains(&bits) {
                return Err(err(name, format!("must be in 8..=64, got {bits}")));
            }
        }
        if self.digest_bits != 0 && !(8..=64).contains(&self.digest_bits) {
            return Err(err("digest_bits", format!("must be 0 or in 8..=64, got {}", self.digest_bits)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn tuning_reproduces_the_spec_table() {
        // Spec §5, N = 5M, α = 0.5: p_j = 0.5·m_j/(N·l_j + 1), quoted to 5 significant digits.
        let n = 5_000_000;
        let single =
            |l: f64| LdaConfig::tuned(n, &[BankTarget { rows: 1024, loss_rate: l }], 0.5, 0).unwrap();
        assert_eq!(single(1e-4).banks[0].p, 1.0, "1.022 must clamp to 1");
        for (l, p) in
            [(1e-3, 0.10238), (1e-2, 0.010240), (0.05, 0.0020480), (0.1, 0.0010240), (0.2, 0.00051200)]
        {
            assert!(close(single(l).banks[0].p, p, 1e-4), "l={l}: {}", single(l).banks[0].p);
        }
        let two = LdaConfig::tuned(
            n,
            &[BankTarget { rows: 512, loss_rate: 0.005 }, BankTarget { rows: 512, loss_rate: 0.1 }],
            0.5,
            0,
        )
        .unwrap();
        assert!(close(two.banks[0].p, 0.010240, 1e-4) && close(two.banks[1].p, 0.000512, 1e-3));
        let four = LdaConfig::tuned(
            n,
            &[0.001, 0.01, 0.05, 0.1].map(|l| BankTarget { rows: 256, loss_rate: l }),
            0.5,
            0,
        )
        .unwrap();
        for (b, p) in four.banks.iter().zip([0.025595, 0.002560, 0.000512, 0.000256]) {
            assert!(close(b.p, p, 1e-3), "{} vs {p}", b.p);
        }
    }

    #[test]
    fn tuning_refuses_infeasible_targets() {
        // Two banks of 1024 rows both clamped to p = 1: Σp = 2.
        let e = LdaConfig::tuned(
            1000,
            &[BankTarget { rows: 1024, loss_rate: 0.0 }, BankTarget { rows: 1024, loss_rate: 0.0 }],
            0.5,
            0,
        )
        .unwrap_err();
        assert!(e.reason.contains("sum to 2"), "{e}");
        assert!(LdaConfig::tuned(1000, &[BankTarget { rows: 8, loss_rate: 0.1 }], 0.0, 0).is_err());
        assert!(LdaConfig::tuned(1000, &[BankTarget { rows: 8, loss_rate: 1.0 }], 0.5, 0).is_err());
        assert!(LdaConfig::tuned(0, &[BankTarget { rows: 8, loss_rate: 0.1 }], 0.5, 0).is_err());
        assert!(LdaConfig::tuned(1000, &[BankTarget { rows: 7, loss_rate: 0.1 }], 0.5, 0).is_err());
    }

    #[test]
    fn validation_catches_each_bad_field() {
        let ok = LdaConfig::single_bank(8, 0.5, 1);
        ok.validate().unwrap();
        let bad = |f: &dyn Fn(&mut LdaConfig)| {
            let mut c = ok.clone();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(bad(&|c| c.banks.clear()).field, "banks");
        assert_eq!(bad(&|c| c.banks = vec![BankConfig { rows: 2, p: 0.01 }; 9]).field, "banks");
        assert_eq!(bad(&|c| c.banks[0].rows = 7).field, "banks[0].rows");
        assert_eq!(bad(&|c| c.banks[0].rows = 0).field, "banks[0].rows");
        assert_eq!(bad(&|c| c.banks[0].p = 0.0).field, "banks[0].p");
        assert_eq!(bad(&|c| c.banks[0].p = f64::NAN).field, "banks[0].p");
        assert_eq!(bad(&|c| c.banks[0].p = 1.5).field, "banks[0].p");
        assert_eq!(bad(&|c| c.banks[0].p = 1e-30).field, "banks[0].p");
        assert_eq!(bad(&|c| c.banks[0].rows = 1 << 23).field, "banks");
        assert_eq!(bad(&|c| c.banks.push(BankConfig { rows: 8, p: 0.6 })).field, "banks");
        assert_eq!(bad(&|c| c.ts_bits = 65).field, "ts_bits");
        assert_eq!(bad(&|c| c.count_bits = 4).field, "count_bits");
        // Leading zeros: powers of two only, distinct exponents.
        assert_eq!(
            bad(&|c| {
                c.select = BankSelect::LeadingZeros;
                c.banks[0].p = 0.3;
            })
            .field,
            "banks[0].p"
        );
        let mut lz = ok.clone();
        lz.select = BankSelect::LeadingZeros;
        lz.banks = vec![BankConfig { rows: 8, p: 0.125 }, BankConfig { rows: 8, p: 1.0 / 128.0 }];
        lz.validate().unwrap();
        lz.banks[1].p = 0.125;
        assert!(lz.validate().unwrap_err().reason.contains("share"));
    }

    #[test]
    fn effective_probabilities_follow_the_mode() {
        let mut c = LdaConfig::single_bank(8, 0.125, 0);
        c.banks.push(BankConfig { rows: 8, p: 1.0 / 128.0 });
        assert_eq!(c.effective_probabilities(), vec![0.125, 1.0 / 128.0]);
        c.select = BankSelect::LeadingZeros;
        // Paper's example: bank 1 effectively gets 1/8 − 1/128.
        assert_eq!(c.effective_probabilities(), vec![0.125 - 1.0 / 128.0, 1.0 / 128.0]);
    }

    #[test]
    fn serde_defaults_and_unknown_fields() {
        let c: LdaConfig = serde_json::from_str(r#"{"banks":[{"rows":4,"p":1.0}]}"#).unwrap();
        assert_eq!(c, LdaConfig::single_bank(4, 1.0, 0));
        assert_eq!(c.max_negative_delay_ns, 10_000_000);
        let n: LdaConfig =
            serde_json::from_str(r#"{"banks":[{"rows":4,"p":1.0}],"max_negative_delay_ns":5}"#).unwrap();
        assert_eq!(n.max_negative_delay_ns, 5);
        assert!(serde_json::from_str::<LdaConfig>(r#"{"banks":[],"rowz":1}"#).is_err());
        assert!(serde_json::from_str::<LdaConfig>(r#"{"banks":[{"rows":4,"p":1.0,"x":1}]}"#).is_err());
        let lz: LdaConfig =
            serde_json::from_str(r#"{"banks":[{"rows":4,"p":0.5}],"select":"leading_zeros","ts_bits":40}"#)
                .unwrap();
        assert_eq!(lz.select, BankSelect::LeadingZeros);
        assert_eq!(lz.ts_mask(), (1 << 40) - 1);
    }

    #[test]
    fn fingerprint_separates_what_must_match() {
        let a = LdaConfig::single_bank(1024, 0.1, 7);
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_ne!(a.fingerprint(), LdaConfig::single_bank(1024, 0.1, 8).fingerprint());
        assert_ne!(a.fingerprint(), LdaConfig::single_bank(1022, 0.1, 7).fingerprint());
        assert_ne!(a.fingerprint(), LdaConfig::single_bank(1024, 0.11, 7).fingerprint());
        let mut w = a.clone();
        w.ts_bits = 40;
        assert_ne!(a.fingerprint(), w.fingerprint());
        // The slip guard decides which cells are usable: both points must agree on it too.
        let mut n = a.clone();
        n.max_negative_delay_ns = 1;
        assert_ne!(a.fingerprint(), n.fingerprint());
        let mut d = a.clone();
        d.digest_bits = 0;
        assert_ne!(a.fingerprint(), d.fingerprint());
    }
}
