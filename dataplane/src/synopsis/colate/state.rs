//! One point's counter vector for one runtime window: the per-packet update (one hash, one add),
//! the exact shard merge, reset and the window encoding shipped from the workers to the control
//! thread.

use super::cells::CellMap;
use super::config::ColateConfig;
use crate::synopsis::codec::{DecodeError, HEADER_LEN, Reader, Writer};
use crate::synopsis::{ConfigError, MergeError, Observation, Synopsis, SynopsisConfig};
use strength_reduce::StrengthReducedU64;

/// Bytes of the window body before the cells: packets, skipped, total (2 words), first, last.
const FIXED_BODY_BYTES: usize = 6 * 8;

/// The body's layout byte, after the fixed fields: every cell in order.
const LAYOUT_DENSE: u8 = 0;
/// The body's layout byte: only the blocks of counters that hold a non-zero counter, and in
/// them only those counters (`Colate::encode_sparse`). A point ships the smaller of the two; a
/// window with a few thousand packets in a vector of a million counters then costs kilobytes
/// on the queue and the wire, not 16 MB.
const LAYOUT_SPARSE: u8 = 1;

/// Counters per block of the sparse layout: one u64 mask says which of them are listed.
const SPARSE_BLOCK: usize = 64;

/// Counters per bit of [`Colate`]'s touched map: 8 counters are one or two cache lines.
const TOUCH_BLOCK: usize = 8;

/// The positions of the set bits of `mask`, lowest first.
fn set_bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let j = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            j
        })
    })
}

/// Bit j set where counter j of `block` (up to [`SPARSE_BLOCK`] counters of `stride` words) is
/// not zero. Without a branch per counter (which counters are set is random): a 0/1 byte per
/// counter, which the compiler vectorises, then eight bytes gathered into eight bits by one
/// multiply (byte i, at bit 8i, lands at bit 56 + i; the other products land on distinct bits
/// outside that byte, so nothing carries into it).
fn nonzero_mask(block: &[u64], stride: usize) -> u64 {
    let mut flags = [0u8; SPARSE_BLOCK];
    for (f, cell) in flags.iter_mut().zip(block.chunks_exact(stride)) {
        *f = u8::from(cell.iter().fold(0, |a, &x| a | x) != 0);
    }
    flags.chunks_exact(8).enumerate().fold(0, |mask, (k, bytes)| {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(bytes);
        let bits = u64::from_le_bytes(eight).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask | bits << (8 * k)
    })
}

/// COLATE's counter vector C_X (spec §2) over one window, plus the bookkeeping the epochs need.
///
/// Cells are u64 and wrap on overflow (wrapping adds keep [`Synopsis::merge`] exact); a wrap is
/// detected afterwards because the u128 running total then differs from the sum of the cells.
#[derive(Clone, Debug)]
pub struct Colate {
    cfg: ColateConfig,
    map: CellMap,
    /// `None` for 1 ns ticks (no division per packet).
    tick_div: Option<StrengthReducedU64>,
    stride: usize,
    /// n cells of `stride` words: timestamp sum, then (with packet counts) packet count.
    pub(crate) cells: Vec<u64>,
    /// One bit per [`TOUCH_BLOCK`] counters, set by every add into them: a block whose bit is
    /// clear is all zeros (a set bit promises nothing). The harvest's [`Synopsis::drain_all`]
    /// reads and zeroes a worker's vector only where its bits are set: at eight workers of a
    /// 10-Mpps link, each worker's vector of a million counters takes about 56 000 packets per
    /// direction and epoch, and two thirds of its blocks are empty. 16 KiB at that size, so
    /// the worker's extra store per packet stays in L1/L2.
    touched: Vec<u64>,
    /// log2 of the words per touched block ([`TOUCH_BLOCK`] · stride).
    touch_shift: u32,
    pub(crate) total_ticks: u128,
    pub(crate) packets: u64,
    pub(crate) skipped: u64,
    pub(crate) first_tick: u64,
    pub(crate) last_tick: u64,
}

impl PartialEq for Colate {
    fn eq(&self, o: &Self) -> bool {
        self.cfg == o.cfg
            && self.cells == o.cells
            && self.total_ticks == o.total_ticks
            && self.packets == o.packets
            && self.skipped == o.skipped
            && self.first_tick == o.first_tick
            && self.last_tick == o.last_tick
    }
}

impl Colate {
    /// Folds one packet in from its parts: what [`Synopsis::update`] does with an
    /// [`Observation`]. One flow mix, one packet mix, one modulo and one add to one cache line
    /// (the packet count sits beside the sum); the totals are register-resident in a burst loop.
    #[inline]
    pub fn update_raw(&mut self, flow_hash: u64, identity: u64, ts_ns: u64) {
        self.update_at(self.slot_of(flow_hash, identity, ts_ns), ts_ns);
    }

    /// Where a packet's add lands (the index of its cell's first word): a function of the
    /// configuration and the packet only, so a worker computes it once per packet in its
    /// staging pass, prefetches [`Colate::slot_ptr`], then calls [`Colate::update_at`] on any
    /// vector of the same configuration.
    #[inline(always)]
    pub fn slot_of(&self, flow_hash: u64, identity: u64, ts_ns: u64) -> usize {
        self.map.packet_cell(flow_hash, identity, ts_ns) * self.stride
    }

    /// Address of the cell at `slot` (a prefetch hint; never dereferenced here).
    #[inline(always)]
    pub fn slot_ptr(&self, slot: usize) -> *const u8 {
        self.cells.as_ptr().wrapping_add(slot).cast()
    }

