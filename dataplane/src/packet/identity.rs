//! Packet identity: the exact bytes both measurement points hash, and the hash.
//!
//! The identity is `xxh3_64_with_seed(invariant_bytes, identity_seed)`: the same value for the
//! same packet at every point, on any CPU and build. `invariant_bytes` is a fixed 56-byte header
//! block followed by a payload prefix of exactly P bytes, P = `payload_prefix_bytes` (a multiple
//! of 8, at most 64), zero-padded when the payload is shorter (integers big-endian):
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
//! | 40 | 12 | transport fields | below; unused bytes are 0 |
//! | 52 | 2 | IPv4 identification | 0 for IPv6 |
//! | 54 | 2 | TCP urgent pointer | 0 for other protocols |
//! | 56 | P | payload prefix | the first P payload bytes, then zeros if the payload is shorter |
//!
//! The first 38 bytes are exactly [`FlowKey::canonical_bytes`] of the packet's directional flow
//! key. The flow hash is [`FlowKey::hash`] of that key with the same seed: xxh3 of the first 40
//! bytes with bytes 38–39 (the upper-layer length) zeroed. It is computed from the header
//! words in registers, together with the identity ([`InvariantHeader::hashes`];
//! [`flow_key_hash`] is the same computation for a bare [`FlowKey`]).
//!
//! Transport fields (offset 40) and payload by protocol:
//! - TCP (6): sequence (4), acknowledgment (4), data offset/reserved/flags (2), window (2):
//!   header bytes 4–15 as they are on the wire, and the urgent pointer (bytes 18–19) at offset
//!   54. So bytes 40–55 are TCP header bytes 4–19 with the checksum replaced by the IPv4
//!   identification. The payload starts after the options.
//! - UDP (17): the UDP length (2), then 10 zero bytes. The payload ends at the UDP length.
//! - ICMP (1) and ICMPv6 (58): type, code and the 4-byte rest of header (echo id and
//!   sequence), then 6 zero bytes. The payload is everything after the 8-byte header.
//! - Any other protocol (ESP, GRE, SCTP, ...): 12 zero bytes; the "payload" is the upper-layer
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
//! upper-layer length and the TCP sequence number still tell most such packets apart. The
//! zero padding is unambiguous because the upper-layer length is hashed too.
//! Addresses and ports are included: a packet NATed between two points is not the same packet
//! for the two-point synopses (it shows as a loss). Exact duplicates (same invariant bytes)
//! share an identity; that is inherent to any content hash (lds.md §4 item 2, rda.md §6.3).
//!
//! Speed: xxh3 reads its input back with 8-byte loads right after the block is written, and a
//! load that spans two stores cannot be forwarded from the store buffer: it stalls until they
//! reach the cache (measured here: about 5 ns per hash). So the block is held as seven
//! little-endian 64-bit words taken straight from the wire bytes (no byte swapping: the wire
//! order is the buffer order), written with 8-byte stores at 8-aligned offsets, and the length
//! is a multiple of 8 (hence the fixed, zero-padded prefix): every load xxh3 makes then falls
//! inside one store. Both hashes are in fact computed in registers from those words, the flow
//! hash sharing two of its four 16-byte mixes with the identity; both are checked against the
//! crate.

use super::config::MAX_PAYLOAD_PREFIX_BYTES;
use super::flow::{FLOW_HASH_INPUT_BYTES, FLOW_KEY_BYTES, FlowKey};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Length of the fixed header block.
pub const HEADER_BLOCK_BYTES: usize = 56;

/// Size of the invariant-bytes buffer: header block + the largest payload prefix (64) = 120,
/// rounded up so a fixed 64-byte copy of the payload always fits.
pub const MAX_INVARIANT_BYTES: usize = 128;
const _: () = assert!(HEADER_BLOCK_BYTES + MAX_PAYLOAD_PREFIX_BYTES <= MAX_INVARIANT_BYTES);

/// The 56-byte header block of one packet (see the module docs), as seven little-endian words:
/// word `i` holds bytes `8i..8i+8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvariantHeader {
    words: [u64; 7],
}

