//! The LDA state of one measurement point (or one core's shard of it): the flat array of
//! timestamp-accumulator/packet-counter cells, the per-packet update, the exact shard merge and
//! the reset. Sized once at construction; the update never allocates, branches only on "is this
//! packet sampled", and touches one cell.

use super::config::LdaConfig;
use super::encoding;
use super::placement::{CellIndex, Placement};
use crate::synopsis::codec::{DecodeError, Reader, Writer};
use crate::synopsis::{ConfigError, MergeError, Observation, Synopsis, SynopsisConfig};

/// One cell (i, j): the sum of the local timestamps of the packets hashed there (T[i, j]), their
/// number (S[i, j]) and the sum of their identities (our digest, not in the paper: two points
/// whose cells hold different packets disagree on it). All wrap at the configured widths.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cell {
    /// Timestamp accumulator T[i, j], modulo 2^ts_bits.
    pub ts_sum: u64,
    /// Packet counter S[i, j], modulo 2^count_bits.
    pub count: u64,
    /// Identity digest: Σ identities modulo 2^digest_bits (always 0 when `digest_bits` = 0).
    pub digest: u64,
}

/// A Lossy Difference Aggregator: n banks of m_j cells, laid out bank after bank in one flat
/// vector, plus the unsampled total packet counter (an extension, not in the paper: spec §8.16).
#[derive(Clone, Debug, PartialEq)]
pub struct Lda {
    cfg: LdaConfig,
    placement: Placement,
    ts_mask: u64,
    count_mask: u64,
    digest_mask: u64,
    cells: Vec<Cell>,
    total_packets: u64,
}

impl Lda {
    /// The paper's update procedure (§III-C), for a packet with identity `identity` seen at
    /// local time `ts` (ns on the appliance; any unit in simulations):
    ///
    /// ```text
    /// j ← g(x)                 bank, or "not sampled" (the paper's "if j ≥ 0" means j ≠ 0)
    /// if sampled:
    ///     i ← h(x)             row in bank j
    ///     T[i, j] ← T[i, j] + τ    (mod 2^ts_bits)
    ///     S[i, j] ← S[i, j] + 1    (mod 2^count_bits)
    ///     I[i, j] ← I[i, j] + x    (mod 2^digest_bits; our identity digest)
    /// ```
    ///
    /// plus, for every packet, the unsampled total counter (spec §8.16, not in the paper).
    #[inline]
    pub fn update_raw(&mut self, identity: u64, ts: u64) {
        self.total_packets = self.total_packets.wrapping_add(1);
        let Some(flat) = self.placement.flat_cell(identity) else { return };
        if let Some(c) = self.cells.get_mut(flat) {
            c.ts_sum = c.ts_sum.wrapping_add(ts) & self.ts_mask;
            c.count = c.count.wrapping_add(1) & self.count_mask;
            c.digest = c.digest.wrapping_add(identity) & self.digest_mask;
        }
    }

    /// Where a packet with this identity lands (`None`: no bank samples it). Both points
    /// compute the same answer for the same identity and config.
    pub fn locate(&self, identity: u64) -> Option<CellIndex> {
        self.placement.locate(identity)
    }

    /// All cells, bank after bank in config order.
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// The cells of bank `j` (empty if there is no such bank).
    pub fn bank_cells(&self, j: usize) -> &[Cell] {
        let start: usize = self.cfg.banks.iter().take(j).map(|b| b.rows as usize).sum();
        let len = self.cfg.banks.get(j).map_or(0, |b| b.rows as usize);
        self.cells.get(start..start + len).unwrap_or(&[])
    }

    /// Packets seen, sampled or not (modulo 2^64).
    pub fn total_packets(&self) -> u64 {
        self.total_packets
    }

    /// Builds a synopsis from decoded parts; `cells` must have the config's length and values
    /// within the configured widths (checked by the decoder).
    pub(crate) fn from_parts(cfg: &LdaConfig, cells: Vec<Cell>, total_packets: u64) -> Self {
        Self {
            cfg: cfg.clone(),
            placement: Placement::new(cfg),
            ts_mask: cfg.ts_mask(),
            count_mask: cfg.count_mask(),
            digest_mask: cfg.digest_mask(),
            cells,
            total_packets,
        }
    }

    /// Mutable cells, for tests that write the paper's worked examples directly.
    #[cfg(test)]
    pub(crate) fn cells_mut(&mut self) -> &mut [Cell] {
        &mut self.cells
    }

    /// Sets the total packet counter, for tests.
    #[cfg(test)]
    pub(crate) fn set_total_packets(&mut self, n: u64) {
        self.total_packets = n;
    }
}

impl Synopsis for Lda {
    type Config = LdaConfig;
    type Carry = ();
    // 2: cells carry the identity digest (`digest_bits`).
    const FORMAT_VERSION: u8 = 2;

    fn new(cfg: &LdaConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let n = cfg.total_cells() as usize;
        Ok(Self::from_parts(cfg, vec![Cell::default(); n], 0))
    }

    fn new_carry(_cfg: &LdaConfig) -> Self::Carry {}

    fn config(&self) -> &LdaConfig {
        &self.cfg
    }

    #[inline]
    fn update(&mut self, _carry: &mut (), obs: &Observation<'_>) {
        self.update_raw(obs.identity, obs.ts_ns);
    }

