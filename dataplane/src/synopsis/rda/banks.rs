//! The RDA proper: k banks of m buckets, each bucket ⟨XOR of ids, wrapping sum of timestamps,
//! signed count⟩ (spec §2.3), with insert/delete and the bank index hashes.
//!
//! Layout: one flat array, bank l's bucket i at index l·m + i (spec §2.3, 0-based). Bank l's
//! index of a packet id is `reduce(derive(id, bank_seed(l)), m)`; both points compute the same.
//! Pure data structure: no I/O, no allocation after construction.

use super::config::{MAX_BANKS, RdaConfig};
use crate::synopsis::hash::{mix64, reduce};

/// One bucket: 24 bytes, `#[repr(C)]` so the wire encoding is three LE u64s in field order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// XOR of the ids in the bucket.
    pub id_xor: u64,
    /// Wrapping sum of the timestamps (ns); only differences of sums are meaningful (P12).
    pub ts_sum_ns: u64,
    /// Signed packet count (+1 per insert, −1 per delete).
    pub count: i64,
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 24);

/// Bytes of one encoded bucket.
pub const BUCKET_BYTES: usize = 24;

/// The packet id RDA uses for a packet identity: 0 is the empty-bucket marker (P13), so it
/// becomes 1.
#[inline(always)]
pub const fn packet_id(identity: u64) -> u64 {
    if identity == 0 { 1 } else { identity }
}

/// The golden-ratio constant `hash::derive` folds into a seed; kept here so the per-bank key
/// can be precomputed once (see [`BankHash`]).
const DERIVE_SEED_MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// The k bank index hashes of one geometry, with the seed half of `hash::derive` precomputed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BankHash {
    k: usize,
    m: u64,
    seeds: [u64; MAX_BANKS],
    keys: [u64; MAX_BANKS],
}

impl BankHash {
    /// The index hashes for k banks of m buckets with `cfg`'s seeds. `k` must be in
    /// 1..=MAX_BANKS (the config validates it) and m ≥ 1.
    pub fn new(cfg: &RdaConfig, m: usize) -> Self {
        let k = cfg.k().clamp(1, MAX_BANKS);
        let mut seeds = [0u64; MAX_BANKS];
        let mut keys = [0u64; MAX_BANKS];
        for l in 0..k {
            seeds[l] = cfg.bank_seed(l);
            keys[l] = mix64(seeds[l] ^ DERIVE_SEED_MIX);
        }
        Self { k, m: m.max(1) as u64, seeds, keys }
    }

    /// k.
    #[inline(always)]
    pub fn banks(&self) -> usize {
        self.k
    }

    /// m.
    #[inline(always)]
    pub fn buckets_per_bank(&self) -> usize {
        self.m as usize
    }

    /// Bucket of `id` in bank `l` (0..m); equals `reduce(derive(id, bank_seed(l)), m)`.
    #[inline(always)]
    pub fn index(&self, l: usize, id: u64) -> usize {
        reduce(mix64(id ^ self.keys[l % MAX_BANKS]), self.m) as usize
    }

    /// Flat array position of `id` in bank `l`.
    #[inline(always)]
    pub fn slot(&self, l: usize, id: u64) -> usize {
        l * self.m as usize + self.index(l, id)
    }

    /// The seed of bank `l` (for documentation and cross-checks).
    pub fn seed(&self, l: usize) -> u64 {
        self.seeds[l % MAX_BANKS]
    }
}

/// k banks × m buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Banks {
    hash: BankHash,
    buckets: Vec<Bucket>,
}

impl Banks {
    /// Zeroed banks of m buckets each for `cfg` (k from the config). Allocates k·m buckets.
    pub fn new(cfg: &RdaConfig, m: usize) -> Self {
        let hash = BankHash::new(cfg, m);
        let n = hash.k * hash.m as usize;
        Self { hash, buckets: vec![Bucket::default(); n] }
    }

    /// Banks over existing buckets (from a decoder that checked `buckets.len() == k·m`).
    pub(crate) fn from_buckets(hash: BankHash, buckets: Vec<Bucket>) -> Self {
        Self { hash, buckets }
    }

    /// The index hashes.
    #[inline(always)]
    pub fn hash(&self) -> &BankHash {
        &self.hash
    }

    /// k.
    pub fn banks(&self) -> usize {
        self.hash.k
    }

    /// m.
    pub fn buckets_per_bank(&self) -> usize {
        self.hash.m as usize
    }

