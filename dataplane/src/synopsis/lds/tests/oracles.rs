//! Deterministic oracles of spec §11.6: one flow and collision-free flows estimated exactly,
//! both points mapping packets alike, one loss spoiling a cell per row, the digest catching a
//! swapped packet, and k = 1, α = 0, p = 1 equal to the simple delay sketch.

use super::*;

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
