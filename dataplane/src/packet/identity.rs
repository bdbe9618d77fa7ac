//! Packet identity: the exact bytes both measurement points hash, and the hash.
//!
//! The identity is `xxh3_64_with_seed(invariant_bytes, identity_seed)`: the same value for the
//! same packet at every point, on any CPU and build. `invariant_bytes` is a fixed 56-byte header
//! block followed by a bounded payload prefix (integers big-endian):
//!
//! | offset | bytes | field | note |
//! |---|---|---|---|
//! | 0 | 16 | source address | IPv4 as `::ffff:a.b.c.d` |
//! | 16 | 16 | destination address | |
//! | 32 | 2 | source port | TCP/UDP, else 0 |
//! | 34 | 2 | destination port | TCP/UDP, else 0 |
//! | 36 | 1 | protocol | IPv4 protocol / IPv6 last next header |
//! | 37 | 1 | IP version | 4 or 6 |
//! | 38 | 2 | upper-layer length | IPv4 total length − IHL·4; IPv6 payload length − extension headers |
//! | 40 | 2 | IPv4 identification | 0 for IPv6 |
//! | 42 | 14 | transport fields | below; unused bytes are 0 |
//! | 56 | ≤ P | payload prefix | the first `min(P, available)` payload bytes, P = `payload_prefix_bytes` |
//!
//! The first 38 bytes are exactly [`FlowKey::canonical_bytes`] of the packet's directional flow
//! key, so the flow hash is xxh3 of that prefix of the same buffer (equal to [`FlowKey::hash`]
//! with the same seed) and the buffer is built once.
//!
//! Transport fields (offset 42) and payload by protocol:
//! - TCP (6): sequence (4), acknowledgment (4), data offset/reserved/flags (2), window (2),
//!   urgent pointer (2): header bytes 4–15 and 18–19. The payload starts after the options.
//! - UDP (17): the UDP length (2), then 12 zero bytes. The payload ends at the UDP length.
//! - ICMP (1) and ICMPv6 (58): type, code and the 4-byte rest of header (echo id and
//!   sequence), then 8 zero bytes. The payload is everything after the 8-byte header.
//! - Any other protocol (ESP, GRE, SCTP, ...): 14 zero bytes; the "payload" is the upper-layer
//!   packet from its first byte, so its own header (an ESP SPI and sequence number, say) makes
//!   the prefix.
//!
//! What is left out, and why:
//! - L2 (MACs, VLAN tags, ethertype, padding): rewritten at every hop. Padding is never read
//!   because every payload ends at the IP (and UDP) length.
//! - TTL / hop limit, the IPv4 header checksum, DSCP/ECN (IPv4 TOS, IPv6 traffic class):
//!   routers change them.
//! - IPv4 flags and fragment offset: fragments are never measured, so for measured packets the
//!   field is only the DF bit, which distinguishes no two packets of a flow and which some
//!   middleboxes clear.
//! - IPv4 options: routers rewrite record-route and timestamp options in place.
//! - The IPv6 flow label: RFC 6437 lets a domain's border set it, and some middleboxes zero or
//!   rewrite it; it is constant within a flow, so it distinguishes nothing the flow key does
//!   not already. (rda.md §6.3 suggests keeping it; we do not, for the rewrite risk.)
//! - IPv6 extension headers: hop-by-hop options may change en route (the option type's
//!   "change en route" bit), a routing header's segments-left field changes at each segment end
//!   point. The upper-layer length still reflects the packet's size.
//! - TCP and UDP checksums: NAT and MSS clamping rewrite them, and with transmit offload a
//!   capture taken on the sending host holds a not-yet-computed value. The ICMP checksum for
//!   the same offload reason.
//! - TCP options: MSS clamping rewrites the MSS option; some middleboxes strip or rewrite SACK
//!   and timestamps. The data offset stays (a stripped option changes the length anyway).
//!
//! The payload prefix is bounded ([`super::config::MAX_PAYLOAD_PREFIX_BYTES`], default 32) so
//! the input stays at most 120 bytes: xxh3 hashes inputs of up to 128 bytes on its short-input
//! path whatever the frame size. Payload bytes beyond the prefix do not reach the identity; the
//! upper-layer length and the TCP sequence number still tell most such packets apart.
//! Addresses and ports are included: a packet NATed between two points is not the same packet
//! for the two-point synopses (it shows as a loss). Exact duplicates (same invariant bytes)
//! share an identity; that is inherent to any content hash (lds.md §4 item 2, rda.md §6.3).
//!
//! The block is written with a few 16- and 8-byte stores composed in registers, not field by
//! field: xxh3 reads it back with 8-byte loads right away, and a load that spans several
//! narrow stores cannot be forwarded from the store buffer and stalls.

