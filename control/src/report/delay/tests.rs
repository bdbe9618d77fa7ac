use super::*;
use rand::{Rng, SeedableRng};
use serde_json::json;
use wirelat_dataplane::synopsis::fridge::{HistogramConfig, LogBins};

/// Index of the fixed bucket holding `seconds` (`BUCKETS_SECONDS.len()` for `+Inf`).
fn bucket(seconds: f64) -> usize {
    BUCKETS_SECONDS.iter().position(|&ub| seconds <= ub).unwrap_or(BUCKETS_SECONDS.len())
}

/// Seeded log-normal delays (median `median_ns`, log-sd `sigma`), sorted.
fn lognormal(seed: u64, n: usize, median_ns: f64, sigma: f64) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut v: Vec<f64> = (0..n)
        .map(|_| {
            // Box-Muller.
            let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            median_ns * (sigma * z).exp()
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The fridge-report `histogram` array of `delays` on the default fridge bins, and the bins.
fn fridge_histogram(delays: &[f64]) -> (Value, LogBins) {
    let bins = LogBins::new(&HistogramConfig::default());
    let mut counts = vec![0u64; bins.len()];
    for &d in delays {
        counts[bins.bin_of(d as u64)] += 1;
    }
    let arr: Vec<Value> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(b, c)| json!({"low_ns": bins.low_ns(b), "high_ns": bins.high_ns(b), "pairs": *c as f64, "samples": c}))
        .collect();
    (Value::Array(arr), bins)
}

/// Ground truth: for seeded log-normal delays binned like the fridge, every fixed bucket's
/// cumulative count differs from the true count at its bound by at most the pairs of the one
/// fridge bin the bound splits (the only mass placed by interpolation) plus one per bucket of
/// rounding; and each quantile from `histogram_quantile` lies within one fixed bucket of the
/// true quantile.
#[test]
fn fixed_buckets_match_the_true_distribution_within_the_split_bin() {
    for (seed, median, sigma) in [(1u64, 200_000.0, 1.0), (2, 3_000.0, 0.5), (3, 40_000_000.0, 1.5)] {
        let delays = lognormal(seed, 200_000, median, sigma);
        let (hist, bins) = fridge_histogram(&delays);
        let mut w = Weighted::default();
        let line = json!({"record": "fridge_quantiles", "point": "a", "point_id": 1, "kind": "dns",
                          "report": {"all": {"histogram": hist}, "subsets": []}});
        let m = Arc::new(DelayMetrics::default());
        m.observe_records(&[line]);
        w.merge(&m.fridge("a", "1", "dns", None).expect("the series"));
        let counts = w.counts();
        let mut cum = 0u64;
        for (i, &(ub, c)) in counts.iter().enumerate().take(BUCKETS_SECONDS.len()) {
            cum += c;
            let t_ns = ub * 1e9;
            let truth = delays.partition_point(|&d| d <= t_ns) as f64;
            let split = bins.bin_of(t_ns as u64);
            let split_mass = delays.iter().filter(|&&d| bins.bin_of(d as u64) == split).count() as f64;
            let err = (cum as f64 - truth).abs();
            assert!(
                err <= split_mass + (i + 1) as f64,
                "seed {seed} bucket le={ub}: {cum} vs true {truth} (split bin holds {split_mass})"
            );
        }
        for q in [0.5, 0.9, 0.99] {
            let truth = delays[((q * delays.len() as f64) as usize).min(delays.len() - 1)] * 1e-9;
            let got = w.prometheus_quantile(q).expect("a quantile");
            let (a, b) = (bucket(got) as i64, bucket(truth) as i64);
            eprintln!(
                "seed {seed} median {median} ns sigma {sigma}: q{q} true {truth:.3e} s, histogram_quantile {got:.3e} s"
            );
            assert!(
                (a - b).abs() <= 1,
                "seed {seed} q{q}: {got} s (bucket {a}) vs true {truth} s (bucket {b})"
            );
        }
        // Each bucket's count is rounded on its own: the total is off by half a pair per bucket at most.
        let total = counts.iter().map(|(_, c)| c).sum::<u64>() as f64;
        assert!((total - delays.len() as f64).abs() <= counts.len() as f64 / 2.0, "{total}");
    }
}

fn segment_line(segment: u32, mean_ns: f64, lost: Option<u64>) -> Value {
    json!({"record": "segment", "synopsis": "lda", "segment": segment, "epoch": 1,
           "mean_ns": {"value": mean_ns, "samples": 10, "interval": {"level": 0.98, "low": mean_ns - 5.0, "high": mean_ns + 5.0}},
           "std_dev_ns": {"value": 7.0, "samples": 10, "interval": null},
           "loss": {"sent": 100, "lost": lost}})
}

#[test]
fn segment_estimates_interval_and_loss_are_exposed() {
    let m = Arc::new(DelayMetrics::default());
    m.observe_records(&[segment_line(10, 30_000.0, Some(2))]);
    m.observe_records(&[segment_line(10, 50_000.0, Some(3)), segment_line(10, 40_000.0, None)]);
    let t = m.render();
    let has = |s: &str| assert!(t.contains(s), "{s} missing:\n{t}");
    let value = |series: &str, want: f64| {
        let got = t.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse::<f64>().ok());
        let got = got.unwrap_or_else(|| panic!("{series} missing:\n{t}"));
        assert!((got - want).abs() <= 1e-12 * want.abs(), "{series}: {got} vs {want}");
    };
    let l = "{segment=\"10\",synopsis=\"lda\"}";
    has("# TYPE wirelat_segment_delay_seconds histogram\n");
    value(&format!("wirelat_segment_delay_seconds_count{l}"), 3.0);
    value(&format!("wirelat_segment_delay_seconds_sum{l}"), 120e-6);
    value("wirelat_segment_delay_seconds_bucket{segment=\"10\",synopsis=\"lda\",le=\"5e-05\"}", 3.0);
    value("wirelat_segment_delay_seconds_bucket{segment=\"10\",synopsis=\"lda\",le=\"2e-05\"}", 0.0);
    value(&format!("wirelat_segment_delay_latest_seconds{l}"), 40e-6);
    value(
        "wirelat_segment_delay_latest_seconds_interval{segment=\"10\",synopsis=\"lda\",bound=\"low\"}",
        39.995e-6,
    );
    value(
        "wirelat_segment_delay_latest_seconds_interval{segment=\"10\",synopsis=\"lda\",bound=\"high\"}",
        40.005e-6,
    );
    value(&format!("wirelat_segment_jitter_latest_seconds{l}"), 7e-9);
    value(&format!("wirelat_segment_sent_packets_total{l}"), 200.0);
    value(&format!("wirelat_segment_lost_packets_total{l}"), 5.0);
    value(&format!("wirelat_segment_loss_unknown_epochs_total{l}"), 1.0);
    has("wirelat_peer_metric_series_dropped_total 0\n");
}

