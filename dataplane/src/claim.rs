//! A buffer cut into fixed, disjoint ranges that threads may each claim once and write through
//! `&mut`, with no lock: how several threads write their parts of one output in place (issue
//! 24: the workers each sort a share of an epoch's RDA logs into the one run the cache keeps).
//!
//! Why not `split_at_mut`: the threads that write are long-lived workers, not scoped threads,
//! so the parts cannot be borrows handed out by the owner; they are claimed through a shared
//! reference (`&self`, reached through an `Arc`) instead. Soundness rests on two rules the type
//! enforces: a range is handed out at most once ([`ClaimSlices::claim`] swaps its flag), and the
//! buffer and the ranges change only through `&mut self`, which no claimed slice can outlive
//! (a claimed slice borrows `&self`).

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Why [`ClaimSlices::set_ranges`] refused a set of ranges.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// A range ends before it starts, overlaps the one before it or ends past the buffer.
    #[error("range {index} ({start}..{end}) is out of order or past the buffer of {len}")]
    Invalid {
        /// Which range.
        index: usize,
        /// Its start.
        start: usize,
        /// Its end.
        end: usize,
        /// The buffer's length.
        len: usize,
    },
}

/// A `Vec<T>` and disjoint ranges of it, each claimable once as `&mut [T]` through `&self`.
pub struct ClaimSlices<T> {
    /// Owns the elements; its pointer, length and capacity change only through `&mut self`.
    buf: UnsafeCell<Vec<T>>,
    /// The buffer's first element, taken by `set_ranges` (through `&mut`): a claim derives its
    /// slice from this pointer, never from a reference to the Vec, so claims made at once on
    /// several threads create no aliasing reference to anything.
    base: *mut T,
    ranges: Vec<Range<usize>>,
    claimed: Vec<AtomicBool>,
}

// SAFETY: a claim hands one thread a `&mut [T]` of a range no other claim covers, so sharing
// the value shares no element between threads; `T: Send` lets the element move to the thread
// that writes it. `base` points into the owned buffer, so the value may move between threads
// as a `Vec<T>` does.
#[allow(unsafe_code)]
unsafe impl<T: Send> Sync for ClaimSlices<T> {}
// SAFETY: the value owns its elements (the Vec) and `base` points only into them: moving it to
// another thread moves the elements, as moving the Vec would.
#[allow(unsafe_code)]
unsafe impl<T: Send> Send for ClaimSlices<T> {}

impl<T> Default for ClaimSlices<T> {
    fn default() -> Self {
        Self {
            buf: UnsafeCell::new(Vec::new()),
            base: std::ptr::null_mut(),
            ranges: Vec::new(),
            claimed: Vec::new(),
        }
    }
}

impl<T> fmt::Debug for ClaimSlices<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimSlices").field("ranges", &self.ranges).finish_non_exhaustive()
    }
}

impl<T> ClaimSlices<T> {
    /// The buffer, for the owner to fill, resize or take back: no range is claimed while the
    /// owner holds this (`&mut self`). The ranges are dropped (the buffer may move): cut it
    /// again with [`Self::set_ranges`].
    pub fn buffer(&mut self) -> &mut Vec<T> {
        self.ranges.clear();
        self.claimed.clear();
        self.base = std::ptr::null_mut();
        self.buf.get_mut()
    }

    /// The elements, ranges and claims kept (for the owner to read what the claims wrote).
    pub fn elements(&mut self) -> &mut [T] {
        self.buf.get_mut()
    }

    /// Cuts the buffer into `ranges` (each at or after the end of the one before, within the
    /// buffer), none of them claimed. On an error the value has no ranges.
    pub fn set_ranges(&mut self, ranges: impl IntoIterator<Item = Range<usize>>) -> Result<(), RangeError> {
        let len = self.buf.get_mut().len();
        self.base = self.buf.get_mut().as_mut_ptr();
        self.ranges.clear();
        let mut end = 0;
        for (index, r) in ranges.into_iter().enumerate() {
            if r.start < end || r.end < r.start || r.end > len {
                self.ranges.clear();
                self.claimed.clear();
                return Err(RangeError::Invalid { index, start: r.start, end: r.end, len });
            }
            end = r.end;
            self.ranges.push(r);
        }
        self.claimed.truncate(self.ranges.len());
        self.claimed.iter_mut().for_each(|c| *c.get_mut() = false);
        self.claimed.resize_with(self.ranges.len(), || AtomicBool::new(false));
        Ok(())
    }

