//! Deterministic oracles of spec §11.6 (structural claims), merge and encoding round trips,
//! decode rejections, and the seeded CI-sized reproduction of spec §11 (`statistical`).

use super::cell::Cell;
use super::config::{EstimatorConfig, LdsConfig, OffsetMode, SelectionRule};
use super::estimator::{Estimator, FlowEstimate, NoFlowEstimate, estimate_all, estimate_flow, report};
use super::sds::SimpleDelaySketch;
use super::sketch::Lds;
use super::weights::{IpPrefix, WeightPolicy, WeightRule};
use crate::packet::FlowKey;
use crate::sim;
use crate::synopsis::codec::DecodeError;
use crate::synopsis::estimate::NoEstimate;
use crate::synopsis::{MergeError, Observation, Synopsis, SynopsisConfig};
use rand::Rng;

mod statistical;

const T0: u64 = 1_700_000_000_000_000_000;

fn key(i: u32) -> FlowKey {
    super::trace::flow_key(i)
}

fn flow_hash(i: u32) -> u64 {
    key(i).hash(super::trace::FLOW_HASH_SEED)
}

/// A packet of the tests' streams: flow index, identity, send time, delay.
#[derive(Clone, Copy, Debug)]
struct Pkt {
    flow: u32,
    identity: u64,
    send_ns: u64,
    delay_ns: u64,
}

/// `n` packets over `flows` flows (flow i gets weight ∝ 1/(i+1)), delays 100–900 µs by flow.
fn stream(seed: u64, flows: u32, n: usize) -> Vec<Pkt> {
    let mut rng = sim::rng(seed);
    let h: f64 = (1..=flows).map(|i| 1.0 / f64::from(i)).sum();
    (0..n)
        .map(|i| {
            let mut u = rng.random::<f64>() * h;
            let mut flow = 0;
            while flow + 1 < flows && u > 1.0 / f64::from(flow + 1) {
                u -= 1.0 / f64::from(flow + 1);
                flow += 1;
            }
            let base = 100_000 + u64::from(flow % 9) * 100_000;
            Pkt {
                flow,
                identity: rng.random(),
                send_ns: T0 + i as u64 * 1_000,
                delay_ns: base + rng.random_range(0..50_000),
            }
        })
        .collect()
}

fn observe(lds: &mut Lds, p: &Pkt, ts_ns: u64) {
    let k = key(p.flow);
    let obs = Observation {
        ts_ns,
        flow: &k,
        flow_hash: flow_hash(p.flow),
        identity: p.identity,
        exchange: None,
        encap: crate::packet::Encap::NONE,
    };
    lds.update(&mut (), &obs);
}

/// Sender and receiver sketches; `drop(i)` removes packet i at the receiver.
fn run(cfg: &LdsConfig, pkts: &[Pkt], drop: impl Fn(usize) -> bool) -> (Lds, Lds) {
    let mut s = Lds::new(cfg).unwrap();
    let mut r = Lds::new(cfg).unwrap();
    for (i, p) in pkts.iter().enumerate() {
        observe(&mut s, p, p.send_ns);
        if !drop(i) {
            observe(&mut r, p, p.send_ns + p.delay_ns);
        }
    }
    (s, r)
}

fn true_mean(pkts: &[Pkt], flow: u32, drop: impl Fn(usize) -> bool) -> f64 {
    let (mut s, mut n) = (0u64, 0u64);
    for (i, p) in pkts.iter().enumerate() {
        if p.flow == flow && !drop(i) {
            s += p.delay_ns;
            n += 1;
        }
    }
    s as f64 / n as f64
}

fn mean_of(e: &FlowEstimate) -> f64 {
    e.mean_delay_ns.as_ref().unwrap().value
}

#[test]
fn one_flow_is_estimated_exactly() {
    let pkts: Vec<Pkt> = stream(1, 1, 5_000);
    for k in [1, 5] {
        let cfg = LdsConfig { vlda_len: k, ..LdsConfig::new(4, 1000) };
        let (s, r) = run(&cfg, &pkts, |_| false);
        let e = estimate_flow(&s, &r, &key(0), flow_hash(0)).unwrap();
        assert_eq!(mean_of(&e), true_mean(&pkts, 0, |_| false), "k = {k}");
        assert_eq!(e.packets, 5_000);
        assert_eq!(e.lost_packets_bound, 0);
        assert_eq!(e.cells.usable, 4 * k);
    }
}

