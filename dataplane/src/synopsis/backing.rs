//! Backing a reservation with memory before the hot path needs it.
//!
//! A `Vec::with_capacity` reserves address space only: the kernel backs each page at its first
//! write, with a page fault that zeroes it (2 MiB at a time where transparent huge pages
//! apply). The logs that workers append to (RDA's packet log, LDS's flow log) are reserved for
//! a whole epoch at line rate, so in each ring buffer's first epoch those faults came on the
//! data path, a zeroed huge page at a time, while the NIC's rx ring filled. Writing one
//! element per page of the spare capacity when the worker builds its ring takes them there
//! instead, on the worker's own lcore (so the pages are also NUMA-local to it).

/// Smallest page size: one write per page of it backs the whole range.
const PAGE_BYTES: usize = 4096;

/// Writes `fill` into one element per page of `v`'s spare capacity, so that every page of the
/// reservation is backed. `v`'s length and contents are unchanged.
pub fn back_spare_capacity<T: Copy>(v: &mut Vec<T>, fill: T) {
    let step = (PAGE_BYTES / std::mem::size_of::<T>().max(1)).max(1);
    let spare = v.spare_capacity_mut();
    let last = spare.len().checked_sub(1);
    for slot in spare.iter_mut().step_by(step) {
        slot.write(fill);
    }
    // The page holding the end of the reservation, which the stride may have stepped over.
    if let Some(slot) = last.and_then(|i| spare.get_mut(i)) {
        slot.write(fill);
    }
    // Nothing reads these writes back; keep the compiler from deciding they are dead.
    std::hint::black_box(spare);
}

/// Backs every page of `v` by writing one element per page back with the value it holds: for
/// an allocation the allocator zeroed lazily (`vec![0; n]`), whose pages are backed only at
/// their first write. The contents are unchanged.
pub fn back_slice<T: Copy>(v: &mut [T]) {
    let step = (PAGE_BYTES / std::mem::size_of::<T>().max(1)).max(1);
    // The page holding the end too, which the stride may step over.
    let last = v.len().checked_sub(1);
    for i in (0..v.len()).step_by(step).chain(last) {
        if let Some(x) = v.get_mut(i) {
            // Opaque to the compiler, so the store is not dropped as writing what is there.
            *x = std::hint::black_box(*x);
        }
    }
}

/// Minor page faults of the calling thread so far (`/proc/thread-self/stat`, field 10): what
/// the tests count to show that a backed reservation takes none.
#[cfg(test)]
pub(crate) fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("procfs");
    // The command name (field 2) may hold spaces; the fields after its ')' are fixed.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).expect("stat line");
    after.split_whitespace().nth(7).and_then(|f| f.parse().ok()).expect("minflt")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends `n` entries and returns the minor faults the appends took.
    fn faults_of_filling(v: &mut Vec<(u64, u64)>, n: usize) -> u64 {
        let before = minor_faults();
        for i in 0..n as u64 {
            v.push((i, i));
        }
        minor_faults() - before
    }

    #[test]
    fn a_backed_reservation_takes_no_page_fault_when_filled() {
        // 64 MiB: thousands of 4-KiB pages, or 32 huge pages, either way far above noise.
        let n = 4 << 20;
        let mut lazy: Vec<(u64, u64)> = Vec::with_capacity(n);
        let lazy_faults = faults_of_filling(&mut lazy, n);
        let mut backed: Vec<(u64, u64)> = Vec::with_capacity(n);
        back_spare_capacity(&mut backed, (0, 0));
        assert!(backed.is_empty(), "backing changes no length");
        let backed_faults = faults_of_filling(&mut backed, n);
        assert!(
            lazy_faults >= 16,
            "the lazy reservation faulted only {lazy_faults} times: is the test measuring?"
        );
        assert!(
            backed_faults <= 2,
            "{backed_faults} page faults filling a backed reservation (lazy: {lazy_faults})"
        );
        assert_eq!(backed.get(n - 1), Some(&((n - 1) as u64, (n - 1) as u64)));
    }

    #[test]
    fn a_backed_zeroed_allocation_takes_no_page_fault_when_written_and_keeps_its_contents() {
        let n = 4 << 20;
        let write_all = |v: &mut [(u64, u64)]| {
            let before = minor_faults();
            for (i, x) in v.iter_mut().enumerate() {
                *x = (i as u64, 1);
            }
            // Read back, so an optimiser cannot drop the writes to a vector nothing reads.
            std::hint::black_box(&*v);
            minor_faults() - before
        };
        let mut lazy = vec![(0u64, 0u64); n];
        let lazy_faults = write_all(&mut lazy);
        let mut backed = vec![(0u64, 0u64); n];
        backed[5] = (5, 5);
        backed[n - 1] = (9, 9);
        back_slice(&mut backed);
        assert_eq!((backed[5], backed[n - 1], backed[4096]), ((5, 5), (9, 9), (0, 0)), "contents kept");
        let backed_faults = write_all(&mut backed);
        assert!(
            lazy_faults >= 16,
            "the lazy allocation faulted only {lazy_faults} times: is the test measuring?"
        );
        assert!(
            backed_faults <= 2,
            "{backed_faults} page faults writing a backed allocation (lazy: {lazy_faults})"
        );
        let mut empty: [u8; 0] = [];
        back_slice(&mut empty);
    }

    #[test]
    fn backing_keeps_length_and_contents_and_takes_any_capacity() {
        let mut v = vec![7u8, 8, 9];
        v.reserve(10_000);
        back_spare_capacity(&mut v, 0);
        assert_eq!(v, [7, 8, 9]);
        let mut empty: Vec<u64> = Vec::new();
        back_spare_capacity(&mut empty, 1);
        assert!(empty.is_empty());
        let mut zst: Vec<()> = Vec::with_capacity(5);
        back_spare_capacity(&mut zst, ());
        assert!(zst.is_empty());
    }
}