/// Word 1 (or 3) of an IPv4-mapped address, bytes `00 00 ff ff a b c d`, from the address's
/// wire bytes read little-endian.
#[inline(always)]
pub(crate) const fn ipv4_mapped_hi(addr_le: u32) -> u64 {
    0xffff_0000 | ((addr_le as u64) << 32)
}

impl InvariantHeader {
    /// A block from its parts: the addresses' 4 words, the ports' 4 wire bytes read
    /// little-endian, protocol, version, upper-layer length, and bytes 40–55 as 2 words.
    #[inline(always)]
    pub(crate) fn from_parts(
        addr_words: [u64; 4],
        ports_le: u32,
        protocol: u8,
        ip_version: u8,
        upper_len: u16,
        tail: [u64; 2],
    ) -> Self {
        let [a0, a1, a2, a3] = addr_words;
        let [t0, t1] = tail;
        let w4 = u64::from(ports_le)
            | (u64::from(protocol) << 32)
            | (u64::from(ip_version) << 40)
            | (u64::from(upper_len.swap_bytes()) << 48);
        Self { words: [a0, a1, a2, a3, w4, t0, t1] }
    }

    /// A block for `flow` with the given upper-layer length and bytes 40–55 (tests, tools).
    pub fn new(flow: &FlowKey, upper_len: u16, tail: [u8; 16]) -> Self {
        let halves = |b: [u8; 16]| {
            let x = u128::from_le_bytes(b);
            [x as u64, (x >> 64) as u64]
        };
        let [s0, s1] = halves(flow.src_addr);
        let [d0, d1] = halves(flow.dst_addr);
        let [p0, p1] = flow.src_port.to_be_bytes();
        let [p2, p3] = flow.dst_port.to_be_bytes();
        Self::from_parts(
            [s0, s1, d0, d1],
            u32::from_le_bytes([p0, p1, p2, p3]),
            flow.protocol,
            flow.ip_version,
            upper_len,
            halves(tail),
        )
    }

    /// The packet's directional flow key.
    #[inline(always)]
    pub fn flow(&self) -> FlowKey {
        let [a0, a1, a2, a3, w4, _, _] = self.words;
        FlowKey {
            src_addr: ((u128::from(a1) << 64) | u128::from(a0)).to_le_bytes(),
            dst_addr: ((u128::from(a3) << 64) | u128::from(a2)).to_le_bytes(),
            src_port: (w4 as u16).swap_bytes(),
            dst_port: ((w4 >> 16) as u16).swap_bytes(),
            protocol: (w4 >> 32) as u8,
            ip_version: (w4 >> 40) as u8,
        }
    }

    /// The invariant bytes: this block, then the first `prefix_len` bytes of `payload`
    /// (zero-padded; `prefix_len` rounded down to a multiple of 8 and capped at 64).
    pub fn bytes(&self, payload: &[u8], prefix_len: usize) -> InvariantBytes {
        let mut buf = [0u8; MAX_INVARIANT_BYTES];
        let len = self.fill(&mut buf, payload, prefix_len);
        InvariantBytes { buf, len }
    }

    /// `(flow hash, identity)`: the same values as [`FlowKey::hash`] of [`Self::flow`] and
    /// [`InvariantBytes::identity`] of [`Self::bytes`], without moving the buffer out of this
    /// stack frame (the per-packet path).
    #[inline(always)]
    pub fn hashes(&self, payload: &[u8], prefix_len: usize, seed: u64) -> (u64, u64) {
        let [a0, a1, a2, a3, w4, _, _] = self.words;
        let flow = flow_key_words_hash([a0, a1, a2, a3, w4], seed);
        // One monomorphic, fully unrolled read and hash per prefix length; the prefix is a
        // configuration constant, so this branch always predicts.
        let identity = match prefix_len.min(MAX_PAYLOAD_PREFIX_BYTES) / 8 {
            0 => self.identity::<0, 7>(payload, seed),
            1 => self.identity::<1, 8>(payload, seed),
            2 => self.identity::<2, 9>(payload, seed),
            3 => self.identity::<3, 10>(payload, seed),
            4 => self.identity::<4, 11>(payload, seed),
            5 => self.identity::<5, 12>(payload, seed),
            6 => self.identity::<6, 13>(payload, seed),
            7 => self.identity::<7, 14>(payload, seed),
            _ => self.identity::<8, 15>(payload, seed),
        };
        (flow, identity)
    }

