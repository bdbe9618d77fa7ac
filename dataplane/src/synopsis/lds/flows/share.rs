//! Gathering and encoding an epoch's flow logs on several threads at once (issue 24: "move
//! the per-packet part of the control side onto the workers").
//!
//! What the harvest does with the workers' flow logs ([`FlowSet::gather`], then
//! [`FlowSet::encode`] when the epoch is published) is a copy of every entry into the
//! accumulator's list and an encoding of each entry into the body: about 12 ns per flow, which
//! at a fifth of a flow per packet was most of the control thread's LDS time (BENCHMARKS.md,
//! W17 thirtieth session). Both split into independent chunks of [`CHUNK_FLOWS`] entries of one
//! worker's list: chunk i's entries go to the place in the accumulator's list where the chunks
//! before it end (the gathered order), and its encoding to a byte region of its own, sized for
//! the longest entries, so that no chunk needs to know how long the others' encodings are. The
//! accumulator's [`FlowSet::encode`] then writes the regions' used parts in order: the bytes
//! the control thread would have written.
//!
//! The sequence, per epoch and direction:
//! 1. the control thread lends the job the shards' sets, the accumulator's list and its byte
//!    buffer ([`FlowSet::lend_lists`]), after joining the sets' counters;
//! 2. any thread holding the job (through an `Arc`) calls [`FlowListJob::help`], one chunk per
//!    call;
//! 3. the control thread, holding the job alone again, does the chunks nobody took and takes
//!    everything back ([`FlowSet::take_back_lists`]).
//!
//! The result equals [`FlowSet::gather`]'s, with the body [`FlowSet::encode`] would write
//! (tests). Where gathering would refuse (another capacity, more entries than the capacity) the
//! sets are not lent, and the harvest merges them as before.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam::utils::CachePadded;

use super::{FlowEntry, FlowSet, MAX_ENTRY_BYTES, encode_entry};
use crate::claim::{ClaimSlices, FillSlices};
use crate::synopsis::board::{Help, SharedJob};

/// Entries per chunk: one chunk stalls its thread for a copy and an encoding of this many
/// entries (about 50 µs here: BENCHMARKS "W17 (thirtieth session)").
pub const CHUNK_FLOWS: usize = 4096;

/// One chunk: which lent set, which of its entries, and where its encoding starts.
#[derive(Clone, Debug)]
struct Chunk {
    set: usize,
    entries: Range<usize>,
}

/// Counts of one [`FlowSet::take_back_lists`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedLists {
    /// Chunks other threads did.
    pub by_helpers: usize,
    /// Chunks the control thread did (nobody took them in time).
    pub by_control: usize,
}

/// An epoch's flow lists, shared: the shards' sets, the accumulator's list and byte buffer
/// being written, and each chunk's encoded length. Reused from epoch to epoch (its buffers are
/// kept).
#[derive(Debug, Default)]
pub struct FlowListJob {
    sets: Vec<FlowSet>,
    chunks: Vec<Chunk>,
    /// The accumulator's list, one range per chunk.
    entries: FillSlices<FlowEntry>,
    /// The accumulator's encoding buffer, [`MAX_ENTRY_BYTES`] per entry of each chunk.
    bytes: ClaimSlices<u8>,
    /// Bytes each chunk's encoding took (`usize::MAX` while not done).
    written: Vec<AtomicUsize>,
    next: CachePadded<AtomicUsize>,
    /// True between lending and taking back.
    open: bool,
}

const NOT_DONE: usize = usize::MAX;

impl FlowListJob {
    /// Copies and encodes the next chunk nobody has taken; false when every chunk is taken.
    /// Any thread; never allocates, locks or blocks.
    pub fn help(&self) -> bool {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        i < self.chunks.len() && self.do_chunk(i)
    }

    /// Chunk `i`, if nobody claimed it: its entries into the list, their encoding into its
    /// region.
    fn do_chunk(&self, i: usize) -> bool {
        let Some(chunk) = self.chunks.get(i) else { return false };
        let src =
            self.sets.get(chunk.set).and_then(|s| s.entries.get(chunk.entries.clone())).unwrap_or_default();
        let (Some(out), Some(written)) = (self.bytes.claim(i), self.written.get(i)) else { return false };
        self.entries.fill(i, src);
        let mut at = 0;
        for e in src {
            // The region holds MAX_ENTRY_BYTES per entry, so the next one always fits.
            let Some(slot) = out
                .get_mut(at..at + MAX_ENTRY_BYTES)
                .and_then(|s| <&mut [u8; MAX_ENTRY_BYTES]>::try_from(s).ok())
            else {
                break;
            };
            at += encode_entry(e, slot);
        }
        written.store(at, Ordering::Release);
        true
    }

    /// True while lent sets wait to be taken back.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// True when no chunk is left for [`Self::help`] to take.
    pub fn is_taken(&self) -> bool {
        self.next.load(Ordering::Relaxed) >= self.chunks.len()
    }
}

