//! Hand-built frames for every verdict, the identity's invariance, and the classifiers.

use super::*;
use crate::packet::class::SkipReason::*;
use crate::packet::classify::pairing_id;
use crate::packet::exchange::{ExchangeKind, Role};
use crate::packet::synth::{FrameSpec, IpSpec, L4Spec, internet_checksum};
use crate::packet::tcp::flags::{ACK, FIN, PSH, RST, SYN};

const C4: [u8; 4] = [192, 0, 2, 10];
const S4: [u8; 4] = [198, 51, 100, 20];
const C6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a];
const S6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14];

fn cfg() -> PacketConfig {
    PacketConfig::default()
}

fn measured(frame: &[u8], cfg: &PacketConfig) -> Measurement {
    match measure(frame, cfg) {
        Ok(m) => m,
        Err(r) => panic!("expected a measurement, got {r:?} for {frame:02x?}"),
    }
}

fn skipped(frame: &[u8]) -> SkipReason {
    match measure(frame, &cfg()) {
        Ok(m) => panic!("expected a skip, got {m:?}"),
        Err(r) => r,
    }
}

fn tcp4(seq: u32, ack: u32, flags: u8, payload: &[u8]) -> FrameSpec {
    FrameSpec::new(IpSpec::v4(C4, S4, 0x1234), L4Spec::tcp(40000, 80, seq, ack, flags), payload.to_vec())
}

fn udp6(payload: &[u8]) -> FrameSpec {
    FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::udp(5000, 6000), payload.to_vec())
}

/// A DNS header with `id` and the QR bit.
fn dns_msg(id: u16, response: bool) -> Vec<u8> {
    let mut m = vec![0u8; 12];
    m[0..2].copy_from_slice(&id.to_be_bytes());
    m[2] = if response { 0x81 } else { 0x01 };
    m[5] = 1;
    m.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
    m
}

/// Swaps source and destination of a spec's IP and transport headers.
fn reversed(mut s: FrameSpec) -> FrameSpec {
    match &mut s.ip {
        IpSpec::V4 { src, dst, .. } => std::mem::swap(src, dst),
        IpSpec::V6 { src, dst, .. } => std::mem::swap(src, dst),
    }
    match &mut s.l4 {
        L4Spec::Tcp { src_port, dst_port, .. } | L4Spec::Udp { src_port, dst_port, .. } => {
            std::mem::swap(src_port, dst_port)
        }
        _ => {}
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Measured packets

#[test]
fn ipv4_tcp_gives_flow_key_hash_and_identity() {
    let f = tcp4(1000, 0, PSH | ACK, b"hello").build();
    let c = cfg();
    let m = measured(&f, &c);
    let expect = FlowKey::new("192.0.2.10".parse().unwrap(), "198.51.100.20".parse().unwrap(), 40000, 80, 6);
    assert_eq!(m.flow, expect);
    assert_eq!(m.flow_hash, expect.hash(c.identity_seed));
    assert_eq!(m.exchange, None);
    // The identity is xxh3 over exactly the documented bytes.
    let mut bytes = expect.canonical_bytes().to_vec();
    bytes.extend_from_slice(&(20u16 + 5).to_be_bytes()); // upper-layer length
    bytes.extend_from_slice(&1000u32.to_be_bytes()); // seq
    bytes.extend_from_slice(&0u32.to_be_bytes()); // ack
    bytes.extend_from_slice(&[0x50, PSH | ACK]); // data offset, flags
    bytes.extend_from_slice(&65535u16.to_be_bytes()); // window
    bytes.extend_from_slice(&0x1234u16.to_be_bytes()); // IPv4 identification
    bytes.extend_from_slice(&[0, 0]); // urgent pointer
    bytes.extend_from_slice(b"hello");
    bytes.resize(56 + 32, 0); // the 32-byte payload prefix, zero-padded
    assert_eq!(m.identity, xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, c.identity_seed));
    let obs = m.observation(77);
    assert_eq!((obs.ts_ns, obs.flow, obs.flow_hash, obs.identity), (77, &m.flow, m.flow_hash, m.identity));
}

#[test]
fn ipv6_udp_identity_bytes() {
    let f = udp6(b"abc").build();
    let c = cfg();
    let m = measured(&f, &c);
    assert_eq!((m.flow.ip_version, m.flow.protocol, m.flow.src_port, m.flow.dst_port), (6, 17, 5000, 6000));
    assert_eq!((m.flow.src_addr, m.flow.dst_addr), (C6, S6));
    let mut bytes = m.flow.canonical_bytes().to_vec();
    bytes.extend_from_slice(&11u16.to_be_bytes()); // upper-layer length
    bytes.extend_from_slice(&11u16.to_be_bytes()); // UDP length
    bytes.extend_from_slice(&[0; 14]); // no IPv4 identification, no urgent pointer
    bytes.extend_from_slice(b"abc");
    bytes.resize(56 + 32, 0);
    assert_eq!(m.identity, xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, c.identity_seed));
}

