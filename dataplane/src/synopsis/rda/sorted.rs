//! Sorting a packet log by id in cache-sized steps, one pair per distinct id: the bulk path by
//! which the control thread files a whole epoch's logs into the cache
//! ([`super::TimestampCache::file_sorted`]).
//!
//! Why sort instead of inserting into the hash table: with one new id per packet, the table
//! (2²¹ slots, 32 MiB at the default capacity) costs a random read-modify-write of a line per
//! packet, and it must be zeroed every epoch and copied out for retention. A sorted run is
//! written once, in order, and the retained copy is then sorted already, so the look-ups need
//! no sort (BENCHMARKS "W17 (third session)").
//!
//! How: ids are well-mixed hashes (the packet layer's seeded xxh3), so their top byte spreads them
//! evenly. The workers' logs already keep their pairs in 256 regions by top byte
//! ([`super::PacketLog`]); where none overflowed, each bucket is sorted from the workers' regions
//! where they lie ([`Sorter::sort_unique_regions`]). Otherwise one pass scatters the logs by the
//! top byte into 256 buckets of the output (256 write streams: their tails stay in L1; the log and
//! each stream's next line are hinted ahead), from counts the worker's log kept as it filled
//! ([`super::PacketLog::top_counts`]) or, without them, from a counting pass. Each bucket (≈ 64 KiB
//! for 10⁶ packets) is then sorted while it is in L2: by as many of the next bits as it has about
//! ids (8 to 14) into a scratch buffer, then by one insertion sort over the bucket, which only
//! moves a pair within its sub-bucket (≈ 1 id). A skewed bucket (crafted ids) only costs time:
//! where a sub-bucket is long, each sub-bucket is sorted on its own, a long one by the standard
//! library's sort. Each sorted bucket is collapsed (one pair per id) on its way back into the
//! output, while it is still in cache, and meanwhile the next bucket is hinted into cache.

use super::cache::EXCLUDED;
use super::log::TOP_BUCKETS;
use crate::cpu::prefetch;

/// Sub-buckets longer than this use `sort_unstable` (a skewed input; insertion sort is
/// quadratic).
const INSERTION_MAX: usize = 48;

/// Most bits of the second level: 2¹⁴ counters (128 KiB) per bucket.
const MAX_SECOND_BITS: u32 = 14;

/// What [`Sorter::sort_unique`] left in its output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collapsed {
    /// Distinct ids: `out[..distinct]` holds one pair each, sorted.
    pub distinct: usize,
    /// Of those, ids given more than once (their pair's timestamp is [`EXCLUDED`]).
    pub excluded: usize,
}

/// The buffers of [`Sorter::sort_unique`], kept so a later epoch's sort does not allocate.
#[derive(Clone, Debug, Default)]
pub struct Sorter {
    /// One bucket's pairs, sorted.
    scratch: Vec<(u64, u64)>,
    /// The second level's counters: `u32`, so the 2¹³ of a bucket of about 4 096 pairs stay in
    /// a 48-KiB L1 (as `usize` they took 64 KiB).
    counts: Vec<u32>,
}

impl Sorter {
    /// A sorter that sorts groups of up to `pairs` pairs without allocating
    /// ([`Sorter::has_room`]): what a worker that shares the filing keeps, made before its
    /// loop starts.
    pub fn with_room(pairs: usize) -> Self {
        let mut s = Sorter::default();
        s.scratch.resize(pairs, (0, 0));
        s.counts.reserve_exact((1 << MAX_SECOND_BITS) + 2);
        s
    }

    /// True when sorting a group of `pairs` pairs allocates nothing.
    pub fn has_room(&self, pairs: usize) -> bool {
        self.scratch.len() >= pairs && self.counts.capacity() >= (1 << MAX_SECOND_BITS) + 2
    }

