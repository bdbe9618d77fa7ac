//! The per-packet entry point: one call turns a frame into a skip reason or into everything a
//! synopsis needs (flow key, flow hash, packet identity, exchange).
//!
//! One pass over the headers, no allocation, no panic, no read outside `frame`: every header is
//! read through a checked view. Order of decisions: Ethernet → VLAN/QinQ tags → ethertype
//! (ARP, unknown) → IP header (truncated, malformed) → fragment → transport header (a
//! transport header that does not fit its complete IP packet is malformed) → measured.

use super::class::{PacketCounters, SkipReason};
use super::classify;
use super::config::PacketConfig;
use super::ethernet::{EthernetFrame, ethertype};
use super::exchange::Exchange;
use super::flow::FlowKey;
use super::icmp::{self, IcmpMessage};
use super::identity::InvariantBytes;
use super::ipv4::Ipv4Packet;
use super::ipv6::Ipv6Packet;
use super::ipv6_ext;
use super::tcp::TcpSegment;
use super::udp::UdpDatagram;
use super::vlan;
use crate::synopsis::Observation;

/// IP protocol number of TCP.
pub const PROTOCOL_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

/// What a measured packet gives the synopses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measurement {
    /// The directional 5-tuple.
    pub flow: FlowKey,
    /// `flow.hash(identity_seed)`.
    pub flow_hash: u64,
    /// The packet identity (see [`super::identity`]).
    pub identity: u64,
    /// Request/response classification, when a classifier recognised the packet.
    pub exchange: Option<Exchange>,
}

impl Measurement {
    /// The observation the synopses' `update` takes, stamped `ts_ns`.
    #[inline(always)]
    pub fn observation(&self, ts_ns: u64) -> Observation<'_> {
        Observation {
            ts_ns,
            flow: &self.flow,
            flow_hash: self.flow_hash,
            identity: self.identity,
            exchange: self.exchange,
        }
    }
}

/// The packet layer's verdict on one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inspection {
    /// The frame is an unfragmented IPv4/IPv6 packet with a complete transport header.
    Measured(Measurement),
    /// The frame is forwarded but not measured.
    Skipped(SkipReason),
}

impl Inspection {
    /// The measurement, if any.
    pub fn measurement(&self) -> Option<&Measurement> {
        match self {
            Inspection::Measured(m) => Some(m),
            Inspection::Skipped(_) => None,
        }
    }

    /// The skip reason, if any.
    pub fn skip_reason(&self) -> Option<SkipReason> {
        match self {
            Inspection::Measured(_) => None,
            Inspection::Skipped(r) => Some(*r),
        }
    }
}

/// Inspects one frame (starting at the Ethernet header) and counts the verdict in `counters`.
#[inline]
pub fn inspect(frame: &[u8], cfg: &PacketConfig, counters: &mut PacketCounters) -> Inspection {
    match measure(frame, cfg) {
        Ok(m) => {
            counters.record_measured();
            Inspection::Measured(m)
        }
        Err(r) => {
            counters.record_skip(r);
            Inspection::Skipped(r)
        }
    }
}

/// Inspects one frame without counting: `Err` says why it is not measured.
#[inline]
pub fn measure(frame: &[u8], cfg: &PacketConfig) -> Result<Measurement, SkipReason> {
    let eth = EthernetFrame::new_checked(frame)?;
    let (ethertype, l3) = vlan::skip_tags(eth.ethertype(), eth.payload())?;
    match ethertype {
        ethertype::IPV4 => {
            let ip = Ipv4Packet::new_checked(l3)?;
            if ip.is_fragment() {
                return Err(SkipReason::Fragment);
            }
            let net = Network {
                src: ipv4_mapped(ip.src_addr()),
                dst: ipv4_mapped(ip.dst_addr()),
                version: 4,
                protocol: ip.protocol(),
                ipv4_ident: Some(ip.ident()),
                upper: ip.payload(),
            };
            transport(&net, cfg)
        }
        ethertype::IPV6 => {
            let ip = Ipv6Packet::new_checked(l3)?;
            // The IPv6 payload is complete here, so a chain running past it is malformed.
            let up = ipv6_ext::walk(ip.next_header(), ip.payload()).map_err(|_| SkipReason::Malformed)?;
            if up.is_fragment() {
                return Err(SkipReason::Fragment);
            }
            let net = Network {
                src: ip.src_addr(),
                dst: ip.dst_addr(),
                version: 6,
                protocol: up.protocol,
                ipv4_ident: None,
                upper: up.payload,
            };
            transport(&net, cfg)
        }
        ethertype::ARP => Err(SkipReason::Arp),
        _ => Err(SkipReason::UnknownEthertype),
    }
}

