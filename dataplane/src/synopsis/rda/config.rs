//! The RDA configuration: bank shape, binding mode (online or late), the per-epoch timestamp
//! cache, sampling and seeds. Both points must hold an identical configuration (compared by
//! [`SynopsisConfig::fingerprint`]); nothing here is per-packet.

use crate::synopsis::hash::{Coin, derive};
use crate::synopsis::{ConfigError, SynopsisConfig, SynopsisKind};
use serde::{Deserialize, Serialize};

/// Most banks (hash functions) a configuration may ask for.
pub const MAX_BANKS: usize = 8;
/// Most buckets over all banks (k·m): 2^24 buckets = 384 MiB.
pub const MAX_TOTAL_BUCKETS: u64 = 1 << 24;
/// Most distinct packet ids one epoch's cache may hold: 2^27 (a 4 GiB table).
pub const MAX_CACHE_CAPACITY: u64 = 1 << 27;
/// Most values a MinHash signature may hold.
pub const MAX_SIGNATURE_LEN: u32 = 1 << 16;
/// Most late-binding attempts (the first plus retries with doubled m).
pub const MAX_ATTEMPTS: u32 = 8;

/// Purpose tags mixed into the configured seed, so every hash decision uses its own stream.
const PURPOSE_BANK: u64 = 0x5244_415f_4241_4e4b; // "RDA_BANK"
const PURPOSE_CACHE: u64 = 0x5244_415f_4341_4348; // "RDA_CACH"
const PURPOSE_SAMPLE: u64 = 0x5244_415f_5341_4d50; // "RDA_SAMP"
const PURPOSE_MINHASH: u64 = 0x5244_415f_4d49_4e48; // "RDA_MINH"

/// Which key the consistent sampling decision hashes (spec §5.5, P23).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SampleKey {
    /// The packet identity: each packet is kept independently with probability p (unbiased
    /// per packet; the default).
    #[default]
    Packet,
    /// The flow hash: all packets of a flow are kept or none.
    Flow,
}

/// When the bucket count m is fixed (spec §6.4, P30).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum Binding {
    /// Online mode: k·m buckets exist from the start and every packet is folded in as it
    /// arrives. The epoch encoding carries the bucket array.
    Online {
        /// m, buckets per bank.
        buckets_per_bank: u32,
    },
    /// Late binding (the paper's prototype, §VIII-A): only the timestamp cache is kept during
    /// the epoch. At epoch end the points exchange MinHash signatures, the decoder picks
    /// m = max(min, ⌈2·d̂·(1 + slack)⌉) (spec §5.3), both points build their buckets from
    /// their caches, and on an incomplete decode both rebuild with 2m, up to `max_attempts`.
    LateBinding {
        /// Lower bound on m (P17: the variance needs collapsed pairs even when d̂ = 0).
        #[serde(default = "default_min_buckets")]
        min_buckets_per_bank: u32,
        /// Upper bound on m (memory and shipping cap).
        #[serde(default = "default_max_buckets")]
        max_buckets_per_bank: u32,
        /// Safety margin on the estimated difference (spec §5.3: ≈ 0.5).
        #[serde(default = "default_slack")]
        slack: f64,
        /// Attempts including the first; each retry doubles m (default 6).
        #[serde(default = "default_attempts")]
        max_attempts: u32,
        /// Values in the bottom-k MinHash signature each point ships (default 4,096: d̂ resolves
        /// differences down to about n/4,096).
        #[serde(default = "default_signature_len")]
        signature_len: u32,
    },
}

fn default_min_buckets() -> u32 {
    1024
}
fn default_max_buckets() -> u32 {
    1 << 20
}
fn default_slack() -> f64 {
    0.5
}
fn default_attempts() -> u32 {
    6
}
fn default_signature_len() -> u32 {
    4096
}

impl Binding {
    /// Late binding with the spec's recommended margins (m_min 1,024, slack 0.5), 4,096-value
    /// signatures (32 KiB per point and epoch) and 6 attempts. MinHash cannot see a
    /// difference much below n/K (P16: with K = 256 and n = 2M, d̂ is 0 up to d ≈ 10,000);
    /// the doubling retries carry the sizing there, at most twice the bytes of the final round.
    pub fn late() -> Self {
        Binding::LateBinding {
            min_buckets_per_bank: default_min_buckets(),
            max_buckets_per_bank: default_max_buckets(),
            slack: default_slack(),
            max_attempts: default_attempts(),
            signature_len: default_signature_len(),
        }
    }
}

