//! Packet layer cost per frame: parse + flow key + flow hash + packet identity (+ the fridge's
//! classifiers), over a seeded, realistic mix of frames.
//!
//! Mix (seeded, 1024 frames kept in memory and walked in order, as a worker walks a burst):
//! frame sizes 64 / 576 / 1500 bytes on the wire (60 / 576 / 1500 captured) in IMIX
//! proportions 7:4:1, minimum-size TCP frames being bare segments (ACK, SYN) with padding;
//! 80 % IPv4, 20 % IPv6; 85 % TCP (2 % SYN, 2 % SYN/ACK, the rest ACK or data), 12 % UDP (a
//! quarter of it DNS), 3 % ICMP; 10 % carry a VLAN tag, a fifth of those a QinQ pair.
//!
//! Two more groups time one frame shape at a time, 1024 IPv4 TCP frames with the mix's sizes
//! and flags: `packet_shape` the common shapes the fast paths serve (plain, one VLAN tag, a
//! QinQ pair) with the default configuration, and `packet_encap` the same frames inside each
//! encapsulation the walk opens (two MPLS labels, PPPoE, GRE, VXLAN, GTP-U, IP-in-IP) with
//! every walk switched on.
//!
//! Run: `cargo bench --no-default-features --bench packet`. Per-packet time = reported time /
//! 1024.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::hint::black_box;
use wirelat_dataplane::packet::synth::encap::{Layer, encapsulate};
use wirelat_dataplane::packet::synth::{FrameSpec, IpSpec, L4Spec};
use wirelat_dataplane::packet::tcp::flags::{ACK, PSH, SYN};
use wirelat_dataplane::packet::{Inspection, PacketConfig, PacketCounters, inspect};

/// Frames in the mix. The headers of 1024 frames (about 128 KiB of cache lines) stay in L2,
/// as a worker's do when it prefetches across a burst: the bench measures the packet layer's
/// work, not the first touch of a freshly received frame, which any per-packet work pays.
const FRAMES: usize = 1024;

/// Frame length without the FCS: 60 (the 64-byte minimum on the wire), 576, 1500.
fn frame_len(rng: &mut Pcg64) -> usize {
    match rng.random_range(0..12) {
        0..7 => 60,
        7..11 => 576,
        _ => 1500,
    }
}

/// TCP flags (2 % SYN, 2 % SYN/ACK, the rest ACK or data) and a server port.
fn tcp_flags_and_port(rng: &mut Pcg64) -> (u8, u16) {
    let flags = match rng.random_range(0..100) {
        0..2 => SYN,
        2..4 => SYN | ACK,
        4..50 => ACK,
        _ => PSH | ACK,
    };
    (flags, [80u16, 443, 22, 8080][rng.random_range(0..4)])
}

fn one_frame(rng: &mut Pcg64) -> Vec<u8> {
    let target = frame_len(rng);
    let v6 = rng.random_bool(0.2);
    let ip = if v6 {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        rng.fill(&mut s[..]);
        rng.fill(&mut d[..]);
        IpSpec::v6(s, d)
    } else {
        IpSpec::v4(rng.random(), rng.random(), rng.random())
    };
    let pick = rng.random_range(0..100);
    let sport: u16 = rng.random_range(1024..65535);
    let (l4, header_len, dns) = if pick < 85 {
        let (flags, dport) = tcp_flags_and_port(rng);
        (L4Spec::tcp(sport, dport, rng.random(), rng.random(), flags), 20, false)
    } else if pick < 97 {
        let dns = rng.random_bool(0.25);
        let (sp, dp) = if dns { (sport, 53) } else { (sport, [443u16, 4789, 123][rng.random_range(0..3)]) };
        (L4Spec::udp(sp, dp), 8, dns)
    } else {
        (L4Spec::Icmp { msg_type: 8, code: 0, rest: rng.random() }, 8, false)
    };
    let mut spec = FrameSpec::new(ip, l4, Vec::new());
    if rng.random_bool(0.1) {
        spec.vlan_tags =
            if rng.random_bool(0.2) { vec![(0x88a8, 100), (0x8100, 10)] } else { vec![(0x8100, 10)] };
    }
    let overhead = 14 + 4 * spec.vlan_tags.len() + if v6 { 40 } else { 20 } + header_len;
    // Minimum-size frames are what they are on real links: bare TCP segments (ACKs, SYNs)
    // padded to 60 bytes, or small datagrams; larger ones carry data up to the frame size.
    let payload_len = if target == 60 && header_len == 20 { 0 } else { target.saturating_sub(overhead) };
    let mut payload = vec![0u8; payload_len];
    rng.fill(&mut payload[..]);
    if dns && payload.len() >= 12 {
        payload[2] = if rng.random_bool(0.5) { 0x81 } else { 0x01 };
    }
    spec.payload = payload;
    spec.build()
}

fn mix() -> Vec<Vec<u8>> {
    let mut rng = Pcg64::seed_from_u64(0x5eed);
    (0..FRAMES).map(|_| one_frame(&mut rng)).collect()
}

