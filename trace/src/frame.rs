//! Frame builders for the packets the generator emits (Ethernet II + IPv4/IPv6 + TCP/UDP/ICMP,
//! ARP, DNS messages), and the in-flight rewrite that turns the copy a packet has at its upstream
//! point into the copy the downstream point sees (what a router changes: MAC addresses, TTL /
//! hop limit, IPv4 header checksum, optionally DSCP).
//!
//! Built on etherparse's `PacketBuilder` (lengths and checksums are its job). Nothing here reads
//! a clock or draws random numbers: every field is given by the caller.

use crate::error::{Result, TraceError};
use crate::parse;
use etherparse::{
    ArpHardwareId, ArpOperation, ArpPacket, EtherType, IpDscp, IpHeaders, IpNumber, Ipv4Header,
    Ipv6FlowLabel, Ipv6Header, PacketBuilder, TcpOptionElement,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Minimum Ethernet frame length without FCS: shorter frames are zero-padded.
pub const MIN_FRAME_LEN: usize = 60;

/// Source and destination MAC addresses of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacPair {
    /// Source MAC.
    pub src: [u8; 6],
    /// Destination MAC.
    pub dst: [u8; 6],
}

/// IP header fields the caller chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpFields {
    /// TTL (IPv4) or hop limit (IPv6).
    pub ttl: u8,
    /// DSCP (6 bits; higher bits ignored).
    pub dscp: u8,
    /// IPv4 identification (ignored for IPv6).
    pub ipv4_id: u16,
    /// IPv6 flow label (20 bits; ignored for IPv4).
    pub flow_label: u32,
}

/// TCP header fields the caller chooses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpFields {
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number; `Some` sets the ACK flag.
    pub ack: Option<u32>,
    /// Other flags ([`parse::tcp_flags`] SYN, FIN, PSH, RST; ACK comes from `ack`).
    pub flags: u8,
    /// Receive window.
    pub window: u16,
    /// Options (MSS, window scale, SACK permitted, timestamps, ...).
    pub options: Vec<TcpOptionElement>,
}

fn ip_headers(src: IpAddr, dst: IpAddr, ip: &IpFields) -> Result<IpHeaders> {
    let dscp = IpDscp::try_new(ip.dscp & 0x3f).map_err(|e| TraceError::Build(e.to_string()))?;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = Ipv4Header::new(0, ip.ttl, IpNumber::TCP, s.octets(), d.octets())
                .map_err(|e| TraceError::Build(e.to_string()))?;
            h.identification = ip.ipv4_id;
            h.dscp = dscp;
            Ok(IpHeaders::Ipv4(h, Default::default()))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let h = Ipv6Header {
                traffic_class: dscp.value() << 2,
                flow_label: Ipv6FlowLabel::try_new(ip.flow_label & 0xf_ffff)
                    .map_err(|e| TraceError::Build(e.to_string()))?,
                payload_length: 0,
                next_header: IpNumber::TCP,
                hop_limit: ip.ttl,
                source: s.octets(),
                destination: d.octets(),
            };
            Ok(IpHeaders::Ipv6(h, Default::default()))
        }
        _ => Err(TraceError::Build(format!("mixed address families {src} -> {dst}"))),
    }
}

fn finish(mut frame: Vec<u8>) -> Vec<u8> {
    if frame.len() < MIN_FRAME_LEN {
        frame.resize(MIN_FRAME_LEN, 0);
    }
    frame
}

/// A TCP segment in an Ethernet frame.
pub fn tcp(
    l2: MacPair,
    src: SocketAddr,
    dst: SocketAddr,
    ip: &IpFields,
    tcp: &TcpFields,
    payload: &[u8],
) -> Result<Vec<u8>> {
    let mut b = PacketBuilder::ethernet2(l2.src, l2.dst).ip(ip_headers(src.ip(), dst.ip(), ip)?).tcp(
        src.port(),
        dst.port(),
        tcp.seq,
        tcp.window,
    );
    if tcp.flags & parse::tcp_flags::SYN != 0 {
        b = b.syn();
    }
    if tcp.flags & parse::tcp_flags::FIN != 0 {
        b = b.fin();
    }
    if tcp.flags & parse::tcp_flags::RST != 0 {
        b = b.rst();
    }
    if tcp.flags & parse::tcp_flags::PSH != 0 {
        b = b.psh();
    }
    if let Some(a) = tcp.ack {
        b = b.ack(a);
    }
    if !tcp.options.is_empty() {
        b = b.options(&tcp.options).map_err(|e| TraceError::Build(e.to_string()))?;
    }
    let mut out = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut out, payload).map_err(|e| TraceError::Build(e.to_string()))?;
    Ok(finish(out))
}

