//! Cross-checks against etherparse and property tests: any bytes parse without panic, flow
//! keys agree with etherparse's, and the identity is invariant in flight and sensitive to
//! content.

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
            let ip = if b.v6 { $step.ipv6(b.a6[0], b.a6[1], ttl) } else { $step.ipv4(b.a4[0], b.a4[1], ttl) };
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
