//! One sketch cell ⟨s, n, d⟩ (spec §3.1–3.2): 16 bytes, the width the paper's memory figures
//! imply. Holds arithmetic only; never decides anything about flows.

/// Bytes per cell (paper-equivalent memory = 16·R·W).
pub const CELL_BYTES: usize = 16;

/// Count value that marks a cell whose weighted count overflowed: it is never usable.
pub const COUNT_OVERFLOW: u32 = u32::MAX;

/// One cell: wrapping sum of (weighted) timestamps, saturating (weighted) packet count and
/// the XOR of the packets' 32-bit digests.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cell {
    /// Σ w·t in ns, modulo 2^64: the difference of two points' sums is exact as long as the
    /// true Σ w·delay is below 2^63 ns, even when absolute timestamps overflow the sum.
    pub ts_sum_ns: u64,
    /// Σ w, saturating at [`COUNT_OVERFLOW`] (the cell is then unusable, spec §3.2 / P18).
    pub count: u32,
    /// XOR of the packets' digests: equal counts with different packets are caught with
    /// probability 1 − 2^-32.
    pub digest: u32,
}

const _: () = assert!(std::mem::size_of::<Cell>() == CELL_BYTES);

impl Cell {
    /// Folds in one packet of weight `weight` seen at `ts_ns`.
    #[inline(always)]
    pub fn add(&mut self, ts_ns: u64, weight: u32, digest: u32) {
        self.ts_sum_ns = self.ts_sum_ns.wrapping_add(ts_ns.wrapping_mul(u64::from(weight)));
        self.count = self.count.saturating_add(weight);
        self.digest ^= digest;
    }

    /// Adds another shard's cell: exact, because `min(a + b, MAX)` of saturated values equals
    /// the saturated total.
    #[inline]
    pub fn merge(&mut self, other: &Cell) {
        self.ts_sum_ns = self.ts_sum_ns.wrapping_add(other.ts_sum_ns);
        self.count = self.count.saturating_add(other.count);
        self.digest ^= other.digest;
    }

    /// True when the weighted count overflowed.
    pub fn overflowed(&self) -> bool {
        self.count == COUNT_OVERFLOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_add_and_overflow() {
        let mut c = Cell::default();
        c.add(1000, 3, 0xAB);
        assert_eq!(c, Cell { ts_sum_ns: 3000, count: 3, digest: 0xAB });
        c.add(1, u32::MAX - 4, 0xAB);
        assert_eq!(c.count, u32::MAX - 1);
        assert!(!c.overflowed());
        c.add(1, 2, 0);
        assert!(c.overflowed());
        c.add(1, 1, 0);
        assert!(c.overflowed(), "saturation is sticky");
    }

    #[test]
    fn merge_of_saturated_counts_is_the_saturated_total() {
        let mut a = Cell { ts_sum_ns: u64::MAX, count: u32::MAX - 10, digest: 1 };
        let b = Cell { ts_sum_ns: 2, count: 20, digest: 3 };
        a.merge(&b);
        assert_eq!(a, Cell { ts_sum_ns: 1, count: COUNT_OVERFLOW, digest: 2 });
    }
}
