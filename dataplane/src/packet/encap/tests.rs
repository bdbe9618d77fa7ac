//! Tests of the encapsulation walk: every layer alone and stacked gives the plain packet's
//! measurement; each malformation its own skip reason.

use super::*;
use crate::packet::inspect::measure_general;
use crate::packet::synth::encap::{Layer, encapsulate};
use crate::packet::synth::{FrameSpec, IpSpec, L4Spec};
use crate::packet::tcp::flags::SYN;
use crate::packet::{Measurement, PacketConfig, SkipReason, measure};

const A4: [u8; 4] = [10, 1, 0, 1];
const B4: [u8; 4] = [10, 2, 0, 2];
const A6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const B6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// Every walk on.
pub(crate) fn all_on() -> PacketConfig {
    let mut c = PacketConfig::default();
    c.encap.gre = true;
    c.encap.vxlan = true;
    c.encap.gtpu = true;
    c.encap.ip_in_ip = true;
    c
}

fn dns_query() -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(&[7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0, 0, 1, 0, 1]);
    q
}

/// Plain inner frames: a SYN and a DNS query, IPv4 and IPv6.
fn inners() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for ip in [IpSpec::v4(A4, B4, 0x4242), IpSpec::v6(A6, B6)] {
        out.push(FrameSpec::new(ip.clone(), L4Spec::tcp(40000, 443, 7, 0, SYN), vec![]).build());
        out.push(FrameSpec::new(ip, L4Spec::udp(5353, 53), dns_query()).build());
    }
    out
}

/// Each encapsulation alone and in the stacks operators run, with the identifier expected.
pub(crate) fn stacks() -> Vec<(Vec<Layer>, Encap)> {
    use EncapKind as K;
    let gre = |key| Layer::Gre { key, seq: Some(9), ethernet: false };
    vec![
        (vec![Layer::Vlan(0x8100, 10)], Encap::new(K::Vlan, 10)),
        (vec![Layer::Vlan(0x88a8, 100), Layer::Vlan(0x8100, 20)], Encap::new(K::Vlan, 20)),
        (vec![Layer::Mpls(1000), Layer::Mpls(2000)], Encap::new(K::Mpls, 2000)),
        (vec![Layer::Vlan(0x8100, 30), Layer::Mpls(3000)], Encap::new(K::Mpls, 3000)),
        (
            vec![Layer::Mpls(16), Layer::MplsPseudowire(4000, true), Layer::Vlan(0x8100, 40)],
            Encap::new(K::Vlan, 40),
        ),
        (vec![Layer::Pppoe(0x77)], Encap::new(K::Pppoe, 0x77)),
        (
            vec![Layer::Vlan(0x88a8, 200), Layer::Vlan(0x8100, 50), Layer::Pppoe(0x78)],
            Encap::new(K::Pppoe, 0x78),
        ),
        (vec![gre(Some(0xabcd))], Encap::new(K::Gre, 0xabcd)),
        (vec![Layer::Vlan(0x8100, 60), gre(None)], Encap::new(K::Vlan, 60)),
        (vec![Layer::Gre { key: Some(5), seq: None, ethernet: true }], Encap::new(K::Gre, 5)),
        (vec![Layer::Vxlan(5001)], Encap::new(K::Vxlan, 5001)),
        (vec![Layer::Vlan(0x8100, 70), Layer::Vxlan(5002)], Encap::new(K::Vxlan, 5002)),
        (vec![Layer::Vxlan(5003), Layer::Vlan(0x8100, 80)], Encap::new(K::Vlan, 80)),
        (vec![Layer::Gtpu(0x1234_5678, false)], Encap::new(K::Gtpu, 0x1234_5678)),
        (vec![Layer::Mpls(77), Layer::Gtpu(0x0102_0304, true)], Encap::new(K::Gtpu, 0x0102_0304)),
        (vec![Layer::IpInIp(false)], Encap::NONE),
        (vec![Layer::Vlan(0x8100, 90), Layer::IpInIp(true)], Encap::new(K::Vlan, 90)),
    ]
}

/// The plain frame's measurement with `encap` in place.
fn with_encap(m: Measurement, encap: Encap) -> Measurement {
    Measurement { encap, ..m }
}

#[test]
fn every_stack_gives_the_plain_packets_measurement() {
    let cfg = all_on();
    for inner in inners() {
        let plain = measure(&inner, &cfg).unwrap();
        assert_eq!(plain.encap, Encap::NONE);
        assert!(plain.exchange.is_some());
        for (layers, id) in stacks() {
            let f = encapsulate(&inner, &layers);
            assert_eq!(measure(&f, &cfg), Ok(with_encap(plain, id)), "{layers:?}");
            assert_eq!(measure_general(&f, &cfg), Ok(with_encap(plain, id)), "{layers:?}");
        }
    }
}