#[test]
fn icmp_and_icmpv6_echo() {
    let echo =
        |seq: u16| L4Spec::Icmp { msg_type: 8, code: 0, rest: [0x12, 0x34, (seq >> 8) as u8, seq as u8] };
    let a = measured(&FrameSpec::new(IpSpec::v4(C4, S4, 1), echo(1), b"ping".to_vec()).build(), &cfg());
    let b = measured(&FrameSpec::new(IpSpec::v4(C4, S4, 1), echo(2), b"ping".to_vec()).build(), &cfg());
    assert_eq!((a.flow.protocol, a.flow.src_port, a.flow.dst_port), (1, 0, 0));
    assert_ne!(a.identity, b.identity, "the echo sequence number is invariant");
    let v6 = L4Spec::Icmp { msg_type: 128, code: 0, rest: [0, 1, 0, 1] };
    let m = measured(&FrameSpec::new(IpSpec::v6(C6, S6), v6, vec![]).build(), &cfg());
    assert_eq!((m.flow.protocol, m.flow.ip_version), (58, 6));
}

#[test]
fn other_protocols_hash_a_prefix_of_their_payload() {
    // ESP: SPI and sequence number make the prefix.
    let esp = |seq: u8| {
        FrameSpec::new(IpSpec::v4(C4, S4, 9), L4Spec::Raw { protocol: 50 }, vec![0, 0, 1, 0, 0, 0, 0, seq])
    };
    let a = measured(&esp(1).build(), &cfg());
    let b = measured(&esp(2).build(), &cfg());
    assert_eq!((a.flow.protocol, a.flow.src_port), (50, 0));
    assert_ne!(a.identity, b.identity);
    // IPv6 "no next header" with an empty payload is still a packet.
    let none = FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::Raw { protocol: 59 }, vec![]);
    assert_eq!(measured(&none.build(), &cfg()).flow.protocol, 59);
}

#[test]
fn vlan_and_qinq_frames_are_measured_like_untagged_ones() {
    let plain = tcp4(1, 0, SYN, b"");
    let base = measured(&plain.build(), &cfg());
    for tags in [vec![(0x8100, 10)], vec![(0x88a8, 100), (0x8100, 10)], vec![(0x9100, 5), (0x8100, 7)]] {
        let mut s = plain.clone();
        let inner_vid = tags.last().map_or(0, |t| t.1);
        s.vlan_tags = tags;
        // The innermost tag is kept as the encapsulation identifier, outside what pairs.
        let encap = crate::packet::Encap::new(crate::packet::EncapKind::Vlan, u32::from(inner_vid));
        assert_eq!(measured(&s.build(), &cfg()), Measurement { encap, ..base });
    }
}

#[test]
fn ipv6_extension_chain_reaches_the_transport_header() {
    let mut s = FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::tcp(1, 2, 3, 4, ACK), b"x".to_vec());
    let hbh = vec![0, 0, 5, 2, 0, 0, 1, 0]; // router alert padded
    let routing = vec![0, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let dest = vec![0, 0, 1, 4, 0, 0, 0, 0];
    let ah = vec![0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2]; // 12 bytes
    let atomic_frag = vec![0, 0, 0, 0, 0, 0, 0, 9];
    let IpSpec::V6 { ext, .. } = &mut s.ip else { unreachable!() };
    *ext = vec![(0, hbh), (43, routing), (60, dest), (51, ah), (44, atomic_frag)];
    let m = measured(&s.build(), &cfg());
    assert_eq!((m.flow.protocol, m.flow.src_port, m.flow.dst_port), (6, 1, 2));
    // Extension headers are not part of the identity, only the upper-layer length is.
    let without = FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::tcp(1, 2, 3, 4, ACK), b"x".to_vec());
    assert_eq!(measured(&without.build(), &cfg()).identity, m.identity);
}

// ---------------------------------------------------------------------------------------------
// Skipped frames