    /// Sorts `src`'s (id, timestamp) pairs by id into `out`, one pair per distinct id: an id
    /// given more than once becomes one pair with the timestamp [`EXCLUDED`] (an id given once
    /// as [`EXCLUDED`] stays so), after `on_repeat(id, copies)` saw all its pairs. Each bucket
    /// is collapsed while it is still in cache, not in another pass over `out`. `out` and the
    /// sorter's buffers only grow: their stale tails are never read, so a reused buffer is not
    /// zeroed again. Control thread only (may allocate on growth).
    ///
    /// `top_counts`, if given, says how many pairs have each top byte of their id (what the
    /// worker's [`super::PacketLog`] counted as it logged): the first pass then skips counting,
    /// which is a whole read of `src` from memory. Counts that do not add up to `src.len()` are
    /// ignored.
    pub fn sort_unique(
        &mut self,
        src: &[(u64, u64)],
        top_counts: Option<&[u32; TOP_BUCKETS]>,
        out: &mut Vec<(u64, u64)>,
        on_repeat: impl FnMut(u64, &[(u64, u64)]),
    ) -> Collapsed {
        self.sort_unique_parts(&[src], top_counts, out, on_repeat)
    }

    /// [`Sorter::sort_unique`] of the concatenation of `parts` (several workers' logs), read
    /// where they are: concatenating them first would be one more write and read of every pair.
    /// `top_counts` counts all parts together.
    pub fn sort_unique_parts(
        &mut self,
        parts: &[&[(u64, u64)]],
        top_counts: Option<&[u32; TOP_BUCKETS]>,
        out: &mut Vec<(u64, u64)>,
        mut on_repeat: impl FnMut(u64, &[(u64, u64)]),
    ) -> Collapsed {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        fit(out, n);
        let mut ends = [0usize; TOP_BUCKETS + 1];
        let counted = top_counts.filter(|c| c.iter().map(|&x| x as usize).sum::<usize>() == n);
        match counted {
            Some(c) => {
                for (e, &x) in ends.iter_mut().skip(1).zip(c) {
                    *e = x as usize;
                }
            }
            None => {
                ends.fill(0);
                for part in parts {
                    add_counts(part, &mut ends, top_byte);
                }
            }
        }
        if let Some(dst) = out.get_mut(..n) {
            to_starts(&mut ends);
            for part in parts {
                place::<true, usize>(part, dst, &mut ends, top_byte);
            }
        }
        let mut collapsed = Collapsed::default();
        let mut begin = 0;
        for &end in ends.iter().take(TOP_BUCKETS) {
            if let Some(bucket) = out.get(begin..end) {
                self.sort_bucket(&[bucket]);
            }
            // The write position never passes the bucket just read: collapsing only shrinks.
            // The next bucket starts at `end`: hinted pair by pair while this one collapses.
            let mut next = One::at(out.as_ptr().wrapping_add(end));
            self.finish_bucket(end - begin, out, &mut next, &mut collapsed, &mut on_repeat);
            begin = end;
        }
        collapsed
    }

    /// [`Sorter::sort_unique_parts`] of pairs already split by their id's top byte (the
    /// regions of the workers' [`super::PacketLog`]s): `regions` holds [`TOP_BUCKETS`] groups
    /// of `ways` slices each, and every id in group b has the top byte b. The top level's
    /// scatter (a read of every pair from memory and a write of it to one of 256 streams) is
    /// then already done: each group is sorted from where it lies and collapsed into `out`.
    /// Ids in the wrong group would leave `out` unsorted (debug builds check).
    pub fn sort_unique_regions(
        &mut self,
        regions: &[&[(u64, u64)]],
        ways: usize,
        out: &mut Vec<(u64, u64)>,
        on_repeat: impl FnMut(u64, &[(u64, u64)]),
    ) -> Collapsed {
        let n: usize = regions.iter().map(|p| p.len()).sum();
        fit(out, n);
        self.sort_unique_groups(regions, ways, 0, out, on_repeat)
    }