    /// [`Colate::update_raw`] for a packet whose slot [`Colate::slot_of`] already computed
    /// (on a vector of the same configuration): the same result.
    #[inline]
    pub fn update_at(&mut self, base: usize, ts_ns: u64) {
        let Some(rel) = ts_ns.checked_sub(self.cfg.origin_ns) else {
            self.skipped += 1;
            return;
        };
        let tick = match self.tick_div {
            None => rel,
            Some(d) => rel / d,
        };
        if let Some(c) = self.cells.get_mut(base) {
            *c = c.wrapping_add(tick);
        }
        if self.stride == 2
            && let Some(c) = self.cells.get_mut(base + 1)
        {
            *c = c.wrapping_add(1);
        }
        self.touch(base);
        self.total_ticks += tick as u128;
        self.packets += 1;
        self.first_tick = self.first_tick.min(tick);
        self.last_tick = self.last_tick.max(tick);
    }

    /// Folds a burst of packets (flow hash, identity, ts_ns) in: the same result as
    /// [`Colate::update_raw`] on each, in two passes per 32 packets: hash every packet first,
    /// then do the adds. The add loop is then a few instructions per packet, so the CPU keeps
    /// many cache misses on the vector in flight at once; the totals stay in registers. Use it
    /// from a burst loop when the vector is larger than the cache.
    pub fn update_burst(&mut self, burst: &[(u64, u64, u64)]) {
        const CHUNK: usize = 32;
        let mut idx = [0usize; CHUNK];
        let mut ticks = [0u64; CHUNK];
        for chunk in burst.chunks(CHUNK) {
            let mut k = 0;
            for &(flow_hash, identity, ts_ns) in chunk {
                let Some(rel) = ts_ns.checked_sub(self.cfg.origin_ns) else {
                    self.skipped += 1;
                    continue;
                };
                let tick = match self.tick_div {
                    None => rel,
                    Some(d) => rel / d,
                };
                if let (Some(i), Some(t)) = (idx.get_mut(k), ticks.get_mut(k)) {
                    *i = self.map.packet_cell(flow_hash, identity, ts_ns) * self.stride;
                    *t = tick;
                    k += 1;
                }
            }
            let (mut total, mut first, mut last) = (0u128, self.first_tick, self.last_tick);
            for (&base, &tick) in idx.iter().zip(&ticks).take(k) {
                if let Some(c) = self.cells.get_mut(base) {
                    *c = c.wrapping_add(tick);
                }
                if self.stride == 2
                    && let Some(c) = self.cells.get_mut(base + 1)
                {
                    *c = c.wrapping_add(1);
                }
                self.touch(base);
                total += tick as u128;
                first = first.min(tick);
                last = last.max(tick);
            }
            self.total_ticks += total;
            self.packets += k as u64;
            self.first_tick = first;
            self.last_tick = last;
        }
    }

    /// The number of counters n.
    pub fn counters(&self) -> usize {
        self.cfg.counters as usize
    }

    /// The cell map (for queries and tests).
    pub fn cell_map(&self) -> &CellMap {
        &self.map
    }

    /// C\[i\]: the timestamp sum of cell i (ticks, modulo 2^64).
    #[inline]
    pub fn sum(&self, i: usize) -> u64 {
        self.cells.get(i * self.stride).copied().unwrap_or(0)
    }

    /// The packet count of cell i; `None` without packet counts.
    #[inline]
    pub fn count(&self, i: usize) -> Option<u64> {
        if self.stride == 2 { self.cells.get(i * 2 + 1).copied() } else { None }
    }

    /// t_X: the sum of every recorded tick (exact, u128).
    pub fn total_ticks(&self) -> u128 {
        self.total_ticks
    }

    /// Packets recorded.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Packets skipped because they came before the configured origin.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Tick of the first and last recorded packet; `None` when empty.
    pub fn tick_range(&self) -> Option<(u64, u64)> {
        (self.packets > 0).then_some((self.first_tick, self.last_tick))
    }

    /// True when some u64 cell wrapped: the exact total then differs from the sum of the cells.
    ///
    /// Every tick added to a cell is added to the total too, so the cells' exact sums add up
    /// to the total; when the total fits a `u64`, so does every cell's exact sum, and no cell
    /// can have wrapped. Only a total past 2^64 needs the pass over the vector
    /// ([`Colate::cell_sum`]), which publishing would otherwise pay for every window (about a
    /// third of the control thread's publishing at 10 Mpps, BENCHMARKS.md W17). A decoded
    /// vector satisfies the same relation: [`Colate::check_invariants`] refuses one whose total
    /// fits a `u64` but whose cells do not add up to it exactly.
    pub fn counters_wrapped(&self) -> bool {
        self.total_ticks > u128::from(u64::MAX) && self.cell_sum() != self.total_ticks
    }