#[test]
fn arp_and_unknown_ethertypes() {
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(60, 0);
    assert_eq!(skipped(&arp), Arp);
    // MPLS (0x8847) is walked now: see `packet::encap`.
    for et in [0x88ccu16, 0x88f7, 0x0026, 0x0000, 0xffff] {
        let mut f = arp.clone();
        f[12..14].copy_from_slice(&et.to_be_bytes());
        assert_eq!(skipped(&f), UnknownEthertype, "ethertype {et:#06x}");
    }
    // ARP behind a VLAN tag is still ARP.
    let mut tagged = arp[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
    tagged.extend_from_slice(&arp[12..]);
    assert_eq!(skipped(&tagged), Arp);
}

#[test]
fn truncated_at_every_byte_of_every_header() {
    // Frames without padding whose last header ends exactly at the frame end: every proper
    // prefix must be Truncated (the IP length is then beyond the frame, or a header is cut).
    let mut cases = vec![tcp4(1, 2, ACK, b"data"), udp6(b"payload")];
    let mut tagged = tcp4(1, 2, ACK, b"");
    tagged.vlan_tags = vec![(0x88a8, 1), (0x8100, 2)];
    cases.push(tagged);
    let mut with_ext = udp6(b"");
    let IpSpec::V6 { ext, .. } = &mut with_ext.ip else { unreachable!() };
    *ext =
        vec![(0, vec![0, 0, 1, 4, 0, 0, 0, 0]), (60, vec![0, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])];
    cases.push(with_ext);
    let mut with_opts = tcp4(1, 2, SYN, b"");
    let IpSpec::V4 { options, .. } = &mut with_opts.ip else { unreachable!() };
    *options = vec![7, 7, 4, 0, 0, 0, 0, 0]; // record route
    let L4Spec::Tcp { options: tcp_opts, .. } = &mut with_opts.l4 else { unreachable!() };
    *tcp_opts = vec![2, 4, 0x05, 0xb4]; // MSS 1460
    cases.push(with_opts);
    for mut spec in cases {
        spec.min_frame_len = 0;
        let f = spec.build();
        measured(&f, &cfg());
        for n in 0..f.len() {
            assert_eq!(measure(&f[..n], &cfg()).err(), Some(Truncated), "{spec:?} cut at {n}");
        }
    }
}

#[test]
fn bad_ipv4_headers() {
    let good = tcp4(1, 2, ACK, b"0123456789").build();
    let ip = 14;
    let with = |at: usize, v: &[u8]| {
        let mut f = good.clone();
        f[at..at + v.len()].copy_from_slice(v);
        f
    };
    for ihl in 0..5u8 {
        assert_eq!(skipped(&with(ip, &[0x40 | ihl])), Malformed, "IHL {ihl}");
    }
    assert_eq!(skipped(&with(ip, &[0x65])), Malformed, "version 6 under ethertype IPv4");
    // IHL pointing past the total length.
    assert_eq!(skipped(&with(ip, &[0x4f])), Malformed);
    // Total length below the header, and beyond the frame.
    assert_eq!(skipped(&with(ip + 2, &19u16.to_be_bytes())), Malformed);
    assert_eq!(skipped(&with(ip + 2, &(good.len() as u16 - 13).to_be_bytes())), Truncated);
    assert_eq!(skipped(&with(ip + 2, &u16::MAX.to_be_bytes())), Truncated);
    // A total length that leaves less than a TCP header: the transport header is malformed.
    assert_eq!(skipped(&with(ip + 2, &39u16.to_be_bytes())), Malformed);
    // Exactly a TCP header and no data is a packet.
    assert!(measure(&with(ip + 2, &40u16.to_be_bytes()), &cfg()).is_ok());
}

#[test]
fn ipv4_fragments_first_and_later() {
    let frag = |flags_frag: u16| {
        let mut s = tcp4(1, 2, ACK, b"0123456789");
        let IpSpec::V4 { flags_frag: ff, .. } = &mut s.ip else { unreachable!() };
        *ff = flags_frag;
        s.build()
    };
    assert_eq!(skipped(&frag(0x2000)), Fragment, "first fragment: MF, offset 0");
    assert_eq!(skipped(&frag(0x00b9)), Fragment, "last fragment: offset 185");
    assert_eq!(skipped(&frag(0x20b9)), Fragment, "middle fragment");
    assert!(measure(&frag(0x4000), &cfg()).is_ok(), "DF alone is no fragment");
    assert!(measure(&frag(0x0000), &cfg()).is_ok());
    // A non-first fragment has no transport header: it is a fragment, not malformed.
    let mut s = FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::Raw { protocol: 6 }, vec![1, 2, 3]);
    let IpSpec::V4 { flags_frag, .. } = &mut s.ip else { unreachable!() };
    *flags_frag = 0x0010;
    assert_eq!(skipped(&s.build()), Fragment);
}

#[test]
fn ipv6_fragments_and_bad_chains() {
    let with_ext = |ext: Vec<(u8, Vec<u8>)>, l4: L4Spec, payload: &[u8]| {
        let mut s = FrameSpec::new(IpSpec::v6(C6, S6), l4, payload.to_vec());
        let IpSpec::V6 { ext: e, .. } = &mut s.ip else { unreachable!() };
        *e = ext;
        s.build()
    };
    let first = vec![0, 0, 0x00, 0x01, 0, 0, 0, 7]; // offset 0, M
    let later = vec![0, 0, 0x05, 0xa8, 0, 0, 0, 7]; // offset 1448, last
    assert_eq!(skipped(&with_ext(vec![(44, first)], L4Spec::udp(1, 2), b"abc")), Fragment);
    assert_eq!(skipped(&with_ext(vec![(44, later.clone())], L4Spec::Raw { protocol: 17 }, b"abc")), Fragment);
    assert_eq!(
        skipped(&with_ext(vec![(0, vec![0; 8]), (44, later)], L4Spec::Raw { protocol: 17 }, b"")),
        Fragment
    );
    // A chain whose declared lengths run past the IPv6 payload length: malformed.
    let mut f = with_ext(vec![(60, vec![0, 0, 1, 4, 0, 0, 0, 0])], L4Spec::udp(1, 2), b"");
    f[14 + 40 + 1] = 3; // destination options now claim 32 bytes
    assert_eq!(skipped(&f), Malformed);
    // The same, for a frame that also carries padding past the IPv6 payload.
    let mut f = with_ext(vec![(0, vec![0, 0, 1, 4, 0, 0, 0, 0])], L4Spec::Raw { protocol: 59 }, b"");
    f.resize(100, 0);
    f[14 + 40 + 1] = 2;
    assert_eq!(skipped(&f), Malformed);
    // More than MAX_EXT_HEADERS headers.
    let chain = (0..9).map(|_| (60u8, vec![0, 0, 1, 4, 0, 0, 0, 0])).collect();
    assert_eq!(skipped(&with_ext(chain, L4Spec::udp(1, 2), b"")), Malformed);
    // Version 4 under ethertype IPv6.
    let mut f = udp6(b"x").build();
    f[14] = 0x45;
    assert_eq!(skipped(&f), Malformed);
}

