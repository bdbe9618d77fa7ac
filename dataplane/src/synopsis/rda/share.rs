//! Filing an epoch's worker logs on several threads at once (issue 24: "move the per-packet
//! part of the control side onto the workers").
//!
//! Why it can be shared: a group of ids (one top byte, one region of each worker's
//! [`PacketLog`]) sorts on its own, and every copy of a repeated id lies in one group, so the
//! exclusion rule (every copy of an id seen twice leaves the banks) is decided within a group.
//! Chunks of [`CHUNK_GROUPS`] groups are therefore independent: any thread may sort one into
//! its own part of the run, which starts where the pairs of the chunks before it would end if
//! none collapsed ([`Sorter::sort_unique_groups`]). The parts in chunk order are the sorted
//! run; a chunk that collapsed repeats leaves a hole at its end, closed when the run is taken
//! back (a move of the pairs after it: only where an id repeated).
//!
//! What a helping thread must not do is touch the banks or the counters, which the control
//! thread owns: it records each repeated id's copies in the chunk's own room of
//! [`REPEAT_ROOM`] pairs instead, and the control thread takes them out of the banks when it
//! takes the run back. A chunk with more copies than that (crafted traffic) is sorted again by
//! the control thread, which then deletes as it goes. A helper whose [`Sorter`] has no room for
//! a chunk's largest group declines it (a worker must not allocate); the control thread never
//! declines: it sorts every chunk nobody filed.
//!
//! The sequence, per epoch and direction ([`Rda::lend_logs`], [`FilingJob::help`],
//! [`Rda::take_back_logs`]):
//! 1. the control thread lends the job the shards' logs and the accumulator's run buffer, after
//!    adding the shards' counters and banks as `merge_all` does;
//! 2. any thread holding the job (through an `Arc`) calls `help`, one chunk per call;
//! 3. the control thread, holding the job alone again (`&mut`), sorts what is left, takes the
//!    repeats out of the banks, closes the holes, and gives the logs back to their shards.
//!
//! The result equals [`crate::synopsis::Synopsis::merge_all`]'s (tests).

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use crossbeam::utils::CachePadded;

use super::Rda;
use super::log::{PacketLog, TOP_BUCKETS};
use super::sorted::{Collapsed, Sorter};
use crate::claim::ClaimSlices;
pub use crate::synopsis::board::{Board, Help, SharedJob};
use crate::synopsis::{MergeError, Synopsis};

/// Groups (top bytes) per chunk: a helper's stall per chunk is about CHUNK_GROUPS/256 of the
/// epoch's filing (BENCHMARKS "W17 (twenty-ninth session)").
pub const CHUNK_GROUPS: usize = 4;

/// Chunks per epoch.
pub const CHUNKS: usize = TOP_BUCKETS / CHUNK_GROUPS;

/// Shards (workers) a job files at most: a helper gathers a chunk's regions on its stack.
pub const MAX_WAYS: usize = 128;

/// Copies of repeated ids one chunk records for the control thread; past it the control
/// thread sorts the chunk again.
pub const REPEAT_ROOM: usize = 64;

// A chunk's state: 0 (its default) while open, then one of these.
const FILED: u8 = 1;
const DECLINED: u8 = 2;

/// One chunk's outcome, written by the thread that filed it.
#[derive(Debug, Default)]
struct ChunkResult {
    state: AtomicU8,
    distinct: AtomicUsize,
    excluded: AtomicUsize,
    /// Copies of repeated ids recorded in the chunk's room, each id's together.
    copies: AtomicUsize,
    /// More copies than [`REPEAT_ROOM`]: the record is incomplete.
    overflowed: AtomicBool,
}

/// Counts of one [`Rda::take_back_logs`], for the caller's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shared {
    /// Chunks other threads filed.
    pub by_helpers: usize,
    /// Chunks the control thread filed: left open, declined, or sorted again for their repeats.
    pub by_control: usize,
    /// Pairs moved to close the holes repeats left.
    pub moved: usize,
}

/// An epoch's filing, shared: the shards' logs, the run being written and each chunk's outcome.
/// Reused from epoch to epoch (its buffers are kept).
#[derive(Debug, Default)]
pub struct FilingJob {
    logs: Vec<PacketLog>,
    /// The accumulator's run buffer, cut at the chunks' starts.
    run: ClaimSlices<(u64, u64)>,
    /// [`REPEAT_ROOM`] pairs per chunk.
    repeats: ClaimSlices<(u64, u64)>,
    /// Pairs of each chunk's largest group: a helper's sorter must have room for it.
    largest: Vec<usize>,
    results: Vec<ChunkResult>,
    next: CachePadded<AtomicUsize>,
    /// True between lending and taking back.
    open: bool,
}

