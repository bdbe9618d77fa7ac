//! The deterministic tests of lda.md §9: the paper's worked example, exactness without loss
//! and with one-packet buckets, one loss, wrap-around, anomalies, config mismatch and the
//! estimator's refusals.

use super::*;
use crate::sim;
use crate::synopsis::Synopsis;
use crate::synopsis::estimate::NoEstimate;
use rand::Rng;

fn lda(cfg: &LdaConfig) -> Lda {
    Lda::new(cfg).unwrap()
}

/// Feeds (identity, sender ts, receiver ts or lost) to both points.
fn feed(cfg: &LdaConfig, packets: &[(u64, u64, Option<u64>)]) -> (Lda, Lda) {
    let (mut a, mut b) = (lda(cfg), lda(cfg));
    for &(id, ta, tb) in packets {
        a.update_raw(id, ta);
        if let Some(tb) = tb {
            b.update_raw(id, tb);
        }
    }
    (a, b)
}

/// `n` packets with random integer delays in [0, max_delay), sent `spacing` apart from `start`.
fn random_packets(
    n: u64,
    start: u64,
    spacing: u64,
    max_delay: u64,
    seed: u64,
) -> Vec<(u64, u64, Option<u64>)> {
    let mut r = sim::rng(seed);
    (0..n)
        .map(|i| {
            let a = start.wrapping_add(i * spacing);
            (r.random::<u64>(), a, Some(a.wrapping_add(r.random_range(0..max_delay))))
        })
        .collect()
}

fn exact_mean(packets: &[(u64, u64, Option<u64>)], keep: impl Fn(u64) -> bool) -> (f64, u64) {
    let (mut sum, mut n) = (0u128, 0u64);
    for &(id, a, b) in packets {
        if let Some(b) = b
            && keep(id)
        {
            sum += u128::from(b.wrapping_sub(a));
            n += 1;
        }
    }
    (sum as f64 / n as f64, n)
}

#[test]
fn paper_figure_2() {
    // One bank of four rows (paper Fig. 2, spec §4.2); rows 1..4 of the paper are 0..3 here.
    let cfg = LdaConfig::single_bank(4, 1.0, 0);
    let (mut a, mut b) = (lda(&cfg), lda(&cfg));
    for (cell, (ta, sa)) in a.cells_mut().iter_mut().zip([(120, 5), (234, 10), (15, 2), (6, 1)]) {
        *cell = Cell { ts_sum: ta, count: sa, digest: 0 };
    }
    for (cell, (tb, sb)) in b.cells_mut().iter_mut().zip([(180, 5), (348, 9), (37, 2), (14, 1)]) {
        *cell = Cell { ts_sum: tb, count: sb, digest: 0 };
    }
    a.set_total_packets(18);
    b.set_total_packets(17);
    let r = estimate(&a, &b).unwrap();
    // D = (60 + 22 + 8) / (5 + 2 + 1) = 11.25 over 3 usable rows; one sampled loss.
    let d = r.mean_delay.clone().unwrap();
    assert_eq!(d.value, 11.25);
    assert_eq!((r.samples, d.samples, r.usable_cells, r.cells), (8, 8, 3, 4));
    assert_eq!((r.sampled_sent, r.sampled_received, r.sampled_lost), (18, 17, 1));
    assert_eq!(r.sampled_loss_rate.clone().unwrap().value, 1.0 / 18.0);
    assert_eq!((r.lost_packets, r.loss_rate.clone().unwrap().value), (Some(1), 1.0 / 18.0));
    // Collapsed: bucket {1,2} unusable; bucket {3,4} has signed sum Δ_4 − Δ_3 = 8 − 22 = −14
    // over 3 packets, so F = 196/3; F − D² = 65.33 − 126.56 < 0 is clamped.
    assert_eq!((r.usable_buckets, r.buckets, r.collapsed_samples), (1, 2, 3));
    assert_eq!(r.second_moment.clone().unwrap().value, 196.0 / 3.0);
    assert!(r.variance_clamped);
    assert_eq!(r.paper_std_dev.clone().unwrap().value, 0.0);
    // The group moment over the three usable cells (60, 5), (22, 2), (8, 1) about D = 11.25:
    // residuals 3.75, −0.5, −3.25; Σ r² = 24.875 over S − Σc²/S = 8 − 30/8 = 4.25, times
    // (N − 1)/N = 16/17 for the population of N = min(18, 17) packets both points saw.
    let sd = r.std_dev.clone().unwrap();
    assert!((sd.value - (24.875f64 / 4.25 * 16.0 / 17.0).sqrt()).abs() < 1e-12, "{sd:?}");
    assert!(d.interval.is_some(), "the group moment is never clamped: the mean has its interval");
    assert_eq!(r.anomalous_cells, 0);
    assert_eq!(r.banks[0].usable_cells, 3);
    // The report is what the peer prints as a JSON line.
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"variance_clamped\":true"), "{json}");
}