#[test]
fn bad_transport_headers() {
    let good = tcp4(1, 2, ACK, b"0123456789").build();
    let tcp = 14 + 20;
    for off in 0..5u8 {
        let mut f = good.clone();
        f[tcp + 12] = off << 4;
        assert_eq!(skipped(&f), Malformed, "data offset {off}");
    }
    for off in [8u8, 15] {
        let mut f = good.clone();
        f[tcp + 12] = off << 4; // options past the end of the 30-byte segment
        assert_eq!(skipped(&f), Malformed, "data offset {off}");
    }
    let mut f = good.clone();
    f[tcp + 12] = 7 << 4; // 28 bytes of header in a 30-byte segment: fine
    assert!(measure(&f, &cfg()).is_ok());

    let udp = udp6(b"0123").build();
    let u = 14 + 40;
    for len in [0u16, 7, 13] {
        let mut f = udp.clone();
        f[u + 4..u + 6].copy_from_slice(&len.to_be_bytes());
        assert_eq!(skipped(&f), Malformed, "UDP length {len}");
    }
    let mut f = udp.clone();
    f[u + 4..u + 6].copy_from_slice(&10u16.to_be_bytes()); // shorter than the IP payload: allowed
    assert!(measure(&f, &cfg()).is_ok());

    // An ICMP message shorter than its 8-byte header inside a complete IP packet.
    let short = FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::Raw { protocol: 1 }, vec![8, 0, 0, 0]);
    assert_eq!(skipped(&short.build()), Malformed);
    let short = FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::Raw { protocol: 6 }, vec![0; 19]);
    assert_eq!(skipped(&short.build()), Malformed);
}

#[test]
fn counters_count_each_verdict() {
    let mut counters = PacketCounters::default();
    let c = cfg();
    let mut arp = tcp4(1, 2, ACK, b"").build();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut lldp = arp.clone();
    lldp[12..14].copy_from_slice(&[0x88, 0xcc]);
    let mut frag = tcp4(1, 2, ACK, b"").build();
    frag[14 + 6] = 0x20;
    let good = tcp4(1, 2, ACK, b"").build();
    let mut bad = good.clone();
    bad[14] = 0x44;
    let frames: Vec<&[u8]> = vec![&good, &good, &arp, &lldp, &frag, &good[..20], &bad, &[]];
    for f in &frames {
        inspect(f, &c, &mut counters);
    }
    let expect = PacketCounters {
        measured: 2,
        arp: 1,
        unknown_ethertype: 1,
        fragment: 1,
        truncated: 2,
        malformed: 1,
        ..Default::default()
    };
    assert_eq!(counters, expect);
    assert_eq!(inspect(&good, &c, &mut counters).skip_reason(), None);
    assert_eq!(inspect(&bad, &c, &mut counters).measurement(), None);
}

// ---------------------------------------------------------------------------------------------
// Identity: what must not and what must change it

fn identity(frame: &[u8]) -> u64 {
    measured(frame, &cfg()).identity
}

#[test]
fn identity_ignores_l2_ttl_checksum_and_dscp() {
    let base_spec = tcp4(7, 9, PSH | ACK, b"some payload bytes");
    let base = identity(&base_spec.build());

    let mut s = base_spec.clone();
    s.src_mac = [0xaa; 6];
    s.dst_mac = [0xbb; 6];
    s.vlan_tags = vec![(0x8100, 42)];
    s.min_frame_len = 128; // more padding
    assert_eq!(identity(&s.build()), base, "L2 header and padding");

    let mut s = base_spec.clone();
    let IpSpec::V4 { ttl, tos, flags_frag, .. } = &mut s.ip else { unreachable!() };
    (*ttl, *tos, *flags_frag) = (3, 0xbb, 0);
    assert_eq!(identity(&s.build()), base, "TTL, DSCP/ECN (checksum recomputed), DF");

    let mut f = base_spec.build();
    f[14 + 10] ^= 0xff; // a wrong IPv4 header checksum
    f[14 + 20 + 16] ^= 0x5a; // and a different TCP checksum
    assert_eq!(identity(&f), base, "checksums");

    // IPv4 options (record route filled in by a router) and TCP options (MSS clamping).
    let mut a = base_spec.clone();
    let mut b = base_spec.clone();
    let IpSpec::V4 { options, .. } = &mut a.ip else { unreachable!() };
    *options = vec![7, 7, 4, 0, 0, 0, 0, 0];
    let IpSpec::V4 { options, .. } = &mut b.ip else { unreachable!() };
    *options = vec![7, 7, 8, 10, 0, 0, 1, 0];
    let L4Spec::Tcp { options: o, .. } = &mut a.l4 else { unreachable!() };
    *o = vec![2, 4, 0x05, 0xb4];
    let L4Spec::Tcp { options: o, .. } = &mut b.l4 else { unreachable!() };
    *o = vec![2, 4, 0x05, 0x78];
    assert_eq!(identity(&a.build()), identity(&b.build()), "IPv4 and TCP option contents");

    let v6 = udp6(b"ipv6 payload");
    let base6 = identity(&v6.build());
    let mut s = v6.clone();
    let IpSpec::V6 { hop_limit, traffic_class, flow_label, .. } = &mut s.ip else { unreachable!() };
    (*hop_limit, *traffic_class, *flow_label) = (1, 0xff, 0xabcde);
    s.vlan_tags = vec![(0x88a8, 1), (0x8100, 2)];
    assert_eq!(identity(&s.build()), base6, "hop limit, traffic class, flow label, QinQ");
    let mut s = v6.clone();
    let IpSpec::V6 { ext, .. } = &mut s.ip else { unreachable!() };
    *ext = vec![(0, vec![0, 0, 0x3e, 4, 0, 0, 0, 0])];
    let mut other = s.clone();
    let IpSpec::V6 { ext, .. } = &mut other.ip else { unreachable!() };
    *ext = vec![(0, vec![0, 0, 0x3e, 4, 1, 2, 3, 4])];
    assert_eq!(identity(&s.build()), identity(&other.build()), "hop-by-hop option data changed en route");
}

