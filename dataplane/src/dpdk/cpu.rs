//! CPU-level helpers for the hot path: the time-stamp counter and cache prefetch.
//!
//! Compiled with or without the `dpdk` feature (as `crate::cpu`, re-exported by `dpdk`): the
//! pipeline's callers and the RDA merge prefetch without DPDK too. It lives here because its
//! blocks are `unsafe`, which the crate keeps in `src/dpdk/`.

/// Reads the time-stamp counter (what `rte_rdtsc` reads, without the call into C).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no memory effects; every x86-64 CPU DPDK supports has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Asks the CPU to bring the cache line at `ptr` into all cache levels (`rte_prefetch0`).
/// A hint: any address is fine, including an invalid one; nothing is dereferenced.
#[inline(always)]
pub fn prefetch(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 never faults and has no architectural effect besides caching.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(ptr.cast::<i8>())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}