/// Configuration of the Reconcilable Difference Aggregator. Both points must agree on every
/// field except `cache_capacity` (see the fingerprint).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RdaConfig {
    /// k, the number of banks (one bucket per bank per packet). Spec default 2 (P11).
    #[serde(default = "default_banks")]
    pub banks: u32,
    /// Online (fixed m) or late binding (m chosen at epoch end).
    pub binding: Binding,
    /// Most distinct packet ids the per-epoch timestamp cache holds at this point (after
    /// sampling), and most packets (repeats included) a worker's log holds per epoch. Packets
    /// beyond it are counted and left out of both cache and buckets.
    #[serde(default = "default_cache_capacity")]
    pub cache_capacity: u64,
    /// Probability p of the consistent sampling decision (spec §5.5); 1 keeps every packet.
    #[serde(default = "default_sample_probability")]
    pub sample_probability: f64,
    /// What the sampling decision hashes.
    #[serde(default)]
    pub sample_by: SampleKey,
    /// Seed of every hash decision (bank indices, sampling, MinHash); both points must agree.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Which standard-deviation estimator fills the report's `std_dev_ns` (both are always
    /// reported). Read only where the estimate is made, so it is left out of the fingerprint.
    #[serde(default)]
    pub std_dev: StdDevEstimator,
}

/// The standard-deviation estimators of RDA (see `docs/rda.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StdDevEstimator {
    /// Our bucket moment: each useful bucket's delay sum D over c packets has
    /// E[(D − c·μ)²] = c·σ², μ exact; unbiased, with an interval, never clamped.
    #[default]
    BucketMoment,
    /// The paper's Algorithm 3: collapsed pairs of buckets give F, σ̂² = F − μ̂², clamped at 0
    /// (loses σ when μ ≫ σ).
    Collapsed,
}

fn default_banks() -> u32 {
    2
}
fn default_cache_capacity() -> u64 {
    1 << 20
}
fn default_sample_probability() -> f64 {
    1.0
}
fn default_seed() -> u64 {
    0x00c0_ffee_5eed_0001
}

impl RdaConfig {
    /// Online mode with k banks of m buckets and the given cache capacity; other fields default.
    pub fn online(banks: u32, buckets_per_bank: u32, cache_capacity: u64) -> Self {
        Self {
            banks,
            binding: Binding::Online { buckets_per_bank },
            cache_capacity,
            sample_probability: default_sample_probability(),
            sample_by: SampleKey::Packet,
            seed: default_seed(),
            std_dev: StdDevEstimator::BucketMoment,
        }
    }

    /// Late-binding mode with the spec's margins (see [`Binding::late`]).
    pub fn late_binding(banks: u32, cache_capacity: u64) -> Self {
        Self { binding: Binding::late(), ..Self::online(banks, 1, cache_capacity) }
    }

    /// Memory a worker shard's packet log reserves: [`super::log::ENTRY_BYTES`] per packet of
    /// `cache_capacity`, whether or not traffic fills it.
    pub fn log_bytes(&self) -> u64 {
        self.cache_capacity.saturating_mul(super::log::ENTRY_BYTES as u64)
    }

    /// Most bytes one buffer uses: the cache's slot table (16 B per slot, the next power of
    /// two ≥ 4/3 · capacity; allocated by the first one-by-one insert) or, for an epoch whose
    /// workers' logs a merge appended and `settle` filed in bulk (the control thread's merged
    /// epochs), the appended log and the sorted run (16 B per packet each, at most `capacity`
    /// packets), whichever is larger; plus, online, the k·m buckets (24 B each). A worker's
    /// shard fills a log of 16 B per packet instead, at most `capacity` packets.
    pub fn shard_bytes(&self) -> u64 {
        let c = self.cache_capacity.max(1);
        let slots = (c + c / 3 + 1).checked_next_power_of_two().unwrap_or(u64::MAX / 16).max(2);
        let cache = slots.saturating_mul(16).max(c.saturating_mul(32));
        let buckets = self.online_buckets_per_bank().map_or(0, |m| self.banks as u64 * m as u64);
        cache.saturating_add(buckets * 24)
    }

    /// The same configuration with another seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// k as a usize.
    pub fn k(&self) -> usize {
        self.banks as usize
    }

    /// m for online mode; `None` in late-binding mode.
    pub fn online_buckets_per_bank(&self) -> Option<usize> {
        match self.binding {
            Binding::Online { buckets_per_bank } => Some(buckets_per_bank as usize),
            Binding::LateBinding { .. } => None,
        }
    }

    /// True in late-binding mode.
    pub fn is_late_binding(&self) -> bool {
        matches!(self.binding, Binding::LateBinding { .. })
    }

    /// The seed of bank `l`'s index hash: bucket = reduce(derive(id, bank_seed(l)), m).
    pub fn bank_seed(&self, l: usize) -> u64 {
        derive(PURPOSE_BANK.wrapping_add(l as u64), self.seed)
    }