    /// Σ_i C\[i\] as an exact u128 (equals t_X unless a cell wrapped).
    ///
    /// Publishing asks this of every window ([`Colate::counters_wrapped`]), a pass over the whole
    /// vector, so it avoids a u128 add per cell: the high and the low 32 bits of the sums are
    /// added apart in u64 (fewer than 2^32 counters of halves below 2^32 cannot overflow them),
    /// which the compiler vectorises, and joined once.
    pub fn cell_sum(&self) -> u128 {
        fn halves<'a>(sums: impl Iterator<Item = &'a u64>) -> u128 {
            let (hi, lo) = sums.fold((0u64, 0u64), |(hi, lo), &x| (hi + (x >> 32), lo + (x & 0xffff_ffff)));
            (u128::from(hi) << 32) + u128::from(lo)
        }
        match self.stride {
            1 => halves(self.cells.iter()),
            _ => halves(self.cells.iter().step_by(self.stride)),
        }
    }

    /// The largest cell sum.
    pub fn max_sum(&self) -> u64 {
        (0..self.counters()).map(|i| self.sum(i)).max().unwrap_or(0)
    }

    /// Adds `other` into `self` like [`Synopsis::merge`], but refuses (returning false and
    /// leaving `self` unchanged) if any sum would exceed `limit`: the epoch accumulator's
    /// "would a counter overflow b bits" test and the add in one pass when it fits.
    pub(crate) fn try_add_within(&mut self, other: &Self, limit: u64) -> bool {
        let fits =
            (0..self.counters()).all(|i| self.sum(i).checked_add(other.sum(i)).is_some_and(|s| s <= limit));
        if fits {
            self.add(other);
        }
        fits
    }

    /// Adds `other` cell by cell (wrapping) with its totals and tick range.
    pub(crate) fn add(&mut self, other: &Self) {
        for (a, b) in self.cells.iter_mut().zip(&other.cells) {
            *a = a.wrapping_add(*b);
        }
        for (a, b) in self.touched.iter_mut().zip(&other.touched) {
            *a |= *b;
        }
        self.add_totals(other);
    }

    /// Marks the block of the word at `slot` as touched.
    #[inline(always)]
    fn touch(&mut self, slot: usize) {
        let block = slot >> self.touch_shift;
        if let Some(w) = self.touched.get_mut(block / 64) {
            *w |= 1 << (block % 64);
        }
    }

    /// Calls `f` with the range of cell words of each touched block of `word` (word `k` of a
    /// touched map), one range for a word of 64 touched blocks; clamped to `len` words.
    #[inline(always)]
    fn touched_ranges(
        word: u64,
        k: usize,
        shift: u32,
        len: usize,
        mut f: impl FnMut(std::ops::Range<usize>),
    ) {
        let at = |block: usize| (block << shift).min(len);
        if word == u64::MAX {
            f(at(64 * k)..at(64 * k + 64));
        } else {
            for j in set_bits(word) {
                f(at(64 * k + j)..at(64 * k + j + 1));
            }
        }
    }

    /// [`Synopsis::drain_all`]'s pass over one shard: its touched blocks are zeroed as they
    /// are read and added into ours, or with `REPLACE` copied over ours wherever either holds
    /// anything (ours are then the shard's); likewise its map and totals. A const parameter, so
    /// each inner loop stays a plain copy or add.
    fn take_blocks<const REPLACE: bool>(&mut self, s: &mut Self) {
        let (shift, len) = (self.touch_shift, self.cells.len());
        for (k, (ours, theirs)) in self.touched.iter_mut().zip(s.touched.iter_mut()).enumerate() {
            let word = if REPLACE { *ours | *theirs } else { *theirs };
            Self::touched_ranges(word, k, shift, len, |r| {
                if let (Some(a), Some(b)) = (self.cells.get_mut(r.clone()), s.cells.get_mut(r)) {
                    for (a, b) in a.iter_mut().zip(b) {
                        let x = std::mem::take(b);
                        *a = if REPLACE { x } else { a.wrapping_add(x) };
                    }
                }
            });
            let theirs = std::mem::take(theirs);
            *ours = if REPLACE { theirs } else { *ours | theirs };
        }
        if REPLACE {
            self.reset_totals();
        }
        self.add_totals(s);
        s.reset_totals();
    }

    /// Adds `other`'s totals and tick range (not its cells).
    fn add_totals(&mut self, other: &Self) {
        self.total_ticks += other.total_ticks;
        self.packets += other.packets;
        self.skipped += other.skipped;
        self.first_tick = self.first_tick.min(other.first_tick);
        self.last_tick = self.last_tick.max(other.last_tick);
    }

    /// The totals and tick range of an empty vector (the cells are left as they are).
    fn reset_totals(&mut self) {
        self.total_ticks = 0;
        self.packets = 0;
        self.skipped = 0;
        self.first_tick = u64::MAX;
        self.last_tick = 0;
    }

    fn invalid(field: &'static str, reason: impl Into<String>) -> DecodeError {
        DecodeError::Invalid { field, reason: reason.into() }
    }
}

impl Synopsis for Colate {
    type Config = ColateConfig;
    type Carry = ();
    /// 2 since `FlowKey::hash` hashes the key padded to 40 bytes: cells placed by the
    /// earlier flow hash (version 1) do not line up with this build's, so a peer refuses a
    /// body from a point of the other version instead of pairing it. 3 since the body has a
    /// layout byte and may list only its non-zero counters (`LAYOUT_SPARSE`).
    const FORMAT_VERSION: u8 = 3;

    fn new(cfg: &ColateConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let stride = cfg.stride();
        Ok(Self {
            cfg: cfg.clone(),
            map: CellMap::new(cfg),
            tick_div: (cfg.tick_ns > 1).then(|| StrengthReducedU64::new(cfg.tick_ns)),
            stride,
            cells: vec![0; cfg.counters as usize * stride],
            touched: vec![0; (cfg.counters as usize).div_ceil(TOUCH_BLOCK).div_ceil(64)],
            touch_shift: (TOUCH_BLOCK * stride).trailing_zeros(),
            total_ticks: 0,
            packets: 0,
            skipped: 0,
            first_tick: u64::MAX,
            last_tick: 0,
        })
    }

    fn new_carry(_cfg: &ColateConfig) {}

    fn config(&self) -> &ColateConfig {
        &self.cfg
    }

    #[inline]
    fn update(&mut self, _carry: &mut (), obs: &Observation<'_>) {
        self.update_raw(obs.flow_hash, obs.identity, obs.ts_ns);
    }

    /// The packet's counter slot ([`Colate::slot_of`]); `None`: not located.
    type Location = Option<usize>;

    /// Locates the packet's counter and hints it.
    #[inline(always)]
    fn locate(
        &self,
        _carry: &(),
        obs: &Observation<'_>,
        at: &mut Option<usize>,
        hint: &mut impl FnMut(*const u8),
    ) {
        let slot = self.slot_of(obs.flow_hash, obs.identity, obs.ts_ns);
        hint(self.slot_ptr(slot));
        *at = Some(slot);
    }

