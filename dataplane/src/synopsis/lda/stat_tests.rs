//! Seeded statistical tests at CI size against the ground truth of simulated segments
//! (`segment`), with Weibull and Pareto delays and uniform and bursty loss. Every tolerance is a
//! number of standard errors from the spec's formulas (§4.4, §4.5), written next to it. The
//! full-size (N = 5M) reproduction of the paper's claims is `examples/lda_repro.rs`.

use super::segment::{GroundTruth, SegmentPair, SegmentSim, feed};
use super::sizing::{expected, samples_lower_bound, std_dev_relative_std_sampled};
use super::*;
use crate::sim::{DelayModel, LossModel};
use crate::synopsis::Synopsis;

/// Delays of the paper's evaluation in picoseconds: mean 0.2 µs.
const MEAN_PS: f64 = 200_000.0;
const WEIBULL_06: DelayModel = DelayModel::Weibull { shape: 0.6, mean: MEAN_PS };
const WEIBULL_08: DelayModel = DelayModel::Weibull { shape: 0.8, mean: MEAN_PS };
const PARETO_3: DelayModel = DelayModel::Pareto { shape: 3.0, mean: MEAN_PS };

fn segment(packets: u64, delay: DelayModel, loss: LossModel, seed: u64) -> SegmentSim {
    SegmentSim { packets, delay, loss, start_ts: 1 << 30, gap: 1_000, seed }
}

fn loss_rate(loss: LossModel) -> f64 {
    match loss {
        LossModel::None => 0.0,
        LossModel::Uniform { rate } | LossModel::Bursty { rate, .. } => rate,
    }
}

/// One trace, one LDA pair per config; returns the ground truth and the reports.
fn run(sim: SegmentSim, configs: &[LdaConfig]) -> (GroundTruth, Vec<LdaReport>) {
    let mut pairs: Vec<SegmentPair> = configs
        .iter()
        .map(|c| SegmentPair { sender: Lda::new(c).unwrap(), receiver: Lda::new(c).unwrap() })
        .collect();
    let truth = feed(sim.packets().unwrap(), &mut pairs);
    let reports = pairs.iter().map(|p| estimate(&p.sender, &p.receiver).unwrap()).collect();
    (truth, reports)
}

/// A single bank of `rows` tuned to the loss rate it will see, α = 0.5, for each seed.
fn tuned_single(rows: u32, packets: u64, rate: f64, seeds: std::ops::Range<u64>) -> Vec<LdaConfig> {
    seeds
        .map(|s| {
            LdaConfig::tuned(packets, &[BankTarget { rows, loss_rate: rate }], DEFAULT_ALPHA, s).unwrap()
        })
        .collect()
}

fn two_banks(packets: u64, seeds: std::ops::Range<u64>) -> Vec<LdaConfig> {
    let targets = [BankTarget { rows: 512, loss_rate: 0.005 }, BankTarget { rows: 512, loss_rate: 0.1 }];
    seeds.map(|s| LdaConfig::tuned(packets, &targets, DEFAULT_ALPHA, s).unwrap()).collect()
}

/// Relative standard deviation of σ̂ for one report: the spec's (1 + 1/CV²)/sqrt(2 B_eff)
/// (§4.4) with the sampling of the squared delays added (sizing::std_dev_relative_std_sampled).
fn sd_rel_std(truth: &GroundTruth, r: &LdaReport) -> f64 {
    std_dev_relative_std_sampled(
        truth.cv(),
        r.effective_buckets,
        truth.fourth_moment_ratio(),
        r.collapsed_samples as f64,
    )
}