    /// [`Sorter::sort_unique_regions`] of a run of consecutive groups only, the first of them
    /// group `first_group` (the ids of `regions`' first `ways` slices have that top byte), into
    /// `out`, which must hold room for all their pairs (pairs that do not fit are dropped and
    /// the count is short). A group's ids are its own: an id given twice lies twice in one
    /// group, so disjoint runs of groups sort independently, each into its own output, and
    /// their outputs in group order are the whole sort's. That is the unit by which several
    /// threads could share one epoch's filing (BENCHMARKS "W17 (twenty-ninth session)").
    pub fn sort_unique_groups(
        &mut self,
        regions: &[&[(u64, u64)]],
        ways: usize,
        first_group: usize,
        out: &mut [(u64, u64)],
        mut on_repeat: impl FnMut(u64, &[(u64, u64)]),
    ) -> Collapsed {
        let mut collapsed = Collapsed::default();
        let mut groups = regions.chunks(ways.max(1)).enumerate().peekable();
        while let Some((b, parts)) = groups.next() {
            debug_assert!(
                parts.iter().flat_map(|p| p.iter()).all(|p| top_byte(p.0) == first_group + b),
                "group {}",
                first_group + b
            );
            self.sort_bucket(parts);
            let len: usize = parts.iter().map(|p| p.len()).sum();
            // The next group's parts, hinted pair by pair in turn while this one collapses (a
            // group of one part, and the end, by a bare pointer).
            match groups.peek().map(|(_, g)| *g) {
                Some(parts @ [_, _, ..]) => {
                    let mut next = Parts { parts, part: 0, offset: 0 };
                    self.finish_bucket(len, out, &mut next, &mut collapsed, &mut on_repeat)
                }
                group => {
                    let first = group.and_then(|g| g.first()).map_or(std::ptr::null(), |p| p.as_ptr());
                    self.finish_bucket(len, out, &mut One::at(first), &mut collapsed, &mut on_repeat)
                }
            }
        }
        collapsed
    }

    /// Appends the bucket [`Sorter::sort_bucket`] left in `scratch[..len]` to `out`, sorted,
    /// one pair per distinct id. The bucket is sorted up to its sub-buckets, which the merged
    /// insertion sort and collapse ([`insert_collapse`]) finish on their way into `out`: one
    /// pass over the bucket instead of an insertion sort and then a collapse. A bucket with a
    /// repeated id is sorted and collapsed as before instead, so that `on_repeat` sees every
    /// copy at once (repeats are rare: a retransmission seen twice in one epoch).
    fn finish_bucket(
        &mut self,
        len: usize,
        out: &mut [(u64, u64)],
        next: &mut impl Ahead,
        collapsed: &mut Collapsed,
        on_repeat: &mut impl FnMut(u64, &[(u64, u64)]),
    ) {
        let Some(bucket) = self.scratch.get_mut(..len) else { return };
        if !insert_collapse(bucket, out, next, collapsed) {
            insertion_sort(bucket);
            collapse(bucket, out, next, collapsed, on_repeat);
        }
    }