#[test]
fn identity_changes_with_invariant_bytes() {
    let base_spec = tcp4(7, 9, PSH | ACK, b"some payload bytes");
    let base = identity(&base_spec.build());
    let mutate = |f: fn(&mut FrameSpec)| {
        let mut s = base_spec.clone();
        f(&mut s);
        identity(&s.build())
    };
    let changed = [
        mutate(|s| {
            let IpSpec::V4 { src, .. } = &mut s.ip else { unreachable!() };
            src[3] ^= 1;
        }),
        mutate(|s| {
            let IpSpec::V4 { dst, .. } = &mut s.ip else { unreachable!() };
            dst[0] ^= 1;
        }),
        mutate(|s| {
            let IpSpec::V4 { ident, .. } = &mut s.ip else { unreachable!() };
            *ident ^= 1;
        }),
        mutate(|s| {
            let L4Spec::Tcp { src_port, .. } = &mut s.l4 else { unreachable!() };
            *src_port ^= 1;
        }),
        mutate(|s| {
            let L4Spec::Tcp { dst_port, .. } = &mut s.l4 else { unreachable!() };
            *dst_port ^= 1;
        }),
        mutate(|s| {
            let L4Spec::Tcp { seq, .. } = &mut s.l4 else { unreachable!() };
            *seq ^= 1;
        }),
        mutate(|s| {
            let L4Spec::Tcp { ack, .. } = &mut s.l4 else { unreachable!() };
            *ack ^= 1;
        }),
        mutate(|s| {
            let L4Spec::Tcp { flags, .. } = &mut s.l4 else { unreachable!() };
            *flags ^= FIN;
        }),
        mutate(|s| {
            let L4Spec::Tcp { window, .. } = &mut s.l4 else { unreachable!() };
            *window ^= 1;
        }),
        mutate(|s| s.payload[0] ^= 1),
        mutate(|s| s.payload[17] ^= 1),
        mutate(|s| s.payload.push(0)),
    ];
    for (i, id) in changed.iter().enumerate() {
        assert_ne!(*id, base, "mutation {i} must change the identity");
    }
}

#[test]
fn payload_prefix_length_bounds_what_is_hashed() {
    let payload: Vec<u8> = (0..100).collect();
    let spec = |p: &[u8]| FrameSpec::new(IpSpec::v4(C4, S4, 5), L4Spec::udp(1, 2), p.to_vec()).build();
    let mut later = payload.clone();
    later[40] ^= 1;
    let mut early = payload.clone();
    early[31] ^= 1;
    let c32 = cfg();
    let c64 = PacketConfig { payload_prefix_bytes: 64, ..cfg() };
    let c0 = PacketConfig { payload_prefix_bytes: 0, ..cfg() };
    assert_eq!(measured(&spec(&payload), &c32).identity, measured(&spec(&later), &c32).identity);
    assert_ne!(measured(&spec(&payload), &c32).identity, measured(&spec(&early), &c32).identity);
    assert_ne!(measured(&spec(&payload), &c64).identity, measured(&spec(&later), &c64).identity);
    assert_eq!(measured(&spec(&payload), &c0).identity, measured(&spec(&early), &c0).identity);
    // An out-of-range prefix is clamped, never a panic.
    let huge = PacketConfig { payload_prefix_bytes: usize::MAX, ..cfg() };
    assert_eq!(measured(&spec(&payload), &huge).identity, measured(&spec(&payload), &c64).identity);
    // The seed changes every identity and flow hash.
    let other_seed = PacketConfig { identity_seed: 1, ..cfg() };
    let (a, b) = (measured(&spec(&payload), &c32), measured(&spec(&payload), &other_seed));
    assert_ne!((a.identity, a.flow_hash), (b.identity, b.flow_hash));
}

// ---------------------------------------------------------------------------------------------
// Request/response classification

fn exchange(spec: &FrameSpec, cfg: &PacketConfig) -> Option<Exchange> {
    measured(&spec.build(), cfg).exchange
}

