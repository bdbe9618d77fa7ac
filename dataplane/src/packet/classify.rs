//! Request/response classifiers for the fridge: which packets open or close an exchange, and
//! the pairing id a request shares with its response.
//!
//! The id is `xxh3_64_with_seed(kind tag (1) ‖ request-direction flow key bytes (38) ‖ value
//! (4, big-endian), identity_seed)`. The flow key is the request's directional key: a request
//! hashes its own key, a response the reverse of its own, so both land on the same bytes.
//!
//! | kind | request | response | value |
//! |---|---|---|---|
//! | TCP handshake | SYN without ACK | SYN+ACK | request: seq + 1; response: ack |
//! | DNS | QR = 0 to a DNS port | QR = 1 from a DNS port | the DNS id |
//! | TCP data (off by default) | segment with payload | pure ACK | request: seq + len (+1 with FIN); response: ack |
//!
//! DNS runs over UDP and TCP; over TCP the message starts with a 2-byte length, and only a
//! segment whose payload starts a message is read (a segment continuing a message yields a
//! random id, which occupies a fridge slot and matches nothing). A SYN is only ever a
//! handshake packet; a TCP segment on a DNS port that carries a DNS header is DNS, not data.
//! A segment carrying both data and an ACK is a data request only: one packet carries at most
//! one [`Exchange`]. Segments with RST are never classified.
//!
//! Duplicates (fridge.md §8 P6, P7) are left to the fridge, on purpose: a retransmitted SYN
//! (same ISN), a retransmitted DNS query (same source port and id) or a retransmitted data
//! segment has the same id as the original, and the fridge's insertion overwrites the older
//! copy so the delay is measured from the latest one. A duplicated SYN/ACK, DNS reply or ACK
//! has the same id as the first; the fridge erases its slot on the first match, so the
//! duplicate finds nothing. Filtering retransmissions here would need per-flow state, which
//! this layer does not keep.

use super::config::ClassifierConfig;
use super::dns::{DnsHeader, HEADER_LEN as DNS_HEADER_LEN};
use super::exchange::{Exchange, ExchangeKind, Role};
use super::flow::{FLOW_KEY_BYTES, FlowKey};
use super::identity::{PAIRING_INPUT_BYTES, pairing_words_hash};
use super::tcp::{TcpSegment, flags};
use super::udp::UdpDatagram;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The tag byte that keeps the id spaces of the exchange kinds apart.
const fn kind_tag(kind: ExchangeKind) -> u8 {
    match kind {
        ExchangeKind::TcpHandshake => 1,
        ExchangeKind::Dns => 2,
        ExchangeKind::TcpData => 3,
    }
}

/// The pairing id of an exchange of `kind` whose request travels on `request_flow` (computed
/// in registers, [`pairing_words_hash`]; [`pairing_id_bytes`] is the same value the plain way).
#[inline(always)]
pub fn pairing_id(kind: ExchangeKind, request_flow: &FlowKey, value: u32, seed: u64) -> u64 {
    pairing_words_hash(kind_tag(kind), request_flow, value, seed)
}

/// [`pairing_id`] over its 43 input bytes with the xxh3 crate: the definition, for tests and
/// tools.
pub fn pairing_id_bytes(kind: ExchangeKind, request_flow: &FlowKey, value: u32, seed: u64) -> u64 {
    let mut b = [0u8; PAIRING_INPUT_BYTES];
    let (tag, rest) = b.split_at_mut(1);
    let (key, val) = rest.split_at_mut(FLOW_KEY_BYTES);
    tag.copy_from_slice(&[kind_tag(kind)]);
    key.copy_from_slice(&request_flow.canonical_bytes());
    val.copy_from_slice(&value.to_be_bytes());
    xxh3_64_with_seed(&b, seed)
}

#[inline(always)]
fn request(kind: ExchangeKind, flow: &FlowKey, value: u32, seed: u64) -> Exchange {
    Exchange { kind, role: Role::Request, id: pairing_id(kind, flow, value, seed) }
}

#[inline(always)]
fn response(kind: ExchangeKind, flow: &FlowKey, value: u32, seed: u64) -> Exchange {
    Exchange { kind, role: Role::Response, id: pairing_id(kind, &flow.reversed(), value, seed) }
}

/// A DNS header's exchange, given the ports of the packet that carries it.
#[inline(always)]
fn dns(header: &DnsHeader<'_>, flow: &FlowKey, cfg: &ClassifierConfig, seed: u64) -> Option<Exchange> {
    let id = u32::from(header.id());
    if header.is_response() {
        cfg.is_dns_port(flow.src_port).then(|| response(ExchangeKind::Dns, flow, id, seed))
    } else {
        cfg.is_dns_port(flow.dst_port).then(|| request(ExchangeKind::Dns, flow, id, seed))
    }
}

