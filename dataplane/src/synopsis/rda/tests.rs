//! RDA tests: the spec's deterministic oracles (hand-built differences, the paper's Fig. 2
//! and Fig. 4, the endless-loop case of P31), bit-exact means against integer ground truth,
//! seeded statistical checks with tolerances from the spec's formulas, merge and encoding.

use super::StdDevEstimator;
use super::late::{self, run_local};
use super::sim::{self, Seen, Trace, TraceSpec};
use super::*;
use crate::sim::DelayModel;
use crate::synopsis::codec::DecodeError;
use crate::synopsis::estimate::NoEstimate;
use crate::synopsis::{Synopsis, SynopsisConfig};
use std::collections::{HashMap, HashSet};

fn online(k: u32, m: u32, cap: u64) -> RdaConfig {
    RdaConfig::online(k, m, cap)
}

fn point(cfg: &RdaConfig, seen: &[Seen]) -> Rda {
    let mut r = Rda::new(cfg).unwrap();
    for p in seen {
        r.update_raw(p.id, 0, p.ts_ns);
    }
    r
}

/// Online reconciliation decoded at the sender (the paper's roles).
fn run(cfg: &RdaConfig, sender: &[Seen], receiver: &[Seen], guards: &PeelGuards) -> RdaReport {
    let a = point(cfg, sender);
    let b = point(cfg, receiver);
    estimate(&a, &b, LocalCache { side: Side::Sender, cache: a.cache() }, b.cache(), guards)
}

