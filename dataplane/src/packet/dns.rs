//! DNS message header (RFC 1035 §4.1.1): a checked, zero-copy view of the 12 fixed bytes.
//!
//! Only what the fridge's DNS classifier needs: the id and the query/response bit (and the
//! other header fields for completeness). Questions and records are never parsed. Over TCP a
//! message is preceded by a 2-byte length ([`DnsHeader::new_checked_tcp`]).

use super::class::HeaderError;
use super::field::be16;

/// Length of the DNS header.
pub const HEADER_LEN: usize = 12;

/// A view of a DNS header known to be present.
#[derive(Clone, Copy, Debug)]
pub struct DnsHeader<'a> {
    header: &'a [u8; HEADER_LEN],
}

impl<'a> DnsHeader<'a> {
    /// A view of the DNS header at the start of a UDP payload, or [`HeaderError::Truncated`].
    #[inline(always)]
    pub fn new_checked(payload: &'a [u8]) -> Result<Self, HeaderError> {
        let header = payload.first_chunk::<HEADER_LEN>().ok_or(HeaderError::Truncated)?;
        Ok(Self { header })
    }

    /// A view of the DNS header of a TCP segment that starts a message: the 2-byte length
    /// prefix, then the header. Malformed when the prefix announces less than a header.
    #[inline(always)]
    pub fn new_checked_tcp(payload: &'a [u8]) -> Result<Self, HeaderError> {
        let (len, rest) = payload.split_first_chunk::<2>().ok_or(HeaderError::Truncated)?;
        if usize::from(u16::from_be_bytes(*len)) < HEADER_LEN {
            return Err(HeaderError::Malformed);
        }
        Self::new_checked(rest)
    }

    /// Transaction id: copied from query to reply.
    #[inline(always)]
    pub fn id(&self) -> u16 {
        be16::<0, HEADER_LEN>(self.header)
    }

    /// True for a response (QR bit set), false for a query.
    #[inline(always)]
    pub fn is_response(&self) -> bool {
        self.header[2] & 0x80 != 0
    }

    /// Operation code (0 = standard query).
    pub fn opcode(&self) -> u8 {
        (self.header[2] >> 3) & 0x0f
    }

    /// Response code (0 = no error).
    pub fn rcode(&self) -> u8 {
        self.header[3] & 0x0f
    }

    /// Number of questions.
    pub fn qdcount(&self) -> u16 {
        be16::<4, HEADER_LEN>(self.header)
    }

    /// Number of answer records.
    pub fn ancount(&self) -> u16 {
        be16::<6, HEADER_LEN>(self.header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUERY: [u8; 12] = [0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    const REPLY: [u8; 12] = [0xbe, 0xef, 0x81, 0x83, 0, 1, 0, 2, 0, 0, 0, 0];

    #[test]
    fn query_and_reply() {
        let q = DnsHeader::new_checked(&QUERY).unwrap();
        assert_eq!((q.id(), q.is_response(), q.opcode(), q.qdcount()), (0xbeef, false, 0, 1));
        let r = DnsHeader::new_checked(&REPLY).unwrap();
        assert_eq!((r.id(), r.is_response(), r.rcode(), r.ancount()), (0xbeef, true, 3, 2));
    }

    #[test]
    fn tcp_length_prefix() {
        let mut m = vec![0, 12];
        m.extend_from_slice(&REPLY);
        let r = DnsHeader::new_checked_tcp(&m).unwrap();
        assert_eq!((r.id(), r.is_response()), (0xbeef, true));
        m[1] = 11;
        assert_eq!(DnsHeader::new_checked_tcp(&m).err(), Some(HeaderError::Malformed));
        // Without the prefix the id would be read from the length bytes: the TCP form must skip it.
        m[1] = 12;
        assert_ne!(DnsHeader::new_checked(&m).unwrap().id(), 0xbeef);
    }

    #[test]
    fn short_is_truncated() {
        for n in 0..HEADER_LEN {
            assert_eq!(DnsHeader::new_checked(&QUERY[..n]).err(), Some(HeaderError::Truncated));
        }
        assert_eq!(DnsHeader::new_checked_tcp(&[0]).err(), Some(HeaderError::Truncated));
        assert_eq!(DnsHeader::new_checked_tcp(&[0, 12, 0xbe]).err(), Some(HeaderError::Truncated));
    }
}
