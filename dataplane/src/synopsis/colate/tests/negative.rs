//! Negative findings (spec §8) as tests.

use super::statistical::reseeded;
use super::*;

#[test]
fn paper_std_dev_fails_when_the_mean_dominates() {
    // Spec §8 P2: with μ ≈ 2.9σ the radicand Ŝ₂/p − μ̃² is negative about half the time and
    // few estimates land within 5 %; the count estimator does not depend on μ/σ.
    // Uniform [338, 1338]: σ = 1000/√12 = 288.7, μ = 838 = 2.9σ.
    let mut rng = sim::rng(10);
    let pk = flow(&mut rng, 77, 4_000, 1_000, 1_000_000, DelayModel::Uniform { low: 338.0, high: 1_338.0 });
    let (p, mu, sigma, _) = truth(&pk, 77);
    assert!((mu / sigma - 2.9).abs() < 0.1);
    let r = reseeded(&pk, p, 200);
    let clamped = r.iter().filter(|x| x.3).count() as f64 / 200.0;
    assert!(clamped > 0.25, "negative radicand in {clamped}");
    let paper_err = median(r.iter().map(|x| (x.1 / sigma - 1.0).abs()).collect());
    let count_err = median(r.iter().map(|x| (x.2 / sigma - 1.0).abs()).collect());
    // Count σ̂: relative SD ≈ 1/√(2·19) = 0.16, median |error| ≈ 0.11; the paper's ≈ 1.
    assert!(paper_err > 0.5, "paper median error {paper_err}");
    assert!(count_err < 0.2, "count median error {count_err}");
}

#[test]
fn points_with_different_seeds_or_shapes_are_refused() {
    let a = cfg(10_007, 20, false);
    for b in [
        ColateConfig { seed: 6, ..a.clone() },
        ColateConfig { counters: 10_009, ..a.clone() },
        ColateConfig { tick_ns: 1_000, ..a.clone() },
    ] {
        assert_ne!(a.fingerprint(), b.fingerprint());
        let mut vb = Colate::new(&b).unwrap();
        vb.update_raw(1, 2, 3);
        // The window encoding carries the fingerprint: the other point's decoder refuses it.
        assert!(matches!(Colate::decode(&a, &vb.encode()), Err(DecodeError::ConfigMismatch { .. })));
        // The query refuses to pair them.
        let (ea, eb) = (epoch(0, &Colate::new(&a).unwrap()), epoch(1, &vb));
        assert!(matches!(Segment::new(vec![&ea], vec![&eb]), Err(QueryError::ConfigMismatch { .. })));
        // The accumulator refuses a window of another config.
        let mut acc = EpochAccumulator::new(&a, 0, 0).unwrap();
        assert!(matches!(acc.push_window(0, &vb), Err(AccumulateError::ConfigMismatch { .. })));
    }
}

#[test]
fn why_they_are_refused_different_seeds_or_n_give_garbage() {
    // Spec §8 P3 (median relative error 284 for different seeds, 410 for n ± 4 at n = 240 007):
    // computed anyway with each point's own cells, Eq 3 is off by orders of magnitude, while the
    // identical set-up is accurate for the same flows.
    let tp = two_point(23, 1_500, 10, 60.0, 500);
    let a = cfg(100_003, 20, false);
    let same = median(mean_errors_raw(&tp, &a, &a, &[]));
    let seeds = median(mean_errors_raw(&tp, &a, &ColateConfig { seed: 99, ..a.clone() }, &[]));
    let n = median(mean_errors_raw(&tp, &a, &ColateConfig { counters: 100_019, ..a.clone() }, &[]));
    assert!(same < 0.05, "identical set-up: {same}");
    assert!(seeds > 10.0 && n > 10.0, "seeds {seeds}, n {n}");
}

#[test]
fn independent_j_destroys_the_mean() {
    // Spec §8 P1: the paper's random j (per point) leaves foreign noise at timestamp scale:
    // median relative error 10²–10³, against ≈ 0.006 with consistent j at n ≈ 240 k.
    let tp = two_point(24, 1_500, 10, 60.0, 500);
    let a = cfg(100_003, 20, false);
    let rnd = ColateConfig { j_mode: JMode::PerPointRandom, ..a.clone() };
    let consistent = median(mean_errors_raw(&tp, &a, &a, &[]));
    let random = median(mean_errors_raw(&tp, &rnd, &rnd, &[]));
    assert!(consistent < 0.05, "{consistent}");
    assert!(random > 10.0, "{random}");
}