fn run(frames: &[Vec<u8>], cfg: &PacketConfig, counters: &mut PacketCounters) -> u64 {
    let mut acc = 0u64;
    for f in frames {
        if let Inspection::Measured(m) = inspect(black_box(f), cfg, counters) {
            acc ^= m.identity ^ m.flow_hash ^ m.exchange.map_or(0, |x| x.id);
        }
    }
    acc
}

fn bench(c: &mut Criterion) {
    let frames = mix();
    let mut g = c.benchmark_group("packet");
    g.throughput(Throughput::Elements(FRAMES as u64));

    let cfg = PacketConfig::default();
    let mut counters = PacketCounters::default();
    g.bench_function("inspect_imix_default", |b| b.iter(|| run(&frames, &cfg, &mut counters)));

    let mut bare = PacketConfig::default();
    bare.classify.tcp_handshake = false;
    bare.classify.dns = false;
    g.bench_function("inspect_imix_no_classifiers", |b| b.iter(|| run(&frames, &bare, &mut counters)));

    let mut all = PacketConfig::default();
    all.classify.tcp_data = true;
    g.bench_function("inspect_imix_all_classifiers", |b| b.iter(|| run(&frames, &all, &mut counters)));
    g.finish();
    black_box(counters);
}

/// IPv4 TCP frames with the mix's sizes and TCP flags, to time one frame shape at a time.
/// `tags` are the VLAN tags (outermost first) every frame carries.
fn ipv4_tcp_frames(tags: &[(u16, u16)]) -> Vec<Vec<u8>> {
    let mut rng = Pcg64::seed_from_u64(0x5eed_5ba9e);
    (0..FRAMES)
        .map(|_| {
            let target = frame_len(&mut rng);
            let ip = IpSpec::v4(rng.random(), rng.random(), rng.random());
            let (flags, dport) = tcp_flags_and_port(&mut rng);
            let l4 = L4Spec::tcp(rng.random_range(1024..65535), dport, rng.random(), rng.random(), flags);
            let overhead = 14 + 4 * tags.len() + 20 + 20;
            let payload_len = if target == 60 { 0 } else { target.saturating_sub(overhead) };
            let mut payload = vec![0u8; payload_len];
            rng.fill(&mut payload[..]);
            let mut spec = FrameSpec::new(ip, l4, payload);
            spec.vlan_tags = tags.to_vec();
            spec.build()
        })
        .collect()
}

/// The common shapes, whose fast paths must keep their speed: IPv4 TCP plain, under one VLAN
/// tag, under a QinQ pair; the default configuration.
fn bench_common_shapes(c: &mut Criterion) {
    let mut g = c.benchmark_group("packet_shape");
    g.throughput(Throughput::Elements(FRAMES as u64));
    let cfg = PacketConfig::default();
    let mut counters = PacketCounters::default();
    for (name, tags) in [
        ("ipv4_tcp_plain", &[][..]),
        ("ipv4_tcp_vlan", &[(0x8100, 10)][..]),
        ("ipv4_tcp_qinq", &[(0x88a8, 100), (0x8100, 10)][..]),
    ] {
        let frames = ipv4_tcp_frames(tags);
        g.bench_function(name, |b| b.iter(|| run(&frames, &cfg, &mut counters)));
    }
    g.finish();
    black_box(counters);
}

/// Each encapsulation alone around the IPv4 TCP frames of [`bench_common_shapes`], with every
/// walk switched on (`[packet.encap]` gre, vxlan, gtpu, ip_in_ip = true).
fn bench_encapsulations(c: &mut Criterion) {
    let mut g = c.benchmark_group("packet_encap");
    g.throughput(Throughput::Elements(FRAMES as u64));
    let mut cfg = PacketConfig::default();
    cfg.encap.gre = true;
    cfg.encap.vxlan = true;
    cfg.encap.gtpu = true;
    cfg.encap.ip_in_ip = true;
    let mut counters = PacketCounters::default();
    let inner = ipv4_tcp_frames(&[]);
    let gre = Layer::Gre { key: Some(0xabcd), seq: None, ethernet: false };
    for (name, layers) in [
        ("ipv4_tcp_plain_tunnels_on", vec![]),
        ("ipv4_tcp_mpls2", vec![Layer::Mpls(1000), Layer::Mpls(2000)]),
        ("ipv4_tcp_pppoe", vec![Layer::Pppoe(0x77)]),
        ("ipv4_tcp_gre", vec![gre]),
        ("ipv4_tcp_vxlan", vec![Layer::Vxlan(5001)]),
        ("ipv4_tcp_gtpu", vec![Layer::Gtpu(0x1234_5678, false)]),
        ("ipv4_tcp_ipip", vec![Layer::IpInIp(false)]),
    ] {
        let frames: Vec<Vec<u8>> = inner.iter().map(|f| encapsulate(f, &layers)).collect();
        // The bench must time the walk, not a skip: every frame is measured.
        let mut check = PacketCounters::default();
        assert!(
            frames.iter().all(|f| matches!(inspect(f, &cfg, &mut check), Inspection::Measured(_))),
            "{name}"
        );
        g.bench_function(name, |b| b.iter(|| run(&frames, &cfg, &mut counters)));
    }
    g.finish();
    black_box(counters);
}

criterion_group!(benches, bench, bench_common_shapes, bench_encapsulations);
criterion_main!(benches);