#[test]
fn collision_free_flows_are_estimated_exactly() {
    let pkts = stream(2, 20, 20_000);
    let cfg = LdsConfig::new(4, 1 << 20);
    let (s, r) = run(&cfg, &pkts, |_| false);
    // Precondition (deterministic for these seeds): no two flows share a cell in any row.
    for row in 0..4 {
        let mut cols: Vec<u64> = (0..20).map(|f| s.base_column(row, flow_hash(f)).unwrap()).collect();
        cols.sort_unstable();
        cols.dedup();
        assert_eq!(cols.len(), 20);
    }
    for f in 0..20 {
        let e = estimate_flow(&s, &r, &key(f), flow_hash(f)).unwrap();
        assert_eq!(mean_of(&e), true_mean(&pkts, f, |_| false), "flow {f}");
        let size = pkts.iter().filter(|p| p.flow == f).count() as u64;
        assert_eq!(e.packets, size, "Count-Min is exact without collisions");
    }
}

#[test]
fn both_points_map_packets_identically_and_other_configs_are_refused() {
    let pkts = stream(3, 50, 2_000);
    let cfg = LdsConfig { vlda_len: 3, sampling: vec![0.5, 1.0, 0.25, 1.0], ..LdsConfig::new(4, 97) };
    // With zero delay and no loss the two points build identical sketches.
    let mut a = Lds::new(&cfg).unwrap();
    let mut b = Lds::new(&cfg).unwrap();
    for p in &pkts {
        observe(&mut a, p, p.send_ns);
    }
    for p in pkts.iter().rev() {
        observe(&mut b, p, p.send_ns);
    }
    assert_eq!(a, b);
    // Another seed maps differently, and neither the estimator nor the decoder mixes them.
    let other = LdsConfig { seed: 9, ..cfg.clone() };
    let mut c = Lds::new(&other).unwrap();
    for p in &pkts {
        observe(&mut c, p, p.send_ns);
    }
    assert_ne!(a.cells(), c.cells());
    assert_eq!(Estimator::new(&a, &c).unwrap_err(), NoEstimate::ConfigMismatch);
    assert_eq!(estimate_all(&a, &c, a.flows()).unwrap_err(), NoEstimate::ConfigMismatch);
    assert!(matches!(Lds::decode(&other, &a.encode()), Err(DecodeError::ConfigMismatch { .. })));
    assert!(matches!(a.merge(&c), Err(MergeError::ConfigMismatch { .. })));
}

#[test]
fn one_lost_packet_with_k1_leaves_no_estimate() {
    let pkts = stream(4, 1, 300);
    let cfg = LdsConfig::new(4, 1000);
    let (s, r) = run(&cfg, &pkts, |i| i == 137);
    let e = estimate_flow(&s, &r, &key(0), flow_hash(0)).unwrap();
    assert_eq!(e.mean_delay_ns, Err(NoEstimate::NoUsableCells));
    assert_eq!(e.cells.usable, 0);
    assert_eq!(e.lost_packets_bound, 1);
    assert_eq!((e.cells.lossy, e.cells.empty), (4, 0));
    assert_eq!(e.cells.no_estimate_reason, Some(NoFlowEstimate::LossInEveryCell));
    // A flow neither point saw: no cell holds a packet.
    let e = estimate_flow(&s, &r, &key(1), flow_hash(1)).unwrap();
    assert_eq!(e.cells.no_estimate_reason, Some(NoFlowEstimate::TooFewPackets));
    // The flow that has a mean carries no reason.
    let (s, r) = run(&cfg, &pkts, |_| false);
    let e = estimate_flow(&s, &r, &key(0), flow_hash(0)).unwrap();
    assert!(e.mean_delay_ns.is_ok() && e.cells.no_estimate_reason.is_none());
}

#[test]
fn with_k5_one_loss_spoils_one_cell_per_row() {
    let pkts = stream(5, 1, 1_000);
    let lost = 411;
    for mode in [OffsetMode::Shared, OffsetMode::PerRow] {
        let cfg = LdsConfig { vlda_len: 5, offsets: mode, ..LdsConfig::new(4, 1000) };
        let (s, r) = run(&cfg, &pkts, |i| i == lost);
        let e = estimate_flow(&s, &r, &key(0), flow_hash(0)).unwrap();
        assert_eq!(e.cells.usable, 4 * 4, "{mode:?}");
        // Which offset was spoiled in each row.
        let offsets: Vec<u64> = (0..4)
            .map(|row| {
                let base = s.base_column(row, flow_hash(0)).unwrap();
                let spoiled: Vec<u64> = (0..5)
                    .filter(|&o| {
                        let col = ((base + o) % 1000) as usize;
                        s.cell(row, col).unwrap().count != r.cell(row, col).unwrap().count
                    })
                    .collect();
                assert_eq!(spoiled.len(), 1, "{mode:?} row {row}");
                spoiled[0]
            })
            .collect();
        if mode == OffsetMode::Shared {
            assert!(offsets.iter().all(|&o| o == offsets[0]), "Fig. 5: one offset in every row: {offsets:?}");
            // With every usable cell kept (α = ∞) the estimate is the mean delay of the packets
            // outside the spoiled offset, the same subset in every row.
            let all = EstimatorConfig { alpha: f64::INFINITY, ..EstimatorConfig::default() };
            let e = Estimator::new(&s, &r).unwrap().with_options(all).unwrap().flow(&key(0), flow_hash(0));
            let spoiled_col = (s.base_column(0, flow_hash(0)).unwrap() + offsets[0]) % 1000;
            let in_spoiled_cell = |i: usize| {
                let (row, col) = s.cells_of_packet(flow_hash(0), pkts[i].identity).next().unwrap();
                row != 0 || col == spoiled_col
            };
            assert_eq!(mean_of(&e), true_mean(&pkts, 0, in_spoiled_cell));
        }
    }
}