#[test]
fn cross_traffic_at_one_point_only_breaks_the_mean() {
    // Spec §8 P3: +30 % traffic seen only at R (median relative error 136 at n = 240 007).
    let tp = two_point(25, 1_500, 10, 60.0, 500);
    let extra = two_point(26, 450, 10, 60.0, 0).pkts;
    let extra: Vec<Pkt> = extra.iter().map(|p| (p.0 ^ 0xabc, p.1 ^ 0xdef, p.2, p.3)).collect();
    let a = cfg(100_003, 20, false);
    let clean = median(mean_errors_raw(&tp, &a, &a, &[]));
    let cross = median(mean_errors_raw(&tp, &a, &a, &extra));
    assert!(clean < 0.05 && cross > 1.0, "clean {clean}, cross {cross}");
}

/// Builds an epoch of `point` from windows `range` of per-window vectors.
fn epoch_of(
    point: u32,
    seq: u64,
    windows: &[Colate],
    range: std::ops::RangeInclusive<usize>,
) -> CounterEpoch {
    let mut data = windows[*range.start()].clone();
    for w in &windows[*range.start() + 1..=*range.end()] {
        data.merge(w).unwrap();
    }
    CounterEpoch {
        point,
        seq,
        first_window: *range.start() as u64,
        last_window: *range.end() as u64,
        windows: (range.end() - range.start() + 1) as u64,
        flags: 0,
        data,
    }
}

#[test]
fn aligned_selection_fixes_epochs_closed_at_different_windows() {
    // S closed its epochs after windows 2 and 5, R after 3 and 5 (its sums crossed T later).
    // For a flow inside window 4, the paper's overlap rule takes S epoch 3..=5 and R epoch
    // 4..=5: window 3 is in S's union only, and its timestamps are noise nothing cancels.
    // The aligned selection takes 0..=5 on both sides.
    let c = cfg(100_003, 20, false);
    let mut rng = sim::rng(12);
    let win = 1_000_000u64;
    let mut pk = Vec::new();
    for f in 0..300u64 {
        let k = f % 6;
        pk.extend(flow(
            &mut rng,
            f,
            200,
            k * win + 1_000,
            win - 100_000,
            DelayModel::Weibull { shape: 0.8, mean: 500.0 },
        ));
    }
    let target = 4u64; // lives in window 4
    let mut ws: Vec<Colate> = (0..6).map(|_| Colate::new(&c).unwrap()).collect();
    let mut wr: Vec<Colate> = (0..6).map(|_| Colate::new(&c).unwrap()).collect();
    for &(f, id, ts, tr) in &pk {
        ws[(ts / win) as usize].update_raw(f, id, ts);
        wr[((tr / win) as usize).min(5)].update_raw(f, id, tr);
    }
    let s = [epoch_of(0, 0, &ws, 0..=2), epoch_of(0, 1, &ws, 3..=5)];
    let r = [epoch_of(1, 0, &wr, 0..=3), epoch_of(1, 1, &wr, 4..=5)];
    let (p, mu, _, _) = truth(&pk, target);
    let (t0, t1) = (4 * win, 5 * win - 1);
    let ms: Vec<EpochMeta> = s.iter().map(|e| e.meta()).collect();
    let mr: Vec<EpochMeta> = r.iter().map(|e| e.meta()).collect();
    let naive = Segment::new(
        epochs_overlapping(&ms, t0, t1).iter().map(|&i| &s[i]).collect(),
        epochs_overlapping(&mr, t0, t1).iter().map(|&i| &r[i]).collect(),
    )
    .unwrap()
    .query(target, p, &QueryOptions::default());
    let sel = select_aligned(&ms, &mr, t0, t1, 10_000).unwrap();
    assert!(sel.aligned && sel.windows == (0, 5));
    let aligned =
        Segment::new(sel.s.iter().map(|&i| &s[i]).collect(), sel.r.iter().map(|&i| &r[i]).collect())
            .unwrap()
            .query(target, p, &QueryOptions::default());
    let err = |rep: &FlowLatencyReport| (rep.mean_ns.as_ref().unwrap().value / mu - 1.0).abs();
    assert!(err(&aligned) < 0.1, "aligned {}", err(&aligned));
    assert!(err(&naive) > 10.0, "naive overlap {}", err(&naive));
}