/// A UDP datagram in an Ethernet frame.
pub fn udp(l2: MacPair, src: SocketAddr, dst: SocketAddr, ip: &IpFields, payload: &[u8]) -> Result<Vec<u8>> {
    let b = PacketBuilder::ethernet2(l2.src, l2.dst)
        .ip(ip_headers(src.ip(), dst.ip(), ip)?)
        .udp(src.port(), dst.port());
    let mut out = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut out, payload).map_err(|e| TraceError::Build(e.to_string()))?;
    Ok(finish(out))
}

/// ICMP echo fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Echo {
    /// Request (true) or reply.
    pub request: bool,
    /// Identifier.
    pub id: u16,
    /// Sequence number.
    pub seq: u16,
}

/// An ICMP (IPv4) or ICMPv6 echo request or reply.
pub fn icmp_echo(
    l2: MacPair,
    src: IpAddr,
    dst: IpAddr,
    ip: &IpFields,
    echo: Echo,
    payload: &[u8],
) -> Result<Vec<u8>> {
    let base = PacketBuilder::ethernet2(l2.src, l2.dst).ip(ip_headers(src, dst, ip)?);
    let mut out = Vec::new();
    let Echo { request, id, seq } = echo;
    let r = match (src, request) {
        (IpAddr::V4(_), true) => base.icmpv4_echo_request(id, seq).write(&mut out, payload),
        (IpAddr::V4(_), false) => base.icmpv4_echo_reply(id, seq).write(&mut out, payload),
        (IpAddr::V6(_), true) => base.icmpv6_echo_request(id, seq).write(&mut out, payload),
        (IpAddr::V6(_), false) => base.icmpv6_echo_reply(id, seq).write(&mut out, payload),
    };
    r.map_err(|e| TraceError::Build(e.to_string()))?;
    Ok(finish(out))
}

/// An ARP request (`target_mac` all zero, broadcast) or reply over Ethernet.
pub fn arp(
    l2: MacPair,
    request: bool,
    sender_mac: [u8; 6],
    sender_ip: Ipv4Addr,
    target_mac: [u8; 6],
    target_ip: Ipv4Addr,
) -> Result<Vec<u8>> {
    let op = if request { ArpOperation::REQUEST } else { ArpOperation::REPLY };
    let pkt = ArpPacket::new(
        ArpHardwareId::ETHERNET,
        EtherType::IPV4,
        op,
        &sender_mac,
        &sender_ip.octets(),
        &target_mac,
        &target_ip.octets(),
    )
    .map_err(|e| TraceError::Build(e.to_string()))?;
    let b = PacketBuilder::ethernet2(l2.src, l2.dst).arp(pkt);
    let mut out = Vec::new();
    b.write(&mut out).map_err(|e| TraceError::Build(e.to_string()))?;
    Ok(finish(out))
}

/// DNS record types the generator asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DnsType {
    /// IPv4 address record.
    A,
    /// IPv6 address record.
    Aaaa,
}

impl DnsType {
    fn code(self) -> u16 {
        match self {
            DnsType::A => 1,
            DnsType::Aaaa => 28,
        }
    }

    fn rdata_len(self) -> usize {
        match self {
            DnsType::A => 4,
            DnsType::Aaaa => 16,
        }
    }
}

