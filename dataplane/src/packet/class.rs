//! What the packet layer decided about a frame, and the per-core counters of those decisions.
//!
//! A frame is either measured or skipped for exactly one [`SkipReason`]; the worker forwards
//! skipped frames untouched and only counts them. Nothing here is atomic: each worker owns its
//! [`PacketCounters`] and the control thread reads a copy at an epoch boundary.

use serde::{Deserialize, Serialize};

/// Why a header view could not be built over a buffer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum HeaderError {
    /// The buffer ends before the header (or the length it declares) does.
    Truncated,
    /// A field holds a value the protocol does not allow (wrong version, a header length below
    /// the minimum, a declared length shorter than the header, a chain that never ends, ...).
    Malformed,
}

/// Why a frame was forwarded without being measured.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// ARP (ethertype 0x0806).
    Arp,
    /// Any other ethertype that is not IPv4 or IPv6 (LLDP, PTP, 802.3 length frames, ...), and
    /// an encapsulation whose walk `[packet.encap]` turns off.
    UnknownEthertype,
    /// An IPv4 fragment (more-fragments set or a non-zero offset) or an IPv6 packet with a
    /// fragment header that is not an atomic fragment: the transport header is absent from
    /// all but the first fragment, so no fragment gets a flow key.
    Fragment,
    /// The frame ends before a header, or before the IP length it declares.
    Truncated,
    /// A header is inconsistent (see [`HeaderError::Malformed`]); a transport header that does
    /// not fit in its complete IP packet is malformed, not truncated.
    Malformed,
    /// More encapsulation layers than `[packet.encap] max_depth`.
    EncapTooDeep,
    /// An MPLS stack whose payload is neither IPv4, IPv6 nor (with the control word on) an
    /// Ethernet pseudowire.
    Mpls,
    /// PPPoE that carries no IP packet (discovery, LCP and other PPP control protocols) or has
    /// a bad version, type or code, or a length too short for its PPP protocol field.
    Pppoe,
    /// GRE of version 1 or with routing or RFC 1701 recursion bits, or carrying a protocol
    /// other than IPv4, IPv6, MPLS and Ethernet.
    Gre,
    /// VXLAN without the I (valid VNI) flag.
    Vxlan,
    /// GTP-U that is not a version-1 G-PDU, whose extension-header chain is broken, or whose
    /// user packet is not IPv4/IPv6.
    Gtpu,
}

impl SkipReason {
    /// Every reason, in counter order.
    pub const ALL: [SkipReason; 11] = [
        SkipReason::Arp,
        SkipReason::UnknownEthertype,
        SkipReason::Fragment,
        SkipReason::Truncated,
        SkipReason::Malformed,
        SkipReason::EncapTooDeep,
        SkipReason::Mpls,
        SkipReason::Pppoe,
        SkipReason::Gre,
        SkipReason::Vxlan,
        SkipReason::Gtpu,
    ];

    /// True for the reasons that concern an encapsulation rather than the measured packet.
    pub fn is_encapsulation(self) -> bool {
        matches!(
            self,
            SkipReason::EncapTooDeep
                | SkipReason::Mpls
                | SkipReason::Pppoe
                | SkipReason::Gre
                | SkipReason::Vxlan
                | SkipReason::Gtpu
        )
    }
}

impl From<HeaderError> for SkipReason {
    fn from(e: HeaderError) -> Self {
        match e {
            HeaderError::Truncated => SkipReason::Truncated,
            HeaderError::Malformed => SkipReason::Malformed,
        }
    }
}

/// Frames seen by one worker, one counter per class. Plain integers: the worker that owns the
/// struct is its only writer. Aligned to a cache line so per-core copies never share one.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[repr(C, align(64))]
pub struct PacketCounters {
    /// Frames that produced a flow key and a packet identity.
    pub measured: u64,
    /// ARP frames.
    pub arp: u64,
    /// Frames of any other non-IP ethertype.
    pub unknown_ethertype: u64,
    /// IPv4 and IPv6 fragments.
    pub fragment: u64,
    /// Frames cut short.
    pub truncated: u64,
    /// Frames with an inconsistent header.
    pub malformed: u64,
    /// Frames skipped for an encapsulation, one counter per reason in [`SkipReason::ALL`]
    /// order from [`SkipReason::EncapTooDeep`] on (`encap_too_deep`, `mpls`, `pppoe`, `gre`,
    /// `vxlan`, `gtpu`).
    #[serde(default)]
    pub encap: [u64; ENCAP_REASONS],
}