#[test]
fn digest_catches_a_swapped_packet() {
    // The receiver misses packet A of the flow but sees a packet B of the same flow the sender
    // never saw (e.g. from the next epoch): every cell's count matches, only the digest differs.
    let pkts = stream(6, 1, 200);
    let cfg = LdsConfig::new(4, 1000);
    let (s, mut r) = run(&cfg, &pkts, |i| i == 50);
    let b = Pkt { identity: 0xB0B, ..pkts[50] };
    observe(&mut r, &b, b.send_ns + b.delay_ns);
    let e = estimate_flow(&s, &r, &key(0), flow_hash(0)).unwrap();
    assert_eq!(e.mean_delay_ns, Err(NoEstimate::NoUsableCells));
    assert_eq!(e.cells.no_estimate_reason, Some(NoFlowEstimate::Collision));
    let est = Estimator::new(&s, &r).unwrap();
    let summary = est.summary(r.flows(), &est.all(r.flows()));
    assert_eq!(summary.cells.digest_mismatch, 4);
    assert_eq!(summary.cells.count_mismatch, 0);
    assert_eq!(summary.cells.usable, 0);
}

#[test]
fn k1_alpha0_p1_equals_the_simple_delay_sketch() {
    // Narrow rows: many collisions, so the min-n choice matters.
    let pkts = stream(7, 400, 40_000);
    let cfg = LdsConfig {
        estimator: EstimatorConfig { alpha: 0.0, ..EstimatorConfig::default() },
        ..LdsConfig::new(4, 101)
    };
    let (s, r) = run(&cfg, &pkts, |_| false);
    let mut sds = SimpleDelaySketch::new(&cfg);
    for p in &pkts {
        sds.update(flow_hash(p.flow), p.delay_ns as i64);
    }
    let mut compared = 0;
    for f in 0..400 {
        let h = flow_hash(f);
        if pkts.iter().all(|p| p.flow != f) || !sds.min_is_unique(h) {
            continue;
        }
        let e = estimate_flow(&s, &r, &key(f), h).unwrap();
        assert_eq!(Some(mean_of(&e)), sds.estimate(h), "flow {f}");
        assert_eq!(e.cells.selected, 1);
        compared += 1;
    }
    assert!(compared > 100, "{compared}");
}

/// The estimator recomputed from the cells, independently of `estimator.rs`.
fn brute_force(s: &Lds, r: &Lds, h: u64, opts: &EstimatorConfig) -> Option<f64> {
    let cfg = s.config();
    let mut cand = Vec::new();
    for row in 0..cfg.rows as usize {
        let base = s.base_column(row, h).unwrap();
        for o in 0..u64::from(cfg.vlda_len) {
            let col = ((base + o) % u64::from(cfg.width)) as usize;
            let (a, b) = (s.cell(row, col).unwrap(), r.cell(row, col).unwrap());
            if a.count == b.count && a.digest == b.digest && a.count > 0 {
                let p = sim_rate(cfg.sampling_of(row));
                cand.push((row, f64::from(a.count), b.ts_sum_ns.wrapping_sub(a.ts_sum_ns) as i64, p));
            }
        }
    }
    if let SelectionRule::HighestRateFirst = opts.selection {
        let top = cand.iter().map(|c| c.3).fold(0.0, f64::max);
        cand.retain(|c| c.3 == top);
    }
    let key = |n: f64, p: f64| match opts.selection {
        SelectionRule::Ucb { c } => (n + c * (n * (1.0 - p)).sqrt()) / p,
        _ => n / p,
    };
    let min = cand.iter().map(|c| key(c.1, c.3)).fold(f64::INFINITY, f64::min);
    let sel: Vec<_> = cand.iter().filter(|c| key(c.1, c.3) <= (1.0 + opts.alpha) * min).collect();
    if sel.is_empty() {
        return None;
    }
    let ds: i128 = sel.iter().map(|c| i128::from(c.2)).sum();
    let n: f64 = sel.iter().map(|c| c.1).sum();
    Some(ds as f64 / n)
}

