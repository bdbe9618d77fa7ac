//! Epochs: closing, conservation, encoding.

use super::*;

fn windows_of(c: &ColateConfig, per_window: &[usize]) -> Vec<Colate> {
    per_window
        .iter()
        .enumerate()
        .map(|(k, &count)| {
            let mut w = Colate::new(c).unwrap();
            for i in 0..count as u64 {
                w.update_raw(mix64(i % 17), mix64(i ^ (k as u64) << 32), 1_000 * k as u64 + i % 1_000);
            }
            w
        })
        .collect()
}

#[test]
fn epochs_close_before_t_and_keep_every_packet() {
    let c = ColateConfig { epoch_threshold_ticks: 2_000_000, ..cfg(1_009, 20, true) };
    let ws = windows_of(&c, &[300, 0, 400, 500, 200, 900, 100, 0, 300]);
    let mut acc = EpochAccumulator::new(&c, 3, 10).unwrap();
    let mut out = Vec::new();
    for (k, w) in ws.iter().enumerate() {
        out.extend(acc.push_window(k as u64, w).unwrap());
    }
    out.extend(acc.flush());
    // Spec §9: the flush never loses a packet: Σ over epochs = Σ over windows.
    let total: u128 = ws.iter().map(|w| w.total_ticks()).sum();
    assert_eq!(out.iter().map(|e| e.data.total_ticks()).sum::<u128>(), total);
    assert_eq!(out.iter().map(|e| e.data.packets()).sum::<u64>(), 2_700);
    assert!(out.len() > 1);
    for (i, e) in out.iter().enumerate() {
        assert_eq!((e.point, e.seq), (3, 10 + i as u64));
        assert!(e.data.total_ticks() <= 2_000_000 || e.flags & flags::OVER_THRESHOLD != 0);
        assert!(!e.data.counters_wrapped());
        if let Some(next) = out.get(i + 1) {
            assert_eq!(next.first_window, e.last_window + 1);
            // Closed because the next window would have pushed it past T.
            let next_first = &ws[next.first_window as usize];
            assert!(e.data.total_ticks() + next_first.total_ticks() > 2_000_000);
        }
    }
}

#[test]
fn epochs_close_before_a_counter_exceeds_b_bits() {
    // One flow over m = 2 cells, 300 packets a window at ticks ≈ 1000·k: each cell gains ≈ 150
    // packets × 1000·k ticks. With b = 18 (limit 262 143) windows 0 and 1 fit (≈ 0.19·10⁶),
    // window 2 does not, and window 2 alone is over the limit (flagged, stored wider).
    let c = ColateConfig { counter_bits: 18, ..cfg(1_009, 2, false) };
    let ws: Vec<Colate> = (0..4u64)
        .map(|k| {
            let mut w = Colate::new(&c).unwrap();
            for i in 0..300u64 {
                w.update_raw(1, mix64(i + 1_000 * k), 1_000 * k + 150);
            }
            w
        })
        .collect();
    let mut acc = EpochAccumulator::new(&c, 0, 0).unwrap();
    let mut out = Vec::new();
    for (k, w) in ws.iter().enumerate() {
        out.extend(acc.push_window(k as u64, w).unwrap());
    }
    out.extend(acc.flush());
    assert_eq!(
        out.iter().map(|e| (e.first_window, e.last_window)).collect::<Vec<_>>(),
        vec![(0, 1), (2, 2), (3, 3)]
    );
    assert!(out[0].data.max_sum() <= c.counter_limit() && out[0].flags == 0);
    assert!(out[1].data.max_sum() > c.counter_limit() && out[1].flags & flags::WIDER_THAN_B != 0);
    let back = CounterEpoch::decode(&c, &out[1].encode()).unwrap();
    assert_eq!(back, out[1]);
}

#[test]
fn accumulator_checks_order_and_flags_gaps_and_oversize() {
    // Window ticks: w0 ≈ 10, w1 ≈ 5 010 (fit T = 10 000 together), w2 ≈ 880 000 (alone over T).
    let c = ColateConfig { epoch_threshold_ticks: 10_000, ..cfg(1_009, 20, false) };
    let ws = windows_of(&c, &[5, 5, 400]);
    let mut acc = EpochAccumulator::new(&c, 0, 0).unwrap();
    assert!(acc.push_window(5, &ws[0]).unwrap().is_none());
    assert_eq!(acc.push_window(5, &ws[1]), Err(AccumulateError::OutOfOrder { last: 5, got: 5 }));
    assert!(acc.push_window(7, &ws[1]).unwrap().is_none()); // 5 + 5 small packets fit T
    let closed = acc.push_window(8, &ws[2]).unwrap().unwrap();
    assert_eq!((closed.first_window, closed.last_window, closed.windows), (5, 7, 2));
    assert_ne!(closed.flags & flags::WINDOW_GAP, 0);
    let big = acc.flush().unwrap();
    assert_ne!(big.flags & flags::OVER_THRESHOLD, 0);
}

