//! The fast paths of [`super::measure`], for the shapes nearly every frame on a link has:
//! IPv4 without options, untagged or with one 802.1Q tag, and untagged IPv6 without extension
//! headers; not a fragment; TCP or UDP with its header complete.
//!
//! Why a second parser: the general one is a chain of checked views (Ethernet, the tag walk,
//! IPv4 with options, the extension-header walk, the transport views), each re-checking its
//! slice and passing a `Result` on. For these shapes every field sits at a fixed offset, so one
//! length check and a handful of comparisons replace the chain. A fast path either gives
//! exactly the measurement the general parser gives, or declines (`None`) and the general
//! parser decides, skip reasons and counters included. Tests check both halves of that claim
//! on hand-built frames and on random, mutated and truncated ones.
//!
//! The offsets are constants on purpose: a version that took tagged and untagged frames and
//! both IP versions through one body, reading the network header at a variable offset, was
//! slower over the benchmark mix than the general parser's gain paid for (17.1 against 16.0 ns
//! per packet, BENCHMARKS.md "Packet layer").

use super::{Measurement, Network, PROTOCOL_TCP, PROTOCOL_UDP, finish};
use crate::packet::classify;
use crate::packet::config::PacketConfig;
use crate::packet::ethernet::{HEADER_LEN as ETHERNET_LEN, ethertype};
use crate::packet::field::{be16, le16, le32, le64};
use crate::packet::identity::ipv4_mapped_hi;
use crate::packet::ipv4::MIN_HEADER_LEN as IPV4_LEN;
use crate::packet::ipv6::HEADER_LEN as IPV6_LEN;
use crate::packet::tcp::{MIN_HEADER_LEN as TCP_LEN, TcpSegment};
use crate::packet::udp::{HEADER_LEN as UDP_LEN, UdpDatagram};
use crate::packet::vlan::TAG_LEN;

/// The bytes read at fixed offsets from the ethertype: the ethertype (2), IPv4 (20), a TCP
/// header (20). A UDP frame shorter than this (only a capture that dropped the padding holds
/// one) takes the general path.
const FIXED: usize = 2 + IPV4_LEN + TCP_LEN;

/// Where the IPv4 header starts in `h`.
const L3: usize = 2;

/// Where the transport header starts in `h`.
const L4: usize = L3 + IPV4_LEN;

/// Ethertype and version/IHL byte read little-endian, masked to those three bytes: ethertype
/// 0x0800, then version 4 with a 20-byte header.
const IPV4_NO_OPTIONS: u32 = 0x0045_0008;

/// Where the network header starts in an untagged frame.
pub(super) const UNTAGGED: usize = ETHERNET_LEN;

/// Where the network header starts in a frame with one 802.1Q tag.
pub(super) const ONE_TAG: usize = ETHERNET_LEN + TAG_LEN;

/// The VLAN id when `frame` carries an 802.1Q tag (whatever follows it) and tags are walked.
#[inline(always)]
pub(super) fn tagged(frame: &[u8], cfg: &PacketConfig) -> Option<u16> {
    let h = frame.first_chunk::<ONE_TAG>()?;
    (be16::<12, ONE_TAG>(h) == ethertype::VLAN && cfg.encap.vlan).then(|| be16::<14, ONE_TAG>(h) & 0x0fff)
}