#[test]
fn effective_sample_size_matches_its_expectation() {
    // E[S] = Σ_j p_j R (1 − p_j/m_j)^L (spec §4.5). Averaged over K hash seeds on one trace,
    // the mean of S must be within 4 standard errors sd(S)/√K, sd(S) from
    // sizing::samples_variance (Poissonised, slightly conservative).
    let n = 400_000;
    let k = 8;
    for (loss, configs) in [
        (LossModel::Uniform { rate: 0.01 }, tuned_single(1024, n, 0.01, 0..k)),
        (LossModel::Uniform { rate: 0.001 }, two_banks(n, 100..100 + k)),
    ] {
        let (truth, reports) = run(segment(n, WEIBULL_06, loss, 1), &configs);
        let e = expected(&configs[0], truth.received, truth.lost());
        let mean_s = reports.iter().map(|r| r.samples as f64).sum::<f64>() / k as f64;
        let tol = 4.0 * e.samples_std / (k as f64).sqrt();
        assert!((mean_s - e.samples).abs() <= tol, "{loss:?}: mean S {mean_s} vs E[S] {} ± {tol}", e.samples);
        // Usable cells: binomial-like, sd ≤ sqrt(cells/4); 4 standard errors over K.
        let mean_u = reports.iter().map(|r| r.usable_cells as f64).sum::<f64>() / k as f64;
        let tol_u = 4.0 * (configs[0].total_cells() as f64 / 4.0).sqrt() / (k as f64).sqrt();
        assert!((mean_u - e.usable_cells).abs() <= tol_u, "usable {mean_u} vs {}", e.usable_cells);
        let mean_b = reports.iter().map(|r| r.usable_buckets as f64).sum::<f64>() / k as f64;
        assert!((mean_b - e.usable_buckets).abs() <= tol_u, "buckets {mean_b} vs {}", e.usable_buckets);
    }
    // Single bank with L ≥ m: the average S beats the paper's bound (2), ≈ 1.2× it (spec §7.2).
    let (truth, reports) =
        run(segment(n, WEIBULL_06, LossModel::Uniform { rate: 0.02 }, 2), &tuned_single(512, n, 0.02, 0..k));
    let bound = samples_lower_bound(512, DEFAULT_ALPHA, truth.received, (n as f64 * 0.02) as u64);
    let mean_s = reports.iter().map(|r| r.samples as f64).sum::<f64>() / k as f64;
    assert!(mean_s > 1.1 * bound, "{mean_s} vs bound {bound}");
}

#[test]
fn mean_delay_is_within_standard_errors_of_the_truth() {
    // D is the mean of S packets' delays (spec §4.2), so |D − μ| ≤ 4 · CV·μ/√S, with μ and CV
    // of the received packets from the ground truth and S from the report (4 standard errors:
    // a Gaussian excursion that large has probability 6e-5 per run).
    let n = 300_000;
    let mut worst: f64 = 0.0;
    for (t, delay) in [WEIBULL_06, PARETO_3].into_iter().enumerate() {
        for (u, loss) in [
            LossModel::Uniform { rate: 0.001 },
            LossModel::Uniform { rate: 0.05 },
            LossModel::Bursty { rate: 0.01, mean_burst: 100.0 },
        ]
        .into_iter()
        .enumerate()
        {
            let seed = 10 * t as u64 + u as u64;
            let mut configs = tuned_single(1024, n, loss_rate(loss), seed..seed + 3);
            configs.extend(two_banks(n, seed + 50..seed + 52));
            let (truth, reports) = run(segment(n, delay, loss, seed), &configs);
            let (mu, cv) = (truth.mean(), truth.cv());
            for r in &reports {
                let d = r.mean_delay.clone().unwrap();
                let se = cv * mu / (r.samples as f64).sqrt();
                let z = (d.value - mu).abs() / se;
                worst = worst.max(z);
                assert!(
                    z <= 4.0,
                    "{delay:?} {loss:?}: D {} vs μ {mu}, {z:.2} standard errors (S = {})",
                    d.value,
                    r.samples
                );
                // Every point's interval is D ± 3.035 σ̂/√S.
                let iv = d.interval.unwrap();
                assert!(iv.low < d.value && d.value < iv.high);
            }
        }
    }
    // 30 runs: the largest of 30 |N(0,1)| is below 1 only with probability 0.683^30 ≈ 1e-5, so an
    // estimator whose errors are far smaller than its standard errors (e.g. one reading the
    // truth) would be suspicious too.
    assert!(worst > 1.0, "worst {worst}");
}

#[test]
fn std_dev_is_within_the_model_error_for_weibull() {
    // σ̂ relative error within 4 × sd_rel_std per run, and the mean signed error over the
    // runs of a config within 4 × (its average sd)/√K (σ̂ is nearly unbiased: F is unbiased,
    // D² adds σ²/S, the square root −relstd²/2, both well below these tolerances).
    let n = 300_000;
    let k = 6;
    for (i, (delay, loss)) in [
        (WEIBULL_06, LossModel::Uniform { rate: 0.001 }),
        (WEIBULL_06, LossModel::Bursty { rate: 0.01, mean_burst: 100.0 }),
        (WEIBULL_08, LossModel::Uniform { rate: 0.01 }),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = 200 + 10 * i as u64;
        let (truth, reports) =
            run(segment(n, delay, loss, seed), &tuned_single(1024, n, loss_rate(loss), seed..seed + k));
        let sigma = truth.std_dev();
        let (mut bias, mut avg_sd) = (0.0, 0.0);
        for r in &reports {
            let s = r.std_dev.clone().unwrap().value;
            let rel = (s - sigma) / sigma;
            let sd = sd_rel_std(&truth, r);
            assert!(!r.variance_clamped);
            assert!(rel.abs() <= 4.0 * sd, "{delay:?} {loss:?}: σ̂ {s} vs σ {sigma} ({rel:+.3}, sd {sd:.3})");
            bias += rel / k as f64;
            avg_sd += sd / k as f64;
        }
        assert!(
            bias.abs() <= 4.0 * avg_sd / (k as f64).sqrt(),
            "{delay:?}: mean error {bias:+.3}, sd {avg_sd:.3}"
        );
    }
}

