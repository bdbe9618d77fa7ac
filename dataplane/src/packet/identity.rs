//! Packet identity: the exact bytes both measurement points hash, and the hash.
//!
//! The identity is `xxh3_64_with_seed(invariant_bytes, identity_seed)`: the same value for the
//! same packet at every point, on any CPU and build. `invariant_bytes` is a buffer of at most
//! [`MAX_INVARIANT_BYTES`] bytes, built once per packet in this order (integers big-endian):
//!
//! | bytes | field | note |
//! |---|---|---|
//! | 16 | source address | IPv4 as `::ffff:a.b.c.d` |
//! | 16 | destination address | |
//! | 2 | source port | TCP/UDP, else 0 |
//! | 2 | destination port | TCP/UDP, else 0 |
//! | 1 | protocol | IPv4 protocol / IPv6 last next header |
//! | 1 | IP version | 4 or 6 |
//! | 2 | upper-layer length | IPv4 total length − IHL·4; IPv6 payload length − extension headers |
//! | 2 | IPv4 identification | IPv4 only |
//! | … | transport part | below |
//! | ≤ P | payload prefix | first `min(P, available)` payload bytes, P = `payload_prefix_bytes` |
//!
//! The first 38 bytes are exactly [`FlowKey::canonical_bytes`] of the packet's directional
//! flow key, so the flow hash is the xxh3 of that prefix of the same buffer, equal to
//! [`FlowKey::hash`] with the same seed, and the buffer is built once.
//!
//! Transport part and payload by protocol:
//! - TCP (6): sequence, acknowledgment, data offset/reserved/flags, window (bytes 4–15 of the
//!   header) and urgent pointer (bytes 18–19): 14 bytes. The payload starts after the options.
//! - UDP (17): the UDP length (2 bytes). The payload ends at the UDP length.
//! - ICMP (1) and ICMPv6 (58): type, code and the 4-byte rest of header (echo id/sequence):
//!   6 bytes. The payload is everything after the 8-byte header.
//! - Any other protocol (ESP, GRE, SCTP, ...): nothing; the "payload" is the upper-layer
//!   packet from its first byte, so its own header (an ESP SPI and sequence number, say)
//!   makes the prefix.
//!
//! What is left out, and why:
//! - L2 (MACs, VLAN tags, ethertype, padding): rewritten at every hop; padding is never read
//!   because every payload ends at the IP (and UDP) length.
//! - TTL / hop limit, the IPv4 header checksum, DSCP/ECN (IPv4 TOS, IPv6 traffic class):
//!   routers change them.
//! - IPv4 flags and fragment offset: fragments are never measured, so for measured packets the
//!   field is only the DF bit, which distinguishes no two packets of a flow and which some
//!   middleboxes clear.
//! - IPv4 options: routers rewrite record-route and timestamp options in place.
//! - The IPv6 flow label: RFC 6437 lets a domain's border set it and some middleboxes zero
//!   or rewrite it; it is constant within a flow, so it distinguishes nothing the flow key does
//!   not already.
//! - IPv6 extension headers: hop-by-hop options may change en route (the option type's
//!   "change en route" bit), a routing header's segments-left field changes at each segment
//!   end point. The upper-layer length still covers their effect on the packet's size.
//! - TCP and UDP checksums: NAT and MSS clamping rewrite them, and with transmit offload a
//!   capture taken on the sending host holds a not-yet-computed value. The ICMP checksum for
//!   the same offload reason.
//! - TCP options: MSS clamping rewrites the MSS option, some middleboxes strip or rewrite
//!   SACK and timestamps. The data offset stays in (it changes the upper-layer length anyway).
//!
//! The payload prefix is bounded ([`super::config::MAX_PAYLOAD_PREFIX_BYTES`], default 32) so
//! the buffer stays at most 120 bytes: xxh3 hashes inputs of up to 128 bytes on its short-input
//! path, whatever the frame size. Addresses and ports are included: a packet NATed between two
//! points is not the same packet for the two-point synopses (it shows as one loss at each).
//! Exact duplicates (same invariant bytes) share an identity; that is inherent to any content
//! hash (lds.md §4 item 2, rda.md §6.3).