fn sim_rate(p: f64) -> f64 {
    crate::synopsis::hash::Coin::new(p).probability()
}

#[test]
fn estimate_is_the_weighted_average_over_the_selected_cells() {
    let pkts = stream(8, 300, 30_000);
    let cfg = LdsConfig { vlda_len: 4, sampling: vec![0.05, 0.3, 0.6, 1.0], ..LdsConfig::new(4, 211) };
    let (s, r) = run(&cfg, &pkts, |i| i % 97 == 0);
    for selection in
        [SelectionRule::PaperScaled, SelectionRule::Ucb { c: 2.0 }, SelectionRule::HighestRateFirst]
    {
        for alpha in [0.0, 0.1, 1.0] {
            let opts = EstimatorConfig { alpha, strict_alpha: false, selection };
            let est = Estimator::new(&s, &r).unwrap().with_options(opts).unwrap();
            let mut some = 0;
            for f in 0..300 {
                let h = flow_hash(f);
                let got = est.flow(&key(f), h).mean_delay_ns.ok().map(|e| e.value);
                assert_eq!(got, brute_force(&s, &r, h, &opts), "{selection:?} α={alpha} flow {f}");
                some += usize::from(got.is_some());
            }
            assert!(some > 50, "{selection:?} α={alpha}: {some}");
        }
    }
}

#[test]
fn strict_alpha_keeps_the_minimum_and_drops_the_boundary() {
    // One flow of 10 packets in two rows; a collider adds 5 packets to its row-1 cell only, so
    // the counts are 10 and 15 and α = 0.5 puts 15 exactly on the boundary (1.5·10 = 15).
    let cfg = LdsConfig::new(2, 50);
    let mut s = Lds::new(&cfg).unwrap();
    let mut r = Lds::new(&cfg).unwrap();
    let h = flow_hash(0);
    for i in 0..10u64 {
        s.update_raw(h, i, T0 + i, 1);
        r.update_raw(h, i, T0 + i + 100, 1);
    }
    let other = (1..u64::MAX)
        .map(|x| x.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .find(|&g| s.base_column(1, g) == s.base_column(1, h) && s.base_column(0, g) != s.base_column(0, h))
        .unwrap();
    for i in 0..5u64 {
        s.update_raw(other, 100 + i, T0, 1);
        r.update_raw(other, 100 + i, T0 + 1_000, 1);
    }
    let opts =
        |alpha, strict_alpha| EstimatorConfig { alpha, strict_alpha, selection: SelectionRule::PaperScaled };
    let base = Estimator::new(&s, &r).unwrap();
    let e = base.with_options(opts(0.5, false)).unwrap().flow(&key(0), h);
    assert_eq!(e.cells.selected, 2);
    assert_eq!(mean_of(&e), (1_000.0 + 1_000.0 + 5_000.0) / 25.0);
    let e = base.with_options(opts(0.5, true)).unwrap().flow(&key(0), h);
    assert_eq!(e.cells.selected, 1);
    assert_eq!(mean_of(&e), 100.0);
    let e = base.with_options(opts(0.0, true)).unwrap().flow(&key(0), h);
    assert_eq!(mean_of(&e), 100.0, "α = 0 strict still keeps the minimum");
    let e = base.with_options(opts(f64::INFINITY, false)).unwrap().flow(&key(0), h);
    assert_eq!(e.cells.selected, 2, "α = ∞ keeps every usable cell");
    assert!(base.with_options(opts(f64::NAN, false)).is_err());
}

#[test]
fn count_min_flow_size_never_underestimates() {
    let pkts = stream(9, 500, 50_000);
    let cfg = LdsConfig { vlda_len: 3, ..LdsConfig::new(3, 150) };
    let (s, r) = run(&cfg, &pkts, |_| false);
    let mut sizes = vec![0u64; 500];
    for p in &pkts {
        sizes[p.flow as usize] += 1;
    }
    for e in estimate_all(&s, &r, r.flows()).unwrap() {
        let f = (0..500).find(|&f| key(f) == e.flow).unwrap();
        assert!(e.packets >= sizes[f as usize], "flow {f}: {} < {}", e.packets, sizes[f as usize]);
    }
}

#[test]
fn weights_scale_sums_and_counts() {
    let cfg = LdsConfig::new(2, 10);
    let mut l = Lds::new(&cfg).unwrap();
    l.update_raw(flow_hash(0), 5, 1_000, 7);
    let cells: Vec<&Cell> = l.cells().iter().filter(|c| c.count != 0).collect();
    assert_eq!(cells.len(), 2);
    for c in cells {
        assert_eq!((c.ts_sum_ns, c.count), (7_000, 7));
    }
    // Uniform weights give the same estimates as none.
    let pkts = stream(10, 200, 20_000);
    let plain = LdsConfig::new(4, 73);
    let heavy = LdsConfig { weights: WeightPolicy { default_weight: 3, rules: vec![] }, ..plain.clone() };
    let (s1, r1) = run(&plain, &pkts, |_| false);
    let (s3, r3) = run(&heavy, &pkts, |_| false);
    let a = estimate_all(&s1, &r1, r1.flows()).unwrap();
    let b = estimate_all(&s3, &r3, r3.flows()).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.mean_delay_ns.as_ref().map(|e| e.value), y.mean_delay_ns.as_ref().map(|e| e.value));
        assert_eq!(x.packets, y.packets, "the packet estimate divides the weight out");
    }
    // A policy rule gives one flow weight 1000: its error drops (it dominates its cells).
    let src = key(150).src_ip();
    let gold = LdsConfig {
        weights: WeightPolicy {
            default_weight: 1,
            rules: vec![WeightRule {
                weight: 1000,
                src: Some(IpPrefix { addr: src, len: 32 }),
                dst: None,
                protocol: None,
                src_ports: None,
                dst_ports: None,
            }],
        },
        ..plain.clone()
    };
    let (sg, rg) = run(&gold, &pkts, |_| false);
    assert_eq!(sg.weight_of(&key(150)), 1000);
    let truth = true_mean(&pkts, 150, |_| false);
    let err =
        |s: &Lds, r: &Lds| (mean_of(&estimate_flow(s, r, &key(150), flow_hash(150)).unwrap()) - truth).abs();
    let (e_plain, e_gold) = (err(&s1, &r1), err(&sg, &rg));
    assert!(e_gold < e_plain / 10.0, "weighted {e_gold} vs plain {e_plain}");
}

