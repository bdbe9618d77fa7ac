//! Where a packet goes: the per-row flow hashes h_r(f), the vLDA offset, the digest and the
//! per-row sampling decision (spec §4), all derived from `Observation.flow_hash` /
//! `Observation.identity` and the configured seed, so both points compute the same cells.
//!
//! Independence (spec §4 item 4, §12 P7/P8): the packet hash ph = derive(identity, seed_ph)
//! gives the shared offset from its low 32 bits and the digest from its high 32 bits; per-row
//! offsets (optional) and per-row sampling each use their own derived stream. Holds seeds and
//! coins only; never touches a cell.

use super::config::{LdsConfig, OffsetMode};
use crate::synopsis::hash::{self, Coin};

/// Purposes of the derived seeds (kept apart so no two decisions share a hash stream).
const PURPOSE_PACKET: u64 = 1;
const PURPOSE_ROW_FLOW: u64 = 2;
const PURPOSE_ROW_SAMPLE: u64 = 3;
const PURPOSE_ROW_OFFSET: u64 = 4;

/// The salt [`hash::derive`] mixes its seed with (pinned by a test against `hash::derive`).
const DERIVE_SALT: u64 = 0x9e37_79b9_7f4a_7c15;

/// A derived hash stream: `at(x) == hash::derive(x, seed)`, with the seed's half of the mixing
/// done once at construction instead of once per packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stream {
    key: u64,
}

impl Stream {
    pub fn new(seed: u64) -> Self {
        Self { key: hash::mix64(seed ^ DERIVE_SALT) }
    }

    #[inline(always)]
    pub fn at(self, x: u64) -> u64 {
        hash::mix64(x ^ self.key)
    }
}

/// The hash parameters of one row.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RowParams {
    /// h_r(f) before reduction.
    pub flow: Stream,
    /// This row's sampling stream.
    pub sample: Stream,
    /// This row's offset stream (per-row offset mode).
    pub offset: Stream,
    /// The sampling decision.
    pub coin: Coin,
    /// The exact sampling probability the coin realises (used to invert counts).
    pub rate: f64,
    /// Index of the row's first cell.
    pub start: usize,
}

/// Everything needed to map packets and flows to cells.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Addressing {
    pub width: u64,
    pub k: u64,
    pub packet: Stream,
    pub shared_offset: bool,
    pub sample_all: bool,
    pub rows: Vec<RowParams>,
}

fn seed_for(seed: u64, purpose: u64, row: u64) -> u64 {
    hash::derive(seed, (purpose << 32) | row)
}

/// Maps the low 32 bits of `h` onto `0..k` (multiply-shift, no division).
#[inline(always)]
pub(crate) fn offset_from_low_bits(h: u64, k: u64) -> u64 {
    ((h & 0xffff_ffff) * k) >> 32
}

impl Addressing {
    pub fn new(cfg: &LdsConfig) -> Self {
        let width = u64::from(cfg.width);
        let rows: Vec<RowParams> = (0..cfg.rows as usize)
            .map(|r| {
                let coin = Coin::new(cfg.sampling_of(r));
                RowParams {
                    flow: Stream::new(seed_for(cfg.seed, PURPOSE_ROW_FLOW, r as u64)),
                    sample: Stream::new(seed_for(cfg.seed, PURPOSE_ROW_SAMPLE, r as u64)),
                    offset: Stream::new(seed_for(cfg.seed, PURPOSE_ROW_OFFSET, r as u64)),
                    rate: coin.probability(),
                    coin,
                    start: r * cfg.width as usize,
                }
            })
            .collect();
        Self {
            width,
            k: u64::from(cfg.vlda_len),
            packet: Stream::new(seed_for(cfg.seed, PURPOSE_PACKET, 0)),
            shared_offset: cfg.offsets == OffsetMode::Shared,
            sample_all: rows.iter().all(|r| r.rate >= 1.0),
            rows,
        }
    }

    /// The 64-bit packet hash ph of a packet identity.
    #[inline(always)]
    pub fn packet_hash(&self, identity: u64) -> u64 {
        self.packet.at(identity)
    }

    /// The 32-bit digest: the high half of ph, disjoint from the offset bits.
    #[inline(always)]
    pub fn digest(ph: u64) -> u32 {
        (ph >> 32) as u32
    }

    /// h_r(f): the base column of the flow's vLDA in row `row`.
    #[inline(always)]
    pub fn base(&self, row: &RowParams, flow_hash: u64) -> u64 {
        hash::reduce(row.flow.at(flow_hash), self.width)
    }

    /// The packet's offset inside the vLDA of `row` (`shared` is the Fig. 5 offset from ph).
    #[inline(always)]
    pub fn offset(&self, row: &RowParams, identity: u64, shared: u64) -> u64 {
        if self.shared_offset { shared } else { offset_from_low_bits(row.offset.at(identity), self.k) }
    }

    /// True when `row` samples the packet.
    #[inline(always)]
    pub fn sampled(&self, row: &RowParams, identity: u64) -> bool {
        self.sample_all || row.coin.accepts(row.sample.at(identity))
    }

    /// Column `(base + offset) mod W` (both < W, so one conditional subtraction).
    #[inline(always)]
    pub fn column(&self, base: u64, offset: u64) -> u64 {
        let j = base + offset;
        if j >= self.width { j - self.width } else { j }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_hash_derive() {
        for seed in [0u64, 1, 42, u64::MAX, 0x9e37_79b9_7f4a_7c15] {
            let s = Stream::new(seed);
            for x in [0u64, 1, 7, 1 << 40, u64::MAX] {
                assert_eq!(s.at(x), hash::derive(x, seed));
            }
        }
    }

    #[test]
    fn decisions_are_pinned() {
        // Both points, on any build, must take the same decisions: pin one configuration's.
        let cfg = LdsConfig { vlda_len: 5, sampling: vec![0.5], ..LdsConfig::new(2, 1000) };
        let a = Addressing::new(&cfg);
        let row = &a.rows[1];
        let got: Vec<(u64, u64, u32, bool)> = [12_345u64, 999, 1 << 50]
            .iter()
            .map(|&id| {
                let ph = a.packet_hash(id);
                (
                    a.base(row, id ^ 777),
                    offset_from_low_bits(ph, a.k),
                    Addressing::digest(ph),
                    a.sampled(row, id),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![(238, 0, 2_664_118_624, true), (75, 0, 2_400_485_888, true), (262, 4, 90_623_214, false)]
        );
    }
}
