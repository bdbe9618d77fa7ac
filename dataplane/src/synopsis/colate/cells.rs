//! The cell choice shared by every point and by the query: a flow's m cells by double hashing
//! of the packet layer's flow hash, and a packet's j among them from its identity.
//!
//! With n prime and a step h2 ∈ [1, n − 1], the cells i_j = (h1 + j·h2) mod n for j = 0..m are
//! distinct (spec §8 P7), so a flow's subvector never counts a cell twice. Nothing here is
//! randomly keyed: both points and the query compute the same cells for the same inputs.

use super::config::{ColateConfig, JMode};
use crate::synopsis::hash::{derive, mix64, reduce};
use strength_reduce::StrengthReducedU64;

/// Purpose tags mixed into the configured seed, so the flow and packet streams are unrelated.
const PURPOSE_FLOW: u64 = 0xC01A_7E00_0000_0001;
const PURPOSE_PACKET: u64 = 0xC01A_7E00_0000_0002;
/// The constant `hash::derive` mixes into its seed.
const DERIVE_SALT: u64 = 0x9e37_79b9_7f4a_7c15;

/// Precomputed keys and divisor for the cell choice of one configuration.
#[derive(Clone, Copy, Debug)]
pub struct CellMap {
    n: u64,
    n_div: StrengthReducedU64,
    m: u64,
    /// mix64(derive(seed, PURPOSE_FLOW) ^ DERIVE_SALT): `mix64(x ^ flow_key)` equals
    /// `derive(x, derive(seed, PURPOSE_FLOW))` without re-mixing the seed per packet.
    flow_key: u64,
    /// The same for the per-packet j.
    packet_key: u64,
    per_point_random: bool,
}

impl CellMap {
    /// The cell map of a (validated) configuration.
    pub fn new(cfg: &ColateConfig) -> Self {
        let n = (cfg.counters as u64).max(2);
        Self {
            n,
            n_div: StrengthReducedU64::new(n),
            m: (cfg.cells_per_flow as u64).max(1),
            flow_key: mix64(derive(cfg.seed, PURPOSE_FLOW) ^ DERIVE_SALT),
            packet_key: mix64(derive(cfg.seed, PURPOSE_PACKET) ^ DERIVE_SALT),
            per_point_random: cfg.j_mode == JMode::PerPointRandom,
        }
    }

    /// (h1, h2): the flow's first cell and its step, from independent 32-bit halves of one mix.
    #[inline(always)]
    fn flow_base(&self, flow_hash: u64) -> (u64, u64) {
        let h = mix64(flow_hash ^ self.flow_key);
        let h1 = ((h >> 32) * self.n) >> 32;
        let h2 = 1 + (((h & 0xffff_ffff) * (self.n - 1)) >> 32);
        (h1, h2)
    }

    /// The packet's j ∈ [0, m).
    #[inline(always)]
    pub fn packet_j(&self, identity: u64, ts_ns: u64) -> u64 {
        let x = if self.per_point_random {
            identity ^ ts_ns.wrapping_mul(DERIVE_SALT).rotate_left(29)
        } else {
            identity
        };
        reduce(mix64(x ^ self.packet_key), self.m)
    }

    /// The j-th cell of the flow (j < m).
    #[inline(always)]
    pub fn flow_cell(&self, flow_hash: u64, j: u64) -> usize {
        let (h1, h2) = self.flow_base(flow_hash);
        // h1 < n ≤ 2^28, j < m ≤ 2^16, h2 < n: the sum stays far below 2^64.
        ((h1 + j * h2) % self.n_div) as usize
    }

    /// The cell a packet adds its timestamp to: one flow hash mix, one packet mix, one
    /// multiply-based modulo.
    #[inline(always)]
    pub fn packet_cell(&self, flow_hash: u64, identity: u64, ts_ns: u64) -> usize {
        self.flow_cell(flow_hash, self.packet_j(identity, ts_ns))
    }

    /// The flow's subvector: its m cells in j order.
    pub fn subvector(&self, flow_hash: u64) -> Vec<usize> {
        let (h1, h2) = self.flow_base(flow_hash);
        (0..self.m).map(|j| ((h1 + j * h2) % self.n_div) as usize).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn cfg(n: u32, m: u32) -> ColateConfig {
        ColateConfig::new(n, m, 19, 1 << 40)
    }

    #[test]
    fn keys_equal_the_shared_derive() {
        let c = ColateConfig { seed: 77, ..cfg(10_007, 20) };
        let map = CellMap::new(&c);
        for x in [0u64, 1, 0xdead_beef, u64::MAX] {
            assert_eq!(mix64(x ^ map.flow_key), derive(x, derive(77, PURPOSE_FLOW)));
            assert_eq!(mix64(x ^ map.packet_key), derive(x, derive(77, PURPOSE_PACKET)));
        }
    }

    #[test]
    fn double_hashing_gives_m_distinct_cells() {
        // n prime and h2 ∈ [1, n − 1] make j ↦ (h1 + j·h2) mod n injective on [0, n).
        for (n, m) in [(11u32, 10u32), (10_007, 20), (455_333, 64), (3, 2)] {
            let map = CellMap::new(&cfg(n, m));
            for f in 0..500u64 {
                let sub = map.subvector(mix64(f));
                assert_eq!(sub.len(), m as usize);
                assert!(sub.iter().all(|&i| i < n as usize));
                assert_eq!(sub.iter().collect::<HashSet<_>>().len(), m as usize, "n={n} m={m} f={f}");
            }
        }
    }

    #[test]
    fn packet_cell_is_in_the_flow_subvector_and_j_is_uniform() {
        let map = CellMap::new(&cfg(10_007, 20));
        let sub = map.subvector(42);
        let mut hits = [0u64; 20];
        let packets = 200_000u64;
        for id in 0..packets {
            let cell = map.packet_cell(42, mix64(id), id);
            let j = sub.iter().position(|&c| c == cell).expect("cell outside the subvector");
            hits[j] += 1;
        }
        // Each count is Binom(200 000, 1/20): sd = √(N p (1 − p)) ≈ 97.5; allow 5 sd.
        let p = 1.0 / 20.0;
        let sd = (packets as f64 * p * (1.0 - p)).sqrt();
        for h in hits {
            assert!((h as f64 - packets as f64 * p).abs() < 5.0 * sd, "{hits:?}");
        }
    }

    #[test]
    fn consistent_j_ignores_the_timestamp_random_j_does_not() {
        let c = cfg(10_007, 20);
        let map = CellMap::new(&c);
        let rnd = CellMap::new(&ColateConfig { j_mode: JMode::PerPointRandom, ..c });
        let mut same = 0;
        for id in 0..1000u64 {
            assert_eq!(map.packet_j(id, 1), map.packet_j(id, 999_999));
            same += (rnd.packet_j(id, 1) == rnd.packet_j(id, 999_999)) as u32;
        }
        // Independent choices agree with probability 1/m: ≈ 50 of 1000 (sd ≈ 6.9).
        assert!((same as i64 - 50).abs() < 35, "{same}");
    }

    #[test]
    fn seeds_change_the_cells() {
        let a = CellMap::new(&cfg(10_007, 20));
        let b = CellMap::new(&ColateConfig { seed: 1, ..cfg(10_007, 20) });
        assert_ne!(a.subvector(5), b.subvector(5));
    }
}
