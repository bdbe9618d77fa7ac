//! A worker's per-epoch log of (packet id, timestamp), appended in arrival order.
//!
//! Why a log and not the cache itself: with one new id per packet, inserting into the
//! ID → timestamp hash table ([`super::TimestampCache`], tens of MB for a 100-ms epoch at line
//! rate) is a cache and TLB miss per packet that no prefetch hides well; appending to a log is
//! a sequential store. The control thread's merge appends the worker's log to the merged
//! epoch's ([`super::Rda::merge`]), and its settle files them all into the cache
//! ([`super::Rda::settle`]) with the same duplicate and capacity rules the direct path applies
//! per packet, so the merged result is the same.

/// A fixed-capacity append-only log. The capacity is reserved up front and never grown: a
/// push past it is refused, so the hot path never allocates.
#[derive(Debug, PartialEq, Eq)]
pub struct PacketLog {
    entries: Vec<(u64, u64)>,
    capacity: usize,
}

impl PacketLog {
    /// A log for at most `capacity` packets. Reserves 16 B per packet of address space; the
    /// pages are only touched (and backed) as the log fills, or all at once by
    /// [`PacketLog::back_reserved`].
    pub fn new(capacity: usize) -> Self {
        Self { entries: Vec::with_capacity(capacity), capacity }
    }

    /// Appends a packet; false (nothing stored) once `capacity` packets are logged.
    #[inline(always)]
    pub fn push(&mut self, id: u64, ts_ns: u64) -> bool {
        // `Vec::with_capacity(capacity)` reserved at least this much: the push never grows it.
        if self.entries.len() >= self.capacity {
            return false;
        }
        self.entries.push((id, ts_ns));
        true
    }

    /// Appends every entry of `more` (another shard's log, deferred by a merge), or none and
    /// false when they do not all fit.
    pub fn append(&mut self, more: &[(u64, u64)]) -> bool {
        if more.len() > self.capacity - self.entries.len() {
            return false;
        }
        self.entries.extend_from_slice(more);
        true
    }

    /// The logged packets, in arrival order.
    pub fn entries(&self) -> &[(u64, u64)] {
        &self.entries
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
    }
}

impl Clone for PacketLog {
    /// Keeps the full reservation (a derived clone would reserve only the current length, and
    /// the clone's first push past it would allocate on the hot path).
    fn clone(&self) -> Self {
        let mut entries = Vec::with_capacity(self.capacity);
        entries.extend_from_slice(&self.entries);
        Self { entries, capacity: self.capacity }
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
        let mut a = PacketLog::new(4);
        assert!(a.push(1, 1) && a.append(&[(2, 2), (3, 3)]));
        assert!(!a.append(&[(4, 4), (5, 5)]), "all or nothing");
        assert!(a.append(&[(4, 4)]) && !a.append(&[(5, 5)]));
        assert_eq!(a.entries(), &[(1, 1), (2, 2), (3, 3), (4, 4)]);
    }
}
