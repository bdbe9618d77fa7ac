//! The appliance's global allocator: the system allocator, except that blocks of at least
//! [`HUGE_PAGE_THRESHOLD_BYTES`] are aligned to 2 MiB and advised for transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`) before anything touches them.
//!
//! Why: the synopses' tables (COLATE's counters, RDA's cache, LDS's flow log, ...) are
//! megabytes each and updated at random, one cache line per packet. With 4 KiB pages nearly
//! every such update also misses the TLB, and in a VM a TLB miss is a two-level page walk; the
//! burst's prefetches then stall on the walks. With `--no-huge` DPDK has no hugepages to give,
//! and the tables are ordinary Rust allocations, so transparent huge pages are how they get
//! 2 MiB pages (BENCHMARKS.md, "Measuring pipeline", has the measured gain). Where THP is
//! disabled the advice is ignored and nothing else changes.
//!
//! Must never be on the per-packet path: it is only reached when a table is allocated (start-up,
//! and the control thread's harvest), and it adds one `madvise` call per large block.

use std::alloc::{GlobalAlloc, Layout, System};

/// Size and alignment of a transparent huge page on x86-64.
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Blocks at least this large get huge-page alignment and advice.
pub const HUGE_PAGE_THRESHOLD_BYTES: usize = 4 << 20;

/// Smallest page size: `madvise` ranges are page-aligned.
const PAGE_BYTES: usize = 4096;

/// See the module docs. Use as `#[global_allocator] static A: HugePageAlloc = HugePageAlloc;`.
#[derive(Clone, Copy, Debug, Default)]
pub struct HugePageAlloc;

impl HugePageAlloc {
    /// The layout a large block is really allocated with (`None`: a small block, as asked).
    #[inline(always)]
    fn large(layout: Layout) -> Option<Layout> {
        if layout.size() < HUGE_PAGE_THRESHOLD_BYTES {
            return None;
        }
        Layout::from_size_align(layout.size(), layout.align().max(HUGE_PAGE_BYTES)).ok()
    }
}

/// Advises the whole pages of `[ptr, ptr + len)` for transparent huge pages. A failure (THP
/// compiled out, an old kernel) only means 4 KiB pages, so the result is ignored.
fn advise_huge(ptr: *mut u8, len: usize) {
    // SAFETY: `ptr` is the 2 MiB-aligned start of a live block of at least `len` bytes that we
    // just allocated; the range is cut to whole pages inside it. MADV_HUGEPAGE changes only how
    // the kernel backs those pages, never their contents or mapping.
    let _ = unsafe { libc::madvise(ptr.cast(), len & !(PAGE_BYTES - 1), libc::MADV_HUGEPAGE) };
}

// SAFETY: every block comes from `System` with a layout whose size is the caller's and whose
// alignment is at least the caller's; `dealloc` and `realloc` recompute the same layout from the
// caller's (same size, same alignment rule), so `System` always frees what it allocated.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match Self::large(layout) {
            // SAFETY: the caller's contract (non-zero size) passes through.
            None => unsafe { System.alloc(layout) },
            Some(big) => {
                // SAFETY: as above; `big` has the same non-zero size and a valid alignment.
                let p = unsafe { System.alloc(big) };
                if !p.is_null() {
                    advise_huge(p, big.size());
                }
                p
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match Self::large(layout) {
            // SAFETY: the caller's contract passes through.
            None => unsafe { System.alloc_zeroed(layout) },
            Some(big) => {
                // SAFETY: as in `alloc`. The zeroing comes after the advice, so these first
                // touches fault in huge pages.
                let p = unsafe { self.alloc(layout) };
                if !p.is_null() {
                    // SAFETY: `p` is a fresh block of `big.size()` writable bytes.
                    unsafe { p.write_bytes(0, big.size()) };
                }
                p
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this caller layout, hence from `System` with the
        // layout recomputed here.
        unsafe { System.dealloc(ptr, Self::large(layout).unwrap_or(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        if Self::large(layout).is_none() && Self::large(new).is_none() {
            // SAFETY: both layouts are the caller's own, as `System` would have seen them.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `new` has a non-zero size (the caller's contract for `new_size`).
        let p = unsafe { self.alloc(new) };
        if !p.is_null() {
            // SAFETY: both blocks are live, distinct and at least this long.
            unsafe { std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size)) };
            // SAFETY: `ptr` was allocated by `self` with `layout`.
            unsafe { self.dealloc(ptr, layout) };
        }
        p
    }
}