#[test]
fn leading_zero_banks_estimate_as_well() {
    // The hardware-style configuration (1/8 and 1/128 by leading zeros, 512 rows each) on a
    // 0.2% loss: same 4-standard-error bound on D as above, and the loss estimates.
    let n = 300_000;
    let loss = LossModel::Uniform { rate: 0.002 };
    let configs: Vec<LdaConfig> = (0..4)
        .map(|s| LdaConfig {
            banks: vec![BankConfig { rows: 512, p: 1.0 / 8.0 }, BankConfig { rows: 512, p: 1.0 / 128.0 }],
            select: BankSelect::LeadingZeros,
            ts_bits: 40,
            count_bits: 32,
            seed: s,
            max_negative_delay_ns: crate::synopsis::lda::DEFAULT_MAX_NEGATIVE_DELAY_NS,
            digest_bits: crate::synopsis::lda::DEFAULT_DIGEST_BITS,
        })
        .collect();
    let (truth, reports) = run(segment(n, WEIBULL_06, loss, 77), &configs);
    for r in &reports {
        let d = r.mean_delay.clone().unwrap().value;
        assert!((d - truth.mean()).abs() <= 4.0 * truth.cv() * truth.mean() / (r.samples as f64).sqrt());
        // The unsampled counters give the exact loss.
        assert_eq!(r.lost_packets, Some(truth.lost()));
        // Sampled loss rate: a binomial proportion over ~ΣS_A packets; 4 standard errors.
        let l = truth.lost() as f64 / n as f64;
        let sl = r.sampled_loss_rate.clone().unwrap();
        assert!(
            (sl.value - l).abs() <= 4.0 * (l * (1.0 - l) / sl.samples as f64).sqrt(),
            "{} vs {l}",
            sl.value
        );
        // Each bank sampled ≈ its effective p of the packets (binomial, 5 sd).
        for b in &r.banks {
            let e = b.p_effective * n as f64;
            assert!((b.sampled_sent as f64 - e).abs() <= 5.0 * e.sqrt(), "{} vs {e}", b.sampled_sent);
        }
    }
}

#[test]
fn the_98_percent_interval_covers_the_truth() {
    // Over K = 400 independent small segments (new trace and hash seed each), the interval
    // D ± sqrt(2 ln 100)·σ̂/√S must cover the true mean in at least 98% of runs minus
    // 3 binomial standard deviations: K·0.98 − 3·sqrt(K·0.98·0.02) ≈ 383.6 of 400.
    let k = 400u64;
    let n = 20_000;
    let mut covered = 0u64;
    let mut widths = 0.0;
    for seed in 0..k {
        let loss = LossModel::Uniform { rate: 0.01 };
        let cfg = tuned_single(128, n, 0.01, seed..seed + 1);
        let (truth, reports) = run(segment(n, WEIBULL_06, loss, 1_000 + seed), &cfg);
        let d = reports[0].mean_delay.clone().unwrap();
        let iv = d.interval.unwrap();
        covered += u64::from(iv.low <= truth.mean() && truth.mean() <= iv.high);
        widths += (iv.high - iv.low) / 2.0 / truth.mean() / k as f64;
    }
    let floor = k as f64 * 0.98 - 3.0 * (k as f64 * 0.98 * 0.02).sqrt();
    assert!(covered as f64 >= floor, "covered {covered} of {k} (floor {floor:.1})");
    // Not trivially wide either: with S ≈ 3.8k and CV 1.76 the half-width is ≈ 3.035·1.76/√3800
    // ≈ 8.7% of μ; allow a factor 1.5 either way.
    assert!(widths > 0.058 && widths < 0.13, "mean relative half-width {widths}");
}