    /// Sorts one top-byte bucket (all ids share their top byte) into `scratch[..len]`: by as
    /// many of the next bits as make the sub-buckets about one pair long, so the insertion
    /// sort that finishes them ([`Sorter::finish_bucket`]) rarely branches the wrong way. A
    /// short bucket, or one with a long sub-bucket, is left wholly sorted.
    fn sort_bucket(&mut self, parts: &[&[(u64, u64)]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if self.scratch.len() < len {
            self.scratch.resize(len, (0, 0));
        }
        let Some(tmp) = self.scratch.get_mut(..len) else { return };
        if len <= INSERTION_MAX || u32::try_from(len).is_err() {
            let mut at = 0;
            for p in parts {
                if let Some(d) = tmp.get_mut(at..at + p.len()) {
                    d.copy_from_slice(p);
                }
                at += p.len();
            }
            if len <= INSERTION_MAX {
                insertion_sort(tmp);
            } else {
                tmp.sort_unstable_by_key(|p| p.0);
            }
            return;
        }
        let bits = (usize::BITS - len.leading_zeros()).clamp(8, MAX_SECOND_BITS);
        let shift = 56 - bits;
        let mask = (1usize << bits) - 1;
        let key = |id: u64| ((id >> shift) as usize) & mask;
        self.counts.resize(mask + 2, 0);
        let counts = self.counts.get_mut(..mask + 2).unwrap_or_default();
        counts.fill(0);
        for bucket in parts {
            add_counts(bucket, counts, key);
        }
        let longest = counts.iter().copied().max().unwrap_or_default();
        to_starts(counts);
        for bucket in parts {
            place::<false, u32>(bucket, tmp, counts, key);
        }
        // `counts[k]` is now where sub-bucket k ends. Where no sub-bucket is long, one
        // insertion sort over the whole bucket finishes it (in `finish_bucket`): a pair only
        // moves back within its own sub-bucket (those before hold smaller ids), so it costs
        // what the per-sub-bucket sorts would, without a loop and an unpredictable branch per
        // sub-bucket (about one pair each).
        if longest as usize <= INSERTION_MAX {
            return;
        }
        let mut begin = 0;
        for &end in counts.iter().take(mask + 1) {
            let end = end as usize;
            if let Some(sub) = tmp.get_mut(begin..end) {
                if sub.len() <= INSERTION_MAX {
                    insertion_sort(sub);
                } else {
                    sub.sort_unstable_by_key(|p| p.0);
                }
            }
            begin = end;
        }
    }
}

/// Makes `out` at least `n` pairs long, growing it by no more than it lacks. The cache gives its
/// run room before it sorts (`make_room` in [`super::cache`]: a quarter more, the stale pairs
/// not copied), so for the control thread's filings this only lengthens `out` within that room.
fn fit(out: &mut Vec<(u64, u64)>, n: usize) {
    if out.len() < n {
        out.reserve_exact(n - out.len());
        out.resize(n, (0, 0));
    }
}

/// Appends `sorted`'s pairs to `out[collapsed.distinct..]`, one per distinct id. `next`: the
/// next bucket, hinted once per pair written (its first pass then finds it in cache).
fn collapse(
    sorted: &[(u64, u64)],
    out: &mut [(u64, u64)],
    next: &mut impl Ahead,
    collapsed: &mut Collapsed,
    on_repeat: &mut impl FnMut(u64, &[(u64, u64)]),
) {
    let mut read = 0;
    while let Some(&(id, ts_ns)) = sorted.get(read) {
        next.hint();
        let mut end = read + 1;
        while sorted.get(end).is_some_and(|p| p.0 == id) {
            end += 1;
        }
        let ts_ns = if end - read > 1 {
            on_repeat(id, sorted.get(read..end).unwrap_or_default());
            EXCLUDED
        } else {
            ts_ns
        };
        collapsed.excluded += usize::from(ts_ns == EXCLUDED);
        if let Some(slot) = out.get_mut(collapsed.distinct) {
            *slot = (id, ts_ns);
        }
        collapsed.distinct += 1;
        read = end;
    }
}

/// Appends `nearly`'s pairs to `out[collapsed.distinct..]` sorted by id, where `nearly` is
/// sorted but for pairs out of order within runs of at most [`INSERTION_MAX`] (a sub-bucket):
/// an insertion sort whose output is `out`, so the sorted bucket is written once. A pair in
/// order (most of them) is appended; one out of order is shifted into place among the pairs
/// already written, which are still in L1. Returns false, with `collapsed` and the pairs it
/// counts untouched, at the first id given twice: the caller then sorts and collapses the
/// bucket the way that hands every copy of a repeated id to `on_repeat` together, over the
/// pairs this left in `out[collapsed.distinct..]`. `next`: hinted once per pair read.
fn insert_collapse(
    nearly: &[(u64, u64)],
    out: &mut [(u64, u64)],
    next: &mut impl Ahead,
    collapsed: &mut Collapsed,
) -> bool {
    let start = collapsed.distinct;
    let Some(dst) = out.get_mut(start..start + nearly.len()) else { return false };
    let (mut written, mut excluded) = (0usize, 0usize);
    let mut largest = 0u64;
    for &(id, ts_ns) in nearly {
        next.hint();
        excluded += usize::from(ts_ns == EXCLUDED);
        if written == 0 || id > largest {
            if let Some(slot) = dst.get_mut(written) {
                *slot = (id, ts_ns);
            }
            written += 1;
            largest = id;
            continue;
        }
        // Out of order or repeated: each larger pair written so far moves up one place until
        // its place is found. A pair is out of order only within its sub-bucket (about one id
        // long), so this mostly moves one or two pairs, and moving them in registers is cheaper
        // than a call to move a short slice (`copy_within` compiled to `memmove`: BENCHMARKS
        // "W17 (twenty-first session)"). On a repeat the moved pairs are left as they are: the
        // caller's fallback writes the bucket into `out` again from its start.
        let mut j = written;
        while let Some(&p) = j.checked_sub(1).and_then(|i| dst.get(i)) {
            if p.0 < id {
                break;
            }
            if p.0 == id {
                return false;
            }
            match dst.get_mut(j) {
                Some(slot) => *slot = p,
                None => return false,
            }
            j -= 1;
        }
        match dst.get_mut(j) {
            Some(slot) => *slot = (id, ts_ns),
            None => return false,
        }
        written += 1;
    }
    collapsed.distinct += written;
    collapsed.excluded += excluded;
    true
}

/// Where the bucket after the one being finished lies, hinted once per pair read or written
/// (its first pass then finds it in cache); never dereferenced (a prefetch does not fault, not
/// even past the end or at null). Two kinds, so the common one (one worker's region, or the
/// scattered output) keeps its loop as lean as a bare pointer's. A bucket that falls back to
/// sort-then-collapse hints on from where its first pass stopped: wasted hints, only in the
/// rare bucket with a repeated id.
trait Ahead {
    fn hint(&mut self);
}

/// The pairs from a pointer on (null after the last bucket: the hints go nowhere).
struct One {
    at: *const (u64, u64),
    offset: usize,
}

impl One {
    fn at(at: *const (u64, u64)) -> Self {
        One { at, offset: 0 }
    }
}

impl Ahead for One {
    #[inline(always)]
    fn hint(&mut self) {
        prefetch(self.at.wrapping_add(self.offset).cast());
        self.offset += 1;
    }
}

/// A group of several workers' regions, hinted part by part in turn: of k parts each gets one
/// hint per k pairs of the bucket being finished, about its own length where the workers' parts
/// are even (RSS spreads ids evenly; an uneven one is hinted short or past its end). Hinting
/// only the first part left the other workers' regions to be fetched as the next bucket's
/// counting pass reached them (BENCHMARKS "W17 (twenty-first session)").
struct Parts<'a> {
    parts: &'a [&'a [(u64, u64)]],
    part: usize,
    offset: usize,
}