use super::config::MAX_PAYLOAD_PREFIX_BYTES;
use super::flow::{FLOW_KEY_BYTES, FlowKey};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Length of the fixed header block.
pub const HEADER_BLOCK_BYTES: usize = 56;

/// Size of the invariant-bytes buffer: header block + the largest payload prefix (64) = 120,
/// rounded up so a fixed 64-byte copy of the payload always fits.
pub const MAX_INVARIANT_BYTES: usize = 128;
const _: () = assert!(HEADER_BLOCK_BYTES + MAX_PAYLOAD_PREFIX_BYTES <= MAX_INVARIANT_BYTES);

/// The header fields of one packet that enter its identity (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvariantHeader {
    /// Source address (IPv4-mapped for IPv4).
    pub src_addr: [u8; 16],
    /// Destination address (IPv4-mapped for IPv4).
    pub dst_addr: [u8; 16],
    /// Source port, 0 without ports.
    pub src_port: u16,
    /// Destination port, 0 without ports.
    pub dst_port: u16,
    /// Transport protocol.
    pub protocol: u8,
    /// 4 or 6.
    pub ip_version: u8,
    /// Length of the upper-layer packet (transport header and data).
    pub upper_len: u16,
    /// Bytes 40–55 of the block: IPv4 identification and the transport fields.
    pub transport: [u8; 16],
}

impl InvariantHeader {
    /// The packet's directional flow key.
    #[inline(always)]
    pub fn flow(&self) -> FlowKey {
        FlowKey {
            src_addr: self.src_addr,
            dst_addr: self.dst_addr,
            src_port: self.src_port,
            dst_port: self.dst_port,
            protocol: self.protocol,
            ip_version: self.ip_version,
        }
    }

    /// The invariant bytes: this block, then the first `min(prefix_len, 64)` bytes of
    /// `payload`.
    #[inline(always)]
    pub fn bytes(&self, payload: &[u8], prefix_len: usize) -> InvariantBytes {
        let mut buf = [0u8; MAX_INVARIANT_BYTES];
        let word = (u64::from(self.src_port) << 48)
            | (u64::from(self.dst_port) << 32)
            | (u64::from(self.protocol) << 24)
            | (u64::from(self.ip_version) << 16)
            | u64::from(self.upper_len);
        put::<0, 16>(&mut buf, self.src_addr);
        put::<16, 16>(&mut buf, self.dst_addr);
        put::<32, 8>(&mut buf, word.to_be_bytes());
        put::<40, 16>(&mut buf, self.transport);
        let n = payload.len().min(prefix_len).min(MAX_PAYLOAD_PREFIX_BYTES);
        let tail = buf.get_mut(HEADER_BLOCK_BYTES..).unwrap_or_default();
        // A fixed-size copy when the payload is long enough (no call into memcpy); the bytes
        // past `n` are not hashed.
        match (tail.first_chunk_mut::<64>(), payload.first_chunk::<64>()) {
            (Some(dst), Some(src)) => *dst = *src,
            _ => {
                if let (Some(dst), Some(src)) = (tail.get_mut(..n), payload.get(..n)) {
                    dst.copy_from_slice(src);
                }
            }
        }
        InvariantBytes { buf, len: HEADER_BLOCK_BYTES + n }
    }
}

