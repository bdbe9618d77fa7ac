//! Flow enumeration: every recorded flow enumerated and sorted by packets, a reason for every
//! flow without a mean, and the summary's aggregate.

use super::*;

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

/// A flow's `packets` (also COLATE's P for it) is an upper bound that other flows' packets
/// inflate. 2 000 flows of two packets in 4 × 16 384 cells with windows of k = 8: about 1.8
/// other flows overlap a flow's window in each row, so the fewest packets any row's window
/// holds exceeds the flow's own for roughly half the flows. Per offset another flow's packet
/// must sit in all four rows to count: with 0.24 packets per cell that is (1 − e^(−0.24))⁴ ≈
/// 0.002 per offset, 1.8 % of the flows over eight offsets (binomial s.d. 0.3 %), so at least
/// 95 % get their exact count, and none less.
#[test]
fn flow_packets_count_other_flows_only_where_every_row_holds_them() {
    let mut rng = sim::rng(31);
    let pkts: Vec<Pkt> = (0..4_000u64)
        .map(|i| Pkt {
            flow: (i / 2) as u32,
            identity: rng.random(),
            send_ns: T0 + i * 1_000,
            delay_ns: 50_000,
        })
        .collect();
    let cfg = row_agreement(4, 16_384, 8);
    let (s, r) = run(&cfg, &pkts, |_| false);
    let mut exact = 0;
    for f in 0..2_000 {
        let e = estimate_flow(&s, &r, &key(f), flow_hash(f)).unwrap();
        assert!(e.packets >= 2, "flow {f}: {} packets counted, 2 sent", e.packets);
        exact += usize::from(e.packets == 2);
    }
    assert!(exact >= 1_900, "{exact} of 2 000 flows counted exactly");
}
