//! Deterministic oracles of the fridge (spec §3, §8 P2–P8, P21), the synopsis's epoch, merge
//! and encoding behaviour, and the report.

use super::*;
use crate::packet::{Exchange, FlowKey};
use crate::synopsis::codec::DecodeError;
use crate::synopsis::hash;

mod quantiles;
mod statistical;

fn spec(slots: u32, p: f64) -> FridgeSpec {
    FridgeSpec { slots, entry_probability: p }
}

/// Ids (from a counter) whose request enters fridge `fridge` at slot `slot`.
fn ids_at(set: &FridgeSet, fridge: usize, slot: usize, n: usize, skip: &mut u64) -> Vec<u64> {
    let mut out = Vec::new();
    while out.len() < n {
        *skip += 1;
        if set.slot_of(*skip) == Some((fridge, slot)) {
            out.push(*skip);
        }
    }
    out
}

/// Ids whose coin sends them to no fridge.
fn unsampled_ids(set: &FridgeSet, n: usize, skip: &mut u64) -> Vec<u64> {
    let mut out = Vec::new();
    while out.len() < n {
        *skip += 1;
        if set.slot_of(*skip).is_none() {
            out.push(*skip);
        }
    }
    out
}

fn matched(out: ResponseOutcome) -> Sample {
    match out {
        ResponseOutcome::Matched(s) => s,
        other => panic!("expected a sample, got {other:?}"),
    }
}

#[test]
fn m2_weights_double_per_sibling_insertion() {
    // Spec §3.3 / P2: with M = 2 under W1, a survivor's weight is p⁻¹·2^x, where x counts only
    // insertions after its own (all into the sibling slot).
    for p in [1.0, 0.5] {
        let mut set = FridgeSet::new(&[spec(2, p)], 11, WeightMode::Insertions).unwrap();
        let mut next = 0;
        for x in 0..6u64 {
            let a = ids_at(&set, 0, 0, 1, &mut next)[0];
            let sib = ids_at(&set, 0, 1, x as usize, &mut next);
            set.on_request(a, 1000);
            for (i, id) in sib.iter().enumerate() {
                set.on_request(*id, 1001 + i as u64);
            }
            let s = matched(set.on_response(a, 5000));
            assert_eq!(s.x, x, "p = {p}");
            assert_eq!(s.delay_ns, 4000);
            let want = 2f64.powi(x as i32) / p;
            assert!((s.weight() - want).abs() < 1e-12 * want, "p = {p}, x = {x}: {} vs {want}", s.weight());
        }
    }
}

#[test]
fn x_excludes_the_requests_own_insertion() {
    // An immediately answered request has x = 0 and weight exactly 1/p, not 2/p (an off-by-one
    // would double every weight at M = 2).
    let mut set = FridgeSet::new(&[spec(2, 0.5)], 3, WeightMode::Insertions).unwrap();
    let mut next = 0;
    let a = ids_at(&set, 0, 1, 1, &mut next)[0];
    set.on_request(a, 10);
    let s = matched(set.on_response(a, 20));
    assert_eq!((s.x, s.weight()), (0, 2.0));
    // W2 counts offered requests, the request itself excluded as well.
    let mut set = FridgeSet::new(&[spec(2, 0.5)], 3, WeightMode::Offered).unwrap();
    set.on_request(a, 10);
    let s = matched(set.on_response(a, 20));
    assert_eq!((s.x, s.weight()), (0, 2.0));
}