#[test]
fn syn_and_syn_ack_pair() {
    let c = cfg();
    let syn = tcp4(1000, 0, SYN, b"");
    let syn_ack = reversed(tcp4(5000, 1001, SYN | ACK, b""));
    let req = exchange(&syn, &c).unwrap();
    let resp = exchange(&syn_ack, &c).unwrap();
    assert_eq!((req.kind, req.role), (ExchangeKind::TcpHandshake, Role::Request));
    assert_eq!((resp.kind, resp.role), (ExchangeKind::TcpHandshake, Role::Response));
    assert_eq!(req.id, resp.id);
    let flow = measured(&syn.build(), &c).flow;
    assert_eq!(req.id, pairing_id(ExchangeKind::TcpHandshake, &flow, 1001, c.identity_seed));

    // P6: a retransmitted SYN (same ISN, later IP id) has the same id again.
    let mut again = syn.clone();
    let IpSpec::V4 { ident, .. } = &mut again.ip else { unreachable!() };
    *ident = 0x9999;
    assert_eq!(exchange(&again, &c).unwrap().id, req.id);
    // P7: a duplicated SYN/ACK too; the fridge erases on the first match.
    assert_eq!(exchange(&syn_ack.clone(), &c).unwrap().id, resp.id);

    // Non-matching responses: wrong ack, wrong direction, other port, other ISN.
    let wrong_ack = reversed(tcp4(5000, 1000, SYN | ACK, b""));
    assert_ne!(exchange(&wrong_ack, &c).unwrap().id, req.id);
    let same_dir = tcp4(5000, 1001, SYN | ACK, b"");
    assert_ne!(exchange(&same_dir, &c).unwrap().id, req.id);
    let mut other_port = syn_ack.clone();
    let L4Spec::Tcp { dst_port, .. } = &mut other_port.l4 else { unreachable!() };
    *dst_port = 40001;
    assert_ne!(exchange(&other_port, &c).unwrap().id, req.id);
    assert_ne!(exchange(&tcp4(2000, 0, SYN, b""), &c).unwrap().id, req.id);

    // The third packet of the handshake, RSTs and a disabled classifier give nothing.
    assert_eq!(exchange(&tcp4(1001, 5001, ACK, b""), &c), None);
    assert_eq!(exchange(&tcp4(1000, 0, SYN | RST, b""), &c), None);
    let mut off = cfg();
    off.classify.tcp_handshake = false;
    assert_eq!(exchange(&syn, &off), None);
    // Sequence wrap: seq + 1 wraps to 0.
    let wrap = tcp4(u32::MAX, 0, SYN, b"");
    let wrap_resp = reversed(tcp4(7, 0, SYN | ACK, b""));
    assert_eq!(exchange(&wrap, &c).unwrap().id, exchange(&wrap_resp, &c).unwrap().id);
}

#[test]
fn syn_ack_pair_over_ipv6() {
    let c = cfg();
    let syn = FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::tcp(1234, 443, 77, 0, SYN), vec![]);
    let syn_ack =
        reversed(FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::tcp(1234, 443, 900, 78, SYN | ACK), vec![]));
    assert_eq!(exchange(&syn, &c).unwrap().id, exchange(&syn_ack, &c).unwrap().id);
}

#[test]
fn dns_over_udp_pairs_on_reversed_tuple_and_id() {
    let c = cfg();
    let q = FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(53001, 53), dns_msg(0xbeef, false));
    let r = reversed(FrameSpec::new(IpSpec::v4(C4, S4, 2), L4Spec::udp(53001, 53), dns_msg(0xbeef, true)));
    let (req, resp) = (exchange(&q, &c).unwrap(), exchange(&r, &c).unwrap());
    assert_eq!(
        (req.kind, req.role, resp.kind, resp.role),
        (ExchangeKind::Dns, Role::Request, ExchangeKind::Dns, Role::Response)
    );
    assert_eq!(req.id, resp.id);
    // Another id, another client port, or a reply from elsewhere does not match.
    let other_id =
        reversed(FrameSpec::new(IpSpec::v4(C4, S4, 2), L4Spec::udp(53001, 53), dns_msg(0xbeee, true)));
    assert_ne!(exchange(&other_id, &c).unwrap().id, req.id);
    let other_port =
        reversed(FrameSpec::new(IpSpec::v4(C4, S4, 2), L4Spec::udp(53002, 53), dns_msg(0xbeef, true)));
    assert_ne!(exchange(&other_port, &c).unwrap().id, req.id);
    // A query and a reply over IPv6 pair too.
    let q6 = FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::udp(40000, 53), dns_msg(7, false));
    let r6 = reversed(FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::udp(40000, 53), dns_msg(7, true)));
    assert_eq!(exchange(&q6, &c).unwrap().id, exchange(&r6, &c).unwrap().id);
    // Not DNS: wrong port, a "reply" sent to port 53, a header cut short, classifier off.
    assert_eq!(
        exchange(&FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(1, 54), dns_msg(1, false)), &c),
        None
    );
    assert_eq!(
        exchange(&FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(1, 53), dns_msg(1, true)), &c),
        None
    );
    assert_eq!(exchange(&FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(1, 53), vec![0; 11]), &c), None);
    let mut off = cfg();
    off.classify.dns = false;
    assert_eq!(exchange(&q, &off), None);
    // Extra DNS ports.
    let mut mdns = cfg();
    mdns.classify.dns_ports = vec![53, 5353];
    let q = FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(5353, 5353), dns_msg(0, false));
    let r = reversed(FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(5353, 5353), dns_msg(0, true)));
    assert_eq!(exchange(&q, &mdns).unwrap().id, exchange(&r, &mdns).unwrap().id);
    assert_eq!(exchange(&q, &c), None);
}

