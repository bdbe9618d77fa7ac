//! Deterministic oracles: hand-built differences, the paper's Fig. 2 and Fig. 4, Theorem 1,
//! the falsely pure bucket of P4/P31, and the values the estimate refuses.

use super::*;

#[test]
fn small_hand_built_difference_decodes_exactly() {
    // 30 packets at both points (delay 1,000 + i ns), two lost (only at A), one straggler
    // (only at B).
    let cfg = online(2, 32, 256);
    let mut a: Vec<Seen> = (1..=30).map(|i| seen(i * 7919, 1_000_000 + i * 10)).collect();
    let mut b: Vec<Seen> = (1..=30).map(|i| seen(i * 7919, 1_000_000 + i * 10 + 1_000 + i)).collect();
    a.push(seen(424_242, 1_000_500));
    a.push(seen(434_343, 1_000_600));
    b.push(seen(999_999, 1_000_001));
    let r = run(&cfg, &a, &b, &PeelGuards::default());
    let rec = &r.reconciliation;
    assert!(rec.complete, "{rec:?}");
    assert_eq!(sorted(rec.lost.clone()), vec![424_242, 434_343]);
    assert_eq!(rec.reordered, vec![999_999]);
    assert_eq!(rec.decoded, 3);
    assert_eq!(rec.residual_buckets, 0);
    assert_eq!((r.sender_packets, r.receiver_packets), (32, 31));
    // Σ delays = Σ (1,000 + i) for i = 1..30 = 30,000 + 465.
    assert_eq!(r.mean_ns.as_ref().unwrap().value, 30_465.0 / 30.0);
    assert_eq!(r.useful_delay_sum_ns, 2 * 30_465, "k = 2: every packet counted once per bank");
    assert_eq!(r.useful_weight, 60);
    assert_eq!(r.mean_ns.as_ref().unwrap().samples, 30);
}

#[test]
fn one_lost_one_reordered_in_the_same_bucket_separate() {
    // k = 1: the lost and the straggler share bucket 0 with equal counts — the LDA blind spot
    // — and must still come out on their own sides.
    let cfg = online(1, 1, 16);
    let r = run(&cfg, &[seen(5, 100), seen(6, 200)], &[seen(5, 150), seen(7, 120)], &PeelGuards::default());
    // Bucket holds 5⊕6 at A, 5⊕7 at B: the difference 6⊕7 with Δ = 0 is not pure, so k = 1
    // cannot decode it; the report says so instead of using the bucket.
    assert!(!r.reconciliation.complete);
    assert_eq!(r.reconciliation.residual_buckets, 1);
    assert_eq!(r.reconciliation.undecoded_lower_bound, 2);
    assert_eq!(r.mean_ns, Err(NoEstimate::NoUsableCells));
    // With a second bank and room, the same packets decode.
    let cfg = online(2, 64, 16);
    let r = run(&cfg, &[seen(5, 100), seen(6, 200)], &[seen(5, 150), seen(7, 120)], &PeelGuards::default());
    assert!(r.reconciliation.complete);
    assert_eq!((r.reconciliation.lost.clone(), r.reconciliation.reordered.clone()), (vec![6], vec![7]));
    assert_eq!(r.mean_ns.unwrap().value, 50.0);
}

#[test]
fn paper_fig2_lda_is_fooled_and_rda_is_exact() {
    // LDA on the figure's buckets: every pair has equal counters, so all are "useful":
    // μ̂ = (150 + 110 + 140 + 450 + 120) / 6 = 970/6 ≈ 161.67 (paper: 161).
    let (ta, tb, c) = ([270i64, 150, 250, 310, 330], [420i64, 260, 390, 760, 450], [2i64, 1, 1, 1, 1]);
    let lda: f64 = (0..5).map(|i| (tb[i] - ta[i]) as f64).sum::<f64>() / c.iter().sum::<i64>() as f64;
    assert_eq!(lda, 970.0 / 6.0);
    // RDA on the same packets lists P5 and P9 and returns the true mean over P1..P4, P6:
    // (70 + 80 + 110 + 140 + 120) / 5 = 104.
    let (a, b) = fig2();
    let r = run(&online(2, 8, 16), &a, &b, &PeelGuards::default());
    assert!(r.reconciliation.complete, "{:?}", r.reconciliation);
    assert_eq!(r.reconciliation.lost, vec![5]);
    assert_eq!(r.reconciliation.reordered, vec![9]);
    assert_eq!(r.mean_ns.unwrap().value, 104.0);
}

