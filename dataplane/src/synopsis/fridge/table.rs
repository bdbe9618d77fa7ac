//! One fridge's slot array: a hash-indexed array of M slots with an insertion counter
//! (spec §2.1, §3.1). A request always overwrites its slot; a response that finds its signature
//! erases the slot and reports (delay, x).
//!
//! Slots are 16 bytes, four per cache line: {timestamp ns, counter (low 32 bits), signature}.
//! Signature 0 marks an empty slot; a computed signature 0 is stored as 1 (spec P4). The
//! counter stored is the value *after* this request's own increment, so x = counter_now −
//! stored counts only later events (spec §3.3, P2). Counters are u64 in the fridge and the
//! stored low 32 bits are subtracted with wrapping: exact for x < 2³² (beyond that a request
//! would have had to survive 2³² eviction chances). Never allocates after construction.

/// One slot. `sig == 0` means empty.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    /// Request timestamp, ns.
    pub ts_ns: u64,
    /// Low 32 bits of the counter (insertions or offered requests) after this request.
    pub ctr: u32,
    /// 32-bit signature of the pairing id; 0 = empty.
    pub sig: u32,
}

/// Slot index and signature for a keyed 64-bit hash: independent bit fields (spec §2.2, P5).
/// The index uses the high 32 bits (multiply-shift onto [0, M)), the signature the low 32.
#[inline(always)]
pub fn index_and_sig(h: u64, slots: u64) -> (usize, u32) {
    let idx = ((h >> 32) * slots) >> 32;
    let sig = (h as u32).max(1);
    (idx as usize, sig)
}

/// One fridge's slot array and insertion counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FridgeTable {
    slots: Vec<Slot>,
    slot_count: u64,
    insertions: u64,
}

impl FridgeTable {
    /// An empty fridge of `slots` slots (callers validate `slots ≤ MAX_SLOTS`).
    pub fn new(slots: u32) -> Self {
        Self { slots: vec![Slot::default(); slots as usize], slot_count: u64::from(slots), insertions: 0 }
    }

    /// M.
    #[inline]
    pub fn slot_count(&self) -> u64 {
        self.slot_count
    }

    /// Insertions so far (the fridge's `ins_ctr`).
    #[inline]
    pub fn insertions(&self) -> u64 {
        self.insertions
    }

    /// Slots currently holding a request.
    pub fn occupied(&self) -> usize {
        self.slots.iter().filter(|s| s.sig != 0).count()
    }

    /// Address of slot `index` (a prefetch hint; never dereferenced here).
    #[inline(always)]
    pub fn slot_ptr(&self, index: usize) -> *const u8 {
        self.slots.as_ptr().wrapping_add(index).cast()
    }

    /// Counts one insertion and returns the new counter value (store it with the request).
    #[inline]
    pub fn count_insertion(&mut self) -> u64 {
        self.insertions += 1;
        self.insertions
    }

    /// Slot index and signature of hash `h` in this fridge.
    #[inline(always)]
    pub fn locate(&self, h: u64) -> (usize, u32) {
        index_and_sig(h, self.slot_count)
    }

    /// Writes a request into slot `i` unconditionally, with signature `sig` and counter value
    /// `ctr`. Write-only on purpose: reading the slot first (to count evictions or duplicate
    /// requests) makes every request wait for a cache miss, which doubled the per-packet
    /// cost at M = 2¹⁶ (BENCHMARKS.md); a store alone retires at once.
    #[inline]
    pub fn insert_at(&mut self, i: usize, sig: u32, ts_ns: u64, ctr: u64) {
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = Slot { ts_ns, ctr: ctr as u32, sig };
        }
    }

    /// Writes a request into the slot of hash `h` unconditionally, storing counter value `ctr`.
    #[inline]
    pub fn insert(&mut self, h: u64, ts_ns: u64, ctr: u64) {
        let (i, sig) = self.locate(h);
        self.insert_at(i, sig, ts_ns, ctr);
    }

    /// Looks up signature `sig` in slot `i`; on a match erases the slot (so a duplicate
    /// response cannot match again, spec P7) and returns the stored (timestamp, counter).
    #[inline]
    pub fn take_at(&mut self, i: usize, sig: u32) -> Option<(u64, u32)> {
        let slot = self.slots.get_mut(i)?;
        if slot.sig != sig {
            return None;
        }
        let found = (slot.ts_ns, slot.ctr);
        *slot = Slot::default();
        Some(found)
    }

    /// [`Self::take_at`] for hash `h`.
    #[inline]
    pub fn take(&mut self, h: u64) -> Option<(u64, u32)> {
        let (i, sig) = self.locate(h);
        self.take_at(i, sig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 16);
        assert_eq!(std::mem::align_of::<Slot>(), 16);
    }

    #[test]
    fn index_and_signature_use_separate_bits() {
        let (i, s) = index_and_sig(0xFFFF_FFFF_0000_0000, 4);
        assert_eq!((i, s), (3, 1), "signature 0 is remapped to 1");
        let (i, s) = index_and_sig(0x0000_0000_DEAD_BEEF, 1 << 16);
        assert_eq!((i, s), (0, 0xDEAD_BEEF));
    }

    #[test]
    fn insert_take_erase() {
        let mut t = FridgeTable::new(2);
        let h = 0x8000_0000_0000_0007;
        t.insert(h, 100, 1);
        t.insert(h, 150, 2);
        assert_eq!(t.take(h), Some((150, 2)), "a duplicate re-arms the slot");
        t.insert(h, 150, 2);
        t.insert(h ^ 1, 160, 3);
        assert_eq!(t.take(h), None, "evicted by another id");
        t.insert(h, 200, 4);
        assert_eq!(t.take(h), Some((200, 4)));
        assert_eq!(t.take(h), None, "erased on match");
        assert_eq!(t.occupied(), 0);
    }
}