#[test]
fn overflowed_counts_are_never_used() {
    let cfg = LdsConfig::new(2, 10);
    let (mut s, mut r) = (Lds::new(&cfg).unwrap(), Lds::new(&cfg).unwrap());
    for i in 0..3 {
        s.update_raw(flow_hash(0), i, T0, 2_000_000_000);
        r.update_raw(flow_hash(0), i, T0 + 10, 2_000_000_000);
    }
    assert_eq!(s.overflowed_cells(), 2);
    let e = Estimator::new(&s, &r).unwrap().flow(&key(0), flow_hash(0));
    assert_eq!(e.mean_delay_ns, Err(NoEstimate::NoUsableCells));
    assert_eq!(e.cells.no_estimate_reason, Some(NoFlowEstimate::Overflow));
    let summary = Estimator::new(&s, &r).unwrap().summary(r.flows(), &[]);
    assert_eq!(summary.cells.overflowed, 2);
}

#[test]
fn wrapping_sums_give_exact_deltas() {
    // Timestamps near 2^64: every sum wraps, the differences stay exact.
    let cfg = LdsConfig::new(1, 1);
    let (mut s, mut r) = (Lds::new(&cfg).unwrap(), Lds::new(&cfg).unwrap());
    let base = u64::MAX - 1_000_000;
    let delays = [123u64, 4_567, 89, 1_000_000, 42];
    for (i, d) in delays.iter().enumerate() {
        let t = base.wrapping_add(i as u64 * 400_000);
        s.update_raw(flow_hash(0), i as u64, t, 1);
        r.update_raw(flow_hash(0), i as u64, t.wrapping_add(*d), 1);
    }
    let e = estimate_flow(&s, &r, &key(0), flow_hash(0)).unwrap();
    assert_eq!(mean_of(&e), delays.iter().sum::<u64>() as f64 / 5.0);
    // A receiver clock behind the sender's gives negative delays (spec P19), not garbage.
    let (mut s, mut r) = (Lds::new(&cfg).unwrap(), Lds::new(&cfg).unwrap());
    s.update_raw(1, 1, 10_000, 1);
    r.update_raw(1, 1, 9_000, 1);
    assert_eq!(mean_of(&estimate_flow(&s, &r, &key(0), 1).unwrap()), -1_000.0);
}

#[test]
fn empty_cells_are_never_used_and_nothing_is_nan() {
    // k = 5 and single-packet flows: four matched empty cells per row must not set N_min = 0.
    let cfg = LdsConfig { vlda_len: 5, ..LdsConfig::new(4, 1 << 16) };
    let pkts: Vec<Pkt> = (0..30)
        .map(|f| Pkt {
            flow: f,
            identity: u64::from(f) * 31 + 7,
            send_ns: T0,
            delay_ns: 1_000 + u64::from(f),
        })
        .collect();
    let (s, r) = run(&cfg, &pkts, |_| false);
    for f in 0..30 {
        let e = estimate_flow(&s, &r, &key(f), flow_hash(f)).unwrap();
        assert_eq!(mean_of(&e), 1_000.0 + f64::from(f));
        assert_eq!(e.cells.usable, 4, "only the non-empty cell of each row");
    }
    // With heavy sampling most flows have no sampled packet at all: no estimate, no NaN.
    let sparse = LdsConfig { sampling: vec![0.01], ..cfg };
    let (s, r) = run(&sparse, &pkts, |_| false);
    let all = estimate_all(&s, &r, r.flows()).unwrap();
    assert_eq!(all.len(), 30);
    assert!(all.iter().any(|e| e.mean_delay_ns == Err(NoEstimate::NoPackets)));
    for e in &all {
        if let Ok(m) = &e.mean_delay_ns {
            assert!(m.value.is_finite());
        }
    }
    let json = serde_json::to_string(&report(&s, &r, r.flows(), Some(5)).unwrap()).unwrap();
    assert!(!json.contains("NaN") && json.contains("no_packets"), "{json}");
}