#[test]
fn paper_fig4_collapse_arithmetic() {
    // Fig. 4 (repaired sRDA): TS_A = (70, 400, 250, 400, 480), TS_B = (110, 560, 390, 650,
    // 710), Δ = (1, 2, 1, 2, 2). As one bank whose buckets are all useful, Algorithm 2
    // collapses (1,2) and (3,4) and leaves 5 unused — the paper's arithmetic:
    // μ̂ = 820/8 = 102.5; F = (120² + 110²)/6 = 4416.67; F − μ̂² = −6089.58 → σ̂ clamped to 0.
    let cfg = online(1, 5, 16);
    let (ta, tb, d) = ([70u64, 400, 250, 400, 480], [110u64, 560, 390, 650, 710], [1i64, 2, 1, 2, 2]);
    let mk = |ts: &[u64; 5]| {
        let buckets =
            (0..5).map(|i| Bucket { id_xor: 1000 + i as u64, ts_sum_ns: ts[i], count: d[i] }).collect();
        Banks::from_buckets(BankHash::new(&cfg, 5), buckets)
    };
    let g = estimator::aggregate(&mk(&ta), &mk(&tb));
    assert_eq!((g.delay_sum_ns, g.weight, g.pairs, g.collapsed_count), (820, 8, 2, 6));
    assert_eq!(g.sq_sum_ns2, 26_500.0);
    let (mean, sd, var, clamped) = estimator::estimates(&g, 1);
    assert_eq!(mean.unwrap().value, 102.5);
    assert!((var.unwrap() - (26_500.0 / 6.0 - 102.5 * 102.5)).abs() < 1e-9);
    assert!((var.unwrap() + 6089.58).abs() < 0.01);
    assert!(clamped);
    assert_eq!(sd.unwrap().value, 0.0);
}

#[test]
fn theorem1_damaged_buckets() {
    // Theorem 1 (spec §2.1): n_l lost packets in m buckets damage m(1 − e^{−n_l/m}) buckets on
    // average; m = 100, n_l = 50 → 39.35. Over 400 seeded placements the sample mean has sd
    // ≈ sqrt(Var/400) with Var ≤ m/4 → sd ≤ 0.25; allow 4 sd = 1.0.
    let cfg = online(1, 100, 16);
    let h = BankHash::new(&cfg, 100);
    let mut total = 0usize;
    for run in 0..400u64 {
        let hit: HashSet<usize> =
            (0..50u64).map(|i| h.index(0, crate::synopsis::hash::mix64(run * 1000 + i + 1))).collect();
        total += hit.len();
    }
    let mean = total as f64 / 400.0;
    let expect = 100.0 * (1.0 - (-0.5f64).exp());
    assert!((expect - 39.35).abs() < 0.01);
    assert!((mean - expect).abs() < 1.0, "{mean} vs {expect}");
}

/// Three ids a, b, c sharing bucket i of bank 0 and bucket j of bank 1, whose XOR x also
/// hashes to i in bank 0 but not to j in bank 1: with a, b lost and c a straggler, bucket
/// (0, i) of the difference holds (x, −1) and looks pure (spec P4/P31).
fn false_pure_triple(cfg: &RdaConfig, m: usize) -> (u64, u64, u64) {
    let h = BankHash::new(cfg, m);
    let mut groups: HashMap<(usize, usize), Vec<u64>> = HashMap::new();
    for n in 1..2_000_000u64 {
        let id = crate::synopsis::hash::mix64(n);
        let key = (h.index(0, id), h.index(1, id));
        let g = groups.entry(key).or_default();
        for x in 0..g.len() {
            for y in x + 1..g.len() {
                let (a, b, c) = (g[x], g[y], id);
                let v = a ^ b ^ c;
                if v != 0 && h.index(0, v) == key.0 && h.index(1, v) != key.1 {
                    return (a, b, c);
                }
            }
        }
        g.push(id);
    }
    unreachable!("a false-pure triple exists among 2M ids for m = {m}")
}

