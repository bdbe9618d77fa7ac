//! Measured packets: flow key, hash and identity of IPv4/IPv6 TCP, UDP, ICMP and other
//! protocols, VLAN and QinQ tags, and IPv6 extension chains.

use super::*;

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