fn dns_question(out: &mut Vec<u8>, name: &str, qtype: DnsType) -> Result<()> {
    for label in name.split('.').filter(|l| !l.is_empty()) {
        let len = u8::try_from(label.len()).ok().filter(|l| *l < 64);
        let len = len.ok_or_else(|| TraceError::Build(format!("DNS label too long: {label}")))?;
        out.push(len);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&qtype.code().to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    Ok(())
}

/// A DNS query message (recursion desired, one question).
pub fn dns_query(id: u16, name: &str, qtype: DnsType) -> Result<Vec<u8>> {
    let mut m = Vec::with_capacity(32 + name.len());
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    dns_question(&mut m, name, qtype)?;
    Ok(m)
}

/// A DNS reply to [`dns_query`] with `answers` records whose data bytes come from `rdata_seed`.
pub fn dns_reply(id: u16, name: &str, qtype: DnsType, answers: u16, rdata_seed: u64) -> Result<Vec<u8>> {
    let mut m = Vec::with_capacity(64 + name.len() + usize::from(answers) * 28);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0x81, 0x80, 0, 1]);
    m.extend_from_slice(&answers.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 0]);
    dns_question(&mut m, name, qtype)?;
    for i in 0..answers {
        // Name: pointer to the question at offset 12.
        m.extend_from_slice(&[0xc0, 0x0c]);
        m.extend_from_slice(&qtype.code().to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        m.extend_from_slice(&300u32.to_be_bytes());
        let len = qtype.rdata_len();
        m.extend_from_slice(&(len as u16).to_be_bytes());
        let bytes = wirelat_dataplane::synopsis::hash::derive(u64::from(i), rdata_seed).to_be_bytes();
        for k in 0..len {
            m.push(bytes[k % 8] ^ (k as u8));
        }
    }
    Ok(m)
}

/// What the network between the two points changes in a packet (the identity must not depend on
/// any of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// The MAC addresses the downstream point sees.
    pub macs: MacPair,
    /// Decrement TTL / hop limit by one (saturating at 0) and recompute the IPv4 checksum.
    pub decrement_ttl: bool,
    /// Rewrite DSCP to this value (ECN bits kept).
    pub dscp: Option<u8>,
}

