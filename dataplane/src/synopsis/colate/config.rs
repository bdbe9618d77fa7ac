//! COLATE's configuration: the counter vector's shape (n, m, b), the epoch threshold T, the
//! timestamp scale (tick and origin) and the seed of the cell choice. Identical at every point.

use crate::synopsis::{ConfigError, SynopsisConfig, SynopsisKind};
use serde::{Deserialize, Serialize};

/// Largest counter vector accepted (2^28 counters = 2 GiB of u64 cells, 4 GiB with packet
/// counts): a decoder sizes its allocation from the config, so the config bounds it.
pub const MAX_COUNTERS: u32 = 1 << 28;

/// Largest number of cells per flow accepted (queries allocate m-long vectors per flow).
pub const MAX_CELLS_PER_FLOW: u32 = 1 << 16;

/// How a packet picks its cell among the m cells of its flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JMode {
    /// j is a seeded hash of the packet identity: the same packet goes to the same cell at every
    /// point (spec §3 recommended version, §8 P1). Needed for the std-dev (Theorem 4) and, in
    /// practice, for the mean: foreign noise then cancels into foreign *latencies*.
    #[default]
    Consistent,
    /// The paper's literal "random j": here a hash of the packet identity *and the local
    /// timestamp*, so the two points choose independently. Kept to demonstrate spec §8 P1
    /// (mean errors of 10²–10³ relative); never use it in production.
    PerPointRandom,
}

/// COLATE configuration (spec §2, §3). Every field enters the fingerprint, so two points with a
/// different n, m, seed, tick or origin refuse each other's epochs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColateConfig {
    /// n: counters in the vector. Must be prime: double hashing then gives every flow m
    /// distinct cells (spec §8 P7).
    pub counters: u32,
    /// m: cells per flow (its "counter subvector"); even (pairing of Eq 9), 2 ≤ m < n.
    pub cells_per_flow: u32,
    /// b: the modelled counter width in bits (1..=64). Software counters are u64; b decides
    /// when a counter epoch must close (no counter may exceed 2^b − 1) and the paper's storage
    /// accounting (n·b bits per epoch).
    pub counter_bits: u8,
    /// T: a counter epoch closes before the sum of its recorded ticks would exceed T.
    pub epoch_threshold_ticks: u64,
    /// Length of one tick in ns: recorded value = (ts_ns − origin_ns) / tick_ns.
    #[serde(default = "default_tick_ns")]
    pub tick_ns: u64,
    /// The origin O in ns on the points' common clock. Packets before it are skipped and counted.
    /// Keep it close to the measured period: timestamp-scale noise grows with the distance.
    #[serde(default)]
    pub origin_ns: u64,
    /// Seed of the cell choice (flow cells and per-packet j), identical at all points.
    #[serde(default)]
    pub seed: u64,
    /// How j is chosen per packet.
    #[serde(default)]
    pub j_mode: JMode,
    /// Keep a packet counter beside every timestamp counter (beyond the paper, spec §8 P2):
    /// enables the count-based std-dev and mean, which leave out cells hit by epoch-edge, lost or
    /// extra packets and by chunks of other large flows.
    /// Doubles the memory; stored epochs grow by the bits of the largest count per cell.
    #[serde(default)]
    pub packet_counts: bool,
}

fn default_tick_ns() -> u64 {
    1
}

impl ColateConfig {
    /// A config with the defaults for everything but the shape (1 ns ticks, origin 0, seed 0,
    /// consistent j, no packet counts).
    pub fn new(counters: u32, cells_per_flow: u32, counter_bits: u8, epoch_threshold_ticks: u64) -> Self {
        Self {
            counters,
            cells_per_flow,
            counter_bits,
            epoch_threshold_ticks,
            tick_ns: 1,
            origin_ns: 0,
            seed: 0,
            j_mode: JMode::Consistent,
            packet_counts: false,
        }
    }