    /// The identity with a payload prefix of `P` words (`N` = 7 + `P` words in all).
    #[inline(always)]
    fn identity<const P: usize, const N: usize>(&self, payload: &[u8], seed: u64) -> u64 {
        const { assert!(N == 7 + P) };
        let [a0, a1, a2, a3, w4, w5, w6] = self.words;
        let [p0, p1, p2, p3, p4, p5, p6, p7] = payload_words::<P>(payload);
        invariant_words_hash::<N>(&[a0, a1, a2, a3, w4, w5, w6, p0, p1, p2, p3, p4, p5, p6, p7], seed)
    }

    /// Writes the invariant bytes into `buf` (zeroed), returns their length.
    #[inline(always)]
    fn fill(&self, buf: &mut [u8; MAX_INVARIANT_BYTES], payload: &[u8], prefix_len: usize) -> usize {
        let [w0, w1, w2, w3, w4, w5, w6] = self.words;
        put::<0, 8>(buf, w0.to_le_bytes());
        put::<8, 8>(buf, w1.to_le_bytes());
        put::<16, 8>(buf, w2.to_le_bytes());
        put::<24, 8>(buf, w3.to_le_bytes());
        put::<32, 8>(buf, w4.to_le_bytes());
        put::<40, 8>(buf, w5.to_le_bytes());
        put::<48, 8>(buf, w6.to_le_bytes());
        let p = prefix_len.min(MAX_PAYLOAD_PREFIX_BYTES) & !7;
        let tail = buf.get_mut(HEADER_BLOCK_BYTES..).unwrap_or_default();
        match (
            tail.first_chunk_mut::<MAX_PAYLOAD_PREFIX_BYTES>(),
            payload.first_chunk::<MAX_PAYLOAD_PREFIX_BYTES>(),
        ) {
            // The common case: one fixed-size copy; bytes past `p` are not hashed.
            (Some(dst), Some(src)) => *dst = *src,
            // A short payload: 8-byte words, the partial one zero-padded in a register, then
            // zero words. Every word is stored explicitly: the buffer's initial zeroing may be a
            // string store that the hash's loads cannot be forwarded from.
            _ => {
                let rest = payload.len() % 8;
                let partial = match payload.len().checked_sub(8).and_then(|at| payload.get(at..)) {
                    _ if rest == 0 => 0,
                    // The last 8 payload bytes, shifted so the `rest` final ones come first.
                    Some(last) => u64::from_le_bytes(last.try_into().unwrap_or_default()) >> (8 * (8 - rest)),
                    None => payload.iter().rev().fold(0u64, |w, b| (w << 8) | u64::from(*b)),
                };
                let whole = payload.len() / 8;
                for (k, dst) in tail.chunks_exact_mut(8).take(p / 8).enumerate() {
                    let w = match payload.get(k * 8..k * 8 + 8) {
                        Some(src) => u64::from_le_bytes(src.try_into().unwrap_or_default()),
                        None if k == whole => partial,
                        None => 0,
                    };
                    dst.copy_from_slice(&w.to_le_bytes());
                }
            }
        }
        HEADER_BLOCK_BYTES + p
    }
}

/// The first 64 bytes of XXH3's default secret (the xxHash specification's `kSecret`), as
/// little-endian words: what [`flow_key_hash`] mixes the key with.
const XXH3_SECRET: [u64; 8] = [
    u64::from_le_bytes([0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe]),
    u64::from_le_bytes([0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c]),
    u64::from_le_bytes([0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb]),
    u64::from_le_bytes([0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f]),
    u64::from_le_bytes([0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78]),
    u64::from_le_bytes([0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21]),
    u64::from_le_bytes([0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e]),
    u64::from_le_bytes([0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c]),
];

