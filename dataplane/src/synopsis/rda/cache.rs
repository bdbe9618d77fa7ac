//! The per-epoch ID → timestamp cache each point keeps (spec §3.2, §6.4), and the
//! [`TimestampSource`] look-up the reconciliation needs from the other point.
//!
//! Two representations, one at a time:
//! - an open-addressing table (linear probing, power-of-two slots, load ≤ 3/4), for ids inserted
//!   one by one ([`TimestampCache::insert`], the direct path). It is allocated whole by the first
//!   insert and kept across [`TimestampCache::clear`]: later inserts never allocate; beyond
//!   `capacity` distinct ids an insert answers [`CacheInsert::Full`] and the caller counts the
//!   packet. (Allocated on first use because a worker's shard never inserts: workers log
//!   packets, [`super::log::PacketLog`]; an unused table in every buffer of every worker's ring
//!   would be wasted memory.) Id 0 marks an empty slot (packet ids are never 0, see
//!   `banks::packet_id`).
//! - a run sorted by id, for a whole epoch's logs filed at once into an empty cache
//!   ([`TimestampCache::file_sorted`], the control thread's path; see [`super::sorted`] for
//!   why). Look-ups binary-search it, and a retained copy needs no sort
//!   ([`TimestampCache::sorted_pairs`]). An insert into a non-empty run first moves the run
//!   into the table, so the two paths hold the same set.
//!
//! A repeated id is a duplicate (P14) and is **excluded**: its slot keeps the id but its
//! timestamp becomes [`EXCLUDED`], so every later copy is recognised too, and look-ups answer
//! `Some(EXCLUDED)` ("seen here, but more than once"). The spec's P14 keeps the first copy; we
//! depart from it because first-wins pairs the wrong copies whenever the two points do not see
//! the same copies in the same epoch (one copy lost, a loop on one side of the segment, copies
//! either side of an epoch boundary at one point only): issue 18 measured a +14 % epoch mean
//! from 82 such packets. An excluded id is in neither point's estimate: where the other point
//! saw it once, it decodes as a one-sided id that the reconciliation recognises by this
//! marker (see `estimator`). The result no longer depends on which copy came first, so shards
//! and arrival order still do not matter.
//! No I/O; the hot path neither allocates nor panics.

use super::log::TOP_BUCKETS;
use super::sorted::{Collapsed, Sorter};
use crate::synopsis::hash::mix64;

/// The timestamp a look-up answers for an id this point saw more than once in the epoch (and
/// so excluded). No packet timestamp reaches it: callers clamp real timestamps below it
/// ([`clamp_ts`]); u64::MAX ns is the year 2554.
pub const EXCLUDED: u64 = u64::MAX;

/// A packet timestamp made distinct from [`EXCLUDED`].
#[inline(always)]
pub const fn clamp_ts(ts_ns: u64) -> u64 {
    if ts_ns == EXCLUDED { EXCLUDED - 1 } else { ts_ns }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    id: u64,
    ts_ns: u64,
}

/// What [`TimestampCache::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheInsert {
    /// A new id was cached (as excluded if the timestamp given was [`EXCLUDED`]).
    Inserted,
    /// The id was already cached with `previous_ts_ns` ([`EXCLUDED`] if it was a duplicate
    /// already); it is now excluded.
    Duplicate {
        /// The timestamp that was cached before this insert.
        previous_ts_ns: u64,
    },
    /// The cache already holds `capacity` ids; nothing was stored.
    Full,
}

/// Answers "when did this point see packet id x?" for a batch of ids. The reconciliation
/// asks the other point for the timestamps of the packets only it saw (spec §4.4, P32); in
/// the appliance the peer protocol carries these calls over the network.
pub trait TimestampSource {
    /// Clears `out` and pushes, for each id of `ids` in order, the timestamp this point cached
    /// for it in the epoch, or `None` if it did not see the id.
    fn lookup(&self, ids: &[u64], out: &mut Vec<Option<u64>>);
}