#[test]
fn merged_shards_equal_one_sketch_fed_everything() {
    let pkts = stream(11, 300, 20_000);
    let cfg = LdsConfig {
        vlda_len: 3,
        sampling: vec![0.1, 0.5, 1.0],
        offsets: OffsetMode::PerRow,
        flow_capacity: 1_000,
        ..LdsConfig::new(3, 257)
    };
    let mut rng = sim::rng(12);
    for shards in 2..=4 {
        let mut whole = Lds::new(&cfg).unwrap();
        let mut parts: Vec<Lds> = (0..shards).map(|_| Lds::new(&cfg).unwrap()).collect();
        for p in &pkts {
            observe(&mut whole, p, p.send_ns);
            // Per-flow steering like RSS, with some flows split across cores.
            let core = if p.flow % 7 == 0 { rng.random_range(0..shards) } else { p.flow as usize % shards };
            observe(&mut parts[core], p, p.send_ns);
        }
        let mut merged = parts.remove(0);
        for p in &parts {
            merged.merge(p).unwrap();
        }
        assert_eq!(merged, whole, "{shards} shards");
        merged.reset();
        assert_eq!(merged, Lds::new(&cfg).unwrap());
    }
}

fn sample_sketch() -> (LdsConfig, Lds) {
    let cfg = LdsConfig { vlda_len: 2, flow_capacity: 64, ..LdsConfig::new(3, 40) };
    let mut l = Lds::new(&cfg).unwrap();
    for p in stream(13, 80, 3_000) {
        observe(&mut l, &p, p.send_ns);
    }
    (cfg, l)
}

#[test]
fn encoding_round_trips() {
    let (cfg, l) = sample_sketch();
    let bytes = l.encode();
    let back = Lds::decode(&cfg, &bytes).unwrap();
    assert_eq!(back, l);
    assert_eq!(back.encode(), bytes);
    assert_eq!(l.flows().len(), 64);
    assert!(l.flows().unrecorded_packets() > 0);
    // The decoded pair estimates like the originals.
    let (s, r) = run(&cfg, &stream(14, 30, 1_000), |i| i % 50 == 0);
    let (s2, r2) = (Lds::decode(&cfg, &s.encode()).unwrap(), Lds::decode(&cfg, &r.encode()).unwrap());
    assert_eq!(estimate_all(&s, &r, r.flows()).unwrap(), estimate_all(&s2, &r2, r2.flows()).unwrap());
}

