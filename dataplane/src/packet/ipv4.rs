//! IPv4 header (RFC 791) with options: a checked, zero-copy view.
//!
//! `new_checked` validates version, header length and total length against the buffer once;
//! every accessor afterwards is a plain read. The payload ends at the total length, so Ethernet
//! padding never reaches a transport parser or the packet identity. Checksums are not verified:
//! a middlebox forwards what it gets, and offloading NICs leave them unset.

use super::class::HeaderError;
use super::field::{be16, bytes};

/// Length of the fixed header (IHL = 5).
pub const MIN_HEADER_LEN: usize = 20;

/// A view of an IPv4 packet whose header, options and declared payload are inside the buffer.
#[derive(Clone, Copy, Debug)]
pub struct Ipv4Packet<'a> {
    header: &'a [u8; MIN_HEADER_LEN],
    options: &'a [u8],
    payload: &'a [u8],
}

impl<'a> Ipv4Packet<'a> {
    /// A view over `buf` (the bytes after the ethertype). Truncated when the buffer ends before
    /// the header, its options or its total length; malformed when the version is not 4, the
    /// IHL is below 5 or the total length is shorter than the header.
    #[inline(always)]
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, HeaderError> {
        let (header, _) = buf.split_first_chunk::<MIN_HEADER_LEN>().ok_or(HeaderError::Truncated)?;
        let version_ihl = header[0];
        if version_ihl >> 4 != 4 {
            return Err(HeaderError::Malformed);
        }
        let header_len = usize::from(version_ihl & 0x0f) * 4;
        let total_len = usize::from(be16::<2, MIN_HEADER_LEN>(header));
        if header_len < MIN_HEADER_LEN || total_len < header_len {
            return Err(HeaderError::Malformed);
        }
        let packet = buf.get(..total_len).ok_or(HeaderError::Truncated)?;
        let options = packet.get(MIN_HEADER_LEN..header_len).ok_or(HeaderError::Truncated)?;
        let payload = packet.get(header_len..).ok_or(HeaderError::Truncated)?;
        Ok(Self { header, options, payload })
    }

