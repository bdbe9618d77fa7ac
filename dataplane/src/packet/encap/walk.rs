//! The walk from the Ethernet header to the innermost IP packet.
//!
//! One loop over "an ethertype and the bytes after it": each layer either hands the loop the
//! next ethertype (tags, labels, PPPoE, GRE, an inner Ethernet header) or, for an IP packet,
//! ends the walk there or opens the tunnel it carries. Every encapsulation header counts
//! towards [`EncapConfig::max_depth`], which bounds the loop whatever the frame holds.

use super::{Encap, EncapConfig, EncapKind};
use crate::packet::class::SkipReason;
use crate::packet::ethernet::{EthernetFrame, ethertype};
use crate::packet::field::{be16, be32};
use crate::packet::ipv4::Ipv4Packet;
use crate::packet::ipv6::Ipv6Packet;
use crate::packet::ipv6_ext::{self, UpperLayer};
use crate::packet::udp::UdpDatagram;
use crate::packet::vlan::{self, VlanTag};

/// MPLS unicast and multicast ethertypes.
const MPLS_UNICAST: u16 = 0x8847;
const MPLS_MULTICAST: u16 = 0x8848;
/// PPPoE discovery and session stages.
const PPPOE_DISCOVERY: u16 = 0x8863;
const PPPOE_SESSION: u16 = 0x8864;
/// Transparent Ethernet bridging: GRE carrying an Ethernet frame (NVGRE, Ethernet over GRE).
const TRANSPARENT_ETHERNET: u16 = 0x6558;

/// IP protocols of the IP tunnels.
const PROTOCOL_IPIP: u8 = 4;
const PROTOCOL_IPV6_IN_IP: u8 = 41;
const PROTOCOL_GRE: u8 = 47;
const PROTOCOL_UDP: u8 = 17;

/// PPP protocol numbers of IPv4 and IPv6.
const PPP_IPV4: u16 = 0x0021;
const PPP_IPV6: u16 = 0x0057;

/// GTP-U G-PDU, the message that carries a user packet.
const GTPU_G_PDU: u8 = 0xff;

/// The innermost IP packet the walk found.
#[derive(Clone, Copy, Debug)]
pub enum Inner<'a> {
    /// IPv4, not a fragment.
    V4(Ipv4Packet<'a>),
    /// IPv6 with its extension headers walked, not a fragment.
    V6(Ipv6Packet<'a>, UpperLayer<'a>),
}

/// Finds the packet to measure in `frame` and the innermost encapsulation identifier on the
/// way, or the reason the frame is skipped.
#[inline(always)]
pub fn locate<'a>(frame: &'a [u8], cfg: &EncapConfig) -> Result<(Inner<'a>, Encap), SkipReason> {
    let eth = EthernetFrame::new_checked(frame)?;
    let mut ether = eth.ethertype();
    let mut buf = eth.payload();
    let mut encap = Encap::NONE;
    let mut depth = 0u8;
    // Each layer that is walked (not the measured IP header) counts one.
    let mut deeper = || {
        depth = depth.saturating_add(1);
        if depth > cfg.max_depth { Err(SkipReason::EncapTooDeep) } else { Ok(()) }
    };
    loop {
        match ether {
            ethertype::IPV4 => {
                let ip = Ipv4Packet::new_checked(buf)?;
                if ip.is_fragment() {
                    return Err(SkipReason::Fragment);
                }
                match tunnel(ip.protocol(), ip.payload(), cfg, &mut encap)? {
                    Some((next, inner)) => (ether, buf) = (next, inner),
                    None => return Ok((Inner::V4(ip), encap)),
                }
            }
            ethertype::IPV6 => {
                let ip = Ipv6Packet::new_checked(buf)?;
                // The IPv6 payload is complete here, so a chain running past it is malformed.
                let up = ipv6_ext::walk(ip.next_header(), ip.payload()).map_err(|_| SkipReason::Malformed)?;
                if up.is_fragment() {
                    return Err(SkipReason::Fragment);
                }
                match tunnel(up.protocol, up.payload, cfg, &mut encap)? {
                    Some((next, inner)) => (ether, buf) = (next, inner),
                    None => return Ok((Inner::V6(ip, up), encap)),
                }
            }
            t if vlan::is_tpid(t) && cfg.vlan => {
                let tag = VlanTag::new_checked(buf)?;
                encap = Encap::new(EncapKind::Vlan, u32::from(tag.vid()));
                (ether, buf) = (tag.ethertype(), tag.payload());
            }
            MPLS_UNICAST | MPLS_MULTICAST if cfg.mpls => {
                (ether, buf) = mpls(buf, cfg, &mut encap, &mut deeper)?;
                continue;
            }
            PPPOE_SESSION if cfg.pppoe => {
                (ether, buf) = pppoe(buf, &mut encap)?;
            }
            PPPOE_DISCOVERY if cfg.pppoe => return Err(SkipReason::Pppoe),
            ethertype::ARP => return Err(SkipReason::Arp),
            _ => return Err(SkipReason::UnknownEthertype),
        }
        deeper()?;
    }
}