    /// Not located: LDA's banks are small (a few thousand cells) and stay in cache.
    type Location = ();

    /// Cell-wise wrapping sums: exactly the synopsis of the union of both shards' packets.
    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        self.check_same_config(other)?;
        for (a, b) in self.cells.iter_mut().zip(&other.cells) {
            a.ts_sum = a.ts_sum.wrapping_add(b.ts_sum) & self.ts_mask;
            a.count = a.count.wrapping_add(b.count) & self.count_mask;
            a.digest = a.digest.wrapping_add(b.digest) & self.digest_mask;
        }
        self.total_packets = self.total_packets.wrapping_add(other.total_packets);
        Ok(())
    }

    fn reset(&mut self) {
        self.cells.fill(Cell::default());
        self.total_packets = 0;
    }

    fn encode_body(&self, w: &mut Writer<'_>) {
        encoding::write_body(&self.cfg, &self.cells, self.total_packets, w);
    }

    fn decode_body(cfg: &LdaConfig, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let (cells, total) = encoding::read_body(cfg, r)?;
        Ok(Self::from_parts(cfg, cells, total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::FlowKey;
    use crate::sim;
    use crate::synopsis::lda::config::BankConfig;
    use rand::Rng;

    fn two_banks(seed: u64) -> LdaConfig {
        let mut c = LdaConfig::single_bank(16, 0.3, seed);
        c.banks.push(BankConfig { rows: 8, p: 0.5 });
        c.ts_bits = 40;
        c.count_bits = 32;
        c
    }

    #[test]
    fn update_touches_the_located_cell_only() {
        let mut lda = Lda::new(&two_banks(1)).unwrap();
        let mut expected = vec![Cell::default(); 24];
        for id in 0..1000u64 {
            let ts = 1_000 + 7 * id;
            lda.update_raw(id, ts);
            if let Some(c) = lda.locate(id) {
                expected[c.flat].ts_sum += ts;
                expected[c.flat].count += 1;
                expected[c.flat].digest += id;
            }
        }
        assert_eq!(lda.cells(), &expected[..]);
        assert_eq!(lda.total_packets(), 1000);
        // Roughly 80% sampled, so the unsampled counter is really unsampled.
        let sampled: u64 = lda.cells().iter().map(|c| c.count).sum();
        assert!(sampled > 700 && sampled < 900, "{sampled}");
        assert_eq!(lda.bank_cells(1).len(), 8);
        assert_eq!(lda.bank_cells(1), &expected[16..24]);
        assert!(lda.bank_cells(2).is_empty());
    }

    #[test]
    fn trait_update_uses_identity_and_timestamp() {
        let cfg = two_banks(2);
        let (mut a, mut b) = (Lda::new(&cfg).unwrap(), Lda::new(&cfg).unwrap());
        let flow = FlowKey::default();
        for id in 0..100u64 {
            let obs = Observation {
                ts_ns: id * 3,
                flow: &flow,
                flow_hash: 99,
                identity: id,
                exchange: None,
                encap: crate::packet::Encap::NONE,
            };
            a.update(&mut (), &obs);
            b.update_raw(id, id * 3);
        }
        assert_eq!(a, b);
    }

    #[test]
    fn widths_wrap() {
        let mut cfg = LdaConfig::single_bank(2, 1.0, 0);
        cfg.ts_bits = 8;
        cfg.count_bits = 8;
        let mut lda = Lda::new(&cfg).unwrap();
        for _ in 0..300 {
            lda.update_raw(42, 200);
        }
        let c = lda.cells()[lda.locate(42).unwrap().flat];
        assert_eq!(c.count, 300 % 256);
        assert_eq!(c.ts_sum, (300 * 200) % 256);
    }

    #[test]
    fn merged_shards_equal_one_synopsis_fed_everything() {
        // Random packets split at random over 2–4 shards; the merged shards must be identical
        // (==) to one synopsis that saw every packet, with 40/32-bit wrapping.
        let mut r = sim::rng(17);
        for shards in 2..=4 {
            let cfg = two_banks(shards);
            let mut whole = Lda::new(&cfg).unwrap();
            let mut parts: Vec<Lda> = (0..shards).map(|_| Lda::new(&cfg).unwrap()).collect();
            for _ in 0..20_000 {
                let (id, ts) = (r.random::<u64>(), r.random::<u64>());
                whole.update_raw(id, ts);
                parts[r.random_range(0..shards as usize)].update_raw(id, ts);
            }
            let mut merged = parts.remove(0);
            for p in &parts {
                merged.merge(p).unwrap();
            }
            assert_eq!(merged, whole, "{shards} shards");
        }
    }

    #[test]
    fn merge_refuses_another_config_and_reset_clears() {
        let mut a = Lda::new(&two_banks(1)).unwrap();
        let b = Lda::new(&two_banks(2)).unwrap();
        assert!(matches!(a.merge(&b), Err(MergeError::ConfigMismatch { .. })));
        for id in 0..100 {
            a.update_raw(id, id);
        }
        a.reset();
        assert_eq!(a, Lda::new(&two_banks(1)).unwrap());
    }

    #[test]
    fn new_validates() {
        assert!(Lda::new(&LdaConfig::single_bank(3, 1.0, 0)).is_err());
    }
}