impl SharedJob for FlowListJob {
    type Scratch = ();
    fn help(&self, _: &mut ()) -> Help {
        if FlowListJob::help(self) { Help::Filed } else { Help::NoneLeft }
    }
    fn is_taken(&self) -> bool {
        FlowListJob::is_taken(self)
    }
}

impl FlowSet {
    /// Step 1 of a shared gathering ([module docs](self)): `self`, the accumulator, is cleared
    /// and takes `sets`' counters and bitmaps as [`FlowSet::gather`] does, and lends their
    /// lists, its own list and its encoding buffer to `job`. False, with nothing changed,
    /// where gathering would refuse (a set of another capacity, more entries than `self` holds),
    /// nothing was recorded, or `job` is still open: the caller then gathers or merges as
    /// before.
    pub fn lend_lists(&mut self, sets: &mut [&mut FlowSet], job: &mut FlowListJob) -> bool {
        let total = sets.iter().try_fold(0usize, |n, s| {
            (s.capacity == self.capacity).then(|| n.saturating_add(s.entries.len()))
        });
        let Some(total) = total.filter(|&n| n > 0 && n <= self.capacity && !job.open) else { return false };
        self.clear();
        job.chunks.clear();
        for (k, s) in sets.iter().enumerate() {
            let n = s.entries.len();
            job.chunks.extend(
                (0..n).step_by(CHUNK_FLOWS).map(|a| Chunk { set: k, entries: a..(a + CHUNK_FLOWS).min(n) }),
            );
        }
        for s in sets.iter() {
            self.unrecorded_packets = self.unrecorded_packets.saturating_add(s.unrecorded_packets);
            for (a, b) in self.unrecorded_bitmap.iter_mut().zip(&s.unrecorded_bitmap) {
                *a |= *b;
            }
        }
        job.sets.resize_with(sets.len(), || FlowSet::new(0));
        job.sets.truncate(sets.len());
        for (s, l) in sets.iter_mut().zip(job.sets.iter_mut()) {
            std::mem::swap(*s, l);
        }
        job.entries.lend(std::mem::take(&mut self.entries), job.chunks.iter().map(|c| c.entries.len()));
        let need = total * MAX_ENTRY_BYTES;
        let bytes = job.bytes.buffer();
        *bytes = std::mem::take(&mut self.encoded.bytes);
        if bytes.len() < need {
            // Zeroed pages from the allocator: the helpers' writes fault them in, not a fill
            // here on the control thread.
            *bytes = vec![0u8; need];
        }
        let mut at = 0;
        let regions = job.chunks.iter().map(|c| {
            let r = at..at + c.entries.len() * MAX_ENTRY_BYTES;
            at = r.end;
            r
        });
        // Cannot fail: the regions rise to `need`, within the buffer.
        let _ = job.bytes.set_ranges(regions.collect::<Vec<_>>());
        job.written.truncate(job.chunks.len());
        job.written.iter_mut().for_each(|w| *w.get_mut() = NOT_DONE);
        job.written.resize_with(job.chunks.len(), || AtomicUsize::new(NOT_DONE));
        *job.next.get_mut() = 0;
        job.open = true;
        true
    }

    /// Step 3 of a shared gathering ([module docs](self)), once no other thread holds `job`:
    /// does the chunks nobody did, installs the gathered list and its encoding in `self`, and
    /// gives each set its list back (`sets` in the order they were lent; they are then cleared,
    /// as the harvest's reset would). A job not open changes nothing.
    pub fn take_back_lists(&mut self, sets: &mut [&mut FlowSet], job: &mut FlowListJob) -> SharedLists {
        let mut shared = SharedLists::default();
        if !job.open {
            return shared;
        }
        job.open = false;
        for i in 0..job.chunks.len() {
            let done = job.written.get_mut(i).is_some_and(|w| *w.get_mut() != NOT_DONE);
            if done {
                shared.by_helpers += 1;
            } else {
                shared.by_control += 1;
                job.do_chunk(i);
            }
        }
        let (entries, whole) = job.entries.take();
        self.entries = entries;
        self.encoded.pieces.clear();
        for (r, w) in job.bytes.ranges().iter().zip(job.written.iter_mut()) {
            let n = (*w.get_mut()).min(r.len());
            self.encoded.pieces.push(r.start..r.start + n);
        }
        self.encoded.bytes = std::mem::take(job.bytes.buffer());
        for (s, l) in sets.iter_mut().zip(job.sets.iter_mut()) {
            std::mem::swap(*s, l);
        }
        if whole {
            self.encoded.valid = true;
            self.indexed = self.entries.is_empty();
        } else {
            // Not reached (every chunk was done above); the sets are back, so gather them.
            let mut again: Vec<&mut FlowSet> = sets.iter_mut().map(|s| &mut **s).collect();
            if !self.gather(&mut again) {
                self.clear();
            }
        }
        for s in sets.iter_mut() {
            s.clear();
        }
        shared
    }
}

#[cfg(test)]
mod tests;