    /// The seed of the cache's slot hash (local only; need not match the other point, but does).
    pub fn cache_seed(&self) -> u64 {
        derive(PURPOSE_CACHE, self.seed)
    }

    /// The seed of the sampling hash (must match the other point).
    pub fn sample_seed(&self) -> u64 {
        derive(PURPOSE_SAMPLE, self.seed)
    }

    /// The seed of the MinHash signature hash (must match the other point).
    pub fn minhash_seed(&self) -> u64 {
        derive(PURPOSE_MINHASH, self.seed)
    }

    /// The sampling coin.
    pub fn coin(&self) -> Coin {
        Coin::new(self.sample_probability)
    }

    fn err(field: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(SynopsisKind::Rda, field, reason)
    }
}

/// Checks k·m against the bucket cap; shared by online validation and late-binding sizing.
pub(crate) fn check_total_buckets(banks: u32, buckets_per_bank: u64) -> Result<(), ConfigError> {
    let total = banks as u64 * buckets_per_bank;
    if total > MAX_TOTAL_BUCKETS {
        return Err(RdaConfig::err(
            "binding.buckets_per_bank",
            format!(
                "{banks} banks × {buckets_per_bank} buckets exceeds the cap of {MAX_TOTAL_BUCKETS} buckets"
            ),
        ));
    }
    Ok(())
}

impl SynopsisConfig for RdaConfig {
    const KIND: SynopsisKind = SynopsisKind::Rda;
    type Written = Self;

    fn from_written(written: Self) -> Result<Self, ConfigError> {
        Ok(written)
    }

