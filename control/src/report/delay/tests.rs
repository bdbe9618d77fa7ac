use super::*;
use crate::control_side::{RdaSegment, SegmentResult};
use crate::report::line::{
    FridgeLine, RdaDuplicates, RdaLoss, RdaReconciliation, RdaReportLine, SegmentLine, SegmentSides,
};
use rand::{Rng, SeedableRng};
use wirelat_dataplane::packet::ExchangeKind;
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::estimate::{ConfidenceInterval, NoEstimate};
use wirelat_dataplane::synopsis::fridge::report::{
    DistributionReport, KindDiagnostics, KindReport, SubsetReport,
};
use wirelat_dataplane::synopsis::fridge::{HistogramConfig, LogBins};
use wirelat_records::{Direction, FridgeRecord, Point, SegmentRecord};

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

/// The fridge-report histogram of `delays` on the default fridge bins, and the bins.
fn fridge_histogram(delays: &[f64]) -> (Vec<HistogramBin>, LogBins) {
    let bins = LogBins::new(&HistogramConfig::default());
    let mut counts = vec![0u64; bins.len()];
    for &d in delays {
        counts[bins.bin_of(d as u64)] += 1;
    }
    let hist = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(b, c)| bin(bins.low_ns(b), bins.high_ns(b), *c as f64))
        .collect();
    (hist, bins)
}

fn bin(low_ns: u64, high_ns: Option<u64>, pairs: f64) -> HistogramBin {
    HistogramBin { low_ns, high_ns, pairs, pairs_se: 0.0, samples: pairs.max(0.0) as u64 }
}

/// A distribution report with only a histogram (the metrics read nothing else).
fn distribution(histogram: Vec<HistogramBin>) -> DistributionReport {
    let none = || Err(NoEstimate::NoPackets);
    DistributionReport {
        samples: 0,
        estimated_pairs: none(),
        p50_ns: none(),
        p90_ns: none(),
        p95_ns: none(),
        p99_ns: none(),
        above: Vec::new(),
        histogram,
    }
}