    /// The ranges.
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// Range `i` of the buffer, the first time it is asked for; `None` afterwards or past the
    /// last range.
    // A `&mut` from `&self` is the point of the type: the claim flag makes it unique.
    #[allow(clippy::mut_from_ref)]
    pub fn claim(&self, i: usize) -> Option<&mut [T]> {
        let r = self.ranges.get(i)?;
        if self.claimed.get(i)?.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: `set_ranges` took `base` from the buffer and checked that range i lies
        // within it and overlaps no other range; the buffer cannot move or shrink while `&self`
        // exists (only `&mut self` reaches it, and `buffer()` drops the ranges). The flag just
        // swapped says no earlier claim took range i, so this is the only reference to these
        // elements until `&mut self` (which no claim outlives) resets the flags.
        #[allow(unsafe_code)]
        unsafe {
            Some(std::slice::from_raw_parts_mut(self.base.add(r.start), r.end - r.start))
        }
    }

    /// True once range `i` has been claimed (or when there is no range `i`).
    pub fn is_claimed(&self, i: usize) -> bool {
        self.claimed.get(i).is_none_or(|c| c.load(Ordering::Acquire))
    }
}

/// A `Vec<T>`'s allocation lent out as disjoint ranges not yet written, each filled once
/// through `&self` by whichever thread claims it, then given back as a `Vec<T>` only when every
/// range was filled (issue 24: the workers copy the shards' LDS flow entries into the
/// accumulator's list, whose reservation is already there, without the control thread first
/// writing a blank into every slot, which would cost it as much as the copy).
pub struct FillSlices<T> {
    /// The lent allocation; elements past a filled range's end are never read.
    buf: UnsafeCell<Vec<MaybeUninit<T>>>,
    /// The buffer's first element, taken by `lend` (see [`ClaimSlices`]'s `base`).
    base: *mut MaybeUninit<T>,
    /// Contiguous from 0: range i ends where range i + 1 starts.
    ranges: Vec<Range<usize>>,
    /// Per range: 0 open, [`CLAIMED`] while being written, [`FILLED`] once written whole.
    state: Vec<AtomicU8>,
}

const CLAIMED: u8 = 1;
const FILLED: u8 = 2;

// SAFETY: as for `ClaimSlices`: a range is written by the one thread whose swap claimed it, so
// sharing the value shares no element between threads; `T: Send` lets elements move.
#[allow(unsafe_code)]
unsafe impl<T: Send> Sync for FillSlices<T> {}
// SAFETY: the value owns its allocation and `base` points only into it.
#[allow(unsafe_code)]
unsafe impl<T: Send> Send for FillSlices<T> {}

impl<T> Default for FillSlices<T> {
    fn default() -> Self {
        Self {
            buf: UnsafeCell::new(Vec::new()),
            base: std::ptr::null_mut(),
            ranges: Vec::new(),
            state: Vec::new(),
        }
    }
}

impl<T> fmt::Debug for FillSlices<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FillSlices").field("ranges", &self.ranges).finish_non_exhaustive()
    }
}

