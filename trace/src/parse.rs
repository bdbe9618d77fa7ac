//! A small, bounds-checked view of the frames the generator reads and writes: where the IP and
//! transport headers are, the flow key, the request/response exchange a frame belongs to (for
//! the fridge's ground truth), and the packet's invariant bytes (for matching the copies seen at
//! two points).
//!
//! This is the trace tool's own parser, used off the hot path; it never panics on any input and
//! never allocates except in [`invariant_bytes`]. The data plane has its own packet layer; the
//! rules here (what is measured, what is invariant) are documented so the two can be compared.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wirelat_dataplane::packet::{ExchangeKind, FlowKey, Role};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IP protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// IP protocol number of ICMPv6.
pub const PROTO_ICMPV6: u8 = 58;
/// The DNS port.
pub const DNS_PORT: u16 = 53;

/// TCP flag bits.
pub mod tcp_flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
}

/// Where the IP packet sits in a frame and what it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpView {
    /// Offset of the IP header in the frame.
    pub l3_offset: usize,
    /// End of the IP packet in the frame (total length, clipped to the captured bytes); Ethernet
    /// padding lies past it.
    pub l3_end: usize,
    /// 4 or 6.
    pub version: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Transport protocol (after IPv6 extension headers).
    pub protocol: u8,
    /// Offset of the transport header.
    pub l4_offset: usize,
    /// True for a fragment (IPv4 MF or offset, IPv6 fragment header).
    pub fragment: bool,
}

/// The transport fields the generator needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct L4View {
    /// Source port (0 without ports).
    pub src_port: u16,
    /// Destination port (0 without ports).
    pub dst_port: u16,
    /// TCP flags (0 for other protocols).
    pub tcp_flags: u8,
    /// TCP sequence number.
    pub tcp_seq: u32,
    /// TCP acknowledgement number.
    pub tcp_ack: u32,
    /// Offset of the transport payload in the frame.
    pub payload_offset: usize,
}

/// A parsed frame. `ip` is `None` for non-IP or malformed frames (forwarded, not measured).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameView {
    /// The EtherType after any VLAN tags.
    pub ethertype: u16,
    /// The IP layer, if the frame carries a well-formed IP header.
    pub ip: Option<IpView>,
    /// The transport layer, if TCP or UDP with a complete header, or ICMP.
    pub l4: Option<L4View>,
}

impl FrameView {
    /// True when the two-point synopses measure this frame: IP, not a fragment.
    pub fn measured(&self) -> bool {
        matches!(self.ip, Some(ip) if !ip.fragment)
    }

    /// The directional flow key (ports 0 for protocols without ports); `None` if not measured.
    pub fn flow_key(&self) -> Option<FlowKey> {
        let ip = self.ip.filter(|ip| !ip.fragment)?;
        let (sp, dp) = match (ip.protocol, self.l4) {
            (PROTO_TCP | PROTO_UDP, Some(l4)) => (l4.src_port, l4.dst_port),
            _ => (0, 0),
        };
        Some(FlowKey::new(ip.src, ip.dst, sp, dp, ip.protocol))
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([*b.get(at)?, *b.get(at + 1)?, *b.get(at + 2)?, *b.get(at + 3)?]))
}

/// Parses an Ethernet II frame (up to two VLAN tags). Never fails: what cannot be parsed is
/// reported as not IP.
pub fn parse(frame: &[u8]) -> FrameView {
    let mut off = 12;
    let mut ethertype = be16(frame, off).unwrap_or(0);
    let mut tags = 0;
    while (ethertype == 0x8100 || ethertype == 0x88a8) && tags < 2 {
        off += 4;
        ethertype = be16(frame, off).unwrap_or(0);
        tags += 1;
    }
    let l3 = off + 2;
    let ip = match ethertype {
        ETHERTYPE_IPV4 => parse_ipv4(frame, l3),
        ETHERTYPE_IPV6 => parse_ipv6(frame, l3),
        _ => None,
    };
    let l4 = ip.filter(|ip| !ip.fragment).and_then(|ip| parse_l4(frame, &ip));
    FrameView { ethertype, ip, l4 }
}

fn parse_ipv4(b: &[u8], off: usize) -> Option<IpView> {
    let vihl = *b.get(off)?;
    if vihl >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(vihl & 0x0f) * 4;
    if ihl < 20 || b.len() < off + ihl {
        return None;
    }
    let total = usize::from(be16(b, off + 2)?);
    if total < ihl {
        return None;
    }
    let frag = be16(b, off + 6)?;
    let fragment = frag & 0x2000 != 0 || frag & 0x1fff != 0;
    let src = Ipv4Addr::new(b[off + 12], b[off + 13], b[off + 14], b[off + 15]);
    let dst = Ipv4Addr::new(b[off + 16], b[off + 17], b[off + 18], b[off + 19]);
    Some(IpView {
        l3_offset: off,
        l3_end: (off + total).min(b.len()),
        version: 4,
        src: IpAddr::V4(src),
        dst: IpAddr::V4(dst),
        protocol: b[off + 9],
        l4_offset: off + ihl,
        fragment,
    })
}

