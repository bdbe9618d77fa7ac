//! Deterministic oracles of the fridge set (spec §3, §8 P2–P8, P21): M2 weights, x, W1 and
//! W2, erase semantics, duplicate requests, weight overflow, one slot refused, negative delays.

use super::*;

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