/// The IPv4 header checksum over `header` (whose checksum field must be zero).
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for pair in header.chunks(2) {
        let hi = u32::from(pair[0]) << 8;
        let lo = pair.get(1).copied().map(u32::from).unwrap_or(0);
        sum += hi | lo;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The copy of `frame` the downstream point sees. Non-IP frames only get the new MACs.
pub fn rewrite_in_flight(frame: &[u8], rw: &InFlight) -> Vec<u8> {
    let mut out = frame.to_vec();
    if out.len() >= 12 {
        out[0..6].copy_from_slice(&rw.macs.dst);
        out[6..12].copy_from_slice(&rw.macs.src);
    }
    let Some(ip) = parse::parse(frame).ip else {
        return out;
    };
    let o = ip.l3_offset;
    if ip.version == 4 {
        let ihl = ip.l4_offset - o;
        if rw.decrement_ttl {
            out[o + 8] = out[o + 8].saturating_sub(1);
        }
        if let Some(d) = rw.dscp {
            out[o + 1] = ((d & 0x3f) << 2) | (out[o + 1] & 0x03);
        }
        out[o + 10] = 0;
        out[o + 11] = 0;
        let c = ipv4_checksum(&out[o..o + ihl]);
        out[o + 10..o + 12].copy_from_slice(&c.to_be_bytes());
    } else {
        if rw.decrement_ttl {
            out[o + 7] = out[o + 7].saturating_sub(1);
        }
        if let Some(d) = rw.dscp {
            let tc = ((out[o] & 0x0f) << 4) | (out[o + 1] >> 4);
            let tc = ((d & 0x3f) << 2) | (tc & 0x03);
            out[o] = 0x60 | (tc >> 4);
            out[o + 1] = (tc << 4) | (out[o + 1] & 0x0f);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const L2: MacPair = MacPair { src: [2, 0, 0, 0, 0, 1], dst: [2, 0, 0, 0, 0, 2] };

    fn ipf() -> IpFields {
        IpFields { ttl: 64, dscp: 0, ipv4_id: 7, flow_label: 0x12345 }
    }

    #[test]
    fn built_tcp_syn_parses_back() {
        let t = TcpFields {
            seq: 1000,
            ack: None,
            flags: parse::tcp_flags::SYN,
            window: 65535,
            options: vec![TcpOptionElement::MaximumSegmentSize(1460)],
        };
        for (s, d) in [("192.0.2.1:40000", "198.51.100.2:80"), ("[2001:db8::1]:40000", "[2001:db8::2]:80")] {
            let f = tcp(L2, s.parse().unwrap(), d.parse().unwrap(), &ipf(), &t, &[]).unwrap();
            let x = parse::exchange(&f).unwrap();
            assert_eq!(x.role, wirelat_dataplane::packet::Role::Request);
            assert_eq!(x.key.value, 1001);
            // etherparse agrees the frame is well formed.
            assert!(etherparse::SlicedPacket::from_ethernet(&f).is_ok());
        }
    }

    #[test]
    fn rewrite_changes_only_what_a_router_changes() {
        let t = TcpFields { seq: 1, ack: Some(2), flags: 0, window: 100, options: vec![] };
        for (s, d) in [("192.0.2.1:1", "198.51.100.2:2"), ("[2001:db8::1]:1", "[2001:db8::2]:2")] {
            let f = tcp(L2, s.parse().unwrap(), d.parse().unwrap(), &ipf(), &t, b"hello").unwrap();
            let rw = InFlight {
                macs: MacPair { src: [2, 0, 0, 0, 9, 1], dst: [2, 0, 0, 0, 9, 2] },
                decrement_ttl: true,
                dscp: Some(46),
            };
            let g = rewrite_in_flight(&f, &rw);
            assert_ne!(f, g);
            assert_eq!(parse::invariant_bytes(&f), parse::invariant_bytes(&g));
            let p = etherparse::SlicedPacket::from_ethernet(&g).unwrap();
            match p.net.unwrap() {
                etherparse::NetSlice::Ipv4(h) => {
                    assert_eq!(h.header().ttl(), 63);
                    assert_eq!(h.header().dcp().value(), 46);
                    let hdr = h.header().to_header();
                    assert_eq!(hdr.header_checksum, hdr.calc_header_checksum());
                }
                etherparse::NetSlice::Ipv6(h) => {
                    assert_eq!(h.header().hop_limit(), 63);
                    assert_eq!(h.header().traffic_class() >> 2, 46);
                    assert_eq!(h.header().flow_label().value(), 0x12345);
                }
                _ => panic!("not IP"),
            }
        }
    }

    #[test]
    fn dns_messages_classify() {
        let q = dns_query(0xbeef, "www.example.com", DnsType::A).unwrap();
        let r = dns_reply(0xbeef, "www.example.com", DnsType::A, 2, 1).unwrap();
        let fq =
            udp(L2, "192.0.2.1:5000".parse().unwrap(), "192.0.2.53:53".parse().unwrap(), &ipf(), &q).unwrap();
        let fr =
            udp(L2, "192.0.2.53:53".parse().unwrap(), "192.0.2.1:5000".parse().unwrap(), &ipf(), &r).unwrap();
        let (a, b) = (parse::exchange(&fq).unwrap(), parse::exchange(&fr).unwrap());
        assert_eq!(a.key, b.key);
        assert_eq!(a.role, wirelat_dataplane::packet::Role::Request);
        assert_eq!(b.role, wirelat_dataplane::packet::Role::Response);
    }

    #[test]
    fn short_frames_are_padded_and_padding_is_not_identity() {
        let f = arp(
            MacPair { src: [2, 0, 0, 0, 0, 1], dst: [0xff; 6] },
            true,
            [2, 0, 0, 0, 0, 1],
            "192.0.2.1".parse().unwrap(),
            [0; 6],
            "192.0.2.2".parse().unwrap(),
        )
        .unwrap();
        assert_eq!(f.len(), MIN_FRAME_LEN);
        assert!(!parse::parse(&f).measured());
        let t = TcpFields { seq: 1, ack: Some(2), flags: 0, window: 100, options: vec![] };
        let g =
            tcp(L2, "192.0.2.1:1".parse().unwrap(), "192.0.2.2:2".parse().unwrap(), &ipf(), &t, &[]).unwrap();
        assert_eq!(g.len(), MIN_FRAME_LEN);
        assert_eq!(parse::invariant_bytes(&g).unwrap().len(), 40);
    }
}