#[test]
fn a_packet_seen_at_one_point_only_is_caught_by_the_counts() {
    // An in-flight packet at an epoch edge (recorded at R only) that lands in one of the flow's
    // cells shifts Eq 3 by ≈ u/p_f; with counts that cell's counts differ, the count mean leaves
    // it out and stays exact for a lone flow.
    let c = cfg(1_009, 20, true);
    let mut rng = sim::rng(13);
    let pk = flow(&mut rng, 5, 400, 50_000_000, 100_000, DelayModel::Constant { delay: 700.0 });
    let (mut s, mut r) = record(&c, &pk);
    // A foreign packet whose cell is one of flow 5's, seen only at R.
    let cells = s.cell_map().subvector(5);
    let (foreign, id) = (0..100_000u64)
        .flat_map(|f| (0..50u64).map(move |id| (f + 1_000, id)))
        .find(|&(f, id)| cells.contains(&s.cell_map().packet_cell(f, id, 0)))
        .unwrap();
    r.update_raw(foreign, id, 50_050_000);
    s.update_raw(1, 1, 0); // keep the totals comparable
    let (es, er) = (epoch(0, &s), epoch(1, &r));
    let rep = Segment::new(vec![&es], vec![&er]).unwrap().query(5, 400, &QueryOptions::default());
    assert!((rep.mean_ns.unwrap().value / 700.0 - 1.0).abs() > 10.0);
    assert_eq!(rep.diagnostics.mismatched_flow_cells, Some(1));
    assert_eq!(rep.usable_flow_cells, Some(19));
    assert!((rep.mean_counts_ns.unwrap().value - 700.0).abs() < 1e-6);
}

#[test]
fn a_swapped_cell_is_caught_by_the_floor() {
    // Issue 19: a packet of the flow lost between S and R, and a foreign packet that entered
    // the epoch in flight (recorded at R only, early in the epoch), in the same cell: the
    // cell's counts agree, but its Δ carries t_R(in) − t_S(lost) ≈ −5·10⁷ ticks. The count
    // mean used to take it as clean (mean ≈ 700 − 5·10⁷/380, far below zero); the floor test
    // (a clean cell's Δ is never below c·0) leaves it out, and the mean stays exact.
    let c = cfg(1_009, 20, true);
    let mut rng = sim::rng(19);
    let pk = flow(&mut rng, 5, 400, 50_000_000, 100_000, DelayModel::Constant { delay: 700.0 });
    let map = super::cells::CellMap::new(&c);
    let lost = pk[7];
    let cell = map.packet_cell(5, lost.1, 0);
    let (foreign, id) = (0..100_000u64)
        .flat_map(|f| (0..50u64).map(move |id| (f + 1_000, id)))
        .find(|&(f, id)| map.packet_cell(f, id, 0) == cell)
        .unwrap();
    let mut s = Colate::new(&c).unwrap();
    let mut r = Colate::new(&c).unwrap();
    for (i, &(f, pid, ts, tr)) in pk.iter().enumerate() {
        s.update_raw(f, pid, ts);
        if i != 7 {
            r.update_raw(f, pid, tr);
        }
    }
    r.update_raw(foreign, id, 10);
    let (es, er) = (epoch(0, &s), epoch(1, &r));
    let seg = Segment::new(vec![&es], vec![&er]).unwrap();
    let rep = seg.query(5, 400, &QueryOptions::default());
    assert_eq!(rep.diagnostics.mismatched_flow_cells, Some(0), "the counts agree in every cell");
    assert_eq!(rep.diagnostics.swapped_flow_cells, Some(1));
    assert_eq!(rep.usable_flow_cells, Some(19));
    let mean = rep.mean_counts_ns.clone().unwrap();
    assert!((mean.value - 700.0).abs() < 1e-6, "{mean:?}");
    // The segment has too few single-packet cells to derive the floor: 0 is assumed, and a
    // receiver's clock behind the sender's would put latencies below it too, so the flow is
    // not reliable. Stated by the operator (`latency_floor_ns = 0`), the floor is trusted.
    assert!(!rep.diagnostics.latency_floor.derived);
    let reason = rep.unreliable_reason.clone().unwrap_or_default();
    assert!(!rep.reliable && reason.contains("assumed latency floor"), "{reason}");
    let stated =
        Segment::with_floor(vec![&es], vec![&er], 0).unwrap().query(5, 400, &QueryOptions::default());
    assert_eq!(stated.mean_counts_ns, rep.mean_counts_ns);
    assert!(stated.reliable, "{:?}", stated.unreliable_reason);
    assert!(rep.paper_mean_suspect.is_some());
    // The paper's mean takes the swapped cell whole: far below zero.
    assert!(rep.mean_ns.unwrap().value < -10_000.0);
    // A floor far below the swap's −5·10⁷ (a clock offset that large) cannot tell it from a
    // latency: the cell is then used, and the mean is off by the swap (≈ −5·10⁷/400).
    let loose = Segment::with_floor(vec![&es], vec![&er], -100_000_000).unwrap().query(
        5,
        400,
        &QueryOptions::default(),
    );
    assert_eq!(loose.diagnostics.swapped_flow_cells, Some(0));
    assert!(loose.mean_counts_ns.unwrap().value < -100_000.0);
}