fn parse_ipv6(b: &[u8], off: usize) -> Option<IpView> {
    if b.len() < off + 40 || b[off] >> 4 != 6 {
        return None;
    }
    let payload = usize::from(be16(b, off + 4)?);
    let src: [u8; 16] = b.get(off + 8..off + 24)?.try_into().ok()?;
    let dst: [u8; 16] = b.get(off + 24..off + 40)?.try_into().ok()?;
    let l3_end = (off + 40 + payload).min(b.len());
    let mut next = b[off + 6];
    let mut l4 = off + 40;
    let mut fragment = false;
    // Walk the extension headers a router does not touch: hop-by-hop, routing, destination
    // options (length in 8-byte units past the first 8), and the fragment header (8 bytes).
    for _ in 0..8 {
        match next {
            0 | 43 | 60 => {
                let n = *b.get(l4)?;
                let len = (usize::from(*b.get(l4 + 1)?) + 1) * 8;
                next = n;
                l4 += len;
            }
            44 => {
                next = *b.get(l4)?;
                fragment = true;
                l4 += 8;
            }
            _ => break,
        }
    }
    if l4 > l3_end {
        return None;
    }
    Some(IpView {
        l3_offset: off,
        l3_end,
        version: 6,
        src: IpAddr::V6(Ipv6Addr::from(src)),
        dst: IpAddr::V6(Ipv6Addr::from(dst)),
        protocol: next,
        l4_offset: l4,
        fragment,
    })
}

fn parse_l4(b: &[u8], ip: &IpView) -> Option<L4View> {
    let o = ip.l4_offset;
    let seg = b.get(o..ip.l3_end)?;
    match ip.protocol {
        PROTO_TCP => {
            let data_off = usize::from(*seg.get(12)? >> 4) * 4;
            if data_off < 20 || seg.len() < data_off {
                return None;
            }
            Some(L4View {
                src_port: be16(seg, 0)?,
                dst_port: be16(seg, 2)?,
                tcp_flags: *seg.get(13)?,
                tcp_seq: be32(seg, 4)?,
                tcp_ack: be32(seg, 8)?,
                payload_offset: o + data_off,
            })
        }
        PROTO_UDP if seg.len() >= 8 => Some(L4View {
            src_port: be16(seg, 0)?,
            dst_port: be16(seg, 2)?,
            payload_offset: o + 8,
            ..L4View::default()
        }),
        PROTO_ICMP | PROTO_ICMPV6 if seg.len() >= 4 => {
            Some(L4View { payload_offset: o + 4, ..L4View::default() })
        }
        _ => None,
    }
}

/// The bytes of a measured packet that no router changes in flight: the IP packet (up to its
/// total length, so Ethernet padding and the L2 header are excluded) with the DSCP/ECN bits
/// (IPv4 TOS byte, IPv6 traffic class), the TTL / hop limit and the IPv4 header checksum set to
/// zero. Transport headers and payload are kept whole (their checksums do not cover the fields a
/// router changes). `None` for frames that are not measured (non-IP, fragments, malformed).
pub fn invariant_bytes(frame: &[u8]) -> Option<Vec<u8>> {
    let v = parse(frame);
    let ip = v.ip.filter(|ip| !ip.fragment)?;
    let mut out = frame.get(ip.l3_offset..ip.l3_end)?.to_vec();
    if ip.version == 4 {
        // TOS (1), TTL (8), header checksum (10, 11).
        for i in [1, 8, 10, 11] {
            if let Some(x) = out.get_mut(i) {
                *x = 0;
            }
        }
    } else {
        // Traffic class: low nibble of byte 0, high nibble of byte 1; hop limit: byte 7.
        if let Some(x) = out.get_mut(0) {
            *x &= 0xf0;
        }
        if let Some(x) = out.get_mut(1) {
            *x &= 0x0f;
        }
        if let Some(x) = out.get_mut(7) {
            *x = 0;
        }
    }
    Some(out)
}

/// A 64-bit digest of [`invariant_bytes`] (xxh3, seed 0): equal for the copies of one packet at
/// both points, and for nothing else barring a 2⁻⁶⁴ collision.
pub fn invariant_digest(frame: &[u8]) -> Option<u64> {
    invariant_bytes(frame).map(|b| xxhash_rust::xxh3::xxh3_64(&b))
}

/// What pairs a request with its response: the request's directional flow and the number both
/// carry (TCP: SYN sequence + 1 = SYN/ACK acknowledgement; DNS: the transaction id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeKey {
    /// The request's directional flow (a response's flow reversed).
    pub request_flow: FlowKey,
    /// The pairing number.
    pub value: u32,
}

