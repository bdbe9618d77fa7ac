//! The report of an exact histogram (every weight 1): quantiles, intervals and fractions
//! above a threshold; nothing measured gives no estimate, never NaN.

use super::*;

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