#[test]
fn w1_counts_insertions_w2_counts_offered_requests() {
    // p = 1/2, M = 2: after A, three requests that do not enter and two that enter the sibling
    // slot. W1: x = 2, c = 2·2² = 8. W2: x = 5, c = 2·(1 − p/M)^(−5) = 2·(4/3)⁵.
    for (mode, x, c) in
        [(WeightMode::Insertions, 2, 8.0), (WeightMode::Offered, 5, 2.0 * (4.0f64 / 3.0).powi(5))]
    {
        let mut set = FridgeSet::new(&[spec(2, 0.5)], 5, mode).unwrap();
        let mut next = 0;
        let a = ids_at(&set, 0, 0, 1, &mut next)[0];
        set.on_request(a, 0);
        for id in unsampled_ids(&set, 3, &mut next) {
            assert_eq!(set.on_request(id, 1).0, RequestOutcome::NotSampled);
        }
        for id in ids_at(&set, 0, 1, 2, &mut next) {
            set.on_request(id, 2);
        }
        let s = matched(set.on_response(a, 3));
        assert_eq!(s.x, x, "{mode:?}");
        assert!((s.weight() - c).abs() < 1e-12 * c, "{mode:?}: {} vs {c}", s.weight());
    }
}

#[test]
fn erase_semantics() {
    let mut set = FridgeSet::new(&[spec(2, 0.5)], 9, WeightMode::Insertions).unwrap();
    let mut next = 0;
    let [a, b] = ids_at(&set, 0, 0, 2, &mut next)[..] else { unreachable!() };
    // A non-sampled request does nothing, not even a lookup that could erase (spec P3).
    set.on_request(a, 0);
    for id in unsampled_ids(&set, 5, &mut next) {
        set.on_request(id, 1);
        assert_eq!(set.on_response(id, 2), ResponseOutcome::NotSampled);
    }
    // A response of an id never requested leaves A alone.
    assert_eq!(set.on_response(b, 3), ResponseOutcome::Unmatched { fridge: 0 });
    let s = matched(set.on_response(a, 4));
    assert_eq!((s.delay_ns, s.x), (4, 0));
    // Erased on match: a duplicate response finds nothing (spec P7).
    assert_eq!(set.on_response(a, 5), ResponseOutcome::Unmatched { fridge: 0 });
    // An insertion into the same slot evicts: A's response is then unmatched.
    set.on_request(a, 10);
    let (out, _) = set.on_request(b, 11);
    assert_eq!(out, RequestOutcome::Inserted { fridge: 0 });
    assert_eq!(set.on_response(a, 12), ResponseOutcome::Unmatched { fridge: 0 });
    let s = matched(set.on_response(b, 13));
    assert_eq!((s.delay_ns, s.x), (2, 0));
    assert_eq!(set.tables()[0].occupied(), 0);
}

#[test]
fn duplicate_requests_measure_from_the_latest_copy() {
    // Spec P6: a sampled duplicate counts as an insertion and re-arms its own slot.
    let cfg = FridgeConfig::single_kind(ExchangeKind::TcpHandshake, vec![spec(2, 1.0)]);
    let mut syn = FridgeSynopsis::new(&cfg).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    let flow = FlowKey::default();
    let ob = |role, id, ts_ns| Observation {
        ts_ns,
        flow: &flow,
        flow_hash: 0,
        identity: 0,
        exchange: Some(Exchange { kind: ExchangeKind::TcpHandshake, role, id }),
        encap: crate::packet::Encap::NONE,
    };
    syn.update(&mut carry, &ob(Role::Request, 7, 0));
    syn.update(&mut carry, &ob(Role::Request, 7, 3000)); // retransmitted SYN
    syn.update(&mut carry, &ob(Role::Response, 7, 5000));
    syn.update(&mut carry, &ob(Role::Response, 7, 6000)); // duplicate SYN/ACK
    let k = syn.kind(ExchangeKind::TcpHandshake).unwrap();
    assert_eq!(k.counters.samples, 1);
    assert_eq!(k.counters.unmatched_responses, 1);
    assert_eq!(k.fridges[0].insertions, 2);
    // One sample of delay 2000 ns with x = 0, c = 1.
    let bin = syn.bins().bin_of(2000);
    let h = k.hist(0, 0);
    assert_eq!(
        h[bin],
        BinStats { samples: 1, weight_sum: 1.0, weight_sq_sum: 1.0, min_ns: 2000, max_ns: 2000 }
    );
}

