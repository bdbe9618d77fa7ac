//! IPv6 fixed header (RFC 8200): a checked, zero-copy view.
//!
//! `new_checked` validates the version and the payload length against the buffer once. The
//! payload ends at the payload length, so Ethernet padding never reaches the extension-header
//! walk ([`super::ipv6_ext`]), a transport parser or the packet identity.

use super::class::HeaderError;
use super::field::{be16, be32, bytes};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// A view of an IPv6 packet whose fixed header and declared payload are inside the buffer.
#[derive(Clone, Copy, Debug)]
pub struct Ipv6Packet<'a> {
    header: &'a [u8; HEADER_LEN],
    payload: &'a [u8],
}

impl<'a> Ipv6Packet<'a> {
    /// A view over `buf` (the bytes after the ethertype). Truncated when the buffer ends before
    /// the fixed header or the payload length; malformed when the version is not 6.
    #[inline(always)]
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, HeaderError> {
        let (header, rest) = buf.split_first_chunk::<HEADER_LEN>().ok_or(HeaderError::Truncated)?;
        if header[0] >> 4 != 6 {
            return Err(HeaderError::Malformed);
        }
        let payload_len = usize::from(be16::<4, HEADER_LEN>(header));
        let payload = rest.get(..payload_len).ok_or(HeaderError::Truncated)?;
        Ok(Self { header, payload })
    }

    /// Traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        ((be16::<0, HEADER_LEN>(self.header) >> 4) & 0xff) as u8
    }

    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// Explicit congestion notification (2 bits).
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        be32::<0, HEADER_LEN>(self.header) & 0x000f_ffff
    }

    /// Payload length: extension headers and upper-layer packet, in bytes.
    pub fn payload_len(&self) -> u16 {
        be16::<4, HEADER_LEN>(self.header)
    }

    /// The first next-header value (an extension header or the upper-layer protocol).
    #[inline(always)]
    pub fn next_header(&self) -> u8 {
        self.header[6]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.header[7]
    }

    /// Source address.
    #[inline(always)]
    pub fn src_addr(&self) -> [u8; 16] {
        bytes::<8, 16, HEADER_LEN>(self.header)
    }

    /// Destination address.
    #[inline(always)]
    pub fn dst_addr(&self) -> [u8; 16] {
        bytes::<24, 16, HEADER_LEN>(self.header)
    }

    /// The fixed 40-byte header.
    #[inline(always)]
    pub fn header(&self) -> &'a [u8; HEADER_LEN] {
        self.header
    }

    /// The payload (extension headers first), up to the payload length (padding excluded).
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(payload_len: u16, extra: usize) -> Vec<u8> {
        let mut p = vec![0u8; HEADER_LEN];
        // Version 6, traffic class 0xb9 (DSCP 46, ECN 1), flow label 0x12345.
        p[0..4].copy_from_slice(&0x6b91_2345u32.to_be_bytes());
        p[4..6].copy_from_slice(&payload_len.to_be_bytes());
        p[6] = 17;
        p[7] = 63;
        p[8..24].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p[24..40].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p.extend(std::iter::repeat_n(0xee, extra));
        p
    }

    #[test]
    fn reads_fields() {
        let p = packet(8, 12);
        let v = Ipv6Packet::new_checked(&p).unwrap();
        assert_eq!((v.traffic_class(), v.dscp(), v.ecn(), v.flow_label()), (0xb9, 46, 1, 0x12345));
        assert_eq!((v.payload_len(), v.next_header(), v.hop_limit()), (8, 17, 63));
        assert_eq!(v.src_addr()[15], 1);
        assert_eq!(v.dst_addr()[15], 2);
        assert_eq!(v.payload().len(), 8);
    }

    #[test]
    fn version_and_lengths() {
        let mut p = packet(8, 8);
        p[0] = 0x4b;
        assert_eq!(Ipv6Packet::new_checked(&p).err(), Some(HeaderError::Malformed));
        assert_eq!(Ipv6Packet::new_checked(&packet(9, 8)).err(), Some(HeaderError::Truncated));
        for n in 0..HEADER_LEN {
            assert_eq!(Ipv6Packet::new_checked(&packet(0, 0)[..n]).err(), Some(HeaderError::Truncated));
        }
        assert!(Ipv6Packet::new_checked(&packet(0, 0)).unwrap().payload().is_empty());
    }
}