    /// Header length in bytes (IHL · 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.header[0] & 0x0f) * 4
    }

    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        self.header[1] >> 2
    }

    /// Explicit congestion notification (2 bits).
    pub fn ecn(&self) -> u8 {
        self.header[1] & 0x03
    }

    /// Total length: header, options and payload, in bytes.
    #[inline(always)]
    pub fn total_len(&self) -> u16 {
        be16::<2, MIN_HEADER_LEN>(self.header)
    }

    /// Identification.
    #[inline(always)]
    pub fn ident(&self) -> u16 {
        be16::<4, MIN_HEADER_LEN>(self.header)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.header[6] & 0x40 != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.header[6] & 0x20 != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (be16::<6, MIN_HEADER_LEN>(self.header) & 0x1fff) << 3
    }

    /// True for any fragment: the first (MF set, offset 0) and every later one (offset > 0).
    #[inline(always)]
    pub fn is_fragment(&self) -> bool {
        be16::<6, MIN_HEADER_LEN>(self.header) & 0x3fff != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.header[8]
    }

    /// Protocol of the payload (6 TCP, 17 UDP, 1 ICMP, ...).
    #[inline(always)]
    pub fn protocol(&self) -> u8 {
        self.header[9]
    }

    /// Header checksum as carried (not verified).
    pub fn checksum(&self) -> u16 {
        be16::<10, MIN_HEADER_LEN>(self.header)
    }

    /// Source address.
    #[inline(always)]
    pub fn src_addr(&self) -> [u8; 4] {
        bytes::<12, 4, MIN_HEADER_LEN>(self.header)
    }

    /// Destination address.
    #[inline(always)]
    pub fn dst_addr(&self) -> [u8; 4] {
        bytes::<16, 4, MIN_HEADER_LEN>(self.header)
    }

    /// The fixed 20-byte header.
    #[inline(always)]
    pub fn header(&self) -> &'a [u8; MIN_HEADER_LEN] {
        self.header
    }

    /// The options (empty when IHL = 5).
    pub fn options(&self) -> &'a [u8] {
        self.options
    }

    /// The payload, up to the total length (padding excluded).
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 20-byte header with `total` and `ihl`, followed by `extra` bytes of 0xee.
    fn packet(ihl: u8, total: u16, extra: usize) -> Vec<u8> {
        let mut p = vec![
            0x40 | ihl,
            0xb9, // DSCP 46, ECN 1
            0,
            0,
            0x12,
            0x34,
            0x40, // DF
            0x00,
            64,
            17,
            0xab,
            0xcd,
            192,
            0,
            2,
            1,
            198,
            51,
            100,
            7,
        ];
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p.extend(std::iter::repeat_n(0xee, extra));
        p
    }

    #[test]
    fn reads_fields() {
        let p = packet(5, 28, 10);
        let v = Ipv4Packet::new_checked(&p).unwrap();
        assert_eq!((v.header_len(), v.dscp(), v.ecn(), v.total_len()), (20, 46, 1, 28));
        assert_eq!((v.ident(), v.dont_frag(), v.more_frags(), v.frag_offset()), (0x1234, true, false, 0));
        assert!(!v.is_fragment());
        assert_eq!((v.ttl(), v.protocol(), v.checksum()), (64, 17, 0xabcd));
        assert_eq!(v.src_addr(), [192, 0, 2, 1]);
        assert_eq!(v.dst_addr(), [198, 51, 100, 7]);
        assert!(v.options().is_empty());
        // Padding after the total length is not payload.
        assert_eq!(v.payload().len(), 8);
    }

    #[test]
    fn options_are_between_header_and_payload() {
        let mut p = packet(6, 28, 8);
        p[20..24].copy_from_slice(&[1, 1, 1, 0]);
        let v = Ipv4Packet::new_checked(&p).unwrap();
        assert_eq!(v.options(), &[1, 1, 1, 0]);
        assert_eq!(v.payload(), &[0xee; 4]);
    }

    #[test]
    fn bad_ihl_version_and_lengths() {
        for ihl in 0..5 {
            assert_eq!(Ipv4Packet::new_checked(&packet(ihl, 28, 8)).err(), Some(HeaderError::Malformed));
        }
        let mut v6 = packet(5, 28, 8);
        v6[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&v6).err(), Some(HeaderError::Malformed));
        // Total length shorter than the header (with and without options).
        assert_eq!(Ipv4Packet::new_checked(&packet(5, 19, 8)).err(), Some(HeaderError::Malformed));
        assert_eq!(Ipv4Packet::new_checked(&packet(6, 20, 8)).err(), Some(HeaderError::Malformed));
        // Total length beyond the buffer.
        assert_eq!(Ipv4Packet::new_checked(&packet(5, 29, 8)).err(), Some(HeaderError::Truncated));
        // Options beyond the buffer (IHL 15 = 60 bytes, total length consistent).
        assert_eq!(Ipv4Packet::new_checked(&packet(15, 60, 8)).err(), Some(HeaderError::Truncated));
        for n in 0..MIN_HEADER_LEN {
            assert_eq!(Ipv4Packet::new_checked(&packet(5, 20, 0)[..n]).err(), Some(HeaderError::Truncated));
        }
    }

    #[test]
    fn fragments() {
        let mut first = packet(5, 28, 8);
        first[6] = 0x20; // MF, offset 0
        let v = Ipv4Packet::new_checked(&first).unwrap();
        assert!(v.is_fragment() && v.more_frags() && v.frag_offset() == 0);
        let mut last = packet(5, 28, 8);
        last[6..8].copy_from_slice(&0x00b9u16.to_be_bytes()); // offset 185 · 8, MF clear
        let v = Ipv4Packet::new_checked(&last).unwrap();
        assert!(v.is_fragment() && !v.more_frags() && v.frag_offset() == 1480);
    }
}