#[test]
fn a_flow_below_an_assumed_floor_is_not_reliable() {
    // A sparse segment (three packets, so no floor can be derived) whose receiver's clock runs
    // 150 µs behind: the flow's latencies −140, −140 and 1 360 µs (truth 360) read as two cells
    // below the assumed floor of 0. Leaving them out gave 1 360 µs with an interval of a few
    // µs, marked reliable (ndpi_anyconnect-vpn, 20-ms epochs: 4 106 standard errors off).
    let c = cfg(1_009, 20, true);
    let pkts: Vec<Pkt> = [(1, 1_000_000u64, -140i64), (2, 5_000_000, -140), (3, 9_000_000, 1_360)]
        .iter()
        .map(|&(id, ts, d)| (5, id, ts, ts.wrapping_add_signed(d * 1_000)))
        .collect();
    let (s, r) = epochs(&c, &pkts);
    let rep = Segment::new(vec![&s], vec![&r]).unwrap().query(5, 3, &QueryOptions::default());
    // (The two −140-µs packets may share a cell.)
    assert!(matches!(rep.diagnostics.swapped_flow_cells, Some(1 | 2)), "{:?}", rep.diagnostics);
    assert!(!rep.reliable, "{:?}", rep.mean_counts_ns);
    let reason = rep.unreliable_reason.unwrap_or_default();
    assert!(reason.contains("single-packet cells are too few"), "{reason}");
    // Eq 3 takes every cell: 360 µs.
    assert!((rep.mean_ns.unwrap().value - 360_000.0).abs() < 1_000.0);
    // The offset stated as the floor (`latency_floor_ns = -150000`): every cell is clean.
    let stated =
        Segment::with_floor(vec![&s], vec![&r], -150_000).unwrap().query(5, 3, &QueryOptions::default());
    assert_eq!(stated.diagnostics.swapped_flow_cells, Some(0));
    assert!((stated.mean_counts_ns.unwrap().value - 360_000.0).abs() < 1e-6);
}

#[test]
fn a_sparse_flow_whose_usable_cells_miss_most_of_its_packets_is_not_reliable() {
    // Four packets, three of them copies of one identity (a retransmission: one cell, over the
    // cap of p_f/m + 5·√(p_f/m) + k_cut) at 2 ms, one at 100 µs. The count mean rests on the
    // lone one: 100 µs against a truth of 1 525 µs, with a standard error of a fraction of a
    // tick (no other flow's spread to floor it), and was marked reliable.
    let c = cfg(1_009, 20, true);
    let map = super::cells::CellMap::new(&c);
    let other = (2..100u64).find(|&id| map.packet_cell(5, id, 0) != map.packet_cell(5, 1, 0)).unwrap();
    let pkts: Vec<Pkt> = [
        (1, 1_000_000u64, 2_000_000u64),
        (1, 2_000_000, 2_000_000),
        (1, 3_000_000, 2_000_000),
        (other, 4_000_000, 100_000),
    ]
    .iter()
    .map(|&(id, ts, d)| (5, id, ts, ts + d))
    .collect();
    let (s, r) = epochs(&c, &pkts);
    let rep = Segment::new(vec![&s], vec![&r]).unwrap().query(5, 4, &QueryOptions::default());
    let mean = rep.mean_counts_ns.clone().unwrap();
    assert!((mean.value - 100_000.0).abs() < 1.0, "{mean:?}");
    let reason = rep.unreliable_reason.unwrap_or_default();
    assert!(!rep.reliable && reason.contains("fewer than half"), "{reason}");
}