/// A `fridge_quantiles` line of `point` (id `point_id`) for `kind` with this histogram and
/// these subsets' histograms.
fn fridge_line(
    point: Point,
    point_id: u32,
    kind: ExchangeKind,
    all: Vec<HistogramBin>,
    subsets: Vec<(&str, Vec<HistogramBin>)>,
) -> Line {
    let report = KindReport {
        kind,
        all: distribution(all),
        subsets: subsets
            .into_iter()
            .map(|(name, h)| SubsetReport { subset: name.to_owned(), distribution: distribution(h) })
            .collect(),
        diagnostics: KindDiagnostics {
            counters: Default::default(),
            request_rate_per_s: None,
            combination: "model_weights",
            weight: "insertions",
            fridges: Vec::new(),
            clamped_quantiles: 0,
        },
    };
    Line::FridgeQuantiles(FridgeLine {
        record: FridgeRecord { point, kind, epoch_first: 0, epoch_last: 0, quantiles: Vec::new() },
        point_id,
        samples: 0,
        estimated_pairs: Err(NoEstimate::NoPackets),
        report: Box::new(report),
    })
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
        let line = fridge_line(Point::A, 1, ExchangeKind::Dns, hist, vec![]);
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

/// An RDA `segment` line of `segment`: mean `mean_ns` ± 5 ns, std-dev 7 ns, 100 packets
/// sent and `lost` lost (`None`: unknown).
fn segment_line(segment: u32, mean_ns: f64, lost: Option<u64>) -> Line {
    let interval = Some(ConfidenceInterval { level: 0.98, low: mean_ns - 5.0, high: mean_ns + 5.0 });
    let mean = Estimate { value: mean_ns, samples: 10, interval };
    let sd = Estimate { value: 7.0, samples: 10, interval: None };
    let loss = RdaLoss {
        sent: 100,
        received: 100 - lost.unwrap_or(0) as i64,
        lost,
        lost_bounds: [lost.unwrap_or(0), lost.unwrap_or(100)],
        rate_bounds: None,
        reordered: 0,
        rate: lost.map(|l| l as f64 / 100.0),
        reason: None,
        duplicates: RdaDuplicates {
            sender_ids: 0,
            sender_packets: 0,
            receiver_ids: 0,
            receiver_packets: 0,
            one_sided: 0,
        },
    };
    let report = RdaReportLine {
        mean_ns: Ok(mean),
        std_dev_ns: Ok(sd),
        bucket_moment_std_dev_ns: Ok(sd),
        collapsed_std_dev_ns: Ok(sd),
        variance_ns2: Some(49.0),
        variance_clamped: false,
        useful_weight: 10,
        useful_buckets: 1,
        total_buckets: 1,
        collapsed_pairs: 0,
        sender_packets: 100,
        receiver_packets: loss.received,
        reconciliation: RdaReconciliation {
            complete: lost.is_some(),
            lost: lost.unwrap_or(0) as usize,
            reordered: 0,
            unconfirmed: 0,
            excluded_duplicates: 0,
            decoded: 0,
            undecoded_lower_bound: 0,
            residual_buckets: 0,
            rejected_candidates: 0,
            repeated_candidates: 0,
            pops: 0,
            iteration_cap_hit: false,
        },
        process: None,
    };
    Line::Segment(SegmentLine {
        record: SegmentRecord {
            synopsis: SynopsisKind::Rda,
            direction: Direction::Forward,
            epoch: 1,
            mean_ns: Some(mean),
            std_dev_ns: Some(sd),
        },
        sides: SegmentSides { segment, upstream: 1, downstream: 2, complete: true, absent: Vec::new() },
        result: SegmentResult::Rda(RdaSegment { loss: Box::new(loss), report: Box::new(report) }),
        missing: None,
    })
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
    let l = "{segment=\"10\",synopsis=\"rda\"}";
    has("# TYPE wirelat_segment_delay_seconds histogram\n");
    value(&format!("wirelat_segment_delay_seconds_count{l}"), 3.0);
    value(&format!("wirelat_segment_delay_seconds_sum{l}"), 120e-6);
    value("wirelat_segment_delay_seconds_bucket{segment=\"10\",synopsis=\"rda\",le=\"5e-05\"}", 3.0);
    value("wirelat_segment_delay_seconds_bucket{segment=\"10\",synopsis=\"rda\",le=\"2e-05\"}", 0.0);
    value(&format!("wirelat_segment_delay_latest_seconds{l}"), 40e-6);
    value(
        "wirelat_segment_delay_latest_seconds_interval{segment=\"10\",synopsis=\"rda\",bound=\"low\"}",
        39.995e-6,
    );
    value(
        "wirelat_segment_delay_latest_seconds_interval{segment=\"10\",synopsis=\"rda\",bound=\"high\"}",
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
    assert!(m.render().contains("wirelat_segment_lost_packets_total{segment=\"0\",synopsis=\"rda\"} 1\n"));
}

#[test]
fn subsets_get_their_own_family_and_bad_input_is_ignored() {
    let m = Arc::new(DelayMetrics::default());
    // Bins no histogram can take (NaN or negative pairs) are skipped; so are lines the metrics
    // do not read.
    let hist = vec![
        bin(1024, Some(2048), 10.4),
        bin(1 << 36, None, 2.0),
        bin(4096, Some(8192), f64::NAN),
        bin(5, Some(9), -3.0),
    ];
    let line = fridge_line(
        Point::B,
        2,
        ExchangeKind::TcpHandshake,
        hist.clone(),
        vec![("client 192.0.2.0/24", hist)],
    );
    let failed =
        Line::EpochSummary(crate::report::line::EpochSummary::Failed(crate::report::line::GroupFailure {
            synopsis: SynopsisKind::Lda,
            scope: crate::report::line::ScopeId::Segment(3),
            direction: None,
            epoch_first: 0,
            epoch_last: 0,
            error: "x".into(),
        }));
    m.observe_records(&[line, Line::run(), failed]);
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
        segments: vec![("40".into(), "rda".into())],
    });
    let t = m.render();
    for series in [
        "wirelat_fridge_delay_seconds_count{point=\"a\",point_id=\"1\",kind=\"dns\"} 0\n",
        "wirelat_fridge_delay_seconds_count{point=\"a\",point_id=\"3\",kind=\"dns\"} 0\n",
        "wirelat_fridge_subset_delay_seconds_count{point=\"a\",point_id=\"3\",kind=\"dns\",subset=\"other\"} 0\n",
        "wirelat_segment_delay_seconds_count{segment=\"40\",synopsis=\"rda\"} 0\n",
        "wirelat_segment_sent_packets_total{segment=\"40\",synopsis=\"rda\"} 0\n",
        "wirelat_segment_lost_packets_total{segment=\"40\",synopsis=\"rda\"} 0\n",
        "wirelat_segment_loss_unknown_epochs_total{segment=\"40\",synopsis=\"rda\"} 0\n",
    ] {
        assert!(t.contains(series), "{series} missing:\n{t}");
    }
    // No latest value is invented before an estimate.
    assert!(!t.contains("wirelat_segment_delay_latest_seconds{"), "{t}");
    m.observe_records(&[fridge_line(
        Point::A,
        3,
        ExchangeKind::Dns,
        vec![bin(1024, Some(2048), 7.0)],
        vec![],
    )]);
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