/// Number of encapsulation skip reasons.
pub const ENCAP_REASONS: usize = 6;

/// Index of an encapsulation reason in [`PacketCounters::encap`].
const fn encap_index(reason: SkipReason) -> usize {
    match reason {
        SkipReason::Mpls => 1,
        SkipReason::Pppoe => 2,
        SkipReason::Gre => 3,
        SkipReason::Vxlan => 4,
        SkipReason::Gtpu => 5,
        _ => 0,
    }
}

impl PacketCounters {
    /// Counts one skipped frame.
    #[inline(always)]
    pub fn record_skip(&mut self, reason: SkipReason) {
        let c = match reason {
            SkipReason::Arp => &mut self.arp,
            SkipReason::UnknownEthertype => &mut self.unknown_ethertype,
            SkipReason::Fragment => &mut self.fragment,
            SkipReason::Truncated => &mut self.truncated,
            SkipReason::Malformed => &mut self.malformed,
            r => &mut self.encap[encap_index(r)],
        };
        *c = c.wrapping_add(1);
    }

    /// Counts one measured frame.
    #[inline(always)]
    pub fn record_measured(&mut self) {
        self.measured = self.measured.wrapping_add(1);
    }

    /// The count for one skip reason.
    pub fn skipped(&self, reason: SkipReason) -> u64 {
        match reason {
            SkipReason::Arp => self.arp,
            SkipReason::UnknownEthertype => self.unknown_ethertype,
            SkipReason::Fragment => self.fragment,
            SkipReason::Truncated => self.truncated,
            SkipReason::Malformed => self.malformed,
            r => self.encap[encap_index(r)],
        }
    }

    /// Frames skipped for any encapsulation reason.
    pub fn encap_skipped(&self) -> u64 {
        self.encap.iter().fold(0u64, |a, c| a.wrapping_add(*c))
    }

    /// Every frame counted, measured or not.
    pub fn total(&self) -> u64 {
        self.measured
            .wrapping_add(self.arp)
            .wrapping_add(self.unknown_ethertype)
            .wrapping_add(self.fragment)
            .wrapping_add(self.truncated)
            .wrapping_add(self.malformed)
            .wrapping_add(self.encap_skipped())
    }

    /// Adds another worker's counters (the control thread sums per-core copies).
    pub fn merge(&mut self, other: &PacketCounters) {
        self.measured = self.measured.wrapping_add(other.measured);
        self.arp = self.arp.wrapping_add(other.arp);
        self.unknown_ethertype = self.unknown_ethertype.wrapping_add(other.unknown_ethertype);
        self.fragment = self.fragment.wrapping_add(other.fragment);
        self.truncated = self.truncated.wrapping_add(other.truncated);
        self.malformed = self.malformed.wrapping_add(other.malformed);
        for (a, b) in self.encap.iter_mut().zip(other.encap) {
            *a = a.wrapping_add(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_has_its_own_counter() {
        for (i, r) in SkipReason::ALL.iter().enumerate() {
            let mut c = PacketCounters::default();
            for _ in 0..=i {
                c.record_skip(*r);
            }
            assert_eq!(c.skipped(*r), i as u64 + 1);
            assert_eq!(c.total(), i as u64 + 1);
            assert_eq!(c.measured, 0);
            assert_eq!(c.encap_skipped(), if r.is_encapsulation() { i as u64 + 1 } else { 0 });
            // No other reason shares the counter.
            for o in SkipReason::ALL.iter().filter(|o| *o != r) {
                assert_eq!(c.skipped(*o), 0, "{r:?} counted as {o:?}");
            }
        }
    }

    #[test]
    fn merge_adds_fieldwise() {
        let mut a = PacketCounters { measured: 3, malformed: 1, ..Default::default() };
        let b = PacketCounters { measured: 2, arp: 5, ..Default::default() };
        a.merge(&b);
        assert_eq!(a, PacketCounters { measured: 5, arp: 5, malformed: 1, ..Default::default() });
        assert_eq!(std::mem::align_of::<PacketCounters>(), 64);
    }
}
