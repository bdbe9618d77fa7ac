//! The generator's output: deterministic, readable, time-sorted pcaps whose copies at the two
//! points differ only where a router changes packets, and delay/loss statistics that match the
//! configured models within their sampling error.

mod common;

use common::*;
use std::collections::HashMap;
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_trace::generate::{self, BUNDLED_BASE_PCAP, Source};
use wirelat_trace::segment::{DelaySpec, QueueModel, ReorderSpec};
use wirelat_trace::truth::Resolution;
use wirelat_trace::{Direction, DirectionTaps, Tap};

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let cfg = small(5);
    let s1 = Scratch::new("det1");
    let s2 = Scratch::new("det2");
    generate::generate(&cfg).unwrap().write_dir(&s1.0).unwrap();
    generate::generate(&cfg).unwrap().write_dir(&s2.0).unwrap();
    for f in ["a_port0.pcap", "a_port1.pcap", "b_port0.pcap", "b_port1.pcap", "truth.json"] {
        let a = std::fs::read(s1.0.join(f)).unwrap();
        let b = std::fs::read(s2.0.join(f)).unwrap();
        assert!(a.len() > 1000, "{f} is not empty");
        assert!(a == b, "{f} differs between two runs with one seed");
    }
    let other = generate::generate(&small(6)).unwrap();
    let first = generate::generate(&cfg).unwrap();
    assert_ne!(other.capture(Tap::ALL[0]), first.capture(Tap::ALL[0]));
}

#[test]
fn pcaps_are_readable_sorted_and_consistent_with_truth() {
    let mut cfg = small(7);
    cfg.clock_offset_ns = 2_500;
    let s = Scratch::new("readable");
    let pair = generate::generate(&cfg).unwrap();
    pair.write_dir(&s.0).unwrap();
    let files = read_pair(&s.0);
    for (tap, recs) in Tap::ALL.iter().zip(&files) {
        assert!(recs.len() > 5_000, "{}: {} frames", tap.name(), recs.len());
        assert!(recs.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns), "{} is time-sorted", tap.name());
        // The crate's own reader agrees with the hand-rolled one.
        let own = wirelat_trace::pcap_io::read_file(&s.0.join(format!("{}.pcap", tap.name()))).unwrap();
        assert_eq!(own.len(), recs.len());
        assert!(own.iter().zip(recs).all(|(a, b)| a.ts_ns == b.ts_ns && a.data == b.data));
        let listed = pair.truth.files.iter().find(|f| f.tap == tap.name()).unwrap();
        assert_eq!(listed.frames as usize, recs.len());
        // Every frame is a well-formed Ethernet frame of 60..=1514 bytes.
        for r in recs {
            assert!((60..=1514).contains(&r.data.len()), "frame length {}", r.data.len());
            assert!(etherparse::SlicedPacket::from_ethernet(&r.data).is_ok());
        }
    }
    // Synthetic traffic has unique invariant bytes.
    for d in &pair.truth.directions {
        assert_eq!(d.total.duplicate_identities, 0);
        assert!(d.total.unmeasured > 0, "ARP frames cross the segment unmeasured");
    }
}

#[test]
fn downstream_copies_differ_only_in_what_routers_change() {
    let mut cfg = small(8);
    cfg.in_flight.dscp = Some(10);
    let pair = generate::generate(&cfg).unwrap();
    for dir in Direction::BOTH {
        let up = pair.capture(dir.upstream());
        let mut by_id: HashMap<Vec<u8>, &[u8]> = HashMap::new();
        for c in up {
            if let Some(id) = identity(&c.frame) {
                by_id.insert(id, &c.frame);
            }
        }
        let mut checked = 0;
        for c in pair.capture(dir.downstream()) {
            let Some(id) = identity(&c.frame) else { continue };
            let orig = by_id.get(&id).expect("every delivered packet has an upstream copy");
            assert_ne!(&c.frame[0..12], &orig[0..12], "MAC addresses differ");
            let (a, b) = (
                etherparse::SlicedPacket::from_ethernet(orig).unwrap(),
                etherparse::SlicedPacket::from_ethernet(&c.frame).unwrap(),
            );
            match (a.net.unwrap(), b.net.unwrap()) {
                (etherparse::NetSlice::Ipv4(x), etherparse::NetSlice::Ipv4(y)) => {
                    assert_eq!(y.header().ttl(), x.header().ttl() - 1);
                    assert_eq!(y.header().dcp().value(), 10);
                    let h = y.header().to_header();
                    assert_eq!(h.header_checksum, h.calc_header_checksum(), "IPv4 checksum recomputed");
                }
                (etherparse::NetSlice::Ipv6(x), etherparse::NetSlice::Ipv6(y)) => {
                    assert_eq!(y.header().hop_limit(), x.header().hop_limit() - 1);
                    assert_eq!(y.header().traffic_class() >> 2, 10);
                }
                _ => panic!("address family changed"),
            }
            checked += 1;
        }
        assert!(checked > 5_000);
    }
}