/// Writes `v` at byte `AT` of `buf`; the range is checked when the crate compiles.
#[inline(always)]
fn put<const AT: usize, const N: usize>(buf: &mut [u8; MAX_INVARIANT_BYTES], v: [u8; N]) {
    const { assert!(AT + N <= MAX_INVARIANT_BYTES) };
    if let Some(dst) = buf.get_mut(AT..).and_then(|s| s.first_chunk_mut::<N>()) {
        *dst = v;
    }
}

/// The invariant bytes of one packet, on the stack (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct InvariantBytes {
    buf: [u8; MAX_INVARIANT_BYTES],
    len: usize,
}

impl InvariantBytes {
    /// The bytes that are hashed.
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }

    /// The flow-key part (the first 38 bytes).
    #[inline(always)]
    pub fn flow_bytes(&self) -> &[u8] {
        self.buf.get(..FLOW_KEY_BYTES).unwrap_or_default()
    }

    /// `xxh3(flow-key part, seed)`: equal to [`FlowKey::hash`] of the header's flow.
    #[inline(always)]
    pub fn flow_hash(&self, seed: u64) -> u64 {
        xxh3_64_with_seed(self.flow_bytes(), seed)
    }

    /// The packet identity: `xxh3(all bytes, seed)`.
    #[inline(always)]
    pub fn identity(&self, seed: u64) -> u64 {
        xxh3_64_with_seed(self.as_bytes(), seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> InvariantHeader {
        let f = FlowKey::new("192.0.2.1".parse().unwrap(), "198.51.100.7".parse().unwrap(), 1234, 80, 6);
        InvariantHeader {
            src_addr: f.src_addr,
            dst_addr: f.dst_addr,
            src_port: f.src_port,
            dst_port: f.dst_port,
            protocol: f.protocol,
            ip_version: f.ip_version,
            upper_len: 20,
            transport: [0x12, 0x34, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
        }
    }

    #[test]
    fn layout_matches_the_documentation() {
        let h = header();
        let b = h.bytes(&[0xaa, 0xbb, 0xcc], 32);
        let mut expect = h.flow().canonical_bytes().to_vec();
        expect.extend_from_slice(&20u16.to_be_bytes());
        expect.extend_from_slice(&h.transport);
        expect.extend_from_slice(&[0xaa, 0xbb, 0xcc]);
        assert_eq!(b.as_bytes(), &expect[..]);
        assert_eq!(b.flow_bytes(), &h.flow().canonical_bytes()[..]);
        assert_eq!(b.flow_hash(7), h.flow().hash(7));
        assert_eq!(b.identity(7), xxh3_64_with_seed(&expect, 7));
        assert_ne!(b.identity(7), b.identity(8));
    }

    #[test]
    fn prefix_is_bounded() {
        let h = header();
        let long: Vec<u8> = (0..200).collect();
        for (payload_len, prefix, hashed) in
            [(200, 32, 32), (200, 64, 64), (200, 1000, 64), (10, 32, 10), (0, 32, 0)]
        {
            let b = h.bytes(&long[..payload_len], prefix);
            assert_eq!(b.as_bytes().len(), HEADER_BLOCK_BYTES + hashed);
            assert_eq!(&b.as_bytes()[HEADER_BLOCK_BYTES..], &long[..hashed]);
        }
    }

    #[test]
    fn identity_is_pinned() {
        // Both points must agree across builds and versions: pin one value so a change of the
        // byte layout or of the hash function is noticed (xxhash-rust 0.8's xxh3 of the 59
        // bytes below with the default seed).
        let b = header().bytes(&[1, 2, 3], 32);
        let bytes = [
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
            198, 51, 100, 7, 0x04, 0xd2, 0, 80, 6, 4, 0, 20, 0x12, 0x34, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
            12, 13, 14, 1, 2, 3,
        ];
        assert_eq!(b.as_bytes(), &bytes[..]);
        assert_eq!(b.identity(0x7769_7265_6c61_7431), xxh3_64_with_seed(&bytes, 0x7769_7265_6c61_7431));
        assert_eq!(b.identity(0x7769_7265_6c61_7431), 0xf602_1ffb_7e91_8714);
    }
}