#[test]
fn without_loss_and_p_1_the_mean_is_exact() {
    for (rows, n) in [(2u32, 1_000u64), (64, 5_000), (1024, 20_000)] {
        let cfg = LdaConfig::single_bank(rows, 1.0, u64::from(rows));
        let pk = random_packets(n, 1_000_000, 10_000, 9_000, u64::from(rows));
        let (a, b) = feed(&cfg, &pk);
        let r = estimate(&a, &b).unwrap();
        let (mean, _) = exact_mean(&pk, |_| true);
        assert_eq!(r.samples, n);
        assert_eq!(r.usable_cells, u64::from(rows));
        assert!((r.mean_delay.unwrap().value - mean).abs() <= 1e-12 * mean, "m = {rows}");
        assert_eq!((r.sampled_lost, r.lost_packets), (0, Some(0)));
    }
}

#[test]
fn one_packet_per_bucket_makes_f_exact() {
    // Spec §9: with every packet alone in its collapsed bucket the AMS cross terms vanish, so F
    // is the exact mean square and σ̂ the exact population sd. Instead of an injectable hasher,
    // pick identities whose (real) placement falls in distinct buckets.
    let cfg = LdaConfig::single_bank(1 << 16, 1.0, 77);
    let probe = lda(&cfg);
    let mut used = std::collections::HashSet::new();
    let mut r = sim::rng(5);
    let mut packets = Vec::new();
    let mut id = 0u64;
    while packets.len() < 300 {
        id += 1;
        let bucket = probe.locate(id).unwrap().row / 2;
        if used.insert(bucket) {
            let a = 1_000_000 * id;
            packets.push((id, a, Some(a + r.random_range(1_000..500_000u64))));
        }
    }
    let (a, b) = feed(&cfg, &packets);
    let rep = estimate(&a, &b).unwrap();
    let delays: Vec<f64> = packets.iter().map(|&(_, a, b)| (b.unwrap() - a) as f64).collect();
    let n = delays.len() as f64;
    let mean = delays.iter().sum::<f64>() / n;
    let mean_sq = delays.iter().map(|w| w * w).sum::<f64>() / n;
    let sd = (mean_sq - mean * mean).sqrt();
    // Empty buckets count as usable (S_A = S_B = 0), as in the paper; they weigh nothing.
    assert_eq!(rep.usable_buckets, 1 << 15);
    assert_eq!(rep.collapsed_samples, 300);
    assert!((rep.second_moment.unwrap().value - mean_sq).abs() <= 1e-12 * mean_sq);
    assert!(!rep.variance_clamped);
    assert!((rep.paper_std_dev.unwrap().value - sd).abs() <= 1e-9 * sd);
    // B_eff counts 300 equally heavy buckets.
    assert!((rep.effective_buckets - 300.0).abs() < 1e-9);
    // And the interval is the paper's 98% half-width with the (group-moment) σ̂: 3.035·σ̂/√S.
    let iv = rep.mean_delay.unwrap().interval.unwrap();
    let h = sizing::confidence_half_width(rep.std_dev.unwrap().value, 300, 0.98).unwrap();
    assert!(((iv.high - iv.low) / 2.0 - h).abs() <= 1e-6 * h);
}