#[test]
fn microsecond_mode_writes_microsecond_timestamps() {
    let mut cfg = small(9);
    cfg.resolution = Resolution::Us;
    cfg.clock_offset_ns = -1_234;
    let pair = generate::generate(&cfg).unwrap();
    for tap in Tap::ALL {
        assert!(pair.capture(tap).iter().all(|c| c.ts_ns % 1000 == 0), "{} is µs-aligned", tap.name());
    }
    assert_eq!(pair.truth.resolution, Resolution::Us);
    // In ns mode the same trace has sub-µs digits (so the check above can fail).
    cfg.resolution = Resolution::Ns;
    let ns = generate::generate(&cfg).unwrap();
    assert!(ns.capture(Tap::ALL[0]).iter().any(|c| c.ts_ns % 1000 != 0));
}

#[test]
fn loss_and_delay_match_the_models() {
    // Uniform loss p and uniform delays on [20, 80] µs in both directions, no clock offset, ns.
    let p = 0.03;
    let (lo, hi) = (20_000.0, 80_000.0);
    let mut cfg = small(10);
    cfg.forward = segment(DelayModel::Uniform { low: lo, high: hi }, LossModel::Uniform { rate: p });
    cfg.reverse = cfg.forward.clone();
    let pair = generate::generate(&cfg).unwrap();
    let model = DelayModel::Uniform { low: lo, high: hi };
    for d in &pair.truth.directions {
        let t = &d.total;
        let n = t.sent as f64;
        // Binomial: sd of the lost fraction = sqrt(p (1 − p) / n); allow 4.5 sd.
        let frac = t.lost as f64 / n;
        assert!((frac - p).abs() < 4.5 * (p * (1.0 - p) / n).sqrt(), "{:?} lost {frac}", d.direction);
        // Mean: standard error σ/√n; allow 5 of them plus 0.5 ns of rounding to integer ns.
        let nd = t.delivered as f64;
        let se = model.std_dev() / nd.sqrt();
        assert!(
            (t.delay.mean_ns - model.mean()).abs() < 5.0 * se + 0.5,
            "{:?} mean {}",
            d.direction,
            t.delay.mean_ns
        );
        // Std-dev: se(s) ≈ σ·sqrt((κ − 1) / (4n)), kurtosis κ = 1.8 for a uniform law; 5 of them.
        let se_sd = model.std_dev() * ((1.8 - 1.0) / (4.0 * nd)).sqrt();
        assert!(
            (t.delay.std_dev_ns - model.std_dev()).abs() < 5.0 * se_sd + 0.5,
            "{:?} sd {} vs {}",
            d.direction,
            t.delay.std_dev_ns,
            model.std_dev()
        );
    }
}

#[test]
fn weibull_mean_within_standard_error() {
    let model = DelayModel::Weibull { shape: 0.7, mean: 50_000.0 };
    let pair = generate::generate(&small(11)).unwrap();
    for d in &pair.truth.directions {
        let n = d.total.delivered as f64;
        // Standard error σ/√n with the model's σ (≈1.46 × mean for shape 0.7); 5 of them.
        let se = model.std_dev() / n.sqrt();
        assert!((d.total.delay.mean_ns - model.mean()).abs() < 5.0 * se + 0.5, "{:?}", d.direction);
    }
}