/// Bytes 64–127 of XXH3's default secret, as little-endian words: the rest of what
/// [`invariant_words_hash`] mixes inputs of 65–128 bytes with.
const XXH3_SECRET_HI: [u64; 8] = [
    u64::from_le_bytes([0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb]),
    u64::from_le_bytes([0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3]),
    u64::from_le_bytes([0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e]),
    u64::from_le_bytes([0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8]),
    u64::from_le_bytes([0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f]),
    u64::from_le_bytes([0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d]),
    u64::from_le_bytes([0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31]),
    u64::from_le_bytes([0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64]),
];

/// The first `P` payload words (little-endian, wire order), zero past the payload's end: the
/// payload prefix of the invariant bytes, in registers. Words past `P` are zero.
///
/// Only the `P` hashed words are read, each chosen by its constant index (whole, partial or
/// past the end), so the words stay in registers: a bare segment costs a few comparisons.
#[inline(always)]
fn payload_words<const P: usize>(payload: &[u8]) -> [u64; 8] {
    const { assert!(P <= 8) };
    let (whole, rest) = payload.as_chunks::<8>();
    let partial = match payload.len().checked_sub(8).and_then(|at| payload.get(at..)) {
        _ if rest.is_empty() => 0,
        // The last 8 payload bytes, shifted so the `rest` final ones come first.
        Some(last) => u64::from_le_bytes(last.try_into().unwrap_or_default()) >> (8 * (8 - rest.len())),
        None => rest.iter().rev().fold(0u64, |w, b| (w << 8) | u64::from(*b)),
    };
    let mut w = [0u64; 8];
    for (k, dst) in w.iter_mut().enumerate().take(P) {
        *dst = match whole.get(k) {
            Some(chunk) => u64::from_le_bytes(*chunk),
            None if k == whole.len() => partial,
            None => 0,
        };
    }
    w
}

/// `xxh3_64_with_seed` of the first `N` words of `words` (8·N bytes, 56 ≤ 8·N ≤ 120): XXH3's
/// 17–128-byte path in registers. Every read XXH3 makes (at 0, 16, 32, 48 and len − 16,
/// len − 32, len − 48, len − 64) is 8-aligned because the length is a multiple of 8, so each is
/// a pair of whole words. Equal to the crate's hash of [`InvariantHeader::bytes`] (tested).
#[inline(always)]
fn invariant_words_hash<const N: usize>(words: &[u64; 15], seed: u64) -> u64 {
    const { assert!(N >= 7 && N <= 15) };
    let w = |i: usize| words.get(i).copied().unwrap_or(0);
    let [k0, k1, k2, k3, k4, k5, k6, k7] = XXH3_SECRET;
    let [k8, k9, k10, k11, k12, k13, k14, k15] = XXH3_SECRET_HI;
    let mut acc = ((8 * N) as u64).wrapping_mul(XXH_PRIME64_1);
    // Inputs of more than 32 bytes (always here).
    if N > 8 {
        if N > 12 {
            acc = acc.wrapping_add(mix16(w(6), w(7), k12, k13, seed));
            acc = acc.wrapping_add(mix16(w(N.saturating_sub(8)), w(N - 7), k14, k15, seed));
        }
        acc = acc.wrapping_add(mix16(w(4), w(5), k8, k9, seed));
        acc = acc.wrapping_add(mix16(w(N - 6), w(N - 5), k10, k11, seed));
    }
    acc = acc.wrapping_add(mix16(w(2), w(3), k4, k5, seed));
    acc = acc.wrapping_add(mix16(w(N - 4), w(N - 3), k6, k7, seed));
    acc = acc.wrapping_add(mix16(w(0), w(1), k0, k1, seed));
    acc = acc.wrapping_add(mix16(w(N - 2), w(N - 1), k2, k3, seed));
    // XXH3's avalanche.
    acc ^= acc >> 37;
    acc = acc.wrapping_mul(0x1656_6791_9e37_79f9);
    acc ^ (acc >> 32)
}