/// The layer an IP packet of `protocol` carrying `payload` opens, as the next ethertype and
/// its bytes, or `None` when the packet is the one to measure.
#[inline(always)]
fn tunnel<'a>(
    protocol: u8,
    payload: &'a [u8],
    cfg: &EncapConfig,
    encap: &mut Encap,
) -> Result<Option<(u16, &'a [u8])>, SkipReason> {
    match protocol {
        PROTOCOL_UDP if cfg.vxlan || cfg.gtpu => {
            // A datagram whose header does not fit is the transport layer's to report.
            let Ok(dgram) = UdpDatagram::new_checked(payload) else { return Ok(None) };
            let port = dgram.dst_port();
            if cfg.vxlan && cfg.is_vxlan_port(port) {
                vxlan(dgram.payload(), encap).map(Some)
            } else if cfg.gtpu && cfg.is_gtpu_port(port) {
                gtpu(dgram.payload(), encap).map(Some)
            } else {
                Ok(None)
            }
        }
        PROTOCOL_GRE if cfg.gre => gre(payload, encap).map(Some),
        PROTOCOL_IPIP if cfg.ip_in_ip => Ok(Some((ethertype::IPV4, payload))),
        PROTOCOL_IPV6_IN_IP if cfg.ip_in_ip => Ok(Some((ethertype::IPV6, payload))),
        _ => Ok(None),
    }
}

/// The ethertype of an IP packet from its version nibble, or `None`.
#[inline(always)]
fn ip_by_version(first: u8) -> Option<u16> {
    match first >> 4 {
        4 => Some(ethertype::IPV4),
        6 => Some(ethertype::IPV6),
        _ => None,
    }
}

/// The ethertype and bytes of an inner Ethernet frame (VXLAN, Ethernet over GRE or MPLS).
#[inline(always)]
fn inner_ethernet(buf: &[u8]) -> Result<(u16, &[u8]), SkipReason> {
    let eth = EthernetFrame::new_checked(buf)?;
    Ok((eth.ethertype(), eth.payload()))
}

/// Walks an MPLS label stack to its bottom (each label counts towards the depth) and decides
/// what it carries. The identifier is the bottom label: the one that names the service (VPN,
/// pseudowire) rather than the path.
#[inline(always)]
fn mpls<'a>(
    mut buf: &'a [u8],
    cfg: &EncapConfig,
    encap: &mut Encap,
    deeper: &mut impl FnMut() -> Result<(), SkipReason>,
) -> Result<(u16, &'a [u8]), SkipReason> {
    loop {
        deeper()?;
        let (entry, rest) = buf.split_first_chunk::<4>().ok_or(SkipReason::Truncated)?;
        let entry = be32::<0, 4>(entry);
        buf = rest;
        if entry & 0x100 != 0 {
            *encap = Encap::new(EncapKind::Mpls, entry >> 12);
            break;
        }
    }
    let first = *buf.first().ok_or(SkipReason::Truncated)?;
    if let Some(ether) = ip_by_version(first) {
        return Ok((ether, buf));
    }
    if first >> 4 == 0 && cfg.mpls_control_word {
        let (_, frame) = buf.split_first_chunk::<4>().ok_or(SkipReason::Truncated)?;
        return inner_ethernet(frame);
    }
    Err(SkipReason::Mpls)
}

/// A PPPoE session header and its PPP protocol field (RFC 2516, RFC 1661; a compressed one-byte
/// protocol field accepted).
#[inline(always)]
fn pppoe<'a>(buf: &'a [u8], encap: &mut Encap) -> Result<(u16, &'a [u8]), SkipReason> {
    let (h, rest) = buf.split_first_chunk::<6>().ok_or(SkipReason::Truncated)?;
    // Version 1, type 1, code 0 (session data).
    if h[0] != 0x11 || h[1] != 0 {
        return Err(SkipReason::Pppoe);
    }
    *encap = Encap::new(EncapKind::Pppoe, u32::from(be16::<2, 6>(h)));
    // The PPPoE length covers the PPP protocol field and the packet, not the padding.
    let ppp = rest.get(..usize::from(be16::<4, 6>(h))).ok_or(SkipReason::Truncated)?;
    let first = *ppp.first().ok_or(SkipReason::Pppoe)?;
    let (protocol, packet) = if first & 1 == 1 {
        (u16::from(first), ppp.get(1..).unwrap_or_default())
    } else {
        let (p, packet) = ppp.split_first_chunk::<2>().ok_or(SkipReason::Pppoe)?;
        (u16::from_be_bytes(*p), packet)
    };
    match protocol {
        PPP_IPV4 => Ok((ethertype::IPV4, packet)),
        PPP_IPV6 => Ok((ethertype::IPV6, packet)),
        // LCP, IPCP, PAP, ...: control traffic, nothing to measure.
        _ => Err(SkipReason::Pppoe),
    }
}