fn seen(id: u64, ts_ns: u64) -> Seen {
    Seen { id, ts_ns }
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

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

/// The paper's Fig. 2 packets. A sees P1..P6, B sees P1..P4, P6 and the straggler P9; P5 is
/// lost. Bucket contents of the figure: (P1,P2), P3, P4, P5|P9, P6 with T_A = (270, 150, 250,
/// 310, 330), T_B = (420, 260, 390, 760, 450). The figure gives bucket sums only, so P1 and P2
/// are split as 120→190 and 150→230 (any split with these sums gives the same answers).
fn fig2() -> (Vec<Seen>, Vec<Seen>) {
    let a = vec![seen(1, 120), seen(2, 150), seen(3, 150), seen(4, 250), seen(5, 310), seen(6, 330)];
    let b = vec![seen(1, 190), seen(2, 230), seen(3, 260), seen(4, 390), seen(6, 450), seen(9, 760)];
    (a, b)
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

/// Generates, runs online at the sender and returns (trace, report).
fn online_trace(cfg: &RdaConfig, spec: &TraceSpec) -> (Trace, RdaReport) {
    let t = sim::generate(spec).unwrap();
    let r = run(cfg, &t.sender, &t.receiver, &PeelGuards::default());
    (t, r)
}

#[test]
fn mean_is_bit_exact_whenever_decoding_completes() {
    // k = 2, m = 1,024; d/m ≤ 0.39. Per run the chance of an incomplete decode is ≈ 1 −
    // sqrt(1 − (d/m)²) (spec §5.2): ≤ 0.5% for d ≤ 100, ≈ 8% at d = 400. Over 8 seeds × 4 d
    // we expect ≈ 0.7 incomplete runs; requiring ≥ 28 of 32 complete leaves > 4 sd of room
    // (binomial sd ≈ 0.8), while a broken decoder fails it.
    let cfg = online(2, 1024, 40_000);
    let mut complete = 0;
    for d in [0usize, 10, 100, 400] {
        for seed in 0..8u64 {
            let spec = TraceSpec { packets: 20_000, ..TraceSpec::paper(20_000, d, 100 + seed) };
            let (t, r) = online_trace(&cfg, &spec);
            let rec = &r.reconciliation;
            if rec.complete {
                complete += 1;
                assert_eq!(r.mean_ns.as_ref().unwrap().value, t.truth.mean_ns(), "d = {d}, seed {seed}");
                assert_eq!(r.useful_delay_sum_ns, 2 * t.truth.delay_sum_ns);
                assert_eq!(r.useful_weight, 2 * t.truth.packets);
                assert_eq!(sorted(rec.lost.clone()), sorted(t.lost.clone()));
                assert_eq!(sorted(rec.reordered.clone()), sorted(t.reordered.clone()));
            } else {
                // Partial decode: every listed id is a real difference id.
                let lost: HashSet<u64> = t.lost.iter().copied().collect();
                let reo: HashSet<u64> = t.reordered.iter().copied().collect();
                assert!(rec.lost.iter().all(|id| lost.contains(id)));
                assert!(rec.reordered.iter().all(|id| reo.contains(id)));
            }
        }
    }
    assert!(complete >= 28, "{complete}/32 complete");
}

#[test]
fn decoded_fraction_below_the_threshold() {
    // Decoding depends only on the difference set (shared packets cancel), so a small trace
    // suffices. k = 2, m = 500, d = 250 (d/m = 0.5): the expected number of undecoded ids per
    // run is (d/m)²/(1 − (d/m)²) = 0.33 (spec §5.2), i.e. a decoded fraction of 0.9987. Over
    // 20 runs require ≥ 0.99 (the mean would need ≈ 2.5 stuck ids per run to fail).
    // At d = 700 (d/m = 1.4, past the threshold d ≈ m) the 2-core of the random graph keeps
    // ≈ 26% of the ids (the 5,000-bucket table in BENCHMARKS.md: 0.74 at d/m = 1.4, sd over
    // 20 runs ≈ 0.01): require the fraction to have collapsed below 0.8.
    let cfg = online(2, 500, 4_000);
    for (d, check) in [(250usize, true), (700, false)] {
        let mut decoded = 0u64;
        for seed in 0..20u64 {
            let spec = TraceSpec::paper(1_000, d, 7_000 + seed);
            let (t, r) = online_trace(&cfg, &spec);
            decoded += r.reconciliation.decoded;
            assert_eq!(t.lost.len() + t.reordered.len(), d);
        }
        let frac = decoded as f64 / (20 * d) as f64;
        if check {
            assert!(frac >= 0.99, "d = {d}: {frac}");
        } else {
            assert!(frac < 0.8, "d = {d}: {frac}");
        }
    }
}

#[test]
fn standard_deviation_within_the_collapse_error() {
    // d = 0, k = 2, m = 2,048, n = 40,000, log-normal delays (σ_ln = 1, CV = sqrt(e − 1) =
    // 1.31). Spec lda.md §4.4: relative sd of σ̂ ≈ (1 + 1/CV²)/sqrt(2·B_eff); with ≈ 1,024
    // collapsed pairs per bank and one bank's worth of independence, B_eff ≈ 1,024 →
    // (1 + 0.58)/45.3 = 0.035. Averaging |error| over 6 seeds: E|err| ≈ 0.8·0.035 = 0.028,
    // sd of the average ≈ 0.6·0.035/sqrt(6) = 0.009; allow 0.028 + 4·0.009 ≈ 0.065.
    let cfg = online(2, 2048, 50_000);
    let mut sum_err = 0.0;
    for seed in 0..6u64 {
        let spec = TraceSpec {
            delay: DelayModel::LogNormal { mu: (30_000f64).ln(), sigma: 1.0 },
            ..TraceSpec::paper(40_000, 0, 500 + seed)
        };
        let (t, r) = online_trace(&cfg, &spec);
        assert!(r.reconciliation.complete);
        assert!(r.collapsed_pairs >= 2 * 1000);
        let sd = r.std_dev_ns.unwrap().value;
        sum_err += (sd - t.truth.std_dev_ns()).abs() / t.truth.std_dev_ns();
    }
    let mean_err = sum_err / 6.0;
    assert!(mean_err < 0.065, "mean |relative error| of σ̂ = {mean_err}");
}

#[test]
fn clock_offset_shifts_the_mean_exactly() {
    // Lemma 2 (mean part): a constant offset δ on B's clock shifts μ̂ by exactly δ.
    let cfg = online(2, 256, 4_000);
    let t = sim::generate(&TraceSpec::paper(2_000, 60, 42)).unwrap();
    let delta = 123_456_789i64;
    let shifted: Vec<Seen> =
        t.receiver.iter().map(|p| seen(p.id, p.ts_ns.wrapping_add(delta as u64))).collect();
    let r0 = run(&cfg, &t.sender, &t.receiver, &PeelGuards::default());
    let r1 = run(&cfg, &t.sender, &shifted, &PeelGuards::default());
    assert!(r0.reconciliation.complete && r1.reconciliation.complete);
    assert_eq!(r1.useful_delay_sum_ns, r0.useful_delay_sum_ns + delta as i128 * r0.useful_weight as i128);
    let (m0, m1) = (r0.mean_ns.unwrap().value, r1.mean_ns.unwrap().value);
    assert!((m1 - m0 - delta as f64).abs() <= 1e-6, "{m1} − {m0}");
}

#[test]
fn points_may_size_their_caches_differently() {
    let t = sim::generate(&TraceSpec::paper(3_000, 40, 21)).unwrap();
    let a = point(&online(2, 256, 3_000), &t.sender);
    let b = point(&online(2, 256, 9_000), &t.receiver);
    let shipped = Rda::decode(a.config(), &b.encode()).unwrap();
    let r = estimate(
        &a,
        &shipped,
        LocalCache { side: Side::Sender, cache: a.cache() },
        b.cache(),
        &PeelGuards::default(),
    );
    assert!(r.reconciliation.complete);
    assert_eq!(r.mean_ns.unwrap().value, t.truth.mean_ns());
}

#[test]
fn decoding_at_the_receiver_gives_the_same_answer() {
    let cfg = online(2, 512, 8_000);
    let t = sim::generate(&TraceSpec::paper(5_000, 200, 9)).unwrap();
    let a = point(&cfg, &t.sender);
    let b = point(&cfg, &t.receiver);
    let g = PeelGuards::default();
    let at_a = estimate(&a, &b, LocalCache { side: Side::Sender, cache: a.cache() }, b.cache(), &g);
    let at_b = estimate(&a, &b, LocalCache { side: Side::Receiver, cache: b.cache() }, a.cache(), &g);
    assert!(at_a.reconciliation.complete && at_b.reconciliation.complete);
    assert_eq!(at_a.mean_ns, at_b.mean_ns);
    assert_eq!(at_a.std_dev_ns, at_b.std_dev_ns);
    assert_eq!(sorted(at_a.reconciliation.lost.clone()), sorted(at_b.reconciliation.lost.clone()));
    assert_eq!(at_a.mean_ns.unwrap().value, t.truth.mean_ns());
}

#[test]
fn duplicates_are_excluded_with_every_copy_and_counted() {
    let cfg = online(2, 64, 64);
    let mut r = Rda::new(&cfg).unwrap();
    r.update_raw(10, 0, 500);
    r.update_raw(10, 0, 900); // a repeat: both copies leave the banks
    r.update_raw(10, 0, 300); // and later ones never enter
    r.update_raw(11, 0, 400);
    r.update_raw(0, 0, 450); // identity 0 is packet id 1
    let c = *r.counters();
    assert_eq!((c.duplicates, c.duplicate_ids, c.cached, c.excluded_packets()), (2, 1, 2, 3));
    assert_eq!(c.cached + c.duplicate_ids + c.duplicates + c.cache_full + c.sampled_out, c.seen);
    assert_eq!(r.cache().get(10), Some(EXCLUDED));
    assert_eq!(r.cache().get(1), Some(450));
    assert_eq!(r.banks().unwrap().packets(), 2);
    assert_eq!(r.banks().unwrap(), &banks_from_cache(&cfg, r.cache(), 64), "banks hold the cache exactly");
    // The excluded id survives an export (so a collector answering look-ups knows it).
    let back = wire::decode_cache(&cfg, &wire::encode_cache(&cfg, r.cache())).unwrap();
    assert_eq!((back.get(10), back.get(11), back.excluded(), back.len()), (Some(EXCLUDED), Some(400), 1, 3));
}

/// Identity repeats the way issue 18 found them: at the sender only (one copy lost, or a loop
/// upstream), at the receiver only (a loop between the points) and at both (a retransmission
/// seen at both), with the copies' delays far from the rest. The mean over the packets seen
/// once at each point must come out exact, the one-sided ids must be told apart from loss and
/// reordering, and the counts must be those of the construction.
#[test]
fn repeated_identities_leave_the_mean_and_the_loss_alone() {
    let cfg = online(2, 512, 4_096);
    let (mut a, mut b) = (Rda::new(&cfg).unwrap(), Rda::new(&cfg).unwrap());
    let (mut sum, mut n, mut lost) = (0i128, 0i128, 0u64);
    for i in 1..=2_000u64 {
        let id = mix64(i) | 1;
        let sent = 1_000_000 + i * 1_000;
        let delay = 40_000 + (mix64(i ^ 0x18) % 20_000);
        a.update_raw(id, 0, sent);
        match i % 100 {
            // Sender-side repeat, one copy delivered (much later: a retransmission).
            3 => {
                a.update_raw(id, 0, sent + 500_000);
                b.update_raw(id, 0, sent + 500_000 + delay);
            }
            // A loop between the points: the receiver sees the packet twice.
            5 => {
                b.update_raw(id, 0, sent + delay);
                b.update_raw(id, 0, sent + delay + 3_000_000);
            }
            // A retransmission seen at both points, the second copy delayed 10×.
            7 => {
                a.update_raw(id, 0, sent + 200_000);
                b.update_raw(id, 0, sent + delay);
                b.update_raw(id, 0, sent + 200_000 + 10 * delay);
            }
            // A true loss.
            11 => lost += 1,
            _ => {
                b.update_raw(id, 0, sent + delay);
                sum += delay as i128;
                n += 1;
            }
        }
    }
    for (decoder, local, remote) in [(Side::Sender, &a, &b), (Side::Receiver, &b, &a)] {
        let r = estimate(
            &a,
            &b,
            LocalCache { side: decoder, cache: local.cache() },
            remote.cache(),
            &PeelGuards::default(),
        );
        let rec = &r.reconciliation;
        assert!(rec.complete, "{rec:?}");
        assert_eq!(
            r.mean_ns.as_ref().unwrap().value,
            estimator::exact_ratio(sum, n),
            "decoded at {decoder:?}"
        );
        assert_eq!(rec.lost.len() as u64, lost, "only the true losses are lost");
        assert!(rec.reordered.is_empty());
        // One-sided: the 20 sender-side repeats (receiver has them) and the 20 loops (sender has them).
        assert_eq!(rec.excluded_duplicates.len(), 40);
        let d = r.duplicates;
        assert_eq!((d.sender_ids, d.sender_packets), (40, 80));
        assert_eq!((d.receiver_ids, d.receiver_packets), (40, 80));
    }
}

#[test]
fn full_cache_keeps_cache_and_banks_consistent() {
    let cfg = online(2, 64, 10);
    let mut r = Rda::new(&cfg).unwrap();
    for id in 1..=25u64 {
        r.update_raw(id, 0, id * 10);
    }
    assert_eq!(r.counters().cached, 10);
    assert_eq!(r.counters().cache_full, 15);
    assert_eq!(r.banks().unwrap().packets(), 10);
    assert_eq!(r.banks().unwrap(), &banks_from_cache(&cfg, r.cache(), 64));
}

#[test]
fn sampling_is_consistent_between_points() {
    // p = 0.25 by packet id: both points keep the same ids, so the difference stays the
    // lost/straggler ids that were sampled. The kept fraction is binomial: n = 20,000,
    // sd = sqrt(p(1 − p)/n) = 0.0031; allow 5 sd.
    let cfg = RdaConfig { sample_probability: 0.25, ..online(2, 512, 20_000) };
    let t = sim::generate(&TraceSpec::paper(20_000, 100, 77)).unwrap();
    let a = point(&cfg, &t.sender);
    let b = point(&cfg, &t.receiver);
    let kept = a.counters().cached as f64 / 20_000.0;
    assert!((kept - 0.25).abs() < 5.0 * 0.0031, "{kept}");
    assert_eq!(a.counters().sampled_out + a.counters().cached, a.counters().seen);
    let r = estimate(
        &a,
        &b,
        LocalCache { side: Side::Sender, cache: a.cache() },
        b.cache(),
        &PeelGuards::default(),
    );
    assert!(r.reconciliation.complete);
    let shared = a.counters().cached - r.reconciliation.lost.len() as u64;
    assert_eq!(b.counters().cached - r.reconciliation.reordered.len() as u64, shared, "same sampled subset");
    // Flow-keyed sampling keeps whole flows: identical flow hashes, one decision.
    let fcfg = RdaConfig { sample_probability: 0.5, sample_by: SampleKey::Flow, ..online(2, 64, 1_000) };
    let mut f = Rda::new(&fcfg).unwrap();
    for flow in 0..40u64 {
        for i in 0..10u64 {
            f.update_raw(flow * 1_000 + i + 1, flow, i);
        }
    }
    assert_eq!(f.counters().cached % 10, 0);
    assert!(f.counters().cached > 0 && f.counters().cached < 400);
}

/// Packets with in-shard and cross-shard duplicates, spread over `shards`.
fn shard_stream(seed: u64) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for i in 0..3_000u64 {
        let id = crate::synopsis::hash::mix64(seed ^ (i % 2_600 + 1)); // 400 repeats
        let ts = 1_000_000 + (i * 7919 + seed) % 100_000; // repeats are not in time order
        v.push((id, ts));
    }
    v
}

#[test]
fn merged_shards_equal_one_structure_fed_everything() {
    for cfg in [online(2, 128, 4_000), RdaConfig::late_binding(3, 4_000)] {
        for shards in 2..=4usize {
            let stream = shard_stream(shards as u64);
            let mut whole = Rda::new(&cfg).unwrap();
            let mut parts: Vec<Rda> = (0..shards).map(|_| Rda::new(&cfg).unwrap()).collect();
            for (i, &(id, ts)) in stream.iter().enumerate() {
                whole.update_raw(id, 0, ts);
                // Spread by position so that repeats of an id land on different shards.
                parts[i % shards].update_raw(id, 0, ts);
            }
            let mut merged = parts.remove(0);
            for p in &parts {
                merged.merge(p).unwrap();
            }
            assert_eq!(merged, whole, "{} shards, late = {}", shards, cfg.is_late_binding());
            assert_eq!(whole.counters().duplicates, 400);
        }
    }
    let mut a = Rda::new(&online(2, 128, 100)).unwrap();
    let b = Rda::new(&online(2, 129, 100)).unwrap();
    assert!(a.merge(&b).is_err());
}

#[test]
fn reset_returns_to_new() {
    let cfg = online(2, 32, 100);
    let fresh = Rda::new(&cfg).unwrap();
    let mut r = point(&cfg, &[seen(1, 2), seen(3, 4)]);
    assert_ne!(r, fresh);
    r.reset();
    assert_eq!(r, fresh);
    let mut r = point(&cfg, &[seen(1, 2)]);
    let taken = r.take_cache();
    assert_eq!(taken.get(1), Some(2));
    assert!(r.cache().is_empty());
}

#[test]
fn trait_update_equals_update_raw_and_prefetch_targets_the_table() {
    let cfg = online(2, 64, 1_000);
    let flow = crate::packet::FlowKey::default();
    let mut via_trait = Rda::new(&cfg).unwrap();
    let mut raw = Rda::new(&cfg).unwrap();
    for i in 0..100u64 {
        let o = crate::synopsis::Observation {
            ts_ns: 1_000 + i,
            flow: &flow,
            flow_hash: 0,
            identity: i % 70,
            exchange: None,
            encap: crate::packet::Encap::NONE,
        };
        via_trait.update(&mut (), &o);
        raw.update_raw(i % 70, 0, 1_000 + i);
    }
    assert_eq!(via_trait, raw);
    let base = raw.prefetch_target(0) as usize;
    for id in 1..50u64 {
        let p = raw.prefetch_target(id) as usize;
        assert!(p.abs_diff(base) < raw.cache().table_bytes(), "points into the slot table");
        assert_eq!(p % 16, base % 16);
    }
}

#[test]
fn late_binding_sizes_from_minhash_and_decodes() {
    // n = 20,000, d = 600: the union's 4,096 smallest hashes hold X ≈ 4,096 · d/|S_A ∪ S_B| =
    // 4,096 · 600/20,300 ≈ 121 values seen at one point only; X is binomial (sd ≈ 11, i.e.
    // 9%), and d̂ moves with it: allow 4 sd, d̂ ∈ [380, 820]. Then m = max(1,024, ⌈3·d̂⌉).
    let cfg = RdaConfig::late_binding(2, 40_000);
    let t = sim::generate(&TraceSpec::paper(20_000, 600, 3)).unwrap();
    let a = point(&cfg, &t.sender);
    let b = point(&cfg, &t.receiver);
    assert!(a.banks().is_none(), "late binding keeps only the cache during the epoch");
    let out = run_local(&a, &b, Side::Sender, &PeelGuards::default());
    let d_hat = out.sizing.estimate.difference;
    assert!((380.0..820.0).contains(&d_hat), "{d_hat}");
    assert_eq!(out.sizing.buckets_per_bank, sizing::buckets_for(&cfg, d_hat));
    assert!(out.report.reconciliation.complete, "{:?}", out.attempts);
    assert!(out.attempts.len() <= 3);
    assert_eq!(out.report.mean_ns.unwrap().value, t.truth.mean_ns());
}

#[test]
fn late_binding_retries_with_doubled_m() {
    // m_min = 32 and a 16-value signature on 20,000 packets: d̂ is 0 or tiny, so the first
    // m is far below d = 300; each retry doubles m until the decode completes.
    let binding = Binding::LateBinding {
        min_buckets_per_bank: 32,
        max_buckets_per_bank: 1 << 16,
        slack: 0.0,
        max_attempts: 8,
        signature_len: 16,
    };
    let cfg = RdaConfig { binding, ..RdaConfig::late_binding(2, 40_000) };
    let t =
        sim::generate(&TraceSpec { lost: 150, reordered: 150, ..TraceSpec::paper(20_000, 300, 4) }).unwrap();
    let a = point(&cfg, &t.sender);
    let b = point(&cfg, &t.receiver);
    let out = run_local(&a, &b, Side::Sender, &PeelGuards::default());
    assert!(out.attempts.len() >= 2, "{:?}", out.attempts);
    for w in out.attempts.windows(2) {
        assert_eq!(w[1].buckets_per_bank, 2 * w[0].buckets_per_bank);
        assert!(!w[0].complete);
    }
    assert!(out.report.reconciliation.complete);
    assert_eq!(out.report.mean_ns.unwrap().value, t.truth.mean_ns());
    // With a single attempt the failure is reported, not hidden.
    let one = Binding::LateBinding {
        min_buckets_per_bank: 32,
        max_buckets_per_bank: 1 << 16,
        slack: 0.0,
        max_attempts: 1,
        signature_len: 16,
    };
    let cfg1 = RdaConfig { binding: one, ..cfg.clone() };
    let (a1, b1) = (point(&cfg1, &t.sender), point(&cfg1, &t.receiver));
    let out1 = run_local(&a1, &b1, Side::Sender, &PeelGuards::default());
    assert_eq!(out1.attempts.len(), 1);
    assert!(!out1.report.reconciliation.complete);
    assert!(out1.report.reconciliation.undecoded_lower_bound > 0);
    // The chosen m follows the signature estimate.
    let s = late::choose_buckets(&cfg, &a.signature(), &b.signature());
    assert_eq!(s.buckets_per_bank, out.attempts[0].buckets_per_bank);
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

#[test]
fn report_serialises_to_json() {
    let (a, b) = fig2();
    let r = run(&online(2, 8, 16), &a, &b, &PeelGuards::default());
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["mean_ns"]["Ok"]["value"], 104.0);
    assert_eq!(j["reconciliation"]["lost"][0], 5);
    assert_eq!(j["useful_delay_sum_ns"], 1040);
}

// ---- encodings -------------------------------------------------------------------------

fn sample_points() -> Vec<Rda> {
    let t = sim::generate(&TraceSpec::paper(300, 20, 11)).unwrap();
    vec![point(&online(2, 16, 400), &t.sender), point(&RdaConfig::late_binding(2, 400), &t.receiver)]
}

#[test]
fn epoch_value_round_trips_without_its_cache() {
    for p in sample_points() {
        let bytes = p.encode();
        let d = Rda::decode(p.config(), &bytes).unwrap();
        assert_eq!(d.banks(), p.banks());
        assert_eq!(d.counters(), p.counters());
        assert!(d.cache().is_empty(), "the cache is not shipped");
        if p.config().is_late_binding() {
            assert_eq!(d.signature(), p.signature());
        }
        assert_eq!(d.encode(), bytes, "re-encoding is identical");
        if let Some(b) = p.banks() {
            assert_eq!(bytes.len(), 10 + 1 + 48 + b.bytes());
        }
    }
}

#[test]
fn every_truncation_and_trailing_byte_is_refused() {
    for p in sample_points() {
        let cfg = p.config().clone();
        let bytes = p.encode();
        for n in 0..bytes.len() {
            assert!(Rda::decode(&cfg, &bytes[..n]).is_err(), "prefix {n} of {}", bytes.len());
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(Rda::decode(&cfg, &long).unwrap_err(), DecodeError::TrailingBytes { extra: 1 });
        let other = cfg.clone().with_seed(99);
        assert!(matches!(Rda::decode(&other, &bytes), Err(DecodeError::ConfigMismatch { .. })));
        let mut bad_part = bytes.clone();
        bad_part[10] = 7;
        assert!(matches!(Rda::decode(&cfg, &bad_part), Err(DecodeError::Invalid { field: "part", .. })));
    }
}

#[test]
fn signature_must_be_ascending_and_fit_the_config() {
    let p = &sample_points()[1];
    let bytes = p.encode();
    // header 10, part 1, counters 48, set_size 8, len 4, then the values.
    let first = 10 + 1 + 48 + 8 + 4;
    let mut swapped = bytes.clone();
    swapped[first..first + 16].rotate_left(8);
    assert!(matches!(
        Rda::decode(p.config(), &swapped),
        Err(DecodeError::Invalid { field: "signature.mins", .. })
    ));
    let mut long = bytes.clone();
    long[first - 4..first].copy_from_slice(&100_000u32.to_le_bytes());
    assert!(matches!(
        Rda::decode(p.config(), &long),
        Err(DecodeError::Invalid { field: "signature.len", .. })
    ));
}

#[test]
fn bound_banks_and_cache_exports_round_trip() {
    let cfg = RdaConfig::late_binding(2, 400);
    let t = sim::generate(&TraceSpec::paper(300, 20, 12)).unwrap();
    let p = point(&cfg, &t.sender);
    let banks = p.bind(1_500);
    let bytes = wire::encode_banks(&cfg, &banks);
    assert_eq!(wire::decode_banks(&cfg, &bytes).unwrap(), banks);
    for n in (0..bytes.len()).step_by(7) {
        assert!(wire::decode_banks(&cfg, &bytes[..n]).is_err());
    }
    let tiny = p.bind(16); // below m_min = 1,024
    assert!(matches!(
        wire::decode_banks(&cfg, &wire::encode_banks(&cfg, &tiny)),
        Err(DecodeError::Invalid { field: "buckets_per_bank", .. })
    ));
    assert!(wire::decode_banks(&cfg, &p.encode()).is_err(), "an epoch value is not a banks message");

    let exp = wire::encode_cache(&cfg, p.cache());
    let back = wire::decode_cache(&cfg, &exp).unwrap();
    assert_eq!(back.len(), p.cache().len());
    assert!(p.cache().iter().all(|(id, ts)| back.get(id) == Some(ts)));
    for n in 0..exp.len() {
        assert!(wire::decode_cache(&cfg, &exp[..n]).is_err());
    }
    let small = RdaConfig { cache_capacity: 10, ..cfg.clone() };
    assert!(wire::decode_cache(&small, &wire::encode_cache(&small, p.cache())).is_err(), "over capacity");
    let mut dup = exp.clone();
    let e0 = 10 + 1 + 8;
    let first: [u8; 8] = dup[e0..e0 + 8].try_into().unwrap();
    dup[e0 + 16..e0 + 24].copy_from_slice(&first);
    assert!(matches!(wire::decode_cache(&cfg, &dup), Err(DecodeError::Invalid { field: "cache.id", .. })));
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn configs() -> [RdaConfig; 2] {
        [online(2, 4, 50), RdaConfig::late_binding(2, 50)]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        #[test]
        fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400), raw in any::<bool>()) {
            for cfg in configs() {
                // Either fully random, or a valid header followed by random bytes (reaches
                // the body parsers).
                let mut bytes = Vec::new();
                if !raw {
                    let mut w = crate::synopsis::codec::Writer::new(&mut bytes);
                    crate::synopsis::codec::write_header(&mut w, crate::synopsis::SynopsisKind::Rda, 1, cfg.fingerprint());
                }
                bytes.extend_from_slice(&body);
                if let Ok(v) = Rda::decode(&cfg, &bytes) {
                    // A decoded late-binding value feeds the sizing decision.
                    let s = late::choose_buckets(&cfg, &v.signature(), &v.signature());
                    prop_assert!(s.buckets_per_bank >= 1);
                }
                let _ = wire::decode_banks(&cfg, &bytes);
                let _ = wire::decode_cache(&cfg, &bytes);
            }
        }

        #[test]
        fn random_buckets_never_panic_the_estimator(
            a in proptest::collection::vec(any::<(u64, u64, i64)>(), 8),
            b in proptest::collection::vec(any::<(u64, u64, i64)>(), 8),
        ) {
            // Arbitrary (even impossible) bucket contents from a peer: reconcile must end and
            // never return NaN.
            let cfg = online(2, 4, 50);
            let mk = |v: &Vec<(u64, u64, i64)>| {
                Banks::from_buckets(
                    BankHash::new(&cfg, 4),
                    v.iter().map(|&(id_xor, ts_sum_ns, count)| Bucket { id_xor, ts_sum_ns, count }).collect(),
                )
            };
            let cache = TimestampCache::new(4, 1);
            let r = reconcile(&mk(&a), &mk(&b), LocalCache { side: Side::Sender, cache: &cache }, &cache, &PeelGuards::unguarded());
            if let Ok(e) = &r.mean_ns { prop_assert!(e.value.is_finite()); }
            if let Ok(e) = &r.std_dev_ns { prop_assert!(e.value.is_finite()); }
            prop_assert!(r.reconciliation.pops <= 4 * 2 * 4 + 16);
        }
    }
}