/// XXH64's first prime, XXH3's length multiplier.
const XXH_PRIME64_1: u64 = 0x9e37_79b1_85eb_ca87;

/// XXH3's 16-byte mixer: the folded 128-bit product of the two input words keyed by the
/// secret and the seed.
#[inline(always)]
const fn mix16(lo: u64, hi: u64, secret_lo: u64, secret_hi: u64, seed: u64) -> u64 {
    let product = (lo ^ secret_lo.wrapping_add(seed)) as u128 * (hi ^ secret_hi.wrapping_sub(seed)) as u128;
    (product as u64) ^ ((product >> 64) as u64)
}

/// [`FlowKey::hash`] computed in registers: equal to it (tested against the xxhash-rust crate
/// for random keys and seeds).
pub fn flow_key_hash(flow: &FlowKey, seed: u64) -> u64 {
    let [a0, a1, a2, a3, w4, _, _] = InvariantHeader::new(flow, 0, [0; 16]).words;
    flow_key_words_hash([a0, a1, a2, a3, w4], seed)
}

/// XXH3's 33–64-byte path for the 40 bytes [`FlowKey::hash`] hashes, given as the header
/// block's little-endian words 0–4 (word 4's top two bytes, the upper-layer length, are
/// replaced by the zero padding). XXH3 reads 40 bytes at offsets 0, 8, 16 and 24: whole words.
/// The mixes of words (0, 1) and (2, 3) are the identity's own (same words, secret and seed),
/// so the compiler computes them once for both hashes.
#[inline(always)]
fn flow_key_words_hash(words: [u64; 5], seed: u64) -> u64 {
    let [w0, w1, w2, w3, w4] = words;
    let w4 = w4 & 0xffff_ffff_ffff;
    let [k0, k1, k2, k3, k4, k5, k6, k7] = XXH3_SECRET;
    let mut acc = (FLOW_HASH_INPUT_BYTES as u64).wrapping_mul(XXH_PRIME64_1);
    // Reads at 16 and len − 32 = 8, then at 0 and len − 16 = 24.
    acc = acc.wrapping_add(mix16(w2, w3, k4, k5, seed));
    acc = acc.wrapping_add(mix16(w1, w2, k6, k7, seed));
    acc = acc.wrapping_add(mix16(w0, w1, k0, k1, seed));
    acc = acc.wrapping_add(mix16(w3, w4, k2, k3, seed));
    // XXH3's avalanche.
    acc ^= acc >> 37;
    acc = acc.wrapping_mul(0x1656_6791_9e37_79f9);
    acc ^ (acc >> 32)
}

/// Bytes of a fridge pairing id's input: kind tag (1), flow key (38), value (4).
pub const PAIRING_INPUT_BYTES: usize = 1 + FLOW_KEY_BYTES + 4;