/// What the network layer hands the transport layer.
struct Network<'a> {
    src: [u8; 16],
    dst: [u8; 16],
    version: u8,
    protocol: u8,
    ipv4_ident: Option<u16>,
    /// The upper-layer packet: transport header and data, bounded by the IP length.
    upper: &'a [u8],
}

#[inline(always)]
fn ipv4_mapped(a: [u8; 4]) -> [u8; 16] {
    let [a0, a1, a2, a3] = a;
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a0, a1, a2, a3]
}

impl Network<'_> {
    fn flow(&self, src_port: u16, dst_port: u16) -> FlowKey {
        FlowKey {
            src_addr: self.src,
            dst_addr: self.dst,
            src_port,
            dst_port,
            protocol: self.protocol,
            ip_version: self.version,
        }
    }

    /// The flow key part and the network-layer part of the invariant bytes.
    #[inline(always)]
    fn invariant_bytes(&self, flow: &FlowKey) -> InvariantBytes {
        let mut b = InvariantBytes::with_flow(flow);
        // Bounded by a 16-bit IP length field.
        let upper_len = u16::try_from(self.upper.len()).unwrap_or(u16::MAX);
        b.push(&upper_len.to_be_bytes());
        if let Some(id) = self.ipv4_ident {
            b.push(&id.to_be_bytes());
        }
        b
    }
}

#[inline(always)]
fn transport(net: &Network<'_>, cfg: &PacketConfig) -> Result<Measurement, SkipReason> {
    let seed = cfg.identity_seed;
    let prefix = cfg.prefix_len();
    // The IP packet is complete here, so a transport header that does not fit is malformed.
    let (flow, bytes, exchange) = match net.protocol {
        PROTOCOL_TCP => {
            let seg = TcpSegment::new_checked(net.upper).map_err(|_| SkipReason::Malformed)?;
            let flow = net.flow(seg.src_port(), seg.dst_port());
            let mut b = net.invariant_bytes(&flow);
            let [_, _, _, _, s0, s1, s2, s3, a0, a1, a2, a3, o, f, w0, w1, _, _, u0, u1] = *seg.header();
            b.push(&[s0, s1, s2, s3, a0, a1, a2, a3, o, f, w0, w1, u0, u1]);
            b.push_prefix(seg.payload(), prefix);
            let x =
                if cfg.classify.any_tcp() { classify::tcp(&seg, &flow, &cfg.classify, seed) } else { None };
            (flow, b, x)
        }
        PROTOCOL_UDP => {
            let dgram = UdpDatagram::new_checked(net.upper).map_err(|_| SkipReason::Malformed)?;
            let flow = net.flow(dgram.src_port(), dgram.dst_port());
            let mut b = net.invariant_bytes(&flow);
            b.push(&dgram.len().to_be_bytes());
            b.push_prefix(dgram.payload(), prefix);
            let x = classify::udp(&dgram, &flow, &cfg.classify, seed);
            (flow, b, x)
        }
        icmp::PROTOCOL_ICMP | icmp::PROTOCOL_ICMPV6 => {
            let msg = IcmpMessage::new_checked(net.upper).map_err(|_| SkipReason::Malformed)?;
            let flow = net.flow(0, 0);
            let mut b = net.invariant_bytes(&flow);
            let [r0, r1, r2, r3] = msg.rest_of_header();
            b.push(&[msg.msg_type(), msg.code(), r0, r1, r2, r3]);
            b.push_prefix(msg.payload(), prefix);
            (flow, b, None)
        }
        _ => {
            let flow = net.flow(0, 0);
            let mut b = net.invariant_bytes(&flow);
            b.push_prefix(net.upper, prefix);
            (flow, b, None)
        }
    };
    Ok(Measurement { flow, flow_hash: bytes.flow_hash(seed), identity: bytes.identity(seed), exchange })
}

#[cfg(test)]
mod tests;