#[test]
fn tunnels_off_measure_the_outer_packet_and_layer_2_off_skips() {
    let inner = &inners()[1];
    let plain = measure(inner, &all_on()).unwrap();
    let default = PacketConfig::default();
    for (layers, _) in stacks() {
        let f = encapsulate(inner, &layers);
        let tunnel = layers
            .iter()
            .any(|l| matches!(l, Layer::Gre { .. } | Layer::Vxlan(_) | Layer::Gtpu(..) | Layer::IpInIp(_)));
        let m = measure(&f, &default).unwrap_or_else(|r| panic!("{layers:?}: {r:?}"));
        // Tunnels off: the outer packet is measured; layer 2 alone: the inner one.
        assert_eq!(m.identity != plain.identity, tunnel, "{layers:?}");
    }
    let mut off = PacketConfig::default();
    off.encap.vlan = false;
    off.encap.mpls = false;
    off.encap.pppoe = false;
    for layers in [vec![Layer::Vlan(0x8100, 1)], vec![Layer::Mpls(1)], vec![Layer::Pppoe(1)]] {
        let f = encapsulate(inner, &layers);
        assert_eq!(measure(&f, &off), Err(SkipReason::UnknownEthertype), "{layers:?}");
    }
    // Pseudowire without a control word is left alone when the control word is expected only
    // by configuration: a first nibble of 0 is then not IP.
    let f = encapsulate(inner, &[Layer::MplsPseudowire(5, true)]);
    let mut no_cw = all_on();
    no_cw.encap.mpls_control_word = false;
    assert_eq!(measure(&f, &no_cw), Err(SkipReason::Mpls));
}

#[test]
fn the_depth_limit_counts_every_layer() {
    let inner = &inners()[0];
    let cfg = PacketConfig { encap: EncapConfig { max_depth: 3, ..all_on().encap }, ..all_on() };
    let three = encapsulate(inner, &[Layer::Vlan(0x88a8, 1), Layer::Mpls(2), Layer::Mpls(3)]);
    assert!(measure(&three, &cfg).is_ok());
    let four = encapsulate(inner, &[Layer::Vlan(0x88a8, 1), Layer::Mpls(2), Layer::Mpls(3), Layer::Mpls(4)]);
    assert_eq!(measure(&four, &cfg), Err(SkipReason::EncapTooDeep));
    let tunnels = encapsulate(inner, &[Layer::Vxlan(1), Layer::Vxlan(2), Layer::IpInIp(false)]);
    assert!(measure(&tunnels, &cfg).is_ok());
    let deeper =
        encapsulate(inner, &[Layer::Vlan(0x8100, 1), Layer::Vxlan(1), Layer::Vxlan(2), Layer::IpInIp(false)]);
    assert_eq!(measure(&deeper, &cfg), Err(SkipReason::EncapTooDeep));
    // An endless chain of tags within a long frame stops at the limit.
    let mut tags = inner[..12].to_vec();
    for _ in 0..200 {
        tags.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
    }
    tags.extend_from_slice(&[0x08, 0x00]);
    assert_eq!(measure(&tags, &PacketConfig::default()), Err(SkipReason::EncapTooDeep));
}

/// `f` with the byte at `at` set to `v`.
fn set(mut f: Vec<u8>, at: usize, v: u8) -> Vec<u8> {
    f[at] = v;
    f
}

/// An MPLS stack without a bottom label that fills a 1500-byte frame.
fn endless_mpls() -> Vec<u8> {
    let mut f = vec![2; 12];
    f.extend_from_slice(&[0x88, 0x47]);
    f.resize(1500, 0x10);
    f
}