#[test]
fn sizing_from_extreme_wire_signatures_does_not_panic() {
    let huge = MinHashSignature { set_size: u64::MAX, mins: vec![1, 2, 3] };
    let other = MinHashSignature { set_size: u64::MAX, mins: vec![4, 5, 6] };
    let cfg = RdaConfig::late_binding(2, 100);
    let s = late::choose_buckets(&cfg, &huge, &other);
    assert_eq!(s.buckets_per_bank, 1 << 20, "capped at m_max");
}

#[test]
fn merging_decoded_values_with_extreme_counters_does_not_panic() {
    // Counters come from the wire in a decoded value; merging two must saturate, not overflow.
    let cfg = online(2, 4, 8);
    let p = point(&cfg, &[seen(1, 1)]);
    let mut bytes = p.encode();
    for b in &mut bytes[11..51] {
        *b = 0xff;
    }
    let mut x = Rda::decode(&cfg, &bytes).unwrap();
    let y = x.clone();
    x.merge(&y).unwrap();
    assert_eq!(x.counters().seen, u64::MAX);
}

#[test]
fn a_collector_with_shipped_values_and_exported_caches_gives_the_same_estimate() {
    // Everything crosses the "network" as bytes: both epoch values and both cache exports.
    for cfg in [online(2, 512, 8_000), RdaConfig::late_binding(2, 8_000)] {
        let t = sim::generate(&TraceSpec::paper(5_000, 300, 31)).unwrap();
        let (a, b) = (point(&cfg, &t.sender), point(&cfg, &t.receiver));
        let (a_bytes, b_bytes) = (a.encode(), b.encode());
        let (ca, cb) = (wire::encode_cache(&cfg, a.cache()), wire::encode_cache(&cfg, b.cache()));
        let (a2, b2) = (Rda::decode(&cfg, &a_bytes).unwrap(), Rda::decode(&cfg, &b_bytes).unwrap());
        let (ca2, cb2) = (wire::decode_cache(&cfg, &ca).unwrap(), wire::decode_cache(&cfg, &cb).unwrap());
        let g = PeelGuards::default();
        let (here, there) = if cfg.is_late_binding() {
            let s = late::choose_buckets(&cfg, &a2.signature(), &b2.signature());
            assert_eq!(s, late::choose_buckets(&cfg, &a.signature(), &b.signature()));
            let m = s.buckets_per_bank;
            let ship = |c: &TimestampCache| {
                wire::decode_banks(&cfg, &wire::encode_banks(&cfg, &banks_from_cache(&cfg, c, m))).unwrap()
            };
            let here =
                reconcile(&ship(&ca2), &ship(&cb2), LocalCache { side: Side::Sender, cache: &ca2 }, &cb2, &g);
            let there = reconcile(
                &a.bind(m),
                &b.bind(m),
                LocalCache { side: Side::Sender, cache: a.cache() },
                b.cache(),
                &g,
            );
            (here, there)
        } else {
            let here = estimate(&a2, &b2, LocalCache { side: Side::Sender, cache: &ca2 }, &cb2, &g);
            let there = estimate(&a, &b, LocalCache { side: Side::Sender, cache: a.cache() }, b.cache(), &g);
            (here, there)
        };
        assert!(here.reconciliation.complete, "late = {}", cfg.is_late_binding());
        assert_eq!(here, there);
        assert_eq!(here.mean_ns.unwrap().value, t.truth.mean_ns());
    }
}