#[test]
fn epoch_encoding_round_trips_and_refuses_bad_input() {
    for counts in [false, true] {
        let c = cfg(1_009, 20, counts);
        let ws = windows_of(&c, &[700, 300]);
        let mut acc = EpochAccumulator::new(&c, 9, 4).unwrap();
        acc.push_window(11, &ws[0]).unwrap();
        acc.push_window(12, &ws[1]).unwrap();
        let e = acc.flush().unwrap();
        let bytes = e.encode();
        assert_eq!(CounterEpoch::decode(&c, &bytes).unwrap(), e);
        assert_eq!(CounterEpoch::decode_meta(&bytes).unwrap(), e.meta());
        for len in (0..bytes.len()).step_by(13) {
            assert!(CounterEpoch::decode(&c, &bytes[..len]).is_err(), "len {len}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(CounterEpoch::decode(&c, &long), Err(DecodeError::TrailingBytes { .. })));
        let mut bad = bytes.clone();
        bad[36] = 0x80; // unknown flag bit
        assert!(CounterEpoch::decode(&c, &bad).is_err());
        let mut bad = bytes.clone();
        bad[93] = 65; // sum width > 64
        assert!(CounterEpoch::decode(&c, &bad).is_err());
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last / 2] ^= 0x10; // a packed counter: the sums no longer add up
        assert!(CounterEpoch::decode(&c, &bad).is_err());
        // Storage accounting: stored bits / packets and the paper's n·b / packets.
        let st = e.storage();
        assert_eq!(st.stored_bytes, bytes.len());
        assert!((st.stored_bits_per_packet - 8.0 * bytes.len() as f64 / 1_000.0).abs() < 1e-12);
        assert!((st.nominal_bits_per_packet - 1_009.0 * 64.0 / 1_000.0).abs() < 1e-12);
    }
}

#[test]
fn wrapped_counters_refuse_estimates() {
    let c = cfg(1_009, 20, false);
    let mut w = Colate::new(&c).unwrap();
    w.update_raw(7, 7, u64::MAX - 1);
    w.update_raw(7, 7, u64::MAX - 1);
    let e = epoch(0, &w);
    assert_ne!(e.flags & flags::COUNTER_WRAPPED, 0);
    let back = CounterEpoch::decode(&c, &e.encode()).unwrap();
    let rep = Segment::new(vec![&back], vec![&back]).unwrap().query(7, 2, &QueryOptions::default());
    assert!(matches!(rep.mean_ns, Err(NoEstimate::Other { .. })));
}

#[test]
fn reports_serialise_and_never_hold_nan() {
    // Empty epochs, a flow that is absent, p_f of 0, 1 and 5: every estimate is either a
    // reason or finite, with a finite interval; the report serialises.
    let c = cfg(1_009, 20, true);
    let mut rng = sim::rng(30);
    let pk = flow(&mut rng, 1, 50, 1_000, 10_000, DelayModel::Constant { delay: 100.0 });
    for pkts in [Vec::new(), pk] {
        let (es, er) = epochs(&c, &pkts);
        let seg = Segment::new(vec![&es], vec![&er]).unwrap();
        for (f, p) in [(1u64, 0u64), (1, 1), (1, 5), (2, 5)] {
            let rep = seg.query(f, p, &QueryOptions::default());
            for e in [&rep.mean_ns, &rep.std_dev_paper_ns, &rep.std_dev_counts_ns, &rep.mean_counts_ns]
                .into_iter()
                .flatten()
            {
                assert!(e.value.is_finite());
                assert!(e.interval.is_none_or(|i| i.low.is_finite() && i.high.is_finite()));
            }
            assert!(rep.flow_sum_s_ticks.is_finite() && rep.second_moment_ticks2.is_finite());
            serde_json::to_string(&rep).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn random_epoch_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        for c in [cfg(11, 2, false), cfg(11, 2, true)] {
            let _ = CounterEpoch::decode(&c, &bytes);
        }
        let _ = CounterEpoch::decode_meta(&bytes);
    }
}

#[test]
fn slot_updates_equal_raw_updates() {
    for (counts, j_mode) in [(true, JMode::Consistent), (false, JMode::PerPointRandom)] {
        let cfg = ColateConfig { j_mode, origin_ns: 500, tick_ns: 7, ..cfg(10_007, 20, counts) };
        let (mut a, mut b) = (Colate::new(&cfg).unwrap(), Colate::new(&cfg).unwrap());
        for i in 0..20_000u64 {
            // Some timestamps before the origin: skipped by both.
            let (flow_hash, identity, ts_ns) = (mix64(i % 300), mix64(i ^ 0xabc), i * 13);
            a.update_raw(flow_hash, identity, ts_ns);
            let slot = b.slot_of(flow_hash, identity, ts_ns);
            b.update_at(slot, ts_ns);
        }
        assert!(a.skipped > 0);
        assert_eq!(a, b);
    }
}
