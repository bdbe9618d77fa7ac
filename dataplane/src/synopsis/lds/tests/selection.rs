//! Cell selection: the estimate is the weighted average over the cells each rule selects
//! (checked against a brute-force recomputation), strict α at the boundary, and RowAgreement
//! keeping other flows' packets out.

use super::*;

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

/// RowAgreement (issue 19): in a crowded sketch with k = 8, a mean confirmed across rows is the
/// mean of some of the flow's own packets, never another flow's. Flows sit 100 µs apart in delay
/// (within-flow spread 50 µs), so an estimate inside [min, max] of the flow's own delays is
/// uncontaminated; the paper's rule on the same sketches lets other flows' packets in.
#[test]
fn row_agreement_means_hold_only_the_flows_own_packets() {
    let pkts = stream(19, 400, 40_000);
    let cfg = row_agreement(4, 1500, 8);
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

/// Width and vLDA length of [`narrow_sketch`].
const NARROW_W: u64 = 64;
const NARROW_K: u64 = 4;

/// Row agreement over 4 rows of [`NARROW_W`] cells with vLDAs of [`NARROW_K`]: narrow enough
/// that a search over flow indices finds flows at any chosen shift from flow 0. Also returns
/// `shift(row, g)`: where flow g's window starts in `row`, counted from flow 0's.
fn narrow_sketch() -> (LdsConfig, impl Fn(usize, u32) -> u64) {
    let cfg = row_agreement(4, NARROW_W as u32, NARROW_K as u32);
    let probe = Lds::new(&cfg).unwrap();
    let shift = move |row: usize, g: u32| {
        let (bf, bg) =
            (probe.base_column(row, flow_hash(0)).unwrap(), probe.base_column(row, flow_hash(g)).unwrap());
        (bg + NARROW_W - bf) % NARROW_W
    };
    (cfg, shift)
}

/// RowAgreement: a flow whose window sits at the same shift from another's in two rows repeats
/// its cells in both, and agreement alone would take them for the other flow's own. Found by
/// search in a narrow sketch: flow g (200 packets at 500 µs) lies 1–3 cells after flow f in
/// rows 0 and 1 and away from it in rows 2 and 3; f sends one packet at 100 µs. f's mean is its
/// own packet's delay, since rows 2 and 3 hold nothing at g's offsets.
#[test]
fn another_flow_at_the_same_shift_in_two_rows_is_not_confirmed() {
    let (cfg, shift) = narrow_sketch();
    let apart = |d: u64| (NARROW_K..=NARROW_W - NARROW_K).contains(&d);
    let g = (1..400_000)
        .find(|&g| {
            let d = shift(0, g);
            (1..NARROW_K).contains(&d) && shift(1, g) == d && apart(shift(2, g)) && apart(shift(3, g))
        })
        .expect("a flow at the same shift in rows 0 and 1");
    let mut rng = sim::rng(23);
    let mut pkts: Vec<Pkt> = (0..200)
        .map(|i| Pkt { flow: g, identity: rng.random(), send_ns: T0 + i * 1_000, delay_ns: 500_000 })
        .collect();
    pkts.push(Pkt { flow: 0, identity: rng.random(), send_ns: T0 + 100_500, delay_ns: 100_000 });
    let (s, r) = run(&cfg, &pkts, |_| false);
    let e = estimate_flow(&s, &r, &key(0), flow_hash(0)).unwrap();
    assert_eq!(mean_of(&e), 100_000.0, "flow 0 (g = {g}): {e:?}");
    assert_eq!(e.mean_delay_ns.as_ref().unwrap().samples, 1, "{e:?}");
    assert!(e.cells.confirmed >= 1, "{e:?}");
}

/// RowAgreement's fallback (nothing confirmed): flow f's two packets are lost, and flow g's
/// window overlaps f's in row 0 only. g's cells there are usable, but rows 1–3 hold nothing at
/// those offsets, so they cannot be f's own packets: f gets no mean instead of g's delay.
#[test]
fn the_fallback_leaves_out_cells_no_full_row_holds_for_the_flow() {
    let (cfg, shift) = narrow_sketch();
    let apart = |d: u64| (NARROW_K..=NARROW_W - NARROW_K).contains(&d);
    let g = (1..400_000)
        .find(|&g| (1..NARROW_K).contains(&shift(0, g)) && (1..4).all(|row| apart(shift(row, g))))
        .expect("a flow overlapping flow 0 in row 0 only");
    let mut rng = sim::rng(29);
    let mut pkts: Vec<Pkt> = (0..200)
        .map(|i| Pkt { flow: g, identity: rng.random(), send_ns: T0 + i * 1_000, delay_ns: 500_000 })
        .collect();
    pkts.extend((0..2).map(|i| Pkt {
        flow: 0,
        identity: rng.random(),
        send_ns: T0 + 100_500 + i,
        delay_ns: 100_000,
    }));
    let (s, r) = run(&cfg, &pkts, |i| i >= 200);
    let e = estimate_flow(&s, &r, &key(0), flow_hash(0)).unwrap();
    assert!(e.mean_delay_ns.is_err(), "flow 0 (g = {g}) took another flow's cells: {e:?}");
    assert_eq!(e.cells.confirmed, 0, "{e:?}");
    assert!(e.cells.usable > 0, "g's cells in row 0 are usable: {e:?}");
}