/// `xxh3_64_with_seed(tag ‖ canonical bytes of flow ‖ value big-endian, seed)`, the fridge's
/// pairing id (see `classify`), computed in registers: equal to the crate's hash of the 43
/// bytes (tested). Assembling the input in a buffer and reading it back with XXH3's 8-byte
/// loads at odd offsets stalled on every exchange packet (loads spanning several narrower
/// stores cannot be forwarded from them).
#[inline(always)]
pub fn pairing_words_hash(tag: u8, flow: &FlowKey, value: u32, seed: u64) -> u64 {
    let [k0, k1, k2, k3, w4, _, _] = InvariantHeader::new(flow, 0, [0; 16]).words;
    // Key bytes 32–37 (ports, protocol, version).
    let k4 = w4 & 0xffff_ffff_ffff;
    // The input as little-endian words b0..b5 (48 bytes, zero-padded): the tag at byte 0, the
    // key at 1..39, the value's big-endian bytes at 39..43.
    let v = u64::from(value.swap_bytes());
    let b0 = u64::from(tag) | (k0 << 8);
    let b1 = (k0 >> 56) | (k1 << 8);
    let b2 = (k1 >> 56) | (k2 << 8);
    let b3 = (k2 >> 56) | (k3 << 8);
    let b4 = (k3 >> 56) | (k4 << 8) | ((v & 0xff) << 56);
    let b5 = v >> 8;
    // XXH3's 33–64-byte path reads at 0, 8, 16, 24 and len − 32 = 11, 19, len − 16 = 27, 35.
    let at3 = |lo: u64, hi: u64| (lo >> 24) | (hi << 40);
    let [s0, s1, s2, s3, s4, s5, s6, s7] = XXH3_SECRET;
    let mut acc = (PAIRING_INPUT_BYTES as u64).wrapping_mul(XXH_PRIME64_1);
    acc = acc.wrapping_add(mix16(b2, b3, s4, s5, seed));
    acc = acc.wrapping_add(mix16(at3(b1, b2), at3(b2, b3), s6, s7, seed));
    acc = acc.wrapping_add(mix16(b0, b1, s0, s1, seed));
    acc = acc.wrapping_add(mix16(at3(b3, b4), at3(b4, b5), s2, s3, seed));
    // XXH3's avalanche.
    acc ^= acc >> 37;
    acc = acc.wrapping_mul(0x1656_6791_9e37_79f9);
    acc ^ (acc >> 32)
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

    /// [`FlowKey::hash`] of the header's flow: xxh3 of the flow-key part and two zero bytes.
    #[inline(always)]
    pub fn flow_hash(&self, seed: u64) -> u64 {
        let mut input = [0u8; FLOW_HASH_INPUT_BYTES];
        if let Some(key) = input.get_mut(..FLOW_KEY_BYTES) {
            key.copy_from_slice(self.flow_bytes());
        }
        xxh3_64_with_seed(&input, seed)
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
        InvariantHeader::new(&f, 20, TAIL)
    }

    const TAIL: [u8; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x12, 0x34, 13, 14];

    #[test]
    fn layout_matches_the_documentation() {
        let h = header();
        let b = h.bytes(&[0xaa, 0xbb, 0xcc], 32);
        let mut expect = h.flow().canonical_bytes().to_vec();
        expect.extend_from_slice(&20u16.to_be_bytes());
        expect.extend_from_slice(&TAIL);
        expect.extend_from_slice(&[0xaa, 0xbb, 0xcc]);
        expect.resize(HEADER_BLOCK_BYTES + 32, 0);
        assert_eq!(b.as_bytes(), &expect[..]);
        assert_eq!(b.flow_bytes(), &h.flow().canonical_bytes()[..]);
        assert_eq!(b.flow_hash(7), h.flow().hash(7));
        assert_eq!(b.identity(7), xxh3_64_with_seed(&expect, 7));
        assert_eq!(h.hashes(&[0xaa, 0xbb, 0xcc], 32, 7), (b.flow_hash(7), b.identity(7)));
        assert_ne!(b.identity(7), b.identity(8));
    }

    #[test]
    fn prefix_is_fixed_length_and_zero_padded() {
        let h = header();
        let long: Vec<u8> = (1..=200).collect();
        for (payload_len, prefix, hashed) in [
            (200, 32, 32),
            (200, 64, 64),
            (200, 1000, 64),
            (200, 30, 24),
            (10, 32, 32),
            (0, 32, 32),
            (70, 0, 0),
        ]
        .into_iter()
        .chain((0..=64).map(|n| (n, 64, 64)))
        {
            let b = h.bytes(&long[..payload_len], prefix);
            assert_eq!(b.as_bytes().len(), HEADER_BLOCK_BYTES + hashed, "{payload_len} {prefix}");
            let copied = payload_len.min(hashed);
            assert_eq!(&b.as_bytes()[HEADER_BLOCK_BYTES..][..copied], &long[..copied]);
            assert!(b.as_bytes()[HEADER_BLOCK_BYTES + copied..].iter().all(|x| *x == 0));
            assert_eq!(h.hashes(&long[..payload_len], prefix, 3), (b.flow_hash(3), b.identity(3)));
        }
    }

    #[test]
    fn register_flow_hash_equals_xxh3_of_the_key() {
        use proptest::prelude::*;
        proptest!(|(src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), sp in any::<u16>(), dp in any::<u16>(),
                   proto in any::<u8>(), ver in any::<u8>(), seed in any::<u64>())| {
            let k = FlowKey { src_addr: src, dst_addr: dst, src_port: sp, dst_port: dp, protocol: proto, ip_version: ver };
            prop_assert_eq!(flow_key_hash(&k, seed), k.hash(seed));
        });
        let k = FlowKey::default();
        for seed in [0, 1, u64::MAX, 0x7769_7265_6c61_7431] {
            assert_eq!(flow_key_hash(&k, seed), k.hash(seed));
        }
    }

    #[test]
    fn register_pairing_id_equals_xxh3_of_the_bytes() {
        use crate::packet::classify::{pairing_id, pairing_id_bytes};
        use crate::packet::exchange::ExchangeKind;
        use proptest::prelude::*;
        let kinds = [ExchangeKind::TcpHandshake, ExchangeKind::Dns, ExchangeKind::TcpData];
        proptest!(|(src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), sp in any::<u16>(), dp in any::<u16>(),
                   proto in any::<u8>(), ver in any::<u8>(), value in any::<u32>(), seed in any::<u64>(),
                   kind in 0usize..3)| {
            let k = FlowKey { src_addr: src, dst_addr: dst, src_port: sp, dst_port: dp, protocol: proto, ip_version: ver };
            prop_assert_eq!(pairing_id(kinds[kind], &k, value, seed), pairing_id_bytes(kinds[kind], &k, value, seed));
        });
        // The definition, spelled out once with the crate.
        let k = FlowKey { src_port: 0x1234, dst_port: 443, protocol: 6, ip_version: 4, ..FlowKey::default() };
        let mut b = vec![1u8];
        b.extend_from_slice(&k.canonical_bytes());
        b.extend_from_slice(&0xdead_beef_u32.to_be_bytes());
        assert_eq!(pairing_id(kinds[0], &k, 0xdead_beef, 9), xxh3_64_with_seed(&b, 9));
    }

    #[test]
    fn register_identity_equals_xxh3_of_the_bytes() {
        use proptest::prelude::*;
        proptest!(|(tail in any::<[u8; 16]>(), upper_len in any::<u16>(), seed in any::<u64>(),
                   payload in proptest::collection::vec(any::<u8>(), 0..100), prefix in 0usize..80)| {
            let f = FlowKey::new("2001:db8::1".parse().unwrap(), "192.0.2.9".parse().unwrap(), 53, 4000, 17);
            let h = InvariantHeader::new(&f, upper_len, tail);
            let b = h.bytes(&payload, prefix);
            prop_assert_eq!(h.hashes(&payload, prefix, seed), (f.hash(seed), xxh3_64_with_seed(b.as_bytes(), seed)));
        });
    }

    #[test]
    fn identity_is_pinned() {
        // Both points must agree across builds and versions: pin one value so a change of the
        // byte layout or of the hash function is noticed (xxhash-rust 0.8's xxh3 of the 88
        // bytes below with the default seed).
        let b = header().bytes(&[1, 2, 3], 32);
        let mut bytes = vec![
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
            198, 51, 100, 7, 0x04, 0xd2, 0, 80, 6, 4, 0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x12,
            0x34, 13, 14, 1, 2, 3,
        ];
        bytes.resize(88, 0);
        assert_eq!(b.as_bytes(), &bytes[..]);
        assert_eq!(b.identity(0x7769_7265_6c61_7431), xxh3_64_with_seed(&bytes, 0x7769_7265_6c61_7431));
        assert_eq!(b.identity(0x7769_7265_6c61_7431), 0xa13c_a985_dd37_98b3);
    }
}