/// The worker's path (log in the shard, filed by the control thread's merge into an empty
/// accumulator) gives exactly what the direct path gives: same banks, cache and counters, with
/// repeated ids (earlier and later copies, on one shard and across shards), sampling, and more
/// packets than the capacity.
#[test]
fn logged_shards_merged_equal_the_direct_path() {
    let mut rng = 0x1234_5678_u64;
    let mut next = || {
        rng = mix64(rng.wrapping_add(1));
        rng
    };
    for cfg in [
        online(3, 64, 10_000),
        online(2, 32, 150),
        RdaConfig { sample_probability: 0.5, ..online(2, 64, 10_000) },
        RdaConfig::late_binding(2, 10_000),
        RdaConfig::late_binding(2, 120),
    ] {
        // 400 packets, a fifth of them repeats of an earlier id with a random (earlier or
        // later) timestamp; ids and timestamps random.
        let mut packets: Vec<(u64, u64)> = Vec::new();
        for i in 0..400u64 {
            let ts = 1_000_000 + (next() % 100_000);
            let id = if i > 10 && next() % 5 == 0 { packets[(next() % i) as usize].0 } else { next() };
            packets.push((id, ts));
        }
        let mut direct = Rda::new(&cfg).unwrap();
        for &(id, ts) in &packets {
            direct.update_raw(id, id ^ 7, ts);
        }
        for shards in [1usize, 3] {
            let mut workers: Vec<Rda> = (0..shards).map(|_| Rda::new(&cfg).unwrap()).collect();
            for (i, &(id, ts)) in packets.iter().enumerate() {
                // Steered by packet order, so one id can land on two shards.
                workers[i % shards].update_logged(id, id ^ 7, ts);
            }
            let mut merged = Rda::new(&cfg).unwrap();
            for w in &workers {
                assert_eq!(w.cache().len(), 0, "a worker never fills its cache");
                merged.merge(w).unwrap();
            }
            assert_eq!(merged.logged(), 0);
            assert_eq!(merged.counters().seen, direct.counters().seen);
            assert_eq!(merged.counters().sampled_out, direct.counters().sampled_out);
            if packets.len() as u64 <= cfg.cache_capacity {
                // Below the capacity the two paths agree on everything.
                assert_eq!(merged, direct, "{cfg:?}, {shards} shard(s)");
                assert_eq!(merged.encode(), direct.encode());
            } else {
                // Past it, which packets are left out depends on the order they are filed in
                // (a log also counts repeats); the banks still hold exactly the cached ids
                // seen once.
                let mut rebuilt = Rda::new(&cfg).unwrap();
                for (id, ts) in merged.cache().iter_measured() {
                    rebuilt.update_raw(id, id ^ 7, ts);
                }
                assert_eq!(rebuilt.banks(), merged.banks(), "{cfg:?}, {shards} shard(s)");
                let c = merged.counters();
                assert_eq!(
                    c.cached + c.duplicate_ids + c.duplicates + c.cache_full + c.sampled_out,
                    c.seen,
                    "{c:?}"
                );
                assert!(c.cache_full > 0);
            }
        }
    }
}

