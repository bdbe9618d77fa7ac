//! Skipped frames and their reasons: ARP and unknown ethertypes, truncation at every byte,
//! bad IPv4, IPv6 and transport headers, fragments, and the counters of each verdict.

use super::*;

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