impl<T: Copy> FillSlices<T> {
    /// Lends `v`'s allocation (its elements dropped: `T: Copy` has no drop) for ranges of
    /// `lens` elements, one after another from 0, reserving more room only where `v` has too
    /// little (the ranges stop where their total would overflow). Whatever was lent before and
    /// not taken back is dropped.
    pub fn lend(&mut self, v: Vec<T>, lens: impl IntoIterator<Item = usize>) {
        // Nothing stays fillable while this runs: a panic below (in `lens`, or a capacity
        // overflow) must not leave ranges that reach past the old buffer.
        self.ranges.clear();
        self.state.clear();
        self.base = std::ptr::null_mut();
        let mut v = std::mem::ManuallyDrop::new(v);
        let (ptr, cap) = (v.as_mut_ptr(), v.capacity());
        // SAFETY: the pointer and capacity are `v`'s own allocation (which `ManuallyDrop` keeps
        // from being freed twice), `MaybeUninit<T>` has `T`'s size and alignment, and length 0
        // claims no element initialised.
        #[allow(unsafe_code)]
        let mut lent = unsafe { Vec::from_raw_parts(ptr.cast::<MaybeUninit<T>>(), 0, cap) };
        let mut ranges = std::mem::take(&mut self.ranges);
        let mut end = 0usize;
        for n in lens {
            let Some(next) = end.checked_add(n) else { break };
            ranges.push(end..next);
            end = next;
        }
        // Writes no element: room for the ranges, uninitialised.
        lent.reserve(end);
        lent.resize_with(end, MaybeUninit::uninit);
        *self.buf.get_mut() = lent;
        self.base = self.buf.get_mut().as_mut_ptr();
        self.state.resize_with(ranges.len(), || AtomicU8::new(0));
        self.ranges = ranges;
    }

    /// The ranges lent.
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// Fills range `i` with `src` (which must have its length) if nobody claimed it yet: true
    /// when this call wrote it.
    pub fn fill(&self, i: usize, src: &[T]) -> bool {
        let (Some(r), Some(state)) = (self.ranges.get(i), self.state.get(i)) else { return false };
        if r.len() != src.len()
            || state.compare_exchange(0, CLAIMED, Ordering::AcqRel, Ordering::Acquire).is_err()
        {
            return false;
        }
        // SAFETY: `lend` took `base` from the buffer, whose length covers every range, and the
        // ranges do not overlap; the buffer cannot move while `&self` exists (only `&mut self`
        // reaches it). The exchange just made says no other call writes range i.
        #[allow(unsafe_code)]
        let dst = unsafe { std::slice::from_raw_parts_mut(self.base.add(r.start), r.len()) };
        for (d, s) in dst.iter_mut().zip(src) {
            d.write(*s);
        }
        state.store(FILLED, Ordering::Release);
        true
    }

    /// True once range `i` is filled (or when there is no range `i`).
    pub fn is_filled(&self, i: usize) -> bool {
        self.state.get(i).is_none_or(|s| s.load(Ordering::Acquire) == FILLED)
    }

