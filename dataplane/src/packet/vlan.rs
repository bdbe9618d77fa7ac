//! IEEE 802.1Q VLAN tags and 802.1ad (QinQ) stacks: a checked view of one tag and the walk
//! over a stack of them.
//!
//! A tag is the 4 bytes after a VLAN TPID (0x8100, 0x88a8, 0x9100): the tag control information
//! and the ethertype of what follows. Tags are L2: nothing in a tag reaches the flow key or the
//! packet identity, because switches add, remove and rewrite them between two points.

use super::class::HeaderError;
use super::ethernet::ethertype;
use super::field::be16;

/// Length of one tag after its TPID (TCI + inner ethertype).
pub const TAG_LEN: usize = 4;

/// Most tags the walk accepts: QinQ uses two; a deeper stack is treated as malformed so the walk
/// stays bounded.
pub const MAX_TAGS: usize = 4;

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

/// Skips the VLAN tags that start with `ethertype` (the Ethernet header's) and returns the first
/// non-VLAN ethertype and the bytes after the last tag. Errors when a tag is cut short or the
/// stack is deeper than [`MAX_TAGS`].
#[inline(always)]
pub fn skip_tags(mut ethertype: u16, mut payload: &[u8]) -> Result<(u16, &[u8]), HeaderError> {
    for _ in 0..MAX_TAGS {
        if !is_tpid(ethertype) {
            return Ok((ethertype, payload));
        }
        let tag = VlanTag::new_checked(payload)?;
        ethertype = tag.ethertype();
        payload = tag.payload();
    }
    if is_tpid(ethertype) { Err(HeaderError::Malformed) } else { Ok((ethertype, payload)) }
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

    #[test]
    fn walks_single_and_double_tags() {
        let single = [0x00, 0x0a, 0x86, 0xdd, 0x60];
        assert_eq!(skip_tags(ethertype::VLAN, &single), Ok((ethertype::IPV6, &single[4..])));
        let qinq = [0x00, 0x64, 0x81, 0x00, 0x00, 0x0a, 0x08, 0x00, 0x45];
        assert_eq!(skip_tags(ethertype::QINQ, &qinq), Ok((ethertype::IPV4, &qinq[8..])));
        assert_eq!(skip_tags(ethertype::QINQ_LEGACY, &qinq), Ok((ethertype::IPV4, &qinq[8..])));
        assert_eq!(skip_tags(ethertype::IPV4, &qinq), Ok((ethertype::IPV4, &qinq[..])));
    }

    #[test]
    fn cut_tags_are_truncated_and_deep_stacks_malformed() {
        let qinq = [0x00, 0x64, 0x81, 0x00, 0x00, 0x0a, 0x08, 0x00];
        for n in 0..qinq.len() {
            if n == 4 {
                // Cut right after the outer tag: the inner TPID has no tag at all.
                assert_eq!(skip_tags(ethertype::QINQ, &qinq[..n]), Err(HeaderError::Truncated));
            }
            if n < 8 {
                assert_eq!(skip_tags(ethertype::QINQ, &qinq[..n]), Err(HeaderError::Truncated), "len {n}");
            }
        }
        let mut deep = Vec::new();
        for _ in 0..MAX_TAGS {
            deep.extend_from_slice(&[0x00, 0x01, 0x81, 0x00]);
        }
        deep.extend_from_slice(&[0u8; 8]);
        assert_eq!(skip_tags(ethertype::VLAN, &deep), Err(HeaderError::Malformed));
        // Exactly MAX_TAGS tags ending in IPv4 is accepted.
        let n = deep.len() - 8 - 2;
        deep[n..n + 2].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(skip_tags(ethertype::VLAN, &deep).map(|(t, _)| t), Ok(ethertype::IPV4));
    }
}