/// A GRE header, version 0 (RFC 2784, key and sequence number of RFC 2890). Routing and the
/// RFC 1701 recursion/flag bits are refused, and so is version 1 (PPTP).
#[inline(always)]
fn gre<'a>(buf: &'a [u8], encap: &mut Encap) -> Result<(u16, &'a [u8]), SkipReason> {
    let (h, mut rest) = buf.split_first_chunk::<4>().ok_or(SkipReason::Truncated)?;
    let flags = be16::<0, 4>(h);
    if flags & 0x4fff != 0 {
        return Err(SkipReason::Gre);
    }
    let word = |rest: &mut &'a [u8]| -> Result<u32, SkipReason> {
        let (w, r) = rest.split_first_chunk::<4>().ok_or(SkipReason::Truncated)?;
        *rest = r;
        Ok(be32::<0, 4>(w))
    };
    if flags & 0x8000 != 0 {
        word(&mut rest)?; // checksum and reserved1
    }
    if flags & 0x2000 != 0 {
        *encap = Encap::new(EncapKind::Gre, word(&mut rest)?);
    }
    if flags & 0x1000 != 0 {
        word(&mut rest)?; // sequence number
    }
    match be16::<2, 4>(h) {
        p @ (ethertype::IPV4 | ethertype::IPV6 | MPLS_UNICAST | MPLS_MULTICAST) => Ok((p, rest)),
        TRANSPARENT_ETHERNET => inner_ethernet(rest),
        _ => Err(SkipReason::Gre),
    }
}

/// A VXLAN header (RFC 7348): the I flag must be set; the VNI is the identifier.
#[inline(always)]
fn vxlan<'a>(buf: &'a [u8], encap: &mut Encap) -> Result<(u16, &'a [u8]), SkipReason> {
    let (h, rest) = buf.split_first_chunk::<8>().ok_or(SkipReason::Truncated)?;
    if h[0] & 0x08 == 0 {
        return Err(SkipReason::Vxlan);
    }
    *encap = Encap::new(EncapKind::Vxlan, be32::<4, 8>(h) >> 8);
    inner_ethernet(rest)
}

/// A GTP-U header (3GPP TS 29.281): version 1, protocol type GTP, a G-PDU, with the optional
/// fields and extension headers skipped; the TEID is the identifier. Other messages (echo,
/// error indication, end marker) carry no user packet and are skipped as `gtpu`.
#[inline(always)]
fn gtpu<'a>(buf: &'a [u8], encap: &mut Encap) -> Result<(u16, &'a [u8]), SkipReason> {
    let (h, rest) = buf.split_first_chunk::<8>().ok_or(SkipReason::Truncated)?;
    let flags = h[0];
    if flags >> 5 != 1 || flags & 0x10 == 0 || h[1] != GTPU_G_PDU {
        return Err(SkipReason::Gtpu);
    }
    *encap = Encap::new(EncapKind::Gtpu, be32::<4, 8>(h));
    // The length counts everything after the mandatory 8 bytes.
    let mut body = rest.get(..usize::from(be16::<2, 8>(h))).ok_or(SkipReason::Truncated)?;
    if flags & 0x07 != 0 {
        // Sequence number, N-PDU number, next extension header type.
        let (opt, r) = body.split_first_chunk::<4>().ok_or(SkipReason::Gtpu)?;
        body = r;
        let mut next = opt[3];
        // Each extension is a whole number of 4-byte units, at least one, so the chain
        // ends within the body.
        while next != 0 {
            let units = usize::from(*body.first().ok_or(SkipReason::Gtpu)?);
            if units == 0 {
                return Err(SkipReason::Gtpu);
            }
            let ext = body.get(..units * 4).ok_or(SkipReason::Gtpu)?;
            next = *ext.last().ok_or(SkipReason::Gtpu)?;
            body = body.get(units * 4..).unwrap_or_default();
        }
    }
    let first = *body.first().ok_or(SkipReason::Gtpu)?;
    let ether = ip_by_version(first).ok_or(SkipReason::Gtpu)?;
    Ok((ether, body))
}
