//! Formulas (spec §3–§5) against hand-computed values and the worked example.

use super::*;

#[test]
fn eq1_eq2_by_hand() {
    // t_f = 1000, t = 101 000, n = 101, m = 10:
    // E[C] = 1000/10 + 100 000/101 = 100 + 990.0990 = 1090.0990;
    // Var(C) = 100·0.9 + 990.0990·(100/101) = 90 + 980.2960 = 1070.2960.
    assert!((sizing::expected_counter(1_000.0, 101_000.0, 101.0, 10.0) - 1_090.099_01).abs() < 1e-4);
    assert!((sizing::counter_variance(1_000.0, 101_000.0, 101.0, 10.0) - 1_070.296_04).abs() < 1e-4);
}

#[test]
fn eq4_by_hand_and_exact_for_a_lone_flow() {
    // n = 7, m = 2, flow cells hold 3 and 5, the vector sums to 10: (7·8 − 2·10)/5 = 7.2.
    assert!((eq4(8, 10, 7, 2) - 7.2).abs() < 1e-12);
    // Alone in the epoch (t_X = t_f, distinct cells), Eq 4 returns t_f exactly and Eq 3 the
    // exact mean (spec §4.3, §9 tier 1).
    let mut rng = sim::rng(1);
    let pk = flow(&mut rng, 99, 500, 1_000_000, 50_000, DelayModel::Weibull { shape: 0.7, mean: 400.0 });
    let (p, mu, _, _) = truth(&pk, 99);
    let (es, er) = epochs(&cfg(1_009, 20, false), &pk);
    let seg = Segment::new(vec![&es], vec![&er]).unwrap();
    assert_eq!(
        estimate(vec![&es], vec![&er], 99, 500, &QueryOptions::default()).unwrap(),
        seg.query(99, 500, &QueryOptions::default())
    );
    let t_s: u128 = pk.iter().map(|x| x.2 as u128).sum();
    assert_eq!(seg.flow_sum(99, false), t_s as f64);
    let rep = seg.query(99, p, &QueryOptions::default());
    assert!((rep.mean_ns.unwrap().value - mu).abs() < 1e-9 * mu);
    assert_eq!(rep.flow_sum_s_ticks, t_s as f64);
}

#[test]
fn eq11_eq20_eq12_values() {
    // Spec §5.1: A = (1 + α)/2 and k = √2·erf⁻¹(A).
    for (alpha, a, k) in [(0.90, 0.95, 1.95996), (0.95, 0.975, 2.24140), (0.99, 0.995, 2.80703)] {
        assert!((sizing::per_point_reliability(alpha) - a).abs() < 1e-12);
        assert!((sizing::k_of(a) - k).abs() < 1e-5);
    }
    assert!((sizing::per_point_interval(0.05, 0.5) - 0.025).abs() < 1e-15);
}

#[test]
fn eq21_corrected_and_printed_by_hand() {
    // n = 101, m = 10, T = 10⁵, t = 10³, k = 2: Var = 90 + 980.296 = 1070.296 (Eq 2 above);
    // corrected: 4·101²·10/91²·Var = 52 241.77; printed: 4·101²·10/91·Var = 4 753 999.
    let c = sizing::eq22_rhs(Eq21Form::Corrected, 101.0, 10.0, 101_000.0, 1_000.0, 2.0);
    let p = sizing::eq22_rhs(Eq21Form::Printed, 101.0, 10.0, 101_000.0, 1_000.0, 2.0);
    let var = sizing::counter_variance(1_000.0, 101_000.0, 101.0, 10.0);
    assert!((c - 4.0 * 101.0 * 101.0 * 10.0 / (91.0 * 91.0) * var).abs() < 1e-6);
    assert!((p / c - 91.0).abs() < 1e-9, "the printed form is off by n − m");
    // required_t_min inverts Eq 22: at that t, B²t² equals the right-hand side.
    let t = sizing::required_t_min(Eq21Form::Corrected, 101.0, 10.0, 101_000.0, 0.05, 2.0);
    let rhs = sizing::eq22_rhs(Eq21Form::Corrected, 101.0, 10.0, 101_000.0, t, 2.0);
    assert!(((0.05 * t).powi(2) - rhs).abs() < 1e-9 * rhs);
}