#[test]
fn fifo_removes_reordering_and_explicit_reordering_adds_it() {
    let mut cfg = small(12);
    cfg.forward = segment(DelayModel::Uniform { low: 0.0, high: 400_000.0 }, LossModel::None);
    cfg.reverse = cfg.forward.clone();
    let free = generate::generate(&cfg).unwrap();
    assert!(free.truth.directions.iter().all(|d| d.total.reordered > 100), "independent delays reorder");
    cfg.forward.fifo = true;
    cfg.reverse.fifo = true;
    let fifo = generate::generate(&cfg).unwrap();
    for d in &fifo.truth.directions {
        assert_eq!(d.total.reordered, 0);
    }
    // The downstream pcap holds the upstream packets in the same order.
    for dir in Direction::BOTH {
        let ids = |tap| fifo.capture(tap).iter().filter_map(|c| identity(&c.frame)).collect::<Vec<_>>();
        assert_eq!(ids(dir.upstream()), ids(dir.downstream()));
    }
    // Constant delay, 5 % held back by 500 µs: the held-back fraction is binomial.
    cfg.forward = segment(DelayModel::Constant { delay: 30_000.0 }, LossModel::None);
    cfg.forward.reorder =
        Some(ReorderSpec { fraction: 0.05, extra: DelayModel::Constant { delay: 500_000.0 } });
    cfg.reverse = cfg.forward.clone();
    let pair = generate::generate(&cfg).unwrap();
    let s = Scratch::new("reorder");
    pair.write_dir(&s.0).unwrap();
    let files = read_pair(&s.0);
    let fwd = matched(&files[0], &files[2]);
    let held = fwd.iter().filter(|(a, b, _)| b.unwrap() - a == 530_000).count() as f64;
    let n = fwd.len() as f64;
    assert!(fwd.iter().all(|(a, b, _)| matches!(b.unwrap() - a, 30_000 | 530_000)));
    assert!((held / n - 0.05).abs() < 4.5 * (0.05 * 0.95 / n).sqrt(), "held back {held} of {n}");
    assert!(pair.truth.directions[0].total.reordered > 0);
}

#[test]
fn queue_driven_delays_are_correlated_and_in_order() {
    let mut cfg = small(13);
    // ~10k pps of ~500 B frames ≈ 40 Mb/s offered against 60 Mb/s: ρ ≈ 0.7.
    cfg.forward.delay =
        DelaySpec::Queue(QueueModel::Queue { service_rate_bps: 60e6, propagation_ns: 20_000 });
    cfg.reverse = cfg.forward.clone();
    let pair = generate::generate(&cfg).unwrap();
    let s = Scratch::new("queue");
    pair.write_dir(&s.0).unwrap();
    let files = read_pair(&s.0);
    for (up, down) in [(0, 2), (3, 1)] {
        let m = matched(&files[up], &files[down]);
        let delays: Vec<f64> = m.iter().filter_map(|(a, b, _)| b.map(|b| (b - a) as f64)).collect();
        // Nothing is faster than propagation plus serialising the smallest frame (84 B on the wire).
        assert!(delays.iter().all(|d| *d >= 20_000.0 + 84.0 * 8.0 / 60e6 * 1e9 - 1.0));
        // Lag-1 autocorrelation: ≈ 0 for i.i.d. delays (|r| < 5/√n), large for a queue.
        let n = delays.len() as f64;
        let mean = delays.iter().sum::<f64>() / n;
        let var = delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>();
        let cov = delays.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum::<f64>();
        assert!(cov / var > 5.0 / n.sqrt(), "lag-1 autocorrelation {}", cov / var);
    }
    assert!(pair.truth.directions.iter().all(|d| d.total.reordered == 0));
    // The i.i.d. model at the same mean shows no such correlation (the check can fail).
    let iid = generate::generate(&small(13)).unwrap();
    let up = iid.capture(Direction::Forward.upstream());
    let down = iid.capture(Direction::Forward.downstream());
    let dmap: HashMap<Vec<u8>, u64> =
        down.iter().filter_map(|c| Some((identity(&c.frame)?, c.ts_ns))).collect();
    let delays: Vec<f64> =
        up.iter().filter_map(|c| Some((dmap.get(&identity(&c.frame)?)? - c.ts_ns) as f64)).collect();
    let n = delays.len() as f64;
    let mean = delays.iter().sum::<f64>() / n;
    let var = delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>();
    let cov = delays.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum::<f64>();
    assert!((cov / var).abs() < 5.0 / n.sqrt(), "iid lag-1 autocorrelation {}", cov / var);
}

#[test]
fn bundled_base_is_reproducible() {
    let made = generate::make_bundled_base().unwrap();
    assert!(
        made == BUNDLED_BASE_PCAP,
        "trace/data/base.pcap is stale: run `cargo run -p wirelat-trace --example make_base_pcap`"
    );
}