impl Ahead for Parts<'_> {
    #[inline(always)]
    fn hint(&mut self) {
        if let Some(p) = self.parts.get(self.part) {
            prefetch(p.as_ptr().wrapping_add(self.offset).cast());
        }
        self.part += 1;
        if self.part >= self.parts.len() {
            self.part = 0;
            self.offset += 1;
        }
    }
}

/// A counting sort's counter: `usize` at the top level, `u32` in a bucket (half the cache).
/// The caller keeps every count below the type's maximum.
trait Counter: Copy + Ord + Default {
    fn index(self) -> usize;
    fn bump(&mut self);
    fn add(&mut self, other: Self);
}

impl Counter for usize {
    #[inline(always)]
    fn index(self) -> usize {
        self
    }
    #[inline(always)]
    fn bump(&mut self) {
        *self += 1;
    }
    #[inline(always)]
    fn add(&mut self, other: Self) {
        *self += other;
    }
}

impl Counter for u32 {
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
    #[inline(always)]
    fn bump(&mut self) {
        *self = self.wrapping_add(1);
    }
    #[inline(always)]
    fn add(&mut self, other: Self) {
        *self = self.wrapping_add(other);
    }
}

/// Adds `src`'s pairs with key k to `ends[k + 1]`.
fn add_counts<C: Counter>(src: &[(u64, u64)], ends: &mut [C], key: impl Fn(u64) -> usize) {
    for &(id, _) in src {
        if let Some(c) = ends.get_mut(key(id) + 1) {
            c.bump();
        }
    }
}