    /// u64 words per cell in the state: 1, or 2 with packet counts (sum, count side by side so
    /// one cache line serves both adds).
    pub fn stride(&self) -> usize {
        if self.packet_counts { 2 } else { 1 }
    }

    /// The largest value a modelled b-bit counter holds: 2^b − 1.
    pub fn counter_limit(&self) -> u64 {
        if self.counter_bits >= 64 { u64::MAX } else { (1u64 << self.counter_bits) - 1 }
    }

    /// The paper's RAM budget M = n·b in bits (Eq 13).
    pub fn memory_bits(&self) -> u64 {
        self.counters as u64 * self.counter_bits as u64
    }

    /// Converts a time on the common clock to ticks; `None` before the origin.
    pub fn ticks_of(&self, ts_ns: u64) -> Option<u64> {
        ts_ns.checked_sub(self.origin_ns).map(|d| d / self.tick_ns.max(1))
    }

    fn err(field: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(SynopsisKind::Colate, field, reason)
    }
}

impl SynopsisConfig for ColateConfig {
    const KIND: SynopsisKind = SynopsisKind::Colate;
    /// The table may give the load instead of `cells_per_flow` ([`ColateConfigKeys::resolve`]).
    type Written = super::coverage::ColateConfigKeys;

    fn from_written(written: super::coverage::ColateConfigKeys) -> Result<Self, ConfigError> {
        written.resolve().map(|(cfg, _)| cfg)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.counters < 3 || self.counters > MAX_COUNTERS {
            return Err(Self::err(
                "counters",
                format!("must be in 3..={MAX_COUNTERS}, got {}", self.counters),
            ));
        }
        if !is_prime(self.counters as u64) {
            return Err(Self::err(
                "counters",
                format!(
                    "must be prime so every flow gets m distinct cells (double hashing); {} is not, \
                     the nearest primes are {} and {}",
                    self.counters,
                    prev_prime(self.counters as u64).unwrap_or(2),
                    next_prime(self.counters as u64)
                ),
            ));
        }
        let m = self.cells_per_flow;
        if m < 2 || !m.is_multiple_of(2) || m > MAX_CELLS_PER_FLOW {
            return Err(Self::err(
                "cells_per_flow",
                format!("must be even and in 2..={MAX_CELLS_PER_FLOW} (Eq 9 pairs cells), got {m}"),
            ));
        }
        if m >= self.counters {
            return Err(Self::err(
                "cells_per_flow",
                format!(
                    "must be smaller than counters (Eq 4 divides by n − m), got m = {m} ≥ n = {}",
                    self.counters
                ),
            ));
        }
        if self.counter_bits == 0 || self.counter_bits > 64 {
            return Err(Self::err("counter_bits", format!("must be in 1..=64, got {}", self.counter_bits)));
        }
        if self.epoch_threshold_ticks == 0 {
            return Err(Self::err("epoch_threshold_ticks", "must be at least 1"));
        }
        if self.tick_ns == 0 {
            return Err(Self::err("tick_ns", "must be at least 1 ns"));
        }
        Ok(())
    }
}

/// True if `n` is prime (trial division by 6k ± 1; configs are at most 2^32, so ≤ 2^16 steps).
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    if n < 4 {
        return true;
    }
    if n.is_multiple_of(2) || n.is_multiple_of(3) {
        return false;
    }
    let mut d = 5u64;
    while d.saturating_mul(d) <= n {
        if n.is_multiple_of(d) || n.is_multiple_of(d + 2) {
            return false;
        }
        d += 6;
    }
    true
}

/// The largest prime ≤ `n`, if any.
pub fn prev_prime(n: u64) -> Option<u64> {
    (2..=n).rev().find(|&p| is_prime(p))
}