#[test]
fn dns_over_tcp_skips_the_length_prefix() {
    let c = cfg();
    let framed = |m: Vec<u8>| {
        let mut v = (m.len() as u16).to_be_bytes().to_vec();
        v.extend(m);
        v
    };
    let q = tcp4(100, 500, PSH | ACK, &framed(dns_msg(0x4242, false)));
    let L4Spec::Tcp { dst_port, .. } = &mut q.clone().l4 else { unreachable!() };
    assert_eq!(*dst_port, 80);
    let mut q = q;
    let L4Spec::Tcp { dst_port, .. } = &mut q.l4 else { unreachable!() };
    *dst_port = 53;
    let mut r = reversed(tcp4(500, 140, PSH | ACK, &framed(dns_msg(0x4242, true))));
    let L4Spec::Tcp { src_port, .. } = &mut r.l4 else { unreachable!() };
    *src_port = 53;
    let (req, resp) = (exchange(&q, &c).unwrap(), exchange(&r, &c).unwrap());
    assert_eq!((req.kind, req.role, resp.role), (ExchangeKind::Dns, Role::Request, Role::Response));
    assert_eq!(req.id, resp.id);
    // The same DNS id over UDP is another exchange (the protocol is part of the flow key).
    let udp_q = FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(40000, 53), dns_msg(0x4242, false));
    assert_ne!(exchange(&udp_q, &c).unwrap().id, req.id);
    // A pure ACK on port 53 and a segment without the length prefix are not DNS.
    let mut ack = q.clone();
    ack.payload.clear();
    assert_eq!(exchange(&ack, &c), None);
    let mut unframed = q.clone();
    unframed.payload = dns_msg(0x4242, false);
    unframed.payload[1] = 5; // read as a length prefix of 0x4205... and a header from byte 2
    let x = exchange(&unframed, &c);
    assert!(x.is_none_or(|x| x.id != req.id));
}

#[test]
fn tcp_data_and_covering_ack_when_enabled() {
    let mut c = cfg();
    let data = tcp4(1000, 1, PSH | ACK, &[0u8; 100]);
    let ack = reversed(tcp4(1, 1100, ACK, b""));
    assert_eq!(exchange(&data, &c), None, "off by default");
    assert_eq!(exchange(&ack, &c), None);
    c.classify.tcp_data = true;
    let (req, resp) = (exchange(&data, &c).unwrap(), exchange(&ack, &c).unwrap());
    assert_eq!(
        (req.kind, req.role, resp.kind, resp.role),
        (ExchangeKind::TcpData, Role::Request, ExchangeKind::TcpData, Role::Response)
    );
    assert_eq!(req.id, resp.id);
    // An ACK that covers less, or that is sent in the same direction, does not match.
    assert_ne!(exchange(&reversed(tcp4(1, 1099, ACK, b"")), &c).unwrap().id, req.id);
    assert_ne!(exchange(&tcp4(1, 1100, ACK, b""), &c).unwrap().id, req.id);
    // FIN takes a sequence number.
    let fin = tcp4(1000, 1, FIN | ACK, &[0u8; 100]);
    let fin_ack = reversed(tcp4(1, 1101, ACK, b""));
    assert_eq!(exchange(&fin, &c).unwrap().id, exchange(&fin_ack, &c).unwrap().id);
    // The handshake classifier keeps SYNs; RSTs are nothing.
    assert_eq!(exchange(&tcp4(1, 0, SYN, b""), &c).unwrap().kind, ExchangeKind::TcpHandshake);
    assert_eq!(exchange(&tcp4(1, 0, RST | ACK, b""), &c), None);
}

// ---------------------------------------------------------------------------------------------
// Cross-check against etherparse and property tests

mod prop {
    use super::*;
    use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
    use proptest::prelude::*;

    fn ipv4_mapped(a: [u8; 4]) -> [u8; 16] {
        std::net::Ipv4Addr::from(a).to_ipv6_mapped().octets()
    }

    /// What etherparse says the flow of a frame is, for unfragmented IPv4/IPv6 TCP/UDP.
    fn etherparse_flow(frame: &[u8]) -> Option<FlowKey> {
        let p = SlicedPacket::from_ethernet(frame).ok()?;
        let (src, dst, version, fragmented) = match p.net? {
            NetSlice::Ipv4(ip) => (
                ipv4_mapped(ip.header().source()),
                ipv4_mapped(ip.header().destination()),
                4,
                ip.is_payload_fragmented(),
            ),
            NetSlice::Ipv6(ip) => {
                (ip.header().source(), ip.header().destination(), 6, ip.is_payload_fragmented())
            }
            NetSlice::Arp(_) => return None,
        };
        if fragmented {
            return None;
        }
        let (sp, dp, proto) = match p.transport? {
            TransportSlice::Tcp(t) => (t.source_port(), t.destination_port(), 6),
            TransportSlice::Udp(u) => (u.source_port(), u.destination_port(), 17),
            _ => return None,
        };
        Some(FlowKey {
            src_addr: src,
            dst_addr: dst,
            src_port: sp,
            dst_port: dp,
            protocol: proto,
            ip_version: version,
        })
    }

    #[derive(Debug, Clone)]
    struct Built {
        v6: bool,
        tcp: bool,
        a4: [[u8; 4]; 2],
        a6: [[u8; 16]; 2],
        ports: [u16; 2],
        seq: u32,
        payload: Vec<u8>,
    }

    fn built() -> impl Strategy<Value = Built> {
        (
            any::<bool>(),
            any::<bool>(),
            any::<[[u8; 4]; 2]>(),
            any::<[[u8; 16]; 2]>(),
            any::<[u16; 2]>(),
            any::<u32>(),
            proptest::collection::vec(any::<u8>(), 0..200),
        )
            .prop_map(|(v6, tcp, a4, a6, ports, seq, payload)| Built {
                v6,
                tcp,
                a4,
                a6,
                ports,
                seq,
                payload,
            })
    }