#[test]
fn the_count_mean_is_never_below_the_floor_and_says_so() {
    // A 10-packet flow with zero latency sharing a sparse vector with a slow flow: the foreign
    // correction (|J|·Δ̄ subtracted) pushes its estimate below 0; it is reported at the floor,
    // clipped, unreliable, with its interval clipped too.
    let c = cfg(1_009, 20, true);
    let mut rng = sim::rng(3);
    let mut pk = flow(&mut rng, 5, 10, 0, 1_000, DelayModel::Constant { delay: 0.0 });
    for g in 0..300u64 {
        pk.extend(flow(&mut rng, 100 + g, 3, 0, 1_000, DelayModel::Constant { delay: 50_000.0 }));
    }
    let (es, er) = epochs(&c, &pk);
    let rep = Segment::new(vec![&es], vec![&er]).unwrap().query(5, 10, &QueryOptions::default());
    let mean = rep.mean_counts_ns.unwrap();
    assert!(rep.mean_clipped, "{mean:?}");
    assert_eq!(mean.value, 0.0);
    assert!(mean.interval.is_some_and(|i| i.low >= 0.0 && i.high >= i.low));
    assert!(!rep.reliable && rep.unreliable_reason.is_some_and(|r| r.contains("floor")));
}

#[test]
fn the_derived_floor_follows_a_clock_offset_of_either_sign() {
    // Issue 19 (W12): the floor used to default to 0, so under a clock offset that makes the
    // latencies read negative every clean cell of a flow looked swapped and was dropped (the
    // demo broke on it). The default floor is now derived from the single-packet cells: at or
    // below the smallest latency the clocks show, never above 0.
    let c = cfg(20_011, 20, true);
    let model = DelayModel::Weibull { shape: 1.0, mean: 5_000.0 };
    for offset in [-30_000i64, 0, 30_000] {
        let mut rng = sim::rng(23);
        let mut pk = flow(&mut rng, 5, 400, 1_000_000, 100_000, model);
        for g in 0..2_000u64 {
            pk.extend(flow(&mut rng, 100 + g, 1, 1_000_000, 100_000, model));
        }
        // A 10 000-tick path plus the offset of R's clock.
        for p in &mut pk {
            p.3 = p.3.checked_add_signed(10_000 + offset).unwrap();
        }
        let smallest = pk.iter().map(|p| p.3 as i64 - p.2 as i64).min().unwrap();
        let (es, er) = epochs(&c, &pk);
        let seg = Segment::new(vec![&es], vec![&er]).unwrap();
        let used = seg.latency_floor();
        assert!(used.derived && used.cells >= FLOOR_MIN_CELLS, "{offset}: {used:?}");
        assert!(used.floor_ns <= smallest.min(0), "{offset}: {used:?} above {smallest}");
        // Within two of the latency's means of the smallest one (q₅ − (q₂₅ − q₅) of an
        // exponential is 0.05·5 000 − 0.23·5 000 below its minimum, 1 tick more).
        assert!(used.floor_ns >= smallest.min(0) - 2 * 5_000, "{offset}: {used:?} far below {smallest}");
        let rep = seg.query(5, 400, &QueryOptions::default());
        let (_, mu, _, _) = truth(&pk, 5);
        assert_eq!(rep.diagnostics.swapped_flow_cells, Some(0), "{offset}");
        assert_eq!(rep.diagnostics.latency_floor, used);
        let mean = rep.mean_counts_ns.unwrap();
        let se = rep.mean_counts_std_error_ns.unwrap();
        assert!((mean.value - mu).abs() <= 4.0 * se, "{offset}: {} vs {mu} (se {se})", mean.value);
        if offset < 0 {
            // The old default, 0, takes every cell of the flow for a swap: no mean.
            let old =
                Segment::with_floor(vec![&es], vec![&er], 0).unwrap().query(5, 400, &QueryOptions::default());
            assert_eq!(old.diagnostics.swapped_flow_cells, Some(20));
            assert!(old.mean_counts_ns.is_err());
        }
    }
    // Too few single-packet cells: the floor is 0, and says it was not derived.
    let pk = flow(&mut sim::rng(1), 5, 40, 1_000_000, 100_000, model);
    let (es, er) = epochs(&c, &pk);
    let used = Segment::new(vec![&es], vec![&er]).unwrap().latency_floor();
    assert_eq!((used.floor_ns, used.derived), (0, false));
}