/// True when [`tcp`] may classify `seg`: a cheap filter the per-packet path runs inline so the
/// common segment (no SYN, not DNS, data classifier off) costs no call.
#[inline(always)]
pub fn tcp_candidate(seg: &TcpSegment<'_>, cfg: &ClassifierConfig) -> bool {
    tcp_candidate_fields(seg.flags(), seg.payload().len(), seg.src_port(), seg.dst_port(), cfg)
}

/// [`tcp_candidate`] from the segment's flags, payload length and ports.
#[inline(always)]
pub(crate) fn tcp_candidate_fields(
    tcp_flags: u8,
    payload_len: usize,
    src_port: u16,
    dst_port: u16,
    cfg: &ClassifierConfig,
) -> bool {
    (cfg.tcp_handshake && tcp_flags & flags::SYN != 0)
        || cfg.tcp_data
        || (cfg.dns
            && payload_len >= 2 + DNS_HEADER_LEN
            && (cfg.is_dns_port(dst_port) || cfg.is_dns_port(src_port)))
}

/// True when [`udp`] may classify `dgram`.
#[inline(always)]
pub fn udp_candidate(dgram: &UdpDatagram<'_>, cfg: &ClassifierConfig) -> bool {
    udp_candidate_fields(dgram.payload().len(), dgram.src_port(), dgram.dst_port(), cfg)
}

/// [`udp_candidate`] from the datagram's payload length and ports.
#[inline(always)]
pub(crate) fn udp_candidate_fields(
    payload_len: usize,
    src_port: u16,
    dst_port: u16,
    cfg: &ClassifierConfig,
) -> bool {
    cfg.dns && payload_len >= DNS_HEADER_LEN && (cfg.is_dns_port(dst_port) || cfg.is_dns_port(src_port))
}

/// Classifies a TCP segment on `flow` (its directional key).
#[inline(never)]
pub fn tcp(seg: &TcpSegment<'_>, flow: &FlowKey, cfg: &ClassifierConfig, seed: u64) -> Option<Exchange> {
    let f = seg.flags();
    if f & (flags::SYN | flags::RST) != 0 {
        // Only a SYN without RST is ever classified, and only as a handshake packet.
        if f & flags::RST != 0 || !cfg.tcp_handshake {
            return None;
        }
        return Some(if f & flags::ACK == 0 {
            request(ExchangeKind::TcpHandshake, flow, seg.seq().wrapping_add(1), seed)
        } else {
            response(ExchangeKind::TcpHandshake, flow, seg.ack(), seed)
        });
    }
    let payload = seg.payload();
    // A DNS message over TCP needs its 2-byte length and the 12-byte header.
    if cfg.dns
        && payload.len() >= 2 + DNS_HEADER_LEN
        && (cfg.is_dns_port(flow.dst_port) || cfg.is_dns_port(flow.src_port))
        && let Ok(h) = DnsHeader::new_checked_tcp(payload)
        && let Some(x) = dns(&h, flow, cfg, seed)
    {
        return Some(x);
    }
    if cfg.tcp_data { tcp_data(seg, f, payload, flow, seed) } else { None }
}

/// The optional data → covering-ACK classifier (no SYN, no RST here).
#[inline(never)]
fn tcp_data(seg: &TcpSegment<'_>, f: u8, payload: &[u8], flow: &FlowKey, seed: u64) -> Option<Exchange> {
    if !payload.is_empty() {
        // Payload length fits in u32: it is bounded by the 16-bit IP length.
        let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        let fin = u32::from(f & flags::FIN != 0);
        let expected_ack = seg.seq().wrapping_add(len).wrapping_add(fin);
        Some(request(ExchangeKind::TcpData, flow, expected_ack, seed))
    } else if f & (flags::ACK | flags::FIN) == flags::ACK {
        Some(response(ExchangeKind::TcpData, flow, seg.ack(), seed))
    } else {
        None
    }
}

/// Classifies a UDP datagram on `flow` (its directional key).
#[inline(never)]
pub fn udp(dgram: &UdpDatagram<'_>, flow: &FlowKey, cfg: &ClassifierConfig, seed: u64) -> Option<Exchange> {
    if !cfg.dns
        || dgram.payload().len() < DNS_HEADER_LEN
        || !(cfg.is_dns_port(flow.dst_port) || cfg.is_dns_port(flow.src_port))
    {
        return None;
    }
    let h = DnsHeader::new_checked(dgram.payload()).ok()?;
    dns(&h, flow, cfg, seed)
}
