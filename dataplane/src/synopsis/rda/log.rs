//! A worker's per-epoch log of (packet id, timestamp), appended to regions by the id's top byte.
//!
//! Why a log and not the cache itself: with one new id per packet, inserting into the
//! ID → timestamp hash table ([`super::TimestampCache`], tens of MB for a 100-ms epoch at line
//! rate) is a cache and TLB miss per packet that no prefetch hides well; appending to a log is
//! a store into one of a few hundred lines that stay in cache ([`PacketLog`] says why regions).
//! The control thread's harvest files every worker's log of an epoch into the merged epoch's
//! cache, read where they lie ([`super::Rda`]'s `merge_all`; a merge of one shard appends its log
//! to the merged epoch's, and [`super::Rda::settle`] files it), with the same duplicate and
//! capacity rules the direct path applies per packet, so the merged result is the same.

/// Regions of a [`PacketLog`], and buckets of [`PacketLog::top_counts`]: one per value of an
/// id's top byte.
pub const TOP_BUCKETS: usize = 256;

/// Bytes one logged packet takes: its (id, timestamp) pair.
pub const ENTRY_BYTES: usize = std::mem::size_of::<(u64, u64)>();

/// One part in this many of the capacity is the shared overflow area; the rest is split
/// evenly among the [`TOP_BUCKETS`] regions. Ids are well-mixed hashes, so a region holds its
/// share ± a few standard deviations (±1.2 % at 2²¹ packets per epoch): regions fill only as
/// the whole log does, and the overflow takes a region's excess until then.
const OVERFLOW_PART: usize = 8;

/// Pairs past a region's write position whose line a push hints: the line after the current
/// one. 256 write streams are more than a hardware prefetcher follows.
const REGION_AHEAD: usize = 4;

/// A fixed-capacity log of (packet id, timestamp), kept in regions by the id's top byte.
/// The capacity is allocated up front and never grown: a push past it is refused, so the hot
/// path never allocates.
///
/// Why regions: the control thread's sort ([`super::sorted`]) first scatters every pair by its
/// top byte, a pass that reads the whole log from memory and writes it back to 256 streams.
/// Appending to the id's own region does that scattering as the worker logs, for the price of
/// a store into one of 256 lines that stay in cache ([`PacketLog::push`]): the sort then reads
/// each region where it lies ([`super::sorted::Sorter::sort_unique_regions`]).
///
/// Layout: [`TOP_BUCKETS`] regions of equal size, then one overflow area ([`OVERFLOW_PART`])
/// that takes a packet whose region is full, in arrival order. Below 292 packets of capacity
/// the regions have no room and the log is one overflow area: a plain log in arrival order.
/// Only the overflow keeps arrival order; where the order matters (filing one by one into a
/// cache without room for all, [`super::Rda`]'s `file_logged`), packets are filed region by
/// region. Either order files the same packets wherever the cache has room for all of them,
/// the only case the workers' harvest meets at a capacity sized from the epoch.
///
/// It also counts its entries by the top byte of their id ([`Self::top_counts`]): what the
/// sort needs when the overflow holds some.
pub struct PacketLog {
    /// The regions, then the overflow area: `capacity` pairs, zeroed lazily by the allocator
    /// (pages are backed at their first write, or all at once by [`Self::back_reserved`]).
    slots: Vec<(u64, u64)>,
    capacity: usize,
    /// Pairs each region holds at most.
    region_cap: usize,
    /// Pairs in each region: region b is `slots[b * region_cap ..][..fill[b]]`.
    fill: [u32; TOP_BUCKETS],
    /// Pairs in the overflow area, which starts at `TOP_BUCKETS * region_cap`.
    overflow_len: usize,
    /// The overflow's pairs by top byte; wraps only past 2³² of one byte.
    overflow_counts: [u32; TOP_BUCKETS],
}

impl PacketLog {
    /// A log for at most `capacity` packets. Allocates [`ENTRY_BYTES`] per packet, zeroed by
    /// the allocator: the pages are only backed as the log fills, or all at once by
    /// [`PacketLog::back_reserved`].
    pub fn new(capacity: usize) -> Self {
        let regions_total = capacity - capacity / OVERFLOW_PART;
        // A region's fill is a `u32`: past 2³² pairs a region is capped (the rest overflows).
        let region_cap = (regions_total / TOP_BUCKETS).min(u32::MAX as usize);
        Self {
            slots: vec![(0, 0); capacity],
            capacity,
            region_cap,
            fill: [0; TOP_BUCKETS],
            overflow_len: 0,
            overflow_counts: [0; TOP_BUCKETS],
        }
    }

