//! The report's quantile rule against exact quantiles of generated delays (issue 19): a point
//! mass, and heavy-tailed delays at a small and a large count, through `update`, the encoding
//! and `estimate` with the default histogram. The fridge is sized so nothing is evicted
//! (p = 1, 2¹⁶ slots, at most a handful of requests outstanding below p99.9), so every
//! weight is 1 within 10⁻⁴ and the only error left is the rule's.

use super::super::distribution::{Quantiles as _, WeightedSamples};
use super::super::report::{DistributionReport, PlainMeasured};
use super::*;
use rand::Rng;

/// Spacing of requests: one every 1 ms, so the outstanding requests behind a delay d number
/// d/1 ms (≪ 2¹⁶ slots for every delay the tests ask about).
const REQUEST_GAP_NS: u64 = 1_000_000;

/// Feeds request i at i·gap and its response `delays[i]` later into a fresh default synopsis
/// (one kind, one fridge of 2¹⁶ slots, p = 1) and returns the decoded synopsis's report.
fn report_of(delays: &[u64]) -> DistributionReport {
    let cfg = FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(1 << 16, 1.0)]);
    let mut syn = FridgeSynopsis::new(&cfg).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    let flow = FlowKey::default();
    let mut events: Vec<(FlowKey, u64, Exchange)> = Vec::new();
    for (i, d) in delays.iter().enumerate() {
        let (ts, id) = (i as u64 * REQUEST_GAP_NS, hash::mix64(i as u64 + 1));
        events.push((flow, ts, Exchange { kind: ExchangeKind::Dns, role: Role::Request, id }));
        events.push((flow, ts + d, Exchange { kind: ExchangeKind::Dns, role: Role::Response, id }));
    }
    events.sort_by_key(|(_, t, e)| (*t, e.role == Role::Response));
    feed(&mut syn, &mut carry, &events);
    let decoded = FridgeSynopsis::decode(&cfg, &syn.encode()).unwrap();
    let mut r = estimate(&decoded);
    r.kinds.remove(0).all
}

/// |log2(estimate / truth)| at p50, p90, p95, p99.
fn log2_errors(r: &DistributionReport, delays: &[u64]) -> [(f64, f64); 4] {
    let truth = WeightedSamples::unit(delays.iter().map(|&d| d as f64)).unwrap();
    let got = [(0.5, &r.p50_ns), (0.9, &r.p90_ns), (0.95, &r.p95_ns), (0.99, &r.p99_ns)];
    got.map(|(q, m)| (q, (m.as_ref().unwrap().value / truth.quantile(q)).log2().abs()))
}

/// Pareto delays (scale 20 µs, shape α): heavy-tailed, every moment above α infinite.
fn pareto(seed: u64, n: usize, alpha: f64) -> Vec<u64> {
    let mut r = crate::sim::rng(seed);
    (0..n).map(|_| (20_000.0 * (1.0 - r.random::<f64>()).powf(-1.0 / alpha)).min(5e9) as u64).collect()
}

#[test]
fn a_point_mass_comes_back_exact() {
    // The bound is |log2| ≤ 0.02; the rule gives 0: every sample of the bin is at its
    // smallest = largest delay. Without the extremes the answer is the interpolated bin
    // (up to 1/16 octave off at 16 bins per octave, 1/4 at the old 4).
    for v in [41_700u64, 1_000_003, 763_000_000] {
        let r = report_of(&vec![v; 500]);
        for (q, e) in log2_errors(&r, &vec![v; 500]) {
            assert!(e <= 1e-12, "point mass at {v} ns: p{q} off by {e} in log2");
        }
    }
}

#[test]
fn heavy_tailed_quantiles_stay_within_one_bin_and_interpolate_gaps() {
    // Bound: every sample of a bin lies between the bin's smallest and largest delay, inside
    // one bin of width 2^(1/16); the rule puts a quantile inside a bin between those, and in a
    // gap between bins it interpolates between the neighbouring samples exactly as the
    // samples' CDF does (all weights are 1 here). So |log2| ≤ 1/16 wherever the quantile
    // falls. With 299 samples the tail has gaps of several bins, where the old rule jumped
    // to the next non-empty bin (issue 19 saw 1.9 at p99).
    let bound = 1.0 / f64::from(HistogramConfig::default().bins_per_octave);
    for (seed, n, alpha) in [(1, 299, 1.1), (2, 299, 0.8), (3, 20_000, 1.1)] {
        let delays = pareto(seed, n, alpha);
        let r = report_of(&delays);
        assert_eq!(r.samples, n as u64, "nothing may be evicted for this oracle to hold");
        for (q, e) in log2_errors(&r, &delays) {
            assert!(e <= bound, "seed {seed}, {n} samples, α {alpha}: p{q} off by {e} > {bound}");
        }
    }
}

#[test]
fn quantiles_serialise_as_plain_value_or_error() {
    let r = report_of(&[5_000, 6_000, 7_000]);
    let j = serde_json::to_value(&r).unwrap();
    // The samples' CDF through knots (5 000, 1/3), (6 000, 2/3), (7 000, 1): the median is 5 500.
    assert_eq!(j["p50_ns"]["value"], 5_500.0);
    assert_eq!(j["p50_ns"]["samples"], 3);
    assert!(j["p50_ns"].get("Ok").is_none() && j["p50_ns"].get("error").is_none());
    let none: crate::synopsis::estimate::Measured<crate::synopsis::estimate::Estimate> =
        Err(crate::synopsis::estimate::NoEstimate::NoPackets);
    let j = serde_json::to_value(PlainMeasured(&none)).unwrap();
    assert_eq!(j, serde_json::json!({ "value": null, "error": { "reason": "no_packets" } }));
}

#[test]
fn extremes_outside_their_bin_are_refused() {
    let cfg = FridgeConfig::single_kind(ExchangeKind::Dns, vec![spec(16, 1.0)]);
    let mut syn = FridgeSynopsis::new(&cfg).unwrap();
    let mut carry = FridgeSynopsis::new_carry(&cfg);
    let flow = FlowKey::default();
    let ex = |role, id| Exchange { kind: ExchangeKind::Dns, role, id };
    // Two samples, 5 000 and 5 010 ns, in one bin: its extremes may differ.
    let events = [
        (flow, 0, ex(Role::Request, 9)),
        (flow, 10, ex(Role::Request, 10)),
        (flow, 5_000, ex(Role::Response, 9)),
        (flow, 5_020, ex(Role::Response, 10)),
    ];
    feed(&mut syn, &mut carry, &events);
    let mut bytes = syn.encode();
    assert!(FridgeSynopsis::decode(&cfg, &bytes).is_ok());
    // The last 16 bytes are the only bin's extremes: move the largest to the next octave.
    let at = bytes.len() - 8;
    bytes[at..].copy_from_slice(&10_000u64.to_le_bytes());
    assert!(matches!(
        FridgeSynopsis::decode(&cfg, &bytes),
        Err(DecodeError::Invalid { field: "fridge.bin_extremes", .. })
    ));
}