#[test]
fn base_capture_directions_follow_the_client() {
    let mut cfg = small(14);
    cfg.source = Source::Base { path: None, rebase: true, time_scale: 1.0 };
    cfg.forward = segment(DelayModel::Constant { delay: 40_000.0 }, LossModel::None);
    cfg.reverse = cfg.forward.clone();
    let pair = generate::generate(&cfg).unwrap();
    let base = wirelat_trace::pcap_io::read(BUNDLED_BASE_PCAP, std::path::Path::new("base")).unwrap();
    let up =
        pair.capture(Direction::Forward.upstream()).len() + pair.capture(Direction::Reverse.upstream()).len();
    assert_eq!(up, base.len(), "every base frame enters the segment once");
    let first = base.iter().map(|r| r.ts_ns).min().unwrap();
    assert_eq!(pair.truth.first_ts_ns, cfg.start_ns, "rebased to the start time");
    let mut syns = 0;
    for (tap, forward) in [(Direction::Forward.upstream(), true), (Direction::Reverse.upstream(), false)] {
        for c in pair.capture(tap) {
            let Ok(p) = etherparse::SlicedPacket::from_ethernet(&c.frame) else { continue };
            match p.transport {
                Some(etherparse::TransportSlice::Tcp(t)) if t.syn() => {
                    assert_eq!(!t.ack(), forward, "SYN forward, SYN/ACK reverse");
                    syns += 1;
                }
                Some(etherparse::TransportSlice::Udp(u)) if u.destination_port() == 53 => assert!(forward),
                Some(etherparse::TransportSlice::Udp(u)) if u.source_port() == 53 => assert!(!forward),
                _ => {}
            }
        }
    }
    assert!(syns > 20);
    // Scaled, not rebased: gaps double and the base's own start is kept.
    let s = Scratch::new("base");
    let path = s.0.join("base.pcap");
    std::fs::write(&path, BUNDLED_BASE_PCAP).unwrap();
    cfg.source = Source::Base { path: Some(path), rebase: false, time_scale: 2.0 };
    let scaled = generate::generate(&cfg).unwrap();
    let last = base.iter().map(|r| r.ts_ns).max().unwrap();
    let a0 = scaled.capture(Direction::Forward.upstream());
    let b1 = scaled.capture(Direction::Reverse.upstream());
    let span = a0.last().unwrap().ts_ns.max(b1.last().unwrap().ts_ns) - first;
    assert!((span as i64 - 2 * (last - first) as i64).abs() <= 1, "span {span}");
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let mut cfg = small(15);
    cfg.epoch_len_ns = 0;
    assert!(generate::generate(&cfg).is_err());
    let mut cfg = small(15);
    cfg.clock_offset_ns = -2_000_000_000_000_000_000;
    assert!(generate::generate(&cfg).is_err(), "timestamps before 1970");
    let mut cfg = small(15);
    let s = Scratch::new("bad");
    let p = s.0.join("junk.pcap");
    std::fs::write(&p, b"this is not a capture file at all").unwrap();
    cfg.source = Source::Base { path: Some(p), rebase: true, time_scale: 1.0 };
    assert!(generate::generate(&cfg).is_err());
    cfg.source = Source::Base { path: Some(s.0.join("missing.pcap")), rebase: true, time_scale: 1.0 };
    assert!(generate::generate(&cfg).is_err());
}

#[test]
fn flows_keep_their_path() {
    use wirelat_trace::segment::PathClass;
    let mut cfg = small(16);
    cfg.forward = segment(DelayModel::Constant { delay: 20_000.0 }, LossModel::None);
    cfg.forward.paths = vec![
        PathClass { weight: 1.0, extra_delay_ns: 0 },
        PathClass { weight: 1.0, extra_delay_ns: 100_000 },
    ];
    let pair = generate::generate(&cfg).unwrap();
    let flows: Vec<_> = pair.truth.flows.iter().filter(|f| f.direction == Direction::Forward).collect();
    // Every packet of a flow takes the same path: per-flow delay is constant, 20 or 120 µs.
    assert!(flows.iter().all(|f| f.delay.std_dev_ns == 0.0));
    assert!(flows.iter().all(|f| f.delay.mean_ns == 20_000.0 || f.delay.mean_ns == 120_000.0));
    let slow = flows.iter().filter(|f| f.delay.mean_ns == 120_000.0).count() as f64;
    let n = flows.len() as f64;
    // Paths are chosen per flow with probability 1/2: binomial, 4.5 sd.
    assert!((slow / n - 0.5).abs() < 4.5 * (0.25 / n).sqrt(), "{slow} of {n} flows on the slow path");
}
