//! IEEE 802.1Q VLAN tags and 802.1ad (QinQ) stacks: a checked view of one tag. The walk over
//! a stack of them (with its depth limit) is the encapsulation walk's
//! ([`super::encap`]).
//!
//! A tag is the 4 bytes after a VLAN TPID (0x8100, 0x88a8, 0x9100): the tag control information
//! and the ethertype of what follows. Tags are L2: nothing in a tag reaches the flow key or the
//! packet identity, because switches add, remove and rewrite them between two points.

use super::class::HeaderError;
use super::ethernet::ethertype;
use super::field::be16;

/// Length of one tag after its TPID (TCI + inner ethertype).
pub const TAG_LEN: usize = 4;

/// True for the TPIDs that introduce a VLAN tag.
#[inline(always)]
pub const fn is_tpid(ethertype: u16) -> bool {
    matches!(ethertype, ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_LEGACY)
}

/// A view of one VLAN tag known to be present.
#[derive(Clone, Copy, Debug)]
pub struct VlanTag<'a> {
    tag: &'a [u8; TAG_LEN],
    payload: &'a [u8],
}

impl<'a> VlanTag<'a> {
    /// A view over the bytes that follow a TPID, or [`HeaderError::Truncated`].
    #[inline(always)]
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, HeaderError> {
        let (tag, payload) = buf.split_first_chunk::<TAG_LEN>().ok_or(HeaderError::Truncated)?;
        Ok(Self { tag, payload })
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (be16::<0, TAG_LEN>(self.tag) >> 13) as u8
    }

    /// Drop-eligible indicator.
    pub fn dei(&self) -> bool {
        be16::<0, TAG_LEN>(self.tag) & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        be16::<0, TAG_LEN>(self.tag) & 0x0fff
    }

    /// Ethertype of what follows the tag (possibly another TPID).
    #[inline(always)]
    pub fn ethertype(&self) -> u16 {
        be16::<2, TAG_LEN>(self.tag)
    }

    /// Everything after the tag.
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tci() {
        // PCP 5, DEI 1, VID 0x123, inner IPv4.
        let b = [0xb1, 0x23, 0x08, 0x00, 0x45];
        let t = VlanTag::new_checked(&b).unwrap();
        assert_eq!((t.pcp(), t.dei(), t.vid(), t.ethertype()), (5, true, 0x123, ethertype::IPV4));
        assert_eq!(t.payload(), &[0x45]);
    }
}
