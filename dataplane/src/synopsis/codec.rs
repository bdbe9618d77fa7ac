//! The compact binary encoding every synopsis uses: little-endian fixed-width fields behind a
//! 10-byte header.
//!
//! ```text
//! kind (u8) | format version (u8) | config fingerprint (u64 LE) | body (synopsis-specific)
//! ```
//!
//! The body's size follows from the configuration the receiver already holds, so a decoder
//! knows how many bytes to expect before it allocates anything: truncated, oversized and
//! mismatched input is refused with a [`DecodeError`], never a panic.

use super::SynopsisKind;
use thiserror::Error;

/// Bytes in the header before the body.
pub const HEADER_LEN: usize = 10;

/// Why bytes could not be decoded into a synopsis.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The input ended early.
    #[error("truncated input: needed {needed} more bytes, {available} left")]
    Truncated {
        /// Bytes the next field needed.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// Bytes were left over after the body.
    #[error("{extra} unexpected bytes after the synopsis body")]
    TrailingBytes {
        /// How many.
        extra: usize,
    },
    /// The header names another synopsis.
    #[error("expected a {expected} synopsis, found kind byte {found}")]
    WrongKind {
        /// The kind the caller asked for.
        expected: SynopsisKind,
        /// The kind byte in the input.
        found: u8,
    },
    /// The header names a format version this build cannot read.
    #[error("{kind} encoding version {found} is not supported (this build reads version {supported})")]
    UnsupportedVersion {
        /// The synopsis.
        kind: SynopsisKind,
        /// Version in the input.
        found: u8,
        /// Version this build reads.
        supported: u8,
    },
    /// The sender's configuration differs from ours: the two synopses cannot be compared.
    #[error("configuration fingerprint mismatch: ours {expected:#018x}, input {found:#018x}")]
    ConfigMismatch {
        /// Our fingerprint.
        expected: u64,
        /// The input's fingerprint.
        found: u64,
    },
    /// A field holds a value the format does not allow.
    #[error("invalid field {field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// Appends little-endian fields to a byte vector.
pub struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    /// A writer that appends to `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Self { out }
    }
    /// Reserves room for `n` more bytes.
    pub fn reserve(&mut self, n: usize) {
        self.out.reserve(n);
    }
    /// Appends one byte.
    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    /// Appends a u16, little-endian.
    pub fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a u32, little-endian.
    pub fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a u64, little-endian.
    pub fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends an i64, little-endian.
    pub fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends an f64 as its IEEE-754 bits, little-endian.
    pub fn f64(&mut self, v: f64) {
        self.out.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    /// Appends raw bytes.
    pub fn bytes(&mut self, v: &[u8]) {
        self.out.extend_from_slice(v);
    }
    /// Overwrites the u64 written at byte `at` of the underlying vector (a field known only
    /// after what follows it was written). `at` must be where an earlier [`Writer::u64`] wrote.
    pub fn set_u64_at(&mut self, at: usize, v: u64) {
        if let Some(dst) = self.out.get_mut(at..at + 8) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
    /// Drops everything written after the first `len` bytes of the underlying vector (an
    /// encoder abandoning one layout for another).
    pub fn truncate(&mut self, len: usize) {
        self.out.truncate(len);
    }
    /// Bytes written so far into the underlying vector.
    pub fn len(&self) -> usize {
        self.out.len()
    }
    /// True when the underlying vector is empty.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }
}

/// Reads little-endian fields from a byte slice; every read is bounds-checked.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }
    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }
    /// Fails unless at least `n` bytes are left (check before allocating for `n` bytes).
    pub fn require(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            Err(DecodeError::Truncated { needed: n, available: self.buf.len() })
        } else {
            Ok(())
        }
    }
    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        self.require(n)?;
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let b = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }
    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_le_bytes)
    }
    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_le_bytes)
    }
    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_le_bytes)
    }
    /// Reads a little-endian i64.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        self.array().map(i64::from_le_bytes)
    }
    /// Reads an f64 from its little-endian IEEE-754 bits.
    pub fn f64(&mut self) -> Result<f64, DecodeError> {
        self.u64().map(f64::from_bits)
    }
    /// Fails if any byte is left.
    pub fn finish(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() { Ok(()) } else { Err(DecodeError::TrailingBytes { extra: self.buf.len() }) }
    }
}

