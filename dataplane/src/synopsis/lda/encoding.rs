//! The LDA body encoding (after the common 10-byte header of [`crate::synopsis::codec`]):
//!
//! ```text
//! total_packets  u64 LE                  (unsampled counter, spec §8.16)
//! cells          per cell, in flat order (bank after bank, row by row):
//!                  ts_sum  ⌈ts_bits/8⌉ bytes LE
//!                  count   ⌈count_bits/8⌉ bytes LE
//!                  digest  ⌈digest_bits/8⌉ bytes LE (none when digest_bits = 0)
//! ```
//!
//! Fields take only the bytes their configured width needs, so the paper's hardware shape
//! (1024 cells, 40-bit sums, 32-bit counters, no digest) packs into 9,216 bytes of cells, 72
//! bits a cell.
//! The body length follows from the receiver's config and is checked before anything is
//! allocated; a value wider than its configured width is refused.

use super::config::LdaConfig;
use super::state::Cell;
use crate::synopsis::SynopsisConfig;
use crate::synopsis::codec::{DecodeError, Reader, Writer};

/// Bytes a field of `bits` bits takes.
fn field_bytes(bits: u8) -> usize {
    usize::from(bits).div_ceil(8)
}

/// Bytes of the body for `cfg`.
pub fn body_len(cfg: &LdaConfig) -> usize {
    8 + cfg.total_cells() as usize * cell_bytes(cfg)
}

/// Bytes of one cell for `cfg`.
fn cell_bytes(cfg: &LdaConfig) -> usize {
    field_bytes(cfg.ts_bits) + field_bytes(cfg.count_bits) + field_bytes(cfg.digest_bits)
}

pub(super) fn write_body(cfg: &LdaConfig, cells: &[Cell], total_packets: u64, w: &mut Writer<'_>) {
    let (tb, cb) = (field_bytes(cfg.ts_bits), field_bytes(cfg.count_bits));
    let width = cell_bytes(cfg);
    w.reserve(body_len(cfg));
    w.u64(total_packets);
    // A cell is ts_sum's low tb bytes, count's low cb bytes, then the digest's: write each
    // whole (8 bytes, the next over the previous one's unused top) into a stack block, flushed
    // when full, so every copy has a fixed size. The digest is 0 when it has no bytes, so its
    // whole write past the cell is overwritten by the next cell or never flushed.
    let mut block = [0u8; 4096];
    let mut used = 0;
    for c in cells {
        if used + 24 > block.len() {
            w.bytes(&block[..used]);
            used = 0;
        }
        block[used..used + 8].copy_from_slice(&c.ts_sum.to_le_bytes());
        block[used + tb..used + tb + 8].copy_from_slice(&c.count.to_le_bytes());
        block[used + tb + cb..used + tb + cb + 8].copy_from_slice(&c.digest.to_le_bytes());
        used += width;
    }
    w.bytes(&block[..used]);
}

/// The little-endian u64 in an 8-byte slice (0 for any other length, which callers never pass).
fn le_u64(b: &[u8]) -> u64 {
    <[u8; 8]>::try_from(b).map_or(0, u64::from_le_bytes)
}

/// All ones in the low `n` bytes.
fn byte_mask(n: usize) -> u64 {
    if n >= 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 }
}

fn check_width(v: u64, mask: u64, field: &'static str) -> Result<u64, DecodeError> {
    if v > mask {
        return Err(DecodeError::Invalid { field, reason: format!("{v:#x} exceeds the configured width") });
    }
    Ok(v)
}