/// The worked example of spec §5.4: M = 2²³ bits, α = 0.95, β = 0.05 (B = β), m = 20 at
/// n = 455 334 gives b = 18.423, T = 8.0·10¹⁰ and t^max = 3.515·10⁶.
#[test]
fn worked_example_5_4() {
    let m_bits = 1u64 << 23;
    let n = 455_334.0;
    let b = m_bits as f64 / n;
    assert!((b - 18.423).abs() < 1e-3);
    let t = sizing::threshold_of(n, b);
    assert!((t / 8.0e10 - 1.0).abs() < 2e-3, "T = {t}");
    // Eq 15 solved for t^max at m = 20: t(1/m − 1/n) = 2^b − 1 − T/n.
    let t_max = (b.exp2() - 1.0 - t / n) / (1.0 / 20.0 - 1.0 / n);
    assert!((t_max / 3.515e6 - 1.0).abs() < 1e-3, "t_max = {t_max}");
    assert!((sizing::cells_of(n, b, t, t_max) - 20.0).abs() < 1e-6);
    // The corrected Eq 22 holds with equality at t_min ≈ 8.5·10⁴ …
    let k = sizing::k_of(0.975);
    let t_min = sizing::required_t_min(Eq21Form::Corrected, n, 20.0, t, 0.05, k);
    assert!((t_min / 8.5e4 - 1.0).abs() < 0.02, "t_min = {t_min}");
    // … and the solver, asked with that t_min, finds n as the root (the paper's method).
    let req = SizingRequest::new(m_bits, 0.95, 0.05, 1.0, t_min, t_max);
    let sz = sizing::solve(&req).unwrap();
    assert_eq!(sz.verdict, Verdict::Root);
    assert!((sz.continuous.n / n - 1.0).abs() < 2e-3, "n = {}", sz.continuous.n);
    assert!((sz.continuous.m - 20.0).abs() < 0.3);
    // Eq 13–15 identities on the continuous solution.
    let c = sz.continuous;
    assert!((c.n * c.b - m_bits as f64).abs() < 1e-3);
    assert!((c.b - ((c.t / c.n).log2() + 1.0)).abs() < 1e-9);
    assert!((t_max / c.m + (c.t - t_max) / c.n - (c.b.exp2() - 1.0)).abs() < 1e-6 * c.b.exp2());
    // Integers: b = 19, n prime with n·b ≤ M, m even, Eq 22 still holds, config valid.
    assert_eq!(sz.counter_bits, 19);
    assert!(super::config::is_prime(sz.counters as u64) && sz.counters as u64 * 19 <= m_bits);
    assert_eq!(sz.cells_per_flow % 2, 0);
    assert!(sz.eq22_slack >= 0.0 && sz.largest_flow_fits);
    sz.config(1_000, 0, 7, false).unwrap().validate().unwrap();
    // The printed Eq 22 makes the example infeasible: it would need t_min ≈ 8.7·10⁸ > t_max.
    let e = sizing::solve(&SizingRequest { form: Eq21Form::Printed, ..req }).unwrap_err();
    assert!(e.reason.starts_with("infeasible"), "{}", e.reason);
    let need = sizing::required_t_min(Eq21Form::Printed, n, 20.0, t, 0.05, k);
    assert!((need / 8.7e8 - 1.0).abs() < 0.05 && need > t_max, "{need}");
}

#[test]
fn sizing_refuses_infeasible_and_invalid_targets() {
    let ok = SizingRequest::new(1 << 23, 0.95, 0.05, 1.0, 1e6, 3.5e6);
    let sz = sizing::solve(&ok).unwrap();
    // Eq 22 does not bind here: n follows the m hint.
    assert_eq!(sz.verdict, Verdict::NotBinding);
    assert_eq!(sz.cells_per_flow, 20);
    // The measured ratio of a real network (≈ 10⁻⁵) makes any target infeasible; the message
    // says what would work.
    let e = sizing::solve(&SizingRequest { eq12_ratio: 1e-5, ..ok }).unwrap_err();
    assert!(e.reason.contains("target flows with t ≥") && e.reason.contains("relax β"), "{}", e.reason);
    for bad in [
        SizingRequest { alpha: 1.0, ..ok },
        SizingRequest { beta: 0.0, ..ok },
        SizingRequest { eq12_ratio: 1.5, ..ok },
        SizingRequest { t_min_ticks: 5e6, ..ok },
        SizingRequest { memory_bits: 10, ..ok },
    ] {
        assert!(sizing::solve(&bad).is_err(), "{bad:?}");
    }
}

#[test]
fn pairing_and_collision_counts() {
    // Spec §4.6 and §3: m!/2^{m/2} = 2.3759·10¹⁵, (m − 1)!! = 654 729 075, m!/n^m = 2.43·10⁻⁶².
    assert!((ordered_pairing_sequences(20) / 2.375_880_867_36e15 - 1.0).abs() < 1e-9);
    assert_eq!(distinct_pairings(20), 654_729_075.0);
    assert!((same_subvector_probability(10_000, 20) / 2.432_902e-62 - 1.0).abs() < 1e-5);
}