/// Writes the common header.
pub fn write_header(w: &mut Writer<'_>, kind: SynopsisKind, version: u8, fingerprint: u64) {
    w.u8(kind as u8);
    w.u8(version);
    w.u64(fingerprint);
}

/// Reads and checks the common header against what the caller expects.
pub fn read_header(
    r: &mut Reader<'_>,
    kind: SynopsisKind,
    version: u8,
    fingerprint: u64,
) -> Result<(), DecodeError> {
    let k = r.u8()?;
    if k != kind as u8 {
        return Err(DecodeError::WrongKind { expected: kind, found: k });
    }
    let v = r.u8()?;
    if v != version {
        return Err(DecodeError::UnsupportedVersion { kind, found: v, supported: version });
    }
    let f = r.u64()?;
    if f != fingerprint {
        return Err(DecodeError::ConfigMismatch { expected: fingerprint, found: f });
    }
    Ok(())
}

/// Reads only the header fields, without checking them: (kind byte, version, fingerprint).
pub fn peek_header(bytes: &[u8]) -> Result<(u8, u8, u64), DecodeError> {
    let mut r = Reader::new(bytes);
    Ok((r.u8()?, r.u8()?, r.u64()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut v = Vec::new();
        let mut w = Writer::new(&mut v);
        w.u8(7);
        w.u16(0xBEEF);
        w.u32(0xDEAD_BEEF);
        w.u64(u64::MAX - 1);
        w.i64(-5);
        w.f64(1.5);
        let mut r = Reader::new(&v);
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u16().unwrap(), 0xBEEF);
        assert_eq!(r.u32().unwrap(), 0xDEAD_BEEF);
        assert_eq!(r.u64().unwrap(), u64::MAX - 1);
        assert_eq!(r.i64().unwrap(), -5);
        assert_eq!(r.f64().unwrap(), 1.5);
        r.finish().unwrap();
    }

    #[test]
    fn a_count_written_later_and_a_layout_abandoned() {
        let mut v = Vec::new();
        let mut w = Writer::new(&mut v);
        w.u8(1);
        w.u64(0);
        w.u32(9);
        w.set_u64_at(1, 77);
        w.truncate(9);
        assert_eq!(v, [&[1u8][..], &77u64.to_le_bytes()].concat());
    }

    #[test]
    fn short_and_long_input_refused() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u32(), Err(DecodeError::Truncated { needed: 4, available: 3 }));
        let mut r = Reader::new(&[1, 2, 3]);
        r.u16().unwrap();
        assert_eq!(r.finish(), Err(DecodeError::TrailingBytes { extra: 1 }));
    }

    #[test]
    fn header_checks() {
        let mut v = Vec::new();
        write_header(&mut Writer::new(&mut v), SynopsisKind::Lda, 1, 42);
        assert_eq!(v.len(), HEADER_LEN);
        read_header(&mut Reader::new(&v), SynopsisKind::Lda, 1, 42).unwrap();
        assert!(matches!(
            read_header(&mut Reader::new(&v), SynopsisKind::Rda, 1, 42),
            Err(DecodeError::WrongKind { .. })
        ));
        assert!(matches!(
            read_header(&mut Reader::new(&v), SynopsisKind::Lda, 2, 42),
            Err(DecodeError::UnsupportedVersion { .. })
        ));
        assert!(matches!(
            read_header(&mut Reader::new(&v), SynopsisKind::Lda, 1, 43),
            Err(DecodeError::ConfigMismatch { expected: 43, found: 42 })
        ));
        assert_eq!(peek_header(&v).unwrap(), (SynopsisKind::Lda as u8, 1, 42));
    }
}
