//! A worker's per-epoch log of (packet id, timestamp), appended in arrival order.
//!
//! Why a log and not the cache itself: with one new id per packet, inserting into the
//! ID → timestamp hash table ([`super::TimestampCache`], tens of MB for a 100-ms epoch at line
//! rate) is a cache and TLB miss per packet that no prefetch hides well; appending to a log is
//! a sequential store. The control thread's harvest files every worker's log of an epoch into
//! the merged epoch's cache, read where they lie ([`super::Rda`]'s `merge_all`; a merge of one
//! shard appends its log to the merged epoch's, and [`super::Rda::settle`] files it), with the
//! same duplicate and capacity rules the direct path applies per packet, so the merged result
//! is the same.

/// Buckets of [`PacketLog::top_counts`]: one per value of an id's top byte.
pub const TOP_BUCKETS: usize = 256;

/// Bytes one logged packet takes: its (id, timestamp) pair.
pub const ENTRY_BYTES: usize = std::mem::size_of::<(u64, u64)>();

/// A fixed-capacity append-only log. The capacity is reserved up front and never grown: a
/// push past it is refused, so the hot path never allocates.
///
/// It also counts its entries by the top byte of their id as they come ([`Self::top_counts`]):
/// the first pass of the control thread's sort ([`super::sorted`]) needs exactly those counts,
/// and an L1-resident increment on the worker saves it a whole read of the log from memory.
#[derive(Debug, PartialEq, Eq)]
pub struct PacketLog {
    entries: Vec<(u64, u64)>,
    capacity: usize,
    top_counts: [u32; TOP_BUCKETS],
}

impl PacketLog {
    /// A log for at most `capacity` packets. Reserves [`ENTRY_BYTES`] per packet of address
    /// space; the pages are only touched (and backed) as the log fills, or all at once by
    /// [`PacketLog::back_reserved`].
    pub fn new(capacity: usize) -> Self {
        Self { entries: Vec::with_capacity(capacity), capacity, top_counts: [0; TOP_BUCKETS] }
    }

    /// Appends a packet; false (nothing stored) once `capacity` packets are logged.
    #[inline(always)]
    pub fn push(&mut self, id: u64, ts_ns: u64) -> bool {
        // `Vec::with_capacity(capacity)` reserved at least this much: the push never grows it.
        if self.entries.len() >= self.capacity {
            return false;
        }
        self.entries.push((id, ts_ns));
        // Wraps only past 2³² entries of one top byte, which `top_counts` then disowns.
        let c = &mut self.top_counts[usize::from((id >> 56) as u8)];
        *c = c.wrapping_add(1);
        true
    }

    /// Appends every entry of `more` (another shard's log, deferred by a merge) and adds its
    /// counts, or appends none and returns false when they do not all fit.
    pub fn append(&mut self, more: &PacketLog) -> bool {
        if more.len() > self.capacity - self.entries.len() {
            return false;
        }
        self.entries.extend_from_slice(&more.entries);
        for (c, m) in self.top_counts.iter_mut().zip(&more.top_counts) {
            *c = c.wrapping_add(*m);
        }
        true
    }

    /// How many entries have each top byte of their id (`[b]`: ids `b << 56 ..`), or `None`
    /// when a count has wrapped (more than 2³² entries of one top byte): then they do not
    /// add up to [`Self::len`], and a sort must count for itself.
    pub fn top_counts(&self) -> Option<&[u32; TOP_BUCKETS]> {
        let sum: u64 = self.top_counts.iter().map(|&c| u64::from(c)).sum();
        (sum == self.entries.len() as u64).then_some(&self.top_counts)
    }

    /// The logged packets, in arrival order.
    pub fn entries(&self) -> &[(u64, u64)] {
        &self.entries
    }

    /// Packets the log holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Packets logged.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is logged.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Backs the whole reservation with memory now ([`crate::synopsis::backing`]): the pushes
    /// then take no page fault.
    pub fn back_reserved(&mut self) {
        crate::synopsis::backing::back_spare_capacity(&mut self.entries, (0, 0));
    }

    /// Forgets every entry, keeping the reservation.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.top_counts = [0; TOP_BUCKETS];
    }
}

impl Clone for PacketLog {
    /// Keeps the full reservation (a derived clone would reserve only the current length, and
    /// the clone's first push past it would allocate on the hot path).
    fn clone(&self) -> Self {
        let mut entries = Vec::with_capacity(self.capacity);
        entries.extend_from_slice(&self.entries);
        Self { entries, capacity: self.capacity, top_counts: self.top_counts }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_past_capacity_and_clones_keep_the_reservation() {
        let mut l = PacketLog::new(3);
        assert!(l.push(1, 10) && l.push(2, 20) && l.push(1, 5));
        assert!(!l.push(4, 40));
        assert_eq!(l.entries(), &[(1, 10), (2, 20), (1, 5)]);
        let mut c = l.clone();
        c.clear();
        let before = c.entries.as_ptr();
        assert!(c.push(9, 9) && c.push(8, 8) && c.push(7, 7) && !c.push(6, 6));
        assert_eq!(c.entries.as_ptr(), before, "no reallocation");
        let log_of = |pairs: &[(u64, u64)]| {
            let mut l = PacketLog::new(pairs.len());
            assert!(pairs.iter().all(|&(id, ts)| l.push(id, ts)));
            l
        };
        let mut a = PacketLog::new(4);
        assert!(a.push(1, 1) && a.append(&log_of(&[(2, 2), (3, 3)])));
        assert!(!a.append(&log_of(&[(4, 4), (5, 5)])), "all or nothing");
        assert!(a.append(&log_of(&[(4, 4)])) && !a.append(&log_of(&[(5, 5)])));
        assert_eq!(a.entries(), &[(1, 1), (2, 2), (3, 3), (4, 4)]);
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
        assert_eq!(l.top_counts(), Some(&counted(l.entries())));
        assert_eq!(l.top_counts().map(|c| (c[0], c[7], c[255])), Some((1, 2, 1)));
        let mut other = PacketLog::new(8);
        assert!(other.push(id(7, 5), 5) && other.push(id(9, 6), 6));
        let mut c = l.clone();
        assert!(c.append(&other) && c.push(id(255, 7), 7));
        assert_eq!(c.top_counts(), Some(&counted(c.entries())));
        assert!(c.push(id(1, 8), 8) && !c.push(id(1, 9), 9));
        assert!(!c.append(&other), "all or nothing");
        assert_eq!(c.top_counts(), Some(&counted(c.entries())));
        c.clear();
        assert_eq!(c.top_counts(), Some(&[0; TOP_BUCKETS]));
        // A count that does not add up (as after wrapping) is disowned.
        l.top_counts[3] = u32::MAX;
        assert_eq!(l.top_counts(), None);
    }
}
