//! Encoding: round trips, truncated, implausible, random and extreme input refused without
//! panic, and what decodes reports finite numbers only.

use super::*;
use crate::synopsis::estimate::Measured;

#[test]
fn encoding_round_trips_and_refuses_bad_input() {
    let cfg = test_config();
    let mut syn = FridgeSynopsis::new(&cfg).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    feed(&mut syn, &mut carry, &stream(4, 5_000));
    let bytes = syn.encode();
    assert_eq!(FridgeSynopsis::decode(&cfg, &bytes).unwrap(), syn);
    // Every truncation fails cleanly.
    for n in 0..bytes.len() {
        assert!(FridgeSynopsis::decode(&cfg, &bytes[..n]).is_err(), "truncated to {n}");
    }
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(FridgeSynopsis::decode(&cfg, &long), Err(DecodeError::TrailingBytes { extra: 1 }));
    let other = FridgeConfig { seed: 99, ..cfg.clone() };
    assert!(matches!(FridgeSynopsis::decode(&other, &bytes), Err(DecodeError::ConfigMismatch { .. })));
    // An empty synopsis round-trips too.
    let empty = FridgeSynopsis::new(&cfg).unwrap();
    assert_eq!(FridgeSynopsis::decode(&cfg, &empty.encode()).unwrap(), empty);
}

#[test]
fn implausible_values_are_refused() {
    let cfg = FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(16, 1.0)]);
    let mut syn = FridgeSynopsis::new(&cfg).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    let flow = FlowKey::default();
    for (role, ts_ns) in [(Role::Request, 0), (Role::Response, 5_000)] {
        let ob = Observation {
            ts_ns,
            flow: &flow,
            flow_hash: 0,
            identity: 0,
            exchange: Some(Exchange { kind: ExchangeKind::Dns, role, id: 42 }),
            encap: crate::packet::Encap::NONE,
        };
        syn.update(&mut carry, &ob);
    }
    let bytes = syn.encode();
    // Layout after the header: ignored (8), counters (7 × 8), fridge counters (8), bin count
    // (4), then one entry: index (4), samples (8), Σc (8), Σc² (8).
    let entry = crate::synopsis::codec::HEADER_LEN + 8 + 56 + 8 + 4;
    let corrupt = |off: usize, v: &[u8]| {
        let mut b = bytes.clone();
        b[entry + off..entry + off + v.len()].copy_from_slice(v);
        FridgeSynopsis::decode(&cfg, &b)
    };
    assert!(matches!(corrupt(12, &f64::NAN.to_le_bytes()), Err(DecodeError::Invalid { .. })));
    assert!(matches!(corrupt(12, &0.5f64.to_le_bytes()), Err(DecodeError::Invalid { .. })));
    assert!(matches!(corrupt(4, &2u64.to_le_bytes()), Err(DecodeError::Invalid { .. })));
    assert!(matches!(corrupt(0, &9999u32.to_le_bytes()), Err(DecodeError::Invalid { .. })));
    assert!(corrupt(4, &1u64.to_le_bytes()).is_ok());
}

proptest::proptest! {
    #[test]
    fn random_bytes_never_panic(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
        let cfg = test_config();
        let mut bytes = Vec::new();
        crate::synopsis::codec::write_header(
            &mut crate::synopsis::codec::Writer::new(&mut bytes),
            crate::synopsis::SynopsisKind::Fridge,
            FridgeSynopsis::FORMAT_VERSION,
            cfg.fingerprint(),
        );
        bytes.extend_from_slice(&body);
        let _ = FridgeSynopsis::decode(&cfg, &bytes);
    }

    #[test]
    fn corrupted_encodings_never_panic(flips in proptest::collection::vec((0usize..4096, 1u8..=255), 1..8)) {
        let cfg = test_config();
        let mut syn = FridgeSynopsis::new(&cfg).unwrap();
        let mut carry = FridgeSynopsis::new_carry(&cfg);
        feed(&mut syn, &mut carry, &stream(5, 600));
        let mut bytes = syn.encode();
        for (pos, x) in flips {
            let n = bytes.len();
            bytes[pos % n] ^= x;
        }
        if let Ok(d) = FridgeSynopsis::decode(&cfg, &bytes) {
            // Whatever decodes is a plausible synopsis the estimator can report on.
            proptest::prop_assert!(serde_json::to_string(&estimate(&d)).is_ok());
        }
    }
}