#[test]
fn label_sets_beyond_the_cap_are_dropped_and_counted() {
    let m = Arc::new(DelayMetrics::with_max_series(4));
    for seg in 0..10 {
        m.observe_records(&[segment_line(seg, 1000.0, Some(0))]);
    }
    // Each segment needs 4 series (delay, latest, jitter, loss): the first fills the cap.
    let t = m.render();
    assert!(t.contains("segment=\"0\""), "{t}");
    assert!(!t.contains("segment=\"1\""), "{t}");
    assert_eq!(m.dropped_series(), 9 * 4);
    assert!(t.contains("wirelat_peer_metric_series_dropped_total 36\n"), "{t}");
    // Existing series keep updating at the cap.
    m.observe_records(&[segment_line(0, 2000.0, Some(1))]);
    assert!(m.render().contains("wirelat_segment_lost_packets_total{segment=\"0\",synopsis=\"lda\"} 1\n"));
}

#[test]
fn subsets_get_their_own_family_and_bad_input_is_ignored() {
    let m = Arc::new(DelayMetrics::default());
    let hist = json!([{"low_ns": 1024, "high_ns": 2048, "pairs": 10.4}, {"low_ns": 1u64 << 36, "high_ns": null, "pairs": 2.0},
                      {"low_ns": "x", "pairs": 1.0}, {"low_ns": 5, "high_ns": 9, "pairs": -3.0}]);
    let line = json!({"record": "fridge_quantiles", "point": "b", "point_id": 2, "kind": "tcp_handshake",
                      "report": {"all": {"histogram": hist.clone()},
                                 "subsets": [{"subset": "client 192.0.2.0/24", "distribution": {"histogram": hist}}]}});
    m.observe_records(&[line, json!({"record": "segment"}), json!(null), json!({"record": "flow"})]);
    let t = m.render();
    assert!(
        t.contains(
            "wirelat_fridge_delay_seconds_count{point=\"b\",point_id=\"2\",kind=\"tcp_handshake\"} 12\n"
        ),
        "{t}"
    );
    assert!(
        t.contains(
            "wirelat_fridge_delay_seconds_bucket{point=\"b\",point_id=\"2\",kind=\"tcp_handshake\",le=\"1e-06\"} 0\n"
        ),
        "{t}"
    );
    assert!(
        t.contains(
            "wirelat_fridge_delay_seconds_bucket{point=\"b\",point_id=\"2\",kind=\"tcp_handshake\",le=\"2e-06\"} 10\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("wirelat_fridge_delay_seconds_bucket{point=\"b\",point_id=\"2\",kind=\"tcp_handshake\",le=\"10\"} 10\n"),
        "{t}"
    );
    assert!(
        t.contains(
            "wirelat_fridge_delay_seconds_bucket{point=\"b\",point_id=\"2\",kind=\"tcp_handshake\",le=\"+Inf\"} 12\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("wirelat_fridge_subset_delay_seconds_count{point=\"b\",point_id=\"2\",kind=\"tcp_handshake\",subset=\"client 192.0.2.0/24\"} 12\n"),
        "{t}"
    );
}

/// The configuration's series exist at zero before any record (so the first group's counts
/// are an increase `rate()` sees); records then add to them, and other series still appear
/// as records bring them.
#[test]
fn declared_series_start_at_zero_and_records_add_to_them() {
    let m = Arc::new(DelayMetrics::default());
    m.declare(&Declared {
        points: vec![("a".into(), "1".into()), ("a".into(), "3".into())],
        fridge_kinds: vec!["dns".into()],
        fridge_subsets: vec!["server port 53".into(), "other".into()],
        segments: vec![("40".into(), "lda".into())],
    });
    let t = m.render();
    for series in [
        "wirelat_fridge_delay_seconds_count{point=\"a\",point_id=\"1\",kind=\"dns\"} 0\n",
        "wirelat_fridge_delay_seconds_count{point=\"a\",point_id=\"3\",kind=\"dns\"} 0\n",
        "wirelat_fridge_subset_delay_seconds_count{point=\"a\",point_id=\"3\",kind=\"dns\",subset=\"other\"} 0\n",
        "wirelat_segment_delay_seconds_count{segment=\"40\",synopsis=\"lda\"} 0\n",
        "wirelat_segment_sent_packets_total{segment=\"40\",synopsis=\"lda\"} 0\n",
        "wirelat_segment_lost_packets_total{segment=\"40\",synopsis=\"lda\"} 0\n",
        "wirelat_segment_loss_unknown_epochs_total{segment=\"40\",synopsis=\"lda\"} 0\n",
    ] {
        assert!(t.contains(series), "{series} missing:\n{t}");
    }
    // No latest value is invented before an estimate.
    assert!(!t.contains("wirelat_segment_delay_latest_seconds{"), "{t}");
    let hist = json!([{"low_ns": 1024, "high_ns": 2048, "pairs": 7.0}]);
    m.observe_records(&[json!({"record": "fridge_quantiles", "point": "a", "point_id": 3, "kind": "dns",
                               "report": {"all": {"histogram": hist}, "subsets": []}})]);
    let t = m.render();
    assert!(
        t.contains("wirelat_fridge_delay_seconds_count{point=\"a\",point_id=\"3\",kind=\"dns\"} 7\n"),
        "{t}"
    );
    assert!(
        t.contains("wirelat_fridge_delay_seconds_count{point=\"a\",point_id=\"1\",kind=\"dns\"} 0\n"),
        "{t}"
    );
    assert_eq!(m.dropped_series(), 0);
}