    #[inline(always)]
    fn apply(&mut self, carry: &mut (), at: &Option<usize>, obs: &Observation<'_>) {
        match *at {
            Some(slot) => self.update_at(slot, obs.ts_ns),
            None => self.update(carry, obs),
        }
    }

    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        self.check_same_config(other)?;
        self.add(other);
        Ok(())
    }

    fn reset(&mut self) {
        self.cells.fill(0);
        self.touched.fill(0);
        self.reset_totals();
    }

    /// One pass over the touched blocks of each worker's vector, zeroing them as they are
    /// read: the first shard's are copied (with ours that held anything), the others' added.
    /// The harvest's merge and reset were three passes over each worker's whole vector and one
    /// over the merged one (its reset), most of the control thread's fixed cost per worker and
    /// epoch at a million counters (BENCHMARKS.md, W17 tenth session).
    fn drain_all(&mut self, shards: &mut [&mut Self]) -> Result<(), MergeError> {
        let Some((first, rest)) = self.drain_split(shards)? else { return Ok(()) };
        // Where either holds anything, the first shard's blocks replace ours.
        self.take_blocks::<true>(first);
        for s in rest.iter_mut() {
            self.take_blocks::<false>(s);
        }
        Ok(())
    }

    fn encode_body(&self, w: &mut Writer<'_>) {
        w.reserve(FIXED_BODY_BYTES + 1);
        w.u64(self.packets);
        w.u64(self.skipped);
        w.u64(self.total_ticks as u64);
        w.u64((self.total_ticks >> 64) as u64);
        w.u64(self.first_tick);
        w.u64(self.last_tick);
        let start = w.len();
        let dense_end = start + 1 + self.cells.len() * 8;
        // Each packet fills at most one counter, so a window with as many packets as counters
        // cannot be sparse enough to pay; below that the sparse writer gives up by itself
        // once it would outgrow the dense layout.
        if (self.packets as usize) < self.counters() && self.encode_sparse(w, dense_end) {
            return;
        }
        w.truncate(start);
        w.reserve(dense_end - start);
        w.u8(LAYOUT_DENSE);
        for &c in &self.cells {
            w.u64(c);
        }
    }

    fn decode_body(cfg: &ColateConfig, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        cfg.validate().map_err(|e| Self::invalid("config", e.to_string()))?;
        let words = cfg.counters as usize * cfg.stride();
        r.require(FIXED_BODY_BYTES + 1)?;
        let packets = r.u64()?;
        let skipped = r.u64()?;
        let total_ticks = r.u64()? as u128 | (r.u64()? as u128) << 64;
        let first_tick = r.u64()?;
        let last_tick = r.u64()?;
        let layout = r.u8()?;
        if layout == LAYOUT_DENSE {
            r.require(words * 8)?;
        } else if layout != LAYOUT_SPARSE {
            return Err(Self::invalid("layout", format!("{layout} is neither dense (0) nor sparse (1)")));
        }
        let mut s = Self::new(cfg).map_err(|e| Self::invalid("config", e.to_string()))?;
        if layout == LAYOUT_DENSE {
            for c in s.cells.iter_mut() {
                *c = r.u64()?;
            }
        } else {
            s.decode_sparse(r)?;
        }
        // A peer's vector: no map came with it, so every block may hold something.
        s.touched.fill(u64::MAX);
        s.packets = packets;
        s.skipped = skipped;
        s.total_ticks = total_ticks;
        s.first_tick = first_tick;
        s.last_tick = last_tick;
        s.check_invariants()?;
        Ok(s)
    }
}

impl Colate {
    /// Writes the sparse layout: a bitmap of the blocks of [`SPARSE_BLOCK`] counters that hold
    /// a non-zero counter, then for each such block, in order, a mask of its non-zero counters
    /// and their words. Returns false as soon as the body would reach `limit` bytes of the
    /// writer, where the dense layout is no larger; what it wrote is then the caller's to
    /// truncate.
    fn encode_sparse(&self, w: &mut Writer<'_>, limit: usize) -> bool {
        let stride = self.stride;
        let blocks = self.counters().div_ceil(SPARSE_BLOCK);
        let mut summary = vec![0u64; blocks.div_ceil(64)];
        // At most one non-zero counter (and block) per packet.
        let packets = (self.packets as usize).min(self.counters());
        let expected = 1 + summary.len() * 8 + packets * (8 + 8 * stride);
        w.reserve(expected.min(limit.saturating_sub(w.len())));
        w.u8(LAYOUT_SPARSE);
        let summary_at = w.len();
        for _ in &summary {
            w.u64(0);
        }
        for (b, block) in self.cells.chunks(SPARSE_BLOCK * stride).enumerate() {
            // Most blocks of a sparse vector are zero: one OR across their words, vectorised.
            if block.iter().fold(0, |a, &x| a | x) == 0 {
                continue;
            }
            let mask = nonzero_mask(block, stride);
            summary[b / 64] |= 1 << (b % 64);
            w.u64(mask);
            for j in set_bits(mask) {
                for &x in &block[j * stride..(j + 1) * stride] {
                    w.u64(x);
                }
            }
            if w.len() >= limit {
                return false;
            }
        }
        for (k, &word) in summary.iter().enumerate() {
            w.set_u64_at(summary_at + 8 * k, word);
        }
        true
    }