/// Every perfect matching of `idx`, as lists of pairs.
fn matchings(idx: &[usize]) -> Vec<Vec<(usize, usize)>> {
    if idx.is_empty() {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for k in 1..idx.len() {
        let rest: Vec<usize> =
            idx[1..].iter().enumerate().filter(|(i, _)| i + 1 != k).map(|(_, &v)| v).collect();
        for mut m in matchings(&rest) {
            m.push((idx[0], idx[k]));
            out.push(m);
        }
    }
    out
}

#[test]
fn closed_form_is_the_average_over_all_pairings() {
    // Spec §4.6: averaging Σ_l (D_{Q[2l]} − D_{Q[2l−1]})² over all pairings gives
    // m/(m − 1)·Σ (D_j − D̄)². Enumerate the (m − 1)!! = 945 matchings of m = 10.
    let d: Vec<f64> = (0..10).map(|i| (mix64(i) % 10_000) as f64 - 3_000.0).collect();
    let all = matchings(&(0..10).collect::<Vec<_>>());
    assert_eq!(all.len() as f64, distinct_pairings(10));
    let avg = all.iter().map(|m| m.iter().map(|&(a, b)| (d[a] - d[b]).powi(2)).sum::<f64>()).sum::<f64>()
        / all.len() as f64;
    assert!((avg / second_moment_exact(&d) - 1.0).abs() < 1e-12);
}

#[test]
fn virtual_repetitions_converge_to_the_closed_form() {
    let d: Vec<f64> = (0..20).map(|i| (mix64(i + 50) % 100_000) as f64).collect();
    let exact = second_moment_exact(&d);
    // One pairing's value has a spread sd₁ (estimated from 20 000 draws); the mean of γ
    // independent pairings lies within 5·sd₁/√γ of its expectation, the closed form.
    let singles: Vec<f64> = (0..20_000).map(|s| second_moment_pairings(&d, 1, s)).collect();
    let (m1, sd1) = mean_sd(&singles);
    assert!((m1 - exact).abs() < 5.0 * sd1 / 20_000f64.sqrt());
    let mut last_tol = f64::INFINITY;
    for gamma in [10u32, 1_000, 100_000] {
        let tol = 5.0 * sd1 / (gamma as f64).sqrt();
        let est = second_moment_pairings(&d, gamma, 3);
        assert!((est - exact).abs() < tol, "γ = {gamma}: {est} vs {exact} ± {tol}");
        assert!(tol < last_tol);
        last_tol = tol;
    }
}

#[test]
fn eq7_offset_cancels_in_the_std_dev() {
    // Spec §4.5: w̃ = S − ξ* with one ξ* per point, so D_j shifts by a constant and Eq 9 / the
    // closed form do not change.
    let d: Vec<f64> = (0..20).map(|i| (mix64(i) % 1_000) as f64).collect();
    let shifted: Vec<f64> = d.iter().map(|x| x - 175_694.704).collect();
    assert!((second_moment_exact(&d) - second_moment_exact(&shifted)).abs() < 1e-6 * second_moment_exact(&d));
    assert_eq!(second_moment_pairings(&d, 50, 9).round(), second_moment_pairings(&shifted, 50, 9).round());
    // In a query with foreign traffic the reported offsets are non-zero and the σ̃ equals the
    // closed form on the raw differences.
    let mut rng = sim::rng(4);
    let mut pk = flow(&mut rng, 1, 3_000, 10_000, 100_000, DelayModel::Weibull { shape: 0.8, mean: 500.0 });
    for f in 2..400 {
        pk.extend(flow(&mut rng, f, 50, 10_000, 100_000, DelayModel::Weibull { shape: 0.8, mean: 500.0 }));
    }
    let c = cfg(1_009, 20, false);
    let (es, er) = epochs(&c, &pk);
    let seg = Segment::new(vec![&es], vec![&er]).unwrap();
    let rep = seg.query(1, 3_000, &QueryOptions::default());
    assert!(rep.ml_offset_s_ticks > 1_000.0 && rep.ml_offset_r_ticks > 1_000.0);
    let cells = es.data.cell_map().subvector(1);
    let raw: Vec<f64> = cells.iter().map(|&i| er.data.sum(i) as f64 - es.data.sum(i) as f64).collect();
    assert!((rep.second_moment_ticks2 / second_moment_exact(&raw) - 1.0).abs() < 1e-9);
}