#[test]
fn falsely_pure_bucket_stays_bounded_and_is_reported() {
    let m = 64;
    let cfg = online(2, m as u32, 1024);
    let (a_id, b_id, c_id) = false_pure_triple(&cfg, m);
    let x = a_id ^ b_id ^ c_id;
    let shared: Vec<u64> = (1..=40u64).map(|i| i * 1_000_003).collect();
    let mut a: Vec<Seen> = shared.iter().map(|&id| seen(id, 10_000 + id % 977)).collect();
    let mut b: Vec<Seen> = shared.iter().map(|&id| seen(id, 10_500 + id % 977)).collect();
    a.extend([seen(a_id, 20_000), seen(b_id, 20_100)]);
    b.push(seen(c_id, 9_000));

    // Default guards: x is not in A's cache, so the "lost" candidate is refused at once.
    let r = run(&cfg, &a, &b, &PeelGuards::default());
    let rec = &r.reconciliation;
    assert!(rec.rejected_candidates >= 1, "{rec:?}");
    assert!(!rec.complete && !rec.iteration_cap_hit);
    assert!(rec.lost.is_empty() && rec.reordered.is_empty() && rec.unconfirmed.is_empty());
    assert_eq!(rec.residual_buckets, 2, "(0,i) and (1,j) keep a, b, c");
    assert!(r.mean_ns.is_ok(), "the other buckets still give a mean");

    // Only the extracted-set guard: x is taken once as lost, its echo (x, +1) in bank 1 is
    // refused as a repeat, and the repair refuses x because A never saw it.
    let only_set = PeelGuards { extracted_set: true, ..PeelGuards::unguarded() };
    let r = run(&cfg, &a, &b, &only_set);
    let rec = &r.reconciliation;
    assert!(rec.repeated_candidates >= 1, "{rec:?}");
    assert_eq!(rec.unconfirmed, vec![x]);
    assert!(!rec.complete && !rec.iteration_cap_hit);
    assert!(rec.pops < 10);

    // No guard but the cap (Algorithm 1 as printed): the ping-pong between (0,i) and bank 1
    // runs until the cap of 4·k·m + 16 pops and is reported.
    let r = run(&cfg, &a, &b, &PeelGuards::unguarded());
    let rec = &r.reconciliation;
    assert!(rec.iteration_cap_hit, "{rec:?}");
    assert_eq!(rec.pops, 4 * 2 * m as u64 + 16);
    assert!(!rec.complete);
    assert!(rec.lost.is_empty() && rec.reordered.is_empty(), "nothing bogus is repaired");
    assert!(rec.unconfirmed.iter().all(|&id| id == x));
    assert!(r.mean_ns.as_ref().is_ok_and(|e| e.value.is_finite()));
}

#[test]
fn mismatched_or_unbound_values_are_refused() {
    let a = point(&online(2, 64, 100), &[seen(1, 1)]);
    let b = point(&online(2, 64, 100).with_seed(5), &[seen(1, 2)]);
    let r = estimate(
        &a,
        &b,
        LocalCache { side: Side::Sender, cache: a.cache() },
        b.cache(),
        &PeelGuards::default(),
    );
    assert_eq!(r.mean_ns, Err(NoEstimate::ConfigMismatch));
    let late = RdaConfig::late_binding(2, 100);
    let (x, y) = (point(&late, &[seen(1, 1)]), point(&late, &[seen(1, 2)]));
    let r = estimate(
        &x,
        &y,
        LocalCache { side: Side::Sender, cache: x.cache() },
        y.cache(),
        &PeelGuards::default(),
    );
    assert!(matches!(r.mean_ns, Err(NoEstimate::Other { .. })));
    let r = reconcile(
        &Banks::new(&late, 10),
        &Banks::new(&late, 11),
        LocalCache { side: Side::Sender, cache: x.cache() },
        y.cache(),
        &PeelGuards::default(),
    );
    assert_eq!(r.mean_ns, Err(NoEstimate::ConfigMismatch));
    let empty = Rda::new(&online(2, 8, 8)).unwrap();
    let r = estimate(
        &empty,
        &empty,
        LocalCache { side: Side::Sender, cache: empty.cache() },
        empty.cache(),
        &PeelGuards::default(),
    );
    assert_eq!(r.mean_ns, Err(NoEstimate::NoPackets));
    assert!(Rda::new(&online(0, 8, 8)).is_err());
}