    /// The frame etherparse builds for `b` with the given L2 choices and TTL.
    fn etherparse_frame(b: &Built, macs: [[u8; 6]; 2], vlans: u8, ttl: u8) -> Vec<u8> {
        let eth = PacketBuilder::ethernet2(macs[0], macs[1]);
        let mut out = Vec::new();
        macro_rules! finish {
            ($step:expr) => {{
                let ip =
                    if b.v6 { $step.ipv6(b.a6[0], b.a6[1], ttl) } else { $step.ipv4(b.a4[0], b.a4[1], ttl) };
                if b.tcp {
                    ip.tcp(b.ports[0], b.ports[1], b.seq, 1000).write(&mut out, &b.payload).unwrap()
                } else {
                    ip.udp(b.ports[0], b.ports[1]).write(&mut out, &b.payload).unwrap()
                }
            }};
        }
        match vlans {
            0 => finish!(eth),
            1 => finish!(eth.single_vlan(10.try_into().unwrap())),
            _ => finish!(eth.double_vlan(100.try_into().unwrap(), 10.try_into().unwrap())),
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn any_bytes_parse_without_panic(frame in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut counters = PacketCounters::default();
            let mut c = cfg();
            c.classify.tcp_data = true;
            let _ = inspect(&frame, &c, &mut counters);
            prop_assert_eq!(counters.total(), 1);
        }

        #[test]
        fn any_bytes_after_valid_headers_parse_without_panic(
            kind in 0usize..6,
            tail in proptest::collection::vec(any::<u8>(), 0..120),
        ) {
            // Start from real headers so the random bytes reach the deep parsers.
            let heads: [&[u8]; 6] = [
                &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00],
                &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x86, 0xdd],
                &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0x00],
                &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00, 0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
                &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 60, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00, 0x45, 0, 0, 60, 0, 0, 0, 0, 64, 17, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 53, 0, 53, 0, 40, 0, 0],
            ];
            let mut frame = heads[kind].to_vec();
            frame.extend(tail);
            let mut c = cfg();
            c.classify.tcp_data = true;
            let _ = measure(&frame, &c);
        }

        #[test]
        fn agrees_with_etherparse_and_ignores_l2_and_ttl(
            b in built(),
            macs in any::<[[u8; 6]; 2]>(),
            vlans in 0u8..3,
            ttl in any::<u8>(),
        ) {
            let reference = etherparse_frame(&b, [[2; 6], [4; 6]], 0, 64);
            let frame = etherparse_frame(&b, macs, vlans, ttl);
            let expect = etherparse_flow(&frame);
            prop_assert!(expect.is_some());
            let m = measure(&frame, &cfg());
            prop_assert!(m.is_ok(), "{:?}", m);
            let m = m.unwrap();
            prop_assert_eq!(Some(m.flow), expect);
            prop_assert_eq!(m.identity, measure(&reference, &cfg()).unwrap().identity);
        }

        #[test]
        fn agrees_with_etherparse_on_mutated_frames(
            b in built(),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        ) {
            let mut frame = etherparse_frame(&b, [[2; 6], [4; 6]], (b.seq % 3) as u8, 64);
            for (at, x) in flips {
                let n = frame.len();
                frame[at % n] ^= x;
            }
            // Whenever etherparse finds an unfragmented TCP/UDP packet and we measure it, the
            // flow keys agree. (We are stricter in places: IPv4 version nibble, extension
            // header chains, so only that direction is checked.)
            if let (Some(e), Ok(m)) = (etherparse_flow(&frame), measure(&frame, &cfg()))
                && (m.flow.protocol == 6 || m.flow.protocol == 17)
            {
                prop_assert_eq!(m.flow, e);
            }
        }

        #[test]
        fn identity_is_invariant_in_flight_and_sensitive_to_content(
            v6 in any::<bool>(),
            ttl in any::<u8>(),
            tos in any::<u8>(),
            label in 0u32..(1 << 20),
            ident in any::<u16>(),
            seq in any::<u32>(),
            payload in proptest::collection::vec(any::<u8>(), 1..64),
            flip in any::<usize>(),
        ) {
            let ip = if v6 { IpSpec::v6(C6, S6) } else { IpSpec::v4(C4, S4, ident) };
            let spec = FrameSpec::new(ip, L4Spec::tcp(1, 2, seq, 0, ACK), payload.clone());
            let base = identity(&spec.build());
            // In flight: TTL / hop limit, DSCP/ECN, flow label, checksums, L2.
            let mut hop = spec.clone();
            match &mut hop.ip {
                IpSpec::V4 { ttl: t, tos: s, .. } => { *t = ttl; *s = tos; }
                IpSpec::V6 { hop_limit, traffic_class, flow_label, .. } => {
                    *hop_limit = ttl; *traffic_class = tos; *flow_label = label;
                }
            }
            hop.vlan_tags = vec![(0x8100, u16::from(ttl))];
            hop.src_mac = [ttl; 6];
            let mut f = hop.build();
            let ip_at = 18;
            if !v6 {
                f[ip_at + 10] ^= tos; // the IPv4 checksum, now wrong
                prop_assert!(tos == 0 || internet_checksum(&f[ip_at..ip_at + 20]) != 0);
            }
            let tcp_at = if v6 { ip_at + 40 } else { ip_at + 20 };
            f[tcp_at + 16] ^= ttl; // the TCP checksum
            prop_assert_eq!(identity(&f), base);
            // Content: one payload byte within the prefix.
            let mut content = spec.clone();
            let i = flip % payload.len().min(32);
            content.payload[i] ^= 0x01;
            prop_assert_ne!(identity(&content.build()), base);
        }
    }
}