/// Fixed-capacity map from packet id to the timestamp (ns) this point saw it: an
/// open-addressing table, or a sorted run (module docs).
#[derive(Clone, Debug)]
pub struct TimestampCache {
    /// Empty until the first insert, then `mask + 1` slots. Holds no id while `in_run`.
    slots: Vec<Slot>,
    /// `run[..len]` while `in_run`: the ids filed in bulk, sorted, one pair per distinct id (a
    /// repeated id once, as [`EXCLUDED`]). The buffer only grows; its tail is stale.
    run: Vec<(u64, u64)>,
    in_run: bool,
    /// The sort's buffers (kept, like `run`, so a later epoch does not allocate).
    sorter: Sorter,
    mask: usize,
    key: u64,
    capacity: usize,
    len: usize,
    /// Ids of `len` that are excluded.
    excluded: usize,
}

impl TimestampCache {
    /// A cache for at most `capacity` ids (at least 1); `seed` keys the slot hash. The table
    /// (16 B per slot, ≥ 4/3 · capacity slots, a power of two) is allocated by the first
    /// insert.
    pub fn new(capacity: usize, seed: u64) -> Self {
        let capacity = capacity.max(1);
        let want = capacity.saturating_add(capacity / 3).saturating_add(1);
        let n = want.checked_next_power_of_two().unwrap_or(1 << 62).max(2);
        Self {
            slots: Vec::new(),
            run: Vec::new(),
            in_run: false,
            sorter: Sorter::default(),
            mask: n - 1,
            key: mix64(seed),
            capacity,
            len: 0,
            excluded: 0,
        }
    }