/// A shard settled on its own (the control thread's `take_cache` path) equals the direct path.
#[test]
fn a_settled_shard_equals_the_direct_path() {
    let cfg = online(2, 128, 1_000);
    let mut direct = Rda::new(&cfg).unwrap();
    let mut logged = Rda::new(&cfg).unwrap();
    for i in 0..300u64 {
        let (id, ts) = (mix64(i % 250) | 1, 5_000 - i);
        direct.update_raw(id, 0, ts);
        logged.update_logged(id, 0, ts);
    }
    assert_eq!(logged.logged(), 300);
    logged.settle();
    assert_eq!(logged.logged(), 0);
    assert_eq!(logged, direct);
    assert_eq!(logged.counters().duplicates, 50);
    let mut cleared = logged.clone();
    cleared.reset();
    assert_eq!(cleared.logged(), 0);
    assert!(cleared.cache().is_empty());
}

#[test]
fn bucket_moment_std_dev_holds_when_the_mean_dwarfs_it() {
    // Uniform delays on [40, 60) µs: μ/σ ≈ 8.7. The collapsed estimator forms F − μ̂² with F
    // ≈ μ²: an error of ε in F is ε·(μ/σ)² ≈ 75ε in σ̂², so it is clamped or far off. The
    // bucket moment needs only the exact μ: with ≈ 2 × 1,700 useful buckets of ≈ 6 packets,
    // σ̂²'s relative sd is ≈ sqrt((κ − 1)/B) with κ = 1.8 for a uniform delay, ≈ 0.022, so σ̂'s
    // ≈ 0.011; its 98 % interval (conservative multiplier 2.80, both banks counted as one)
    // must cover the truth in each of 6 seeds and be narrower than ±10 %.
    let cfg = online(2, 2048, 50_000);
    let mut collapsed_worst = 0.0f64;
    for seed in 0..6u64 {
        let spec = TraceSpec {
            delay: DelayModel::Uniform { low: 40_000.0, high: 60_000.0 },
            ..TraceSpec::paper(12_000, 40, 900 + seed)
        };
        let (t, r) = online_trace(&cfg, &spec);
        assert!(r.reconciliation.complete);
        let truth = t.truth.std_dev_ns();
        let sd = r.std_dev_ns.clone().unwrap();
        assert_eq!(r.std_dev_ns, r.bucket_moment_std_dev_ns, "the bucket moment is the default");
        let iv = sd.interval.unwrap();
        assert!(iv.low <= truth && truth <= iv.high, "seed {seed}: σ = {truth} outside {iv:?}");
        assert!(iv.high - iv.low < 0.2 * truth, "seed {seed}: {iv:?}");
        assert!((sd.value - truth).abs() < 0.05 * truth, "seed {seed}: {} vs {truth}", sd.value);
        let c = r.collapsed_std_dev_ns.clone().unwrap().value;
        collapsed_worst = collapsed_worst.max((c - truth).abs() / truth);
        // The paper's estimator is still there for those who ask for it.
        let mut paper = r.clone();
        paper.choose_std_dev(StdDevEstimator::Collapsed);
        assert_eq!(paper.std_dev_ns, r.collapsed_std_dev_ns);
    }
    assert!(collapsed_worst > 0.1, "the collapsed estimator should suffer here: {collapsed_worst}");
}

#[test]
fn incomplete_decodes_bound_the_loss_instead_of_counting_part_of_it() {
    // d = 700 differing ids in m = 500 buckets per bank: past the threshold, most runs leave
    // ids undecoded. The bounds must hold the true lost count in every run, and be a single
    // value exactly when the decode completed.
    let cfg = online(2, 500, 4_000);
    let mut incomplete = 0;
    for seed in 0..12u64 {
        let spec = TraceSpec::paper(3_000, if seed % 3 == 0 { 100 } else { 700 }, 4_400 + seed);
        let (t, r) = online_trace(&cfg, &spec);
        let lost = t.lost.len() as u64;
        let (low, high) = r.lost_bounds;
        assert!(low <= lost && lost <= high, "seed {seed}: {lost} outside [{low}, {high}]");
        if r.reconciliation.complete {
            assert_eq!((low, high), (lost, lost));
        } else {
            incomplete += 1;
            assert!((r.reconciliation.lost.len() as u64) < lost, "a partial count is short");
        }
    }
    assert!(incomplete >= 4, "{incomplete}");
}