#[test]
fn weight_overflow_is_counted_not_accumulated() {
    // Spec P8: x = 500 at M = 2 gives ln c = 500·ln 2 ≈ 346.6 > 300: counted and dropped.
    // x = 400 (ln c ≈ 277) is still accumulated, with a finite c².
    let cfg = FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(2, 1.0)]);
    let mut syn = FridgeSynopsis::new(&cfg).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    let set = carry.set(ExchangeKind::Dns).unwrap().clone();
    let flow = FlowKey::default();
    let mut next = 0;
    for x in [400usize, 500] {
        let a = ids_at(&set, 0, 0, 1, &mut next)[0];
        let sib = ids_at(&set, 0, 1, x, &mut next);
        for (role, id) in std::iter::once((Role::Request, a))
            .chain(sib.iter().map(|i| (Role::Request, *i)))
            .chain(std::iter::once((Role::Response, a)))
        {
            let ob = Observation {
                ts_ns: 10_000 + next,
                flow: &flow,
                flow_hash: 0,
                identity: 0,
                exchange: Some(Exchange { kind: ExchangeKind::Dns, role, id }),
                encap: crate::packet::Encap::NONE,
            };
            syn.update(&mut carry, &ob);
        }
    }
    let k = syn.kind(ExchangeKind::Dns).unwrap();
    assert_eq!(k.counters.weight_overflow, 1);
    assert_eq!(k.counters.samples, 1);
    let total: f64 = k.hist(0, 0).iter().map(|b| b.weight_sum).sum();
    assert!((total / 2f64.powi(400) - 1.0).abs() < 1e-12, "{total}");
    assert!(k.hist(0, 0).iter().all(|b| b.weight_sq_sum.is_finite()));
    let report = estimate(&syn);
    assert!(serde_json::to_string(&report).is_ok());
}

#[test]
fn one_slot_is_refused_everywhere() {
    let cfg = FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(1, 1.0)]);
    assert!(FridgeSynopsis::new(&cfg).is_err());
    assert!(FridgeSet::new(&[spec(1, 1.0)], 1, WeightMode::Offered).is_err());
    // The carry of an invalid config measures nothing and never panics.
    let good = FridgeConfig::default();
    let mut syn = FridgeSynopsis::new(&good).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    let flow = FlowKey::default();
    let ob = Observation {
        ts_ns: 1,
        flow: &flow,
        flow_hash: 0,
        identity: 0,
        exchange: Some(Exchange { kind: ExchangeKind::Dns, role: Role::Request, id: 1 }),
        encap: crate::packet::Encap::NONE,
    };
    syn.update(&mut carry, &ob);
    assert_eq!(syn.ignored_exchanges(), 1);
}

#[test]
fn negative_delays_are_counted_and_erased() {
    let mut set = FridgeSet::new(&[spec(16, 1.0)], 2, WeightMode::Insertions).unwrap();
    set.on_request(5, 1000);
    assert_eq!(set.on_response(5, 999), ResponseOutcome::NegativeDelay { fridge: 0 });
    assert_eq!(set.on_response(5, 1001), ResponseOutcome::Unmatched { fridge: 0 });
}

/// A small mixed stream: handshakes and DNS (port 53 and 5353 servers), some TCP data (not
/// configured), through `update`.
fn stream(seed: u64, n: usize) -> Vec<(FlowKey, u64, Exchange)> {
    use rand::Rng;
    let mut r = crate::sim::rng(seed);
    let mut out = Vec::new();
    let mut pending: Vec<(u64, FlowKey, Exchange)> = Vec::new();
    let mut ts = 0u64;
    for i in 0..n as u64 {
        ts += r.random_range(100..2000);
        let client = std::net::Ipv4Addr::from(0x0a00_0000 | (r.random::<u32>() & 0xffff));
        let (kind, sport) = match r.random_range(0..10) {
            0..=4 => (ExchangeKind::TcpHandshake, 443),
            5..=7 => (ExchangeKind::Dns, 53),
            8 => (ExchangeKind::Dns, 5353),
            _ => (ExchangeKind::TcpData, 80),
        };
        let req = FlowKey::new(client.into(), "192.0.2.1".parse().unwrap(), 40000, sport, 6);
        let id = hash::mix64(i ^ seed);
        out.push((req, ts, Exchange { kind, role: Role::Request, id }));
        if r.random::<f64>() < 0.6 {
            let d = r.random_range(1_000..5_000_000);
            pending.push((ts + d, req.reversed(), Exchange { kind, role: Role::Response, id }));
        }
    }
    for (t, f, e) in pending {
        out.push((f, t, e));
    }
    out.sort_by_key(|(_, t, e)| (*t, e.role == Role::Response));
    out
}