    /// xxh3 of the kind byte and the postcard encoding of the configuration with
    /// `cache_capacity` zeroed: the capacity sizes one point's memory and may differ between
    /// the two points; everything else (k, binding, sampling, seed) must match.
    fn fingerprint(&self) -> u64 {
        // The cache capacity sizes one point and the σ̂ estimator is chosen where the estimate
        // is made: neither has to match between the points.
        let shared = RdaConfig { cache_capacity: 0, std_dev: StdDevEstimator::BucketMoment, ..self.clone() };
        let mut bytes = vec![Self::KIND as u8];
        if let Ok(body) = postcard::to_allocvec(&shared) {
            bytes.extend_from_slice(&body);
        }
        xxhash_rust::xxh3::xxh3_64(&bytes)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.banks == 0 || self.banks as usize > MAX_BANKS {
            return Err(Self::err("banks", format!("must be in 1..={MAX_BANKS}, got {}", self.banks)));
        }
        if self.cache_capacity == 0 || self.cache_capacity > MAX_CACHE_CAPACITY {
            return Err(Self::err(
                "cache_capacity",
                format!("must be in 1..={MAX_CACHE_CAPACITY}, got {}", self.cache_capacity),
            ));
        }
        let p = self.sample_probability;
        if !(p > 0.0 && p <= 1.0) {
            return Err(Self::err("sample_probability", format!("must be in (0, 1], got {p}")));
        }
        match self.binding {
            Binding::Online { buckets_per_bank } => {
                if buckets_per_bank == 0 {
                    return Err(Self::err("binding.buckets_per_bank", "must be at least 1"));
                }
                check_total_buckets(self.banks, buckets_per_bank as u64)?;
            }
            Binding::LateBinding {
                min_buckets_per_bank,
                max_buckets_per_bank,
                slack,
                max_attempts,
                signature_len,
            } => {
                if min_buckets_per_bank == 0 {
                    return Err(Self::err("binding.min_buckets_per_bank", "must be at least 1"));
                }
                if max_buckets_per_bank < min_buckets_per_bank {
                    return Err(Self::err(
                        "binding.max_buckets_per_bank",
                        format!(
                            "{max_buckets_per_bank} is below min_buckets_per_bank {min_buckets_per_bank}"
                        ),
                    ));
                }
                check_total_buckets(self.banks, max_buckets_per_bank as u64)?;
                if !(slack.is_finite() && (0.0..=100.0).contains(&slack)) {
                    return Err(Self::err("binding.slack", format!("must be in [0, 100], got {slack}")));
                }
                if max_attempts == 0 || max_attempts > MAX_ATTEMPTS {
                    return Err(Self::err(
                        "binding.max_attempts",
                        format!("must be in 1..={MAX_ATTEMPTS}, got {max_attempts}"),
                    ));
                }
                if !(16..=MAX_SIGNATURE_LEN).contains(&signature_len) {
                    return Err(Self::err(
                        "binding.signature_len",
                        format!("must be in 16..={MAX_SIGNATURE_LEN}, got {signature_len}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_are_refused() {
        RdaConfig::online(2, 2500, 1 << 16).validate().unwrap();
        RdaConfig::late_binding(2, 1 << 16).validate().unwrap();
        let bad = [
            RdaConfig::online(0, 10, 10),
            RdaConfig::online(9, 10, 10),
            RdaConfig::online(2, 0, 10),
            RdaConfig::online(2, 10, 0),
            RdaConfig::online(2, 1 << 24, 10),
            RdaConfig { sample_probability: 0.0, ..RdaConfig::online(2, 10, 10) },
            RdaConfig { sample_probability: f64::NAN, ..RdaConfig::online(2, 10, 10) },
            RdaConfig {
                binding: Binding::LateBinding {
                    min_buckets_per_bank: 100,
                    max_buckets_per_bank: 10,
                    slack: 0.5,
                    max_attempts: 3,
                    signature_len: 256,
                },
                ..RdaConfig::online(2, 10, 10)
            },
            RdaConfig {
                binding: Binding::LateBinding {
                    min_buckets_per_bank: 10,
                    max_buckets_per_bank: 100,
                    slack: 0.5,
                    max_attempts: 0,
                    signature_len: 256,
                },
                ..RdaConfig::online(2, 10, 10)
            },
        ];
        for c in bad {
            let e = c.validate().unwrap_err();
            assert_eq!(e.synopsis, SynopsisKind::Rda);
            assert!(!e.reason.is_empty());
        }
    }

    #[test]
    fn serde_defaults_and_unknown_fields() {
        // The runtime reads TOML; JSON exercises the same serde attributes (tag, defaults,
        // deny_unknown_fields) with the dev-dependencies this crate already has.
        let text = r#"{"banks": 2, "cache_capacity": 4096,
                       "binding": {"mode": "late_binding", "slack": 0.25}}"#;
        let c: RdaConfig = serde_json::from_str(text).unwrap();
        c.validate().unwrap();
        assert!(c.is_late_binding());
        match c.binding {
            Binding::LateBinding { slack, min_buckets_per_bank, .. } => {
                assert_eq!(slack, 0.25);
                assert_eq!(min_buckets_per_bank, 1024);
            }
            Binding::Online { .. } => unreachable!(),
        }
        let bad_top = r#"{"bogus": 1, "binding": {"mode": "online", "buckets_per_bank": 4}}"#;
        assert!(serde_json::from_str::<RdaConfig>(bad_top).is_err());
        let bad_inner = r#"{"binding": {"mode": "online", "buckets_per_bank": 4, "extra": 1}}"#;
        assert!(serde_json::from_str::<RdaConfig>(bad_inner).is_err());
        let online: RdaConfig =
            serde_json::from_str(r#"{"binding": {"mode": "online", "buckets_per_bank": 4}}"#).unwrap();
        assert_eq!(online.online_buckets_per_bank(), Some(4));
        assert_eq!(online.banks, 2);
    }

    #[test]
    fn fingerprint_tracks_every_field_and_seeds_are_distinct() {
        let a = RdaConfig::online(2, 100, 1000);
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_ne!(a.fingerprint(), a.clone().with_seed(7).fingerprint());
        assert_ne!(a.fingerprint(), RdaConfig::online(2, 101, 1000).fingerprint());
        assert_ne!(a.fingerprint(), RdaConfig { sample_probability: 0.5, ..a.clone() }.fingerprint());
        assert_eq!(
            a.fingerprint(),
            RdaConfig { cache_capacity: 77, ..a.clone() }.fingerprint(),
            "the cache capacity is local to a point"
        );
        assert_eq!(
            a.fingerprint(),
            RdaConfig { std_dev: StdDevEstimator::Collapsed, ..a.clone() }.fingerprint(),
            "the σ̂ estimator is chosen by the estimating side"
        );
        // 1,000 ids → 2,048 slots of 16 B (more than a log and a run of 1,000 × 16 B); 2·100
        // buckets of 24 B.
        assert_eq!(a.shard_bytes(), 2_048 * 16 + 200 * 24);
        // 1,100 ids → 2,048 slots of 16 B, fewer bytes than a log and a run of 1,100 × 16 B.
        assert_eq!(RdaConfig { cache_capacity: 1_100, ..a.clone() }.shard_bytes(), 1_100 * 32 + 200 * 24);
        let seeds = [a.bank_seed(0), a.bank_seed(1), a.cache_seed(), a.sample_seed(), a.minhash_seed()];
        for i in 0..seeds.len() {
            for j in i + 1..seeds.len() {
                assert_ne!(seeds[i], seeds[j]);
            }
        }
    }
}