#[test]
fn decode_refuses_bad_input() {
    let (cfg, l) = sample_sketch();
    let bytes = l.encode();
    for cut in 0..bytes.len() {
        assert!(Lds::decode(&cfg, &bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(Lds::decode(&cfg, &long), Err(DecodeError::TrailingBytes { extra: 1 }));
    let mut kind = bytes.clone();
    kind[0] = 2;
    assert!(matches!(Lds::decode(&cfg, &kind), Err(DecodeError::WrongKind { .. })));
    let mut version = bytes.clone();
    version[1] = 9;
    assert!(matches!(Lds::decode(&cfg, &version), Err(DecodeError::UnsupportedVersion { .. })));
    let mut fp = bytes.clone();
    fp[2] ^= 1;
    assert!(matches!(Lds::decode(&cfg, &fp), Err(DecodeError::ConfigMismatch { .. })));
    // A flow count above the configured capacity.
    let count_at = 10 + 3 * 40 * 16;
    let mut over = bytes.clone();
    over[count_at..count_at + 4].copy_from_slice(&65u32.to_le_bytes());
    assert!(matches!(Lds::decode(&cfg, &over), Err(DecodeError::Invalid { field: "lds.flows.count", .. })));
    // An invalid config is refused, not used.
    let bad = LdsConfig { rows: 0, ..cfg.clone() };
    let mut hdr = Vec::new();
    crate::synopsis::codec::write_header(
        &mut crate::synopsis::codec::Writer::new(&mut hdr),
        crate::synopsis::SynopsisKind::Lds,
        Lds::FORMAT_VERSION,
        bad.fingerprint(),
    );
    assert!(matches!(Lds::decode(&bad, &hdr), Err(DecodeError::Invalid { field: "lds.config", .. })));
}

#[test]
fn random_bytes_never_panic() {
    let (cfg, l) = sample_sketch();
    let good = l.encode();
    let mut rng = sim::rng(15);
    for round in 0..3_000 {
        let mut b = if round % 2 == 0 {
            // Valid header, random body.
            let mut b = good[..10].to_vec();
            let n = rng.random_range(0..good.len() + 100);
            b.extend((0..n).map(|_| rng.random::<u8>()));
            b
        } else {
            good.clone()
        };
        // Flip a few bytes anywhere.
        for _ in 0..rng.random_range(0..8) {
            let i = rng.random_range(0..b.len().max(1));
            if let Some(x) = b.get_mut(i) {
                *x = rng.random();
            }
        }
        if let Ok(d) = Lds::decode(&cfg, &b) {
            // Whatever decodes must estimate without panicking or NaN.
            for e in estimate_all(&d, &l, d.flows()).unwrap() {
                if let Ok(m) = e.mean_delay_ns {
                    assert!(m.value.is_finite());
                }
            }
        }
    }
}

#[test]
fn flow_enumeration_reports_every_recorded_flow_and_sorts_by_packets() {
    let pkts = stream(16, 200, 30_000);
    let cfg = LdsConfig::new(4, 400);
    let (s, r) = run(&cfg, &pkts, |i| i % 1_000 == 0);
    let all = estimate_all(&s, &r, r.flows()).unwrap();
    let seen: std::collections::BTreeSet<u32> = pkts.iter().map(|p| p.flow).collect();
    assert_eq!(all.len(), seen.len());
    for e in &all {
        let f = (0..200).find(|&f| key(f) == e.flow).unwrap();
        assert_eq!(e, &estimate_flow(&s, &r, &key(f), flow_hash(f)).unwrap());
    }
    let rep = report(&s, &r, r.flows(), Some(10)).unwrap();
    assert_eq!(rep.flows.len(), 10);
    assert!(rep.flows.windows(2).all(|w| w[0].packets >= w[1].packets));
    // Flow 0 is the largest (weight ∝ 1/(i+1)).
    assert_eq!(rep.flows[0].flow, key(0));
    let full = report(&s, &r, r.flows(), None).unwrap();
    assert_eq!(full.flows[..10], rep.flows[..]);
    assert_eq!(full.summary.flows_listed, seen.len() as u64);
    assert_eq!(full.summary.weighted_packets_sent, pkts.len() as u64);
    assert_eq!(full.summary.weighted_packets_received, pkts.len() as u64 - 30);
    assert_eq!(full.summary.flows_estimated + full.summary.flows_no_usable_cells, seen.len() as u64);
    // Every flow without a mean has a reason; here (30 packets lost, no collisions between
    // points) all of them are losses.
    let why = full.summary.flows_no_estimate_by_reason;
    assert_eq!(
        why.loss_in_every_cell + why.collision + why.overflow + why.too_few_packets,
        full.summary.flows_no_usable_cells
    );
    assert!(why.loss_in_every_cell > 0 && why.collision == 0, "{why:?}");
    assert!(full.summary.cells.count_mismatch > 0 && full.summary.cells.count_mismatch <= 4 * 30);
    // Without loss every cell is usable and the aggregate over one row is the mean of all
    // packets' delays, exactly.
    let (s, r) = run(&cfg, &pkts, |_| false);
    let est = Estimator::new(&s, &r).unwrap();
    let summary = est.summary(r.flows(), &est.all(r.flows()));
    let truth = pkts.iter().map(|p| p.delay_ns).sum::<u64>() as f64 / pkts.len() as f64;
    assert_eq!(summary.aggregate_mean_delay_ns.unwrap().value, truth);
    assert_eq!(summary.cells.usable, summary.cells.nonempty);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Arbitrary bodies behind a valid header (a tiny sketch, so the flow log is reached)
    /// decode or fail with an error, never a panic; what decodes estimates without NaN.
    #[test]
    fn arbitrary_bodies_never_panic(
        cells in proptest::collection::vec(proptest::num::u8::ANY, 0..=64),
        count in 0u32..6,
        tail in proptest::collection::vec(proptest::num::u8::ANY, 0..1_000),
        flows in proptest::collection::vec((proptest::num::u8::ANY, proptest::collection::vec(proptest::num::u8::ANY, 13..45)), 0..5),
    ) {
        // 64 bytes of cells, a plausible flow count, then either random bytes or entries with
        // random versions and lengths.
        let cfg = LdsConfig { vlda_len: 2, flow_capacity: 4, ..LdsConfig::new(1, 4) };
        let mut bytes = Lds::new(&cfg).unwrap().encode()[..crate::synopsis::codec::HEADER_LEN].to_vec();
        bytes.extend_from_slice(&cells);
        if cells.len() == 64 {
            bytes.extend_from_slice(&count.to_le_bytes());
            bytes.extend_from_slice(&[0u8; 8 + 512]);
            for (version, rest) in &flows {
                bytes.push(if version % 3 == 0 { *version } else { 4 + 2 * (version % 2) });
                bytes.extend_from_slice(rest);
            }
        }
        bytes.extend_from_slice(&tail);
        if let Ok(d) = Lds::decode(&cfg, &bytes) {
            let other = Lds::new(&cfg).unwrap();
            for e in estimate_all(&d, &other, d.flows()).unwrap() {
                if let Ok(m) = e.mean_delay_ns {
                    proptest::prop_assert!(m.value.is_finite());
                }
            }
        }
    }
}

#[test]
fn located_updates_equal_trait_updates() {
    // Multi-bank sampling and per-row offsets, so located cells skip rows and differ per row.
    let cfg = LdsConfig { vlda_len: 5, sampling: vec![0.1, 0.5, 1.0, 1.0], ..LdsConfig::new(4, 997) };
    let (mut a, mut b) = (Lds::new(&cfg).unwrap(), Lds::new(&cfg).unwrap());
    let mut rng = sim::rng(11);
    let mut skipped_rows = 0;
    for i in 0..20_000u64 {
        let flow = FlowKey::new([10, 0, 0, (i % 50) as u8].into(), [10, 0, 1, 1].into(), 1000, 80, 6);
        let (flow_hash, identity, ts_ns) = (flow.hash(3), rng.random::<u64>(), 1_000 + i * 37);
        let obs = Observation {
            ts_ns,
            flow: &flow,
            flow_hash,
            identity,
            exchange: None,
            encap: crate::packet::Encap::NONE,
        };
        let at = b.locate(flow_hash, identity).unwrap();
        let expected: Vec<u32> =
            a.cells_of_packet(flow_hash, identity).map(|(r, c)| (r * 997) as u32 + c as u32).collect();
        assert_eq!(at.indices(), &expected[..]);
        skipped_rows += 4 - at.indices().len();
        a.update(&mut (), &obs);
        b.update_located(&at, &obs);
    }
    assert!(skipped_rows > 0);
    assert_eq!(a, b);
    let wide = LdsConfig { sampling: vec![1.0], ..LdsConfig::new(9, 16) };
    assert!(Lds::new(&wide).unwrap().locate(1, 2).is_none());
}

/// RowAgreement (issue 19): in a crowded sketch with k = 8, a mean confirmed across rows is the
/// mean of some of the flow's own packets, never another flow's. Flows sit 100 µs apart in delay
/// (within-flow spread 50 µs), so an estimate inside [min, max] of the flow's own delays is
/// uncontaminated; the paper's rule on the same sketches lets other flows' packets in.
#[test]
fn row_agreement_means_hold_only_the_flows_own_packets() {
    let pkts = stream(19, 400, 40_000);
    let cfg = LdsConfig {
        vlda_len: 8,
        estimator: EstimatorConfig {
            alpha: 0.0,
            strict_alpha: false,
            selection: SelectionRule::RowAgreement,
        },
        ..LdsConfig::new(4, 1500)
    };
    let (s, r) = run(&cfg, &pkts, |i| i % 97 == 0);
    let paper = Estimator::new(&s, &r)
        .unwrap()
        .with_options(EstimatorConfig { alpha: 0.0, ..EstimatorConfig::default() })
        .unwrap();
    let (mut confirmed, mut paper_outside) = (0, 0);
    for f in 0..400 {
        let own: Vec<u64> = pkts.iter().filter(|p| p.flow == f).map(|p| p.delay_ns).collect();
        let Some((&lo, &hi)) = own.iter().min().zip(own.iter().max()) else { continue };
        let inside = |m: f64| lo as f64 <= m && m <= hi as f64;
        let e = estimate_flow(&s, &r, &key(f), flow_hash(f)).unwrap();
        if e.cells.confirmed > 0 {
            confirmed += 1;
            let m = mean_of(&e);
            assert!(inside(m), "flow {f}: {m} outside its own [{lo}, {hi}]");
            assert!(e.mean_delay_ns.as_ref().unwrap().samples <= own.len() as u64);
            if let Ok(p) = &paper.flow(&key(f), flow_hash(f)).mean_delay_ns {
                paper_outside += usize::from(!inside(p.value));
            }
        }
    }
    assert!(confirmed > 100, "{confirmed} flows confirmed");
    assert!(paper_outside > 10, "the paper's rule is contaminated on {paper_outside} of them");
}
