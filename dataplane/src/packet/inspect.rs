//! The per-packet entry point: one call turns a frame into a skip reason or into everything a
//! synopsis needs (flow key, flow hash, packet identity, exchange).
//!
//! No allocation, no panic, no read outside `frame`. The common shapes are read at fixed
//! offsets by the fast paths ([`fast`]), which give the general parser's answer or leave the
//! frame to it; the general parser ([`measure_general`]) reads every header through a checked
//! view. Its order of decisions: Ethernet → the encapsulation walk ([`super::encap`]: tags,
//! MPLS, PPPoE, and the IP tunnels, each IP header checked for truncation, malformation and
//! fragments on the way) → ethertype (ARP, unknown) → the innermost IP packet → transport
//! header (a transport header that does not fit its complete IP packet is malformed) →
//! measured.

use super::class::{PacketCounters, SkipReason};
use super::classify;
use super::config::PacketConfig;
use super::encap::{self, Encap, EncapKind, Inner};
use super::exchange::Exchange;
use super::field::{le16, le32, le64};
use super::flow::FlowKey;
use super::icmp::{self, IcmpMessage};
use super::identity::{InvariantHeader, ipv4_mapped_hi};
use super::tcp::TcpSegment;
use super::udp::UdpDatagram;
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
    /// `flow.hash(identity_seed)` (0 when [`PacketConfig::hashes`] is off).
    pub flow_hash: u64,
    /// The packet identity (see [`super::identity`]; 0 when [`PacketConfig::hashes`] is off).
    pub identity: u64,
    /// Request/response classification, when a classifier recognised the packet.
    pub exchange: Option<Exchange>,
    /// The innermost encapsulation identifier on the way to the packet (VLAN, VNI, ...): a
    /// flow attribute outside the flow key and the identity.
    pub encap: Encap,
}

impl Measurement {
    /// All zero: a placeholder for fixed-size staging arrays, never measured.
    pub const EMPTY: Self = Self {
        flow: FlowKey {
            src_addr: [0; 16],
            dst_addr: [0; 16],
            src_port: 0,
            dst_port: 0,
            protocol: 0,
            ip_version: 0,
        },
        flow_hash: 0,
        identity: 0,
        exchange: None,
        encap: Encap::NONE,
    };

    /// The observation the synopses' `update` takes, stamped `ts_ns`.
    #[inline(always)]
    pub fn observation(&self, ts_ns: u64) -> Observation<'_> {
        Observation {
            ts_ns,
            flow: &self.flow,
            flow_hash: self.flow_hash,
            identity: self.identity,
            exchange: self.exchange,
            encap: self.encap,
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
///
/// Always inlined, with [`measure`]: returned through memory, the 80-byte measurement was
/// written by the callee and read back by the caller in differently sized pieces, and those
/// loads could not be forwarded from the stores (a stall per packet, measured in the worker).
/// Inlined, it is built in registers and stored once, where the caller keeps it.
#[inline(always)]
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
#[inline(always)]
pub fn measure(frame: &[u8], cfg: &PacketConfig) -> Result<Measurement, SkipReason> {
    if let Some(m) = fast::ipv4_at::<{ fast::UNTAGGED }>(frame, cfg) {
        return Ok(m);
    }
    if let Some(m) = fast::untagged_ipv6(frame, cfg) {
        return Ok(m);
    }
    if let Some(vid) = fast::tagged(frame, cfg)
        && let Some(m) = fast::ipv4_at::<{ fast::ONE_TAG }>(frame, cfg)
    {
        return Ok(Measurement { encap: Encap::new(EncapKind::Vlan, u32::from(vid)), ..m });
    }
    measure_general(frame, cfg)
}

/// [`measure`] by the general parser alone, without the fast paths for the common shapes
/// (IPv4 untagged or with one 802.1Q tag, untagged IPv6, TCP or UDP): the same answer for
/// every frame, only slower. Public so tests and the fuzz target can check that claim.
#[inline(always)]
pub fn measure_general(frame: &[u8], cfg: &PacketConfig) -> Result<Measurement, SkipReason> {
    let (inner, encap) = encap::locate(frame, &cfg.encap)?;
    let net = match inner {
        Inner::V4(ip) => {
            let h = ip.header();
            Network {
                addr_words: [0, ipv4_mapped_hi(le32::<12, 20>(h)), 0, ipv4_mapped_hi(le32::<16, 20>(h))],
                version: 4,
                protocol: ip.protocol(),
                ipv4_ident_le: le16::<4, 20>(h),
                upper: ip.payload(),
            }
        }
        Inner::V6(ip, up) => {
            let h = ip.header();
            Network {
                addr_words: [le64::<8, 40>(h), le64::<16, 40>(h), le64::<24, 40>(h), le64::<32, 40>(h)],
                version: 6,
                protocol: up.protocol,
                ipv4_ident_le: 0,
                upper: up.payload,
            }
        }
    };
    transport(&net, cfg).map(|m| Measurement { encap, ..m })
}

/// What the network layer hands the transport layer.
struct Network<'a> {
    /// Source and destination addresses as the block's words 0–3 (see [`super::identity`]).
    addr_words: [u64; 4],
    version: u8,
    protocol: u8,
    /// IPv4 identification wire bytes read little-endian; 0 for IPv6.
    ipv4_ident_le: u16,
    /// The upper-layer packet: transport header and data, bounded by the IP length.
    upper: &'a [u8],
}

impl Network<'_> {
    /// The invariant header block, given the ports' wire bytes and bytes 40–51 of the block
    /// (the IPv4 identification and the urgent pointer are added here).
    #[inline(always)]
    fn header(&self, ports_le: u32, fields: [u64; 2], urgent_le: u16) -> InvariantHeader {
        let [f0, f1] = fields;
        // Bytes 52..56: IPv4 identification, urgent pointer (little-endian word 6, bits 32..64).
        let f1 = (f1 & 0xffff_ffff) | (u64::from(self.ipv4_ident_le) << 32) | (u64::from(urgent_le) << 48);
        // Bounded by a 16-bit IP length field.
        let upper_len = u16::try_from(self.upper.len()).unwrap_or(u16::MAX);
        InvariantHeader::from_parts(
            self.addr_words,
            ports_le,
            self.protocol,
            self.version,
            upper_len,
            [f0, f1],
        )
    }
}