#[test]
fn a_few_packets_alone_in_their_cells_get_their_population_sd() {
    // The ground truth's σ is the population sd (ddof = 0) of the packets both points saw. With
    // p = 1 and each packet alone in its cell, every one is a group of its own, and σ̂ (the
    // group moment times (N − 1)/N, `moment::Population::Of`) is that sd exactly; without the
    // factor it was √(N/(N − 1)) times it (√2 for two packets).
    let cfg = LdaConfig::single_bank(1 << 12, 1.0, 31);
    let probe = lda(&cfg);
    for delays in [
        vec![10_000u64, 12_000],
        vec![10_000, 12_000, 17_000],
        vec![3_000, 5_000, 5_000, 8_000, 13_000, 21_000, 34_000],
    ] {
        let (mut used, mut packets, mut id) = (std::collections::HashSet::new(), Vec::new(), 0u64);
        while packets.len() < delays.len() {
            id += 1;
            if used.insert(probe.locate(id).unwrap().row) {
                let a = 1_000_000 * id;
                packets.push((id, a, Some(a + delays[packets.len()])));
            }
        }
        let (a, b) = feed(&cfg, &packets);
        let rep = estimate(&a, &b).unwrap();
        let n = delays.len() as f64;
        let mean = delays.iter().sum::<u64>() as f64 / n;
        let sd = (delays.iter().map(|&d| (d as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
        let got = rep.std_dev.unwrap().value;
        assert!((got - sd).abs() <= 1e-9 * sd, "{delays:?}: σ̂ {got} against the population sd {sd}");
    }
}

#[test]
fn one_loss_spoils_exactly_one_row() {
    let cfg = LdaConfig::single_bank(64, 1.0, 4);
    let mut pk = random_packets(10_000, 0, 100_000, 50_000, 8);
    let victim = pk[4321].0;
    pk[4321].2 = None;
    let (a, b) = feed(&cfg, &pk);
    let r = estimate(&a, &b).unwrap();
    let bad_row = a.locate(victim).unwrap().flat;
    assert_eq!(r.usable_cells, 63);
    assert_eq!((r.sampled_lost, r.lost_packets), (1, Some(1)));
    // D is the exact mean of the packets in the other 63 rows.
    let (mean, n) = exact_mean(&pk, |id| a.locate(id).unwrap().flat != bad_row);
    assert_eq!(r.samples, n);
    assert!((r.mean_delay.unwrap().value - mean).abs() <= 1e-12 * mean);
    // Its bucket is gone too: 31 of 32 buckets remain.
    assert_eq!(r.usable_buckets, 31);
}

#[test]
fn wrap_around_with_40_bit_accumulators() {
    // The same delays with timestamps far from any wrap (64-bit) and straddling 2^40 and 2^64
    // (sums wrap many times) give exactly the same D and F.
    let mut narrow = LdaConfig::single_bank(16, 1.0, 6);
    narrow.ts_bits = 40;
    narrow.count_bits = 32;
    let wide = LdaConfig { ts_bits: 64, count_bits: 64, ..narrow.clone() };
    let reference = random_packets(5_000, 1_000, 1_000_000, 800_000, 9);
    let shifted = |base: u64| -> Vec<_> {
        reference
            .iter()
            .map(|&(id, a, b)| (id, a.wrapping_add(base), b.map(|b| b.wrapping_add(base))))
            .collect()
    };
    let (ra, rb) = feed(&wide, &reference);
    let want = estimate(&ra, &rb).unwrap();
    let (want_mean, _) = exact_mean(&reference, |_| true);
    assert!((want.mean_delay.clone().unwrap().value - want_mean).abs() < 1e-9 * want_mean);
    for (cfg, base) in
        [(&narrow, (1u64 << 40) - 2_000_000_000), (&narrow, 0), (&wide, u64::MAX - 2_000_000_000)]
    {
        let (a, b) = feed(cfg, &shifted(base));
        let got = estimate(&a, &b).unwrap();
        assert_eq!(got.mean_delay.unwrap().value, want.mean_delay.clone().unwrap().value, "base {base}");
        assert_eq!(got.second_moment.unwrap().value, want.second_moment.clone().unwrap().value);
    }
}

#[test]
fn counters_compare_modulo_their_width() {
    // 300 packets in a cell of 8-bit counters wrap to 44 at both points: still usable.
    let mut cfg = LdaConfig::single_bank(2, 1.0, 0);
    cfg.count_bits = 8;
    let pk: Vec<_> = (0..300u64).map(|i| (7, i * 10, Some(i * 10 + 3))).collect();
    let (a, b) = feed(&cfg, &pk);
    let r = estimate(&a, &b).unwrap();
    assert_eq!((r.usable_cells, r.samples), (2, 44));
}

#[test]
fn a_negative_clock_offset_gives_a_negative_mean() {
    // The receiver's clock is 1000 units behind: every delay is −1000 + 10.
    let cfg = LdaConfig::single_bank(8, 1.0, 3);
    let pk: Vec<_> =
        (0..100u64).map(|i| (i, 1_000_000 + i * 5000, Some(1_000_000 + i * 5000 - 990))).collect();
    let (a, b) = feed(&cfg, &pk);
    assert_eq!(estimate(&a, &b).unwrap().mean_delay.unwrap().value, -990.0);
}

#[test]
fn receiver_counting_more_is_an_anomaly() {
    // A packet the sender never counted (boundary slip) reaches the receiver.
    let cfg = LdaConfig::single_bank(32, 1.0, 2);
    let mut pk = random_packets(2_000, 0, 10_000, 5_000, 3);
    pk[10].2 = None; // and one real loss elsewhere
    let (a, mut b) = feed(&cfg, &pk);
    let stray = (1..).find(|&id| b.locate(id).unwrap().flat != a.locate(pk[10].0).unwrap().flat).unwrap();
    b.update_raw(stray, 123_456);
    let r = estimate(&a, &b).unwrap();
    assert_eq!(r.anomalous_cells, 1);
    assert_eq!((r.receiver_more_cells, r.slipped_cells), (1, 0), "counted as the receiver counting more");
    assert_eq!(r.usable_cells, 30, "the lossy row and the anomalous row are unusable");
    assert_eq!(r.sampled_lost, 1, "the anomaly does not cancel the real loss");
    assert_eq!(r.lost_packets, Some(0));
    assert!(r.loss_rate.is_ok());
    // Two strays make the receiver count more than the sender in total.
    b.update_raw(stray, 1);
    let r = estimate(&a, &b).unwrap();
    assert_eq!((r.lost_packets, r.receiver_excess), (None, 1), "never a negative loss");
    assert!(matches!(r.loss_rate, Err(NoEstimate::Other { .. })));
}

#[test]
fn mismatched_configs_are_refused() {
    let cfg = LdaConfig::single_bank(8, 1.0, 1);
    let a = lda(&cfg);
    for other in [
        LdaConfig::single_bank(8, 1.0, 2),
        LdaConfig::single_bank(16, 1.0, 1),
        LdaConfig::single_bank(8, 0.5, 1),
        LdaConfig { ts_bits: 40, ..cfg.clone() },
    ] {
        let e = estimate(&a, &lda(&other)).unwrap_err();
        assert!(matches!(e, LdaEstimateError::ConfigMismatch { .. }), "{e}");
        assert!(estimate(&lda(&other), &a).is_err());
    }
    assert!(matches!(estimate_with_confidence(&a, &a, 1.0), Err(LdaEstimateError::BadConfidence(_))));
}

#[test]
fn empty_and_fully_spoiled_intervals_have_reasons_not_nan() {
    let cfg = LdaConfig::single_bank(4, 1.0, 1);
    let r = estimate(&lda(&cfg), &lda(&cfg)).unwrap();
    assert_eq!(r.mean_delay, Err(NoEstimate::NoPackets));
    assert_eq!(r.std_dev, Err(NoEstimate::NoPackets));
    assert_eq!(r.loss_rate, Err(NoEstimate::NoPackets));
    assert_eq!(r.sampled_loss_rate, Err(NoEstimate::NoPackets));
    // Every packet lost: cells exist but none is usable.
    let pk: Vec<_> = (0..100u64).map(|i| (i, i, None)).collect();
    let (a, b) = feed(&cfg, &pk);
    let r = estimate(&a, &b).unwrap();
    assert_eq!(r.mean_delay, Err(NoEstimate::NoUsableCells));
    assert_eq!(r.std_dev, Err(NoEstimate::NoUsableCells));
    assert_eq!(r.loss_rate.as_ref().unwrap().value, 1.0);
    assert_eq!(r.effective_buckets, 0.0);
    assert!(serde_json::to_string(&r).is_ok());
}

#[test]
fn estimating_decoded_synopses_equals_estimating_the_originals() {
    let mut cfg = LdaConfig::single_bank(128, 0.5, 12);
    cfg.banks.push(BankConfig { rows: 64, p: 0.25 });
    cfg.ts_bits = 40;
    cfg.count_bits = 32;
    let mut pk = random_packets(50_000, 1 << 39, 7_000, 6_000, 13);
    for p in pk.iter_mut().step_by(97) {
        p.2 = None;
    }
    let (a, b) = feed(&cfg, &pk);
    let (a2, b2) = (Lda::decode(&cfg, &a.encode()).unwrap(), Lda::decode(&cfg, &b.encode()).unwrap());
    assert_eq!(estimate(&a, &b).unwrap(), estimate(&a2, &b2).unwrap());
    assert_eq!(estimate_encoded(&cfg, &a.encode(), &b.encode()).unwrap(), estimate(&a, &b).unwrap());
    let short = &b.encode()[..20];
    assert!(matches!(
        estimate_encoded(&cfg, &a.encode(), short),
        Err(LdaEstimateError::Decode { point: "receiver", .. })
    ));
    let other = LdaConfig { seed: 99, ..cfg.clone() };
    assert!(matches!(
        estimate_encoded(&other, &a.encode(), &b.encode()),
        Err(LdaEstimateError::Decode {
            point: "sender",
            source: crate::synopsis::codec::DecodeError::ConfigMismatch { .. }
        })
    ));
    // Per-bank diagnostics add up.
    let r = estimate(&a, &b).unwrap();
    assert_eq!(r.banks.iter().map(|x| x.samples).sum::<u64>(), r.samples);
    assert_eq!(r.banks.iter().map(|x| x.sampled_lost).sum::<u64>(), r.sampled_lost);
    assert_eq!(r.sampled_sent - r.sampled_received, r.sampled_lost);
}

mod arbitrary_input {
    use super::*;
    use crate::synopsis::estimate::Estimate;
    use proptest::prelude::*;

    fn finite(m: &Result<Estimate, NoEstimate>) -> bool {
        match m {
            Ok(e) => {
                e.value.is_finite() && e.interval.is_none_or(|iv| iv.low.is_finite() && iv.high.is_finite())
            }
            Err(_) => true,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever a peer sends (any cell values within the widths), the estimator neither
        /// panics (no overflow) nor reports a non-finite number.
        #[test]
        fn estimator_never_panics_or_goes_non_finite(
            a in proptest::collection::vec((any::<u64>(), 0u64..4), 8),
            b in proptest::collection::vec((any::<u64>(), 0u64..4), 8),
            big in any::<bool>(),
            totals in (any::<u64>(), any::<u64>()),
        ) {
            let mut cfg = LdaConfig::single_bank(4, 0.5, 1);
            cfg.banks.push(BankConfig { rows: 4, p: 0.5 });
            cfg.ts_bits = if big { 64 } else { 40 };
            let (mut x, mut y) = (lda(&cfg), lda(&cfg));
            // Counts near the top of the range exercise the saturating sums.
            let count = |c: u64| if big { u64::MAX - c } else { c };
            for (cell, (t, c)) in x.cells_mut().iter_mut().zip(&a) {
                *cell = Cell { ts_sum: t & cfg.ts_mask(), count: count(*c), digest: 0 };
            }
            for (cell, (t, c)) in y.cells_mut().iter_mut().zip(&b) {
                *cell = Cell { ts_sum: t & cfg.ts_mask(), count: count(*c), digest: 0 };
            }
            x.set_total_packets(totals.0);
            y.set_total_packets(totals.1);
            let r = estimate(&x, &y).unwrap();
            prop_assert!(finite(&r.mean_delay) && finite(&r.std_dev) && finite(&r.second_moment));
            prop_assert!(finite(&r.loss_rate) && finite(&r.sampled_loss_rate));
            prop_assert!(r.effective_buckets.is_finite());
            prop_assert!(r.usable_cells <= 8 && r.usable_buckets <= 4);
        }
    }

    /// Totals whose difference is exactly 2^63 wrap to i64::MIN: the loss report must still
    /// be a clean refusal (negating i64::MIN overflowed).
    #[test]
    fn totals_differing_by_two_to_the_63_do_not_overflow() {
        let cfg = LdaConfig::single_bank(4, 0.5, 1);
        let (mut x, mut y) = (lda(&cfg), lda(&cfg));
        x.set_total_packets(1);
        y.set_total_packets((1u64 << 63) + 1);
        let r = estimate(&x, &y).unwrap();
        assert_eq!((r.lost_packets, r.receiver_excess), (None, 1u64 << 63));
        assert!(matches!(r.loss_rate, Err(NoEstimate::Other { .. })), "{:?}", r.loss_rate);
    }
}