/// The measurement of `frame` when its network header starts at `AT` (the Ethernet header and
/// any tags before it already checked by the caller) and it has the fast path's shape, else
/// `None`. `AT` is a constant so every field is read at a fixed offset.
#[inline(always)]
pub(super) fn ipv4_at<const AT: usize>(frame: &[u8], cfg: &PacketConfig) -> Option<Measurement> {
    let start = frame.get(AT - 2..)?;
    let h = start.first_chunk::<FIXED>()?;
    if le32::<0, FIXED>(h) & 0x00ff_ffff != IPV4_NO_OPTIONS {
        return None;
    }
    // Flags and fragment offset: any fragment goes to the general path (which skips it).
    if be16::<{ L3 + 6 }, FIXED>(h) & 0x3fff != 0 {
        return None;
    }
    let total_len = usize::from(be16::<{ L3 + 2 }, FIXED>(h));
    // A total length below the header, or an IP packet running past the frame, is the
    // general path's to report (malformed, truncated).
    let upper = start.get(L4..L3 + total_len)?;
    let protocol = h[L3 + 9];
    let net = Network {
        addr_words: [
            0,
            ipv4_mapped_hi(le32::<{ L3 + 12 }, FIXED>(h)),
            0,
            ipv4_mapped_hi(le32::<{ L3 + 16 }, FIXED>(h)),
        ],
        version: 4,
        protocol,
        ipv4_ident_le: le16::<{ L3 + 4 }, FIXED>(h),
        upper,
    };
    let seed = cfg.identity_seed;
    let (src_port, dst_port) = (be16::<L4, FIXED>(h), be16::<{ L4 + 2 }, FIXED>(h));
    match protocol {
        PROTOCOL_TCP => {
            // The general view's conditions for a complete header: a data offset of at least
            // 5 words, inside the IP payload.
            let data_offset = usize::from(h[L4 + 12] >> 4) * 4;
            if data_offset < TCP_LEN {
                return None;
            }
            let payload = upper.get(data_offset..)?;
            let header = net.header(
                le32::<L4, FIXED>(h),
                [le64::<{ L4 + 4 }, FIXED>(h), le64::<{ L4 + 12 }, FIXED>(h)],
                le16::<{ L4 + 18 }, FIXED>(h),
            );
            let flags = h[L4 + 13];
            let exchange =
                if classify::tcp_candidate_fields(flags, payload.len(), src_port, dst_port, &cfg.classify) {
                    let seg = TcpSegment::new_checked(upper).ok()?;
                    classify::tcp(&seg, &header.flow(), &cfg.classify, seed)
                } else {
                    None
                };
            Some(finish(&header, payload, cfg, exchange))
        }
        PROTOCOL_UDP => {
            // A tunnel the walk opens (VXLAN, GTP-U) is the general parser's.
            if cfg.encap.is_tunnel_port(dst_port) {
                return None;
            }
            // The UDP length bounds the payload: at least the header, at most the IP payload.
            let payload = upper.get(UDP_LEN..usize::from(be16::<{ L4 + 4 }, FIXED>(h)))?;
            let header = net.header(le32::<L4, FIXED>(h), [u64::from(le16::<{ L4 + 4 }, FIXED>(h)), 0], 0);
            let exchange = if classify::udp_candidate_fields(payload.len(), src_port, dst_port, &cfg.classify)
            {
                let dgram = UdpDatagram::new_checked(upper).ok()?;
                classify::udp(&dgram, &header.flow(), &cfg.classify, seed)
            } else {
                None
            };
            Some(finish(&header, payload, cfg, exchange))
        }
        _ => None,
    }
}

/// Ethernet (14) and IPv6 (40) bytes, then a UDP header (8): the shortest frame the IPv6 fast
/// path reads.
const FIXED6: usize = ETHERNET_LEN + IPV6_LEN + UDP_LEN;

/// Frame bytes 12..15 read little-endian, masked to the ethertype and the version nibble:
/// ethertype 0x86dd, then version 6.
const IPV6_VERSION: u32 = 0x0060_dd86;

/// The measurement of an untagged IPv6 frame whose next header is TCP or UDP (no extension
/// headers), else `None`.
#[inline(always)]
pub(super) fn untagged_ipv6(frame: &[u8], cfg: &PacketConfig) -> Option<Measurement> {
    let h = frame.first_chunk::<FIXED6>()?;
    let protocol = h[ETHERNET_LEN + 6];
    if le32::<12, FIXED6>(h) & 0x00f0_ffff != IPV6_VERSION
        || !(protocol == PROTOCOL_TCP || protocol == PROTOCOL_UDP)
    {
        return None;
    }
    let l4 = ETHERNET_LEN + IPV6_LEN;
    let upper = frame.get(l4..l4 + usize::from(be16::<{ ETHERNET_LEN + 4 }, FIXED6>(h)))?;
    let net = Network {
        addr_words: [
            le64::<{ ETHERNET_LEN + 8 }, FIXED6>(h),
            le64::<{ ETHERNET_LEN + 16 }, FIXED6>(h),
            le64::<{ ETHERNET_LEN + 24 }, FIXED6>(h),
            le64::<{ ETHERNET_LEN + 32 }, FIXED6>(h),
        ],
        version: 6,
        protocol,
        ipv4_ident_le: 0,
        upper,
    };
    transport(&net, cfg)
}