#[inline(always)]
fn finish(h: &InvariantHeader, payload: &[u8], cfg: &PacketConfig, x: Option<Exchange>) -> Measurement {
    let (flow_hash, identity) =
        if cfg.hashes { h.hashes(payload, cfg.prefix_len(), cfg.identity_seed) } else { (0, 0) };
    Measurement { flow: h.flow(), flow_hash, identity, exchange: x, encap: Encap::NONE }
}

#[inline(always)]
fn transport(net: &Network<'_>, cfg: &PacketConfig) -> Result<Measurement, SkipReason> {
    let seed = cfg.identity_seed;
    // The IP packet is complete here, so a transport header that does not fit is malformed.
    // Header bytes are copied as they are on the wire (little-endian reads, no byte swaps).
    match net.protocol {
        PROTOCOL_TCP => {
            let seg = TcpSegment::new_checked(net.upper).map_err(|_| SkipReason::Malformed)?;
            let h = seg.header();
            // Sequence, acknowledgment, offset/flags, window: header bytes 4..16.
            let header =
                net.header(le32::<0, 20>(h), [le64::<4, 20>(h), le64::<12, 20>(h)], le16::<18, 20>(h));
            let exchange = if classify::tcp_candidate(&seg, &cfg.classify) {
                classify::tcp(&seg, &header.flow(), &cfg.classify, seed)
            } else {
                None
            };
            Ok(finish(&header, seg.payload(), cfg, exchange))
        }
        PROTOCOL_UDP => {
            let dgram = UdpDatagram::new_checked(net.upper).map_err(|_| SkipReason::Malformed)?;
            let h = dgram.header();
            let header = net.header(le32::<0, 8>(h), [u64::from(le16::<4, 8>(h)), 0], 0);
            let exchange = if classify::udp_candidate(&dgram, &cfg.classify) {
                classify::udp(&dgram, &header.flow(), &cfg.classify, seed)
            } else {
                None
            };
            Ok(finish(&header, dgram.payload(), cfg, exchange))
        }
        icmp::PROTOCOL_ICMP | icmp::PROTOCOL_ICMPV6 => {
            let msg = IcmpMessage::new_checked(net.upper).map_err(|_| SkipReason::Malformed)?;
            let h = msg.header();
            // Type, code (bytes 0..2) and the rest of header (4..8); the checksum left out.
            let fields = u64::from(le16::<0, 8>(h)) | (u64::from(le32::<4, 8>(h)) << 16);
            Ok(finish(&net.header(0, [fields, 0], 0), msg.payload(), cfg, None))
        }
        _ => Ok(finish(&net.header(0, [0, 0], 0), net.upper, cfg, None)),
    }
}

mod fast;

#[cfg(test)]
mod tests;
