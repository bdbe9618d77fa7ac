//! ICMP (RFC 792) and ICMPv6 (RFC 4443) header: a checked, zero-copy view.
//!
//! Both share the first 8 bytes: type, code, checksum and a 4-byte rest-of-header (identifier
//! and sequence number for echo messages). Which of the two a message is follows from the IP
//! protocol number; the view itself does not care.

use super::class::HeaderError;
use super::field::{be16, bytes};

/// Length of the common header.
pub const HEADER_LEN: usize = 8;

/// IP protocol number of ICMP.
pub const PROTOCOL_ICMP: u8 = 1;
/// IPv6 next-header value of ICMPv6.
pub const PROTOCOL_ICMPV6: u8 = 58;

/// A view of an ICMP or ICMPv6 message whose 8-byte header is inside the buffer.
#[derive(Clone, Copy, Debug)]
pub struct IcmpMessage<'a> {
    header: &'a [u8; HEADER_LEN],
    payload: &'a [u8],
}

impl<'a> IcmpMessage<'a> {
    /// A view over `buf`, or [`HeaderError::Truncated`] when it is shorter than 8 bytes.
    #[inline(always)]
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, HeaderError> {
        let (header, payload) = buf.split_first_chunk::<HEADER_LEN>().ok_or(HeaderError::Truncated)?;
        Ok(Self { header, payload })
    }

    /// Message type.
    #[inline(always)]
    pub fn msg_type(&self) -> u8 {
        self.header[0]
    }

    /// Message code.
    #[inline(always)]
    pub fn code(&self) -> u8 {
        self.header[1]
    }

    /// Checksum as carried (not verified).
    pub fn checksum(&self) -> u16 {
        be16::<2, HEADER_LEN>(self.header)
    }

    /// The 4 type-specific bytes after the checksum.
    #[inline(always)]
    pub fn rest_of_header(&self) -> [u8; 4] {
        bytes::<4, 4, HEADER_LEN>(self.header)
    }

    /// Echo identifier (meaningful for echo request/reply).
    pub fn echo_ident(&self) -> u16 {
        be16::<4, HEADER_LEN>(self.header)
    }

    /// Echo sequence number (meaningful for echo request/reply).
    pub fn echo_seq(&self) -> u16 {
        be16::<6, HEADER_LEN>(self.header)
    }

    /// The 8-byte header.
    #[inline(always)]
    pub fn header(&self) -> &'a [u8; HEADER_LEN] {
        self.header
    }

    /// Everything after the 8-byte header.
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_echo_request() {
        let m = [8, 0, 0xf7, 0xfd, 0x12, 0x34, 0x00, 0x02, 0xaa];
        let v = IcmpMessage::new_checked(&m).unwrap();
        assert_eq!((v.msg_type(), v.code(), v.checksum()), (8, 0, 0xf7fd));
        assert_eq!((v.echo_ident(), v.echo_seq(), v.rest_of_header()), (0x1234, 2, [0x12, 0x34, 0, 2]));
        assert_eq!(v.payload(), &[0xaa]);
    }

    #[test]
    fn short_is_truncated() {
        for n in 0..HEADER_LEN {
            assert_eq!(IcmpMessage::new_checked(&[0u8; 8][..n]).err(), Some(HeaderError::Truncated));
        }
    }
}
