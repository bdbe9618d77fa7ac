//! Fixed-offset reads out of fixed-size header arrays.
//!
//! Every view in this module checks the buffer length once, in its `new_checked`, and keeps the
//! fixed part of its header as a `&[u8; N]`. Accessors then read constant offsets of that
//! array through these helpers, whose ranges are checked when the crate compiles, so no
//! accessor has a run-time bounds check or a panic path. Nothing here may index a slice.

/// The big-endian `u16` at byte `AT` of a header of `H` bytes.
#[inline(always)]
pub(crate) fn be16<const AT: usize, const H: usize>(h: &[u8; H]) -> u16 {
    const { assert!(AT + 2 <= H) };
    u16::from_be_bytes(bytes::<AT, 2, H>(h))
}

/// The big-endian `u32` at byte `AT` of a header of `H` bytes.
#[inline(always)]
pub(crate) fn be32<const AT: usize, const H: usize>(h: &[u8; H]) -> u32 {
    const { assert!(AT + 4 <= H) };
    u32::from_be_bytes(bytes::<AT, 4, H>(h))
}

/// The `u16` at byte `AT` read little-endian: the wire bytes unchanged, for code that copies
/// them rather than interpreting them.
#[inline(always)]
pub(crate) fn le16<const AT: usize, const H: usize>(h: &[u8; H]) -> u16 {
    const { assert!(AT + 2 <= H) };
    u16::from_le_bytes(bytes::<AT, 2, H>(h))
}

/// The `u32` at byte `AT` read little-endian (wire bytes unchanged).
#[inline(always)]
pub(crate) fn le32<const AT: usize, const H: usize>(h: &[u8; H]) -> u32 {
    const { assert!(AT + 4 <= H) };
    u32::from_le_bytes(bytes::<AT, 4, H>(h))
}

/// The `u64` at byte `AT` read little-endian (wire bytes unchanged).
#[inline(always)]
pub(crate) fn le64<const AT: usize, const H: usize>(h: &[u8; H]) -> u64 {
    const { assert!(AT + 8 <= H) };
    u64::from_le_bytes(bytes::<AT, 8, H>(h))
}

/// A copy of the `N` bytes at `AT` of a header of `H` bytes: one load of `N` bytes.
#[inline(always)]
pub(crate) fn bytes<const AT: usize, const N: usize, const H: usize>(h: &[u8; H]) -> [u8; N] {
    const { assert!(AT + N <= H) };
    // Always `Some` by the assertion above; the compiler removes the fallback.
    h.get(AT..).and_then(|rest| rest.first_chunk::<N>()).copied().unwrap_or([0; N])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_at_offsets() {
        let h = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06];
        assert_eq!(be16::<0, 6>(&h), 0x0102);
        assert_eq!(be16::<4, 6>(&h), 0x0506);
        assert_eq!(be32::<2, 6>(&h), 0x0304_0506);
        assert_eq!(bytes::<1, 3, 6>(&h), [2, 3, 4]);
        let w = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(le64::<1, 9>(&w), 0x0908_0706_0504_0302);
        assert_eq!((le16::<0, 6>(&h), le32::<0, 6>(&h)), (0x0201, 0x0403_0201));
    }
}