/// TCP or UDP with a complete header; anything else declines. The same decisions as the
/// transport part of [`ipv4_at`], which keeps its own copy reading the header from its
/// fixed-offset chunk. Measured over the benchmark mix (interleaved, per packet): sharing this
/// function cost 0.3–0.5 ns; sharing TCP and UDP helpers fed with the words each caller reads
/// cost about 2.5 ns; sharing only the classifier step (an `Option<Option<Exchange>>` helper)
/// cost about 8 ns. The compiler lays the shared versions out worse on the hot path.
#[inline(always)]
fn transport(net: &Network<'_>, cfg: &PacketConfig) -> Option<Measurement> {
    let seed = cfg.identity_seed;
    let upper = net.upper;
    match net.protocol {
        PROTOCOL_TCP => {
            let h = upper.first_chunk::<TCP_LEN>()?;
            let data_offset = usize::from(h[12] >> 4) * 4;
            if data_offset < TCP_LEN {
                return None;
            }
            let payload = upper.get(data_offset..)?;
            let header = net.header(
                le32::<0, TCP_LEN>(h),
                [le64::<4, TCP_LEN>(h), le64::<12, TCP_LEN>(h)],
                le16::<18, TCP_LEN>(h),
            );
            let (src_port, dst_port) = (be16::<0, TCP_LEN>(h), be16::<2, TCP_LEN>(h));
            let exchange =
                if classify::tcp_candidate_fields(h[13], payload.len(), src_port, dst_port, &cfg.classify) {
                    let seg = TcpSegment::new_checked(upper).ok()?;
                    classify::tcp(&seg, &header.flow(), &cfg.classify, seed)
                } else {
                    None
                };
            Some(finish(&header, payload, cfg, exchange))
        }
        PROTOCOL_UDP => {
            let h = upper.first_chunk::<UDP_LEN>()?;
            if cfg.encap.is_tunnel_port(be16::<2, UDP_LEN>(h)) {
                return None;
            }
            // The UDP length bounds the payload: at least the header, at most the IP payload.
            let payload = upper.get(UDP_LEN..usize::from(be16::<4, UDP_LEN>(h)))?;
            let header = net.header(le32::<0, UDP_LEN>(h), [u64::from(le16::<4, UDP_LEN>(h)), 0], 0);
            let (src_port, dst_port) = (be16::<0, UDP_LEN>(h), be16::<2, UDP_LEN>(h));
            let exchange = if classify::udp_candidate_fields(payload.len(), src_port, dst_port, &cfg.classify)
            {
                let dgram = UdpDatagram::new_checked(upper).ok()?;
                classify::udp(&dgram, &header.flow(), &cfg.classify, seed)
            } else {
                None
            };
            Some(finish(&header, payload, cfg, exchange))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::measure_general;
    use super::*;
    use crate::packet::encap::{Encap, EncapKind};
    use crate::packet::synth::{FrameSpec, IpSpec, L4Spec};
    use crate::packet::tcp::flags::{ACK, PSH, SYN};
    use proptest::prelude::*;

    const A4: [u8; 4] = [192, 0, 2, 10];
    const B4: [u8; 4] = [198, 51, 100, 20];
    const A6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a];
    const B6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14];

    /// The configurations the tests run under: the default, every classifier, none.
    fn configs() -> [PacketConfig; 3] {
        let mut all = PacketConfig::default();
        all.classify.tcp_data = true;
        all.classify.dns_ports = vec![53, 5353];
        let mut none = PacketConfig::default();
        none.classify.tcp_handshake = false;
        none.classify.dns = false;
        none.payload_prefix_bytes = 8;
        [PacketConfig::default(), all, none]
    }

    /// Every tunnel on, on ports the generated frames use (DNS, HTTPS), so the fast paths must
    /// decline those datagrams and leave them to the walk.
    fn tunnels() -> PacketConfig {
        let mut c = PacketConfig::default();
        c.encap.gre = true;
        c.encap.ip_in_ip = true;
        c.encap.vxlan = true;
        c.encap.vxlan_ports = vec![53, 4789];
        c.encap.gtpu = true;
        c.encap.gtpu_ports = vec![443];
        c
    }

    /// Either fast path's answer.
    fn fast(frame: &[u8], cfg: &PacketConfig) -> Option<Measurement> {
        ipv4_at::<UNTAGGED>(frame, cfg).or_else(|| untagged_ipv6(frame, cfg)).or_else(|| {
            let vid = tagged(frame, cfg)?;
            let m = ipv4_at::<ONE_TAG>(frame, cfg)?;
            Some(Measurement { encap: Encap::new(EncapKind::Vlan, u32::from(vid)), ..m })
        })
    }

    fn dns_query() -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend_from_slice(&[7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0, 0, 1, 0, 1]);
        q
    }

    fn common_shapes() -> Vec<FrameSpec> {
        let v4 = || IpSpec::v4(A4, B4, 0x1234);
        let v6 = || IpSpec::v6(A6, B6);
        let mut tcp_dns = dns_query();
        tcp_dns.splice(0..0, [0, 29]);
        vec![
            FrameSpec::new(v4(), L4Spec::tcp(40000, 80, 1, 2, ACK), Vec::new()),
            FrameSpec::new(v4(), L4Spec::tcp(40000, 80, 1, 2, PSH | ACK), (0..200).collect()),
            FrameSpec::new(v4(), L4Spec::tcp(40000, 80, 7, 0, SYN), Vec::new()),
            FrameSpec::new(v4(), L4Spec::tcp(80, 40000, 9, 8, SYN | ACK), Vec::new()),
            FrameSpec::new(v4(), L4Spec::tcp(40000, 53, 1, 2, PSH | ACK), tcp_dns.clone()),
            FrameSpec::new(v4(), L4Spec::udp(5000, 53), dns_query()),
            FrameSpec::new(v4(), L4Spec::udp(5000, 443), (0..30).collect()),
            FrameSpec::new(v6(), L4Spec::tcp(40000, 443, 1, 2, ACK), Vec::new()),
            FrameSpec::new(v6(), L4Spec::tcp(40000, 443, 5, 0, SYN), (0..3).collect()),
            FrameSpec::new(v6(), L4Spec::tcp(40000, 53, 1, 2, PSH | ACK), tcp_dns),
            FrameSpec::new(v6(), L4Spec::udp(5000, 53), dns_query()),
            FrameSpec::new(v6(), L4Spec::udp(5000, 4789), Vec::new()),
            FrameSpec {
                vlan_tags: vec![(0x8100, 10)],
                ..FrameSpec::new(v4(), L4Spec::tcp(1, 2, 3, 4, ACK), Vec::new())
            },
            FrameSpec {
                vlan_tags: vec![(0x8100, 10)],
                ..FrameSpec::new(v4(), L4Spec::udp(5000, 53), dns_query())
            },
        ]
    }

    #[test]
    fn common_shapes_take_the_fast_path_and_get_the_general_answer() {
        let mut classified = 0;
        for cfg in configs() {
            for spec in common_shapes() {
                let frame = spec.build();
                let m = fast(&frame, &cfg);
                assert!(m.is_some(), "declined {spec:?}");
                assert_eq!(m.map(Ok), Some(measure_general(&frame, &cfg)), "{spec:?}");
                classified += usize::from(m.is_some_and(|m| m.exchange.is_some()));
            }
        }
        // SYN, SYN/ACK and DNS over UDP and TCP are classified on the fast path too.
        assert!(classified >= 8, "{classified}");
    }

    #[test]
    fn other_shapes_are_left_to_the_general_path() {
        let base = || FrameSpec::new(IpSpec::v4(A4, B4, 1), L4Spec::tcp(1, 2, 3, 4, ACK), vec![9; 20]);
        let mut qinq = base();
        qinq.vlan_tags = vec![(0x88a8, 100), (0x8100, 10)];
        let mut tagged6 = FrameSpec::new(IpSpec::v6(A6, B6), L4Spec::udp(1, 2), vec![1; 8]);
        tagged6.vlan_tags = vec![(0x8100, 10)];
        let mut options = base();
        if let IpSpec::V4 { options: o, .. } = &mut options.ip {
            *o = vec![1, 1, 1, 0];
        }
        let mut fragment = base();
        if let IpSpec::V4 { flags_frag, .. } = &mut fragment.ip {
            *flags_frag = 0x2000;
        }
        let icmp = FrameSpec::new(
            IpSpec::v4(A4, B4, 1),
            L4Spec::Icmp { msg_type: 8, code: 0, rest: [0; 4] },
            vec![],
        );
        let mut ext = FrameSpec::new(IpSpec::v6(A6, B6), L4Spec::udp(1, 2), vec![1; 8]);
        if let IpSpec::V6 { ext: e, .. } = &mut ext.ip {
            *e = vec![(0, vec![0, 0, 1, 4, 0, 0, 0, 0])];
        }
        let icmp6 =
            FrameSpec::new(IpSpec::v6(A6, B6), L4Spec::Icmp { msg_type: 128, code: 0, rest: [0; 4] }, vec![]);
        let mut shapes: Vec<Vec<u8>> =
            [qinq, tagged6, options, fragment, icmp, ext, icmp6].iter().map(FrameSpec::build).collect();
        // Header fields the general path reports on: IP total length past the frame, a TCP data
        // offset below 5, a UDP length past the IP payload, an IPv6 payload past the frame.
        let mut long = base().build();
        long[16..18].copy_from_slice(&1000u16.to_be_bytes());
        let mut offset = base().build();
        offset[46] = 0x40;
        let mut udp = FrameSpec::new(IpSpec::v4(A4, B4, 1), L4Spec::udp(1, 2), vec![0; 20]).build();
        udp[38..40].copy_from_slice(&200u16.to_be_bytes());
        let mut long6 = FrameSpec::new(IpSpec::v6(A6, B6), L4Spec::udp(1, 2), vec![1; 8]).build();
        long6[18..20].copy_from_slice(&2000u16.to_be_bytes());
        shapes.extend([long, offset, udp, long6]);
        for frame in &shapes {
            for cfg in configs() {
                assert_eq!(fast(frame, &cfg), None, "{frame:02x?}");
                assert_eq!(super::super::measure(frame, &cfg), measure_general(frame, &cfg));
            }
        }
    }

    fn spec() -> impl Strategy<Value = FrameSpec> {
        (
            (any::<bool>(), any::<[u8; 4]>(), any::<[u8; 16]>(), any::<u16>(), 0u8..4),
            (
                0u8..4,
                prop::sample::select(vec![53u16, 80, 443, 5353, 1]),
                any::<u16>(),
                any::<u8>(),
                any::<u32>(),
            ),
            (0u8..3, proptest::collection::vec(any::<u8>(), 0..80)),
        )
            .prop_map(
                |((v6, a4, a6, ident, ip_variant), (l4, port, other, flags, seq), (vlans, payload))| {
                    let ip = if v6 {
                        let mut ip = IpSpec::v6(a6, B6);
                        if let (IpSpec::V6 { ext, .. }, 3) = (&mut ip, ip_variant) {
                            *ext = vec![(0, vec![0, 0, 1, 4, 0, 0, 0, 0])];
                        }
                        ip
                    } else {
                        let mut ip = IpSpec::v4(a4, B4, ident);
                        if let IpSpec::V4 { options, flags_frag, .. } = &mut ip {
                            match ip_variant {
                                2 => *options = vec![1, 1, 1, 0],
                                3 => *flags_frag = 0x2000 | (ident & 1),
                                _ => {}
                            }
                        }
                        ip
                    };
                    let l4 = match l4 {
                        0 | 1 => L4Spec::tcp(other, port, seq, seq ^ 0x5555, flags),
                        2 => L4Spec::udp(other, port),
                        _ => L4Spec::Icmp { msg_type: flags, code: 0, rest: seq.to_be_bytes() },
                    };
                    let mut s = FrameSpec::new(ip, l4, payload);
                    s.vlan_tags = match vlans {
                        0 => vec![],
                        1 => vec![(0x8100, 10)],
                        _ => vec![(0x88a8, 100), (0x8100, 10)],
                    };
                    s
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

        /// Whatever the fast paths accept, the general parser measures identically; whatever
        /// `measure` answers, the general parser answers too, on well-formed frames and on
        /// frames with header bytes flipped and cut short.
        #[test]
        fn fast_paths_agree_with_the_general_parser(
            spec in spec(),
            flips in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
            cut in any::<Option<u8>>(),
        ) {
            let mut frame = spec.build();
            let n = frame.len();
            for (at, x) in flips {
                frame[at % n] ^= x;
            }
            if let Some(c) = cut {
                frame.truncate(usize::from(c) % (n + 1));
            }
            for cfg in configs().into_iter().chain([tunnels()]) {
                let general = measure_general(&frame, &cfg);
                if let Some(m) = fast(&frame, &cfg) {
                    prop_assert_eq!(Ok(m), general);
                }
                prop_assert_eq!(super::super::measure(&frame, &cfg), general);
            }
        }
    }
}