fn test_config() -> FridgeConfig {
    FridgeConfig {
        kinds: vec![
            KindConfig { kind: ExchangeKind::TcpHandshake, fridges: vec![spec(64, 0.5), spec(64, 0.125)] },
            KindConfig { kind: ExchangeKind::Dns, fridges: vec![spec(128, 1.0)] },
        ],
        subsets: SubsetRule::ServerPort { ports: vec![53, 443] },
        report_thresholds_ns: vec![1_000_000],
        ..FridgeConfig::default()
    }
}

fn feed(syn: &mut FridgeSynopsis, carry: &mut FridgeCarry, events: &[(FlowKey, u64, Exchange)]) {
    for (flow, ts_ns, ex) in events {
        let ob = Observation {
            ts_ns: *ts_ns,
            flow,
            flow_hash: 0,
            identity: 0,
            exchange: Some(*ex),
            encap: crate::packet::Encap::NONE,
        };
        syn.update(carry, &ob);
    }
}

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

#[test]
fn report_of_an_exact_histogram() {
    // p = 1, plenty of slots, every request answered before the next: every weight is 1, so
    // the report is the plain binned distribution of the delays.
    let cfg = FridgeConfig {
        report_thresholds_ns: vec![3_000_000],
        ..FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(1 << 12, 1.0)])
    };
    let mut syn = FridgeSynopsis::new(&cfg).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    let flow = FlowKey::default();
    let mut ts = 0;
    for i in 0..1000u64 {
        let d = 1_000_000 + 4_000 * i; // 1 ms … 5 ms, uniform
        for (role, t) in [(Role::Request, ts), (Role::Response, ts + d)] {
            let ob = Observation {
                ts_ns: t,
                flow: &flow,
                flow_hash: 0,
                identity: 0,
                exchange: Some(Exchange { kind: ExchangeKind::Dns, role, id: i }),
                encap: crate::packet::Encap::NONE,
            };
            syn.update(&mut carry, &ob);
        }
        ts += d + 1;
    }
    let r = estimate(&syn);
    let all = &r.kinds[0].all;
    assert_eq!(all.samples, 1000);
    let pairs = all.estimated_pairs.as_ref().unwrap();
    assert_eq!(pairs.value, 1000.0);
    // The median of a uniform 1–5 ms is 3 ms; the binned estimate interpolates log-linearly
    // inside a bin of width 2^(1/4) (19 %), so allow that bin's width.
    let p50 = all.p50_ns.as_ref().unwrap();
    assert!((p50.value / 3e6).log2().abs() < 0.25, "{p50:?}");
    let ci = p50.interval.unwrap();
    assert!(ci.low <= p50.value && p50.value <= ci.high);
    // Weights are all 1: Σc(c−1) = 0, so the intervals collapse to the point.
    assert_eq!(ci.low, ci.high);
    let above = all.above[0].fraction_above.as_ref().unwrap();
    assert!((above.value - 0.5).abs() < 0.05, "{above:?}");
    assert_eq!(r.kinds[0].diagnostics.counters.requests, 1000);
    // Nothing measured → NoEstimate, never NaN.
    let empty = estimate(&FridgeSynopsis::new(&cfg).unwrap());
    assert!(empty.kinds[0].all.p50_ns.is_err());
    assert!(serde_json::to_string(&empty).is_ok());
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

use crate::synopsis::estimate::Measured;

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