/// Turns counts (`ends[k + 1]`: pairs with key k) into where each key starts (`ends[k]`).
fn to_starts<C: Counter>(ends: &mut [C]) {
    for k in 1..ends.len() {
        let prev = ends[k - 1];
        ends[k].add(prev);
    }
}

/// Pairs ahead of the one being placed that the top level hints in its source (8 lines).
const SOURCE_AHEAD: usize = 32;
/// Pairs past a stream's write position that the top level hints (its next line).
const STREAM_AHEAD: usize = 4;

/// Places `src`'s pairs at the starts `ends` holds ([`to_starts`]), advancing each key's start
/// past its pairs: after every part of the input, `ends[k]` is where key k ends. `HINTED` also
/// hints the source [`SOURCE_AHEAD`] pairs ahead (past a part's end too: a hint is never
/// dereferenced) and each stream's line [`STREAM_AHEAD`] pairs past where it writes. The top
/// level reads a DRAM-sized log while it writes 256 streams into DRAM-sized memory, more
/// streams than a hardware prefetcher follows: without the hints, every fourth write to a
/// stream waited for its line. A stream reaches its hinted line on average a thousand pairs
/// later.
fn place<const HINTED: bool, C: Counter>(
    src: &[(u64, u64)],
    dst: &mut [(u64, u64)],
    ends: &mut [C],
    key: impl Fn(u64) -> usize,
) {
    for (i, &pair) in src.iter().enumerate() {
        if HINTED {
            prefetch(src.as_ptr().wrapping_add(i + SOURCE_AHEAD).cast());
        }
        if let Some(c) = ends.get_mut(key(pair.0)) {
            if HINTED {
                prefetch(dst.as_ptr().wrapping_add(c.index() + STREAM_AHEAD).cast());
            }
            if let Some(slot) = dst.get_mut(c.index()) {
                *slot = pair;
            }
            c.bump();
        }
    }
}

#[inline(always)]
fn top_byte(id: u64) -> usize {
    (id >> 56) as usize
}