    /// Reads the sparse layout into a zeroed vector. Every block and counter is checked against
    /// the vector, and each block's words against the bytes left before they are read.
    fn decode_sparse(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let stride = self.stride;
        let n = self.counters();
        let blocks = n.div_ceil(SPARSE_BLOCK);
        let words = blocks.div_ceil(64);
        r.require(words * 8)?;
        let summary = (0..words).map(|_| r.u64()).collect::<Result<Vec<u64>, _>>()?;
        for (k, &word) in summary.iter().enumerate() {
            for b in set_bits(word).map(|j| 64 * k + j) {
                if b >= blocks {
                    return Err(Self::invalid("cells", format!("block {b} beyond the vector's {blocks}")));
                }
                let mask = r.u64()?;
                let in_block = (n - b * SPARSE_BLOCK).min(SPARSE_BLOCK);
                if mask == 0 || (in_block < 64 && mask >> in_block != 0) {
                    return Err(Self::invalid(
                        "cells",
                        format!("block {b}'s mask {mask:#x} is empty or names counters beyond the vector"),
                    ));
                }
                r.require(mask.count_ones() as usize * stride * 8)?;
                for i in set_bits(mask).map(|j| b * SPARSE_BLOCK + j) {
                    for c in &mut self.cells[i * stride..(i + 1) * stride] {
                        *c = r.u64()?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Bytes of the largest encoding of a vector of `cfg` (the dense layout), header included:
    /// what a queue or a collector must be able to hold for one. Needs no vector.
    pub fn max_encoded_len(cfg: &ColateConfig) -> usize {
        HEADER_LEN + FIXED_BODY_BYTES + 1 + cfg.counters as usize * cfg.stride() * 8
    }

    /// Bytes the vector holds in memory once decoded, whatever its encoding's length: a
    /// collector counts these, not the (possibly sparse) encoding, against its budget.
    pub fn held_bytes(&self) -> usize {
        (self.cells.len() + self.touched.len()) * 8 + std::mem::size_of::<Self>()
    }

    /// The relations every honest vector satisfies: Σ cells ≡ total (mod 2^64) because both
    /// receive the same adds, and Σ cells = total exactly when the total fits a `u64` (no cell
    /// can then have wrapped; [`Colate::counters_wrapped`] relies on it); Σ counts = packets; an
    /// empty vector is all zero with the empty tick range; otherwise first ≤ last and
    /// first·packets ≤ total ≤ last·packets.
    pub(crate) fn check_invariants(&self) -> Result<(), DecodeError> {
        let sum = self.cell_sum();
        if sum as u64 != self.total_ticks as u64 {
            return Err(Self::invalid("cells", "the cell sums do not add up to the recorded total"));
        }
        if self.total_ticks <= u128::from(u64::MAX) && sum != self.total_ticks {
            return Err(Self::invalid("cells", "cells wrapped although the recorded total fits 64 bits"));
        }
        if self.stride == 2 {
            let counts =
                (0..self.counters()).try_fold(0u64, |acc, i| acc.checked_add(self.count(i).unwrap_or(0)));
            if counts != Some(self.packets) {
                return Err(Self::invalid(
                    "cells",
                    "the cell packet counts do not add up to the packet total",
                ));
            }
        }
        if self.packets == 0 {
            if self.total_ticks != 0 || self.first_tick != u64::MAX || self.last_tick != 0 {
                return Err(Self::invalid("packets", "an empty vector carries ticks"));
            }
        } else {
            let lo = self.first_tick as u128 * self.packets as u128;
            let hi = self.last_tick as u128 * self.packets as u128;
            if self.first_tick > self.last_tick || self.total_ticks < lo || self.total_ticks > hi {
                return Err(Self::invalid("tick range", "total outside [first, last] × packets"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::codec::HEADER_LEN;
    use crate::synopsis::hash::mix64;
    use proptest::prelude::*;

    fn cfg(counts: bool) -> ColateConfig {
        ColateConfig { packet_counts: counts, seed: 9, ..ColateConfig::new(1_009, 8, 40, 1 << 50) }
    }

    fn packets(k: usize, seed: u64) -> Vec<(u64, u64, u64)> {
        (0..k as u64)
            .map(|i| {
                (mix64(seed ^ (i % 37)), mix64(seed.wrapping_add(i) ^ 0x55), 1_000 + i * 17 + (mix64(i) % 13))
            })
            .collect()
    }

    #[test]
    fn update_adds_each_timestamp_to_one_cell_of_its_flow() {
        for counts in [false, true] {
            let c = cfg(counts);
            let mut s = Colate::new(&c).unwrap();
            let ps = packets(5_000, 1);
            for &(f, id, ts) in &ps {
                s.update_raw(f, id, ts);
            }
            let total: u128 = ps.iter().map(|p| p.2 as u128).sum();
            assert_eq!(s.total_ticks(), total);
            assert_eq!(s.cell_sum(), total);
            assert!(!s.counters_wrapped());
            assert_eq!(s.packets(), 5_000);
            assert_eq!(
                s.tick_range(),
                Some((ps.iter().map(|p| p.2).min().unwrap(), ps.iter().map(|p| p.2).max().unwrap()))
            );
            // Only cells of the recorded flows' subvectors are non-zero.
            let mut allowed = vec![false; 1_009];
            for &(f, _, _) in &ps {
                for i in s.cell_map().subvector(f) {
                    allowed[i] = true;
                }
            }
            for (i, ok) in allowed.iter().enumerate() {
                if !ok {
                    assert_eq!(s.sum(i), 0);
                }
            }
            if counts {
                let n: u64 = (0..1_009).map(|i| s.count(i).unwrap()).sum();
                assert_eq!(n, 5_000);
            } else {
                assert_eq!(s.count(0), None);
            }
            s.check_invariants().unwrap();
        }
    }

    #[test]
    fn burst_update_equals_per_packet_updates() {
        for counts in [false, true] {
            let c = ColateConfig { tick_ns: 7, origin_ns: 1_500, ..cfg(counts) };
            let ps = packets(1_000, 4);
            let mut one = Colate::new(&c).unwrap();
            for &(f, id, ts) in &ps {
                one.update_raw(f, id, ts);
            }
            let mut burst = Colate::new(&c).unwrap();
            for b in ps.chunks(45) {
                burst.update_burst(b);
            }
            assert_eq!(burst, one);
            assert!(one.skipped() > 0 && one.packets() > 0);
        }
    }

    #[test]
    fn ticks_origin_and_skips() {
        let c = ColateConfig { tick_ns: 1_000, origin_ns: 10_000, ..cfg(true) };
        let mut s = Colate::new(&c).unwrap();
        s.update_raw(1, 2, 9_999); // before the origin
        s.update_raw(1, 3, 12_345); // tick 2
        s.update_raw(1, 4, 10_999); // tick 0
        assert_eq!(s.skipped(), 1);
        assert_eq!(s.packets(), 2);
        assert_eq!(s.total_ticks(), 2);
        assert_eq!(s.tick_range(), Some((0, 2)));
    }

    #[test]
    fn merged_shards_equal_one_vector_fed_everything() {
        for counts in [false, true] {
            let c = cfg(counts);
            let ps = packets(20_000, 3);
            let mut one = Colate::new(&c).unwrap();
            let mut shards: Vec<Colate> = (0..3).map(|_| Colate::new(&c).unwrap()).collect();
            for (k, &(f, id, ts)) in ps.iter().enumerate() {
                one.update_raw(f, id, ts);
                shards[(mix64(k as u64) % 3) as usize].update_raw(f, id, ts);
            }
            let mut merged = shards.remove(0);
            for s in &shards {
                merged.merge(s).unwrap();
            }
            assert_eq!(merged, one);
        }
    }

    /// Every block whose touched bit is clear is all zeros (what the drain relies on).
    fn assert_touched_covers(s: &Colate, what: &str) {
        let words = TOUCH_BLOCK * s.stride;
        for (b, block) in s.cells.chunks(words).enumerate() {
            if s.touched[b / 64] >> (b % 64) & 1 == 0 {
                assert!(block.iter().all(|&x| x == 0), "{what}: block {b} holds counts but is not marked");
            }
        }
    }

    /// The harvest's pass (copy the first shard where either holds anything, add the rest where
    /// they were touched, zero each as it is read) leaves what a reset, the ordered merges and a
    /// reset of every shard leave, whatever the merged vector held before (nothing, a few
    /// packets' worth, or a peer's decoded vector, whose blocks are all marked), from sparse
    /// and dense shards (the vector's last block is partial); a shard of another configuration
    /// is refused and every shard is still left reset.
    #[test]
    fn drain_all_equals_merges_then_resets() {
        for counts in [false, true] {
            let c = cfg(counts);
            let fresh = Colate::new(&c).unwrap();
            let mut stale = fresh.clone();
            for &(f, id, ts) in &packets(30, 11) {
                stale.update_raw(f, id, ts + 1_000_000);
            }
            let decoded = Colate::decode(&c, &stale.encode()).unwrap();
            for total in [5, 60, 20_000] {
                let ps = packets(total, 5);
                for n in 0..4usize {
                    let mut shards: Vec<Colate> = (0..n).map(|_| Colate::new(&c).unwrap()).collect();
                    for (k, &(f, id, ts)) in ps.iter().enumerate() {
                        if n > 0 {
                            let s = &mut shards[(mix64(k as u64) % n as u64) as usize];
                            if k % 2 == 0 { s.update_raw(f, id, ts) } else { s.update_burst(&[(f, id, ts)]) }
                        }
                    }
                    shards.iter().for_each(|s| assert_touched_covers(s, "a worker's shard"));
                    let mut ordered = fresh.clone();
                    for s in &shards {
                        ordered.merge(s).unwrap();
                    }
                    for before in [&fresh, &stale, &decoded] {
                        let what = format!("counts {counts}, {total} packets, {n} shards");
                        let mut copies = shards.clone();
                        let mut drained = before.clone();
                        let mut held: Vec<&mut Colate> = copies.iter_mut().collect();
                        drained.drain_all(&mut held).unwrap();
                        assert_eq!(drained, ordered, "{what}");
                        assert_touched_covers(&drained, &what);
                        assert!(
                            copies.iter().all(|s| *s == fresh && s.touched == fresh.touched),
                            "{what}: reset"
                        );
                    }
                }
            }
            let mut a = Colate::new(&c).unwrap();
            let mut b = Colate::new(&ColateConfig { seed: 10, ..c.clone() }).unwrap();
            let mut d = Colate::new(&c).unwrap();
            b.update_raw(1, 1, 1);
            d.update_raw(1, 2, 3);
            assert!(matches!(a.drain_all(&mut [&mut d, &mut b]), Err(MergeError::ConfigMismatch { .. })));
            assert_eq!(b, Colate::new(&b.cfg).unwrap(), "the refused shard is reset too");
            assert_eq!(d, fresh);
        }
    }

    #[test]
    fn merge_refuses_other_configs_and_reset_clears() {
        let mut a = Colate::new(&cfg(false)).unwrap();
        let b = Colate::new(&ColateConfig { seed: 10, ..cfg(false) }).unwrap();
        assert!(matches!(a.merge(&b), Err(MergeError::ConfigMismatch { .. })));
        a.update_raw(1, 1, 1);
        a.reset();
        assert_eq!(a, Colate::new(&cfg(false)).unwrap());
    }

    #[test]
    fn the_cell_sum_is_exact_for_sums_near_the_top_of_u64() {
        for counts in [false, true] {
            let mut s = Colate::new(&cfg(counts)).unwrap();
            let stride = s.stride;
            for i in 0..s.counters() {
                s.cells[i * stride] = u64::MAX - mix64(i as u64) % 1_000_000;
                if counts {
                    s.cells[i * stride + 1] = u64::MAX;
                }
            }
            let naive: u128 = (0..s.counters()).map(|i| u128::from(s.sum(i))).sum();
            assert_eq!(s.cell_sum(), naive, "counts {counts}");
            assert!(naive > u128::from(u64::MAX));
        }
    }

    #[test]
    fn wrapping_is_detected() {
        let mut s = Colate::new(&cfg(false)).unwrap();
        s.update_raw(7, 7, u64::MAX - 1);
        s.update_raw(7, 7, u64::MAX - 1); // same packet identity → same cell: wraps
        assert!(s.counters_wrapped());
        // Still decodable: the invariant is modulo 2^64.
        let back = Colate::decode(&cfg(false), &s.encode()).unwrap();
        assert_eq!(back, s);
    }

    /// Two identities whose packets land in different cells of `s`.
    fn two_cells(s: &Colate) -> (u64, u64) {
        let a = 7;
        let b = (8..).find(|&b| s.slot_of(7, b, 0) != s.slot_of(7, a, 0)).unwrap();
        (a, b)
    }

    #[test]
    fn a_total_past_64_bits_without_a_wrapped_cell_is_not_wrapped() {
        let mut s = Colate::new(&cfg(false)).unwrap();
        let (a, b) = two_cells(&s);
        s.update_raw(7, a, u64::MAX - 1);
        s.update_raw(7, b, u64::MAX - 1);
        assert!(s.total_ticks() > u128::from(u64::MAX));
        assert!(!s.counters_wrapped(), "the pass over the cells finds no wrap");
        s.update_raw(7, a, u64::MAX - 1);
        assert!(s.counters_wrapped());
    }

    #[test]
    fn decode_refuses_cells_that_wrapped_under_a_64_bit_total() {
        let mut s = Colate::new(&cfg(false)).unwrap();
        let (a, b) = two_cells(&s);
        s.update_raw(7, a, 1_000);
        s.update_raw(7, b, 2_000);
        Colate::decode(&cfg(false), &s.encode()).unwrap();
        // Equal modulo 2^64, so the old check passed it; published as not wrapped, it would be
        // a vector whose cells do not add up to its total.
        for id in [a, b] {
            let at = s.slot_of(7, id, 0);
            s.cells[at] = s.cells[at].wrapping_add(1 << 63);
        }
        assert_eq!(s.cell_sum() as u64, s.total_ticks() as u64);
        let err = Colate::decode(&cfg(false), &s.encode()).unwrap_err();
        assert!(err.to_string().contains("wrapped"), "{err}");
    }

    #[test]
    fn encode_round_trip_and_rejections() {
        let c = cfg(true);
        let mut s = Colate::new(&c).unwrap();
        for &(f, id, ts) in &packets(3_000, 5) {
            s.update_raw(f, id, ts);
        }
        let bytes = s.encode();
        // 3 000 packets in 1 009 counters: the dense layout.
        assert_eq!(bytes.len(), HEADER_LEN + FIXED_BODY_BYTES + 1 + 1_009 * 2 * 8);
        assert_eq!(bytes.len(), Colate::max_encoded_len(&c));
        assert_eq!(Colate::decode(&c, &bytes).unwrap(), s);
        let empty = Colate::new(&c).unwrap();
        assert_eq!(Colate::decode(&c, &empty.encode()).unwrap(), empty);
        // Every truncation is refused.
        for len in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
            assert!(Colate::decode(&c, &bytes[..len]).is_err(), "len {len}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(Colate::decode(&c, &long), Err(DecodeError::TrailingBytes { extra: 1 })));
        // A point with another seed refuses it.
        let other = ColateConfig { seed: 1, ..c.clone() };
        assert!(matches!(Colate::decode(&other, &bytes), Err(DecodeError::ConfigMismatch { .. })));
        // A flipped cell breaks Σ cells = total; a flipped count breaks Σ counts = packets.
        let mut bad = bytes.clone();
        bad[HEADER_LEN + FIXED_BODY_BYTES + 1 + 8 * 10] ^= 1;
        assert!(matches!(Colate::decode(&c, &bad), Err(DecodeError::Invalid { .. })));
        let mut bad = bytes.clone();
        bad[HEADER_LEN + FIXED_BODY_BYTES + 1 + 8 * 11] ^= 1;
        assert!(matches!(Colate::decode(&c, &bad), Err(DecodeError::Invalid { .. })));
        // A layout byte that is neither.
        let mut bad = bytes.clone();
        bad[HEADER_LEN + FIXED_BODY_BYTES] = 2;
        assert!(matches!(Colate::decode(&c, &bad), Err(DecodeError::Invalid { field: "layout", .. })));
        // A tick range that cannot hold the total.
        let mut bad = bytes;
        bad[HEADER_LEN + 32..HEADER_LEN + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(Colate::decode(&c, &bad), Err(DecodeError::Invalid { .. })));
    }

    /// Offset of the sparse layout's block bitmap: header, fixed fields, layout byte.
    const SPARSE_SUMMARY: usize = HEADER_LEN + FIXED_BODY_BYTES + 1;

    #[test]
    fn a_sparse_window_ships_only_its_non_zero_counters_and_decodes_to_the_same_vector() {
        for counts in [false, true] {
            let c = cfg(counts);
            let stride = c.stride();
            let mut s = Colate::new(&c).unwrap();
            for &(f, id, ts) in &packets(40, 3) {
                s.update_raw(f, id, ts);
            }
            let nonzero: Vec<usize> = (0..s.counters())
                .filter(|&i| s.cells[i * stride..(i + 1) * stride].iter().any(|&x| x != 0))
                .collect();
            assert!(!nonzero.is_empty() && nonzero.len() <= 40);
            let mut blocks: Vec<usize> = nonzero.iter().map(|i| i / SPARSE_BLOCK).collect();
            blocks.dedup();
            let bytes = s.encode();
            assert_eq!(bytes[HEADER_LEN + FIXED_BODY_BYTES], LAYOUT_SPARSE);
            // 1 009 counters are 16 blocks: one bitmap word, a mask per listed block, the words.
            assert_eq!(bytes.len(), SPARSE_SUMMARY + 8 + blocks.len() * 8 + nonzero.len() * stride * 8);
            let bitmap = u64::from_le_bytes(bytes[SPARSE_SUMMARY..SPARSE_SUMMARY + 8].try_into().unwrap());
            assert_eq!(bitmap, blocks.iter().fold(0, |m, b| m | 1 << b));
            assert_eq!(Colate::decode(&c, &bytes).unwrap(), s);
            for len in 0..bytes.len() {
                assert!(Colate::decode(&c, &bytes[..len]).is_err(), "len {len}");
            }
            // An empty vector is the fixed fields, the layout byte and an empty bitmap.
            let empty = Colate::new(&c).unwrap();
            let e = empty.encode();
            assert_eq!(e.len(), SPARSE_SUMMARY + 8);
            assert_eq!(Colate::decode(&c, &e).unwrap(), empty);
        }
    }

    #[test]
    fn a_sparse_body_naming_a_block_or_counter_beyond_the_vector_is_refused() {
        let c = cfg(true);
        let s = {
            let mut s = Colate::new(&c).unwrap();
            s.update_raw(1, 2, 1_000);
            s
        };
        let bytes = s.encode();
        assert_eq!(bytes[HEADER_LEN + FIXED_BODY_BYTES], LAYOUT_SPARSE);
        assert_eq!(Colate::decode(&c, &bytes).unwrap(), s);
        let words = &bytes[bytes.len() - 16..];
        // The fixed fields, then a bitmap, masks and words of our choosing.
        let body = |bitmap: u64, masks: &[u64]| {
            let mut b = bytes[..SPARSE_SUMMARY].to_vec();
            let mut w = Writer::new(&mut b);
            w.u64(bitmap);
            for &m in masks {
                w.u64(m);
                w.bytes(words);
            }
            b
        };
        // The one counter moved to the last one of the vector (1 008, bit 48 of block 15): the
        // sums still add up, so it decodes.
        assert!(Colate::decode(&c, &body(1 << 15, &[1 << 48])).is_ok());
        for (what, bitmap, masks) in [
            ("a counter past the last", 1u64 << 15, vec![1u64 << 49]),
            ("an empty block listed", 1 << 15, vec![0]),
            ("a block past the last", 1 << 16, vec![1]),
        ] {
            assert!(
                matches!(
                    Colate::decode(&c, &body(bitmap, &masks)),
                    Err(DecodeError::Invalid { field: "cells", .. })
                ),
                "{what}"
            );
        }
        // Two blocks listed, one written; two counters in the mask, one counter's words.
        assert!(matches!(Colate::decode(&c, &body(0b11, &[1])), Err(DecodeError::Truncated { .. })));
        assert!(matches!(Colate::decode(&c, &body(1, &[0b11])), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn the_mask_of_a_block_names_exactly_its_non_zero_counters() {
        for stride in [1, 2] {
            for seed in 0..200u64 {
                let len = if seed % 7 == 0 { 1 + (seed as usize % 63) } else { SPARSE_BLOCK };
                let block: Vec<u64> = (0..len * stride)
                    .map(|k| {
                        if mix64(seed ^ k as u64).is_multiple_of(3) {
                            mix64(k as u64) >> (seed % 64)
                        } else {
                            0
                        }
                    })
                    .collect();
                let want = (0..len)
                    .filter(|&j| block[j * stride..(j + 1) * stride].iter().any(|&x| x != 0))
                    .fold(0u64, |m, j| m | 1 << j);
                assert_eq!(nonzero_mask(&block, stride), want, "stride {stride} seed {seed}");
            }
        }
        assert_eq!(nonzero_mask(&[1; SPARSE_BLOCK], 1), u64::MAX);
    }

    #[test]
    fn a_window_nearly_as_full_as_its_vector_falls_back_to_the_dense_layout() {
        // Every counter but one holds a packet: the sparse layout (a bitmap, a mask per block
        // and 16 bytes per listed counter) would outgrow the dense one (16 bytes per counter),
        // so the writer gives up.
        let c = cfg(true);
        let mut s = Colate::new(&c).unwrap();
        let n = s.counters();
        for i in 1..n {
            s.cells[2 * i] = 100 + i as u64;
            s.cells[2 * i + 1] = 1;
        }
        s.packets = n as u64 - 1;
        s.total_ticks = (1..n as u128).map(|i| 100 + i).sum();
        (s.first_tick, s.last_tick) = (101, 100 + n as u64 - 1);
        assert!((s.packets as usize) < n, "the sparse writer is tried");
        let bytes = s.encode();
        assert_eq!(bytes[HEADER_LEN + FIXED_BODY_BYTES], LAYOUT_DENSE);
        assert_eq!(bytes.len(), Colate::max_encoded_len(&c));
        assert_eq!(Colate::decode(&c, &bytes).unwrap(), s);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let c = ColateConfig::new(11, 2, 40, 1 << 50);
            let _ = Colate::decode(&c, &bytes);
            let mut with_header = vec![5u8, Colate::FORMAT_VERSION];
            with_header.extend_from_slice(&c.fingerprint().to_le_bytes());
            with_header.extend_from_slice(&bytes);
            let _ = Colate::decode(&c, &with_header);
            // Valid fixed fields of an empty vector, then the sparse layout over random bytes.
            let mut sparse = Colate::new(&c).unwrap().encode();
            sparse.truncate(SPARSE_SUMMARY);
            sparse.extend_from_slice(&bytes);
            let _ = Colate::decode(&c, &sparse);
        }

        #[test]
        fn the_smaller_layout_is_shipped_and_decodes_to_the_same_vector(k in 0usize..1_400, seed in any::<u64>()) {
            let c = cfg(true);
            let mut s = Colate::new(&c).unwrap();
            for &(f, id, ts) in &packets(k, seed) {
                s.update_raw(f, id, ts);
            }
            let bytes = s.encode();
            prop_assert!(bytes.len() <= Colate::max_encoded_len(&c));
            let nonzero = (0..s.counters()).filter(|&i| s.sum(i) != 0 || s.count(i) != Some(0)).count();
            // The sparse layout's largest size (a mask per counter) against the dense layout's.
            if SPARSE_SUMMARY + 8 + nonzero * 24 < Colate::max_encoded_len(&c) && k < s.counters() {
                prop_assert_eq!(bytes[HEADER_LEN + FIXED_BODY_BYTES], LAYOUT_SPARSE);
            }
            prop_assert_eq!(Colate::decode(&c, &bytes).unwrap(), s);
        }
    }
}
