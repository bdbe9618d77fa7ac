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
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

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
}