/// One side of a request/response exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExchangeSide {
    /// TCP handshake or DNS.
    pub kind: ExchangeKind,
    /// Request or response.
    pub role: Role,
    /// The pairing key.
    pub key: ExchangeKey,
}

/// Classifies a frame as a TCP handshake or DNS request/response (fridge spec §1.1):
/// - SYN without ACK is a handshake request keyed by seq + 1; SYN+ACK is its response keyed by
///   ack on the reversed flow.
/// - A DNS message (UDP, or TCP with the 2-byte length prefix, the prefix and a 12-byte header in
///   one segment) with destination port 53 and QR = 0 is a query; with source port 53 and QR = 1 a
///   reply, keyed by the transaction id.
pub fn exchange(frame: &[u8]) -> Option<ExchangeSide> {
    let v = parse(frame);
    let flow = v.flow_key()?;
    let l4 = v.l4?;
    let ip = v.ip?;
    match ip.protocol {
        PROTO_TCP => {
            let syn = l4.tcp_flags & tcp_flags::SYN != 0;
            let ack = l4.tcp_flags & tcp_flags::ACK != 0;
            let rst = l4.tcp_flags & tcp_flags::RST != 0;
            if syn && !rst {
                return Some(if ack {
                    ExchangeSide {
                        kind: ExchangeKind::TcpHandshake,
                        role: Role::Response,
                        key: ExchangeKey { request_flow: flow.reversed(), value: l4.tcp_ack },
                    }
                } else {
                    ExchangeSide {
                        kind: ExchangeKind::TcpHandshake,
                        role: Role::Request,
                        key: ExchangeKey { request_flow: flow, value: l4.tcp_seq.wrapping_add(1) },
                    }
                });
            }
            let payload = frame.get(l4.payload_offset..ip.l3_end)?;
            if payload.len() < 14 {
                return None;
            }
            dns(flow, &l4, payload.get(2..)?)
        }
        PROTO_UDP => dns(flow, &l4, frame.get(l4.payload_offset..ip.l3_end)?),
        _ => None,
    }
}

fn dns(flow: FlowKey, l4: &L4View, msg: &[u8]) -> Option<ExchangeSide> {
    if msg.len() < 12 {
        return None;
    }
    let id = u32::from(be16(msg, 0)?);
    let qr = msg[2] & 0x80 != 0;
    if !qr && l4.dst_port == DNS_PORT {
        Some(ExchangeSide {
            kind: ExchangeKind::Dns,
            role: Role::Request,
            key: ExchangeKey { request_flow: flow, value: id },
        })
    } else if qr && l4.src_port == DNS_PORT {
        Some(ExchangeSide {
            kind: ExchangeKind::Dns,
            role: Role::Response,
            key: ExchangeKey { request_flow: flow.reversed(), value: id },
        })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_not_ip() {
        for len in 0..80 {
            let f = vec![0xffu8; len];
            let v = parse(&f);
            assert!(!v.measured());
            assert!(invariant_bytes(&f).is_none());
            assert!(exchange(&f).is_none());
        }
    }

    proptest::proptest! {
        /// Any bytes, and any valid frame with random damage, parse without panicking, and the
        /// in-flight rewrite keeps the invariant bytes of whatever parses as IP.
        #[test]
        fn arbitrary_frames_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            ethertype in proptest::sample::select(vec![0x0800u16, 0x86dd, 0x8100, 0x0806, 0x1234]),
            version in 0u8..16,
        ) {
            let mut f = bytes.clone();
            if f.len() > 14 {
                f[12..14].copy_from_slice(&ethertype.to_be_bytes());
                f[14] = (version << 4) | (f[14] & 0x0f);
            }
            for frame in [&bytes, &f] {
                let v = parse(frame);
                let _ = v.flow_key();
                let _ = exchange(frame);
                let inv = invariant_bytes(frame);
                let rw = crate::frame::InFlight {
                    macs: crate::frame::MacPair { src: [1; 6], dst: [2; 6] },
                    decrement_ttl: true,
                    dscp: Some(7),
                };
                let g = crate::frame::rewrite_in_flight(frame, &rw);
                proptest::prop_assert_eq!(g.len(), frame.len());
                proptest::prop_assert_eq!(invariant_bytes(&g), inv);
            }
            let recs = vec![crate::pcap_io::Record { ts_ns: 1, data: f.clone() }, crate::pcap_io::Record { ts_ns: 0, data: bytes }];
            proptest::prop_assert_eq!(crate::base::directions(&recs).len(), 2);
        }
    }

    #[test]
    fn truncated_ipv4_is_refused() {
        let mut f = vec![0u8; 14 + 19];
        f[12] = 0x08;
        f[14] = 0x45;
        assert!(parse(&f).ip.is_none());
    }
}
