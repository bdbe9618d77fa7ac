//! Fixed-width bit packing of counter values for stored epochs: `count` values of `width` bits
//! (0..=64), least significant bit first, padded to whole bytes.

use crate::synopsis::codec::{DecodeError, Reader, Writer};

/// Bits needed to hold `v` (0 for 0).
pub fn bits_needed(v: u64) -> u8 {
    (64 - v.leading_zeros()) as u8
}

/// Bytes that `count` values of `width` bits take; `None` on arithmetic overflow.
pub fn packed_len(count: usize, width: u8) -> Option<usize> {
    count.checked_mul(width as usize).map(|bits| bits.div_ceil(8))
}

/// Appends `values` packed at `width` bits. Every value must fit (`bits_needed(v) <= width`);
/// the caller picks `width` from the maximum.
pub fn pack(w: &mut Writer<'_>, values: impl Iterator<Item = u64>, width: u8) {
    if width == 0 {
        return;
    }
    let mut acc: u128 = 0;
    let mut bits: u32 = 0;
    let mask: u128 = if width >= 64 { u64::MAX as u128 } else { (1u128 << width) - 1 };
    for v in values {
        acc |= (v as u128 & mask) << bits;
        bits += width as u32;
        while bits >= 8 {
            w.u8(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        w.u8(acc as u8);
    }
}

/// Reads `count` values of `width` bits written by [`pack`] into `out` (cleared first). Checks
/// the whole length before allocating; refuses non-zero padding bits so an encoding is canonical.
pub fn unpack(r: &mut Reader<'_>, count: usize, width: u8, out: &mut Vec<u64>) -> Result<(), DecodeError> {
    if width > 64 {
        return Err(DecodeError::Invalid { field: "width", reason: format!("{width} bits > 64") });
    }
    let len = packed_len(count, width)
        .ok_or(DecodeError::Invalid { field: "width", reason: "packed length overflows".into() })?;
    let bytes = r.bytes(len)?;
    out.clear();
    out.reserve(count);
    if width == 0 {
        out.resize(count, 0);
        return Ok(());
    }
    let mask: u128 = if width >= 64 { u64::MAX as u128 } else { (1u128 << width) - 1 };
    let mut acc: u128 = 0;
    let mut bits: u32 = 0;
    let mut it = bytes.iter();
    for _ in 0..count {
        while bits < width as u32 {
            let b = it.next().copied().unwrap_or(0);
            acc |= (b as u128) << bits;
            bits += 8;
        }
        out.push((acc & mask) as u64);
        acc >>= width;
        bits -= width as u32;
    }
    if acc != 0 {
        return Err(DecodeError::Invalid { field: "padding", reason: "non-zero padding bits".into() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(values: &[u64], width: u8) -> Vec<u64> {
        let mut buf = Vec::new();
        pack(&mut Writer::new(&mut buf), values.iter().copied(), width);
        assert_eq!(buf.len(), packed_len(values.len(), width).unwrap());
        let mut r = Reader::new(&buf);
        let mut out = Vec::new();
        unpack(&mut r, values.len(), width, &mut out).unwrap();
        r.finish().unwrap();
        out
    }

    #[test]
    fn widths() {
        assert_eq!(bits_needed(0), 0);
        assert_eq!(bits_needed(1), 1);
        assert_eq!(bits_needed(524_287), 19);
        assert_eq!(bits_needed(u64::MAX), 64);
        assert_eq!(packed_len(455_334, 19), Some(1_081_419));
        assert_eq!(round_trip(&[0, 0, 0], 0), vec![0, 0, 0]);
        assert_eq!(round_trip(&[u64::MAX, 1, 0, u64::MAX - 7], 64), vec![u64::MAX, 1, 0, u64::MAX - 7]);
        assert_eq!(round_trip(&[5, 2, 7, 0, 1], 3), vec![5, 2, 7, 0, 1]);
    }

    #[test]
    fn short_input_and_dirty_padding_refused() {
        let mut out = Vec::new();
        assert!(matches!(
            unpack(&mut Reader::new(&[1, 2]), 3, 7, &mut out),
            Err(DecodeError::Truncated { .. })
        ));
        // 1 value of 3 bits in one byte: bits 3..8 must be zero.
        assert!(unpack(&mut Reader::new(&[0b1000_0101]), 1, 3, &mut out).is_err());
        assert!(unpack(&mut Reader::new(&[]), 1, 65, &mut out).is_err());
        assert!(unpack(&mut Reader::new(&[]), usize::MAX, 64, &mut out).is_err());
    }

    proptest! {
        #[test]
        fn any_values_round_trip(values in proptest::collection::vec(any::<u64>(), 0..200), shift in 0u32..64) {
            let vals: Vec<u64> = values.iter().map(|v| v >> shift).collect();
            let width = vals.iter().map(|&v| bits_needed(v)).max().unwrap_or(0);
            prop_assert_eq!(round_trip(&vals, width), vals);
        }
    }
}
