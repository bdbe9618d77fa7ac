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
use super::field::{be16, be32, be64};
use super::flow::FlowKey;
use super::icmp::{self, IcmpMessage};
use super::identity::InvariantHeader;
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
                ipv4_ident: ip.ident(),
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
                ipv4_ident: 0,
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
    /// IPv4 identification; 0 for IPv6.
    ipv4_ident: u16,
    /// The upper-layer packet: transport header and data, bounded by the IP length.
    upper: &'a [u8],
}

/// `::ffff:a.b.c.d`, composed in a register so it is stored with one 16-byte store.
#[inline(always)]
fn ipv4_mapped(a: [u8; 4]) -> [u8; 16] {
    ((0xffff_u128 << 32) | u128::from(u32::from_be_bytes(a))).to_be_bytes()
}

impl Network<'_> {
    /// The invariant header, given the ports and the transport fields (bytes 42–55 of the block,
    /// as the low 112 bits of `fields`).
    #[inline(always)]
    fn header(&self, src_port: u16, dst_port: u16, fields: u128) -> InvariantHeader {
        InvariantHeader {
            src_addr: self.src,
            dst_addr: self.dst,
            src_port,
            dst_port,
            protocol: self.protocol,
            ip_version: self.version,
            // Bounded by a 16-bit IP length field.
            upper_len: u16::try_from(self.upper.len()).unwrap_or(u16::MAX),
            transport: ((u128::from(self.ipv4_ident) << 112) | fields).to_be_bytes(),
        }
    }
}

#[inline(always)]
fn transport(net: &Network<'_>, cfg: &PacketConfig) -> Result<Measurement, SkipReason> {
    let seed = cfg.identity_seed;
    let prefix = cfg.prefix_len();
    let finish = |header: &InvariantHeader, payload: &[u8], exchange: Option<Exchange>| {
        let bytes = header.bytes(payload, prefix);
        Measurement {
            flow: header.flow(),
            flow_hash: bytes.flow_hash(seed),
            identity: bytes.identity(seed),
            exchange,
        }
    };
    // The IP packet is complete here, so a transport header that does not fit is malformed.
    match net.protocol {
        PROTOCOL_TCP => {
            let seg = TcpSegment::new_checked(net.upper).map_err(|_| SkipReason::Malformed)?;
            let h = seg.header();
            // sequence, acknowledgment, offset/flags, window (bytes 4..16), urgent (18..20).
            let fields = (u128::from(be64::<4, 20>(h)) << 48)
                | (u128::from(be32::<12, 20>(h)) << 16)
                | u128::from(be16::<18, 20>(h));
            let header = net.header(seg.src_port(), seg.dst_port(), fields);
            let exchange = if cfg.classify.any_tcp() {
                classify::tcp(&seg, &header.flow(), &cfg.classify, seed)
            } else {
                None
            };
            Ok(finish(&header, seg.payload(), exchange))
        }
        PROTOCOL_UDP => {
            let dgram = UdpDatagram::new_checked(net.upper).map_err(|_| SkipReason::Malformed)?;
            let header = net.header(dgram.src_port(), dgram.dst_port(), u128::from(dgram.len()) << 96);
            let exchange = if cfg.classify.dns {
                classify::udp(&dgram, &header.flow(), &cfg.classify, seed)
            } else {
                None
            };
            Ok(finish(&header, dgram.payload(), exchange))
        }
        icmp::PROTOCOL_ICMP | icmp::PROTOCOL_ICMPV6 => {
            let msg = IcmpMessage::new_checked(net.upper).map_err(|_| SkipReason::Malformed)?;
            let fields = (u128::from(msg.msg_type()) << 104)
                | (u128::from(msg.code()) << 96)
                | (u128::from(u32::from_be_bytes(msg.rest_of_header())) << 64);
            Ok(finish(&net.header(0, 0, fields), msg.payload(), None))
        }
        _ => Ok(finish(&net.header(0, 0, 0), net.upper, None)),
    }
}

#[cfg(test)]
mod tests;