pub(super) fn read_body(cfg: &LdaConfig, r: &mut Reader<'_>) -> Result<(Vec<Cell>, u64), DecodeError> {
    cfg.validate().map_err(|e| DecodeError::Invalid { field: "config", reason: e.to_string() })?;
    // Every length is known from the config: check it before allocating anything.
    r.require(body_len(cfg))?;
    let (tb, cb, db) = (field_bytes(cfg.ts_bits), field_bytes(cfg.count_bits), field_bytes(cfg.digest_bits));
    let total = r.u64()?;
    let n = cfg.total_cells() as usize;
    let width = cell_bytes(cfg);
    let (ts_mask, count_mask, digest_mask) = (cfg.ts_mask(), cfg.count_mask(), cfg.digest_mask());
    let block = r.bytes(n * width)?;
    let mut cells = Vec::with_capacity(n);
    let mut tail = [0u8; 24];
    for i in 0..n {
        let at = i * width;
        // Read 24 bytes from the cell's start (fixed-size loads) and keep each field's own
        // bytes; the last cells, closer than 24 bytes to the end, go through a copy.
        let window = match block.get(at..at + 24) {
            Some(w) => w,
            None => {
                let cell = block.get(at..at + width).unwrap_or(&[]);
                tail[..cell.len()].copy_from_slice(cell);
                &tail[..]
            }
        };
        let ts = le_u64(&window[..8]) & byte_mask(tb);
        let count = le_u64(&window[tb..tb + 8]) & byte_mask(cb);
        let digest = le_u64(&window[tb + cb..tb + cb + 8]) & byte_mask(db);
        cells.push(Cell {
            ts_sum: check_width(ts, ts_mask, "lda.cell.ts_sum")?,
            count: check_width(count, count_mask, "lda.cell.count")?,
            digest: check_width(digest, digest_mask, "lda.cell.digest")?,
        });
    }
    Ok((cells, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::codec::HEADER_LEN;
    use crate::synopsis::lda::config::BankConfig;
    use crate::synopsis::lda::state::Lda;
    use crate::synopsis::{Synopsis, SynopsisKind};
    use proptest::prelude::*;

    fn hardware_shape() -> LdaConfig {
        let mut c = LdaConfig::single_bank(512, 0.010240, 3);
        c.banks.push(BankConfig { rows: 512, p: 0.000512 });
        c.ts_bits = 40;
        c.count_bits = 32;
        c.digest_bits = 0;
        c
    }

    fn filled(cfg: &LdaConfig, n: u64) -> Lda {
        let mut lda = Lda::new(cfg).unwrap();
        for id in 0..n {
            // Timestamps beyond 2^40 exercise the masking.
            lda.update_raw(id, (1u64 << 41) + id * 1_000_003);
        }
        lda
    }

    #[test]
    fn round_trip_and_the_papers_size() {
        let cfg = hardware_shape();
        let lda = filled(&cfg, 2_000_000);
        let bytes = lda.encode();
        // 1024 cells × 72 bits = 9,216 bytes (spec §9), plus the header and the total counter.
        assert_eq!(bytes.len(), HEADER_LEN + 8 + 9_216);
        let back = Lda::decode(&cfg, &bytes).unwrap();
        assert_eq!(back, lda);
        // 64-bit widths and the default 32-bit digest: 20 bytes a cell.
        let wide = filled(&LdaConfig::single_bank(64, 1.0, 1), 1000);
        let wb = wide.encode();
        assert_eq!(wb.len(), HEADER_LEN + 8 + 64 * 20);
        assert_eq!(Lda::decode(wide.config(), &wb).unwrap(), wide);
        // An odd digest width, with the digest's top byte over-wide: refused.
        let mut odd = LdaConfig::single_bank(64, 1.0, 1);
        odd.digest_bits = 12;
        let o = filled(&odd, 1000);
        let mut ob = o.encode();
        assert_eq!(Lda::decode(&odd, &ob).unwrap(), o);
        ob[HEADER_LEN + 8 + 16 + 1] = 0xff;
        assert!(matches!(Lda::decode(&odd, &ob), Err(DecodeError::Invalid { field: "lda.cell.digest", .. })));
    }

    #[test]
    fn every_truncation_is_refused() {
        let cfg = hardware_shape();
        let bytes = filled(&cfg, 10_000).encode();
        for len in 0..bytes.len() {
            let e = Lda::decode(&cfg, &bytes[..len]).unwrap_err();
            assert!(matches!(e, DecodeError::Truncated { .. }), "length {len}: {e:?}");
        }
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let cfg = hardware_shape();
        let mut bytes = filled(&cfg, 100).encode();
        bytes.push(0);
        assert_eq!(Lda::decode(&cfg, &bytes), Err(DecodeError::TrailingBytes { extra: 1 }));
    }

    #[test]
    fn header_mismatches_are_refused() {
        let cfg = hardware_shape();
        let bytes = filled(&cfg, 100).encode();
        let mut kind = bytes.clone();
        kind[0] = SynopsisKind::Rda as u8;
        assert!(matches!(Lda::decode(&cfg, &kind), Err(DecodeError::WrongKind { .. })));
        let mut version = bytes.clone();
        version[1] = 9;
        assert!(matches!(Lda::decode(&cfg, &version), Err(DecodeError::UnsupportedVersion { found: 9, .. })));
        // A receiver configured differently (another seed) refuses the sender's synopsis.
        let mut other = cfg.clone();
        other.seed += 1;
        assert!(matches!(Lda::decode(&other, &bytes), Err(DecodeError::ConfigMismatch { .. })));
        let mut fp = bytes.clone();
        fp[5] ^= 1;
        assert!(matches!(Lda::decode(&cfg, &fp), Err(DecodeError::ConfigMismatch { .. })));
    }

    #[test]
    fn over_wide_values_and_bad_configs_are_refused() {
        let cfg = hardware_shape();
        let mut bytes = filled(&cfg, 100).encode();
        // A 40-bit field in 5 bytes cannot overflow, but a 28-bit counter stored in 4 bytes can:
        // set the top byte of the first cell's counter.
        let mut narrow = cfg.clone();
        narrow.count_bits = 28;
        let mut nb = filled(&narrow, 100).encode();
        let count_at = HEADER_LEN + 8 + 5;
        nb[count_at + 3] = 0xff;
        assert!(matches!(
            Lda::decode(&narrow, &nb),
            Err(DecodeError::Invalid { field: "lda.cell.count", .. })
        ));
        // decode_body validates the config it is handed.
        let mut bad = cfg.clone();
        bad.banks[0].rows = 3;
        let mut r = Reader::new(&bytes[HEADER_LEN..]);
        assert!(matches!(Lda::decode_body(&bad, &mut r), Err(DecodeError::Invalid { field: "config", .. })));
        bytes.truncate(HEADER_LEN);
        assert!(matches!(Lda::decode(&cfg, &bytes), Err(DecodeError::Truncated { .. })));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut cfg = LdaConfig::single_bank(8, 0.5, 1);
            cfg.ts_bits = 40;
            cfg.count_bits = 20;
            // With a valid header, so the body parser itself is exercised.
            let mut bytes = Vec::new();
            crate::synopsis::codec::write_header(
                &mut Writer::new(&mut bytes), SynopsisKind::Lda, Lda::FORMAT_VERSION, cfg.fingerprint());
            bytes.extend_from_slice(&body);
            let _ = Lda::decode(&cfg, &bytes);
            let _ = Lda::decode(&cfg, &body);
        }

        #[test]
        fn round_trip_any_contents(cells in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u64>()), 8),
                                   total in any::<u64>(), digest_bits in prop_oneof![Just(0u8), 8u8..=64]) {
            let mut cfg = LdaConfig::single_bank(8, 0.5, 1);
            cfg.ts_bits = 40;
            cfg.count_bits = 20;
            cfg.digest_bits = digest_bits;
            let cells: Vec<Cell> = cells.into_iter()
                .map(|(t, c, d)| Cell { ts_sum: t & cfg.ts_mask(), count: c & cfg.count_mask(), digest: d & cfg.digest_mask() })
                .collect();
            let lda = Lda::from_parts(&cfg, cells, total);
            prop_assert_eq!(Lda::decode(&cfg, &lda.encode()).unwrap(), lda);
        }
    }
}