use super::flow::{FLOW_KEY_BYTES, FlowKey};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Size of the invariant-bytes buffer: the largest input is 38 (flow key) + 2 (upper-layer
/// length) + 2 (IPv4 id) + 14 (TCP) + 64 (payload prefix) = 120 bytes.
pub const MAX_INVARIANT_BYTES: usize = 128;

/// The invariant bytes of one packet, built in place on the stack (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct InvariantBytes {
    buf: [u8; MAX_INVARIANT_BYTES],
    len: usize,
}

impl InvariantBytes {
    /// A buffer that starts with `flow`'s canonical bytes.
    #[inline(always)]
    pub fn with_flow(flow: &FlowKey) -> Self {
        let mut buf = [0u8; MAX_INVARIANT_BYTES];
        if let Some(head) = buf.first_chunk_mut::<FLOW_KEY_BYTES>() {
            *head = flow.canonical_bytes();
        }
        Self { buf, len: FLOW_KEY_BYTES }
    }

    /// Appends `bytes`; anything that would not fit is dropped (callers stay within the
    /// documented 120 bytes, so nothing is ever dropped in practice).
    #[inline(always)]
    pub fn push(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.len..end) {
            dst.copy_from_slice(bytes);
            self.len = end;
        }
    }

    /// Appends the first `max_len` bytes of `payload` (all of it if shorter).
    #[inline(always)]
    pub fn push_prefix(&mut self, payload: &[u8], max_len: usize) {
        let n = payload.len().min(max_len);
        self.push(payload.get(..n).unwrap_or_default());
    }

    /// The bytes written so far.
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }

    /// The flow-key part (the first 38 bytes).
    #[inline(always)]
    pub fn flow_bytes(&self) -> &[u8] {
        self.buf.get(..FLOW_KEY_BYTES).unwrap_or_default()
    }

    /// `xxh3(flow-key part, seed)`: equal to [`FlowKey::hash`] of the flow it was built with.
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

    fn flow() -> FlowKey {
        FlowKey::new("192.0.2.1".parse().unwrap(), "198.51.100.7".parse().unwrap(), 1234, 80, 6)
    }

    #[test]
    fn flow_part_is_the_flow_keys_canonical_bytes() {
        let f = flow();
        let mut b = InvariantBytes::with_flow(&f);
        b.push(&[1, 2, 3]);
        assert_eq!(b.flow_bytes(), &f.canonical_bytes()[..]);
        assert_eq!(b.flow_hash(7), f.hash(7));
        assert_eq!(b.as_bytes().len(), FLOW_KEY_BYTES + 3);
        assert_eq!(b.identity(7), xxh3_64_with_seed(b.as_bytes(), 7));
        assert_ne!(b.identity(7), b.identity(8));
    }

    #[test]
    fn prefix_is_bounded_and_overflow_is_dropped() {
        let mut b = InvariantBytes::with_flow(&flow());
        b.push_prefix(&[9; 100], 4);
        assert_eq!(b.as_bytes().len(), FLOW_KEY_BYTES + 4);
        b.push_prefix(&[9; 2], 4);
        assert_eq!(b.as_bytes().len(), FLOW_KEY_BYTES + 6);
        b.push(&[0; MAX_INVARIANT_BYTES]);
        assert_eq!(b.as_bytes().len(), FLOW_KEY_BYTES + 6);
    }

    #[test]
    fn identity_is_pinned() {
        // Both points must agree across builds: pin one value so a change of the byte layout or
        // of the hash is noticed (recompute deliberately when the layout changes on purpose).
        let mut b = InvariantBytes::with_flow(&flow());
        b.push(&[0, 20, 0x12, 0x34]);
        let expected = xxh3_64_with_seed(
            &[
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
                0xff, 198, 51, 100, 7, 0x04, 0xd2, 0, 80, 6, 4, 0, 20, 0x12, 0x34,
            ],
            0x7769_7265_6c61_7431,
        );
        assert_eq!(b.identity(0x7769_7265_6c61_7431), expected);
        // xxh3 itself, pinned: the value xxhash-rust 0.8 computes for these 42 bytes.
        assert_eq!(expected, 0x59d5_9e78_fd30_04a7);
    }
}
