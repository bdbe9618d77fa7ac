//! The synopsis over a mixed stream: kinds, subsets and ignored exchanges, epochs that never
//! clear the fridge, and merging epochs of one worker or shards of several.

use super::*;

#[test]
fn kinds_subsets_and_ignored_exchanges() {
    let cfg = test_config();
    let mut syn = FridgeSynopsis::new(&cfg).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    let events = stream(1, 20_000);
    feed(&mut syn, &mut carry, &events);
    let tcp_data = events.iter().filter(|(_, _, e)| e.kind == ExchangeKind::TcpData).count() as u64;
    assert_eq!(syn.ignored_exchanges(), tcp_data);
    let hs = syn.kind(ExchangeKind::TcpHandshake).unwrap();
    let dns = syn.kind(ExchangeKind::Dns).unwrap();
    let n = |k, r| events.iter().filter(|(_, _, e)| e.kind == k && e.role == r).count() as u64;
    assert_eq!(hs.counters.requests, n(ExchangeKind::TcpHandshake, Role::Request));
    assert_eq!(dns.counters.responses, n(ExchangeKind::Dns, Role::Response));
    // Subset buckets: other = 0, port 53 = 1, port 443 = 2. Handshakes are all port 443; DNS
    // splits between 53 and "other" (5353).
    let count = |k: &KindEpoch, s: usize| -> u64 {
        (0..k.fridge_count()).flat_map(|f| k.hist(s, f).iter()).map(|b| b.samples).sum()
    };
    assert_eq!(count(hs, 2), hs.counters.samples);
    assert!(count(dns, 1) > 0 && count(dns, 0) > 0);
    assert_eq!(count(dns, 0) + count(dns, 1), dns.counters.samples);
    let r = estimate(&syn);
    assert_eq!(r.kinds.len(), 2);
    assert_eq!(r.kinds[1].subsets.len(), 3);
    assert_eq!(r.kinds[1].subsets[2].subset, "other");
    assert_eq!(r.kinds[1].subsets[0].subset, "server port 53");
    assert_eq!(r.kinds[0].diagnostics.fridges.len(), 2);
    assert!(serde_json::to_string(&r).unwrap().contains("\"p99_ns\""));
}

#[test]
fn epochs_never_clear_the_fridge_and_samples_belong_to_the_response_epoch() {
    let cfg = FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(1 << 10, 1.0)]);
    let mut syn = FridgeSynopsis::new(&cfg).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    let flow = FlowKey::default();
    let ob = |role, id, ts_ns| Observation {
        ts_ns,
        flow: &flow,
        flow_hash: 0,
        identity: 0,
        exchange: Some(Exchange { kind: ExchangeKind::Dns, role, id }),
        encap: crate::packet::Encap::NONE,
    };
    syn.update(&mut carry, &ob(Role::Request, 1, 1_000));
    let before = syn.encode();
    syn.reset(); // epoch boundary: the request stays in the carry
    syn.update(&mut carry, &ob(Role::Request, 2, 2_000));
    syn.update(&mut carry, &ob(Role::Response, 1, 1_000_000));
    let k = syn.kind(ExchangeKind::Dns).unwrap();
    assert_eq!((k.counters.requests, k.counters.samples), (1, 1));
    // x = 1 (request 2 entered after request 1): c = (1 − 2⁻¹⁰)⁻¹.
    let c: f64 = k.hist(0, 0).iter().map(|b| b.weight_sum).sum();
    assert!((c - 1.0 / (1.0 - 1.0 / 1024.0)).abs() < 1e-12);
    let first = FridgeSynopsis::decode(&cfg, &before).unwrap();
    assert_eq!(first.kind(ExchangeKind::Dns).unwrap().counters.samples, 0);
}

/// Integer fields equal, float sums equal up to rounding of a different addition order.
fn assert_close(a: &FridgeSynopsis, b: &FridgeSynopsis) {
    assert_eq!(a.ignored_exchanges(), b.ignored_exchanges());
    for (x, y) in a.kinds().iter().zip(b.kinds()) {
        assert_eq!(x.counters, y.counters);
        assert_eq!(x.fridges, y.fridges);
        for (p, q) in x.hist_flat().iter().zip(y.hist_flat()) {
            assert_eq!(p.samples, q.samples);
            for (u, v) in [(p.weight_sum, q.weight_sum), (p.weight_sq_sum, q.weight_sq_sum)] {
                assert!((u - v).abs() <= 1e-12 * u.abs().max(v.abs()), "{u} vs {v}");
            }
        }
    }
}

#[test]
fn merging_epochs_of_one_worker_equals_one_long_epoch() {
    let cfg = test_config();
    let events = stream(2, 12_000);
    let mut carry_all = FridgeSynopsis::new_carry(&cfg);
    let mut all = FridgeSynopsis::new(&cfg).unwrap();
    feed(&mut all, &mut carry_all, &events);
    for parts in [2usize, 3, 4] {
        let mut carry = FridgeSynopsis::new_carry(&cfg);
        let chunk = events.len().div_ceil(parts);
        let mut merged = FridgeSynopsis::new(&cfg).unwrap();
        for c in events.chunks(chunk) {
            let mut s = FridgeSynopsis::new(&cfg).unwrap();
            feed(&mut s, &mut carry, c);
            merged.merge(&s).unwrap();
        }
        assert_close(&merged, &all);
        assert_eq!(carry, carry_all);
    }
}

#[test]
fn shards_merge_by_summing() {
    // Per-core shards (flows split by client, own carries): the merge is the sum of the shards,
    // in any order, and the merged counters equal the whole stream's.
    let cfg = test_config();
    let events = stream(3, 12_000);
    let shards = 3usize;
    let mut syn: Vec<FridgeSynopsis> = (0..shards).map(|_| FridgeSynopsis::new(&cfg).unwrap()).collect();
    let mut carries: Vec<FridgeCarry> = (0..shards).map(|_| FridgeSynopsis::new_carry(&cfg)).collect();
    for (flow, ts, ex) in &events {
        let s = (flow.canonical().hash(0) % shards as u64) as usize;
        feed(&mut syn[s], &mut carries[s], &[(*flow, *ts, *ex)]);
    }
    let mut a = syn[0].clone();
    a.merge(&syn[1]).unwrap();
    a.merge(&syn[2]).unwrap();
    let mut b = syn[2].clone();
    b.merge(&syn[0]).unwrap();
    b.merge(&syn[1]).unwrap();
    assert_close(&a, &b);
    let hs = a.kind(ExchangeKind::TcpHandshake).unwrap();
    let want = events.iter().filter(|(_, _, e)| e.kind == ExchangeKind::TcpHandshake).count() as u64;
    assert_eq!(hs.counters.requests + hs.counters.responses, want);
    let samples: u64 = syn.iter().map(|s| s.kind(ExchangeKind::Dns).unwrap().counters.samples).sum();
    assert_eq!(a.kind(ExchangeKind::Dns).unwrap().counters.samples, samples);
    // Different configurations do not merge.
    let other = FridgeSynopsis::new(&FridgeConfig { seed: 1, ..cfg }).unwrap();
    assert!(matches!(a.merge(&other), Err(MergeError::ConfigMismatch { .. })));
}
