//! UDP header (RFC 768): a checked, zero-copy view.
//!
//! `new_checked` validates the UDP length against the buffer (the upper-layer packet, already
//! bounded by the IP length) once; the payload ends at the UDP length.

use super::class::HeaderError;
use super::field::be16;

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram whose header and declared length are inside the buffer.
#[derive(Clone, Copy, Debug)]
pub struct UdpDatagram<'a> {
    header: &'a [u8; HEADER_LEN],
    payload: &'a [u8],
}

impl<'a> UdpDatagram<'a> {
    /// A view over `buf`. Truncated when it ends before the header or the UDP length;
    /// malformed when the UDP length is below 8 (zero is only legal in IPv6 jumbograms, which
    /// never fit an Ethernet frame).
    #[inline(always)]
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, HeaderError> {
        let (header, rest) = buf.split_first_chunk::<HEADER_LEN>().ok_or(HeaderError::Truncated)?;
        let len = usize::from(be16::<4, HEADER_LEN>(header));
        let payload_len = len.checked_sub(HEADER_LEN).ok_or(HeaderError::Malformed)?;
        let payload = rest.get(..payload_len).ok_or(HeaderError::Truncated)?;
        Ok(Self { header, payload })
    }

    /// Source port.
    #[inline(always)]
    pub fn src_port(&self) -> u16 {
        be16::<0, HEADER_LEN>(self.header)
    }

    /// Destination port.
    #[inline(always)]
    pub fn dst_port(&self) -> u16 {
        be16::<2, HEADER_LEN>(self.header)
    }

    /// Length of header and payload in bytes.
    #[inline(always)]
    pub fn len(&self) -> u16 {
        be16::<4, HEADER_LEN>(self.header)
    }

    /// Never true: a checked datagram is at least its 8-byte header long.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checksum as carried (0 = none over IPv4; not verified).
    pub fn checksum(&self) -> u16 {
        be16::<6, HEADER_LEN>(self.header)
    }

    /// The 8-byte header.
    #[inline(always)]
    pub fn header(&self) -> &'a [u8; HEADER_LEN] {
        self.header
    }

    /// The payload, up to the UDP length.
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(len: u16, extra: usize) -> Vec<u8> {
        let mut d = vec![0xc0, 0x00, 0x00, 0x35, 0, 0, 0x12, 0x34];
        d[4..6].copy_from_slice(&len.to_be_bytes());
        d.extend(std::iter::repeat_n(0xee, extra));
        d
    }

    #[test]
    fn reads_fields() {
        let d = datagram(12, 6);
        let u = UdpDatagram::new_checked(&d).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len(), u.checksum()), (49152, 53, 12, 0x1234));
        assert_eq!(u.payload().len(), 4);
        assert!(!u.is_empty());
    }

    #[test]
    fn bad_lengths() {
        for len in 0..8 {
            assert_eq!(UdpDatagram::new_checked(&datagram(len, 8)).err(), Some(HeaderError::Malformed));
        }
        assert_eq!(UdpDatagram::new_checked(&datagram(17, 8)).err(), Some(HeaderError::Truncated));
        for n in 0..HEADER_LEN {
            assert_eq!(UdpDatagram::new_checked(&datagram(8, 0)[..n]).err(), Some(HeaderError::Truncated));
        }
    }
}
