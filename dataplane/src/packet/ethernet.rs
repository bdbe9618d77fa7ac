//! Ethernet II header: a checked, zero-copy view.
//!
//! Holds the 14-byte header (destination, source, ethertype) and what follows it. The frame
//! check sequence is not part of the buffers DPDK hands us, so it is not modelled. Never
//! interprets the payload: VLAN tags are [`super::vlan`]'s.

use super::class::HeaderError;
use super::field::{be16, bytes};

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = 14;

/// Ethertypes the packet layer recognises.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (outer tag of QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ outer tag still used by some switches.
    pub const QINQ_LEGACY: u16 = 0x9100;
}

/// A view of an Ethernet II frame whose 14-byte header is known to be present.
#[derive(Clone, Copy, Debug)]
pub struct EthernetFrame<'a> {
    header: &'a [u8; HEADER_LEN],
    payload: &'a [u8],
}

impl<'a> EthernetFrame<'a> {
    /// A view over `frame`, or [`HeaderError::Truncated`] when it is shorter than the header.
    #[inline(always)]
    pub fn new_checked(frame: &'a [u8]) -> Result<Self, HeaderError> {
        let (header, payload) = frame.split_first_chunk::<HEADER_LEN>().ok_or(HeaderError::Truncated)?;
        Ok(Self { header, payload })
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> [u8; 6] {
        bytes::<0, 6, HEADER_LEN>(self.header)
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> [u8; 6] {
        bytes::<6, 6, HEADER_LEN>(self.header)
    }

    /// The ethertype (or, below 0x0600, an 802.3 length).
    #[inline(always)]
    pub fn ethertype(&self) -> u16 {
        be16::<12, HEADER_LEN>(self.header)
    }

    /// Everything after the header (VLAN tags included, padding included).
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields() {
        let mut f = vec![1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15, 16, 0x86, 0xdd];
        f.extend_from_slice(&[0xaa, 0xbb]);
        let e = EthernetFrame::new_checked(&f).unwrap();
        assert_eq!(e.dst_addr(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(e.src_addr(), [11, 12, 13, 14, 15, 16]);
        assert_eq!(e.ethertype(), ethertype::IPV6);
        assert_eq!(e.payload(), &[0xaa, 0xbb]);
    }

    #[test]
    fn short_frames_are_truncated() {
        for n in 0..HEADER_LEN {
            assert_eq!(EthernetFrame::new_checked(&[0u8; 20][..n]).err(), Some(HeaderError::Truncated));
        }
        assert!(EthernetFrame::new_checked(&[0u8; HEADER_LEN]).unwrap().payload().is_empty());
    }
}