#[test]
fn a_flow_whose_slow_packets_share_spoiled_cells_keeps_an_honest_error() {
    // A 30-µs flow with two 2-ms packets, each sharing its cell with a packet of the flow
    // that was lost: both cells drop out, and the 18 that remain hold only 30-µs packets, so
    // the flow's own cells show no spread at all. The mean of its surviving cells is ≈ 100 µs
    // below the truth; its standard error used to hold only the foreign noise and the ticks
    // (5.1 µs: the error was 20·se). The other flows' packets, from the same two modes, say
    // how much the left-out cells could hold (se 18.5 µs): the error stays within 10·se and
    // the flow is not reliable.
    let c = cfg(20_011, 20, true);
    let mut rng = sim::rng(29);
    let fast = DelayModel::Constant { delay: 30_000.0 };
    let mut pk = flow(&mut rng, 5, 40, 1_000_000, 100_000, fast);
    let map = super::cells::CellMap::new(&c);
    let mut by_cell: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (i, p) in pk.iter().enumerate() {
        by_cell.entry(map.packet_cell(p.0, p.1, 0)).or_default().push(i);
    }
    let shared: Vec<&Vec<usize>> = by_cell.values().filter(|v| v.len() >= 2).take(2).collect();
    assert_eq!(shared.len(), 2, "two cells with two packets of the flow");
    let (slow, lost): (Vec<usize>, Vec<usize>) = shared.iter().map(|v| (v[0], v[1])).unzip();
    for &i in &slow {
        pk[i].3 = pk[i].2 + 2_000_000;
    }
    let mix = DelayModel::Bimodal { low_mean: 30_000.0, high_mean: 2_000_000.0, p_high: 0.05 };
    for g in 0..300u64 {
        pk.extend(flow(&mut rng, 100 + g, 1, 1_000_000, 100_000, mix));
    }
    let mut s = Colate::new(&c).unwrap();
    let mut r = Colate::new(&c).unwrap();
    for (i, &(f, id, ts, tr)) in pk.iter().enumerate() {
        s.update_raw(f, id, ts);
        if !lost.contains(&i) {
            r.update_raw(f, id, tr);
        }
    }
    let received: Vec<Pkt> =
        pk.iter().enumerate().filter(|(i, _)| !lost.contains(i)).map(|(_, p)| *p).collect();
    let (p, mu, _, _) = truth(&received, 5);
    let (es, er) = (epoch(0, &s), epoch(1, &r));
    let rep = Segment::new(vec![&es], vec![&er]).unwrap().query(5, p, &QueryOptions::default());
    assert_eq!(rep.diagnostics.mismatched_flow_cells, Some(2));
    let mean = rep.mean_counts_ns.unwrap();
    let se = rep.mean_counts_std_error_ns.unwrap();
    let err = (mean.value - mu).abs();
    assert!(err > 50_000.0, "the survivors miss both slow packets: {} vs {mu}", mean.value);
    assert!(err <= 10.0 * se, "error {err} beyond 10·se = {}", 10.0 * se);
    assert!(!rep.reliable, "{mean:?} se {se}");
}

#[test]
fn a_one_packet_flow_among_foreign_packets_gets_its_mean() {
    // The flow's packets in its usable cells are counted net of the reference cells' mean
    // count K̄, so a lone packet reads as 1 − m·K̄ (here 1 − 20 · 0.01): with any foreign
    // packets in the vector that is below 1, and one-packet flows (a DNS query, a SYN) got "no
    // packets of the flow in its usable cells" (36 % of the flow records of a 5-s `wirelat
    // demo`). None of the foreign packets shares the flow's cells here, so only its own packet
    // is there.
    let c = cfg(20_011, 20, true);
    let map = super::cells::CellMap::new(&c);
    let mut rng = sim::rng(31);
    let mut pk = flow(&mut rng, 5, 1, 1_000_000, 100_000, DelayModel::Constant { delay: 700.0 });
    let cells = map.subvector(5);
    for g in 0..200u64 {
        let f = flow(&mut rng, 100 + g, 1, 1_000_000, 100_000, DelayModel::Constant { delay: 900.0 });
        pk.extend(f.into_iter().filter(|p| !cells.contains(&map.packet_cell(p.0, p.1, 0))));
    }
    let (es, er) = epochs(&c, &pk);
    let rep = Segment::new(vec![&es], vec![&er]).unwrap().query(5, 1, &QueryOptions::default());
    let mean = rep.mean_counts_ns.unwrap();
    assert_eq!(rep.usable_flow_cells, Some(20));
    let iv = mean.interval.unwrap();
    assert!(iv.low <= 700.0 && 700.0 <= iv.high, "{mean:?}");
}