    /// Appends a packet to its id's region, or to the overflow when that is full; false
    /// (nothing stored) when both are.
    #[inline(always)]
    pub fn push(&mut self, id: u64, ts_ns: u64) -> bool {
        let b = usize::from((id >> 56) as u8);
        if let Some(f) = self.fill.get_mut(b) {
            let at = *f as usize;
            if at < self.region_cap {
                let i = b * self.region_cap + at;
                if let Some(slot) = self.slots.get_mut(i) {
                    *slot = (id, ts_ns);
                    *f += 1;
                    crate::cpu::prefetch(self.slots.as_ptr().wrapping_add(i + REGION_AHEAD).cast());
                    return true;
                }
            }
        }
        self.push_overflow(b, id, ts_ns)
    }

    /// The overflow half of [`Self::push`], out of line: with ids that spread evenly it is not
    /// taken until the log is nearly full.
    #[inline(never)]
    fn push_overflow(&mut self, b: usize, id: u64, ts_ns: u64) -> bool {
        let at = self.overflow_start() + self.overflow_len;
        let Some(slot) = self.slots.get_mut(at) else {
            return false;
        };
        *slot = (id, ts_ns);
        self.overflow_len += 1;
        if let Some(c) = self.overflow_counts.get_mut(b) {
            *c = c.wrapping_add(1);
        }
        true
    }

    fn overflow_start(&self) -> usize {
        TOP_BUCKETS * self.region_cap
    }

    /// Appends every entry of `more` (another shard's log, deferred by a merge), each to its
    /// region or the overflow as [`Self::push`] would, or appends none and returns false when
    /// they do not all fit.
    pub fn append(&mut self, more: &PacketLog) -> bool {
        let overflow_room = self.capacity - self.overflow_start() - self.overflow_len;
        let fits = match more.top_counts() {
            Some(counts) => {
                let spilled: usize = counts
                    .iter()
                    .zip(&self.fill)
                    .map(|(&n, &f)| (n as usize).saturating_sub(self.region_cap - f as usize))
                    .sum();
                spilled <= overflow_room
            }
            // Counts disowned (past 2³² of one byte): only the overflow's room is certain.
            None => more.len() <= overflow_room,
        };
        if !fits {
            return false;
        }
        for part in more.parts() {
            for &(id, ts) in part {
                let stored = self.push(id, ts);
                debug_assert!(stored, "room was checked");
            }
        }
        true
    }

    /// How many entries have each top byte of their id (`[b]`: ids `b << 56 ..`), or `None`
    /// when a count has wrapped (more than 2³² entries of one top byte): then they do not
    /// add up to [`Self::len`], and a sort must count for itself.
    pub fn top_counts(&self) -> Option<[u32; TOP_BUCKETS]> {
        let mut counts = self.fill;
        for (c, o) in counts.iter_mut().zip(&self.overflow_counts) {
            *c = c.wrapping_add(*o);
        }
        let sum: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        (sum == self.len() as u64).then_some(counts)
    }

    /// Region `b`'s pairs (every id's top byte is `b`), in arrival order; empty past the last
    /// region.
    pub fn region(&self, b: usize) -> &[(u64, u64)] {
        let n = self.fill.get(b).map_or(0, |&f| f as usize);
        self.slots.get(b * self.region_cap..).and_then(|r| r.get(..n)).unwrap_or_default()
    }

    /// The pairs whose region was full, in arrival order, of every top byte.
    pub fn overflow(&self) -> &[(u64, u64)] {
        self.slots.get(self.overflow_start()..).and_then(|r| r.get(..self.overflow_len)).unwrap_or_default()
    }

    /// Every logged pair: the regions in order of their top byte, then the overflow.
    pub fn parts(&self) -> impl Iterator<Item = &[(u64, u64)]> + '_ {
        (0..TOP_BUCKETS).map(|b| self.region(b)).chain(std::iter::once(self.overflow()))
    }

    /// Packets the log holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Packets logged.
    pub fn len(&self) -> usize {
        self.fill.iter().map(|&f| f as usize).sum::<usize>() + self.overflow_len
    }

    /// True when nothing is logged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Backs every page of the log with memory now ([`crate::synopsis::backing`]): the pushes
    /// then take no page fault. Logged pairs are kept.
    pub fn back_reserved(&mut self) {
        crate::synopsis::backing::back_slice(&mut self.slots);
    }

    /// Forgets every entry, keeping the allocation.
    pub fn clear(&mut self) {
        self.fill = [0; TOP_BUCKETS];
        self.overflow_len = 0;
        self.overflow_counts = [0; TOP_BUCKETS];
    }
}