impl FilingJob {
    /// Files the next chunk nobody has taken, with `sorter`'s buffers (never grown: a chunk
    /// with a group larger than the sorter has room for is declined). Any thread; never
    /// allocates, locks or blocks.
    pub fn help(&self, sorter: &mut Sorter) -> Help {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let (Some(result), Some(&largest)) = (self.results.get(i), self.largest.get(i)) else {
            return Help::NoneLeft;
        };
        if !sorter.has_room(largest) {
            result.state.store(DECLINED, Ordering::Release);
            return Help::Declined;
        }
        let (Some(out), Some(room)) = (self.run.claim(i), self.repeats.claim(i)) else {
            // Not reached: chunk i is claimed only by whoever drew i.
            return Help::Declined;
        };
        let mut recorded = 0usize;
        let mut overflowed = false;
        let c = sort_chunk(&self.logs, i, sorter, out, |_, group| {
            match room.get_mut(recorded..recorded + group.len()) {
                Some(to) => {
                    to.copy_from_slice(group);
                    recorded += group.len();
                }
                None => overflowed = true,
            }
        });
        result.distinct.store(c.distinct, Ordering::Relaxed);
        result.excluded.store(c.excluded, Ordering::Relaxed);
        result.copies.store(recorded, Ordering::Relaxed);
        result.overflowed.store(overflowed, Ordering::Relaxed);
        result.state.store(FILED, Ordering::Release);
        Help::Filed
    }

    /// True while lent logs wait to be filed and taken back.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// True when no chunk is left for [`Self::help`] to take.
    pub fn is_taken(&self) -> bool {
        self.next.load(Ordering::Relaxed) >= self.results.len()
    }
}

/// The board RDA's filing jobs are posted on.
pub type FilingBoard = Board<FilingJob>;

impl SharedJob for FilingJob {
    type Scratch = Sorter;
    fn help(&self, sorter: &mut Sorter) -> Help {
        FilingJob::help(self, sorter)
    }
    fn is_taken(&self) -> bool {
        FilingJob::is_taken(self)
    }
}

/// Sorts chunk `i` of `logs` (group-major: each group's region of every log) into `out`.
fn sort_chunk(
    logs: &[PacketLog],
    i: usize,
    sorter: &mut Sorter,
    out: &mut [(u64, u64)],
    on_repeat: impl FnMut(u64, &[(u64, u64)]),
) -> Collapsed {
    let ways = logs.len();
    let mut parts: [&[(u64, u64)]; CHUNK_GROUPS * MAX_WAYS] = [&[]; CHUNK_GROUPS * MAX_WAYS];
    let first = i * CHUNK_GROUPS;
    for (k, slot) in parts.iter_mut().take(CHUNK_GROUPS * ways).enumerate() {
        if let Some(log) = logs.get(k % ways.max(1)) {
            *slot = log.region(first + k / ways.max(1));
        }
    }
    sorter.sort_unique_groups(
        parts.get(..CHUNK_GROUPS * ways).unwrap_or_default(),
        ways,
        first,
        out,
        on_repeat,
    )
}