    /// The most ids this cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Ids cached, excluded ones included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Ids cached as excluded (seen more than once).
    pub fn excluded(&self) -> usize {
        self.excluded
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the slot table (whether or not it is allocated yet; the bulk path's sorted run
    /// needs 16 B per id instead, [`super::RdaConfig::shard_bytes`]).
    pub fn table_bytes(&self) -> usize {
        (self.mask + 1) * std::mem::size_of::<Slot>()
    }

    #[inline(always)]
    fn home(&self, id: u64) -> usize {
        (mix64(id ^ self.key) as usize) & self.mask
    }

    /// Address of the first slot `id` probes (a prefetch hint; never dereferenced here).
    #[inline(always)]
    pub fn slot_ptr(&self, id: u64) -> *const u8 {
        self.slots.as_ptr().wrapping_add(self.home(id)).cast()
    }

    /// Caches `id` (≠ 0) seen at `ts_ns`; a repeat excludes it. Allocates the table on the
    /// first call only (and moves a sorted run into it: the one-by-one path needs the table).
    #[inline]
    pub fn insert(&mut self, id: u64, ts_ns: u64) -> CacheInsert {
        self.reserve();
        if self.in_run {
            self.spill_run();
        }
        let mut i = self.home(id);
        // The table always has an empty slot (load ≤ 3/4), so the probe ends; the bound only
        // guards against a corrupted table.
        for _ in 0..self.slots.len() {
            let Some(s) = self.slots.get_mut(i) else { break };
            if s.id == id {
                let previous_ts_ns = s.ts_ns;
                if previous_ts_ns != EXCLUDED {
                    s.ts_ns = EXCLUDED;
                    self.excluded += 1;
                }
                return CacheInsert::Duplicate { previous_ts_ns };
            }
            if s.id == 0 {
                if self.len >= self.capacity {
                    return CacheInsert::Full;
                }
                *s = Slot { id, ts_ns };
                self.len += 1;
                self.excluded += usize::from(ts_ns == EXCLUDED);
                return CacheInsert::Inserted;
            }
            i = (i + 1) & self.mask;
        }
        CacheInsert::Full
    }

    /// Allocates the table now if no insert has yet (control thread; a no-op afterwards).
    #[inline(always)]
    pub fn reserve(&mut self) {
        if self.slots.is_empty() {
            self.allocate();
        }
    }

    #[cold]
    #[inline(never)]
    fn allocate(&mut self) {
        self.slots = vec![Slot::default(); self.mask + 1];
    }

    /// Moves the sorted run into the (empty, allocated) table; `len` and `excluded` stay.
    #[cold]
    #[inline(never)]
    fn spill_run(&mut self) {
        let run = std::mem::take(&mut self.run);
        for &(id, ts_ns) in run.get(..self.len).unwrap_or_default() {
            let mut i = self.home(id);
            for _ in 0..self.slots.len() {
                let Some(s) = self.slots.get_mut(i) else { break };
                if s.id == 0 {
                    *s = Slot { id, ts_ns };
                    break;
                }
                i = (i + 1) & self.mask;
            }
        }
        self.run = run;
        self.in_run = false;
    }

    /// Files a batch of (id ≠ 0, timestamp) pairs into this **empty** cache at once, as a sorted
    /// run: the set equals inserting them one by one in any order (every copy of an id given
    /// more than once ends excluded). `on_repeat(id, copies)` is called once per such id with
    /// all its pairs, for the caller to take them out of whatever else holds them. Refused
    /// (false, nothing filed) when the cache is not empty or `pairs` outnumber the capacity:
    /// there the order decides which ids do not fit, and the caller must insert one by one.
    /// `top_counts`: the pairs counted by their id's top byte, if known ([`Sorter::sort_unique`]).
    pub fn file_sorted(
        &mut self,
        pairs: &[(u64, u64)],
        top_counts: Option<&[u32; TOP_BUCKETS]>,
        on_repeat: impl FnMut(u64, &[(u64, u64)]),
    ) -> bool {
        self.file_sorted_parts(&[pairs], top_counts, on_repeat)
    }

    /// [`TimestampCache::file_sorted`] of the concatenation of `parts`, read where they are
    /// ([`super::sorted::Sorter::sort_unique_parts`]); `top_counts` counts all of them.
    pub fn file_sorted_parts(
        &mut self,
        parts: &[&[(u64, u64)]],
        top_counts: Option<&[u32; TOP_BUCKETS]>,
        on_repeat: impl FnMut(u64, &[(u64, u64)]),
    ) -> bool {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        self.file_run(n, |sorter, run| sorter.sort_unique_parts(parts, top_counts, run, on_repeat))
    }

    /// [`TimestampCache::file_sorted`] of pairs already split by their id's top byte
    /// ([`super::sorted::Sorter::sort_unique_regions`]: `ways` slices per top byte).
    pub fn file_sorted_regions(
        &mut self,
        regions: &[&[(u64, u64)]],
        ways: usize,
        on_repeat: impl FnMut(u64, &[(u64, u64)]),
    ) -> bool {
        let n: usize = regions.iter().map(|p| p.len()).sum();
        self.file_run(n, |sorter, run| sorter.sort_unique_regions(regions, ways, run, on_repeat))
    }

    /// The filings' shared rule: `n` pairs are sorted into the run by `sort` only into an empty
    /// cache with room for all of them (false, nothing filed, otherwise).
    fn file_run(
        &mut self,
        n: usize,
        sort: impl FnOnce(&mut Sorter, &mut Vec<(u64, u64)>) -> Collapsed,
    ) -> bool {
        if self.len > 0 || n > self.capacity {
            return false;
        }
        make_room(&mut self.run, n, self.capacity);
        let c = sort(&mut self.sorter, &mut self.run);
        self.in_run = true;
        self.len = c.distinct;
        self.excluded = c.excluded;
        true
    }

    /// The sort's buffers, for a filing done outside the cache ([`super::share`]).
    pub(super) fn sorter_mut(&mut self) -> &mut Sorter {
        &mut self.sorter
    }

    /// Lends the run's buffer for `n` pairs to be filed elsewhere (several threads at once,
    /// [`super::share::FilingJob`]): at least `n` pairs long, its contents stale. `None` when the
    /// cache is not empty or has no room for `n`: as for [`Self::file_sorted`], the order would
    /// decide which ids fit. Give it back with [`Self::take_back_run`].
    pub fn lend_run(&mut self, n: usize) -> Option<Vec<(u64, u64)>> {
        if self.len > 0 || n > self.capacity {
            return None;
        }
        make_room(&mut self.run, n, self.capacity);
        let mut run = std::mem::take(&mut self.run);
        if run.len() < n {
            run.resize(n, (0, 0));
        }
        Some(run)
    }

    /// Takes back a buffer [`Self::lend_run`] lent, whose first `collapsed.distinct` pairs are
    /// now the filed run: sorted by id, one pair per id, `collapsed.excluded` of them excluded.
    /// The caller vouches for the order (debug builds check it). An empty cache only (a table
    /// filled meanwhile keeps its pairs and the buffer is kept as spare room).
    pub fn take_back_run(&mut self, run: Vec<(u64, u64)>, collapsed: Collapsed) {
        debug_assert!(
            run.get(..collapsed.distinct).is_some_and(|r| r.windows(2).all(|w| w[0].0 < w[1].0)),
            "a lent run comes back sorted"
        );
        self.run = run;
        if self.len > 0 || collapsed.distinct > self.run.len() {
            return;
        }
        self.in_run = true;
        self.len = collapsed.distinct;
        self.excluded = collapsed.excluded;
    }

    /// The pairs sorted by id when the cache holds them as a sorted run (or holds nothing):
    /// a retained copy then needs no sort. `None` when they are in the table.
    pub fn sorted_pairs(&self) -> Option<&[(u64, u64)]> {
        if self.in_run || self.len == 0 { Some(self.run_pairs()) } else { None }
    }

    /// Pairs the sorted run's buffer holds room for (0 while the pairs are in the table): what a
    /// buffer handed to [`TimestampCache::swap_run`] should hold so the next filing does not
    /// grow it.
    pub fn run_capacity(&self) -> usize {
        if self.in_run { self.run.capacity() } else { 0 }
    }

    /// [`TimestampCache::run_capacity`] when the run fills at least half of it, else 0: the
    /// room worth keeping with the run's pairs. (After a burst the buffer stays large; a
    /// retained run, moved or copied with that room, would then hold far more memory than its
    /// pairs need.)
    pub fn run_room(&self) -> usize {
        let cap = self.run_capacity();
        if self.len > 0 && cap <= self.len.saturating_mul(2) { cap } else { 0 }
    }

    /// Moves the sorted run out instead of copying it: when the pairs are a run, `buf` and the
    /// run's buffer trade places, `buf` then holds exactly the run's pairs (sorted by id, as
    /// [`TimestampCache::sorted_pairs`] gave them) and this cache is empty, with `buf`'s old
    /// allocation as the buffer its next filing sorts into (its contents are never read).
    /// False, nothing changed, when the pairs are in the table or there are none. The run is
    /// an epoch's whole log (16 B per packet): a retained copy of it was a second pass over
    /// that memory, and a fresh allocation, every epoch.
    pub fn swap_run(&mut self, buf: &mut Vec<(u64, u64)>) -> bool {
        if !self.in_run || self.len == 0 {
            return false;
        }
        std::mem::swap(&mut self.run, buf);
        buf.truncate(self.len);
        self.clear();
        true
    }

    /// The run's pairs (empty unless `in_run`).
    fn run_pairs(&self) -> &[(u64, u64)] {
        if self.in_run { self.run.get(..self.len).unwrap_or_default() } else { &[] }
    }

    /// The timestamp cached for `id` ([`EXCLUDED`] for an id seen more than once).
    #[inline]
    pub fn get(&self, id: u64) -> Option<u64> {
        if id == 0 {
            return None;
        }
        if self.in_run {
            let run = self.run_pairs();
            return run.binary_search_by_key(&id, |p| p.0).ok().and_then(|i| run.get(i)).map(|p| p.1);
        }
        let mut i = self.home(id);
        for _ in 0..self.slots.len() {
            let s = self.slots.get(i)?;
            if s.id == id {
                return Some(s.ts_ns);
            }
            if s.id == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// True when `id` is cached (excluded or not).
    pub fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    /// Every (id, timestamp) pair, in table or run order, excluded ids included (timestamp
    /// [`EXCLUDED`]): what an export or a merge must carry.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let run = self.run_pairs();
        run.iter().copied().chain(self.slots.iter().filter(|s| s.id != 0).map(|s| (s.id, s.ts_ns)))
    }

    /// The (id, timestamp) pairs of the ids seen once: the set the banks hold.
    pub fn iter_measured(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.iter().filter(|&(_, ts)| ts != EXCLUDED)
    }

    /// Forgets every id, keeping the allocation.
    pub fn clear(&mut self) {
        if self.in_run {
            // The table holds nothing while the run does.
            self.in_run = false;
        } else if self.len > 0 {
            self.slots.fill(Slot::default());
        }
        self.len = 0;
        self.excluded = 0;
    }
}

/// Gives the run's buffer room for `n` pairs before a filing. A buffer too small is replaced,
/// not grown: its pairs are stale (a filing never reads them), and `Vec`'s growth would copy
/// them into the new block, a pass over memory that is then faulted in anyway. The new block
/// has a quarter more room than asked (within the cache's capacity): while traffic rises, an
/// epoch larger than every earlier one is the rule, not the exception, and fitted exactly, each
/// of them cost a fresh block (BENCHMARKS "W17 (fourteenth session)"). A quarter keeps a
/// retained run above half its buffer, where retention moves it instead of copying it
/// ([`TimestampCache::run_room`]). `n` is at most `capacity` (the filing checked it).
///
/// The new block is allocated zeroed at its full length (`vec!` of zeros asks the allocator for
/// zeroed memory, which for a block this size is fresh pages the kernel zeroes as they are first
/// written), not reserved and then filled: filling it was a pass over tens of MiB on the control
/// thread whenever an epoch needed a new block, the larger part of what the control thread still
/// did once the workers filed the logs (BENCHMARKS "W17 (twenty-ninth session)"). The pages are
/// then backed where the run is written: by the filing, on whichever thread files.
fn make_room(run: &mut Vec<(u64, u64)>, n: usize, capacity: usize) {
    if run.capacity() < n {
        let room = (n + n / 4).min(capacity).max(n);
        drop(std::mem::take(run));
        *run = vec![(0, 0); room];
    }
}

impl PartialEq for TimestampCache {
    /// Equal when both hold the same (id, timestamp) set and capacity; the slot layout (which
    /// depends on insertion order) does not matter.
    fn eq(&self, other: &Self) -> bool {
        self.capacity == other.capacity
            && self.len == other.len
            && self.iter().all(|(id, ts)| other.get(id) == Some(ts))
    }
}

impl TimestampSource for TimestampCache {
    fn lookup(&self, ids: &[u64], out: &mut Vec<Option<u64>>) {
        out.clear();
        out.extend(ids.iter().map(|&id| self.get(id)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rising epochs (1 000 to 1 190 ids) file into the buffer the first one made, a quarter
    /// larger than it; the room never passes the capacity. Fitted exactly, every epoch here
    /// made a new block.
    #[test]
    fn a_rising_epoch_size_keeps_the_run_buffer() {
        let filed = |c: &mut TimestampCache, e: u64, n: u64| {
            let pairs: Vec<(u64, u64)> = (0..n).map(|i| (mix64(e << 32 | i) | 1, i)).collect();
            c.clear();
            assert!(c.file_sorted(&pairs, None, |_, _| {}));
            assert_eq!(c.len(), n as usize);
            c.run_capacity()
        };
        let mut c = TimestampCache::new(1 << 16, 7);
        let mut caps: Vec<usize> = (0..20).map(|e| filed(&mut c, e, 1_000 + 10 * e)).collect();
        caps.dedup();
        assert_eq!(caps, [1_250]);
        let mut small = TimestampCache::new(1_100, 7);
        assert_eq!(filed(&mut small, 0, 1_000), 1_100);
        assert_eq!(filed(&mut small, 1, 1_100), 1_100);
    }

    #[test]
    fn insert_get_duplicates_are_excluded() {
        let mut c = TimestampCache::new(4, 1);
        assert_eq!(c.insert(10, 500), CacheInsert::Inserted);
        assert_eq!(c.insert(10, 700), CacheInsert::Duplicate { previous_ts_ns: 500 });
        assert_eq!(c.get(10), Some(EXCLUDED));
        assert_eq!(c.insert(10, 300), CacheInsert::Duplicate { previous_ts_ns: EXCLUDED });
        assert_eq!(c.get(10), Some(EXCLUDED));
        assert_eq!(c.excluded(), 1);
        assert_eq!(c.get(11), None);
        assert_eq!(c.get(0), None);
        for id in 11..14 {
            assert_eq!(c.insert(id, id), CacheInsert::Inserted);
        }
        assert_eq!(c.insert(99, 1), CacheInsert::Full);
        assert_eq!(c.insert(12, 1), CacheInsert::Duplicate { previous_ts_ns: 12 }, "full still dedupes");
        assert_eq!(c.len(), 4);
        assert_eq!(c.excluded(), 2);
        assert_eq!(c.iter_measured().map(|(id, _)| id).collect::<Vec<_>>().len(), 2);
        let mut out = Vec::new();
        c.lookup(&[13, 99, 10], &mut out);
        assert_eq!(out, vec![Some(13), None, Some(EXCLUDED)]);
        c.clear();
        assert!(c.is_empty());
        assert_eq!(c.excluded(), 0);
        assert_eq!(c.get(13), None);
    }

    #[test]
    fn full_table_of_colliding_ids_still_terminates() {
        // capacity 1000 → 2048 slots; fill to capacity, then every probe must still end.
        let mut c = TimestampCache::new(1000, 7);
        for id in 1..=1000u64 {
            assert_eq!(c.insert(id * 0x1_0000_0001, id), CacheInsert::Inserted);
        }
        assert_eq!(c.insert(5, 5), CacheInsert::Full);
        for id in 1..=1000u64 {
            assert_eq!(c.get(id * 0x1_0000_0001), Some(id));
        }
        assert_eq!(c.get(3), None);
        assert!(c.table_bytes() >= 1000 * 16 * 4 / 3);
    }

    /// The bulk path holds the set the one-by-one path holds (repeats excluded, counted once
    /// per id), answers the same look-ups, and an insert afterwards moves the run into the
    /// table without losing or duplicating an id.
    #[test]
    fn a_sorted_run_holds_what_inserting_one_by_one_holds() {
        let mut pairs: Vec<(u64, u64)> =
            (1..=500u64).map(|i| (i.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1, i)).collect();
        pairs.extend([(pairs[3].0, 7), (pairs[9].0, 8), (pairs[3].0, 9)]);
        let mut one_by_one = TimestampCache::new(600, 5);
        for &(id, ts) in &pairs {
            one_by_one.insert(id, ts);
        }
        let mut bulk = TimestampCache::new(600, 5);
        let mut repeats = Vec::new();
        assert!(bulk.file_sorted(&pairs, None, |id, copies| repeats.push((id, copies.len()))));
        repeats.sort_unstable();
        let mut want = vec![(pairs[3].0, 3), (pairs[9].0, 2)];
        want.sort_unstable();
        assert_eq!(repeats, want);
        assert_eq!(bulk, one_by_one);
        assert_eq!((bulk.len(), bulk.excluded()), (500, 2));
        assert_eq!(bulk.get(pairs[3].0), Some(EXCLUDED));
        assert_eq!(bulk.get(pairs[100].0), Some(101));
        assert_eq!(bulk.get(2), None);
        let run = bulk.sorted_pairs().expect("a run");
        assert!(run.windows(2).all(|w| w[0].0 < w[1].0) && run.len() == 500);
        assert!(one_by_one.sorted_pairs().is_none(), "a table is not sorted");
        assert!(!bulk.file_sorted(&pairs, None, |_, _| {}), "only into an empty cache");
        // An insert after the run: the run moves into the table.
        assert_eq!(bulk.insert(pairs[100].0, 1), CacheInsert::Duplicate { previous_ts_ns: 101 });
        assert_eq!(one_by_one.insert(pairs[100].0, 1), CacheInsert::Duplicate { previous_ts_ns: 101 });
        assert_eq!(bulk.insert(3, 3), CacheInsert::Inserted);
        one_by_one.insert(3, 3);
        assert_eq!(bulk, one_by_one);
        assert!(bulk.sorted_pairs().is_none());
        bulk.clear();
        assert!(bulk.is_empty() && bulk.iter().next().is_none() && bulk.get(3).is_none());
        assert_eq!(bulk.sorted_pairs(), Some(&[][..]));
        // A run again after a table epoch, and no more pairs than the capacity.
        assert!(bulk.file_sorted(&pairs[..20], None, |_, _| {}));
        assert_eq!(bulk.iter().count(), 20);
        bulk.clear();
        let too_many: Vec<(u64, u64)> = (1..=601u64).map(|i| (i, i)).collect();
        assert!(!bulk.file_sorted(&too_many, None, |_, _| {}));
        assert!(bulk.is_empty());
    }

    /// Moving the run out gives the pairs a copy would have, leaves the cache empty, and the
    /// traded buffer (stale pairs in it, too small or large enough) serves the next filing,
    /// which then equals a fresh cache's. A table or an empty cache is not moved.
    #[test]
    fn a_run_moved_out_is_the_copy_and_the_traded_buffer_files_the_next_epoch() {
        let epoch = |k: u64| -> Vec<(u64, u64)> {
            let mut v: Vec<(u64, u64)> = (1..=700u64)
                .map(|i| ((i + 1000 * k).wrapping_mul(0x2545_f491_4f6c_dd1d) | 1, i + k))
                .collect();
            v.push(v[5]);
            v
        };
        for stale in [Vec::new(), vec![(9, 9); 3], vec![(7, 7); 2000]] {
            let mut c = TimestampCache::new(1000, 5);
            assert!(c.file_sorted(&epoch(1), None, |_, _| {}));
            let want = c.sorted_pairs().expect("a run").to_vec();
            let mut buf = stale.clone();
            assert!(c.swap_run(&mut buf));
            assert_eq!(buf, want, "the moved pairs are the run");
            assert!(c.is_empty() && c.get(want[0].0).is_none() && c.excluded() == 0);
            assert!(!c.swap_run(&mut buf), "nothing left to move");
            assert!(c.file_sorted(&epoch(2), None, |_, _| {}));
            let mut fresh = TimestampCache::new(1000, 5);
            assert!(fresh.file_sorted(&epoch(2), None, |_, _| {}));
            assert_eq!(c, fresh);
            assert_eq!(c.sorted_pairs(), fresh.sorted_pairs());
        }
        let mut table = TimestampCache::new(100, 5);
        table.insert(3, 4);
        let mut buf = vec![(1, 1)];
        assert!(!table.swap_run(&mut buf));
        assert_eq!((buf, table.len(), table.run_capacity()), (vec![(1, 1)], 1, 0));
    }

    #[test]
    fn equality_ignores_insertion_order() {
        let mut a = TimestampCache::new(64, 3);
        let mut b = TimestampCache::new(64, 3);
        for id in 1..40u64 {
            a.insert(id, id * 3);
        }
        for id in (1..40u64).rev() {
            b.insert(id, id * 3);
        }
        assert_eq!(a, b);
        b.insert(40, 1);
        assert_ne!(a, b);
    }
}
