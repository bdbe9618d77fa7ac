//! The identity's invariance: what must not change it (L2, TTL, checksums, DSCP) and what must
//! (invariant bytes), and the payload prefix that bounds what is hashed.

use super::*;

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
