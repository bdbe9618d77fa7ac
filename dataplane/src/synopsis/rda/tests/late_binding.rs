//! Late binding: m sized from the MinHash signatures, doubled on retry, capped on extreme
//! signatures.

use super::*;

#[test]
fn late_binding_sizes_from_minhash_and_decodes() {
    // n = 20,000, d = 600: the union's 4,096 smallest hashes hold X ≈ 4,096 · d/|S_A ∪ S_B| =
    // 4,096 · 600/20,300 ≈ 121 values seen at one point only; X is binomial (sd ≈ 11, i.e.
    // 9%), and d̂ moves with it: allow 4 sd, d̂ ∈ [380, 820]. Then m = max(1,024, ⌈3·d̂⌉).
    let cfg = RdaConfig::late_binding(2, 40_000);
    let t = sim::generate(&TraceSpec::paper(20_000, 600, 3)).unwrap();
    let a = point(&cfg, &t.sender);
    let b = point(&cfg, &t.receiver);
    assert!(a.banks().is_none(), "late binding keeps only the cache during the epoch");
    let out = run_local(&a, &b, Side::Sender, &PeelGuards::default());
    let d_hat = out.sizing.estimate.difference;
    assert!((380.0..820.0).contains(&d_hat), "{d_hat}");
    assert_eq!(out.sizing.buckets_per_bank, sizing::buckets_for(&cfg, d_hat));
    assert!(out.report.reconciliation.complete, "{:?}", out.attempts);
    assert!(out.attempts.len() <= 3);
    assert_eq!(out.report.mean_ns.unwrap().value, t.truth.mean_ns());
}

#[test]
fn late_binding_retries_with_doubled_m() {
    // m_min = 32 and a 16-value signature on 20,000 packets: d̂ is 0 or tiny, so the first
    // m is far below d = 300; each retry doubles m until the decode completes.
    let binding = Binding::LateBinding {
        min_buckets_per_bank: 32,
        max_buckets_per_bank: 1 << 16,
        slack: 0.0,
        max_attempts: 8,
        signature_len: 16,
    };
    let cfg = RdaConfig { binding, ..RdaConfig::late_binding(2, 40_000) };
    let t =
        sim::generate(&TraceSpec { lost: 150, reordered: 150, ..TraceSpec::paper(20_000, 300, 4) }).unwrap();
    let a = point(&cfg, &t.sender);
    let b = point(&cfg, &t.receiver);
    let out = run_local(&a, &b, Side::Sender, &PeelGuards::default());
    assert!(out.attempts.len() >= 2, "{:?}", out.attempts);
    for w in out.attempts.windows(2) {
        assert_eq!(w[1].buckets_per_bank, 2 * w[0].buckets_per_bank);
        assert!(!w[0].complete);
    }
    assert!(out.report.reconciliation.complete);
    assert_eq!(out.report.mean_ns.unwrap().value, t.truth.mean_ns());
    // With a single attempt the failure is reported, not hidden.
    let one = Binding::LateBinding {
        min_buckets_per_bank: 32,
        max_buckets_per_bank: 1 << 16,
        slack: 0.0,
        max_attempts: 1,
        signature_len: 16,
    };
    let cfg1 = RdaConfig { binding: one, ..cfg.clone() };
    let (a1, b1) = (point(&cfg1, &t.sender), point(&cfg1, &t.receiver));
    let out1 = run_local(&a1, &b1, Side::Sender, &PeelGuards::default());
    assert_eq!(out1.attempts.len(), 1);
    assert!(!out1.report.reconciliation.complete);
    assert!(out1.report.reconciliation.undecoded_lower_bound > 0);
    // The chosen m follows the signature estimate.
    let s = late::choose_buckets(&cfg, &a.signature(), &b.signature());
    assert_eq!(s.buckets_per_bank, out.attempts[0].buckets_per_bank);
}

#[test]
fn sizing_from_extreme_wire_signatures_does_not_panic() {
    let huge = MinHashSignature { set_size: u64::MAX, mins: vec![1, 2, 3] };
    let other = MinHashSignature { set_size: u64::MAX, mins: vec![4, 5, 6] };
    let cfg = RdaConfig::late_binding(2, 100);
    let s = late::choose_buckets(&cfg, &huge, &other);
    assert_eq!(s.buckets_per_bank, 1 << 20, "capped at m_max");
}