/// The smallest prime ≥ `n`.
pub fn next_prime(n: u64) -> u64 {
    let mut p = n.max(2);
    while !is_prime(p) {
        p += 1;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> ColateConfig {
        ColateConfig::new(10_007, 20, 19, 8_000_000_000)
    }

    #[test]
    fn primes() {
        let small: Vec<u64> = (0..30).filter(|&n| is_prime(n)).collect();
        assert_eq!(small, vec![2, 3, 5, 7, 11, 13, 17, 19, 23, 29]);
        for n in 0..2000u64 {
            let brute = n >= 2 && (2..n).all(|d| n % d != 0);
            assert_eq!(is_prime(n), brute, "{n}");
        }
        assert_eq!(prev_prime(10_000), Some(9_973));
        assert_eq!(next_prime(10_000), 10_007);
        assert_eq!(prev_prime(1), None);
        assert!(is_prime(4_294_967_291)); // largest prime below 2^32
    }

    #[test]
    fn validation_messages() {
        ok().validate().unwrap();
        let e = ColateConfig { counters: 10_000, ..ok() }.validate().unwrap_err();
        assert_eq!(e.field, "counters");
        assert!(e.reason.contains("9973") && e.reason.contains("10007"), "{}", e.reason);
        for m in [0, 1, 3, 21] {
            assert_eq!(
                ColateConfig { cells_per_flow: m, ..ok() }.validate().unwrap_err().field,
                "cells_per_flow"
            );
        }
        let e = ColateConfig { counters: 11, cells_per_flow: 12, ..ok() }.validate().unwrap_err();
        assert!(e.reason.contains("n − m"), "{}", e.reason);
        assert_eq!(ColateConfig { counter_bits: 0, ..ok() }.validate().unwrap_err().field, "counter_bits");
        assert_eq!(ColateConfig { counter_bits: 65, ..ok() }.validate().unwrap_err().field, "counter_bits");
        assert_eq!(
            ColateConfig { epoch_threshold_ticks: 0, ..ok() }.validate().unwrap_err().field,
            "epoch_threshold_ticks"
        );
        assert_eq!(ColateConfig { tick_ns: 0, ..ok() }.validate().unwrap_err().field, "tick_ns");
    }

    #[test]
    fn fingerprint_covers_seed_shape_and_timescale() {
        let a = ok();
        let f = a.fingerprint();
        assert_eq!(f, ok().fingerprint());
        for other in [
            ColateConfig { seed: 1, ..ok() },
            ColateConfig { counters: 10_009, ..ok() },
            ColateConfig { cells_per_flow: 22, ..ok() },
            ColateConfig { tick_ns: 1000, ..ok() },
            ColateConfig { origin_ns: 5, ..ok() },
            ColateConfig { j_mode: JMode::PerPointRandom, ..ok() },
            ColateConfig { packet_counts: true, ..ok() },
        ] {
            assert_ne!(other.fingerprint(), f, "{other:?}");
        }
    }

    #[test]
    fn serde_defaults_and_unknown_fields() {
        let json =
            r#"{"counters":10007,"cells_per_flow":20,"counter_bits":19,"epoch_threshold_ticks":8000000000}"#;
        let c: ColateConfig = serde_json::from_str(json).unwrap();
        assert_eq!(c, ok());
        let bad =
            r#"{"counters":10007,"cells_per_flow":20,"counter_bits":19,"epoch_threshold_ticks":8,"x":1}"#;
        assert!(serde_json::from_str::<ColateConfig>(bad).is_err());
    }

    #[test]
    fn ticks_and_limits() {
        let c = ColateConfig { tick_ns: 1000, origin_ns: 5_000, ..ok() };
        assert_eq!(c.ticks_of(4_999), None);
        assert_eq!(c.ticks_of(5_000), Some(0));
        assert_eq!(c.ticks_of(7_999), Some(2));
        assert_eq!(c.counter_limit(), (1 << 19) - 1);
        assert_eq!(ColateConfig { counter_bits: 64, ..ok() }.counter_limit(), u64::MAX);
        assert_eq!(c.memory_bits(), 10_007 * 19);
    }
}