/// A valid header and a structurally valid body for `cfg`: per kind the 7 counters, the
/// fridges' insertion counters and the given sparse bins (flat index, samples, Σc, Σc²; every
/// delay at the bin's lower edge), with
/// the samples counter set to the bins' wrapping sum so the consistency check cannot be what
/// refuses the input.
fn encode_bins(cfg: &FridgeConfig, counters: [u64; 7], kinds: &[Vec<(u32, u64, f64, f64)>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = crate::synopsis::codec::Writer::new(&mut out);
    crate::synopsis::codec::write_header(
        &mut w,
        crate::synopsis::SynopsisKind::Fridge,
        FridgeSynopsis::FORMAT_VERSION,
        cfg.fingerprint(),
    );
    w.u64(0);
    let layout = LogBins::new(&cfg.histogram);
    for (kc, bins) in cfg.kinds.iter().zip(kinds) {
        let mut c = counters;
        c[3] = bins.iter().fold(0u64, |s, b| s.wrapping_add(b.1));
        for v in c {
            w.u64(v);
        }
        for _ in &kc.fridges {
            w.u64(counters[0]);
        }
        w.u32(bins.len() as u32);
        for &(i, n, sum, sq) in bins {
            w.u32(i);
            w.u64(n);
            w.f64(sum);
            w.f64(sq);
            let edge = layout.low_ns(i as usize % layout.len());
            w.u64(edge);
            w.u64(edge);
        }
    }
    out
}

/// Every f64 a fridge report carries is finite (serde_json would print NaN and ±∞ as null).
fn report_is_finite(r: &FridgeReport) -> bool {
    let est = |m: &Measured<crate::synopsis::estimate::Estimate>| match m {
        Ok(e) => e.value.is_finite() && e.interval.is_none_or(|i| i.low.is_finite() && i.high.is_finite()),
        Err(_) => true,
    };
    let dist = |d: &report::DistributionReport| {
        [&d.estimated_pairs, &d.p50_ns, &d.p90_ns, &d.p95_ns, &d.p99_ns].into_iter().all(est)
            && d.above.iter().all(|a| est(&a.fraction_above))
            && d.histogram.iter().all(|b| b.pairs.is_finite() && b.pairs_se.is_finite())
    };
    r.kinds.iter().all(|k| {
        dist(&k.all)
            && k.subsets.iter().all(|s| dist(&s.distribution))
            && k.diagnostics.request_rate_per_s.is_none_or(f64::is_finite)
            && k.diagnostics.fridges.iter().all(|f| f.lifetime_ns.is_none_or(f64::is_finite))
    })
}

#[test]
fn bin_samples_whose_sum_wraps_are_refused() {
    // Two bins of 2^63 samples: their sum wraps to 0, which the samples counter can match.
    // Decoding must refuse them (the report's sums would overflow).
    let cfg = FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(16, 1.0)]);
    let bytes = encode_bins(&cfg, [1; 7], &[vec![(3, 1 << 63, 1e19, 1e19), (4, 1 << 63, 1e19, 1e19)]]);
    assert!(matches!(
        FridgeSynopsis::decode(&cfg, &bytes),
        Err(DecodeError::Invalid { field: "fridge.counters.samples", .. })
    ));
}

#[test]
fn bin_sums_no_fridge_can_reach_are_refused() {
    // Σc near f64::MAX in two subsets: finite per bin, infinite once the report adds the
    // subsets up. No fridge produces it (every c ≤ e^300), so decoding refuses it.
    let cfg = test_config();
    let big = f64::MAX / 1.5;
    let kinds = [vec![(7, 1, big, big), (7 + 2 * 106, 1, big, big)], vec![]];
    let bytes = encode_bins(&cfg, [1; 7], &kinds);
    assert!(matches!(
        FridgeSynopsis::decode(&cfg, &bytes),
        Err(DecodeError::Invalid { field: "fridge.bin", .. })
    ));
    // The largest plausible values still decode, and their report stays finite.
    let c_max = set::MAX_LN_WEIGHT.exp();
    let n = u64::MAX / 4;
    let sum = n as f64 * c_max;
    let kinds =
        [vec![(7, n, sum, sum * c_max), (7 + 2 * 106, n, sum, sum * c_max)], vec![(5, n, sum, sum * c_max)]];
    let d = FridgeSynopsis::decode(&cfg, &encode_bins(&cfg, [u64::MAX; 7], &kinds)).unwrap();
    assert!(report_is_finite(&estimate(&d)));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Any structurally valid body with extreme values (huge sample counts, sums near the top
    /// of f64, any counters): decoding never panics, and whatever decodes gives a report with
    /// finite numbers only, without panicking (debug builds check overflow).
    #[test]
    fn extreme_bins_never_panic_or_go_non_finite(
        bins in proptest::collection::vec(
            (0u32..640, proptest::prop_oneof![1u64..4, (1u64 << 62)..=u64::MAX, proptest::prelude::any::<u64>()],
             0i32..=308, 0i32..=308, 0u8..3),
            0..6),
        dns_bins in proptest::collection::vec((0u32..320, 1u64..=u64::MAX, 0i32..=308), 0..3),
        counters in proptest::prelude::any::<[u64; 7]>(),
    ) {
        let cfg = test_config();
        let value = |n: u64, e: i32| (n as f64).max(10f64.powi(e));
        let mut k0: Vec<(u32, u64, f64, f64)> = bins
            .iter()
            .map(|&(i, n, se, qe, mode)| {
                let sum = value(n, se);
                let sq = match mode { 0 => sum, 1 => sum.max(10f64.powi(qe)), _ => f64::MAX };
                (i, n.max(1), sum, sq)
            })
            .collect();
        k0.sort_by_key(|b| b.0);
        k0.dedup_by_key(|b| b.0);
        let mut k1: Vec<(u32, u64, f64, f64)> =
            dns_bins.iter().map(|&(i, n, e)| (i, n, value(n, e), value(n, e))).collect();
        k1.sort_by_key(|b| b.0);
        k1.dedup_by_key(|b| b.0);
        let bytes = encode_bins(&cfg, counters, &[k0, k1]);
        if let Ok(d) = FridgeSynopsis::decode(&cfg, &bytes) {
            let r = estimate(&d);
            proptest::prop_assert!(report_is_finite(&r));
            proptest::prop_assert!(serde_json::to_string(&r).is_ok());
        }
    }
}