impl Rda {
    /// Step 1 of a shared filing (module docs): `self`, an empty accumulator, takes the shards'
    /// counters and banks as [`Synopsis::merge_all`] does and lends their logs, and its run
    /// buffer, to `job`. False, with the shards and `self`'s counters unchanged, where the
    /// shards' logs are not for sharing: none logged, `self` is not empty or has no room for
    /// them all, a shard filed into its cache or used its log's overflow, more than
    /// [`MAX_WAYS`] shards, or a job still open. The caller then merges
    /// as before. An error (a shard of another configuration) changes nothing either.
    pub fn lend_logs(&mut self, shards: &mut [&mut Rda], job: &mut FilingJob) -> Result<bool, MergeError> {
        for s in shards.iter() {
            self.check_same_config(s)?;
        }
        let n: usize = shards.iter().map(|s| s.log.len()).sum();
        let shareable = !job.open
            && shards.len() <= MAX_WAYS
            && self.log.is_empty()
            && n > 0
            && n <= self.log.capacity().min(self.cache.capacity())
            && shards.iter().all(|s| s.cache.is_empty() && s.log.overflow().is_empty());
        let Some(run) = shareable.then(|| self.cache.lend_run(n)).flatten() else {
            return Ok(false);
        };
        // Each chunk starts where the pairs of the chunks before it end.
        let mut starts = Vec::with_capacity(CHUNKS + 1);
        job.largest.clear();
        let mut at = 0;
        for i in 0..CHUNKS {
            starts.push(at);
            let groups = i * CHUNK_GROUPS..(i + 1) * CHUNK_GROUPS;
            let sizes = groups.map(|b| shards.iter().map(|s| s.log.region(b).len()).sum::<usize>());
            let (sum, largest) = sizes.fold((0, 0), |(s, m), x| (s + x, m.max(x)));
            at += sum;
            job.largest.push(largest);
        }
        starts.push(at);
        *job.run.buffer() = run;
        let room = job.repeats.buffer();
        room.resize(CHUNKS * REPEAT_ROOM, (0, 0));
        let cut = job.run.set_ranges(starts.windows(2).map(|w| w[0]..w[1])).and_then(|()| {
            job.repeats.set_ranges((0..CHUNKS).map(|i| i * REPEAT_ROOM..(i + 1) * REPEAT_ROOM))
        });
        if cut.is_err() {
            // Not reached: the starts rise to n, and the lent buffer holds n pairs.
            self.cache.take_back_run(std::mem::take(job.run.buffer()), Collapsed::default());
            return Ok(false);
        }
        for s in shards.iter() {
            self.counters.add(&s.counters);
            if let (Some(a), Some(b)) = (&mut self.banks, &s.banks) {
                a.add(b);
            }
        }
        // Signatures of decoded values cannot be merged exactly; recomputed from the cache.
        self.signature = None;
        job.logs.resize_with(shards.len(), || PacketLog::new(0));
        job.logs.truncate(shards.len());
        for (s, l) in shards.iter_mut().zip(job.logs.iter_mut()) {
            std::mem::swap(&mut s.log, l);
        }
        job.results.resize_with(CHUNKS, ChunkResult::default);
        for r in &mut job.results {
            *r = ChunkResult::default();
        }
        *job.next.get_mut() = 0;
        job.open = true;
        Ok(true)
    }

    /// Step 3 of a shared filing (module docs), once no other thread holds `job`: files the
    /// chunks nobody filed (with the cache's own sorter), takes every recorded repeat out of
    /// the banks, closes the holes, installs the run in the cache and gives each shard its log
    /// back (`shards` in the order they were lent; their logs are then cleared for reuse, as
    /// a harvest's reset would). A job not open changes nothing.
    pub fn take_back_logs(&mut self, shards: &mut [&mut Rda], job: &mut FilingJob) -> Shared {
        let mut shared = Shared::default();
        if !job.open {
            return shared;
        }
        job.open = false;
        let mut sorter = std::mem::take(self.cache.sorter_mut());
        let ranges = job.run.ranges().to_vec();
        let mut total = Collapsed::default();
        let mut write = 0;
        let (banks, counters) = (&mut self.banks, &mut self.counters);
        for (i, range) in ranges.iter().enumerate() {
            let mut r = job.results.get_mut(i);
            let filed = r.as_mut().is_some_and(|r| *r.state.get_mut() == FILED && !*r.overflowed.get_mut());
            let c = match r {
                Some(r) if filed => {
                    shared.by_helpers += 1;
                    // What the sort would have done with each repeated id, id by id: the
                    // record keeps each id's copies together, and neighbouring ids differ.
                    let copies = *r.copies.get_mut();
                    let room = job.repeats.elements().get(i * REPEAT_ROOM..i * REPEAT_ROOM + copies);
                    let mut repeat = Rda::on_repeat(banks, counters);
                    for group in room.unwrap_or_default().chunk_by(|a, b| a.0 == b.0) {
                        if let Some(&(id, _)) = group.first() {
                            repeat(id, group);
                        }
                    }
                    Collapsed { distinct: *r.distinct.get_mut(), excluded: *r.excluded.get_mut() }
                }
                _ => {
                    shared.by_control += 1;
                    let out = job.run.elements().get_mut(range.clone()).unwrap_or_default();
                    sort_chunk(&job.logs, i, &mut sorter, out, Rda::on_repeat(banks, counters))
                }
            };
            let run = job.run.elements();
            if write != range.start {
                run.copy_within(range.start..range.start + c.distinct, write);
                shared.moved += c.distinct;
            }
            write += c.distinct;
            total.distinct += c.distinct;
            total.excluded += c.excluded;
        }
        *self.cache.sorter_mut() = sorter;
        let run = std::mem::take(job.run.buffer());
        self.cache.take_back_run(run, total);
        self.count_cache();
        for (s, l) in shards.iter_mut().zip(job.logs.iter_mut()) {
            std::mem::swap(&mut s.log, l);
            s.log.clear();
        }
        shared
    }
}

#[cfg(test)]
mod tests;