/// Insertion sort by id. The inputs here are nearly sorted (most pairs are already after
/// their predecessor), so the largest id so far stays in a register and a pair in order is
/// neither stored nor read back: only one out of order is shifted into place.
fn insertion_sort(v: &mut [(u64, u64)]) {
    let Some(&first) = v.first() else { return };
    let mut largest = first.0;
    for i in 1..v.len() {
        let x = v[i];
        if x.0 >= largest {
            largest = x.0;
            continue;
        }
        // v[i - 1] holds `largest` > x: shift until x's place (the largest stays largest).
        let mut j = i;
        while j > 0 && v[j - 1].0 > x.0 {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::hash::mix64;

    /// Checks `sort_unique` counting for itself, given the log's top-byte counts, and given
    /// counts that do not add up (ignored).
    fn check(src: &[(u64, u64)]) {
        let mut counts = [0u32; TOP_BUCKETS];
        for &(id, _) in src {
            counts[(id >> 56) as usize] += 1;
        }
        let mut short = counts;
        short[0] = short[0].wrapping_add(1);
        for given in [None, Some(&counts), Some(&short)] {
            check_given(src, given);
            check_parts(src, given);
        }
        check_regions(src);
    }

    /// Checks `sort_unique_regions` of `src` split by top byte, over one and three ways (each
    /// pair in the way of its index), against `sort_unique` of the whole.
    fn check_regions(src: &[(u64, u64)]) {
        let whole = run(&|s, out, f| s.sort_unique(src, None, out, f));
        for ways in [1usize, 3] {
            let mut split: Vec<Vec<(u64, u64)>> = vec![Vec::new(); TOP_BUCKETS * ways];
            for (i, &p) in src.iter().enumerate() {
                split[top_byte(p.0) * ways + i % ways].push(p);
            }
            let regions: Vec<&[(u64, u64)]> = split.iter().map(|v| v.as_slice()).collect();
            let got = run(&|s, out, f| s.sort_unique_regions(&regions, ways, out, f));
            assert_eq!(got, whole, "{} pairs in {ways} ways", src.len());
            assert_eq!(by_chunks(&regions, ways), whole, "{} pairs in {ways} ways, by chunks", src.len());
        }
    }

    /// `sort_unique_groups` of uneven runs of groups, each with its own sorter and output (as
    /// separate threads would), the outputs concatenated in group order and the counts added:
    /// in [`run`]'s form, to compare with the whole sort.
    fn by_chunks(regions: &[&[(u64, u64)]], ways: usize) -> Sorted {
        let bounds = [0usize, 1, 2, 37, 128, 255, TOP_BUCKETS];
        let (mut total, mut pairs, mut repeats) = (Collapsed::default(), Vec::new(), Vec::new());
        for w in bounds.windows(2) {
            let chunk = &regions[w[0] * ways..w[1] * ways];
            let n: usize = chunk.iter().map(|p| p.len()).sum();
            let mut out = vec![(0, 0); n];
            let c = Sorter::default().sort_unique_groups(chunk, ways, w[0], &mut out, |id, copies| {
                let mut copies = copies.to_vec();
                copies.sort_unstable();
                repeats.push((id, copies));
            });
            pairs.extend_from_slice(&out[..c.distinct]);
            total.distinct += c.distinct;
            total.excluded += c.excluded;
        }
        repeats.sort_unstable();
        (total, pairs, repeats)
    }

    /// Checks `sort_unique_parts` of `src` cut into parts (one of them empty) against
    /// `sort_unique` of the whole: the same pairs, repeats and counts.
    fn check_parts(src: &[(u64, u64)], top_counts: Option<&[u32; TOP_BUCKETS]>) {
        let n = src.len();
        let parts = [&src[..n / 3], &src[n / 3..n / 3], &src[n / 3..2 * n / 3], &src[2 * n / 3..]];
        let of = |parts: &[&[(u64, u64)]]| run(&|s, out, f| s.sort_unique_parts(parts, top_counts, out, f));
        assert_eq!(of(&parts), of(&[src]), "{n} pairs in parts");
    }

    /// One way of sorting, given a fresh sorter, the output and the repeats' callback.
    type Sort<'a> =
        &'a dyn Fn(&mut Sorter, &mut Vec<(u64, u64)>, &mut dyn FnMut(u64, &[(u64, u64)])) -> Collapsed;

    /// What [`run`] returns.
    type Sorted = (Collapsed, Vec<(u64, u64)>, Vec<(u64, Vec<(u64, u64)>)>);

    /// What `sort` leaves: its counts, the distinct pairs, and each repeated id with its copies
    /// (both in a canonical order), to compare two ways of sorting one input.
    fn run(sort: Sort<'_>) -> Sorted {
        let mut out = Vec::new();
        let mut repeats = Vec::new();
        let c = sort(&mut Sorter::default(), &mut out, &mut |id, copies| {
            let mut copies = copies.to_vec();
            copies.sort_unstable();
            repeats.push((id, copies));
        });
        out.truncate(c.distinct);
        repeats.sort_unstable();
        (c, out, repeats)
    }

    /// Checks one `sort_unique` against a std sort and a count of each id's copies.
    fn check_given(src: &[(u64, u64)], top_counts: Option<&[u32; TOP_BUCKETS]>) {
        let mut out = Vec::new();
        let mut repeats = Vec::new();
        let c = Sorter::default().sort_unique(src, top_counts, &mut out, |id, copies| {
            assert!(copies.iter().all(|p| p.0 == id));
            repeats.push((id, copies.len()));
        });
        let got = &out[..c.distinct];
        assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "sorted, one pair per id");
        let mut want: Vec<(u64, u64)> = src.to_vec();
        want.sort_unstable();
        let mut copies: Vec<(u64, usize)> = Vec::new();
        let mut pairs: Vec<(u64, u64)> = Vec::new();
        for &(id, ts) in &want {
            match copies.last_mut() {
                Some((last, n)) if *last == id => {
                    *n += 1;
                    if let Some(p) = pairs.last_mut() {
                        p.1 = EXCLUDED;
                    }
                }
                _ => {
                    copies.push((id, 1));
                    pairs.push((id, ts));
                }
            }
        }
        assert_eq!(got, &pairs[..]);
        copies.retain(|&(_, n)| n > 1);
        repeats.sort_unstable();
        assert_eq!(repeats, copies);
        assert_eq!(c.excluded, pairs.iter().filter(|p| p.1 == EXCLUDED).count());
    }

    #[test]
    fn sorts_mixed_ids_of_every_size_with_repeats() {
        for n in [0usize, 1, 2, 47, 48, 49, 300, 5_000, 70_000] {
            let src: Vec<(u64, u64)> = (0..n as u64).map(|i| (mix64(i % 9_000 + 1), i)).collect();
            check(&src);
        }
    }

    #[test]
    fn buckets_sorted_on_their_way_out_and_one_with_a_repeat() {
        // 1 000+ distinct ids per top byte: sub-buckets finished by `insert_collapse`, which
        // shifts the pairs out of order into place in the output. Then one repeat in a single
        // bucket: that bucket (and only it) takes the sort-then-collapse path.
        let mut src: Vec<(u64, u64)> = (1..=300_000u64).map(|i| (mix64(i), i)).collect();
        check(&src);
        src.push((mix64(77), 1));
        src.push((mix64(78), EXCLUDED));
        check(&src);
    }

    #[test]
    fn skewed_ids_still_sort() {
        // The top 22 bits equal: every id in one sub-bucket (the fallback sort); and one top
        // byte with small ids (the insertion sorts).
        let one_sub: Vec<(u64, u64)> =
            (0..3_000u64).map(|i| (0xabcd_ec00_0000_0000 | mix64(i) >> 22, i)).collect();
        check(&one_sub);
        let small: Vec<(u64, u64)> = (0..3_000u64).map(|i| ((3_000 - i) * 7, i)).collect();
        check(&small);
    }

    #[test]
    fn reused_buffers_with_stale_tails_sort_the_new_input_only() {
        let (mut out, mut sorter) = (Vec::new(), Sorter::default());
        let big: Vec<(u64, u64)> = (1..=20_000u64).map(|i| (mix64(i), i)).collect();
        sorter.sort_unique(&big, None, &mut out, |_, _| {});
        let small: Vec<(u64, u64)> = (1..=500u64).map(|i| (mix64(i + 1_000_000), i)).collect();
        let c = sorter.sort_unique(&small, None, &mut out, |_, _| {});
        let mut want = small.clone();
        want.sort_unstable();
        assert_eq!(c, Collapsed { distinct: 500, excluded: 0 });
        assert_eq!(&out[..500], &want[..]);
    }
}