impl Clone for PacketLog {
    /// Copies only the logged pairs into a fresh lazily zeroed allocation of the full
    /// capacity (a copy of the whole buffer would back every page of it).
    fn clone(&self) -> Self {
        let mut c = Self::new(self.capacity);
        for b in 0..TOP_BUCKETS {
            let (from, to) = (self.region(b), b * self.region_cap);
            if let Some(dst) = c.slots.get_mut(to..to + from.len()) {
                dst.copy_from_slice(from);
            }
        }
        let (from, to) = (self.overflow(), self.overflow_start());
        if let Some(dst) = c.slots.get_mut(to..to + from.len()) {
            dst.copy_from_slice(from);
        }
        c.fill = self.fill;
        c.overflow_len = self.overflow_len;
        c.overflow_counts = self.overflow_counts;
        c
    }
}

impl PartialEq for PacketLog {
    /// The same capacity and the same pairs in the same places (stale pairs past each
    /// region's fill are not compared).
    fn eq(&self, other: &Self) -> bool {
        self.capacity == other.capacity
            && self.fill == other.fill
            && self.overflow_len == other.overflow_len
            && self.overflow_counts == other.overflow_counts
            && self.parts().eq(other.parts())
    }
}

impl Eq for PacketLog {}

impl std::fmt::Debug for PacketLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketLog")
            .field("len", &self.len())
            .field("capacity", &self.capacity)
            .field("overflow_len", &self.overflow_len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair, regions first, then the overflow.
    fn all(l: &PacketLog) -> Vec<(u64, u64)> {
        l.parts().flatten().copied().collect()
    }

    #[test]
    fn refuses_past_capacity_and_clones_keep_the_reservation() {
        let mut l = PacketLog::new(3);
        assert!(l.push(1, 10) && l.push(2, 20) && l.push(1, 5));
        assert!(!l.push(4, 40));
        assert_eq!(all(&l), [(1, 10), (2, 20), (1, 5)]);
        let mut c = l.clone();
        c.clear();
        let before = c.slots.as_ptr();
        assert!(c.push(9, 9) && c.push(8, 8) && c.push(7, 7) && !c.push(6, 6));
        assert_eq!(c.slots.as_ptr(), before, "no reallocation");
        let log_of = |pairs: &[(u64, u64)]| {
            let mut l = PacketLog::new(pairs.len());
            assert!(pairs.iter().all(|&(id, ts)| l.push(id, ts)));
            l
        };
        let mut a = PacketLog::new(4);
        assert!(a.push(1, 1) && a.append(&log_of(&[(2, 2), (3, 3)])));
        assert!(!a.append(&log_of(&[(4, 4), (5, 5)])), "all or nothing");
        assert!(a.append(&log_of(&[(4, 4)])) && !a.append(&log_of(&[(5, 5)])));
        assert_eq!(all(&a), [(1, 1), (2, 2), (3, 3), (4, 4)]);
    }

    /// The counts a sort would take from the entries' top bytes, after every way of adding.
    fn counted(entries: &[(u64, u64)]) -> [u32; TOP_BUCKETS] {
        let mut c = [0u32; TOP_BUCKETS];
        for &(id, _) in entries {
            c[(id >> 56) as usize] += 1;
        }
        c
    }

    #[test]
    fn top_counts_follow_pushes_appends_clones_and_clears() {
        let id = |top: u64, low: u64| top << 56 | low;
        let mut l = PacketLog::new(8);
        assert!(l.push(id(0, 1), 1) && l.push(id(255, 2), 2) && l.push(id(7, 3), 3) && l.push(id(7, 4), 4));
        assert_eq!(l.top_counts(), Some(counted(&all(&l))));
        assert_eq!(l.top_counts().map(|c| (c[0], c[7], c[255])), Some((1, 2, 1)));
        let mut other = PacketLog::new(8);
        assert!(other.push(id(7, 5), 5) && other.push(id(9, 6), 6));
        let mut c = l.clone();
        assert!(c.append(&other) && c.push(id(255, 7), 7));
        assert_eq!(c.top_counts(), Some(counted(&all(&c))));
        assert!(c.push(id(1, 8), 8) && !c.push(id(1, 9), 9));
        assert!(!c.append(&other), "all or nothing");
        assert_eq!(c.top_counts(), Some(counted(&all(&c))));
        c.clear();
        assert_eq!(c.top_counts(), Some([0; TOP_BUCKETS]));
        // A count that does not add up (as after wrapping) is disowned.
        l.overflow_counts[3] = u32::MAX;
        assert_eq!(l.top_counts(), None);
    }

    #[test]
    fn each_region_takes_its_top_byte_until_full_then_the_overflow_then_nothing() {
        let id = |top: u64, low: u64| top << 56 | low;
        // 4 096 packets: regions of (4 096 - 512) / 256 = 14 pairs, an overflow of 512.
        let mut l = PacketLog::new(4096);
        assert_eq!((l.region_cap, l.capacity - l.overflow_start()), (14, 512));
        for i in 0..20 {
            assert!(l.push(id(7, i), i));
        }
        assert!(l.push(id(200, 1), 1) && l.push(id(0, 1), 1));
        let region7: Vec<(u64, u64)> = (0..14).map(|i| (id(7, i), i)).collect();
        assert_eq!(l.region(7), &region7[..], "in arrival order, up to its room");
        assert_eq!(l.region(200), &[(id(200, 1), 1)]);
        assert_eq!(l.region(0), &[(id(0, 1), 1)]);
        let spilled: Vec<(u64, u64)> = (14..20).map(|i| (id(7, i), i)).collect();
        assert_eq!(l.overflow(), &spilled[..], "a full region's excess");
        assert!(l.region(256).is_empty(), "no region past the last");
        assert_eq!(l.len(), 22);
        assert_eq!(l.top_counts(), Some(counted(&all(&l))));
        // Fill the overflow: then a full region refuses, one with room still takes.
        for i in 0..506 {
            assert!(l.push(id(7, 100 + i), i));
        }
        assert!(!l.push(id(7, 9_999), 0), "region and overflow full");
        assert!(l.push(id(8, 1), 1), "region 8 has room");
        assert_eq!(l.len(), 529);
        // A clone holds the same pairs; a cleared log compares unequal until refilled alike,
        // whatever stale pairs it still holds.
        let c = l.clone();
        assert_eq!(c, l);
        assert_eq!(all(&c), all(&l));
        let mut d = l.clone();
        d.clear();
        assert!(d.is_empty() && d != l && d.overflow().is_empty() && d.region(7).is_empty());
        assert_eq!(d, PacketLog::new(4096), "stale pairs are not compared");
        d.back_reserved();
        assert_eq!(d, PacketLog::new(4096));
        // Backing keeps what is logged.
        let mut e = l.clone();
        e.back_reserved();
        assert_eq!(e, l);
    }

    #[test]
    fn append_spills_each_region_s_excess_into_the_overflow_all_or_nothing() {
        let id = |top: u64, low: u64| top << 56 | low;
        let log_of = |pairs: &[(u64, u64)]| {
            let mut l = PacketLog::new(4096);
            assert!(pairs.iter().all(|&(id, ts)| l.push(id, ts)));
            l
        };
        // 10 of top byte 3 already: 4 more fit the region, 6 spill.
        let mut a = log_of(&(0..10).map(|i| (id(3, i), i)).collect::<Vec<_>>());
        let more = log_of(&(10..20).map(|i| (id(3, i), i)).chain([(id(4, 1), 1)]).collect::<Vec<_>>());
        assert!(a.append(&more));
        assert_eq!(a.region(3).len(), 14);
        assert_eq!(a.overflow().len(), 6);
        assert_eq!(a.region(4), &[(id(4, 1), 1)]);
        assert_eq!(a.top_counts(), Some(counted(&all(&a))));
        // Room for 506 more spilled pairs: 507 are refused whole, 506 taken.
        let too_many = log_of(&(0..507).map(|i| (id(3, 1_000 + i), i)).collect::<Vec<_>>());
        let before = a.clone();
        assert!(!a.append(&too_many));
        assert_eq!(a, before, "nothing appended");
        let just = log_of(&(0..506).map(|i| (id(3, 1_000 + i), i)).collect::<Vec<_>>());
        assert!(a.append(&just));
        assert_eq!((a.len(), a.overflow().len()), (21 + 506, 512));
        assert!(!a.push(id(3, 5), 5));
        // The overflow is full, but pairs whose regions have room still fit.
        assert!(a.append(&log_of(&[(id(5, 1), 1), (id(6, 1), 1)])));
        assert!(!a.append(&log_of(&[(id(5, 2), 2), (id(3, 2), 2)])), "region 3 and the overflow are full");
        assert_eq!(a.len(), 21 + 506 + 2);
    }
}