    /// The allocation back as a `Vec<T>` of every range's elements in order, when every range
    /// is filled; otherwise the allocation back empty (`false`). Nothing stays lent.
    pub fn take(&mut self) -> (Vec<T>, bool) {
        let whole = self.state.iter_mut().all(|s| *s.get_mut() == FILLED);
        let end = self.ranges.last().map_or(0, |r| r.end);
        self.ranges.clear();
        self.state.clear();
        self.base = std::ptr::null_mut();
        let mut lent = std::mem::ManuallyDrop::new(std::mem::take(self.buf.get_mut()));
        let (ptr, cap, len) = (lent.as_mut_ptr(), lent.capacity(), if whole { end } else { 0 });
        // SAFETY: the allocation is the lent Vec's (`ManuallyDrop` keeps it from being freed
        // twice); `MaybeUninit<T>` has `T`'s layout; the ranges cover 0..end one after another,
        // so when every one is filled (each written whole by `fill`) the first `len` elements
        // are initialised; otherwise `len` is 0.
        #[allow(unsafe_code)]
        let v = unsafe { Vec::from_raw_parts(ptr.cast::<T>(), len, cap) };
        (v, whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn each_range_is_claimed_once_and_written_in_place() {
        let mut c = ClaimSlices::default();
        c.buffer().resize(10, 0u32);
        c.set_ranges([0..3, 3..3, 5..10]).unwrap();
        let a = c.claim(0).unwrap();
        let b = c.claim(2).unwrap();
        a.fill(1);
        b.fill(2);
        assert!(c.claim(0).is_none() && c.claim(3).is_none());
        assert_eq!(c.claim(1).map(|s| s.len()), Some(0));
        assert_eq!(c.elements(), &[1, 1, 1, 0, 0, 2, 2, 2, 2, 2]);
        assert!(c.claim(2).is_none(), "reading the elements keeps the claims");
        c.buffer().push(3);
        assert!(c.ranges().is_empty() && c.claim(0).is_none(), "the buffer may have moved");
        c.set_ranges(std::iter::once(0..11)).unwrap();
        assert!(!c.is_claimed(0) && c.claim(0).is_some() && c.is_claimed(0));
    }

    #[test]
    fn overlapping_or_outside_ranges_are_refused() {
        let mut c = ClaimSlices::default();
        c.buffer().resize(4, 0u8);
        assert!(c.set_ranges([0..2, 1..3]).is_err());
        assert!(c.ranges().is_empty() && c.claim(0).is_none());
        assert!(c.set_ranges(std::iter::once(0..5)).is_err());
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = 3..1;
        assert!(c.set_ranges(std::iter::once(backwards)).is_err());
    }

    #[test]
    fn threads_racing_for_the_ranges_write_each_exactly_once() {
        let mut c = ClaimSlices::default();
        c.buffer().resize(1000, 0u64);
        c.set_ranges((0..100).map(|i| i * 10..i * 10 + 10)).unwrap();
        let writes = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 1..=4u64 {
                let (c, writes) = (&c, &writes);
                s.spawn(move || {
                    for i in 0..100 {
                        if let Some(part) = c.claim(i) {
                            part.iter_mut().for_each(|x| *x += t);
                            writes.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(writes.into_inner(), 100);
        assert!(c.elements().iter().all(|&x| (1..=4).contains(&x)));
    }

    #[test]
    fn filled_ranges_come_back_as_the_vec_only_when_all_are_filled() {
        let mut f = FillSlices::default();
        f.lend(Vec::with_capacity(2), [2, 0, 3]);
        assert!(f.fill(0, &[1u32, 2]) && !f.fill(0, &[9, 9]), "a range is filled once");
        assert!(!f.fill(2, &[7]), "a source of another length is refused");
        assert!(!f.is_filled(2) && !f.is_filled(1));
        assert!(f.fill(1, &[]) && f.fill(2, &[3, 4, 5]));
        let (v, whole) = f.take();
        assert!(whole);
        assert_eq!(v, vec![1, 2, 3, 4, 5]);
        let cap = v.capacity();
        f.lend(v, [1, 1]);
        assert!(f.fill(1, &[6]));
        let (v, whole) = f.take();
        assert!(!whole && v.is_empty() && v.capacity() >= cap.min(2), "an unfilled range gives nothing back");
    }

    #[test]
    fn a_lend_that_panics_leaves_nothing_to_fill() {
        let mut f = FillSlices::default();
        f.lend(Vec::<u64>::with_capacity(1), [1]);
        let interrupted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.lend(
                Vec::new(),
                [1000, 1].into_iter().inspect(|&n| assert!(n != 1, "a lens iterator that panics")),
            );
        }));
        assert!(interrupted.is_err());
        assert!(f.ranges().is_empty() && !f.fill(0, &[7; 1000]) && !f.fill(0, &[7]));
        let (v, whole) = f.take();
        assert!(whole && v.is_empty(), "no range: nothing lent");
    }

    #[test]
    fn threads_racing_to_fill_write_each_range_once() {
        let mut f = FillSlices::default();
        f.lend(Vec::new(), std::iter::repeat_n(10, 100));
        let wins = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 1..=4u64 {
                let (f, wins) = (&f, &wins);
                s.spawn(move || {
                    for i in 0..100 {
                        if f.fill(i, &[t; 10]) {
                            wins.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(wins.into_inner(), 100);
        let (v, whole) = f.take();
        assert!(whole && v.len() == 1000 && v.chunks(10).all(|c| c.iter().all(|&x| x == c[0])));
    }
}