    /// All k·m buckets, bank after bank.
    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// Bank `l`'s m buckets.
    pub fn bank(&self, l: usize) -> &[Bucket] {
        let m = self.hash.m as usize;
        self.buckets.get(l * m..(l + 1) * m).unwrap_or(&[])
    }

    /// Memory of the bucket array in bytes (24·k·m).
    pub fn bytes(&self) -> usize {
        self.buckets.len() * BUCKET_BYTES
    }

    /// Folds a packet in: in every bank, ID ^= id, TS += ts, Δ += 1 (spec §3.2).
    #[inline(always)]
    pub fn insert(&mut self, id: u64, ts_ns: u64) {
        for l in 0..self.hash.k {
            let s = self.hash.slot(l, id);
            if let Some(b) = self.buckets.get_mut(s) {
                b.id_xor ^= id;
                b.ts_sum_ns = b.ts_sum_ns.wrapping_add(ts_ns);
                b.count = b.count.wrapping_add(1);
            }
        }
    }

    /// Takes a packet out: in every bank, ID ^= id, TS −= ts, Δ −= 1 (spec §3.2).
    #[inline]
    pub fn delete(&mut self, id: u64, ts_ns: u64) {
        for l in 0..self.hash.k {
            let s = self.hash.slot(l, id);
            if let Some(b) = self.buckets.get_mut(s) {
                b.id_xor ^= id;
                b.ts_sum_ns = b.ts_sum_ns.wrapping_sub(ts_ns);
                b.count = b.count.wrapping_sub(1);
            }
        }
    }

    /// Replaces the timestamp of a packet already inserted (`old` → `new`), e.g. when a
    /// duplicate turns out to be earlier than the cached copy.
    #[inline]
    pub fn retime(&mut self, id: u64, old_ts_ns: u64, new_ts_ns: u64) {
        let delta = new_ts_ns.wrapping_sub(old_ts_ns);
        for l in 0..self.hash.k {
            let s = self.hash.slot(l, id);
            if let Some(b) = self.buckets.get_mut(s) {
                b.ts_sum_ns = b.ts_sum_ns.wrapping_add(delta);
            }
        }
    }

    /// Adds `other` bucket by bucket (shards of one point). Callers check the geometry.
    pub fn add(&mut self, other: &Banks) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            a.id_xor ^= b.id_xor;
            a.ts_sum_ns = a.ts_sum_ns.wrapping_add(b.ts_sum_ns);
            a.count = a.count.wrapping_add(b.count);
        }
    }

    /// True when `other` has the same k, m and seeds.
    pub fn same_geometry(&self, other: &Banks) -> bool {
        self.hash == other.hash && self.buckets.len() == other.buckets.len()
    }

    /// Zeroes every bucket, keeping the allocation.
    pub fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
    }

    /// Packets in the structure, read from bank 0 (every packet is in exactly one bucket per
    /// bank, so each bank sums to the same count).
    pub fn packets(&self) -> i64 {
        self.bank(0).iter().fold(0i64, |acc, b| acc.wrapping_add(b.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::hash::derive;

    #[test]
    fn index_equals_the_documented_derive() {
        let cfg = RdaConfig::online(3, 777, 16);
        let h = BankHash::new(&cfg, 777);
        for id in [1u64, 2, 0xdead_beef, u64::MAX] {
            for l in 0..3 {
                assert_eq!(h.index(l, id) as u64, reduce(derive(id, cfg.bank_seed(l)), 777));
                assert!(h.index(l, id) < 777);
            }
        }
    }

    #[test]
    fn insert_then_delete_is_identity_and_counts_per_bank() {
        let cfg = RdaConfig::online(2, 100, 16);
        let mut b = Banks::new(&cfg, 100);
        assert_eq!(b.bytes(), 4_800, "spec §2.3: k = 2, m = 100 → 4,800 B");
        for id in 1..=50u64 {
            b.insert(id, u64::MAX - id); // wraps the sums
        }
        assert_eq!(b.packets(), 50);
        assert_eq!(b.bank(1).iter().map(|x| x.count).sum::<i64>(), 50);
        b.retime(7, u64::MAX - 7, 3);
        b.retime(7, 3, u64::MAX - 7);
        for id in 1..=50u64 {
            b.delete(id, u64::MAX - id);
        }
        assert!(b.buckets().iter().all(|x| *x == Bucket::default()));
        assert_eq!(packet_id(0), 1);
        assert_eq!(packet_id(9), 9);
    }
}
