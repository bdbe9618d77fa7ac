//! What a cell holds: Count-Min flow sizes never underestimate, weights scale sums and counts,
//! overflowed counts are never used, wrapping sums give exact deltas, empty cells give no NaN.

use super::*;

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