#[test]
fn each_malformation_has_its_reason() {
    let cfg = all_on();
    let inner = &inners()[0];
    let wrap = |l: Layer| encapsulate(inner, &[l]);
    // Outer IPv4 (20) + UDP (8) start at 14; the tunnel header at 42.
    let vxlan = wrap(Layer::Vxlan(7));
    let gtpu = wrap(Layer::Gtpu(7, true));
    let gre = wrap(Layer::Gre { key: Some(1), seq: None, ethernet: false });
    let pppoe = wrap(Layer::Pppoe(3));
    let mpls = wrap(Layer::Mpls(3));
    let cases: Vec<(&str, Vec<u8>, SkipReason)> = vec![
        ("vxlan without I flag", set(vxlan.clone(), 42, 0), SkipReason::Vxlan),
        ("gtp version 2", set(gtpu.clone(), 42, 0x54), SkipReason::Gtpu),
        ("gtp echo request", set(gtpu.clone(), 43, 1), SkipReason::Gtpu),
        ("gtp extension of length 0", set(gtpu.clone(), 54, 0), SkipReason::Gtpu),
        ("gtp extension past the body", set(gtpu.clone(), 54, 200), SkipReason::Gtpu),
        ("gtp payload not ip", set(gtpu.clone(), 58, 0x20), SkipReason::Gtpu),
        ("gtp length past the datagram", set(gtpu.clone(), 44, 0x7f), SkipReason::Truncated),
        ("gre version 1", set(gre.clone(), 35, 1), SkipReason::Gre),
        ("gre routing", set(gre.clone(), 34, 0x60), SkipReason::Gre),
        ("gre protocol", set(gre.clone(), 36, 0x12), SkipReason::Gre),
        ("pppoe code", set(pppoe.clone(), 15, 0x09), SkipReason::Pppoe),
        ("pppoe version", set(pppoe.clone(), 14, 0x21), SkipReason::Pppoe),
        ("ppp lcp", set(set(pppoe.clone(), 20, 0xc0), 21, 0x21), SkipReason::Pppoe),
        ("pppoe length past the frame", set(pppoe.clone(), 18, 0x7f), SkipReason::Truncated),
        ("pppoe discovery", set(pppoe.clone(), 13, 0x63), SkipReason::Pppoe),
        ("mpls payload not ip", set(mpls.clone(), 18, 0x20), SkipReason::Mpls),
        ("mpls stack never ends", endless_mpls(), SkipReason::EncapTooDeep),
        ("outer ip fragment", set(vxlan.clone(), 20, 0x20), SkipReason::Fragment),
        ("inner ethernet cut", vxlan[..42 + 8 + 10].to_vec(), SkipReason::Truncated),
    ];
    for (what, f, reason) in cases {
        assert_eq!(measure(&f, &cfg), Err(reason), "{what}");
        assert_eq!(measure_general(&f, &cfg), Err(reason), "{what}");
    }
    // Every frame of every stack cut anywhere is skipped, never measured wrongly or panicking.
    for (layers, _) in stacks() {
        let f = encapsulate(inner, &layers);
        let full = measure(&f, &cfg).unwrap();
        for n in 0..f.len() {
            if let Ok(m) = measure(&f[..n], &cfg) {
                // Only Ethernet padding may be cut and keep the packet whole.
                assert_eq!(m, full, "{layers:?} cut at {n}");
            }
        }
    }
}

#[test]
fn encap_ids_print_and_parse() {
    for (s, e) in [
        ("vlan:10", Encap::new(EncapKind::Vlan, 10)),
        ("vni:5001", Encap::new(EncapKind::Vxlan, 5001)),
        ("teid:305419896", Encap::new(EncapKind::Gtpu, 0x1234_5678)),
        ("mpls:2000", Encap::new(EncapKind::Mpls, 2000)),
        ("pppoe:7", Encap::new(EncapKind::Pppoe, 7)),
        ("gre:1", Encap::new(EncapKind::Gre, 1)),
        ("none", Encap::NONE),
    ] {
        assert_eq!(s.parse::<Encap>(), Ok(e));
        assert_eq!(e.to_string(), s);
    }
    for bad in ["vlan", "vlan:4096", "vni:16777216", "foo:1", "none:0", "vlan:-1"] {
        assert!(bad.parse::<Encap>().is_err(), "{bad}");
    }
}

/// Writes every stack of [`stacks`] around every inner frame as fuzz seeds, in the `packet`
/// target's input format (configuration bytes 0x70 0xff: every walk on, depth 8), into the
/// directory `WIRELAT_FUZZ_SEEDS` names (`WIRELAT_FUZZ_SEEDS=$PWD/fuzz/corpus/packet cargo test
/// -p wirelat-dataplane --lib write_fuzz_seeds`), or into a scratch directory it then removes.
/// Either way it reads every seed back and checks that its frame reaches the inner packet, so
/// the corpus never starts from frames that only exercise skip paths.
#[test]
fn write_fuzz_seeds() {
    let (dir, scratch) = match std::env::var_os("WIRELAT_FUZZ_SEEDS") {
        Some(d) => (std::path::PathBuf::from(d), false),
        None => (std::env::temp_dir().join(format!("wirelat-fuzz-seeds-{}", std::process::id())), true),
    };
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = all_on();
    let mut written = 0;
    for (i, inner) in inners().iter().enumerate() {
        for (j, (layers, id)) in stacks().iter().enumerate() {
            let mut seed = vec![0x70, 0xff];
            seed.extend_from_slice(&encapsulate(inner, layers));
            let path = dir.join(format!("encap-{i}-{j}"));
            std::fs::write(&path, &seed).unwrap();
            let back = std::fs::read(&path).unwrap();
            let m = measure(&back[2..], &cfg).unwrap_or_else(|r| panic!("seed {i}-{j} {layers:?}: {r:?}"));
            assert_eq!(m.encap, *id, "seed {i}-{j}");
            written += 1;
        }
    }
    assert_eq!(written, inners().len() * stacks().len());
    if scratch {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
