//! Encodings: the report's JSON, epoch values, bound banks and cache exports round trip;
//! malformed bytes are refused without panic; a collector fed only bytes gives the same estimate.

use super::*;

#[test]
fn report_serialises_to_json() {
    let (a, b) = fig2();
    let r = run(&online(2, 8, 16), &a, &b, &PeelGuards::default());
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["mean_ns"]["Ok"]["value"], 104.0);
    assert_eq!(j["reconciliation"]["lost"][0], 5);
    assert_eq!(j["useful_delay_sum_ns"], 1040);
}

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
