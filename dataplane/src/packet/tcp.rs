//! TCP header (RFC 9293) with options: a checked, zero-copy view.
//!
//! `new_checked` validates the data offset against the buffer (the upper-layer packet, already
//! bounded by the IP length) once. Options are exposed as bytes and never parsed: nothing in
//! the packet layer depends on them, because middleboxes rewrite them (MSS clamping).

use super::class::HeaderError;
use super::field::{be16, be32};

/// Length of the header without options (data offset 5).
pub const MIN_HEADER_LEN: usize = 20;

/// TCP flag bits (byte 13 of the header).
pub mod flags {
    /// No more data from sender.
    pub const FIN: u8 = 0x01;
    /// Synchronise sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push.
    pub const PSH: u8 = 0x08;
    /// Acknowledgment field is significant.
    pub const ACK: u8 = 0x10;
    /// Urgent pointer is significant.
    pub const URG: u8 = 0x20;
    /// ECN echo.
    pub const ECE: u8 = 0x40;
    /// Congestion window reduced.
    pub const CWR: u8 = 0x80;
}

/// A view of a TCP segment whose header and options are inside the buffer.
#[derive(Clone, Copy, Debug)]
pub struct TcpSegment<'a> {
    header: &'a [u8; MIN_HEADER_LEN],
    options: &'a [u8],
    payload: &'a [u8],
}

impl<'a> TcpSegment<'a> {
    /// A view over `buf` (the whole segment). Truncated when it ends before the header or its
    /// options; malformed when the data offset is below 5.
    #[inline(always)]
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, HeaderError> {
        let (header, rest) = buf.split_first_chunk::<MIN_HEADER_LEN>().ok_or(HeaderError::Truncated)?;
        let header_len = usize::from(header[12] >> 4) * 4;
        let options_len = header_len.checked_sub(MIN_HEADER_LEN).ok_or(HeaderError::Malformed)?;
        if rest.len() < options_len {
            return Err(HeaderError::Truncated);
        }
        let (options, payload) = rest.split_at(options_len);
        Ok(Self { header, options, payload })
    }

    /// Source port.
    #[inline(always)]
    pub fn src_port(&self) -> u16 {
        be16::<0, MIN_HEADER_LEN>(self.header)
    }

    /// Destination port.
    #[inline(always)]
    pub fn dst_port(&self) -> u16 {
        be16::<2, MIN_HEADER_LEN>(self.header)
    }

    /// Sequence number.
    #[inline(always)]
    pub fn seq(&self) -> u32 {
        be32::<4, MIN_HEADER_LEN>(self.header)
    }

    /// Acknowledgment number (meaningful when [`flags::ACK`] is set).
    #[inline(always)]
    pub fn ack(&self) -> u32 {
        be32::<8, MIN_HEADER_LEN>(self.header)
    }

    /// Header length in bytes (data offset · 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.header[12] >> 4) * 4
    }

    /// The flag byte (see [`flags`]).
    #[inline(always)]
    pub fn flags(&self) -> u8 {
        self.header[13]
    }

    /// True when every bit of `mask` is set.
    #[inline(always)]
    pub fn has(&self, mask: u8) -> bool {
        self.flags() & mask == mask
    }

    /// Receive window (unscaled).
    pub fn window(&self) -> u16 {
        be16::<14, MIN_HEADER_LEN>(self.header)
    }

    /// Checksum as carried (not verified).
    pub fn checksum(&self) -> u16 {
        be16::<16, MIN_HEADER_LEN>(self.header)
    }

    /// Urgent pointer.
    pub fn urgent_ptr(&self) -> u16 {
        be16::<18, MIN_HEADER_LEN>(self.header)
    }

    /// The fixed 20-byte header.
    #[inline(always)]
    pub fn header(&self) -> &'a [u8; MIN_HEADER_LEN] {
        self.header
    }

    /// The options (empty with data offset 5).
    pub fn options(&self) -> &'a [u8] {
        self.options
    }

    /// The data after the options.
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(data_offset: u8, extra: usize) -> Vec<u8> {
        let mut s = vec![
            0x30, 0x39, 0x00, 0x50, // ports 12345 -> 80
            0x01, 0x02, 0x03, 0x04, // seq
            0x0a, 0x0b, 0x0c, 0x0d, // ack
            0, 0x12, // data offset, SYN|ACK
            0xff, 0xff, 0xbe, 0xef, 0x00, 0x07,
        ];
        s[12] = data_offset << 4;
        s.extend(std::iter::repeat_n(0xee, extra));
        s
    }

    #[test]
    fn reads_fields() {
        let s = segment(6, 6);
        let t = TcpSegment::new_checked(&s).unwrap();
        assert_eq!((t.src_port(), t.dst_port(), t.seq(), t.ack()), (12345, 80, 0x0102_0304, 0x0a0b_0c0d));
        assert_eq!(
            (t.header_len(), t.flags(), t.window(), t.checksum(), t.urgent_ptr()),
            (24, 0x12, 0xffff, 0xbeef, 7)
        );
        assert!(t.has(flags::SYN | flags::ACK) && !t.has(flags::FIN));
        assert_eq!((t.options().len(), t.payload().len()), (4, 2));
    }

    #[test]
    fn bad_data_offset_and_truncation() {
        for off in 0..5 {
            assert_eq!(TcpSegment::new_checked(&segment(off, 40)).err(), Some(HeaderError::Malformed));
        }
        // Options past the end of the segment.
        assert_eq!(TcpSegment::new_checked(&segment(15, 39)).err(), Some(HeaderError::Truncated));
        assert!(TcpSegment::new_checked(&segment(15, 40)).unwrap().payload().is_empty());
        for n in 0..MIN_HEADER_LEN {
            assert_eq!(TcpSegment::new_checked(&segment(5, 0)[..n]).err(), Some(HeaderError::Truncated));
        }
    }
}
